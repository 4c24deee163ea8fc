"""The tests' stand-in HTTP servers (an API Gateway, a presigned-URL host, a scripted API): a
handler that answers in one call and writes no access log, served on 127.0.0.1 only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler whose answers are one call each, and whose requests are not logged."""

    def send_body(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answer_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        typed = {"Content-Type": "application/json", **(headers or {})}
        self.send_body(status, json.dumps(body).encode(), typed)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` on a free port of 127.0.0.1, for the block: its base URL, with no slash."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
