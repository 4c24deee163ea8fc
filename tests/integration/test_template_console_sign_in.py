"""Specification: template.yaml's ApiAuth parameter. IAM (the default) makes no user pool and no
second API; COGNITO adds a user pool (or uses ExistingUserPoolArn's), the console's app client
and a second REST API whose every route but the console's shell is behind the pool's
authorizer, fronting the same function. The IAM API and its roles are there in both modes.

The tenant is a custom attribute no app client can write: only an administrator sets it.

What each mode deploys is read from the template itself: each resource's Condition, evaluated
for the parameters as CloudFormation evaluates it (`deployed`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from filejobs import console
from filejobs_dev.infra.template import function_definitions, load_template, resources_of_type

TEMPLATE = load_template()
RESOURCES: dict[str, dict[str, Any]] = TEMPLATE["Resources"]
POOL_ARN = "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_AbCdEf123"
IAM = {"ApiAuth": "IAM"}
COGNITO = {"ApiAuth": "COGNITO"}
EXISTING_POOL = {
    "ApiAuth": "COGNITO",
    "ExistingUserPoolArn": POOL_ARN,
    "ExistingUserPoolDomain": "auth.example.com",
}
CONSOLE_SHELL = {("GET", "/console"), ("GET", "/console/{asset}")}


# --- the template's conditions and intrinsics, as CloudFormation evaluates them ------------------


def parameters(overrides: Mapping[str, str]) -> dict[str, Any]:
    values = {
        name: spec.get("Default")
        for name, spec in TEMPLATE["Parameters"].items()
        if "Default" in spec
    }
    values.update(overrides)
    for name, spec in TEMPLATE["Parameters"].items():
        if spec["Type"] == "CommaDelimitedList" and isinstance(values.get(name), str):
            values[name] = [part for part in values[name].split(",") if part] or [""]
    return values


def evaluate(value: Any, values: Mapping[str, Any]) -> Any:
    """`value` with Ref (to parameters), Fn::If, Fn::Equals, Fn::And, Fn::Or, Fn::Not,
    Condition, Fn::Join, Fn::Split and Fn::Select worked out; other intrinsics left as they
    are (they name resources, which exist or not by their own condition)."""
    if isinstance(value, list):
        return [evaluate(item, values) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or not str(next(iter(value))).startswith(("Fn::", "Ref", "Condition")):
        return {key: evaluate(item, values) for key, item in value.items()}
    ((function, argument),) = value.items()
    if function == "Ref":
        return values.get(argument, value)
    if function in {"Condition", "Fn::Condition"}:  # the loader spells !Condition so
        return condition(argument, values)
    if function == "Fn::If":
        name, then, otherwise = argument
        return evaluate(then if condition(name, values) else otherwise, values)
    return _operation(function, argument, values, value)


def _operation(function: str, argument: Any, values: Mapping[str, Any], value: Any) -> Any:
    match function:
        case "Fn::Equals":
            return evaluate(argument[0], values) == evaluate(argument[1], values)
        case "Fn::And":
            return all(evaluate(item, values) for item in argument)
        case "Fn::Or":
            return any(evaluate(item, values) for item in argument)
        case "Fn::Not":
            return not evaluate(argument[0], values)
        case "Fn::Join":
            return str(argument[0]).join(evaluate(argument[1], values))
        case "Fn::Split":
            return str(evaluate(argument[1], values)).split(argument[0])
        case "Fn::Select":
            return evaluate(argument[1], values)[int(argument[0])]
    return value


def condition(name: str, values: Mapping[str, Any]) -> bool:
    return bool(evaluate(TEMPLATE["Conditions"][name], values))


def deployed(overrides: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The resources a deploy with these parameters makes, by logical id."""
    values = parameters(overrides)
    return {
        logical_id: resource
        for logical_id, resource in RESOURCES.items()
        if "Condition" not in resource or condition(resource["Condition"], values)
    }


def outputs(overrides: Mapping[str, str]) -> set[str]:
    values = parameters(overrides)
    return {
        name
        for name, output in TEMPLATE["Outputs"].items()
        if "Condition" not in output or condition(output["Condition"], values)
    }


def of_types(resources: dict[str, dict[str, Any]], *prefixes: str) -> set[str]:
    return {lid for lid, r in resources.items() if str(r["Type"]).startswith(prefixes)}


