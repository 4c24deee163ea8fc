"""Who calls the API: read from the authorizer context the local stack (later, the deployed
authorizer) puts on every request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filejobs.access import Caller, caller_from
from filejobs.config import LOCAL_CALLERS_VARIABLE, SAM_LOCAL_VARIABLE, CallerSettings
from filejobs_dev.infra.template import function_definitions, load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


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


ACCOUNT = "123456789012"
OPERATOR_ROLE, OPERATOR_ROLE_ID = "stack-ApiOperatorRole-1AB", "AROAOPERATOR0000001"
TENANT_ROLE, TENANT_ROLE_ID = "stack-ApiTenantRole-2CD", "AROATENANT000000002"
ROLES = {
    "API_OPERATOR_ROLE": OPERATOR_ROLE,
    "API_TENANT_ROLE": TENANT_ROLE,
    "API_OPERATOR_ROLE_ID": OPERATOR_ROLE_ID,
    "API_TENANT_ROLE_ID": TENANT_ROLE_ID,
    "API_ACCOUNT_ID": ACCOUNT,
}


def iam_event(user_arn: object, user: object = None) -> dict[str, Any]:
    """An IAM-authenticated request: no authorizer context, the signer in `identity` (its ARN,
    and `user`: the role's unique id and the session name, as API Gateway gives them)."""
    identity = {"userArn": user_arn, "caller": "AROA:x", "user": user}
    return {"requestContext": {"identity": identity}}


def assumed(role: str, session: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:sts::{account}:assumed-role/{role}/{session}"


def test_an_iam_caller_of_the_tenant_role_is_the_tenant_of_its_session_name() -> None:
    signed = iam_event(assumed(TENANT_ROLE, "acme"), f"{TENANT_ROLE_ID}:acme")
    assert caller_from(signed, CallerSettings.from_env(ROLES)) == Caller(
        tenant="acme", operator=False
    )


def test_an_iam_caller_of_the_operator_role_is_an_operator() -> None:
    signed = iam_event(assumed(OPERATOR_ROLE, "alice"), f"{OPERATOR_ROLE_ID}:alice")
    assert caller_from(signed, CallerSettings.from_env(ROLES)) == Caller(tenant=None, operator=True)


@pytest.mark.parametrize(
    "arn",
    [
        f"arn:aws:iam::{ACCOUNT}:user/alice",  # an IAM user: no tenancy
        assumed("SomeOtherRole", "acme"),  # not one of the API's roles
        assumed(TENANT_ROLE, "acme#03"),  # bad tenant
        f"arn:aws:sts::{ACCOUNT}:assumed-role/{TENANT_ROLE}",  # no session
        None,
        42,
    ],
)
def test_any_other_iam_caller_is_refused(arn: object) -> None:
    assert (
        caller_from(iam_event(arn, f"{TENANT_ROLE_ID}:acme"), CallerSettings.from_env(ROLES))
        is None
    )


@pytest.mark.parametrize(
    ("arn", "user"),
    [
        # another account's role of the same name
        (assumed(OPERATOR_ROLE, "alice", account="210987654321"), f"{OPERATOR_ROLE_ID}:alice"),
        # a role deleted and made again under the name: another unique id
        (assumed(OPERATOR_ROLE, "alice"), "AROARECREATED000003:alice"),
        # the unique id of the tenant role under the operator role's name
        (assumed(OPERATOR_ROLE, "alice"), f"{TENANT_ROLE_ID}:alice"),
        # the session in `user` not the ARN's
        (assumed(TENANT_ROLE, "acme"), f"{TENANT_ROLE_ID}:globex"),
        # no `user` at all
        (assumed(TENANT_ROLE, "acme"), None),
    ],
)
def test_a_role_of_the_right_name_that_is_not_the_stack_s_is_refused(
    arn: str, user: object
) -> None:
    assert caller_from(iam_event(arn, user), CallerSettings.from_env(ROLES)) is None


@pytest.mark.parametrize("missing", ["API_ACCOUNT_ID", "API_OPERATOR_ROLE_ID", "API_OPERATOR_ROLE"])
def test_without_the_stack_s_identity_configured_no_iam_operator_is_accepted(
    missing: str,
) -> None:
    signed = iam_event(assumed(OPERATOR_ROLE, "alice"), f"{OPERATOR_ROLE_ID}:alice")
    partial = {k: v for k, v in ROLES.items() if k != missing}
    assert caller_from(signed, CallerSettings.from_env(partial)) is None
    assert caller_from(signed, CallerSettings.from_env({})) is None


# --- a Cognito user pool authorizer (docs/API_AUTH.md) -----------------------------------------


def claims(**values: str) -> dict[str, Any]:
    return event({"claims": {"sub": "5f0c", "token_use": "id", **values}})


def test_a_cognito_user_is_the_tenant_of_its_custom_attribute() -> None:
    caller = caller_from(claims(**{"custom:tenant": "acme"}), CallerSettings.from_env({}))
    assert caller == Caller(tenant="acme", operator=False)


@pytest.mark.parametrize("groups", ["operators", "readers,operators", "[readers operators]"])
def test_a_member_of_the_operator_group_is_an_operator(groups: str) -> None:
    # given the group list as a REST API's (commas) or an HTTP API's (brackets) authorizer sends it
    caller = caller_from(claims(**{"cognito:groups": groups}), CallerSettings.from_env({}))
    assert caller == Caller(tenant=None, operator=True)


def test_the_operator_group_is_configurable() -> None:
    raw = claims(**{"cognito:groups": "operators", "custom:tenant": "acme"})
    # given API_OPERATOR_GROUP names another group, then "operators" is no longer enough
    caller = caller_from(raw, CallerSettings.from_env({"API_OPERATOR_GROUP": "filejobs-admins"}))
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
    assert caller_from(claims(**values), CallerSettings.from_env({})) is None


# --- the stack's own Cognito API (ApiAuth=COGNITO): its stage names the console's app client ----

CONSOLE_CLIENT = "4example0console0client0id"


def on_console_api(claims_event: dict[str, Any], client: str = CONSOLE_CLIENT) -> dict[str, Any]:
    """The event as ConsoleApi's stage hands it over (template.yaml's stage variables)."""
    return {**claims_event, "stageVariables": {"consoleClientId": client}}


def test_an_id_token_of_the_console_s_client_is_read_as_before() -> None:
    raw = on_console_api(claims(aud=CONSOLE_CLIENT, **{"custom:tenant": "acme"}))
    assert caller_from(raw, CallerSettings.from_env({})) == Caller(tenant="acme", operator=False)
    operator = on_console_api(claims(aud=CONSOLE_CLIENT, **{"cognito:groups": "operators"}))
    assert caller_from(operator, CallerSettings.from_env({})) == Caller(tenant=None, operator=True)


@pytest.mark.parametrize(
    "values",
    [
        # another app client of the same pool (the authorizer takes any of the pool's)
        {"aud": "another0app0client0of0pool", "cognito:groups": "operators"},
        {"aud": "another0app0client0of0pool", "custom:tenant": "acme"},
        # no audience at all
        {"custom:tenant": "acme"},
        # the console's client, but an access token rather than an ID token
        {"aud": CONSOLE_CLIENT, "token_use": "access", "cognito:groups": "operators"},
    ],
)
def test_on_the_console_s_api_a_token_not_issued_to_its_client_is_no_caller(
    values: dict[str, str],
) -> None:
    assert caller_from(on_console_api(claims(**values)), CallerSettings.from_env({})) is None


def test_an_api_whose_stage_names_no_client_leaves_the_audience_to_its_authorizer() -> None:
    # given an HTTP API's JWT authorizer, which checks the audience itself (no stage variable)
    raw = {**claims(aud="whatever-the-authorizer-took", **{"custom:tenant": "acme"})}
    raw["stageVariables"] = None
    assert caller_from(raw, CallerSettings.from_env({})) == Caller(tenant="acme", operator=False)


# --- the local caller: `sam local` only ------------------------------------------------------

SAM_LOCAL = {"AWS_SAM_LOCAL": "true", "FILEJOBS_LOCAL_CALLERS": "header"}


def sam_start_api_event(headers: dict[str, str] | None) -> dict[str, Any]:
    """A request as `sam local start-api` hands it over (samcli/local/apigw/event_constructor.py):
    no authorizer, an identity whose every signer field is null, each header in both maps."""
    identity = {
        "apiKey": None, "userArn": None, "cognitoAuthenticationType": None, "caller": None,
        "userAgent": "Custom User Agent String", "user": None, "cognitoIdentityPoolId": None,
        "cognitoAuthenticationProvider": None, "sourceIp": "127.0.0.1", "accountId": None,
    }  # fmt: skip
    return {
        "headers": headers,
        "multiValueHeaders": None if headers is None else {k: [v] for k, v in headers.items()},
        "requestContext": {"identity": identity, "resourcePath": "/jobs", "httpMethod": "GET"},
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("tenant:acme", Caller(tenant="acme", operator=False)),
        ("operator", Caller(tenant=None, operator=True)),
        ("operator:acme", Caller(tenant="acme", operator=True)),
    ],
)
def test_under_sam_local_the_header_names_the_caller_of_an_unsigned_request(
    value: str, expected: Caller
) -> None:
    event = sam_start_api_event({"X-Filejobs-Local-Caller": value})
    assert caller_from(event, CallerSettings.from_env(SAM_LOCAL)) == expected


def test_the_header_is_read_whatever_its_case_and_from_either_map() -> None:
    lower = sam_start_api_event({"x-filejobs-local-caller": "tenant:acme"})
    assert caller_from(lower, CallerSettings.from_env(SAM_LOCAL)) == Caller(
        tenant="acme", operator=False
    )
    only_multi = sam_start_api_event(None)
    only_multi["multiValueHeaders"] = {"X-FILEJOBS-LOCAL-CALLER": ["tenant:acme"]}
    assert caller_from(only_multi, CallerSettings.from_env(SAM_LOCAL)) == Caller(
        tenant="acme", operator=False
    )


@pytest.mark.parametrize(
    "environment",
    [
        {},  # a deployed function: neither switch
        {"FILEJOBS_LOCAL_CALLERS": ""},  # the template's declared value
        {"AWS_SAM_LOCAL": "true", "FILEJOBS_LOCAL_CALLERS": ""},  # sam local without the env file
        {"AWS_SAM_LOCAL": "", "FILEJOBS_LOCAL_CALLERS": "header"},
        {"FILEJOBS_LOCAL_CALLERS": "header"},  # only the variable a template could set
        {"AWS_SAM_LOCAL": "true"},
        {"AWS_SAM_LOCAL": "True", "FILEJOBS_LOCAL_CALLERS": "header"},
        {"AWS_SAM_LOCAL": "1", "FILEJOBS_LOCAL_CALLERS": "header"},
        {"AWS_SAM_LOCAL": "true", "FILEJOBS_LOCAL_CALLERS": "yes"},
    ],
)
def test_the_header_is_ignored_unless_both_switches_are_on(environment: dict[str, str]) -> None:
    event = sam_start_api_event({"X-Filejobs-Local-Caller": "operator"})
    assert caller_from(event, CallerSettings.from_env(environment)) is None


@pytest.mark.parametrize(
    "value",
    ["", "operator:", "tenant", "tenant:", "admin", "admin:acme", "tenant:acme#03", "tenant:../x",
     "tenant:acme\n", "TENANT:acme", "Operator"],
)  # fmt: skip
def test_a_malformed_local_caller_is_no_caller(value: str) -> None:
    event = sam_start_api_event({"X-Filejobs-Local-Caller": value})
    assert caller_from(event, CallerSettings.from_env(SAM_LOCAL)) is None


def test_two_local_callers_that_disagree_name_no_one() -> None:
    event = sam_start_api_event({"X-Filejobs-Local-Caller": "tenant:acme"})
    event["multiValueHeaders"] = {"x-filejobs-local-caller": ["tenant:acme", "operator"]}
    assert caller_from(event, CallerSettings.from_env(SAM_LOCAL)) is None


def test_the_header_never_overrides_an_identity_the_request_has() -> None:
    header = {"X-Filejobs-Local-Caller": "operator"}
    # a signed request is its signer, or no one: never the header's operator
    signed = iam_event(assumed(TENANT_ROLE, "acme"), f"{TENANT_ROLE_ID}:acme")
    signed["headers"] = header
    assert caller_from(signed, CallerSettings.from_env({**ROLES, **SAM_LOCAL})) == Caller(
        tenant="acme", operator=False
    )
    stranger = iam_event("arn:aws:iam::123456789012:user/someone", "AIDAEXAMPLE")
    stranger["headers"] = header
    assert caller_from(stranger, CallerSettings.from_env({**ROLES, **SAM_LOCAL})) is None
    # and an authorizer's context is the authorizer's
    authorized = event({"tenant": "acme", "role": "tenant"})
    authorized["headers"] = header
    assert caller_from(authorized, CallerSettings.from_env(SAM_LOCAL)) == Caller(
        tenant="acme", operator=False
    )


def test_the_template_turns_neither_switch_on_for_any_function() -> None:
    # what every deployed function sees of the two: SAM's is never set, the local stack's is
    # declared empty (so that `sam local --env-vars` may set it) and only where it is read
    functions = function_definitions(load_template(TEMPLATE))  # Globals' variables included
    assert all(SAM_LOCAL_VARIABLE not in spec.environment for spec in functions.values())
    declared = {
        name: spec.environment[LOCAL_CALLERS_VARIABLE]
        for name, spec in functions.items()
        if LOCAL_CALLERS_VARIABLE in spec.environment
    }
    assert declared == {"ApiFunction": ""}
    for spec in functions.values():
        environment = {k: str(v) for k, v in spec.environment.items()}
        assert not CallerSettings.from_env(environment).local_callers
