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
        event({"role": "tenant", "tenant": "acme\n"}),  # "$" of a match() would pass it
    ],
)
def test_a_missing_or_invalid_identity_is_no_caller(raw: dict[str, Any]) -> None:
    assert caller_from(raw) is None


ROLES = {
    "API_OPERATOR_ROLE": "stack-ApiOperatorRole-1AB",
    "API_TENANT_ROLE": "stack-ApiTenantRole-2CD",
}


def iam_event(user_arn: object) -> dict[str, Any]:
    """An IAM-authenticated request: no authorizer context, the signer in `identity`."""
    return {"requestContext": {"identity": {"userArn": user_arn, "caller": "AROA:x"}}}


def test_an_iam_caller_of_the_tenant_role_is_the_tenant_of_its_session_name() -> None:
    arn = "arn:aws:sts::123456789012:assumed-role/stack-ApiTenantRole-2CD/acme"
    assert caller_from(iam_event(arn), ROLES) == Caller(tenant="acme", operator=False)


def test_an_iam_caller_of_the_operator_role_is_an_operator() -> None:
    arn = "arn:aws:sts::123456789012:assumed-role/stack-ApiOperatorRole-1AB/alice"
    assert caller_from(iam_event(arn), ROLES) == Caller(tenant=None, operator=True)


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:user/alice",  # an IAM user: no tenancy
        "arn:aws:sts::123456789012:assumed-role/SomeOtherRole/acme",  # not one of the API's roles
        "arn:aws:sts::123456789012:assumed-role/stack-ApiTenantRole-2CD/acme#03",  # bad tenant
        "arn:aws:sts::123456789012:assumed-role/stack-ApiTenantRole-2CD",  # no session
        None,
        42,
    ],
)
def test_any_other_iam_caller_is_refused(arn: object) -> None:
    assert caller_from(iam_event(arn), ROLES) is None


def test_without_the_roles_configured_no_iam_caller_is_accepted() -> None:
    arn = "arn:aws:sts::123456789012:assumed-role/stack-ApiTenantRole-2CD/acme"
    assert caller_from(iam_event(arn), {}) is None


# --- a Cognito user pool authorizer (docs/API_AUTH.md) -----------------------------------------


def claims(**values: str) -> dict[str, Any]:
    return event({"claims": {"sub": "5f0c", "token_use": "id", **values}})


def test_a_cognito_user_is_the_tenant_of_its_custom_attribute() -> None:
    caller = caller_from(claims(**{"custom:tenant": "acme"}), {})
    assert caller == Caller(tenant="acme", operator=False)


@pytest.mark.parametrize("groups", ["operators", "readers,operators", "[readers operators]"])
def test_a_member_of_the_operator_group_is_an_operator(groups: str) -> None:
    # given the group list as a REST API's (commas) or an HTTP API's (brackets) authorizer sends it
    caller = caller_from(claims(**{"cognito:groups": groups}), {})
    assert caller == Caller(tenant=None, operator=True)


def test_the_operator_group_is_configurable() -> None:
    raw = claims(**{"cognito:groups": "operators", "custom:tenant": "acme"})
    # given API_OPERATOR_GROUP names another group, then "operators" is no longer enough
    caller = caller_from(raw, {"API_OPERATOR_GROUP": "filejobs-admins"})
    assert caller == Caller(tenant="acme", operator=False)


@pytest.mark.parametrize(
    "values",
    [
        {},  # signed in, but neither a tenant nor an operator
        {"cognito:groups": "readers"},
        {"cognito:groups": "operators-not", "custom:tenant": "a#b"},
        {"custom:tenant": ""},
        {"custom:tenant": "../x"},
    ],
)
def test_a_cognito_user_without_a_valid_tenant_or_the_group_is_no_caller(
    values: dict[str, str],
) -> None:
    assert caller_from(claims(**values), {}) is None
