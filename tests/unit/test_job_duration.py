"""`ProcessingJob.duration()`: how long the last attempt ran, never the wait for a retry.

A job can end while it waits for a retry (cancelled, dead-lettered, abandoned): its last attempt
ended when it failed, not when the job did, so the backoff wait must not count.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from tests.conftest import FakeClock
from tests.factories import pending_job

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)
RAN = timedelta(seconds=4)
BACKOFF = timedelta(minutes=10)


@pytest.fixture
def job(clock: FakeClock) -> ProcessingJob:
    return pending_job(clock.now)


def run_then_fail_with_a_retry(job: ProcessingJob, clock: FakeClock) -> datetime:
    """One attempt that runs RAN and fails transiently; the retry is due BACKOFF later."""
    job.mark_started(now=clock.now, lease=LEASE, worker="worker-1")
    failed_at = clock.advance(RAN)
    retry_at = failed_at + BACKOFF
    job.mark_failed("S3 throttled", now=failed_at, retry_at=retry_at, retention=KEEP)
    assert job.status is JobStatus.SCHEDULED
    return retry_at


def test_a_job_cancelled_while_waiting_for_a_retry_does_not_count_the_wait(
    job: ProcessingJob, clock: FakeClock
) -> None:
    run_then_fail_with_a_retry(job, clock)
    clock.advance(BACKOFF / 2)

    job.cancel(now=clock.now, by="alice", reason="not needed", retention=KEEP)

    assert job.status is JobStatus.CANCELLED
    assert job.duration() == RAN


def test_a_job_dead_lettered_while_waiting_for_a_retry_does_not_count_the_wait(
    job: ProcessingJob, clock: FakeClock
) -> None:
    run_then_fail_with_a_retry(job, clock)
    clock.advance(BACKOFF * 3)

    job.apply(transitions.fail_dead_lettered(JobType.VIRUS_SCAN, now=clock.now, retention=KEEP))

    assert job.status is JobStatus.FAILED
    assert job.duration() == RAN


def test_a_requeued_retry_nobody_claimed_does_not_count_the_wait(
    job: ProcessingJob, clock: FakeClock
) -> None:
    retry_at = run_then_fail_with_a_retry(job, clock)
    job.apply(transitions.requeue_scheduled(now=retry_at, dispatch_grace=timedelta(minutes=1)))
    clock.now = retry_at + timedelta(hours=1)

    job.apply(transitions.abandon_pending(job, now=clock.now, retention=KEEP))

    assert job.status is JobStatus.FAILED
    assert job.duration() == RAN


def test_a_job_whose_lease_was_recovered_then_cancelled_counts_only_the_lost_attempt(
    job: ProcessingJob, clock: FakeClock
) -> None:
    job.mark_started(now=clock.now, lease=LEASE, worker="worker-1")
    # The worker vanished: the attempt ends when the sweep recovers the expired lease.
    recovered_at = clock.advance(LEASE + timedelta(seconds=30))
    job.apply(
        transitions.recover_lease(
            job, now=recovered_at, retry_at=recovered_at + BACKOFF, retention=KEEP
        )
    )
    clock.advance(BACKOFF / 2)

    job.cancel(now=clock.now, by="alice", reason="not needed", retention=KEEP)

    assert job.duration() == LEASE + timedelta(seconds=30)


def test_a_retried_job_counts_only_its_last_attempt(job: ProcessingJob, clock: FakeClock) -> None:
    retry_at = run_then_fail_with_a_retry(job, clock)
    clock.now = retry_at
    job.mark_started(now=clock.now, lease=LEASE, worker="worker-2")

    job.mark_failed("not a PDF", now=clock.advance(timedelta(seconds=7)), retention=KEEP)

    assert job.status is JobStatus.FAILED
    assert job.duration() == timedelta(seconds=7)


def test_a_job_cancelled_while_running_ran_until_the_cancel(
    job: ProcessingJob, clock: FakeClock
) -> None:
    job.mark_started(now=clock.now, lease=LEASE, worker="worker-1")

    # The cancel ends the running attempt (the worker's later write loses), so no record of it.
    job.cancel(now=clock.advance(RAN), by="alice", reason="not needed", retention=KEEP)

    assert job.duration() == RAN


def test_an_explicitly_retried_job_has_no_duration_until_it_runs_again(
    job: ProcessingJob, clock: FakeClock
) -> None:
    run_then_fail_with_a_retry(job, clock)
    job.cancel(now=clock.advance(BACKOFF / 2), by="alice", reason="oops", retention=KEEP)

    job.apply(
        transitions.retry(now=clock.advance(RAN), by="alice", dispatch_grace=timedelta(minutes=1))
    )

    assert job.status is JobStatus.PENDING
    assert job.duration() is None
