"""The ProcessingJob entity: the spec's methods, its invariants, and the state machine's guards."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.job import (
    ATTEMPT_HISTORY_LIMIT,
    ERROR_MESSAGE_LIMIT,
    AttemptOutcome,
    JobError,
    JobStatus,
    JobType,
    ProcessingJob,
)
from filejobs.domain.transitions import Conflict
from tests.conftest import FakeClock
from tests.factories import pending_job

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)


@pytest.fixture
def job(clock: FakeClock) -> ProcessingJob:
    return pending_job(clock.now)


def start(job: ProcessingJob, now: datetime, worker: str = "worker-1") -> None:
    job.mark_started(now=now, lease=LEASE, worker=worker)


def refusal_of(job: ProcessingJob, transition: transitions.Transition) -> str:
    with pytest.raises(JobError) as refused:
        job.apply(transition)
    return refused.value.reason


def test_a_new_job_has_the_spec_defaults(job: ProcessingJob) -> None:
    assert job.status is JobStatus.PENDING
    assert (job.priority, job.retry_count, job.max_retries, job.attempt) == (0, 0, 3, 0)
    assert job.started_at is None and job.completed_at is None
    assert job.can_retry()
    assert job.invariant_violations() == []


def test_mark_started_takes_a_lease_and_the_next_attempt(
    job: ProcessingJob, clock: FakeClock
) -> None:
    start(job, clock.now)

    assert job.status is JobStatus.RUNNING
    assert job.started_at == clock.now
    assert job.lease_expires_at == clock.now + LEASE == job.sweep_at
    assert job.attempt == 1
    assert job.metadata.updated_by == "worker-1"
    assert job.invariant_violations() == []


def test_a_running_job_cannot_be_started_again(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)
    with pytest.raises(JobError) as refused:
        start(job, clock.now, worker="worker-2")
    assert refused.value.reason == Conflict.TAKEN


def test_mark_completed_records_result_time_history_and_expiry(
    job: ProcessingJob, clock: FakeClock
) -> None:
    start(job, clock.now)
    finished = clock.advance(timedelta(seconds=42))

    job.mark_completed({"verdict": "clean"}, now=finished, retention=KEEP)

    assert job.status is JobStatus.COMPLETED
    assert job.result_data == {"verdict": "clean"}
    assert job.completed_at == finished
    assert job.duration() == timedelta(seconds=42)
    assert job.lease_expires_at is None and job.sweep_at is None
    assert job.expires_at == int((finished + KEEP).timestamp())
    assert job.attempts[1].outcome is AttemptOutcome.COMPLETED
    assert job.invariant_violations() == []


def test_a_job_that_never_ran_has_no_duration(job: ProcessingJob) -> None:
    assert job.duration() is None


def test_a_pending_job_cannot_be_completed(job: ProcessingJob, clock: FakeClock) -> None:
    with pytest.raises(JobError) as refused:
        job.mark_completed({}, now=clock.now, retention=KEEP)
    # Nobody holds a running attempt of a pending job: any completion is stale.
    assert refused.value.reason == Conflict.STALE_ATTEMPT
    assert job.status is JobStatus.PENDING


def test_a_transient_failure_schedules_a_retry_and_spends_one(
    job: ProcessingJob, clock: FakeClock
) -> None:
    start(job, clock.now)
    retry_at = clock.now + timedelta(seconds=8)

    job.mark_failed("S3 throttled", now=clock.now, retry_at=retry_at, retention=KEEP)

    assert job.status is JobStatus.SCHEDULED
    assert job.scheduled_at == retry_at == job.sweep_at
    assert job.retry_count == 1
    assert job.error_message == "S3 throttled"
    assert job.attempts[1].outcome is AttemptOutcome.RETRYING
    assert job.invariant_violations() == []


def test_a_scheduled_job_is_claimed_only_when_due(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)
    job.mark_failed(
        "flaky", now=clock.now, retry_at=clock.now + timedelta(seconds=10), retention=KEEP
    )

    with pytest.raises(JobError) as refused:
        start(job, clock.advance(timedelta(seconds=5)))
    assert refused.value.reason == Conflict.NOT_DUE

    start(job, clock.advance(timedelta(seconds=5)))
    assert (job.status, job.attempt) == (JobStatus.RUNNING, 2)


def test_a_permanent_failure_fails_the_job_now(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)

    job.mark_failed("not a PDF", now=clock.now, retry_at=None, retention=KEEP)

    assert job.status is JobStatus.FAILED
    assert job.retry_count == 0
    assert job.completed_at == clock.now
    assert job.sweep_at is None
    assert job.attempts[1].outcome is AttemptOutcome.FAILED


def test_retries_stop_at_max_retries(job: ProcessingJob, clock: FakeClock) -> None:
    for _ in range(job.max_retries):
        start(job, clock.now)
        job.mark_failed("boom", now=clock.now, retry_at=clock.now, retention=KEEP)

    start(job, clock.now)
    job.mark_failed("boom", now=clock.now, retry_at=clock.now, retention=KEEP)

    assert job.status is JobStatus.FAILED
    assert job.retry_count == job.max_retries
    assert job.attempt == job.max_retries + 1
    assert not job.can_retry()


def test_increment_retry_refuses_to_pass_max_retries(job: ProcessingJob) -> None:
    for _ in range(job.max_retries):
        job.increment_retry()
    with pytest.raises(JobError) as refused:
        job.increment_retry()
    assert refused.value.reason == "retries_exhausted"
    assert job.retry_count == job.max_retries


@pytest.mark.parametrize("status_before", ["pending", "scheduled", "running"])
def test_any_active_job_can_be_cancelled(
    job: ProcessingJob, clock: FakeClock, status_before: str
) -> None:
    if status_before != "pending":
        start(job, clock.now)
    if status_before == "scheduled":
        job.mark_failed("x", now=clock.now, retry_at=clock.now, retention=KEEP)

    job.cancel(now=clock.now, by="alice", reason="not needed", retention=KEEP)

    assert job.status is JobStatus.CANCELLED
    assert (job.cancelled_by, job.cancel_reason) == ("alice", "not needed")
    assert job.scheduled_at is None and job.lease_expires_at is None and job.sweep_at is None
    assert job.invariant_violations() == []


def test_cancel_wins_over_the_running_worker(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)
    worker_view = job.copy()
    job.cancel(now=clock.now, by="alice", reason="stop", retention=KEEP)

    completion = transitions.complete(worker_view, result={"x": 1}, now=clock.now, retention=KEEP)

    assert refusal_of(job, completion) == Conflict.CANCELLED
    assert job.result_data is None


@pytest.mark.parametrize("finish", ["complete", "fail", "cancel"])
def test_no_transition_leaves_a_terminal_state(
    job: ProcessingJob, clock: FakeClock, finish: str
) -> None:
    start(job, clock.now)
    if finish == "complete":
        job.mark_completed({}, now=clock.now, retention=KEEP)
    elif finish == "fail":
        job.mark_failed("x", now=clock.now, retry_at=None, retention=KEEP)
    else:
        job.cancel(now=clock.now, by="a", reason="r", retention=KEEP)
    snapshot = job.copy()

    for transition in (
        transitions.claim(now=clock.now, lease=LEASE, worker="w"),
        transitions.complete(snapshot, result={}, now=clock.now, retention=KEEP),
        transitions.fail(snapshot, error="e", now=clock.now, retry_at=clock.now, retention=KEEP),
        transitions.cancel(now=clock.now, by="a", reason="r", retention=KEEP),
        transitions.heartbeat(snapshot, now=clock.now, lease=LEASE, worker="w"),
        transitions.requeue_scheduled(now=clock.now, dispatch_grace=LEASE),
        transitions.recover_lease(snapshot, now=clock.now + LEASE, retry_at=None, retention=KEEP),
    ):
        assert refusal_of(job, transition) in {Conflict.FINISHED, Conflict.CANCELLED}
    assert job == snapshot


def test_a_worker_whose_lease_was_recovered_cannot_write_its_outcome(
    job: ProcessingJob, clock: FakeClock
) -> None:
    # Given worker 1 runs attempt 1 and goes silent past its lease
    start(job, clock.now, worker="worker-1")
    stale_view = job.copy()
    later = clock.advance(LEASE + timedelta(seconds=1))
    # When the sweep recovers the job and worker 2 claims attempt 2
    job.apply(transitions.recover_lease(job, now=later, retry_at=later, retention=KEEP))
    start(job, later, worker="worker-2")

    # Then worker 1's completion and failure are refused as stale
    late_completion = transitions.complete(stale_view, result={}, now=later, retention=KEEP)
    late_failure = transitions.fail(stale_view, error="e", now=later, retry_at=None, retention=KEEP)
    assert refusal_of(job, late_completion) == Conflict.STALE_ATTEMPT
    assert refusal_of(job, late_failure) == Conflict.STALE_ATTEMPT
    assert (job.status, job.attempt) == (JobStatus.RUNNING, 2)
    assert job.attempts[1].outcome is AttemptOutcome.LEASE_EXPIRED


def test_a_lease_lost_on_the_last_attempt_fails_the_job_and_says_the_worker_vanished(
    job: ProcessingJob, clock: FakeClock
) -> None:
    # Given a job on its last attempt (its retries spent) whose worker goes silent
    job.retry_count = job.max_retries
    start(job, clock.now)
    later = clock.advance(LEASE + timedelta(seconds=1))
    # When the sweep recovers it
    job.apply(transitions.recover_lease(job, now=later, retry_at=None, retention=KEEP))
    # Then the job fails for good, and its attempt's history says the worker vanished (the
    # chaos audit finds a crashed attempt recovered by this, whether or not retries were left)
    assert job.status is JobStatus.FAILED
    assert job.attempts[job.attempt].outcome is AttemptOutcome.LEASE_EXPIRED
    assert "no retries left" in (job.error_message or "")


def test_a_lease_is_not_recovered_before_it_expires(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)
    early = clock.now + LEASE - timedelta(seconds=1)
    recovery = transitions.recover_lease(job, now=early, retry_at=early, retention=KEEP)
    assert refusal_of(job, recovery) == Conflict.LEASE_ACTIVE


def test_a_lost_lease_with_no_retries_left_fails_with_a_reason(
    job: ProcessingJob, clock: FakeClock
) -> None:
    job.retry_count = job.max_retries
    start(job, clock.now)
    later = clock.advance(LEASE * 2)

    job.apply(transitions.recover_lease(job, now=later, retry_at=later, retention=KEEP))

    assert job.status is JobStatus.FAILED
    assert job.error_message is not None
    assert "lost its lease" in job.error_message and "no retries left" in job.error_message


def test_heartbeat_extends_only_the_current_attempts_lease(
    job: ProcessingJob, clock: FakeClock
) -> None:
    start(job, clock.now)
    later = clock.advance(timedelta(minutes=4))

    job.apply(transitions.heartbeat(job, now=later, lease=LEASE, worker="worker-1"))

    assert job.lease_expires_at == later + LEASE == job.sweep_at


def test_an_explicit_retry_reopens_a_failed_job_in_place(
    job: ProcessingJob, clock: FakeClock
) -> None:
    start(job, clock.now)
    job.mark_failed("corrupt", now=clock.now, retry_at=None, retention=KEEP)

    job.apply(transitions.retry(now=clock.now, by="bob", dispatch_grace=LEASE))

    assert job.status is JobStatus.PENDING
    assert job.retry_count == 0 and job.error_message is None and job.expires_at is None
    assert job.attempt == 1, "the fencing token never goes back"
    assert job.attempts[1].error == "corrupt", "earlier attempts are kept"
    assert job.triggered_by == "bob"
    start(job, clock.now)
    assert job.attempt == 2


def test_only_failed_or_cancelled_jobs_can_be_retried(job: ProcessingJob, clock: FakeClock) -> None:
    retry = transitions.retry(now=clock.now, by="bob", dispatch_grace=LEASE)
    assert refusal_of(job, retry) == Conflict.ACTIVE
    start(job, clock.now)
    job.mark_completed({}, now=clock.now, retention=KEEP)
    assert refusal_of(job, retry) == Conflict.FINISHED


def test_the_sweep_promotes_a_due_scheduled_job_once(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)
    job.mark_failed("x", now=clock.now, retry_at=clock.now, retention=KEEP)
    promote = transitions.requeue_scheduled(now=clock.now, dispatch_grace=LEASE)

    job.apply(promote)

    assert (job.status, job.scheduled_at, job.dispatch_count) == (JobStatus.PENDING, None, 1)
    assert refusal_of(job, promote) == Conflict.CHANGED, "a second, overlapping sweep loses"


def test_a_pending_job_is_redispatched_once_per_due_check(
    job: ProcessingJob, clock: FakeClock
) -> None:
    seen = job.copy()
    redispatch = transitions.requeue_pending(seen, now=clock.now, next_check=clock.now + LEASE)

    job.apply(redispatch)

    assert job.sweep_at == clock.now + LEASE and job.dispatch_count == 1
    assert refusal_of(job, redispatch) == Conflict.CHANGED


def test_the_attempt_history_is_bounded(job: ProcessingJob, clock: FakeClock) -> None:
    job.max_retries = 25
    for _ in range(ATTEMPT_HISTORY_LIMIT + 5):
        start(job, clock.now)
        job.mark_failed("again", now=clock.now, retry_at=clock.now, retention=KEEP)

    assert len(job.attempts) == ATTEMPT_HISTORY_LIMIT
    assert min(job.attempts) == job.attempt - ATTEMPT_HISTORY_LIMIT + 1
    assert job.invariant_violations() == []


def test_long_error_messages_are_truncated(job: ProcessingJob, clock: FakeClock) -> None:
    start(job, clock.now)
    job.mark_failed("x" * 10_000, now=clock.now, retry_at=None, retention=KEEP)
    assert job.error_message is not None
    assert len(job.error_message) == ERROR_MESSAGE_LIMIT


def test_a_message_for_another_job_type_is_refused(job: ProcessingJob, clock: FakeClock) -> None:
    claim = transitions.claim(now=clock.now, lease=LEASE, worker="w", job_type=JobType.COMPRESSION)
    assert refusal_of(job, claim) == Conflict.WRONG_TYPE


@pytest.mark.parametrize(("field", "value"), [("priority", 101), ("max_retries", 0)])
def test_out_of_range_settings_are_rejected(clock: FakeClock, field: str, value: int) -> None:
    job = pending_job(clock.now)
    with pytest.raises(ValueError, match=field):
        ProcessingJob(**{**job.__dict__, field: value})


@pytest.mark.parametrize("status_before", ["pending", "scheduled"])
def test_a_dead_lettered_job_fails_with_no_retry_left_pending(
    job: ProcessingJob, clock: FakeClock, status_before: str
) -> None:
    if status_before == "scheduled":
        start(job, clock.now)
        job.mark_failed("timeout", now=clock.now, retry_at=clock.now + LEASE, retention=KEEP)

    job.apply(transitions.fail_dead_lettered(job.job_type, now=clock.now, retention=KEEP))

    assert job.status is JobStatus.FAILED
    assert job.error_message is not None and "dead-letter queue" in job.error_message
    # Nothing will run it again: a failed job that still showed a retry time would say otherwise.
    assert job.scheduled_at is None and job.sweep_at is None
    assert job.invariant_violations() == []


def test_a_finished_job_still_scheduled_for_a_retry_breaks_an_invariant(
    job: ProcessingJob, clock: FakeClock
) -> None:
    start(job, clock.now)
    job.mark_failed("x", now=clock.now, retry_at=None, retention=KEEP)
    job.scheduled_at = clock.now

    assert job.invariant_violations() == ["finished job still scheduled for a retry"]
