"""Specification: the API's IAM roles are safe by default (issue 45, item 5).

- A deploy that names no principals makes no API role: no role trusts the whole account, and the
  API function then takes no IAM caller for an operator or a tenant.
- The operator role asks for MFA unless the deployer turns it off.
- A tenant session is bound to its tenant twice, by its session name (what access.py reads) and
  by its session tag "tenant" (what ABAC policies read); IAM lets the session call the API only
  when the two agree, and lets a broker set no other tag.

The trust and API policies are read from template.yaml, their conditions applied the way IAM
applies StringLike (fnmatch's `*` and `?`).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import pytest

from filejobs.access import caller_from
from filejobs.config import CallerSettings
from filejobs_dev.infra.template import load_template
from filejobs_dev.local.resources import Resources

TEMPLATE = load_template()
RESOURCES: dict[str, dict[str, Any]] = TEMPLATE["Resources"]
DEFAULTS = {
    name: str(spec["Default"]) for name, spec in TEMPLATE["Parameters"].items() if "Default" in spec
}
OPERATORS = "arn:aws:iam::123456789012:role/ops"
BROKER = "arn:aws:iam::123456789012:role/backend"
ROLE_VARIABLES = (
    "API_OPERATOR_ROLE",
    "API_TENANT_ROLE",
    "API_OPERATOR_ROLE_ID",
    "API_TENANT_ROLE_ID",
)


def stack(**overrides: str) -> Resources:
    resources = Resources("filejobs", "us-east-1", parameters={**DEFAULTS, **overrides})
    resources.conditions = {
        name: resources.holds(TEMPLATE, name) for name in TEMPLATE["Conditions"]
    }
    for logical_id in ("ApiOperatorRole", "ApiTenantRole"):
        resources.refs[logical_id] = f"filejobs-{logical_id}"
        resources.attributes[logical_id] = {"RoleId": f"AROA{logical_id.upper()}"}
    return resources


def made(resources: Resources, logical_id: str) -> bool:
    condition = RESOURCES[logical_id].get("Condition")
    return condition is None or resources.conditions[condition]


def api_role_environment(resources: Resources) -> dict[str, str]:
    variables = RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]
    return {name: str(resources.resolve(variables[name])) for name in ROLE_VARIABLES}


def statements(logical_id: str) -> list[dict[str, Any]]:
    properties = RESOURCES[logical_id]["Properties"]
    document = properties.get("AssumeRolePolicyDocument") or properties["PolicyDocument"]
    return list(document["Statement"])


def string_like(condition: dict[str, Any], key: str, value: str) -> bool:
    patterns = condition["StringLike"][key]
    return any(
        fnmatchcase(value, p) for p in (patterns if isinstance(patterns, list) else [patterns])
    )


# --- no principals, no role ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "logical_id",
    [
        "ApiOperatorRole",
        "ApiTenantRole",
        "ApiCallersPolicy",
        "ApiTenantCallersPolicy",
        "ApiOperatorCliPolicy",
    ],
)
def test_a_deploy_naming_no_principals_makes_no_api_role_nor_its_policies(logical_id: str) -> None:
    assert not made(stack(), logical_id)


def test_each_role_is_made_once_its_principals_are_named() -> None:
    operators_only = stack(ApiOperatorPrincipals=OPERATORS)
    assert made(operators_only, "ApiOperatorRole") and not made(operators_only, "ApiTenantRole")
    brokers_only = stack(ApiTenantBrokers=BROKER)
    assert made(brokers_only, "ApiTenantRole") and not made(brokers_only, "ApiOperatorRole")


def test_without_the_roles_the_api_function_takes_no_iam_caller() -> None:
    environment = {**api_role_environment(stack()), "API_ACCOUNT_ID": "123456789012"}
    assert set(environment[name] for name in ROLE_VARIABLES) == {""}
    # a principal of the account that assumed some role of the same name is nobody here
    identity = {
        "userArn": "arn:aws:sts::123456789012:assumed-role/filejobs-ApiTenantRole/acme",
        "user": "AROAAPITENANTROLE:acme",
    }
    event = {"requestContext": {"identity": identity}}
    assert caller_from(event, CallerSettings.from_env(environment)) is None


def test_with_the_roles_the_api_function_knows_their_names_and_ids() -> None:
    resources = stack(ApiOperatorPrincipals=OPERATORS, ApiTenantBrokers=BROKER)
    environment = api_role_environment(resources)
    assert environment == {
        "API_OPERATOR_ROLE": "filejobs-ApiOperatorRole",
        "API_TENANT_ROLE": "filejobs-ApiTenantRole",
        "API_OPERATOR_ROLE_ID": "AROAAPIOPERATORROLE",
        "API_TENANT_ROLE_ID": "AROAAPITENANTROLE",
    }
    identity = {
        "userArn": "arn:aws:sts::123456789012:assumed-role/filejobs-ApiTenantRole/acme",
        "user": "AROAAPITENANTROLE:acme",
    }
    event = {"requestContext": {"identity": identity}}
    caller = caller_from(
        event, CallerSettings.from_env({**environment, "API_ACCOUNT_ID": "123456789012"})
    )
    assert caller is not None and (caller.tenant, caller.operator) == ("acme", False)


# --- operator MFA -------------------------------------------------------------------------------


def test_the_operator_role_asks_for_mfa_by_default_and_the_deployer_may_turn_it_off() -> None:
    (trust,) = statements("ApiOperatorRole")
    mfa = {"Bool": {"aws:MultiFactorAuthPresent": "true"}}
    assert stack(ApiOperatorPrincipals=OPERATORS).chosen(TEMPLATE, trust["Condition"]) == mfa
    turned_off = stack(ApiOperatorPrincipals=OPERATORS, ApiOperatorRequiresMfa="false")
    assert turned_off.chosen(TEMPLATE, trust["Condition"]) is None


# --- the tenant's session tag -------------------------------------------------------------------


def _tag_session() -> dict[str, Any]:
    (statement,) = [s for s in statements("ApiTenantRole") if s["Action"] == "sts:TagSession"]
    return statement


def broker_may_tag(tags: dict[str, str], transitive: bool = False) -> bool:
    """The tenant role's sts:TagSession statement, as IAM evaluates it for these tags."""
    condition = _tag_session()["Condition"]
    allowed_keys = condition["ForAllValues:StringEquals"]["aws:TagKeys"]
    return (
        all(key in allowed_keys for key in tags)
        and "tenant" in tags
        and string_like(condition, "aws:RequestTag/tenant", tags["tenant"])
        and condition["Null"]["sts:TransitiveTagKeys"] == ("false" if transitive else "true")
    )


