"""The worker on the in-memory job store: one message, one recorded outcome.

(tests/integration/test_worker_service.py runs it on DynamoDB and S3.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.job import AttemptOutcome, JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import PermanentError, RetryPolicy, TransientError
from filejobs.processors.base import Work
from filejobs.services.worker import Disposition, WorkerService
from tests.conftest import FakeClock
from tests.factories import pending_job
from tests.fakes import InMemoryJobStore, RecordingDispatcher, TempWorkspaces, stored

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
KEEP = timedelta(days=1)
RETRIES = RetryPolicy(base=timedelta(seconds=4), cap=timedelta(minutes=1))


@dataclass
class Processor:
    """Returns `result`, or raises `error`; remembers each job it was given and its workspace."""

    result: dict[str, Any] = field(default_factory=lambda: {"verdict": "clean"})
    error: Exception | None = None
    seen: list[tuple[ProcessingJob, Path]] = field(default_factory=list)

    def __call__(self, work: Work) -> dict[str, Any]:
        assert work.workspace.is_dir() and not any(work.workspace.iterdir())
        assert not work.should_stop()
        self.seen.append((work.job, work.workspace))
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def job(jobs: InMemoryJobStore) -> ProcessingJob:
    job = pending_job(T0, JobType.VIRUS_SCAN)
    assert jobs.create(job)
    return job


@pytest.fixture
def scratch(tmp_path: Path) -> TempWorkspaces:
    return TempWorkspaces(tmp_path)


def worker(
    processor: Processor,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> WorkerService:
    return WorkerService(
        jobs,
        sent,
        processor,
        JobType.VIRUS_SCAN,
        lease=LEASE,
        retention=KEEP,
        worker_id="test-worker",
        scratch=scratch,
        retry_policy=RETRIES,
        clock=clock,
    )


def test_a_message_for_a_pending_job_runs_its_processor_once_and_completes_the_job(
    job: ProcessingJob,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    processor = Processor(result={"verdict": "clean", "engines": 2})

    outcome = worker(processor, jobs, sent, clock, scratch).handle(JobMessage.for_job(job))

    done = stored(jobs, job)
    assert outcome.disposition is Disposition.COMPLETED
    assert outcome.job == done
    assert [(j.id, j.status, j.attempt) for j, _ in processor.seen] == [
        (job.id, JobStatus.RUNNING, 1)
    ]
    assert done.status is JobStatus.COMPLETED
    assert done.result_data == {"verdict": "clean", "engines": 2}
    assert done.completed_at == T0 and done.sweep_at is None and done.lease_expires_at is None
    assert done.attempts[1].outcome is AttemptOutcome.COMPLETED
    assert done.metadata.updated_by == "test-worker"
    assert not processor.seen[0][1].exists()  # the attempt's workspace is gone
    assert sent.sent == []


def test_a_duplicate_delivery_of_a_completed_job_does_nothing(
    job: ProcessingJob,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    processor = Processor()
    service = worker(processor, jobs, sent, clock, scratch)
    service.handle(JobMessage.for_job(job))
    done = stored(jobs, job)
    clock.advance(timedelta(seconds=30))

    again = service.handle(JobMessage.for_job(job))

    assert again.disposition is Disposition.SKIPPED
    assert again.detail == "finished"
    assert len(processor.seen) == 1
    assert stored(jobs, job) == done
    assert sent.sent == []


def test_a_permanent_error_fails_the_job_at_once_with_a_readable_reason(
    job: ProcessingJob,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    processor = Processor(error=PermanentError("not a TIFF: the header is a PNG's"))

    outcome = worker(processor, jobs, sent, clock, scratch).handle(JobMessage.for_job(job))

    failed = stored(jobs, job)
    assert outcome.disposition is Disposition.FAILED
    assert outcome.detail == "PermanentError: not a TIFF: the header is a PNG's"
    assert failed.status is JobStatus.FAILED
    assert failed.error_message == "PermanentError: not a TIFF: the header is a PNG's"
    assert failed.retry_count == 0  # no retry spent on an error no retry can fix
    assert failed.attempts[1].outcome is AttemptOutcome.FAILED
    assert failed.sweep_at is None
    assert sent.sent == []


def test_an_unexpected_error_counts_as_permanent(
    job: ProcessingJob,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    processor = Processor(error=KeyError("width"))

    outcome = worker(processor, jobs, sent, clock, scratch).handle(JobMessage.for_job(job))

    assert outcome.disposition is Disposition.FAILED
    assert stored(jobs, job).error_message == "KeyError: 'width'"


def test_a_transient_error_schedules_a_retry_and_sends_its_delayed_message(
    job: ProcessingJob,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    processor = Processor(error=TransientError("throttled"))

    outcome = worker(processor, jobs, sent, clock, scratch).handle(JobMessage.for_job(job))

    retrying = stored(jobs, job)
    assert outcome.disposition is Disposition.RETRYING
    assert retrying.status is JobStatus.SCHEDULED and retrying.retry_count == 1
    assert retrying.error_message == "TransientError: throttled"
    assert retrying.scheduled_at is not None
    # The first retry waits at most the policy's first backoff (full jitter).
    assert T0 <= retrying.scheduled_at <= T0 + RETRIES.base
    assert retrying.sweep_at == retrying.scheduled_at
    assert retrying.attempts[1].outcome is AttemptOutcome.RETRYING
    assert sent.sent == [(job.id, retrying.scheduled_at - T0)]


def test_the_retry_runs_as_the_next_attempt_once_it_is_due(
    job: ProcessingJob,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    flaky = Processor(error=TransientError("throttled"))
    worker(flaky, jobs, sent, clock, scratch).handle(JobMessage.for_job(job))
    retry_at = stored(jobs, job).scheduled_at
    assert retry_at is not None
    clock.now = retry_at

    healed = Processor()
    outcome = worker(healed, jobs, sent, clock, scratch).handle(JobMessage.for_job(job))

    assert outcome.disposition is Disposition.COMPLETED
    assert [j.attempt for j, _ in healed.seen] == [2]
    assert stored(jobs, job).retry_count == 1


def test_a_message_for_another_job_type_is_skipped_unread(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    scratch: TempWorkspaces,
) -> None:
    thumbnail = pending_job(T0, JobType.THUMBNAIL_GENERATION)
    assert jobs.create(thumbnail)
    processor = Processor()

    outcome = worker(processor, jobs, sent, clock, scratch).handle(JobMessage.for_job(thumbnail))

    assert (outcome.disposition, outcome.detail) == (Disposition.SKIPPED, "wrong_type")
    assert processor.seen == []
    assert stored(jobs, thumbnail) == thumbnail
