"""The job state machine as data: each transition is a guard plus the changes it makes.

    pending ──claim──▶ running ──complete──▶ completed
    pending ──abandon (never claimed after every re-dispatch)──▶ failed
    pending|scheduled ──fail_dead_lettered (its message is in the DLQ)──▶ failed
       ▲                │  │
       │ requeue        │  └──fail / lease lost, no retry left──▶ failed
       │                └──fail / lease lost, retry left──▶ scheduled ──claim (when due)──▶ running
    scheduled ──requeue (due)──▶ pending
    pending | scheduled (due) ──defer (its tenant at its cap: no attempt spent)──▶ pending
    pending | scheduled | running ──cancel──▶ cancelled
    failed | cancelled ──retry (explicit)──▶ pending
    completed | failed | cancelled ──delete (soft: deleted_at/deleted_by; out of the listings)

No transition leaves a terminal state except the explicit `retry`. `JobRepository` renders a
transition as one UpdateItem whose ConditionExpression is the guard; `ProcessingJob.apply` checks
the same guard in memory. A refused guard names a `Conflict`, the typed outcome of a lost race.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

from filejobs.domain.attempt_notes import AttemptNotes, AttemptProgress
from filejobs.domain.job_values import (
    ACTIVE_STATUSES,
    ATTEMPT_HISTORY_LIMIT,
    ERROR_MESSAGE_LIMIT,
    TERMINAL_STATUSES,
    Attempt,
    AttemptOutcome,
    AuditMetadata,
    JobStatus,
    JobType,
)
from filejobs.domain.time import epoch_seconds


class Conflict(StrEnum):
    """Why a transition was refused: the typed outcome of a lost race."""

    NOT_FOUND = "not_found"
    DELETED = "deleted"
    WRONG_TYPE = "wrong_type"  # a message for another job type's worker
    TAKEN = "taken"  # another worker holds the job
    STALE_ATTEMPT = "stale_attempt"  # the caller's attempt is no longer the job's current one
    CANCELLED = "cancelled"
    FINISHED = "finished"  # completed or failed
    NOT_DUE = "not_due"  # scheduled for later
    LEASE_ACTIVE = "lease_active"  # the worker's lease has not expired yet
    RETRIES_EXHAUSTED = "retries_exhausted"
    ACTIVE = "active"  # an explicit retry of a job that has not finished
    ATTEMPTS_SPENT = "attempts_spent"  # an explicit retry of a job that used every attempt it may
    CHANGED = "changed"  # the job moved on since the caller read it


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class JobState(Protocol):
    """A job as the transitions see it: what a guard reads and a change writes.

    `ProcessingJob` is the one implementation; naming only these fields keeps the state machine
    free of the entity (which applies it) and so of an import circle.
    """

    status: JobStatus
    job_type: JobType
    attempt: int
    attempts: dict[int, Attempt]
    max_retries: int
    dispatch_count: int
    metadata: AuditMetadata
    started_at: datetime | None
    scheduled_at: datetime | None
    lease_expires_at: datetime | None
    sweep_at: datetime | None
    completed_at: datetime | None
    progress: AttemptProgress | None

    def can_retry(self) -> bool: ...


@dataclass(frozen=True)
class Guard:
    """The legal source states of a transition. Every field that is set must hold."""

    statuses: frozenset[JobStatus]
    # A scheduled job qualifies only once scheduled_at <= this instant.
    scheduled_due_by: datetime | None = None
    # The fencing token: the job's current attempt must be the caller's.
    attempt: int | None = None
    job_type: JobType | None = None
    lease_expired_by: datetime | None = None
    retry_budget: bool = False  # retry_count < max_retries
    # The sweep's compare-and-set: the job is still as the sweep read it.
    sweep_at_is: datetime | None = None
    # An explicit retry's ceiling: the job has run fewer attempts than this in all.
    attempts_below: int | None = None
    # The retention's compare-and-set: the job still finished when the caller read it did.
    completed_at_is: datetime | None = None

    def refusal(self, job: JobState) -> Conflict | None:
        """The conflict that refuses this transition for `job`, or None when it may proceed."""
        if job.metadata.deleted_at is not None:
            return Conflict.DELETED
        if self.job_type is not None and job.job_type is not self.job_type:
            return Conflict.WRONG_TYPE
        if self.attempt is not None and job.attempt != self.attempt:
            # A newer attempt exists: whatever it became, the caller's attempt is over.
            return Conflict.STALE_ATTEMPT
        if job.status not in self.statuses:
            return self._status_conflict(job.status)
        checks: list[tuple[bool, Conflict]] = [
            (
                self.scheduled_due_by is not None
                and job.status is JobStatus.SCHEDULED
                and (job.scheduled_at is None or job.scheduled_at > self.scheduled_due_by),
                Conflict.NOT_DUE,
            ),
            (
                self.lease_expired_by is not None
                and (job.lease_expires_at is None or job.lease_expires_at > self.lease_expired_by),
                Conflict.LEASE_ACTIVE,
            ),
            (self.retry_budget and not job.can_retry(), Conflict.RETRIES_EXHAUSTED),
            (self.sweep_at_is is not None and job.sweep_at != self.sweep_at_is, Conflict.CHANGED),
            (
                self.attempts_below is not None and job.attempt >= self.attempts_below,
                Conflict.ATTEMPTS_SPENT,
            ),
            (
                self.completed_at_is is not None and job.completed_at != self.completed_at_is,
                Conflict.CHANGED,
            ),
        ]
        return next((conflict for failed, conflict in checks if failed), None)

    def _status_conflict(self, status: JobStatus) -> Conflict:
        if status is JobStatus.CANCELLED:
            return Conflict.CANCELLED
        if status.is_terminal:
            return Conflict.FINISHED
        if self.attempt is not None:
            return Conflict.STALE_ATTEMPT
        if not self.statuses & ACTIVE_STATUSES:
            return Conflict.ACTIVE
        if status is JobStatus.RUNNING:
            return Conflict.TAKEN
        return Conflict.CHANGED


@dataclass(frozen=True)
class Changes:
    """What a transition writes. Field names are `ProcessingJob` attribute names."""

    updated_at: datetime
    updated_by: str
    set: Mapping[str, Any] = field(default=_EMPTY)
    remove: frozenset[str] = frozenset()
    increment: Mapping[str, int] = field(default=_EMPTY)
    # Appended to the bounded attempt history (the oldest entry beyond the limit is dropped).
    record_attempt: Attempt | None = None

    @property
    def dropped_attempt(self) -> int | None:
        if self.record_attempt is None:
            return None
        oldest_kept = self.record_attempt.number - ATTEMPT_HISTORY_LIMIT + 1
        return oldest_kept - 1 if oldest_kept > 1 else None

    def apply_to(self, job: JobState) -> None:
        for name, value in self.set.items():
            _set_field(job, name, value)
        for name in self.remove:
            _set_field(job, name, None)
        for name, delta in self.increment.items():
            setattr(job, name, getattr(job, name) + delta)
        if self.record_attempt is not None:
            job.attempts[self.record_attempt.number] = self.record_attempt
            job.attempts = {
                n: a
                for n, a in job.attempts.items()
                if n > self.record_attempt.number - ATTEMPT_HISTORY_LIMIT
            }
        job.metadata.updated_at = self.updated_at
        job.metadata.updated_by = self.updated_by


@dataclass(frozen=True)
class Transition:
    name: str
    guard: Guard
    changes: Changes


# --- the transitions ------------------------------------------------------------------------


def _ready_to_run(now: datetime, job_type: JobType | None) -> Guard:
    """A job a worker may take now: pending, or scheduled and due (what claim and defer act on)."""
    return Guard(
        statuses=frozenset({JobStatus.PENDING, JobStatus.SCHEDULED}),
        scheduled_due_by=now,
        job_type=job_type,
    )


def claim(
    *, now: datetime, lease: timedelta, worker: str, job_type: JobType | None = None
) -> Transition:
    """pending, or scheduled and due -> running, taking a lease and the next attempt number."""
    lease_until = now + lease
    return Transition(
        "claim",
        _ready_to_run(now, job_type),
        Changes(
            updated_at=now,
            updated_by=worker,
            set={
                "status": JobStatus.RUNNING,
                "started_at": now,
                "lease_expires_at": lease_until,
                "sweep_at": lease_until,
            },
            # A new attempt starts with no progress (a cancelled one's may be left).
            remove=frozenset({"scheduled_at", "progress"}),
            increment={"attempt": 1},
        ),
    )


def heartbeat(
    job: JobState,
    *,
    now: datetime,
    lease: timedelta,
    worker: str,
    notes: AttemptNotes | None = None,
) -> Transition:
    """Extend the lease of the caller's running attempt; with `notes`, the attempt's progress
    and log so far ride the same write (domain/attempt_notes.py: no write of their own)."""
    lease_until = now + lease
    changes: dict[str, Any] = {"lease_expires_at": lease_until, "sweep_at": lease_until}
    if notes is not None and not notes.empty:
        changes["progress"] = AttemptProgress(job.attempt, now, notes)
    return Transition(
        "heartbeat",
        Guard(statuses=frozenset({JobStatus.RUNNING}), attempt=job.attempt),
        Changes(updated_at=now, updated_by=worker, set=changes),
    )


def complete(
    job: JobState,
    *,
    result: dict[str, Any],
    now: datetime,
    retention: timedelta,
    worker: str = "worker",
    notes: AttemptNotes | None = None,
) -> Transition:
    """running (the caller's attempt) -> completed with its result; the attempt's record keeps
    its `notes` (its progress whole) and the live progress goes."""
    return Transition(
        "complete",
        Guard(statuses=frozenset({JobStatus.RUNNING}), attempt=job.attempt),
        Changes(
            updated_at=now,
            updated_by=worker,
            set={
                "status": JobStatus.COMPLETED,
                "result_data": result,
                "completed_at": now,
                "expires_at": epoch_seconds(now + retention),
            },
            remove=frozenset({"lease_expires_at", "sweep_at", "error_message", "progress"}),
            record_attempt=_attempt_record(
                job, now, AttemptOutcome.COMPLETED, None, (notes or AttemptNotes()).finished()
            ),
        ),
    )


def fail(
    job: JobState,
    *,
    error: str,
    now: datetime,
    retry_at: datetime | None,
    retention: timedelta,
    worker: str = "worker",
    notes: AttemptNotes | None = None,
) -> Transition:
    """running (the caller's attempt) -> scheduled for `retry_at` when a retry is left, else failed.

    `retry_at=None` means the error is permanent: the job fails now whatever its budget. The
    attempt's record keeps its `notes` (progress and log as they were).
    """
    return _end_attempt(
        job,
        error=error,
        now=now,
        retry_at=retry_at,
        retention=retention,
        by=worker,
        guard=Guard(statuses=frozenset({JobStatus.RUNNING}), attempt=job.attempt),
        retry_outcome=AttemptOutcome.RETRYING,
        notes=notes,
    )


def recover_lease(
    job: JobState,
    *,
    now: datetime,
    retry_at: datetime | None,
    retention: timedelta,
) -> Transition:
    """The sweep's rescue of a job whose worker vanished: a failed attempt, retried if allowed.

    The attempt's record keeps what its last heartbeat carried (its progress and log so far).
    """
    lease = job.lease_expires_at.isoformat() if job.lease_expires_at else "unknown"
    error = (
        f"attempt {job.attempt} lost its lease at {lease}: the worker crashed or timed out "
        "before reporting an outcome"
    )
    if not job.can_retry():
        error += f"; no retries left (max_retries={job.max_retries})"
    return _end_attempt(
        job,
        error=error,
        now=now,
        retry_at=retry_at,
        retention=retention,
        by="sweep",
        guard=Guard(
            statuses=frozenset({JobStatus.RUNNING}),
            attempt=job.attempt,
            lease_expired_by=now,
        ),
        retry_outcome=AttemptOutcome.LEASE_EXPIRED,
        # The attempt ended because its worker vanished, retry or not: the job's status says
        # whether it goes on.
        final_outcome=AttemptOutcome.LEASE_EXPIRED,
        notes=None
        if job.progress is None or job.progress.attempt != job.attempt
        else (job.progress.notes),
    )


def cancel(*, now: datetime, by: str, reason: str, retention: timedelta) -> Transition:
    """pending | scheduled | running -> cancelled. A running worker's later writes then lose."""
    return Transition(
        "cancel",
        Guard(statuses=ACTIVE_STATUSES),
        Changes(
            updated_at=now,
            updated_by=by,
            set={
                "status": JobStatus.CANCELLED,
                "completed_at": now,
                "cancelled_by": by,
                "cancel_reason": _truncate(reason),
                "expires_at": epoch_seconds(now + retention),
            },
            remove=frozenset({"lease_expires_at", "sweep_at", "scheduled_at"}),
        ),
    )


def requeue_scheduled(*, now: datetime, dispatch_grace: timedelta) -> Transition:
    """The sweep's promotion of a due scheduled job to pending, done before it sends the message.

    Two overlapping sweeps cannot both win: the second finds the job pending already.
    """
    return Transition(
        "requeue",
        Guard(statuses=frozenset({JobStatus.SCHEDULED}), scheduled_due_by=now),
        Changes(
            updated_at=now,
            updated_by="sweep",
            set={
                "status": JobStatus.PENDING,
                "sweep_at": now + dispatch_grace,
                "dispatched_at": now,
            },
            remove=frozenset({"scheduled_at"}),
            increment={"dispatch_count": 1},
        ),
    )


def requeue_pending(job: JobState, *, now: datetime, next_check: datetime) -> Transition:
    """The sweep's re-dispatch of a pending job nobody claimed (its message was lost or is late).

    Compare-and-set on `sweep_at`, so one sweep run wins per due check.
    """
    return Transition(
        "requeue",
        Guard(statuses=frozenset({JobStatus.PENDING}), sweep_at_is=job.sweep_at),
        Changes(
            updated_at=now,
            updated_by="sweep",
            set={"sweep_at": next_check, "dispatched_at": now},
            increment={"dispatch_count": 1},
        ),
    )


def defer(
    *, now: datetime, until: datetime, dispatch_grace: timedelta, job_type: JobType, worker: str
) -> Transition:
    """A worker leaves a job its tenant has no free slot for (domain/fairness.py) and sends its
    message again, to come back at `until`: the job is pending (a due retry too), unclaimed, its
    attempts unspent. Recorded as a dispatch that is not counted against the job's dispatch
    budget, so the sweep neither gives up on a job that waits its turn nor sends a copy of a
    message that is simply delayed: it looks again only `dispatch_grace` after `until`.
    """
    return Transition(
        "defer",
        _ready_to_run(now, job_type),
        Changes(
            updated_at=now,
            updated_by=worker,
            set={
                "status": JobStatus.PENDING,
                "dispatched_at": until,
                "sweep_at": until + dispatch_grace,
            },
            remove=frozenset({"scheduled_at"}),
        ),
    )


def put_off_check(job: JobState, *, now: datetime, next_check: datetime) -> Transition:
    """The sweep leaves a waiting job alone until `next_check`: its message may still be queued
    behind others, or the gate it waits on (its file's virus scan) has not opened. Nothing is
    sent and nothing counted; compare-and-set on `sweep_at`, so one sweep run wins per check.
    """
    waiting = frozenset({JobStatus.PENDING, JobStatus.SCHEDULED}) & {job.status}
    return Transition(
        "put_off",
        Guard(statuses=waiting or frozenset({JobStatus.PENDING}), sweep_at_is=job.sweep_at),
        Changes(updated_at=now, updated_by="sweep", set={"sweep_at": next_check}),
    )


def abandon_pending(job: JobState, *, now: datetime, retention: timedelta) -> Transition:
    """The sweep gives up on a pending job no worker claimed after every re-dispatch.

    Without this a job whose worker is missing or misconfigured would stay pending forever.
    """
    return Transition(
        "fail",
        Guard(statuses=frozenset({JobStatus.PENDING}), sweep_at_is=job.sweep_at),
        Changes(
            updated_at=now,
            updated_by="sweep",
            set={
                "status": JobStatus.FAILED,
                "completed_at": now,
                "error_message": (
                    f"never claimed: dispatched {job.dispatch_count + 1} times since "
                    f"{job.metadata.created_at.isoformat()} and no {job.job_type.value} worker "
                    "took it (is that worker deployed and consuming its queue?)"
                ),
                "expires_at": epoch_seconds(now + retention),
            },
            remove=frozenset({"sweep_at"}),
        ),
    )


def fail_dead_lettered(job_type: JobType, *, now: datetime, retention: timedelta) -> Transition:
    """The sweep fails a job whose message its queue gave up on (moved to the dead-letter queue).

    Only a job still waiting for that message (pending or scheduled) is failed: a running one
    has a worker on it (another copy of the message got through), a finished one is settled.
    """
    return Transition(
        "fail",
        Guard(statuses=frozenset({JobStatus.PENDING, JobStatus.SCHEDULED}), job_type=job_type),
        Changes(
            updated_at=now,
            updated_by="sweep",
            set={
                "status": JobStatus.FAILED,
                "completed_at": now,
                "error_message": (
                    f"its message failed every delivery to the {job_type.value} worker and was "
                    "moved to the dead-letter queue (a malformed message, or a worker that "
                    "crashes on it); kept there for inspection"
                ),
                "expires_at": epoch_seconds(now + retention),
            },
            # A scheduled job loses its retry time with its retry: nothing will run it.
            remove=frozenset({"sweep_at", "scheduled_at"}),
        ),
    )


def retry(
    *, now: datetime, by: str, dispatch_grace: timedelta, attempts_below: int | None = None
) -> Transition:
    """The one way out of a terminal state: an explicit retry of a failed or cancelled job.

    In place: the id, attempt counter (fencing token) and attempt history are kept; the retry
    budget starts afresh. With `attempts_below`, only a job that has run fewer attempts in all
    (each retry's budget would otherwise be endless).
    """
    return Transition(
        "retry",
        Guard(
            statuses=frozenset({JobStatus.FAILED, JobStatus.CANCELLED}),
            attempts_below=attempts_below,
        ),
        Changes(
            updated_at=now,
            updated_by=by,
            set={
                "status": JobStatus.PENDING,
                "retry_count": 0,
                "dispatch_count": 0,
                "sweep_at": now + dispatch_grace,
                "dispatched_at": now,
                "triggered_by": by,
            },
            remove=frozenset(
                {
                    "started_at",
                    "completed_at",
                    "error_message",
                    "result_data",
                    "cancelled_by",
                    "cancel_reason",
                    "expires_at",
                    "progress",
                }
            ),
        ),
    )


def delete(*, now: datetime, by: str) -> Transition:
    """A finished job -> soft-deleted: it keeps its item until TTL, but no read shows it again.

    No listing shows it again (the repository takes it out of their indexes in the same write);
    the guard's `deleted_at` check makes a second delete lose.
    """
    return Transition(
        "delete",
        Guard(statuses=TERMINAL_STATUSES),
        Changes(
            updated_at=now,
            updated_by=by,
            set={"deleted_at": now, "deleted_by": by},
        ),
    )


RETENTION = "retention"


def retire(job: JobState, *, now: datetime) -> Transition:
    """Keep-last-N retention (services/retention.py): a finished job beyond its file's last N
    of its type -> soft-deleted and due for TTL now (`expires_at`), out of every listing at once.

    Guarded on the job being finished still, and finished when the caller read it (a job retried
    and finished again since is one of the newest now, not one to retire); a running job never
    qualifies. A second retirement of the same job loses on `deleted_at`.
    """
    return Transition(
        "retire",
        Guard(statuses=TERMINAL_STATUSES, completed_at_is=job.completed_at),
        Changes(
            updated_at=now,
            updated_by=RETENTION,
            set={
                "deleted_at": now,
                "deleted_by": RETENTION,
                "expires_at": epoch_seconds(now),
            },
        ),
    )


# --- helpers ----------------------------------------------------------------------------------

# Audit fields a transition may write: they live in the job's metadata.
_METADATA_FIELDS = frozenset({"deleted_at", "deleted_by"})


def _set_field(job: JobState, name: str, value: Any) -> None:
    if name in _METADATA_FIELDS:
        setattr(job.metadata, name, value)
    else:
        setattr(job, name, value)


def _end_attempt(
    job: JobState,
    *,
    error: str,
    now: datetime,
    retry_at: datetime | None,
    retention: timedelta,
    by: str,
    guard: Guard,
    retry_outcome: AttemptOutcome,
    final_outcome: AttemptOutcome = AttemptOutcome.FAILED,
    notes: AttemptNotes | None = None,
) -> Transition:
    message = _truncate(error)
    kept = notes or AttemptNotes()
    if retry_at is not None and job.can_retry():
        return Transition(
            "fail",
            Guard(
                statuses=guard.statuses,
                attempt=guard.attempt,
                lease_expired_by=guard.lease_expired_by,
                retry_budget=True,
            ),
            Changes(
                updated_at=now,
                updated_by=by,
                set={
                    "status": JobStatus.SCHEDULED,
                    "scheduled_at": retry_at,
                    "sweep_at": retry_at,
                    "error_message": message,
                },
                remove=frozenset({"lease_expires_at", "progress"}),
                increment={"retry_count": 1},
                record_attempt=_attempt_record(job, now, retry_outcome, message, kept),
            ),
        )
    return Transition(
        "fail",
        guard,
        Changes(
            updated_at=now,
            updated_by=by,
            set={
                "status": JobStatus.FAILED,
                "completed_at": now,
                "error_message": message,
                "expires_at": epoch_seconds(now + retention),
            },
            remove=frozenset({"lease_expires_at", "sweep_at", "progress"}),
            record_attempt=_attempt_record(job, now, final_outcome, message, kept),
        ),
    )


def _attempt_record(
    job: JobState,
    now: datetime,
    outcome: AttemptOutcome,
    error: str | None,
    notes: AttemptNotes,
) -> Attempt:
    return Attempt(
        number=job.attempt,
        started_at=job.started_at or now,
        ended_at=now,
        outcome=outcome,
        error=error,
        notes=notes,
    )


def _truncate(text: str) -> str:
    text = text.strip() or "unknown error"
    if len(text) <= ERROR_MESSAGE_LIMIT:
        return text
    return text[: ERROR_MESSAGE_LIMIT - 1] + "…"
