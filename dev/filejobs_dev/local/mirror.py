"""A ClamAV definitions mirror on 127.0.0.1, for the local stack and the tests.

No official database can be downloaded on the machines this project is built and tested on, so
the definitions pipeline is exercised against this: a directory served over HTTP the way a
private mirror or a `DatabaseCustomURL` host serves it to freshclam (GET and HEAD, Last-Modified,
If-Modified-Since answered 304, single byte ranges), plus refusals a test can inject (429 with
Retry-After, as ClamAV's CDN rate-limits, or 403, as it blocks) for the next N requests or until
cleared.

`build_local_databases` writes the databases the local stack starts with; `add_hash_signature`
adds one later (the demo: a new signature is published, and a rescan finds a file the first
scan passed).

    with DefinitionsMirror(directory) as mirror:
        mirror.database_urls()   # ["http://127.0.0.1:PORT/filejobs-local.hdb", ...]
        mirror.refuse(429, count=3)
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

from filejobs.domain.definitions import CLAMAV_SUFFIXES

# The EICAR test file (eicar.org): every engine detects it, and it harms nothing.
EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
# ClamAV's own test files (Debian's clamav-testfiles), detected only by the official database
# otherwise: the local stack's signatures name one, so a real binary is found too.
TESTFILES = Path("/usr/share/clamav-testfiles")
HASH_DATABASE = "filejobs-local.hdb"
BODY_DATABASE = "filejobs-local.ndb"
# A body signature (.ndb) for the local stack: any file containing this marker is detected.
BODY_MARKER = b"FILEJOBS-LOCAL-TEST-SIGNATURE"
# What the mirror serves: ClamAV database files (a .yar is a YARA rule, never served to it).
DATABASE_SUFFIXES = CLAMAV_SUFFIXES


@dataclass(frozen=True)
class Refusal:
    status: int  # 429 or 403
    remaining: int | None  # requests still to refuse; None: until cleared
    retry_after: int | None  # seconds, sent as Retry-After


@dataclass(frozen=True)
class Served:
    """One request the mirror answered (tests read them to see what freshclam asked)."""

    method: str
    path: str
    status: int
    if_modified_since: str | None


class DefinitionsMirror:
    """`directory` served on http://127.0.0.1:PORT (port 0: a free one), in a thread."""

    def __init__(self, directory: Path, port: int = 0) -> None:
        self.directory = directory.resolve()
        self._lock = threading.Lock()
        self._refusal: Refusal | None = None
        self.served: list[Served] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def database_urls(self) -> list[str]:
        """The URL of every database file in the directory, for DatabaseCustomURL."""
        return [
            f"{self.url}/{path.name}"
            for path in sorted(self.directory.iterdir())
            if path.is_file() and path.suffix.lower() in DATABASE_SUFFIXES
        ]

    def start(self) -> DefinitionsMirror:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="definitions-mirror", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> DefinitionsMirror:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # --- refusals ----------------------------------------------------------------------------

    def refuse(self, status: int, count: int | None = None, retry_after: int | None = None) -> None:
        """Answer `status` (429 or 403) to the next `count` requests (None: until cleared)."""
        if status not in (403, 429):
            raise ValueError("the mirror refuses with 429 (rate limited) or 403 (blocked)")
        with self._lock:
            self._refusal = Refusal(status, count, retry_after)

    def clear_refusals(self) -> None:
        with self._lock:
            self._refusal = None

    def _take_refusal(self) -> Refusal | None:
        with self._lock:
            refusal = self._refusal
            if refusal is None:
                return None
            if refusal.remaining is not None:
                left = refusal.remaining - 1
                self._refusal = (
                    None if left <= 0 else Refusal(refusal.status, left, refusal.retry_after)
                )
            return refusal

    def _record(self, served: Served) -> None:
        with self._lock:
            self.served.append(served)

    def resolve(self, request_path: str) -> Path | None:
        """The file a request names, only ever directly inside the directory."""
        name = unquote(urlsplit(request_path).path).lstrip("/")
        if not name or "/" in name or "\\" in name or name.startswith("."):
            return None
        path = self.directory / name
        return path if path.is_file() else None


