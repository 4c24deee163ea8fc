"""Specification: `filejobs console`'s proxy (cli/filejobs_cli/console_proxy.py) signs each API
request of the console's page with SigV4 (the browser never holds a credential), and serves
this run's page only: its own address and origin, its secret, no preflight, a one-time link.

Against a stand-in for API Gateway on 127.0.0.1 that records what reaches it; the signature is
checked as API Gateway checks it, by computing it again from the request received.
"""

from __future__ import annotations

import argparse
import io
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from filejobs_cli import console_proxy
from filejobs_cli.client import SigV4Auth, Target
from filejobs_cli.console_proxy import ConsoleProxy
from tests.loopback import QuietHandler, serving
from tests.sigv4 import signature_holds, signed_by

ACCESS_KEY, SECRET_KEY = "AKIAEXAMPLECONSOLE01", "console-proxy-test-secret-key"
REGION = "eu-west-1"
PAGE_CSP = "default-src 'self'"


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Gateway:
    """Records each request; answers like the API: JSON, or the page with its policy."""

    url: str
    received: list[Received] = field(default_factory=list)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    received: list[Received] = []

    class Handler(QuietHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            received.append(Received(self.command, self.path, dict(self.headers.items()), body))
            page = self.path.startswith("/v1/console")
            answer = b"<!doctype html>" if page else json.dumps({"jobs": []}).encode()
            headers = {
                "Content-Type": "text/html" if page else "application/json",
                "Content-Security-Policy": PAGE_CSP,
                "Set-Cookie": "tracker=1",  # never relayed
            }
            self.send_body(200, answer, headers)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("do_"):  # every method: http.server calls do_<METHOD>
                return self._any
            raise AttributeError(name)

    with serving(Handler) as url:
        yield Gateway(url, received)


def signed_target(gateway: Gateway) -> Target:
    session = boto3.Session(
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
    )
    return Target(
        description="stack test",
        api_url=f"{gateway.url}/v1",
        auth=SigV4Auth(lambda: session, REGION),
        s3_factory=lambda: None,
        uploads_bucket=None,
    )


@pytest.fixture
def proxy(gateway: Gateway) -> Iterator[ConsoleProxy]:
    running = ConsoleProxy(signed_target(gateway)).start()
    yield running
    running.stop()


def send(
    proxy: ConsoleProxy,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    secret: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    """One request to the proxy as its page sends it (with its secret unless told)."""
    sent = {"Authorization": f"Bearer {proxy.secret}"} if secret else {}
    request = urllib.request.Request(
        f"{proxy.origin}{path}", data=body, method=method, headers={**sent, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers.items()), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def signature_is_valid(received: Received, host_url: str) -> bool:
    """Whether the request carries a SigV4 signature of itself by the test's credentials, for
    execute-api in REGION: computed again from what was received, as API Gateway does."""
    signed = signed_by(received.headers["Authorization"])
    if signed is None or (signed.key, signed.region, signed.service) != (
        ACCESS_KEY,
        REGION,
        "execute-api",
    ):
        return False
    return signature_holds(
        signed,
        method=received.method,
        url=f"{host_url}{received.path}",
        headers=received.headers,
        body=received.body,
        secret=SECRET_KEY,
    )


# --- signing --------------------------------------------------------------------------------------


def test_an_api_request_of_the_page_goes_on_signed_with_sigv4_and_without_its_secret(
    proxy: ConsoleProxy, gateway: Gateway
) -> None:
    # when the page asks for jobs with its secret (and a cookie it happens to have)
    status, headers, body = send(
        proxy, "/jobs?status=failed&since=2026-01-01T00%3A00%3A00Z", headers={"Cookie": "a=b"}
    )
    # then the API's answer comes back, without the API's cookie
    assert (status, json.loads(body)) == (200, {"jobs": []})
    assert "Set-Cookie" not in headers
    # and the API got the request under its stage, signed with SigV4 by the caller's
    # credentials, with neither the page's secret nor its cookie
    [received] = gateway.received
    assert received.path == "/v1/jobs?status=failed&since=2026-01-01T00%3A00%3A00Z"
    assert signature_is_valid(received, gateway.url)
    assert proxy.secret not in json.dumps(received.headers)
    assert "Cookie" not in received.headers


def test_a_request_with_a_body_is_signed_with_its_body(
    proxy: ConsoleProxy, gateway: Gateway
) -> None:
    body = json.dumps({"action": "retry", "filter": {}, "reason": "x", "dry_run": True}).encode()
    status, _, _ = send(
        proxy,
        "/operations",
        method="POST",
        body=body,
        headers={"Content-Type": "application/json", "Idempotency-Key": "console-1"},
    )
    assert status == 200
    [received] = gateway.received
    assert received.body == body and received.headers["Idempotency-Key"] == "console-1"
    assert signature_is_valid(received, gateway.url)
    # and a signature no longer matches a body changed on the way
    tampered = Received(received.method, received.path, received.headers, body + b" ")
    assert not signature_is_valid(tampered, gateway.url)


def test_the_console_s_shell_is_served_without_the_secret_with_the_page_s_policy(
    proxy: ConsoleProxy, gateway: Gateway
) -> None:
    for path in ("/console", "/console/console.js"):
        status, headers, _ = send(proxy, path, secret=False)
        assert status == 200 and headers["Content-Security-Policy"] == PAGE_CSP
    assert [r.path for r in gateway.received] == ["/v1/console", "/v1/console/console.js"]


def test_behind_the_proxy_the_page_signs_in_with_the_secret_whatever_the_api_says(
    proxy: ConsoleProxy, gateway: Gateway
) -> None:
    status, _, body = send(proxy, "/console/config.json", secret=False)
    assert (status, json.loads(body)) == (200, {"sign_in": "token"})
    assert gateway.received == []


# --- refusing every other page --------------------------------------------------------------------


def refusals(proxy: ConsoleProxy) -> dict[str, tuple[int, dict[str, str], bytes]]:
    return {
        "no secret": send(proxy, "/jobs?status=failed", secret=False),
        "another secret": send(
            proxy, "/overview", secret=False, headers={"Authorization": "Bearer guessed"}
        ),
        "the shell's path, but to change": send(proxy, "/console", method="POST", secret=False),
        "another origin's page": send(
            proxy, "/jobs?status=failed", headers={"Origin": "http://127.0.0.1:9999"}
        ),
        "another site's request": send(
            proxy, "/overview", headers={"Sec-Fetch-Site": "cross-site"}
        ),
        "another host (DNS rebinding)": send(
            proxy, "/overview", headers={"Host": "attacker.example"}
        ),
        "a CORS preflight": send(
            proxy,
            "/operations",
            method="OPTIONS",
            secret=False,
            headers={"Origin": proxy.origin, "Access-Control-Request-Method": "POST"},
        ),
    }


def test_only_this_run_s_page_may_use_the_proxy_and_nothing_else_reaches_the_api(
    proxy: ConsoleProxy, gateway: Gateway
) -> None:
    for why, (status, headers, body) in refusals(proxy).items():
        assert status in {401, 403, 405}, why
        assert "Access-Control-Allow-Origin" not in headers, why
        assert json.loads(body)["error"]["code"], why
    assert gateway.received == []


# --- the one-time link ----------------------------------------------------------------------------


def handoff(proxy: ConsoleProxy, code: str) -> tuple[int, bytes]:
    status, _, body = send(
        proxy,
        "/console/session",
        method="POST",
        secret=False,
        body=json.dumps({"handoff": code}).encode(),
        headers={"Content-Type": "application/json", "Origin": proxy.origin},
    )
    return status, body


def test_the_one_time_link_gives_the_secret_once(proxy: ConsoleProxy) -> None:
    code = proxy.handoff_url.partition("#handoff=")[2]
    assert proxy.secret not in proxy.handoff_url
    assert handoff(proxy, "not-it")[0] == 401
    status, body = handoff(proxy, code)
    assert (status, json.loads(body)) == (200, {"token": proxy.secret})
    # and never again
    assert handoff(proxy, code)[0] == 401


def test_a_one_time_link_not_used_within_five_minutes_is_worth_nothing(
    proxy: ConsoleProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = proxy.handoff_url.partition("#handoff=")[2]
    later = time.monotonic() + console_proxy.HANDOFF_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert handoff(proxy, code)[0] == 401


# --- the command ----------------------------------------------------------------------------------


def test_filejobs_console_serves_until_stopped_and_prints_its_one_time_link(
    gateway: Gateway,
) -> None:
    # given the command's arguments, its target resolved (client.py's part)
    arguments = argparse.Namespace(port=0, no_browser=True)
    stop = threading.Event()
    printed = io.StringIO()
    with redirect_stdout(printed):
        running = threading.Thread(
            target=console_proxy.serve, args=(arguments, signed_target(gateway), stop)
        )
        running.start()
        deadline = time.monotonic() + 10
        while "one-time link" not in printed.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    link = printed.getvalue().split("one-time link: ")[1].split()[0]
    origin, _, code = link.partition("/console#handoff=")
    # then the link's code trades for a secret that opens the API through the proxy
    request = urllib.request.Request(
        f"{origin}/console/session",
        data=json.dumps({"handoff": code}).encode(),
        headers={"Origin": origin},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        secret = json.loads(answer.read())["token"]
    jobs = urllib.request.Request(
        f"{origin}/jobs?status=failed", headers={"Authorization": f"Bearer {secret}"}
    )
    with urllib.request.urlopen(jobs, timeout=10) as answer:
        assert answer.status == 200
    assert signature_is_valid(gateway.received[-1], gateway.url)
    # and it stops when told, its port closed
    stop.set()
    running.join(timeout=10)
    assert not running.is_alive()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{origin}/console", timeout=2)
