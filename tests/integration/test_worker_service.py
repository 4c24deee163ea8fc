"""The worker use case: claim, process under a kept lease, then complete or fail with backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import PermanentError, RetryPolicy, TransientError
from filejobs.domain.time import utcnow
from filejobs.processors.base import StopRequested
from filejobs.services.worker import Outcome, WorkerService
from tests.conftest import FakeClock
from tests.factories import ingest_plan

KEEP = timedelta(days=1)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, timedelta]] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent.append((job.id, delay))


@pytest.fixture
def job(tables: dict[str, str], clock: FakeClock) -> ProcessingJob:
    plan = ingest_plan(clock.now, "application/x-empty")
    FileRepository().record_ingest(plan)
    return plan.jobs[0]


def worker(
    processor: Callable[[ProcessingJob, Callable[[], bool]], dict[str, Any]],
    dispatcher: Recorder,
    clock: FakeClock | None = None,
    lease: timedelta = timedelta(minutes=5),
) -> WorkerService:
    extra = {"clock": clock} if clock else {}
    return WorkerService(
        JobRepository(),
        dispatcher,
        processor,
        JobType.VIRUS_SCAN,
        lease=lease,
        retention=KEEP,
        worker_id="test-worker",
        retry_policy=RetryPolicy(base=timedelta(seconds=4), cap=timedelta(minutes=1)),
        **extra,
    )


def stored(job: ProcessingJob) -> ProcessingJob:
    found = JobRepository().get(job.id)
    assert found is not None
    return found


def test_a_job_runs_to_completion_with_its_result(job: ProcessingJob, clock: FakeClock) -> None:
    result = worker(lambda j, stop: {"seen": j.input_data}, Recorder(), clock).handle(
        JobMessage.for_job(job)
    )

    assert result.outcome is Outcome.COMPLETED
    done = stored(job)
    assert done.status is JobStatus.COMPLETED
    assert done.result_data == {"seen": job.input_data}
    assert done.metadata.updated_by == "test-worker"


def test_a_transient_failure_is_retried_by_a_delayed_message(
    job: ProcessingJob, clock: FakeClock
) -> None:
    def flaky(j: ProcessingJob, stop: Callable[[], bool]) -> dict[str, Any]:
        raise TransientError("S3 SlowDown")

    dispatcher = Recorder()
    result = worker(flaky, dispatcher, clock).handle(JobMessage.for_job(job))

    assert result.outcome is Outcome.RETRYING
    retrying = stored(job)
    assert retrying.status is JobStatus.SCHEDULED
    assert retrying.error_message == "TransientError: S3 SlowDown"
    assert retrying.scheduled_at is not None
    assert dispatcher.sent == [(job.id, retrying.scheduled_at - clock.now)]
    assert timedelta(0) <= dispatcher.sent[0][1] <= timedelta(seconds=4)


def test_a_permanent_failure_fails_the_job_with_a_readable_message(
    job: ProcessingJob, clock: FakeClock
) -> None:
    def corrupt(j: ProcessingJob, stop: Callable[[], bool]) -> dict[str, Any]:
        raise PermanentError("not a PDF: the file ends after 12 bytes")

    dispatcher = Recorder()
    result = worker(corrupt, dispatcher, clock).handle(JobMessage.for_job(job))

    assert result.outcome is Outcome.FAILED
    failed = stored(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error_message == "PermanentError: not a PDF: the file ends after 12 bytes"
    assert dispatcher.sent == []


def test_a_duplicate_message_for_a_finished_job_is_skipped(
    job: ProcessingJob, clock: FakeClock
) -> None:
    calls: list[str] = []

    def count(j: ProcessingJob, stop: Callable[[], bool]) -> dict[str, Any]:
        calls.append(j.id)
        return {}

    service = worker(count, Recorder(), clock)
    first = service.handle(JobMessage.for_job(job))
    again = service.handle(JobMessage.for_job(job))

    assert (first.outcome, again.outcome) == (Outcome.COMPLETED, Outcome.SKIPPED)
    assert again.detail == "finished"
    assert calls == [job.id], "the work ran once"


def test_a_message_naming_another_type_is_skipped_without_a_write(
    job: ProcessingJob, clock: FakeClock
) -> None:
    message = JobMessage(job.id, JobType.COMPRESSION)
    result = worker(lambda j, s: {}, Recorder(), clock).handle(message)
    assert (result.outcome, result.detail) == (Outcome.SKIPPED, "wrong_type")
    assert stored(job).status is JobStatus.PENDING


def test_a_forged_message_cannot_make_a_worker_take_another_types_job(
    job: ProcessingJob, clock: FakeClock
) -> None:
    # Given a compression worker, and a message that claims a virus_scan job is compression
    service = WorkerService(
        JobRepository(),
        Recorder(),
        lambda j, s: {},
        JobType.COMPRESSION,
        lease=timedelta(minutes=5),
        retention=KEEP,
        worker_id="w",
    )
    result = service.handle(JobMessage(job.id, JobType.COMPRESSION))

    # Then the claim's condition refuses it and the job and its index keys are untouched
    assert (result.outcome, result.detail) == (Outcome.SKIPPED, "wrong_type")
    assert stored(job).status is JobStatus.PENDING
    assert JobRepository().jobs_by_status(JobStatus.RUNNING) == []


def test_a_long_job_keeps_its_lease_alive(job: ProcessingJob) -> None:
    # Given a real clock and a 0.3 s lease, and work that takes four leases' time
    def slow(j: ProcessingJob, stop: Callable[[], bool]) -> dict[str, Any]:
        time.sleep(1.2)
        return {"slow": True}

    result = worker(slow, Recorder(), lease=timedelta(seconds=0.3)).handle(JobMessage.for_job(job))

    # Then heartbeats kept the lease: the job completed on its first attempt
    assert result.outcome is Outcome.COMPLETED
    assert stored(job).attempt == 1


def test_a_cancel_during_processing_stops_the_worker_and_discards_its_result(
    job: ProcessingJob,
) -> None:
    started = threading.Event()

    def cooperative(j: ProcessingJob, stop: Callable[[], bool]) -> dict[str, Any]:
        started.set()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if stop():
                raise StopRequested
            time.sleep(0.02)
        return {"finished": True}

    service = worker(cooperative, Recorder(), lease=timedelta(seconds=0.3))
    canceller = threading.Thread(target=lambda: _cancel_when(started, job))
    canceller.start()
    result = service.handle(JobMessage.for_job(job))
    canceller.join()

    assert result.outcome is Outcome.ABANDONED
    assert result.detail == "cancelled"
    final = stored(job)
    assert final.status is JobStatus.CANCELLED
    assert final.result_data is None


def _cancel_when(started: threading.Event, job: ProcessingJob) -> None:
    started.wait(5)
    cancel = transitions.cancel(now=utcnow(), by="alice", reason="stop", retention=KEEP)
    JobRepository().apply(job.id, job.job_type, cancel)
