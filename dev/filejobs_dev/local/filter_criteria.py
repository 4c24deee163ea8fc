"""Lambda event filtering (an event source's FilterCriteria), as the local stack's pollers apply it.

Lambda drops the records that match none of an event source's filter patterns before the
function sees them. The patterns use EventBridge's syntax, so they are matched by moto's own
EventBridge matcher (`moto.events.models.EventPattern`, the one moto's event buses use for the
template's rules), not by a matcher of our own. A pattern moto refuses (a value that is neither
an object nor a list, an empty list, bad JSON) stops the poller's start, as Lambda refuses it.

One shim: moto's matcher copies the record through JSON, and a DynamoDB stream record read with
boto3 carries a datetime (`ApproximateCreationDateTime`) that JSON cannot hold; it is matched as
its ISO text, which no pattern of the template reads.

moto is imported on first use: of the function hosts, only those whose event sources filter
(the events function's streams) pay its import (about 0.6 s).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def filter_patterns(event_properties: dict[str, Any]) -> list[Any]:
    """moto's EventPattern for each of an event source's FilterCriteria (none: all pass)."""
    filters = event_properties.get("FilterCriteria", {}).get("Filters", [])
    if not filters:
        return []
    from moto.events.models import EventPattern  # noqa: PLC0415 (only filtering hosts pay it)

    return [EventPattern.load(f["Pattern"]) for f in filters]


def passes(patterns: list[Any], record: dict[str, Any]) -> bool:
    """True when the record matches any pattern, or there is no pattern."""
    if not patterns:
        return True
    as_json = json.loads(json.dumps(record, default=_iso))
    return any(pattern.matches_event(as_json) for pattern in patterns)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} in a record to filter")
