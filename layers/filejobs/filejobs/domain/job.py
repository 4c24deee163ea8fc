"""The ProcessingJob entity: the spec's model and methods, pure Python, no I/O.

Every status change is a `Transition` (see `transitions.py`): a guard on the current state and
the changes to make. The entity applies a transition in memory; the repository turns the very
same transition into one conditional DynamoDB write. So what Python allows and what the database
allows can never drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from filejobs.domain import transitions
from filejobs.domain.attempt_notes import AttemptProgress
from filejobs.domain.job_values import (
    ACTIVE_STATUSES,
    ATTEMPT_HISTORY_LIMIT,
    DEFAULT_MAX_RETRIES,
    ERROR_MESSAGE_LIMIT,
    EXPLICIT_RETRIES_LIMIT,
    MAX_RETRIES_LIMIT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TERMINAL_STATUSES,
    Attempt,
    AttemptOutcome,
    AuditMetadata,
    JobStatus,
    JobType,
)

# The values are part of the job's vocabulary: callers import them from here with the entity.
__all__ = [
    "ACTIVE_STATUSES",
    "ATTEMPT_HISTORY_LIMIT",
    "DEFAULT_MAX_RETRIES",
    "ERROR_MESSAGE_LIMIT",
    "EXPLICIT_RETRIES_LIMIT",
    "MAX_RETRIES_LIMIT",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "TERMINAL_STATUSES",
    "Attempt",
    "AttemptOutcome",
    "AuditMetadata",
    "InvalidJobError",
    "JobError",
    "JobStatus",
    "JobType",
    "ProcessingJob",
]


def is_retry_budget(value: object) -> bool:
    """A `max_retries` a job may have: an integer (not a bool) from 1 to MAX_RETRIES_LIMIT."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return 1 <= value <= MAX_RETRIES_LIMIT


class InvalidJobError(ValueError):
    """A job that may not exist: a value outside what the API accepts (a priority, a retry
    budget). Whatever path builds it (the API, a preset, an operation, a schedule, the CLI)."""


