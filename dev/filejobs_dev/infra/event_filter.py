"""Lambda event filtering (FilterCriteria), for whoever runs the template's event sources.

Lambda drops the records that match none of an event source's filter patterns before the
function sees them. The patterns use EventBridge's syntax; this implements the part of it a
template may use here: nested objects, lists of allowed values, and the `prefix`, `exists`,
`anything-but` and `numeric` equality operators. Anything else is refused loudly rather than
matched wrongly.
"""

from __future__ import annotations

import json
from typing import Any


class UnsupportedPatternError(ValueError):
    """A filter pattern uses syntax this matcher does not implement."""


def filter_patterns(event_properties: dict[str, Any]) -> list[dict[str, Any]]:
    """The parsed patterns of an event source's FilterCriteria (none: every record passes)."""
    filters = event_properties.get("FilterCriteria", {}).get("Filters", [])
    return [json.loads(f["Pattern"]) for f in filters]


def passes(patterns: list[dict[str, Any]], record: dict[str, Any]) -> bool:
    """True when the record matches any pattern, or there is no pattern."""
    return not patterns or any(matches(pattern, record) for pattern in patterns)


def matches(pattern: dict[str, Any], value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    for key, expected in pattern.items():
        present = key in value
        if isinstance(expected, dict):
            if not present or not matches(expected, value[key]):
                return False
        elif isinstance(expected, list):
            if not _leaf_matches(expected, present, value.get(key)):
                return False
        else:
            raise UnsupportedPatternError(f"pattern value for {key!r} must be an object or a list")
    return True


def _leaf_matches(allowed: list[Any], present: bool, actual: Any) -> bool:
    # A list value matches when any element of it does (EventBridge semantics for arrays).
    candidates = actual if isinstance(actual, list) else [actual]
    return any(_rule_matches(rule, present, c) for rule in allowed for c in candidates)


def _rule_matches(rule: Any, present: bool, actual: Any) -> bool:
    if not isinstance(rule, dict):
        return present and actual == rule
    ((operator, operand),) = rule.items()
    if operator == "exists":
        return present is bool(operand)
    if not present:
        return False
    if operator == "prefix":
        return isinstance(actual, str) and actual.startswith(operand)
    if operator == "anything-but":
        excluded = operand if isinstance(operand, list) else [operand]
        return actual not in excluded
    if operator == "numeric" and len(operand) == 2 and operand[0] == "=":
        return isinstance(actual, int | float) and actual == operand[1]
    raise UnsupportedPatternError(f"filter operator {operator!r} is not supported")
