"""The local stack's API router (local/stack.py): auth first, then the template's routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filejobs_dev.local import tokens
from filejobs_dev.local.stack import LocalStack, StackOptions, routes_of

ROOT = Path(__file__).resolve().parents[2]


def stack() -> LocalStack:
    return LocalStack(StackOptions(project_root=ROOT))  # not started: routing needs no AWS


def test_a_request_without_a_valid_token_is_refused_before_routing() -> None:
    router = stack()
    routes = routes_of(router.functions)
    for header in ("", "Bearer wrong", f"Basic {router.api_token}"):
        status, _, body = router.route(
            "GET", "/nowhere", "", {"Authorization": header}, b"", routes
        )
        assert status == 401
        assert json.loads(body)["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("method", ["TRACE", "QUERY", "OPTIONS"])
def test_an_unrouted_method_gets_a_json_405_naming_the_allowed_ones(method: str) -> None:
    router = stack()
    auth = {"Authorization": f"Bearer {router.api_token}"}
    status, headers, body = router.route(
        method,
        "/jobs/3f0e1c1e-0000-4000-8000-000000000000",
        "",
        auth,
        b"",
        routes_of(router.functions),
    )
    assert status == 405
    assert json.loads(body)["error"]["code"] == "method_not_allowed"
    assert "GET" in headers["Allow"].split(", ")


def test_an_unknown_path_is_a_json_404() -> None:
    router = stack()
    auth = {"Authorization": f"Bearer {router.api_token}"}
    status, _, body = router.route("GET", "/nowhere", "", auth, b"", routes_of(router.functions))
    assert (status, json.loads(body)["error"]["code"]) == (404, "not_found")


def test_tokens_map_to_the_authorizer_context_the_api_reads() -> None:
    router = stack()
    assert router.authorize(f"Bearer {router.api_token}") == {
        "principalId": "local-operator",
        "role": "operator",
    }
    tenant_token = tokens.mint(router.token_secret, "acme")
    assert router.authorize(f"Bearer {tenant_token}") == {
        "principalId": "local-tenant:acme",
        "role": "tenant",
        "tenant": "acme",
    }
    assert router.authorize(f"Bearer {tokens.mint('another-stack', 'acme')}") is None
