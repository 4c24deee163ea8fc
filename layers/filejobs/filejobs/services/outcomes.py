"""Announce outcomes: turn one committed table change into at most one event on the bus.

Fed by the tables' streams (see domain/events.py for what is announced). Delivery is
at-least-once: a stream batch that fails part-way is retried, so a consumer may see an event
twice and drops the copy by its `event_id`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from filejobs.data.stream import file_from_image, job_from_image
from filejobs.domain.events import (
    DetailType,
    file_event_id,
    file_outcome,
    job_event_id,
    job_outcome,
)
from filejobs.views import file_view, job_view

# EventBridge refuses entries over 256 KB; a job's result_data is the only unbounded part.
MAX_DETAIL_BYTES = 200_000


class Table(StrEnum):
    JOBS = "jobs"
    FILES = "files"


@dataclass(frozen=True)
class Change:
    """One stream record: the item before and after a write (None when it did not exist)."""

    table: Table
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class OutcomeEvent:
    event_id: str
    detail_type: DetailType
    detail: dict[str, Any]
    time: datetime


class EventPublisher(Protocol):
    def publish(self, event: OutcomeEvent) -> None: ...


class OutcomeService:
    def __init__(self, publisher: EventPublisher) -> None:
        self._publisher = publisher

    def announce(self, change: Change) -> OutcomeEvent | None:
        event = outcome_event(change)
        if event is not None:
            self._publisher.publish(event)
        return event


def outcome_event(change: Change) -> OutcomeEvent | None:
    if change.after is None:  # a delete (TTL expiry) ends nothing
        return None
    if change.table is Table.JOBS:
        return _job_event(change.before, change.after)
    return _file_event(change.before, change.after)


def _job_event(before: dict[str, Any] | None, after: dict[str, Any]) -> OutcomeEvent | None:
    job = job_from_image(after)
    detail_type = job_outcome(None if before is None else job_from_image(before), job)
    if detail_type is None:
        return None
    event_id = job_event_id(job)
    detail = {"event_id": event_id, **job_view(job)}
    if len(json.dumps(detail, default=str)) > MAX_DETAIL_BYTES:
        detail["result"] = {"truncated": True}
    return OutcomeEvent(event_id, detail_type, detail, job.metadata.updated_at)


def _file_event(before: dict[str, Any] | None, after: dict[str, Any]) -> OutcomeEvent | None:
    stored = file_from_image(after)
    detail_type = file_outcome(None if before is None else file_from_image(before), stored)
    if detail_type is None:
        return None
    event_id = file_event_id(stored)
    detail = {"event_id": event_id, **file_view(stored)}
    return OutcomeEvent(event_id, detail_type, detail, stored.metadata.updated_at)
