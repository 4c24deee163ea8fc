"""The template's event patterns, matched by moto's EventPattern as the local stack matches them
(filejobs_dev/local/filter_criteria.py for the event sources' FilterCriteria; moto's event bus
for the rules): which records reach the events function, which events reach the webhooks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.events.exceptions import InvalidEventPatternException
from moto.events.models import EventPattern

from filejobs_dev.infra.template import load_template
from filejobs_dev.local.filter_criteria import filter_patterns, passes


def event_sources_with_filters() -> dict[str, dict[str, Any]]:
    """Each event source of the template that filters, by name, with its properties."""
    return {
        name: event["Properties"]
        for resource in load_template()["Resources"].values()
        for name, event in resource.get("Properties", {}).get("Events", {}).items()
        if "FilterCriteria" in event.get("Properties", {})
    }


def stream_record(event_name: str, **image: str) -> dict[str, Any]:
    """A DynamoDB stream record as boto3 reads it (its time a datetime), new image `image`."""
    return {
        "eventID": "1",
        "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2026, 12, 5, 12, 0, tzinfo=UTC),
            "Keys": {"pk": {"S": "file#1"}},
            "NewImage": {name: {"S": value} for name, value in image.items()},
            "SequenceNumber": "100",
            "SizeBytes": 42,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def test_the_template_filters_two_event_sources_and_this_file_specifies_both() -> None:
    # a new filtered event source needs its own cases below
    assert set(event_sources_with_filters()) == {"JobChanges", "FileChanges"}


@pytest.mark.parametrize(
    ("record", "delivered"),
    [
        (stream_record("MODIFY", status="completed"), True),
        (stream_record("MODIFY", status="failed"), True),
        (stream_record("MODIFY", status="cancelled"), True),
        (stream_record("MODIFY", status="running"), False),
        (stream_record("INSERT", status="completed"), False),
        (stream_record("REMOVE"), False),
    ],
)
def test_job_changes_reach_the_events_function_only_when_a_job_ends(
    record: dict[str, Any], delivered: bool
) -> None:
    patterns = filter_patterns(event_sources_with_filters()["JobChanges"])
    assert passes(patterns, record) is delivered


@pytest.mark.parametrize(
    ("record", "delivered"),
    [
        (stream_record("MODIFY", status="quarantined"), True),
        (stream_record("MODIFY", status="deleted"), True),
        (stream_record("MODIFY", status="stored", processed_fingerprint="f1"), True),
        (stream_record("INSERT", status="rejected"), True),
        (stream_record("MODIFY", status="stored"), False),
        (stream_record("INSERT", status="stored"), False),
        (stream_record("MODIFY", status="rejected"), False),
        (stream_record("INSERT", status="quarantined"), False),
    ],
)
def test_file_changes_reach_the_events_function_when_a_file_is_settled(
    record: dict[str, Any], delivered: bool
) -> None:
    patterns = filter_patterns(event_sources_with_filters()["FileChanges"])
    assert passes(patterns, record) is delivered


def test_an_event_source_without_filters_delivers_every_record() -> None:
    assert filter_patterns({}) == []
    assert passes([], stream_record("REMOVE"))


def test_a_pattern_lambda_would_refuse_stops_the_poller_s_start() -> None:
    with pytest.raises(InvalidEventPatternException):
        filter_patterns({"FilterCriteria": {"Filters": [{"Pattern": '{"eventName": "MODIFY"}'}]}})


@pytest.mark.parametrize(
    ("event", "delivered"),
    [
        ({"source": "filejobs", "detail-type": "Job Completed"}, True),
        ({"source": "filejobs", "detail-type": "File Deleted"}, True),
        ({"source": "filejobs", "detail-type": "Upload Rejected"}, True),
        ({"source": "filejobs", "detail-type": "Job Started"}, False),
        ({"source": "other", "detail-type": "Job Completed"}, False),
    ],
)
def test_the_webhooks_rule_takes_the_tenants_events_as_moto_s_bus_matches_it(
    event: dict[str, Any], delivered: bool
) -> None:
    rule = load_template()["Resources"]["WebhookEventsRule"]["Properties"]
    pattern = EventPattern.load(json.dumps(rule["EventPattern"]))
    as_put_on_the_bus = json.loads(json.dumps({**event, "detail": {}}))
    matched: bool = pattern.matches_event(as_put_on_the_bus)
    assert matched is delivered
