"""Which changes are outcomes worth an event (pure: no AWS)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.file import FileStatus
from filejobs.domain.job import ProcessingJob
from filejobs.domain.outcome_events import DetailType, file_outcome, job_event_id, job_outcome
from tests.conftest import FakeClock
from tests.factories import ingest_plan, pending_job

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)


def running(clock: FakeClock) -> ProcessingJob:
    job = pending_job(clock.now)
    job.mark_started(now=clock.now, lease=LEASE, worker="w1")
    return job


def after(job: ProcessingJob, transition: transitions.Transition) -> ProcessingJob:
    changed = job.copy()
    changed.apply(transition)
    return changed


def test_completing_a_running_job_is_a_job_completed(clock: FakeClock) -> None:
    before = running(clock)
    done = after(before, transitions.complete(before, result={}, now=clock.now, retention=KEEP))
    assert job_outcome(before, done) is DetailType.JOB_COMPLETED


@pytest.mark.parametrize(
    ("retry", "expected"), [(None, DetailType.JOB_FAILED), (timedelta(seconds=30), None)]
)
def test_a_failure_is_an_outcome_only_when_no_retry_follows(
    clock: FakeClock, retry: timedelta | None, expected: DetailType | None
) -> None:
    before = running(clock)
    retry_at = None if retry is None else clock.now + retry
    failure = transitions.fail(before, error="E", now=clock.now, retry_at=retry_at, retention=KEEP)
    assert job_outcome(before, after(before, failure)) is expected


def test_cancelling_a_pending_job_is_a_job_cancelled(clock: FakeClock) -> None:
    before = pending_job(clock.now)
    cancel = transitions.cancel(now=clock.now, by="alice", reason="oops", retention=KEEP)
    assert job_outcome(before, after(before, cancel)) is DetailType.JOB_CANCELLED


def test_claims_and_heartbeats_are_not_outcomes(clock: FakeClock) -> None:
    before = pending_job(clock.now)
    claimed = after(before, transitions.claim(now=clock.now, lease=LEASE, worker="w1"))
    beat = transitions.heartbeat(claimed, now=clock.now, lease=LEASE, worker="w1")
    assert job_outcome(before, claimed) is None
    assert job_outcome(claimed, after(claimed, beat)) is None


def test_a_write_that_leaves_a_finished_job_finished_is_not_announced_again(
    clock: FakeClock,
) -> None:
    before = running(clock)
    done = after(before, transitions.complete(before, result={}, now=clock.now, retention=KEEP))
    touched = done.copy()
    touched.metadata = replace(done.metadata, deleted_at=clock.now, deleted_by="alice")
    assert job_outcome(done, touched) is None


def test_each_ending_of_a_job_retried_in_place_has_its_own_event_id(clock: FakeClock) -> None:
    before = pending_job(clock.now)
    first = after(before, transitions.cancel(now=clock.now, by="a", reason="r", retention=KEEP))
    clock.advance(timedelta(minutes=1))
    grace = timedelta(minutes=2)
    retried = after(first, transitions.retry(now=clock.now, by="a", dispatch_grace=grace))
    second = after(retried, transitions.cancel(now=clock.now, by="a", reason="r", retention=KEEP))
    assert job_outcome(retried, second) is DetailType.JOB_CANCELLED
    assert job_event_id(first) != job_event_id(second)


def test_a_deletion_is_announced_once_whatever_its_reason_becomes(clock: FakeClock) -> None:
    active = ingest_plan(clock.now).file
    hidden = replace(active, status=FileStatus.DELETED, status_reason="a delete marker hides it")
    gone = replace(hidden, status_reason="its version was deleted from the uploads bucket")
    assert file_outcome(active, hidden) is DetailType.FILE_DELETED
    assert file_outcome(hidden, gone) is None
    assert file_outcome(hidden, active) is None  # a restore is no outcome


def test_quarantine_is_announced_when_it_starts_only(clock: FakeClock) -> None:
    active = ingest_plan(clock.now).file
    quarantined = replace(active, status=FileStatus.QUARANTINED, status_reason="Eicar")
    assert file_outcome(active, quarantined) is DetailType.FILE_QUARANTINED
    assert file_outcome(quarantined, quarantined) is None
    assert file_outcome(None, active) is None
