"""Specification: the local stack evaluates the template's Conditions as CloudFormation does, so
what a deploy with given parameters would not make (the Cognito console API's alarm under the
default ApiAuth=IAM) is not made locally either."""

from __future__ import annotations

import pytest

from filejobs_dev.infra.template import load_template
from filejobs_dev.local.resources import Resources

TEMPLATE = load_template()
DEFAULTS = {
    name: str(spec["Default"]) for name, spec in TEMPLATE["Parameters"].items() if "Default" in spec
}


def conditions(**overrides: str) -> dict[str, bool]:
    resources = Resources("filejobs-test", "us-east-1", parameters={**DEFAULTS, **overrides})
    return {name: resources.holds(TEMPLATE, name) for name in TEMPLATE["Conditions"]}


def test_the_defaults_make_no_user_pool_and_no_email_subscription() -> None:
    held = conditions()
    assert held["UsesCognito"] is held["CreatesUserPool"] is held["HasAlarmEmail"] is False
    assert held["CreatesApiGatewayCloudWatchRole"] is True


def test_cognito_with_no_existing_pool_creates_one_and_with_one_does_not() -> None:
    assert conditions(ApiAuth="COGNITO")["CreatesUserPool"] is True
    existing = "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_abc"
    held = conditions(ApiAuth="COGNITO", ExistingUserPoolArn=existing)
    assert (held["UsesCognito"], held["CreatesUserPool"]) == (True, False)


def test_a_list_parameter_named_or_left_empty() -> None:
    assert conditions()["NamesOperatorPrincipals"] is False
    principals = "arn:aws:iam::123456789012:role/ops"
    assert conditions(ApiOperatorPrincipals=principals)["NamesOperatorPrincipals"] is True


def test_an_unknown_condition_function_is_refused_not_guessed() -> None:
    resources = Resources("filejobs-test", "us-east-1", parameters=DEFAULTS)
    template = {"Conditions": {"Odd": {"Fn::Contains": [["a"], "a"]}}}
    with pytest.raises(ValueError, match="cannot evaluate the condition function Fn::Contains"):
        resources.holds(template, "Odd")
