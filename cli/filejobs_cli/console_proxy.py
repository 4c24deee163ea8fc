"""`filejobs console`: a stack's operator console in your browser, signed in as you.

    filejobs console [--stack-name STACK] [--as operator|tenant:NAME] [--profile P] [--region R]
                     [--port N] [--no-browser]

With IAM auth (the deployed default) a browser cannot sign the API's requests (SigV4), so this
serves the console on 127.0.0.1 through a proxy that signs them: the page and its files are the
stack's own, fetched from its API; each API request the page makes is signed here with your
credentials, or the role --as assumes (client.py resolves the target), and sent on. No
credential reaches the browser. Without --stack-name it is the local stack's console (its bearer
token added here instead).

Only this run's page may use the proxy:
- it answers requests to its own address only (Host 127.0.0.1:PORT, so no DNS rebinding), sent
  from its own origin (an Origin header must be its own; a request another site's page makes,
  by Sec-Fetch-Site, is refused), and no CORS preflight: no other origin may call it;
- every API request must carry this run's secret (`Authorization: Bearer <secret>`), which the
  page keeps in its tab's sessionStorage. The browser is opened at a one-time link
  (`/console#handoff=...`), which the page trades once for the secret: the secret never appears
  on a command line (another user of the machine may read those), and a used link is worth
  nothing.

The console's shell (/console and its files) is served without the secret, as the API serves
it: it holds no data. `/console/config.json` is answered here: behind the proxy the page signs in
with the secret, whatever the stack's own API says.
"""

from __future__ import annotations

import argparse
import hmac
import json
import re
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
import webbrowser
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from filejobs_cli.client import CliError, Target, add_target_options
from filejobs_cli.commands import targeted

HOST = "127.0.0.1"
SHELL = re.compile(r"^/console(?:/[A-Za-z0-9._-]+)?$")
CONFIG_PATH = "/console/config.json"
SESSION_PATH = "/console/session"
HANDOFF_SECONDS = 300  # a one-time link not used within five minutes is worth nothing
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
# What of the page's request goes on to the API: never its cookies nor the secret.
FORWARDED_REQUEST_HEADERS = ("Accept", "Content-Type", "Idempotency-Key")
# What of the API's answer comes back to the page.
FORWARDED_RESPONSE_HEADERS = (
    "Content-Type",
    "Content-Security-Policy",
    "Cache-Control",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Idempotency-Key",
    "Idempotent-Replayed",
    "Retry-After",
    "Allow",
)
UPSTREAM_SECONDS = 30.0


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _json(status: int, document: Any) -> Answer:
    headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
    return Answer(status, headers, json.dumps(document).encode())


def _error(status: int, code: str, message: str) -> Answer:
    return _json(status, {"error": {"code": code, "message": message}})


