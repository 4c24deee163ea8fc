"""Who calls the API: read from the authorizer context the local stack (later, the deployed
authorizer) puts on every request."""

from __future__ import annotations

from typing import Any

import pytest

from filejobs.access import Caller, caller_from


def event(authorizer: Any) -> dict[str, Any]:
    return {"requestContext": {"authorizer": authorizer}}


def test_a_tenant_caller_sees_only_its_own_tenant() -> None:
    # given a tenant's request, when its caller is read
    caller = caller_from(event({"tenant": "acme", "role": "tenant"}))
    # then it is that tenant, not an operator
    assert caller == Caller(tenant="acme", operator=False)
    assert caller.may_see("acme") and not caller.may_see("globex")
    assert caller.name == "api:tenant:acme"


def test_an_operator_sees_every_tenant() -> None:
    caller = caller_from(event({"role": "operator"}))
    assert caller == Caller(tenant=None, operator=True)
    assert caller.may_see("acme") and caller.may_see("globex")


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"requestContext": {}},
        {"requestContext": None},
        event(None),
        event("tenant"),
        event({"tenant": "acme"}),
        event({"role": "tenant"}),
        event({"role": "admin", "tenant": "acme"}),
        event({"role": "tenant", "tenant": ""}),
        event({"role": "tenant", "tenant": 7}),
        event({"role": "tenant", "tenant": "acme#03"}),  # would reach into index keys
        event({"role": "operator", "tenant": "../x"}),
    ],
)
def test_a_missing_or_invalid_identity_is_no_caller(raw: dict[str, Any]) -> None:
    assert caller_from(raw) is None
