"""Outcome events: which recorded changes the outside world hears about.

A change is published when a job enters a terminal status (completed, failed, cancelled), a
file enters quarantine or is deleted (its object deleted in S3), an upload is recorded rejected
(over its tenant's quotas), or a file is
recorded processed (all of its jobs terminal: domain/file_completion.py). The
decision looks only at the item before and after one write, as the table's stream delivers it,
so every writer (worker, sweep, API, ingest) is covered without publishing anything itself, and
a write that never committed can never be announced.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.file_completion import FileCompletion
from filejobs.domain.job import JobStatus, ProcessingJob

SOURCE = "filejobs"


class DetailType(StrEnum):
    JOB_COMPLETED = "Job Completed"
    JOB_FAILED = "Job Failed"
    JOB_CANCELLED = "Job Cancelled"
    FILE_QUARANTINED = "File Quarantined"
    UPLOAD_REJECTED = "Upload Rejected"
    FILE_PROCESSED = "File Processed"
    # Deleted from the uploads bucket, or hidden by a delete marker (domain/file_lifecycle.py).
    FILE_DELETED = "File Deleted"


_JOB_OUTCOMES = {
    JobStatus.COMPLETED: DetailType.JOB_COMPLETED,
    JobStatus.FAILED: DetailType.JOB_FAILED,
    JobStatus.CANCELLED: DetailType.JOB_CANCELLED,
}


def job_outcome(before: ProcessingJob | None, after: ProcessingJob) -> DetailType | None:
    """The event a job write announces, if it moved the job into a terminal status.

    A write that leaves a terminal status as it was (a soft delete, say) announces nothing again;
    a job retried in place passes through pending and running, so its next ending is announced.
    """
    outcome = _JOB_OUTCOMES.get(after.status)
    if outcome is None or (before is not None and before.status is after.status):
        return None
    return outcome


_FILE_OUTCOMES = {
    FileStatus.QUARANTINED: DetailType.FILE_QUARANTINED,
    FileStatus.REJECTED: DetailType.UPLOAD_REJECTED,
    FileStatus.DELETED: DetailType.FILE_DELETED,
}


def file_outcome(before: StoredFile | None, after: StoredFile) -> DetailType | None:
    """The event a file write announces, if it put the file into quarantine, recorded an upload
    as rejected (the ingest writes a rejected file once, already rejected), or marked the file
    deleted (once: its reason changing later, a marker's file then deleted for good, is not a
    second deletion)."""
    outcome = _FILE_OUTCOMES.get(after.status)
    if outcome is None or (before is not None and before.status is after.status):
        return None
    return outcome


def file_processed(before: StoredFile | None, after: StoredFile) -> bool:
    """Whether the write recorded a new completion of the file (any later write of a processed
    file, a rescan's verdict say, carries the same completion and announces nothing)."""
    if after.processed is None:
        return False
    return (
        before is None
        or before.processed is None
        or (before.processed.fingerprint != after.processed.fingerprint)
    )


def job_event_id(job: ProcessingJob) -> str:
    """Names one announcement: a consumer that sees it twice (at-least-once) can drop the copy."""
    # updated_at changes on every write: a job cancelled, retried and cancelled again at the
    # same attempt is announced twice, under two ids.
    moment = job.metadata.updated_at.isoformat()
    return f"job:{job.id}:{job.attempt}:{job.status.value}:{moment}"


def file_event_id(stored: StoredFile) -> str:
    return f"file:{stored.id}:{stored.status.value}:{stored.metadata.updated_at.isoformat()}"


def completion_event_id(stored: StoredFile, completion: FileCompletion) -> str:
    """One id per completion: however many times it is recorded or announced, a consumer keeps
    one (its fingerprint names the jobs' attempts and statuses)."""
    return f"file:{stored.id}:processed:{completion.fingerprint}"


@dataclass(frozen=True)
class OutcomeEvent:
    """One announcement for the bus: its id (consumers drop a copy by it), kind and detail."""

    event_id: str
    detail_type: DetailType
    detail: dict[str, Any]
    time: datetime
