"""The values a ProcessingJob is made of: its status and type, the record of one attempt, its
audit metadata and the limits on its fields.

They sit apart from the entity so that `transitions.py` (the state machine) and `job.py` (the
entity that applies it) both build on them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from filejobs.domain.attempt_notes import AttemptNotes


class JobStatus(StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})
ACTIVE_STATUSES = frozenset({JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING})


class JobType(StrEnum):
    THUMBNAIL_GENERATION = "thumbnail_generation"
    VIDEO_THUMBNAIL = "video_thumbnail"
    DOCUMENT_PREVIEW = "document_preview"
    COMPRESSION = "compression"
    VIRUS_SCAN = "virus_scan"
    DEDUPLICATION_CHECK = "deduplication_check"


class AttemptOutcome(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"  # failed for good: no retry
    RETRYING = "retrying"  # failed, a retry is scheduled
    LEASE_EXPIRED = "lease_expired"  # the worker vanished; the sweep recovered the job


PRIORITY_MIN = -100
PRIORITY_MAX = 100
DEFAULT_MAX_RETRIES = 3
MAX_RETRIES_LIMIT = 25
# An explicit retry starts a fresh retry budget; a job may run this many budgets' worth of
# attempts beyond its first (ProcessingJob.attempts_allowed), then a caller who wants more asks
# for a new job: no tenant can keep one job failing and retrying for ever.
EXPLICIT_RETRIES_LIMIT = 5
# Attempts kept per job: enough to see a retry story, bounded so an item stays far below 400 KB.
ATTEMPT_HISTORY_LIMIT = 10
ERROR_MESSAGE_LIMIT = 2000


@dataclass(frozen=True)
class Attempt:
    """One run of the job by a worker: kept in the job's bounded attempt history."""

    number: int
    started_at: datetime
    ended_at: datetime
    outcome: AttemptOutcome
    error: str | None = None
    # Its progress and bounded log as it ended (domain/attempt_notes.py); empty when it said none.
    notes: AttemptNotes = field(default_factory=AttemptNotes)


@dataclass
class AuditMetadata:
    created_at: datetime
    updated_at: datetime
    created_by: str
    updated_by: str
    deleted_at: datetime | None = None
    deleted_by: str | None = None
