"""The sweep: the safety net that finds jobs needing attention and moves them on.

It reads only the sparse `by_sweep` index (jobs whose `sweep_at` is due) and, per job, makes one
conditional write *before* any message is sent, so two overlapping sweeps never both dispatch:
- scheduled and due         -> pending, then dispatched (a retry whose delayed message was lost)
- pending, never claimed    -> re-dispatched, with growing gaps; given up on after many tries
- running, lease expired    -> a failed attempt: retried with backoff, or failed with a reason

`DeadLetterReview`, run by the same schedule, reads the job types' dead-letter queues: a job
whose message SQS gave up on (a poison message) is failed with that reason in one conditional
write, and the letter deleted once its job carries the outcome. A letter naming no job it can
settle (unreadable, or its job running or unknown) stays in the queue, hidden for an hour, for
a person: its alarm has fired.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from filejobs.adapters.sqs import DeadLetter
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import MAX_MESSAGE_DELAY, JobMessage, MalformedMessageError
from filejobs.domain.outcome import Applied
from filejobs.domain.retry import DispatchPolicy, RetryPolicy, TransientError
from filejobs.domain.time import utcnow

logger = logging.getLogger(__name__)


class DeadLetters(Protocol):
    def receive(self, job_type: JobType, limit: int = 10) -> list[DeadLetter]: ...

    def settle(self, letter: DeadLetter) -> None: ...


class Dispatcher(Protocol):
    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        """Send the job's message to its worker queue, visible after `delay`."""


def dispatch_retry_if_soon(dispatcher: Dispatcher, job: ProcessingJob, now: datetime) -> None:
    """Send a scheduled job's message now, delayed until its retry is due, when SQS can hold
    it that long; a later retry is left to the sweep, which promotes it when due."""
    if job.status is not JobStatus.SCHEDULED or job.scheduled_at is None:
        return
    delay = max(job.scheduled_at - now, timedelta(0))
    if delay <= MAX_MESSAGE_DELAY:
        dispatcher.dispatch(job, delay)


@dataclass
class SweepReport:
    examined: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    lost_races: int = 0
    errors: int = 0


class SweepService:
    def __init__(
        self,
        jobs: JobRepository,
        dispatcher: Dispatcher,
        *,
        clock: Callable[[], datetime] = utcnow,
        retry_policy: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen dataclass: immutable)
        dispatch_policy: DispatchPolicy = DispatchPolicy(),  # noqa: B008
        retention: timedelta = timedelta(days=30),
    ) -> None:
        self._jobs = jobs
        self._dispatcher = dispatcher
        self._clock = clock
        self._retry = retry_policy
        self._dispatch = dispatch_policy
        self._retention = retention

    def run(self) -> SweepReport:
        now = self._clock()
        report = SweepReport()
        for job in self._jobs.due_for_sweep(now):
            report.examined += 1
            try:
                self._attend(job, now, report)
            except Exception:
                # One bad item must not stop the sweep; it stays due and is retried next run.
                logger.exception("sweep could not attend job %s", job.id)
                report.errors += 1
        return report

    def _attend(self, job: ProcessingJob, now: datetime, report: SweepReport) -> None:
        planned = self._plan(job, now)
        if planned is None:
            return
        action, transition = planned
        result = self._jobs.apply(job.id, job.job_type, transition)
        if not isinstance(result, Applied):
            report.lost_races += 1  # a worker or another sweep moved it first: nothing to do
            return
        report.actions[action] += 1
        if result.job.status is JobStatus.PENDING:
            self._dispatcher.dispatch(result.job)
        else:
            dispatch_retry_if_soon(self._dispatcher, result.job, now)

    def _plan(self, job: ProcessingJob, now: datetime) -> tuple[str, transitions.Transition] | None:
        if job.status is JobStatus.SCHEDULED:
            return "promoted", transitions.requeue_scheduled(
                now=now, dispatch_grace=self._dispatch.grace
            )
        if job.status is JobStatus.PENDING:
            if self._dispatch.gives_up(job):
                return "abandoned", transitions.abandon_pending(
                    job, now=now, retention=self._retention
                )
            return "redispatched", transitions.requeue_pending(
                job, now=now, next_check=self._dispatch.next_check(job, now)
            )
        if job.status is not JobStatus.RUNNING:
            return None  # the index lags the table: this job already finished
        lease_lost = TransientError("lease expired")
        retry_at = self._retry.retry_at(job, lease_lost, now)
        return "recovered", transitions.recover_lease(
            job, now=now, retry_at=retry_at, retention=self._retention
        )


class DeadLetterReview:
    """Fails the jobs whose messages were dead-lettered; settles (deletes) their letters."""

    def __init__(
        self,
        jobs: JobRepository,
        letters: DeadLetters,
        *,
        clock: Callable[[], datetime] = utcnow,
        retention: timedelta = timedelta(days=30),
        per_queue: int = 10,
    ) -> None:
        self._jobs, self._letters, self._clock = jobs, letters, clock
        self._retention, self._per_queue = retention, per_queue

    def run(self) -> Counter[str]:
        outcomes: Counter[str] = Counter()
        for job_type in JobType:
            for letter in self._letters.receive(job_type, self._per_queue):
                try:
                    outcomes[self._review(letter)] += 1
                except Exception:
                    # The letter stays (hidden a while); the next run tries again.
                    logger.exception("could not review dead letter %s", letter.message_id)
                    outcomes["errors"] += 1
        return outcomes

    def _review(self, letter: DeadLetter) -> str:
        try:
            message = JobMessage.parse(letter.body)
        except MalformedMessageError:
            return "unreadable_letters"  # no job to settle: a person looks at it
        failing = transitions.fail_dead_lettered(
            letter.job_type, now=self._clock(), retention=self._retention
        )
        result = self._jobs.apply(message.job_id, letter.job_type, failing)
        if isinstance(result, Applied):
            self._letters.settle(letter)
            return "dead_lettered_jobs_failed"
        current = result.current
        if current is not None and current.status.is_terminal:
            self._letters.settle(letter)  # a copy got through, or someone settled the job
            return "dead_letters_settled"
        return "dead_letters_left"