def path_of(resource_id: Any) -> str:
    """The path of an AWS::ApiGateway::Resource (or the API's root), from its PathParts."""
    if "Fn::GetAtt" in resource_id:
        return ""
    properties = RESOURCES[resource_id["Ref"]]["Properties"]
    return f"{path_of(properties['ParentId'])}/{properties['PathPart']}"


def methods_of(api: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every method of the API `api` (a logical id), by HTTP method and path."""
    return {
        (m["Properties"]["HttpMethod"], path_of(m["Properties"]["ResourceId"]) or "/"): m[
            "Properties"
        ]
        for m in resources_of_type(TEMPLATE, "AWS::ApiGateway::Method").values()
        if m["Properties"]["RestApiId"] == {"Ref": api}
    }


# --- which mode makes what ----------------------------------------------------------------------


def test_api_auth_is_iam_unless_the_deployer_says_cognito() -> None:
    declared = TEMPLATE["Parameters"]["ApiAuth"]
    assert declared["Default"] == "IAM"
    assert declared["AllowedValues"] == ["IAM", "COGNITO"]
    assert TEMPLATE["Parameters"]["ExistingUserPoolArn"]["Default"] == ""


def test_iam_mode_makes_no_user_pool_and_no_second_api() -> None:
    made = deployed(IAM)
    assert of_types(made, "AWS::Cognito::") == set()
    assert of_types(made, "AWS::ApiGateway::RestApi", "AWS::ApiGateway::Method") == set()
    assert "ConsoleApiInvokesApiFunction" not in made
    assert {"UserPoolId", "UserPoolClientId", "ConsoleSignInDomain"}.isdisjoint(outputs(IAM))
    assert "ConsoleUrl" in outputs(IAM)


PRINCIPALS = {
    "ApiOperatorPrincipals": "arn:aws:iam::123456789012:role/ops",
    "ApiTenantBrokers": "arn:aws:iam::123456789012:role/backend",
}


@pytest.mark.parametrize("mode", [IAM, COGNITO, EXISTING_POOL], ids=["iam", "cognito", "existing"])
def test_the_iam_api_its_roles_and_the_function_are_there_in_every_mode(
    mode: dict[str, str],
) -> None:
    made = deployed({**mode, **PRINCIPALS})
    iam_callers = {"FileJobsApi", "ApiFunction", "ApiOperatorRole", "ApiTenantRole"}
    assert iam_callers | {"ApiCallersPolicy", "ApiTenantCallersPolicy"} <= set(made)
    named = outputs({**mode, **PRINCIPALS})
    assert {"ApiUrl", "ApiOperatorRoleArn", "ApiTenantRoleArn", "ConsoleUrl"} <= named


def test_with_no_principals_named_no_api_role_is_made_for_the_account_to_assume() -> None:
    made = deployed(IAM)
    roles = {"ApiOperatorRole", "ApiTenantRole"}
    policies = {"ApiCallersPolicy", "ApiTenantCallersPolicy", "ApiOperatorCliPolicy"}
    assert (roles | policies).isdisjoint(made)
    assert {"ApiOperatorRoleArn", "ApiTenantRoleArn"}.isdisjoint(outputs(IAM))
    assert {"FileJobsApi", "ApiFunction"} <= set(made)  # the API is there, no IAM caller opens it


def test_cognito_mode_makes_a_pool_its_operators_group_domain_client_and_a_second_api() -> None:
    made = deployed(COGNITO)
    assert {lid: made[lid]["Type"] for lid in of_types(made, "AWS::Cognito::")} == {
        "ConsoleUserPool": "AWS::Cognito::UserPool",
        "ConsoleOperatorsGroup": "AWS::Cognito::UserPoolGroup",
        "ConsoleUserPoolDomain": "AWS::Cognito::UserPoolDomain",
        "ConsoleUserPoolClient": "AWS::Cognito::UserPoolClient",
    }
    assert {"ConsoleApi", "ConsoleApiUsers", "ConsoleApiStage", "ConsoleApiInvokesApiFunction"} <= (
        set(made)
    )
    wanted = {
        "ConsoleUrl",
        "ConsoleApiUrl",
        "UserPoolId",
        "UserPoolClientId",
        "ConsoleSignInDomain",
    }
    assert wanted <= outputs(COGNITO)
    # and the console's URL is then the Cognito API's
    url = evaluate(TEMPLATE["Outputs"]["ConsoleUrl"]["Value"], parameters(COGNITO))
    assert "${ConsoleApi}" in url["Fn::Sub"] and url["Fn::Sub"].endswith("/v1/console")


def test_with_an_existing_pool_the_stack_adds_only_the_console_s_client_to_it() -> None:
    made = deployed(EXISTING_POOL)
    assert of_types(made, "AWS::Cognito::") == {"ConsoleUserPoolClient"}
    values = parameters(EXISTING_POOL)
    client = evaluate(made["ConsoleUserPoolClient"]["Properties"], values)
    assert client["UserPoolId"] == "us-east-1_AbCdEf123"  # the pool named by the ARN
    authorizer = evaluate(made["ConsoleApiUsers"]["Properties"], values)
    assert authorizer["ProviderARNs"] == [POOL_ARN]
    assert evaluate(TEMPLATE["Outputs"]["UserPoolId"]["Value"], values) == "us-east-1_AbCdEf123"


def test_an_existing_pool_is_refused_without_cognito_or_its_sign_in_domain() -> None:
    rule = TEMPLATE["Rules"]["ExistingUserPoolNeedsCognitoAndItsDomain"]

    def holds(overrides: dict[str, str]) -> bool:
        values = parameters(overrides)
        if not evaluate(rule["RuleCondition"], values):
            return True
        return all(evaluate(a["Assert"], values) for a in rule["Assertions"])

    assert holds(IAM) and holds(COGNITO) and holds(EXISTING_POOL)
    assert not holds({**EXISTING_POOL, "ApiAuth": "IAM"})
    assert not holds({**EXISTING_POOL, "ExistingUserPoolDomain": ""})


# --- the tenant is the administrator's to set -----------------------------------------------------


def test_no_app_client_may_write_the_tenant_attribute() -> None:
    clients = resources_of_type(TEMPLATE, "AWS::Cognito::UserPoolClient")
    assert clients
    for name, client in clients.items():
        properties = client["Properties"]
        # WriteAttributes is always said: left out, a client may write every standard attribute
        assert "WriteAttributes" in properties, name
        assert "custom:tenant" not in properties["WriteAttributes"], name
        # nor may its tokens change attributes at all (no admin scope, no password or SRP flow)
        assert "aws.cognito.signin.user.admin" not in properties["AllowedOAuthScopes"], name
        assert properties["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"], name
        # and the ID token carries the tenant (the client reads it)
        assert "custom:tenant" in properties["ReadAttributes"], name


def test_the_pool_has_the_tenant_attribute_and_admits_admin_made_people_with_mfa() -> None:
    pool = RESOURCES["ConsoleUserPool"]["Properties"]
    [tenant] = [a for a in pool["Schema"] if a["Name"] == "tenant"]
    assert tenant["AttributeDataType"] == "String"
    assert tenant["StringAttributeConstraints"] == {"MinLength": "1", "MaxLength": "63"}
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["MfaConfiguration"] == "ON" and pool["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
    password = pool["Policies"]["PasswordPolicy"]
    assert password["MinimumLength"] >= 14
    assert all(
        password[f"Require{kind}"] for kind in ("Lowercase", "Uppercase", "Numbers", "Symbols")
    )
    # the people outlive a deleted stack, as the tables do
    assert RESOURCES["ConsoleUserPool"]["DeletionPolicy"] == "Retain"
    assert pool["DeletionProtection"] == "ACTIVE"


def test_the_operators_are_the_group_the_function_is_told() -> None:
    group = RESOURCES["ConsoleOperatorsGroup"]["Properties"]
    environment = function_definitions(TEMPLATE)["ApiFunction"].environment
    assert group["GroupName"] == environment["API_OPERATOR_GROUP"] == {"Ref": "ApiOperatorGroup"}
    assert TEMPLATE["Parameters"]["ApiOperatorGroup"]["Default"] == "operators"


def test_the_console_s_client_is_public_code_with_pkce_back_to_the_console_only() -> None:
    client = RESOURCES["ConsoleUserPoolClient"]["Properties"]
    assert client["GenerateSecret"] is False
    assert client["AllowedOAuthFlows"] == ["code"] and client["AllowedOAuthFlowsUserPoolClient"]
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    console_url = evaluate(TEMPLATE["Outputs"]["ConsoleUrl"]["Value"], parameters(COGNITO))
    assert client["CallbackURLs"] == client["LogoutURLs"] == [console_url]
    assert client["EnableTokenRevocation"] is True


def test_the_sign_in_domain_is_made_of_the_account_and_the_stack_s_id_never_its_name() -> None:
    domain = RESOURCES["ConsoleUserPoolDomain"]["Properties"]["Domain"]
    text, variables = domain["Fn::Sub"]
    assert "${AWS::AccountId}" in text and "AWS::StackName" not in repr(domain)
    assert "AWS::StackId" in repr(variables)
    # and its own text holds none of the words a prefix may not
    literal = re.sub(r"\$\{[^}]+\}", "", text)
    assert not any(word in literal.lower() for word in ("aws", "amazon", "cognito"))


# --- the second API: every route behind the pool but the console's shell --------------------------


def test_every_route_of_the_cognito_api_is_behind_the_pool_but_the_console_s_shell() -> None:
    methods = methods_of("ConsoleApi")
    assert set(methods) == {("ANY", "/{proxy+}"), *CONSOLE_SHELL}
    for route, method in methods.items():
        if route in CONSOLE_SHELL:
            assert method["AuthorizationType"] == "NONE", route
        else:
            assert method["AuthorizationType"] == "COGNITO_USER_POOLS", route
            assert method["AuthorizerId"] == {"Ref": "ConsoleApiUsers"}, route
        # and each is the same function as on the IAM API, as a proxy integration
        integration = method["Integration"]
        assert (integration["Type"], integration["IntegrationHttpMethod"]) == ("AWS_PROXY", "POST")
        assert "${ApiFunction.Arn}" in integration["Uri"]["Fn::Sub"], route
    authorizer = RESOURCES["ConsoleApiUsers"]["Properties"]
    assert authorizer["Type"] == "COGNITO_USER_POOLS"
    assert authorizer["IdentitySource"] == "method.request.header.Authorization"
    assert evaluate(authorizer["ProviderARNs"], parameters(COGNITO)) == [
        {"Fn::GetAtt": "ConsoleUserPool.Arn"}
    ]


def test_every_resource_of_the_second_api_and_the_pool_is_made_with_cognito_only() -> None:
    console_api = {lid for lid in RESOURCES if lid.startswith("ConsoleApi")}
    assert {"ConsoleApi", "ConsoleApiStage", "ConsoleApiInvokesApiFunction"} <= console_api
    for logical_id in console_api | of_types(RESOURCES, "AWS::Cognito::"):
        assert RESOURCES[logical_id].get("Condition") in {"UsesCognito", "CreatesUserPool"}, (
            logical_id
        )


def test_only_the_cognito_api_s_stage_may_invoke_the_function() -> None:
    permission = RESOURCES["ConsoleApiInvokesApiFunction"]["Properties"]
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert permission["FunctionName"] == {"Fn::GetAtt": "ApiFunction.Arn"}
    assert permission["SourceArn"]["Fn::Sub"].endswith(":${ConsoleApi}/v1/*")
    assert permission["SourceAccount"] == {"Ref": "AWS::AccountId"}


def test_the_cognito_api_s_stage_throttles_traces_and_logs_as_the_iam_api_s() -> None:
    stage = RESOURCES["ConsoleApiStage"]["Properties"]
    iam = RESOURCES["FileJobsApi"]["Properties"]
    assert stage["StageName"] == iam["StageName"] == "v1"
    assert stage["MethodSettings"] == iam["MethodSettings"]
    assert stage["TracingEnabled"] is True
    assert stage["AccessLogSetting"]["DestinationArn"] == {
        "Fn::GetAtt": "ConsoleApiAccessLogGroup.Arn"
    }


def test_the_stage_names_what_the_function_reads_and_the_local_stack_hands_over() -> None:
    # given what the stage hands the function: the console's client and the sign-in origin
    variables = RESOURCES["ConsoleApiStage"]["Properties"]["Variables"]
    assert set(variables) == {console.CLIENT_VARIABLE, console.SIGN_IN_URL_VARIABLE}
    assert variables[console.CLIENT_VARIABLE] == {"Ref": "ConsoleUserPoolClient"}
    created = evaluate(variables[console.SIGN_IN_URL_VARIABLE], parameters(COGNITO))
    assert created["Fn::Sub"].startswith("https://${ConsoleUserPoolDomain}.auth.")
    existing = evaluate(variables[console.SIGN_IN_URL_VARIABLE], parameters(EXISTING_POOL))
    assert existing == {"Fn::Sub": "https://${ExistingUserPoolDomain}"}
