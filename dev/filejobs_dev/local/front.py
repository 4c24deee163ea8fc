"""A lean HTTP/1.1 front for moto's WSGI app: the same app, served with less work per request.

moto server serves its app (Flask, moto's routing, its handlers) through werkzeug's development
server, built on `http.server`: headers parsed with the `email` package, a response written in
several pieces (so Nagle's algorithm holds the last one back until the first is acknowledged),
and each request wrapped in layers of generality the local stack never uses (TLS, reloading,
logging a line per request). Under load that was about a fifth of the DynamoDB emulator's time
(py-spy, 2026-12-02), in the one process whose requests run one at a time.

This front does only what the hosts' clients need, as werkzeug does it: it builds the same WSGI
environ (moto's preserved `x-amz-meta-` header names included), answers `Expect: 100-continue`,
reads `Content-Length` and chunked bodies, keeps connections alive, and writes each response in
one piece. Everything the app decides (routing, parsing, the answer) is moto's own.

Against werkzeug's threaded server (maintained, and moto's own dependency) serving the same app,
8 client threads sending a job's DynamoDB calls (bench/front_servers.py, median of 5,
2026-12-05): 562 requests/s against 435, and 1.10 ms of server CPU per request against 1.77.
So the front stays.
"""

from __future__ import annotations

import contextlib
import io
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
# A request line or header longer than this is refused (http.server's own bound).
MAX_LINE = 65536
MAX_HEADERS = 100
SERVER_SOFTWARE = "filejobs-local-front"


class BadRequestError(ValueError):
    """A request that is not HTTP/1.x as the front reads it."""


def _latin1(text: str) -> str:
    """A str as WSGI carries it: its UTF-8 bytes, one character per byte (PEP 3333)."""
    return text.encode().decode("latin-1")


def _read_line(stream: Any) -> bytes:
    line: bytes = stream.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise BadRequestError("line too long")
    return line


def _read_headers(stream: Any) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    while True:
        line = _read_line(stream)
        if line in (b"\r\n", b"\n", b""):
            return headers
        if len(headers) == MAX_HEADERS:
            raise BadRequestError("too many headers")
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise BadRequestError(f"malformed header line {line[:40]!r}")
        headers.append((name, value.strip()))


def _read_chunked(stream: Any) -> bytes:
    body = bytearray()
    while True:
        size_line = _read_line(stream).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise BadRequestError(f"bad chunk size {size_line[:20]!r}") from None
        if size == 0:
            _read_headers(stream)  # trailers, which moto does not read
            return bytes(body)
        body += stream.read(size)
        _read_line(stream)  # the CRLF after each chunk


@dataclass(frozen=True)
class Request:
    """An HTTP/1.x request as read off the connection."""

    method: str
    target: str  # the request line's, raw
    version: str
    headers: list[tuple[str, str]]
    body: bytes


def environ_for(
    request: Request, server: tuple[str, int], client: tuple[str, int]
) -> dict[str, Any]:
    """The WSGI environ werkzeug's server (with moto's request handler) makes of a request."""
    target, headers = request.target, request.headers
    url = urlsplit(target)
    path = f"/{url.netloc}{url.path}" if not url.scheme and url.netloc else url.path
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "SERVER_SOFTWARE": SERVER_SOFTWARE,
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": _latin1(unquote(path)),
        "QUERY_STRING": _latin1(url.query),
        "REQUEST_URI": _latin1(target),
        "RAW_URI": _latin1(target),
        "REMOTE_ADDR": client[0],
        "REMOTE_PORT": client[1],
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": request.version,
    }
    for name, value in headers:
        if "_" in name:
            continue  # WSGI cannot tell X_Foo from X-Foo: werkzeug drops them (moto, below)
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = f"HTTP_{key}"
        repeated = key.startswith("HTTP_") and key in environ
        environ[key] = f"{environ[key]},{value}" if repeated else value
    if url.scheme and url.netloc:
        environ["HTTP_HOST"] = url.netloc
    if any(name.lower() == "transfer-encoding" for name, _ in headers):
        environ["CONTENT_LENGTH"] = str(len(request.body))  # read whole, as werkzeug dechunks
        environ["wsgi.input_terminated"] = True
    _preserve_metadata_names(environ, headers)
    return environ