class ConsoleProxy:
    """The console of `target` on 127.0.0.1:`port` (0: a free port), for this run's page only."""

    def __init__(self, target: Target, port: int = 0) -> None:
        self.target = target
        self.secret = secrets.token_urlsafe(32)
        self._handoff: str | None = secrets.token_urlsafe(24)
        self._handoff_until = time.monotonic() + HANDOFF_SECONDS
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((HOST, port), _handler(self))

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self._server.server_address[1]}"

    @property
    def handoff_url(self) -> str:
        """The one-time link the browser is opened at."""
        return f"{self.origin}/console#handoff={self._handoff or ''}"

    def start(self) -> ConsoleProxy:
        threading.Thread(target=self._server.serve_forever, name="console", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- one request ---------------------------------------------------------------------------

    def answer(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """The answer to one request of the browser (`headers` by any case of their names)."""
        named = {name.lower(): value for name, value in headers.items()}
        refusal = self.refusal(method, named)
        if refusal is not None:
            return refusal
        route = path.partition("?")[0]
        if route == CONFIG_PATH and method == "GET":
            return _json(200, {"sign_in": "token"})
        if route == SESSION_PATH and method == "POST":
            return self.hand_off(body)
        if not (method == "GET" and SHELL.match(route)) and not self.carries_secret(named):
            return _error(401, "unauthorized", "this console proxy wants its page's secret")
        return self.forward(method, path, named, body)

    def refusal(self, method: str, headers: Mapping[str, str]) -> Answer | None:
        """Why a request is not this run's page's, if it is not (`headers` lower-cased)."""
        if headers.get("host") != self.origin.removeprefix("http://"):
            return _error(403, "forbidden", "not addressed to this console proxy")
        origin = headers.get("origin")
        if origin is not None and origin != self.origin:
            return _error(403, "forbidden", "only the console's own page may use this proxy")
        if headers.get("sec-fetch-site", "same-origin") not in {"same-origin", "none"}:
            return _error(403, "forbidden", "only the console's own page may use this proxy")
        if method not in METHODS:
            return _error(405, "method_not_allowed", f"{method} is not served here")
        return None

    def carries_secret(self, headers: Mapping[str, str]) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), self.secret)

    def hand_off(self, body: bytes) -> Answer:
        """The secret, once, for the one-time link's handoff, within HANDOFF_SECONDS."""
        try:
            given = str(json.loads(body or b"{}").get("handoff") or "")
        except (ValueError, AttributeError):
            given = ""
        with self._lock:
            valid = (
                self._handoff is not None
                and time.monotonic() < self._handoff_until
                and hmac.compare_digest(given, self._handoff)
            )
            if valid:
                self._handoff = None  # used: the link is now worth nothing
        if not valid:
            return _error(401, "unauthorized", "this console link was used already or expired")
        return _json(200, {"token": self.secret})

    def forward(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """The request sent on to the API, signed as the target signs (SigV4, or the local
        stack's bearer token), with the page's own few headers; the API's answer."""
        url = self.target.api_url.rstrip("/") + path
        data = body or None
        sent = {
            name: headers[name.lower()]
            for name in FORWARDED_REQUEST_HEADERS
            if name.lower() in headers
        }
        try:
            sent.update(self.target.auth.headers(method, url, data))
        except CliError as error:
            return _error(502, "not_signed", error.message)
        # http(s) only: the URL is the target's, which client.py resolved and checked.
        request = urllib.request.Request(url, data=data, headers=sent, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=UPSTREAM_SECONDS) as answer:  # noqa: S310
                return _relayed(answer.status, answer.headers, answer.read())
        except urllib.error.HTTPError as error:
            return _relayed(error.code, error.headers, error.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            return _error(
                502, "unreachable", f"{self.target.description} did not answer ({reason})"
            )


def _relayed(status: int, headers: Any, body: bytes) -> Answer:
    kept = {name: str(headers[name]) for name in FORWARDED_RESPONSE_HEADERS if headers[name]}
    return Answer(status, kept, body)


def _handler(proxy: ConsoleProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def __getattr__(self, name: str) -> Any:
            # http.server calls do_<METHOD>: every method gets the proxy's answer (a refusal
            # for those it does not serve), never http.server's own HTML.
            if name.startswith("do_"):
                return self._answer
            raise AttributeError(name)

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            answer = proxy.answer(self.command, self.path, dict(self.headers.items()), body)
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the paths carry ids; the terminal is for the link

    return Handler


# --- the command ---------------------------------------------------------------------------------


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    command = commands.add_parser(
        "console",
        help="open the operator console in your browser, its requests signed here (IAM auth)",
        description="Serves a stack's operator console on 127.0.0.1 and opens it in your browser, "
        "signed in as you: each API request of the page is signed here (SigV4, with your "
        "credentials or the role --as assumes), and no credential reaches the browser. The "
        "browser is opened at a one-time link. Ctrl-C stops it.",
    )
    command.add_argument(
        "--port", type=port_number, default=0, help="the local port to serve on (default: any free)"
    )
    command.add_argument(
        "--no-browser", action="store_true", help="print the one-time link; open no browser"
    )
    add_target_options(command)
    command.set_defaults(run=targeted(serve, project_root))


def port_number(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number, got {value!r}")
    return int(value)


def serve(
    arguments: argparse.Namespace, target: Target, stop: threading.Event | None = None
) -> int:
    """Serves the console until Ctrl-C (or `stop`), after opening the browser at its link."""
    proxy = ConsoleProxy(target, arguments.port).start()
    try:
        print(
            f"filejobs console: {target.description}'s console as {target.acting()}, "
            f"at {proxy.origin}/console (Ctrl-C stops it)\n"
            f"  one-time link: {proxy.handoff_url}",
            flush=True,
        )
        if not arguments.no_browser and not webbrowser.open(proxy.handoff_url):
            print("  (no browser opened: open the link above)", file=sys.stderr)
        (stop or threading.Event()).wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0
