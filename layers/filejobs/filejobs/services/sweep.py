"""The sweep: the safety net that finds jobs needing attention and moves them on.

It reads only the sparse `by_sweep` index (jobs whose `sweep_at` is due) and, per job, makes one
conditional write *before* any message is sent, so two overlapping sweeps never both dispatch:
- scheduled and due         -> pending, then dispatched (a retry whose delayed message was lost)
- pending, never claimed    -> re-dispatched, with growing gaps; given up on after many tries
- running, lease expired    -> a failed attempt: retried with backoff, or failed with a reason

A waiting job (pending, or scheduled and due) is sent again only when its message is lost, never
when it is queued: its queue's progress (domain/backlog.py) says whether the queue has got past
the moment the job's message became visible. One that may still be queued, or whose gate has not
opened (its file's virus scan has no verdict yet: its worker could only skip it), is put off to
a later check, sending nothing and counting nothing. A run stops taking jobs when its time is
nearly up; the rest are still due, for the next run. A due item no job can be read from (a
status no JobStatus names, an attribute gone, a corrupt map) is logged by its id, counted and
skipped: the rest of the run goes on.

`DeadLetterReview`, run by the same schedule before the sweep (a job SQS gave up on is failed
before the sweep could take its message for lost and send a copy, which would go through every
delivery again), reads the job types' dead-letter queues: a job
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

from filejobs.domain import transitions
from filejobs.domain.backlog import QueueProgress, visible_at
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import (
    MAX_MESSAGE_DELAY,
    JobMessage,
    Lane,
    MalformedMessageError,
    lane_of,
)
from filejobs.domain.retry import DispatchPolicy, RetryPolicy, TransientError
from filejobs.domain.scanning import Gate, GateReview
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs.ports import DeadLetter, DeadLetters, Dispatcher, JobStore

logger = logging.getLogger(__name__)


class QueueWatch(Protocol):
    def progress(self, job_type: JobType, lane: Lane) -> QueueProgress:
        """How far the job type's queue in that lane has got, now."""


class HeldJobs(Protocol):
    def review(self, job: ProcessingJob) -> GateReview:
        """Whether a waiting job's gate lets it run, holds it, or refused it (cancelled)."""

    def scan_ended(self, scan: ProcessingJob) -> None:
        """A scan job ended for good (failed, cancelled): its file's waiting jobs are settled
        (cancelled, or sent if a verdict stands)."""


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
    # Due items no job could be read from: skipped, left as they are for a person (a retry
    # cannot mend them), so counted apart from the errors and again at every run.
    unreadable: int = 0
    # The run stopped taking jobs before the last due one (its time was nearly up).
    cut_short: bool = False


def _never() -> bool:
    return False