def _preserve_metadata_names(environ: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    """What moto's request handler adds to werkzeug's environ: S3 metadata header names with
    underscores, under their own spelling (moto.moto_server.werkzeug_app.MotoRequestHandler)."""
    from moto.core.request import (  # noqa: PLC0415 (the local stack's alone)
        PRESERVED_HEADER_NAMES_ENVIRON_KEY,
        environ_key_for_header,
        should_preserve_original_header_name,
    )

    dashed = {environ_key_for_header(name) for name, _ in headers if "_" not in name}
    names: dict[str, str] = {}
    values: dict[str, list[str]] = {}
    for name, value in headers:
        if not should_preserve_original_header_name(name):
            continue
        key = environ_key_for_header(name)
        if key in dashed:
            continue  # an underscored header never stands in for a dashed one
        names.setdefault(key, name)
        values.setdefault(key, []).append(value)
    for key, key_values in values.items():
        environ[key] = ",".join(key_values)
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = names


class _Connection(socketserver.StreamRequestHandler):
    server: Front

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError, TimeoutError):
            while self._one_request():
                pass

    def _one_request(self) -> bool:
        """Answers one request; whether the connection stays open for another."""
        try:
            request_line = _read_line(self.rfile)
            if not request_line:
                return False
            method, target, version = request_line.decode("latin-1").rstrip("\r\n").split(" ")
            if not version.startswith("HTTP/1."):
                raise BadRequestError(f"unsupported {version[:20]!r}")
            headers = _read_headers(self.rfile)
            body = self._body(headers)
        except (BadRequestError, ValueError, UnicodeDecodeError) as error:
            self._write("400 Bad Request", [("Content-Type", "text/plain")], str(error).encode())
            return False
        request = Request(method, target, version, headers, body)
        environ = environ_for(request, self.server.address, self.client_address)
        status, response_headers, content = self._call(environ)
        if method == "HEAD":
            content = b""
        self._write(status, response_headers, content, bodiless=method == "HEAD")
        connection = next((v.lower() for n, v in headers if n.lower() == "connection"), "")
        return version == "HTTP/1.1" and connection != "close"

    def _body(self, headers: list[tuple[str, str]]) -> bytes:
        lowered = {name.lower(): value for name, value in headers}
        if lowered.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in lowered.get("transfer-encoding", "").lower():
            return _read_chunked(self.rfile)
        length = lowered.get("content-length", "0") or "0"
        if not length.isdigit():
            raise BadRequestError(f"bad Content-Length {length[:20]!r}")
        body: bytes = self.rfile.read(int(length))
        return body

    def _call(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        started: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], None]:
            started[:] = [status, headers]
            return lambda _: None  # the legacy write(): moto's app returns its body instead

        try:
            result = self.server.app(environ, start_response)
            try:
                content = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:  # a 500 for the client, as werkzeug answers
            import traceback  # noqa: PLC0415

            traceback.print_exc()
            return "500 Internal Server Error", [("Content-Type", "text/plain")], b"error"
        return started[0], started[1], content

    def _write(
        self,
        status: str,
        headers: list[tuple[str, str]],
        content: bytes,
        *,
        bodiless: bool = False,
    ) -> None:
        lines = [f"HTTP/1.1 {status}", f"Server: {SERVER_SOFTWARE}"]
        names = set()
        for name, value in headers:
            names.add(name.lower())
            lines.append(f"{name}: {value}")
        if "content-length" not in names and not bodiless:
            lines.append(f"Content-Length: {len(content)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head + content)  # one write: no segment waits for another's ACK


class Front(socketserver.ThreadingTCPServer):
    """Serves `app` on `host:port`, a thread per connection (clients keep theirs open)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, app: WsgiApp, host: str, port: int) -> None:
        self.app = app
        super().__init__((host, port), _Connection)
        self.address: tuple[str, int] = self.server_address[:2]  # type: ignore[assignment]
        self._thread: threading.Thread | None = None

    def start(self) -> Front:
        self._thread = threading.Thread(target=self.serve_forever, name="front", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def moto_front(host: str, port: int) -> Front:
    """moto server's app (every service, moto's routing) behind this front, serving."""
    from moto.moto_server.werkzeug_app import (  # noqa: PLC0415 (the local stack's alone)
        DomainDispatcherApplication,
        create_backend_app,
    )

    refuse_cross_origin_requests()
    return Front(DomainDispatcherApplication(create_backend_app), host, port).start()


def refuse_cross_origin_requests() -> None:
    """moto server answers every origin (flask-cors, `Access-Control-Allow-Origin: *`), so any
    web page open in the developer's browser could read and write the local stack's buckets,
    queues and tables. Its own switch (MOTO_DISABLE_GLOBAL_CORS) is read once, when moto's
    settings are imported: set here on the module that reads it as each service's app is made,
    before any is."""
    from moto.moto_server import werkzeug_app  # noqa: PLC0415 (the local stack's alone)

    werkzeug_app.DISABLE_GLOBAL_CORS = True  # type: ignore[attr-defined]