def _handler_for(mirror: DefinitionsMirror) -> type[BaseHTTPRequestHandler]:
    class MirrorRequest(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps freshclam's (libcurl's) connection open between its requests.
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            self._respond(body=body, since=self.headers.get("If-Modified-Since"))

        def _respond(self, *, body: bool, since: str | None) -> int:
            refusal = mirror._take_refusal()
            if refusal is not None:
                extra = {} if refusal.retry_after is None else {"Retry-After": refusal.retry_after}
                return self._send(refusal.status, b"refused by the test mirror\n", body, extra)
            path = mirror.resolve(self.path)
            if path is None:
                return self._send(404, b"not found\n", body)
            stat = path.stat()
            modified = int(stat.st_mtime)
            headers: dict[str, Any] = {
                "Last-Modified": email.utils.formatdate(modified, usegmt=True),
                "Accept-Ranges": "bytes",
            }
            if since is not None and _not_modified_since(modified, since):
                return self._send(304, b"", False, headers)
            data = path.read_bytes()
            ranged = _byte_range(self.headers.get("Range"), len(data))
            if ranged is None:
                return self._send(200, data, body, headers)
            start, end = ranged
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return self._send(206, data[start : end + 1], body, headers)

        def _send(
            self, status: int, data: bytes, body: bool, headers: dict[str, Any] | None = None
        ) -> int:
            # Recorded before the answer leaves: whoever got it finds it in `served`.
            since = self.headers.get("If-Modified-Since")
            mirror._record(Served(self.command, self.path, status, since))
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            if status != 304:
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body and status != 304:
                self.wfile.write(data)
            return status

        def log_message(self, format: str, *args: Any) -> None:
            return  # `served` records every request; stderr stays the functions'

    return MirrorRequest


def _not_modified_since(modified: int, header: str) -> bool:
    try:
        since = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return False  # an unreadable date: send the file, as a server must
    return modified <= int(since.timestamp())


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a single `bytes=a-b` range within the file, else None (whole)."""
    if not header or not header.startswith("bytes=") or "," in header or size == 0:
        return None
    first, _, last = header[len("bytes=") :].partition("-")
    try:
        if not first:  # "bytes=-N": the last N bytes
            return max(0, size - int(last)), size - 1
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return None
    return (start, end) if start <= end else None


# --- databases ---------------------------------------------------------------------------------


def hash_line(data: bytes, name: str) -> str:
    """ClamAV's MD5 hash signature (.hdb): md5:size:name."""
    return f"{hashlib.md5(data, usedforsecurity=False).hexdigest()}:{len(data)}:{name}\n"


def build_local_databases(directory: Path) -> list[Path]:
    """The databases the local stack's mirror starts with: EICAR (and clam.exe from
    clamav-testfiles, when installed) by MD5, and a body signature on BODY_MARKER."""
    directory.mkdir(parents=True, exist_ok=True)
    hashes = [hash_line(EICAR, "Filejobs.Local.EICAR")]
    clam_exe = TESTFILES / "clam.exe"
    if clam_exe.is_file():
        hashes.append(hash_line(clam_exe.read_bytes(), "Filejobs.Local.ClamExe"))
    hash_database = directory / HASH_DATABASE
    _write(hash_database, "".join(hashes))
    body_database = directory / BODY_DATABASE
    # Name:TargetType:Offset:HexSignature; target 0 is any file, offset * anywhere in it.
    _write(body_database, f"Filejobs.Local.Marker:0:*:{BODY_MARKER.hex()}\n")
    return [hash_database, body_database]


def add_hash_signature(
    directory: Path, data: bytes, name: str, *, modified_at: float | None = None
) -> Path:
    """Adds `data`'s MD5 signature to the local hash database. Its modification time becomes
    `modified_at` (epoch seconds; default now), moved past the second the file was last changed
    in, so a conditional fetch (If-Modified-Since, in whole seconds) sees the change."""
    path = directory / HASH_DATABASE
    before = path.stat().st_mtime if path.exists() else 0.0
    with path.open("a", encoding="ascii") as database:
        database.write(hash_line(data, name))
    later = max(time.time() if modified_at is None else modified_at, before + 2)
    os.utime(path, (later, later))
    return path


def _write(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="ascii")
    partial.replace(path)
