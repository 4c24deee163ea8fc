"""The local stack's router serves the console's shell without a token, as API Gateway does
(template.yaml: its two routes have no authorizer), and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.stack import LocalStack, StackOptions, routes_of

ROOT = Path(__file__).resolve().parents[2]


def router_invoking(invoked: list[tuple[str, dict[str, Any]]]) -> LocalStack:
    router = LocalStack(StackOptions(project_root=ROOT))  # not started: routing needs no AWS

    def invoke(function: str, event: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        invoked.append((function, event))
        return 200, {}, b""

    router._invoke_api = invoke  # type: ignore[method-assign]
    return router


@pytest.mark.parametrize("path", ["/console", "/console/console.js", "/console/index.html"])
def test_the_console_s_shell_is_routed_without_a_token(path: str) -> None:
    invoked: list[tuple[str, dict[str, Any]]] = []
    router = router_invoking(invoked)
    status, _, _ = router.route("GET", path, "", {}, b"", routes_of(router.functions))
    assert status == 200
    [(function, event)] = invoked
    assert function == "ApiFunction"
    # with no identity: the function serves files, never data, to such a request
    assert not event["requestContext"].get("authorizer")


@pytest.mark.parametrize(
    "path", ["/consoles", "/console-admin", "/jobs", "/overview", "/docs", "/openapi.json"]
)
def test_every_other_path_still_wants_a_token(path: str) -> None:
    invoked: list[tuple[str, dict[str, Any]]] = []
    router = router_invoking(invoked)
    status, _, _ = router.route("GET", path, "", {}, b"", routes_of(router.functions))
    assert status == 401
    assert invoked == []