def test_a_broker_may_tag_the_session_with_its_tenant_and_nothing_else() -> None:
    assert _tag_session()["Principal"] == {"AWS": {"Ref": "ApiTenantBrokers"}}
    assert broker_may_tag({"tenant": "acme"})
    assert not broker_may_tag({"tenant": "acme", "role": "operator"})
    assert not broker_may_tag({"tenant": ""})
    assert not broker_may_tag({"tenant": "acme"}, transitive=True)


def tenant_may_invoke(session_name: str, tag: str | None) -> bool:
    """The tenant role's API policy, as IAM evaluates it for a session (aws:userid is
    "<role id>:<session name>"; a session with no tag has no ${aws:PrincipalTag/tenant}, which
    IAM then treats as not matching)."""
    (statement,) = statements("ApiTenantCallersPolicy")
    if tag is None:
        return False
    pattern = statement["Condition"]["StringLike"]["aws:userid"]
    return fnmatchcase(
        f"AROAAPITENANTROLE:{session_name}", pattern.replace("${aws:PrincipalTag/tenant}", tag)
    )


def test_a_tenant_session_calls_the_api_only_when_its_name_is_its_tag() -> None:
    assert tenant_may_invoke("acme", "acme")
    assert not tenant_may_invoke("acme", "globex")  # the name claims another tenant than the tag
    assert not tenant_may_invoke("globex", "acme")
    assert not tenant_may_invoke("acme", None)  # a session assumed without the tag calls nothing
    assert not tenant_may_invoke("acme-eu", "eu")  # "*:" anchors the tag to the whole name


def test_the_operator_role_gets_no_tenant_binding_and_the_tenant_role_no_operator_grant() -> None:
    assert RESOURCES["ApiCallersPolicy"]["Properties"]["Roles"] == [{"Ref": "ApiOperatorRole"}]
    assert RESOURCES["ApiTenantCallersPolicy"]["Properties"]["Roles"] == [{"Ref": "ApiTenantRole"}]