class SweepService:
    def __init__(
        self,
        jobs: JobStore,
        dispatcher: Dispatcher,
        *,
        queues: QueueWatch | None = None,
        held: HeldJobs | None = None,
        clock: Callable[[], datetime] = utcnow,
        retry_policy: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen dataclass: immutable)
        dispatch_policy: DispatchPolicy = DispatchPolicy(),  # noqa: B008
        retention: timedelta = timedelta(days=30),
    ) -> None:
        self._jobs = jobs
        self._dispatcher = dispatcher
        # Without a queue watch every waiting job past its check is taken for lost.
        self._queues = queues
        self._held = held
        self._clock = clock
        self._retry = retry_policy
        self._dispatch = dispatch_policy
        self._retention = retention

    def run(self, *, should_stop: Callable[[], bool] = _never) -> SweepReport:
        run = _Run(self._clock(), SweepReport())

        def skip_unreadable(job_id: str, error: Exception) -> None:
            # The id only: the item's content (its input, its errors) stays out of the logs.
            logger.warning(
                "job item %s cannot be read as a job (%s): skipped",
                job_id,
                type(error).__name__,
                extra={"job_id": job_id},
            )
            run.report.unreadable += 1

        for job in self._jobs.due_for_sweep(run.now, on_unreadable=skip_unreadable):
            if should_stop():
                run.report.cut_short = True
                break
            run.report.examined += 1
            try:
                self._attend(job, run)
            except Exception:
                # One bad item must not stop the sweep; it stays due and is retried next run.
                logger.exception("sweep could not attend job %s", job.id)
                run.report.errors += 1
        return run.report

    def _attend(self, job: ProcessingJob, run: _Run) -> None:
        if job.status is JobStatus.RUNNING:
            lease_lost = TransientError("lease expired")
            retry_at = self._retry.retry_at(job, lease_lost, run.now)
            recover = transitions.recover_lease(
                job, now=run.now, retry_at=retry_at, retention=self._retention
            )
            self._apply(job, "recovered", recover, run)
        elif job.status in {JobStatus.PENDING, JobStatus.SCHEDULED}:
            self._attend_waiting(job, run)
        # Any other status: the index lags the table, and this job already finished.

    def _attend_waiting(self, job: ProcessingJob, run: _Run) -> None:
        now = run.now
        released_at = None
        if self._held is not None:
            review = self._held.review(job)
            if review.decision is Gate.REFUSE:
                run.report.actions["refused"] += 1
                return
            if review.decision is Gate.WAIT:
                # The verdict sends it; a look is only for a release lost or a scan that ended
                # without one: after the scan's own next check, less often the longer it waits.
                backoff = self._dispatch.next_look(job.metadata.created_at, now)
                self._put_off(job, "held", max(backoff, review.wait_until or now), run)
                return
            released_at = review.released_at
        since = visible_at(job, released_at)
        if since is not None and self._may_be_queued(job, since, run):
            self._put_off(job, "queued", self._dispatch.next_look(since, now), run)
            return
        if job.status is JobStatus.SCHEDULED:
            promote = transitions.requeue_scheduled(now=now, dispatch_grace=self._dispatch.grace)
            self._apply(job, "promoted", promote, run)
        elif self._dispatch.gives_up(job):
            abandon = transitions.abandon_pending(job, now=now, retention=self._retention)
            self._apply(job, "abandoned", abandon, run)
        else:
            next_check = self._dispatch.next_check(job, now)
            requeue = transitions.requeue_pending(job, now=now, next_check=next_check)
            self._apply(job, "redispatched", requeue, run)

    def _may_be_queued(self, job: ProcessingJob, since: datetime, run: _Run) -> bool:
        if self._queues is None:
            return False
        queue = (job.job_type, lane_of(job))
        if queue not in run.progress:
            try:
                run.progress[queue] = self._queues.progress(*queue)
            except Exception:
                # Not knowing is no reason to send copies: the jobs wait for the next run.
                logger.exception("could not read the progress of the %s queue", queue[0].value)
                run.progress[queue] = None
        known = run.progress[queue]
        return known is None or known.may_hold(since)

    def _put_off(self, job: ProcessingJob, action: str, until: datetime, run: _Run) -> None:
        put_off = transitions.put_off_check(job, now=run.now, next_check=until)
        if isinstance(self._jobs.apply(job.id, job.job_type, put_off), Applied):
            run.report.actions[action] += 1
        else:
            run.report.lost_races += 1  # claimed (or changed) meanwhile: nothing to put off

    def _apply(
        self, job: ProcessingJob, action: str, transition: transitions.Transition, run: _Run
    ) -> None:
        result = self._jobs.apply(job.id, job.job_type, transition)
        if not isinstance(result, Applied):
            run.report.lost_races += 1  # a worker or another sweep moved it first: nothing to do
            return
        run.report.actions[action] += 1
        if result.job.status is JobStatus.PENDING:
            self._dispatcher.dispatch(result.job)
        else:
            dispatch_retry_if_soon(self._dispatcher, result.job, run.now)
        settle_if_scan_ended(self._held, result.job)


def settle_if_scan_ended(held: HeldJobs | None, job: ProcessingJob) -> None:
    """A scan job this sweep ended (its last lease lost, its message dead-lettered, never
    claimed): the jobs waiting on its verdict are settled now, as a worker settles them when
    the scan fails in its hands, not at their own next look (after a backlog, as long again as
    they had waited)."""
    ended = job.status in {JobStatus.FAILED, JobStatus.CANCELLED}
    if held is not None and job.job_type is JobType.VIRUS_SCAN and ended:
        held.scan_ended(job)


@dataclass
class _Run:
    """One sweep run: its instant, its report, and what it learnt of each queue's progress
    (each queue asked once, when a job of it is first found due)."""

    now: datetime
    report: SweepReport
    progress: dict[tuple[JobType, Lane], QueueProgress | None] = field(default_factory=dict)


class DeadLetterReview:
    """Fails the jobs whose messages were dead-lettered; settles (deletes) their letters."""

    def __init__(
        self,
        jobs: JobStore,
        letters: DeadLetters,
        *,
        held: HeldJobs | None = None,
        clock: Callable[[], datetime] = utcnow,
        retention: timedelta = timedelta(days=30),
        per_queue: int = 10,
    ) -> None:
        self._jobs, self._letters, self._held, self._clock = jobs, letters, held, clock
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
            settle_if_scan_ended(self._held, result.job)
            self._letters.settle(letter)
            return "dead_lettered_jobs_failed"
        current = result.current
        if current is not None and current.status.is_terminal:
            self._letters.settle(letter)  # a copy got through, or someone settled the job
            return "dead_letters_settled"
        return "dead_letters_left"
