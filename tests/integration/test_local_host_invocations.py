"""An API function's host on the local stack serves the stack's router alone.

Any process of the machine can reach a loopback port, and an API Gateway event carries its own
authorizer context: a request that could reach the host directly could name itself an operator.
The host refuses every invocation without the stack's per-run secret (filejobs_dev/local/host.py).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from filejobs_dev.local.host import INVOKE_SECRET_HEADER, invocation_server
from filejobs_dev.local.stack import free_port

SECRET = "per-run-secret"
FORGED = {
    "path": "/files",
    "httpMethod": "GET",
    "requestContext": {"authorizer": {"role": "operator", "principalId": "local-operator"}},
}


@pytest.fixture
def host() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    invoked: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        invoked.append(event)
        return {"statusCode": 200, "body": "{}"}

    port = free_port()
    server = invocation_server(port, invoke, "ApiFunction", SECRET)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/", invoked
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(FORGED).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("offered", [None, "", "guessed", SECRET + "x", SECRET[:-1]])
def test_an_invocation_without_the_secret_is_refused_and_never_reaches_the_function(
    host: tuple[str, list[dict[str, Any]]], offered: str | None
) -> None:
    url, invoked = host
    headers = {"Content-Type": "application/json"}
    if offered is not None:
        headers[INVOKE_SECRET_HEADER] = offered
    status, body = post(url, headers)
    assert (status, body) == (403, {"errorType": "Forbidden"})
    assert invoked == []


def test_the_router_s_invocation_reaches_the_function(
    host: tuple[str, list[dict[str, Any]]],
) -> None:
    url, invoked = host
    status, body = post(url, {"Content-Type": "application/json", INVOKE_SECRET_HEADER: SECRET})
    assert status == 200
    assert body == {"statusCode": 200, "body": "{}"}
    assert invoked == [FORGED]
