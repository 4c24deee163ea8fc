"""Specification of tests/iam.py's policy evaluation, which the IAM tests trust: conditions read
as IAM reads them (an absent key, ForAnyValue/ForAllValues, negated operators, Null), an
explicit Deny wins over any Allow, and a DynamoDB write's `dynamodb:Attributes` are the names
it touches."""

from __future__ import annotations

import pytest

from tests.iam import Call, ConditionTest, Grant, UnmappedCallError, attribute_names, denied

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/files"
VERDICT = ("scan_status", "scan")


def test_a_positive_test_of_an_absent_key_fails_and_a_negated_one_holds() -> None:
    equals = ConditionTest("StringEquals", "s3:ExistingObjectTag/scan-status", ("CLEAN",))
    not_equals = ConditionTest("StringNotEquals", "s3:ExistingObjectTag/scan-status", ("CLEAN",))
    assert not equals.holds({})
    assert not_equals.holds({})
    assert equals.holds({"s3:ExistingObjectTag/scan-status": ["CLEAN"]})
    assert not not_equals.holds({"s3:ExistingObjectTag/scan-status": ["CLEAN"]})
    assert not_equals.holds({"s3:ExistingObjectTag/scan-status": ["INFECTED"]})


def test_for_any_value_needs_one_match_and_fails_on_no_values() -> None:
    test = ConditionTest("ForAnyValue:StringEquals", "dynamodb:Attributes", VERDICT)
    assert test.holds({"dynamodb:Attributes": ["id", "status", "scan_status"]})
    assert not test.holds({"dynamodb:Attributes": ["id", "status"]})
    assert not test.holds({})


def test_for_all_values_holds_on_no_values() -> None:
    test = ConditionTest("ForAllValues:StringLike", "dynamodb:Attributes", ("id", "usage*"))
    assert test.holds({})
    assert test.holds({"dynamodb:Attributes": ["id", "usage_day"]})
    assert not test.holds({"dynamodb:Attributes": ["id", "scan_status"]})


def test_null_tests_whether_the_key_is_there() -> None:
    there = ConditionTest("Null", "s3:ExistingObjectTag/scan-status", ("false",))
    assert there.holds({"s3:ExistingObjectTag/scan-status": ["CLEAN"]})
    assert not there.holds({})


def update(expression: str, names: dict[str, str]) -> Call:
    return Call(
        "dynamodb",
        "UpdateItem",
        {
            "TableName": "files",
            "Key": {"id": {"S": "f"}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":0": {"S": "x"}},
        },
    )


def test_an_explicit_deny_wins_over_an_allow() -> None:
    allow = Grant(frozenset({"dynamodb:UpdateItem"}), (TABLE,))
    deny = Grant(
        frozenset({"dynamodb:UpdateItem"}),
        (TABLE,),
        (ConditionTest("ForAnyValue:StringEquals", "dynamodb:Attributes", VERDICT),),
        "Deny",
    )
    verdict = update("SET #0 = :0", {"#0": "scan_status"})
    status = update("SET #0 = :0", {"#0": "status"})
    assert denied([verdict], [allow, deny]) == [
        f"dynamodb:UpdateItem on {TABLE} (dynamodb:UpdateItem): denied"
    ]
    assert denied([status], [allow, deny]) == []
    assert denied([status], [deny]) == [f"dynamodb:UpdateItem on {TABLE} (dynamodb:UpdateItem)"]


def test_a_writes_attributes_are_its_keys_its_updates_and_its_conditions_top_level_names() -> None:
    body = update(
        "SET #0.#1 = :0, updated_at = if_not_exists(updated_at, :0) REMOVE #2",
        {"#0": "processed", "#1": "inner", "#2": "scan", "#3": "scan_status"},
    ).params | {"ConditionExpression": "attribute_exists(#3) AND size(tags) > :0"}
    assert attribute_names(body) == ["id", "processed", "scan", "scan_status", "tags", "updated_at"]


def test_a_deny_on_a_key_the_module_does_not_model_is_refused_not_skipped() -> None:
    deny = Grant(
        frozenset({"dynamodb:UpdateItem"}),
        (TABLE,),
        (ConditionTest("StringEquals", "aws:SourceVpce", ("vpce-1",)),),
        "Deny",
    )
    with pytest.raises(UnmappedCallError):
        deny.applies("dynamodb:UpdateItem", TABLE, {})
