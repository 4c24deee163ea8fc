"""Announce outcomes: turn one committed table change into at most one event on the bus.

Fed by the tables' streams (see domain/outcome_events.py for what is announced). Delivery is
at-least-once: a stream batch that fails part-way is retried, so a consumer may see an event
twice and drops the copy by its `event_id`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from filejobs.domain.file import StoredFile
from filejobs.domain.job import ProcessingJob
from filejobs.domain.outcome_events import (
    DetailType,
    OutcomeEvent,
    completion_event_id,
    file_event_id,
    file_outcome,
    file_processed,
    job_event_id,
    job_outcome,
)
from filejobs.ports import EventPublisher
from filejobs.views import file_view, job_view

# EventBridge refuses entries over 256 KB; a job's result_data is the only unbounded part.
MAX_DETAIL_BYTES = 200_000


@dataclass(frozen=True)
class JobChange:
    """One committed write of a job: before and after (None when it did not exist)."""

    before: ProcessingJob | None
    after: ProcessingJob | None


@dataclass(frozen=True)
class FileChange:
    """One committed write of a file: before and after (None when it did not exist)."""

    before: StoredFile | None
    after: StoredFile | None


type Change = JobChange | FileChange


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
    if isinstance(change, JobChange):
        return _job_event(change.before, change.after)
    return _file_event(change.before, change.after)


def _job_event(before: ProcessingJob | None, job: ProcessingJob) -> OutcomeEvent | None:
    detail_type = job_outcome(before, job)
    if detail_type is None:
        return None
    event_id = job_event_id(job)
    detail = {"event_id": event_id, **job_view(job)}
    if _json_size(detail) > MAX_DETAIL_BYTES:
        detail["result"] = {"truncated": True}
    return OutcomeEvent(event_id, detail_type, detail, job.metadata.updated_at)


def _file_event(before: StoredFile | None, stored: StoredFile) -> OutcomeEvent | None:
    detail_type = file_outcome(before, stored)
    if detail_type is None:
        return _completion_event(before, stored)
    event_id = file_event_id(stored)
    detail = {"event_id": event_id, **file_view(stored)}
    if detail_type is DetailType.UPLOAD_REJECTED:
        detail["reason"] = stored.status_reason
    return OutcomeEvent(event_id, detail_type, detail, stored.metadata.updated_at)


def _completion_event(before: StoredFile | None, stored: StoredFile) -> OutcomeEvent | None:
    completion = stored.processed
    if completion is None or not file_processed(before, stored):
        return None
    event_id = completion_event_id(stored, completion)
    detail = bounded({"event_id": event_id, **file_view(stored)})
    return OutcomeEvent(event_id, DetailType.FILE_PROCESSED, detail, completion.completed_at)


def bounded(detail: dict[str, Any]) -> dict[str, Any]:
    """A file's detail within MAX_DETAIL_BYTES. Its bundle is bounded per job, not per file: a
    file given many jobs (API jobs, rescans) could pass EventBridge's 256 KB. The jobs' own
    lists go first (counted in each `more_outputs`; the top-level list holds each file once),
    then the top-level list is cut, saying so (`outputs_truncated`): GET /files/{id} lists all."""
    if _json_size(detail) <= MAX_DETAIL_BYTES:
        return detail
    processed = detail.get("processed") or {}
    for job in processed.get("jobs", []):
        job["more_outputs"] = job.get("more_outputs", 0) + len(job.get("outputs", []))
        job["outputs"] = []
    outputs = detail.get("outputs", [])
    while outputs and _json_size(detail) > MAX_DETAIL_BYTES:
        del outputs[len(outputs) // 2 :]
        detail["outputs_truncated"] = True
    return detail


def _json_size(value: object) -> int:
    return len(json.dumps(value, default=str))
