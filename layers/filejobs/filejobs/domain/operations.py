"""Bulk operations: one action (retry, cancel, rescan, delete) on every job a filter matches,
or on every file of a tenant under a key prefix: a schedule's runs (domain/schedules.py), and a
tenant's erasure (domain/tenant_erasure.py).

An operation is recorded before it runs (who, when, why, what filter: the audit record), then
advanced page by page: each page's jobs are changed one conditional write each, and its progress
(processed, changed, skipped, errors, where the next page starts) recorded by one conditional
write that holds only if no other run recorded that page first. So a page delivered twice is
counted once, and a job an operation meets twice is changed once (the second time its status no
longer allows the action: skipped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from filejobs.domain.failures import group_of, parse_group_id
from filejobs.domain.job import JobStatus, JobType, ProcessingJob

# A reason is required and shown in the audit list.
MAX_REASON_CHARS = 500
MAX_ERROR_TEXT_CHARS = 200
# Jobs per page of an operation, and the most it changes a second (the page after waits).
PAGE_SIZE = 50


class Action(StrEnum):
    RETRY = "retry"
    CANCEL = "cancel"
    RESCAN = "rescan"
    DELETE = "delete"
    # A new job of a type on each file of a file selection (a schedule's runs).
    RUN = "run"
    # Every file of a tenant erased, then what the tenant left besides (an operator's only).
    ERASE = "erase"


# What POST /operations may ask for (RUN is a schedule's, over files).
BULK_ACTIONS = (Action.RETRY, Action.CANCEL, Action.RESCAN, Action.DELETE)

_ACTIVE = frozenset({JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING})
_FINISHED = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})

# The statuses whose jobs an action can change: the others it would only skip.
ACTS_ON: dict[Action, frozenset[JobStatus]] = {
    Action.RETRY: frozenset({JobStatus.FAILED, JobStatus.CANCELLED}),
    Action.CANCEL: _ACTIVE,
    Action.DELETE: _FINISHED,
    Action.RESCAN: _ACTIVE | _FINISHED,
    Action.RUN: frozenset(),  # acts on files, never on jobs a filter lists
    Action.ERASE: frozenset(),  # so does an erasure
}


class OperationStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class FilterError(ValueError):
    """A filter that cannot select jobs (its message says which field and why)."""


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: every field given must match (None: any)."""

    tenant: str | None = None
    job_type: JobType | None = None
    status: JobStatus | None = None
    group: str | None = None  # a failure group's id (domain/failures.py): failed jobs only
    error: str | None = None  # text the error message contains
    since: datetime | None = None  # created at or after
    until: datetime | None = None  # created before

    def __post_init__(self) -> None:
        if self.group is not None:
            parsed = parse_group_id(self.group)
            if parsed is None:
                raise FilterError(f"group: {self.group[:80]!r} is not a failure group id")
            if self.job_type is not None and self.job_type is not parsed[0]:
                raise FilterError("group: the group is of another job type than job_type")
            if self.status not in (None, JobStatus.FAILED):
                raise FilterError("group: a failure group holds failed jobs only")
        if self.error is not None and not 0 < len(self.error) <= MAX_ERROR_TEXT_CHARS:
            raise FilterError(f"error: 1 to {MAX_ERROR_TEXT_CHARS} characters")
        if self.since and self.until and self.since >= self.until:
            raise FilterError("since: must be before until")

    @property
    def group_type(self) -> JobType | None:
        parsed = None if self.group is None else parse_group_id(self.group)
        return None if parsed is None else parsed[0]

    @property
    def effective_type(self) -> JobType | None:
        return self.job_type or self.group_type

    def statuses(self, action: Action | None = None) -> list[JobStatus]:
        """The statuses a listing must read, in a fixed order (an operation pages through them)."""
        wanted = set(JobStatus)
        if self.status is not None:
            wanted = {self.status}
        if self.group is not None or self.error is not None:
            wanted &= {JobStatus.FAILED, JobStatus.CANCELLED} if self.error else {JobStatus.FAILED}
        if action is not None:
            wanted &= ACTS_ON[action]
        return [s for s in JobStatus if s in wanted]

    def matches(self, job: ProcessingJob) -> bool:
        created = job.metadata.created_at
        return (
            job.metadata.deleted_at is None
            and self.tenant in (None, job.tenant)
            and self.effective_type in (None, job.job_type)
            and self.status in (None, job.status)
            and (self.group is None or self._in_group(job))
            and (self.error is None or self.error in (job.error_message or ""))
            and (self.since is None or created >= self.since)
            and (self.until is None or created < self.until)
        )

    def _in_group(self, job: ProcessingJob) -> bool:
        return (
            job.status is JobStatus.FAILED
            and group_of(job.job_type, job.error_message).id == self.group
        )

    def to_dict(self) -> dict[str, Any]:
        """The filter as the API shows it and the audit record keeps it: given fields only."""
        raw: dict[str, Any] = {
            "tenant": self.tenant,
            "job_type": None if self.job_type is None else self.job_type.value,
            "status": None if self.status is None else self.status.value,
            "group": self.group,
            "error": self.error,
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
        }
        return {k: v for k, v in raw.items() if v is not None}

    def scoped_to(self, tenant: str) -> JobFilter:
        return replace(self, tenant=tenant)


@dataclass(frozen=True)
class FileSelection:
    """The files an operation acts on, instead of jobs: a tenant's, under a key prefix. With
    RUN, the job each of them gets (its type and input options)."""

    tenant: str
    prefix: str
    job_type: JobType | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"tenant": self.tenant, "prefix": self.prefix}
        if self.job_type is not None:
            raw["job_type"] = self.job_type.value
        if self.options:
            raw["options"] = dict(self.options)
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FileSelection:
        job_type = raw.get("job_type")
        return cls(
            tenant=str(raw["tenant"]),
            prefix=str(raw.get("prefix", "")),
            job_type=None if job_type is None else JobType(job_type),
            options=dict(raw.get("options") or {}),
        )


@dataclass(frozen=True)
class Progress:
    processed: int = 0
    changed: int = 0
    skipped: int = 0
    errors: int = 0

    def __add__(self, other: Progress) -> Progress:
        return Progress(
            self.processed + other.processed,
            self.changed + other.changed,
            self.skipped + other.skipped,
            self.errors + other.errors,
        )


@dataclass(frozen=True)
class Operation:
    id: str
    action: Action
    filter: JobFilter
    reason: str
    created_by: str
    created_at: datetime
    updated_at: datetime
    matched: int  # the dry-run count when it started
    status: OperationStatus = OperationStatus.RUNNING
    progress: Progress = field(default_factory=Progress)
    # Where the next page starts: opaque to the domain (the job listing's cursor), None at start.
    cursor: str | None = None
    finished_at: datetime | None = None
    error: str | None = None
    request_hash: str = ""  # the request an Idempotency-Key was first used for
    # Set for an operation over files (its filter then names only the tenant).
    files: FileSelection | None = None
    schedule_id: str | None = None  # the schedule whose run this is
    # What an erasure removed so far, by kind (domain/tenant_erasure.py REMOVED_KINDS).
    removed: dict[str, int] = field(default_factory=dict)

    @property
    def tenant(self) -> str | None:
        return self.filter.tenant

    @property
    def finished(self) -> bool:
        return self.status is not OperationStatus.RUNNING


_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
OPERATION_ID_PATTERN = r"^op-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$"
_ID = re.compile(OPERATION_ID_PATTERN)


def is_idempotency_key(value: str) -> bool:
    return bool(_KEY.match(value))


def is_operation_id(value: str) -> bool:
    return bool(_ID.match(value))
