"""Lambda FilterCriteria patterns, as the local stack and the tests apply them."""

from __future__ import annotations

import pytest

from filejobs_dev.infra.event_filter import UnsupportedPatternError, matches, passes

TERMINAL = {"eventName": ["MODIFY"], "dynamodb": {"NewImage": {"status": {"S": ["completed"]}}}}


def record(event_name: str, status: str) -> dict[str, object]:
    return {"eventName": event_name, "dynamodb": {"NewImage": {"status": {"S": status}}}}


def test_a_record_matches_when_every_key_of_the_pattern_allows_its_value() -> None:
    assert matches(TERMINAL, record("MODIFY", "completed"))
    assert not matches(TERMINAL, record("MODIFY", "running"))
    assert not matches(TERMINAL, record("INSERT", "completed"))
    assert not matches(TERMINAL, {"eventName": "MODIFY"})


def test_no_pattern_lets_everything_through_and_any_pattern_suffices() -> None:
    assert passes([], record("REMOVE", "x"))
    other = {"eventName": ["REMOVE"]}
    assert passes([TERMINAL, other], record("REMOVE", "x"))
    assert not passes([TERMINAL], record("REMOVE", "x"))


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ({"prefix": "up"}, {"k": "uploads/a"}, True),
        ({"prefix": "up"}, {"k": "out/a"}, False),
        ({"exists": True}, {"k": 1}, True),
        ({"exists": False}, {}, True),
        ({"exists": False}, {"k": 1}, False),
        ({"anything-but": ["a"]}, {"k": "b"}, True),
        ({"anything-but": ["a"]}, {"k": "a"}, False),
        ({"numeric": ["=", 3]}, {"k": 3}, True),
    ],
)
def test_operators(rule: dict[str, object], value: dict[str, object], expected: bool) -> None:
    assert matches({"k": [rule]}, value) is expected


def test_an_operator_it_does_not_know_is_refused_not_guessed() -> None:
    with pytest.raises(UnsupportedPatternError):
        matches({"k": [{"cidr": "10.0.0.0/8"}]}, {"k": "10.0.0.1"})
