"""The sweep on the in-memory job store: what it does to each kind of due job, and to the rest.

(tests/integration/test_sweep.py runs it on DynamoDB; tests/integration/test_job_store_contract.py
keeps the in-memory store honest.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.job import AttemptOutcome, JobStatus, JobType, ProcessingJob
from filejobs.domain.retry import DispatchPolicy, RetryPolicy
from filejobs.domain.transition_result import Applied
from filejobs.ports import UnreadableItem
from filejobs.services.sweep import SweepService
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.fakes import InMemoryJobStore, RecordingDispatcher, stored

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)
GRACE = DispatchPolicy().grace
RETRIES = RetryPolicy(base=timedelta(seconds=4), cap=timedelta(minutes=1))


@pytest.fixture
def sweep(jobs: InMemoryJobStore, sent: RecordingDispatcher, clock: FakeClock) -> SweepService:
    return SweepService(jobs, sent, clock=clock, retry_policy=RETRIES)


def applied(
    jobs: InMemoryJobStore, job: ProcessingJob, move: transitions.Transition
) -> ProcessingJob:
    result = jobs.apply(job.id, job.job_type, move)
    assert isinstance(result, Applied), result
    return result.job


def new_job(
    jobs: InMemoryJobStore, name: str = "photo.jpg", *, max_retries: int = 3
) -> ProcessingJob:
    """A pending virus scan of a new upload called `name`, created at T0."""
    job = next(j for j in ingest_plan(T0, name=name).jobs if j.job_type is JobType.VIRUS_SCAN)
    job.max_retries = max_retries
    assert jobs.create(job)
    return job


def running(jobs: InMemoryJobStore, job: ProcessingJob, at: datetime = T0) -> ProcessingJob:
    return applied(jobs, job, transitions.claim(now=at, lease=LEASE, worker="w1"))


def scheduled(jobs: InMemoryJobStore, job: ProcessingJob, retry_at: datetime) -> ProcessingJob:
    attempt = running(jobs, job)
    failure = transitions.fail(
        attempt, error="TimeoutError: slow", now=T0, retry_at=retry_at, retention=KEEP
    )
    return applied(jobs, attempt, failure)


def test_a_due_scheduled_job_is_made_pending_and_dispatched_at_once(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    job = scheduled(jobs, new_job(jobs), retry_at=T0 + timedelta(minutes=1))
    clock.advance(timedelta(minutes=2))

    report = sweep.run()

    promoted = stored(jobs, job)
    assert report.actions == {"promoted": 1}
    assert (promoted.status, promoted.scheduled_at) == (JobStatus.PENDING, None)
    assert promoted.dispatch_count == 1 and promoted.dispatched_at == clock.now
    assert promoted.sweep_at == clock.now + GRACE  # looked at again if nobody claims it
    assert sent.sent == [(job.id, timedelta(0))]


def test_a_running_job_whose_lease_expired_is_scheduled_for_a_retry_and_its_message_delayed(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    job = running(jobs, new_job(jobs))
    clock.advance(LEASE + timedelta(seconds=1))

    report = sweep.run()

    recovered = stored(jobs, job)
    assert report.actions == {"recovered": 1}
    assert recovered.status is JobStatus.SCHEDULED and recovered.retry_count == 1
    assert recovered.scheduled_at is not None
    assert clock.now <= recovered.scheduled_at <= clock.now + RETRIES.cap
    assert recovered.lease_expires_at is None
    assert recovered.error_message is not None and "lost its lease" in recovered.error_message
    assert recovered.attempts[1].outcome is AttemptOutcome.LEASE_EXPIRED
    # The retry's message is sent now, delayed until the retry is due.
    assert sent.sent == [(job.id, recovered.scheduled_at - clock.now)]


def test_a_running_job_whose_lease_expired_with_no_retry_left_fails_saying_so(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    job = scheduled(jobs, new_job(jobs, max_retries=1), retry_at=T0)
    last_attempt = running(jobs, job, at=T0)
    clock.advance(LEASE + timedelta(seconds=1))

    report = sweep.run()

    failed = stored(jobs, job)
    assert report.actions == {"recovered": 1}
    assert failed.status is JobStatus.FAILED and failed.completed_at == clock.now
    assert failed.sweep_at is None
    assert failed.error_message is not None
    assert f"attempt {last_attempt.attempt} lost its lease" in failed.error_message
    assert "no retries left (max_retries=1)" in failed.error_message
    assert sent.sent == []


def test_jobs_not_yet_due_are_left_alone(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    waiting = new_job(jobs)  # its first check is `grace` after its creation
    later = scheduled(jobs, new_job(jobs, "later.jpg"), retry_at=T0 + timedelta(minutes=10))
    before = jobs.all()
    clock.advance(GRACE - timedelta(seconds=1))

    report = sweep.run()

    assert (report.examined, report.actions, report.lost_races) == (0, {}, 0)
    assert jobs.all() == before
    assert {waiting.id, later.id} == {j.id for j in before}
    assert sent.sent == []


def test_a_running_job_within_its_lease_is_left_alone(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    job = running(jobs, new_job(jobs))
    clock.advance(LEASE - timedelta(seconds=1))

    report = sweep.run()

    assert report.examined == 0
    assert stored(jobs, job).status is JobStatus.RUNNING
    assert sent.sent == []


def test_a_pending_job_nobody_claimed_past_its_grace_is_dispatched_again(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    job = new_job(jobs)
    clock.advance(GRACE)

    report = sweep.run()

    again = stored(jobs, job)
    assert report.actions == {"redispatched": 1}
    assert again.status is JobStatus.PENDING and again.dispatch_count == 1
    assert again.sweep_at == DispatchPolicy().next_check(job, clock.now)
    assert sent.sent == [(job.id, timedelta(0))]


def test_a_second_run_at_the_same_instant_finds_nothing_left_to_do(
    jobs: InMemoryJobStore, sent: RecordingDispatcher, sweep: SweepService, clock: FakeClock
) -> None:
    scheduled(jobs, new_job(jobs), retry_at=T0 + timedelta(minutes=1))
    clock.advance(timedelta(minutes=1))

    first, second = sweep.run(), sweep.run()

    assert first.actions == {"promoted": 1}
    assert (second.examined, second.actions) == (0, {})
    assert len(sent.sent) == 1


class StoreWithUnreadableItems(InMemoryJobStore):
    """A job store holding, besides its jobs, items no job can be read from (a status no
    JobStatus names, an attribute gone, a corrupt map): due for a check, as the table's would be."""

    def __init__(self, *unreadable_ids: str) -> None:
        super().__init__()
        self.unreadable_ids = list(unreadable_ids)

    def due_for_sweep(
        self,
        now: datetime,
        *,
        per_shard: int = 100,
        on_unreadable: UnreadableItem | None = None,
    ) -> Iterator[ProcessingJob]:
        for job_id in self.unreadable_ids:
            error = ValueError(f"'exploded' is not a valid JobStatus (item {job_id})")
            if on_unreadable is None:
                raise error
            on_unreadable(job_id, error)
        yield from super().due_for_sweep(now, per_shard=per_shard, on_unreadable=on_unreadable)


def test_an_unreadable_job_item_is_logged_by_id_counted_and_skipped_and_the_rest_attended(
    sent: RecordingDispatcher, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a job nobody claimed past its grace, and an item the store cannot read as a job
    jobs = StoreWithUnreadableItems("0b7e-unreadable")
    job = new_job(jobs)
    clock.advance(GRACE)

    # When the sweep runs
    report = SweepService(jobs, sent, clock=clock, retry_policy=RETRIES).run()

    # Then the readable job is attended, the unreadable one counted apart (not an error: retrying
    # cannot mend it) and named by its id alone in a warning a person can act on
    assert report.actions == {"redispatched": 1}
    assert sent.sent_ids == [job.id]
    assert (report.unreadable, report.errors, report.examined) == (1, 0, 1)
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "0b7e-unreadable" in line.getMessage()
    assert getattr(line, "job_id", None) == "0b7e-unreadable"
    assert "exploded" not in line.getMessage()  # the item's content stays out of the logs