class JobError(Exception):
    """An illegal transition, raised by the entity's methods. `reason` says which guard failed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class ProcessingJob:
    """An async processing job with retries, a lease and a fencing token.

    `attempt` counts claims: it is the fencing token a worker carries, so a worker whose lease
    was taken over can never write the outcome of a newer attempt. `retry_count` counts the
    retries spent (spec: `retry_count <= max_retries`).
    """

    id: str
    file_id: str
    job_type: JobType
    tenant: str
    idempotency_key: str
    metadata: AuditMetadata
    status: JobStatus = JobStatus.PENDING
    priority: int = 0
    input_data: dict[str, Any] | None = None
    result_data: dict[str, Any] | None = None
    error_message: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    retry_count: int = 0
    max_retries: int = DEFAULT_MAX_RETRIES
    scheduled_at: datetime | None = None
    lease_expires_at: datetime | None = None
    attempt: int = 0
    attempts: dict[int, Attempt] = field(default_factory=dict)
    # When the sweep next has to look at this job (sparse index); None once terminal.
    sweep_at: datetime | None = None
    dispatch_count: int = 0
    # When its message was last sent after its creation (a sweep's re-dispatch, a retry).
    dispatched_at: datetime | None = None
    triggered_by: str | None = None
    cancelled_by: str | None = None
    cancel_reason: str | None = None
    # Epoch seconds after which DynamoDB TTL may delete a finished job.
    expires_at: int | None = None
    # The running attempt's progress and log so far, as its last heartbeat wrote them; moved
    # into the attempt's record when it ends (a cancel leaves it: where the attempt stopped).
    progress: AttemptProgress | None = None

    def __post_init__(self) -> None:
        if not PRIORITY_MIN <= self.priority <= PRIORITY_MAX:
            raise InvalidJobError(f"priority must be within {PRIORITY_MIN}..{PRIORITY_MAX}")
        if not is_retry_budget(self.max_retries):
            # In the API's words (api/parsing.py): whichever path built the job, the same rule.
            raise InvalidJobError(
                f"max_retries: must be an integer from 1 to {MAX_RETRIES_LIMIT} (retries after "
                f"the first attempt); got {repr(self.max_retries)[:40]}"
            )

    # --- the spec's methods -------------------------------------------------------------

    def can_retry(self) -> bool:
        return self.retry_count < self.max_retries

    def attempts_allowed(self) -> int:
        """Attempts the job may ever run, explicit retries included: its first budget
        (max_retries + 1) and EXPLICIT_RETRIES_LIMIT more of the same."""
        return (self.max_retries + 1) * (EXPLICIT_RETRIES_LIMIT + 1)

    def increment_retry(self) -> None:
        if not self.can_retry():
            raise JobError(
                "retries_exhausted",
                f"job {self.id} has used all {self.max_retries} retries",
            )
        self.retry_count += 1

    def mark_started(self, *, now: datetime, lease: timedelta, worker: str) -> None:
        self.apply(transitions.claim(now=now, lease=lease, worker=worker))

    def mark_completed(
        self, result: dict[str, Any], *, now: datetime, retention: timedelta
    ) -> None:
        self.apply(transitions.complete(self, result=result, now=now, retention=retention))

    def mark_failed(
        self,
        error: str,
        *,
        now: datetime,
        retention: timedelta,
        retry_at: datetime | None = None,
    ) -> None:
        """Fail the current attempt: scheduled for `retry_at` if a retry is allowed, else failed."""
        self.apply(
            transitions.fail(self, error=error, now=now, retry_at=retry_at, retention=retention)
        )

    def cancel(self, *, now: datetime, by: str, reason: str, retention: timedelta) -> None:
        self.apply(transitions.cancel(now=now, by=by, reason=reason, retention=retention))

    def current_progress(self) -> AttemptProgress | None:
        """The progress of the job's current attempt, if its heartbeat carried any: never an
        earlier attempt's."""
        if self.progress is None or self.progress.attempt != self.attempt:
            return None
        return self.progress

    def duration(self) -> timedelta | None:
        """How long the last attempt ran; None until it has both started and finished.

        The last attempt may have ended well before the job did: it failed with a retry left,
        then the job was cancelled, dead-lettered or abandoned while waiting for that retry.
        `completed_at` is then when the job ended, not the attempt, so the attempt's own record
        gives the end; the backoff wait is not processing time. A job cancelled while running
        has no record for its attempt (the cancel ends it), so it ran until `completed_at`.
        """
        if self.started_at is None or self.completed_at is None:
            return None
        last = self.attempts.get(self.attempt)
        ended_at = self.completed_at if last is None else last.ended_at
        return ended_at - self.started_at

    # --- transitions ----------------------------------------------------------------------

    def apply(self, transition: transitions.Transition) -> None:
        """Check the transition's guard against this job, then make its changes (or raise)."""
        refusal = transition.guard.refusal(self)
        if refusal is not None:
            raise JobError(refusal, f"cannot {transition.name} job {self.id}: {refusal}")
        transition.changes.apply_to(self)

    @property
    def is_terminal(self) -> bool:
        return self.status.is_terminal

    def copy(self) -> ProcessingJob:
        return replace(
            self,
            metadata=replace(self.metadata),
            attempts=dict(self.attempts),
            input_data=None if self.input_data is None else dict(self.input_data),
            result_data=None if self.result_data is None else dict(self.result_data),
        )

    def invariant_violations(self) -> list[str]:
        """The spec's invariants plus this design's; empty when the job is consistent."""
        problems: list[str] = []
        if not 0 <= self.retry_count <= self.max_retries:
            problems.append(f"retry_count {self.retry_count} outside 0..{self.max_retries}")
        if not is_retry_budget(self.max_retries):
            problems.append(f"max_retries {self.max_retries!r} outside 1..{MAX_RETRIES_LIMIT}")
        if self.status is JobStatus.RUNNING and self.started_at is None:
            problems.append("running without started_at")
        if self.status is JobStatus.RUNNING and self.lease_expires_at is None:
            problems.append("running without a lease")
        if self.status is JobStatus.COMPLETED and self.completed_at is None:
            problems.append("completed without completed_at")
        if self.status is JobStatus.SCHEDULED and self.scheduled_at is None:
            problems.append("scheduled without scheduled_at")
        if self.status.is_terminal and self.scheduled_at is not None:
            problems.append("finished job still scheduled for a retry")
        if self.status.is_terminal and self.sweep_at is not None:
            problems.append("terminal job still in the sweep index")
        if not self.status.is_terminal and self.sweep_at is None:
            problems.append("active job missing from the sweep index")
        if len(self.attempts) > ATTEMPT_HISTORY_LIMIT:
            problems.append(f"attempt history longer than {ATTEMPT_HISTORY_LIMIT}")
        if any(n > self.attempt for n in self.attempts):
            problems.append("history records an attempt that never started")
        return problems
