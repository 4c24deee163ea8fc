"""The worker use case: claim, process under a kept lease, then complete or fail with backoff."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from filejobs.adapters.s3 import S3Outputs
from filejobs.adapters.workspace import Scratch, shared_scratch
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import PermanentError, RetryPolicy, TransientError
from filejobs.domain.time import utcnow
from filejobs.processors.base import OutputWriter, Processor, StopRequested, Work
from filejobs.services.worker import CANCEL_LOOK_EVERY, Disposition, WorkerService
from filejobs_dev.infra.template import create_buckets, load_template
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
    processor: Processor,
    dispatcher: Recorder,
    clock: FakeClock | None = None,
    lease: timedelta = timedelta(minutes=5),
    scratch: Scratch | None = None,
    outputs: Callable[[ProcessingJob], OutputWriter] | None = None,
    cancel_look_every: timedelta = CANCEL_LOOK_EVERY,
) -> WorkerService:
    return WorkerService(
        JobRepository(),
        dispatcher,
        processor,
        JobType.VIRUS_SCAN,
        lease=lease,
        retention=KEEP,
        worker_id="test-worker",
        outputs=outputs,
        scratch=scratch or shared_scratch(),
        retry_policy=RetryPolicy(base=timedelta(seconds=4), cap=timedelta(minutes=1)),
        clock=clock or utcnow,
        cancel_look_every=cancel_look_every,
    )


def stored(job: ProcessingJob) -> ProcessingJob:
    found = JobRepository().get(job.id)
    assert found is not None
    return found


def test_a_job_runs_to_completion_with_its_result(job: ProcessingJob, clock: FakeClock) -> None:
    result = worker(lambda work: {"seen": work.job.input_data}, Recorder(), clock).handle(
        JobMessage.for_job(job)
    )

    assert result.disposition is Disposition.COMPLETED
    done = stored(job)
    assert done.status is JobStatus.COMPLETED
    assert done.result_data == {"seen": job.input_data}
    assert done.metadata.updated_by == "test-worker"


def test_a_transient_failure_is_retried_by_a_delayed_message(
    job: ProcessingJob, clock: FakeClock
) -> None:
    def flaky(work: Work) -> dict[str, Any]:
        raise TransientError("S3 SlowDown")

    dispatcher = Recorder()
    result = worker(flaky, dispatcher, clock).handle(JobMessage.for_job(job))

    assert result.disposition is Disposition.RETRYING
    retrying = stored(job)
    assert retrying.status is JobStatus.SCHEDULED
    assert retrying.error_message == "TransientError: S3 SlowDown"
    assert retrying.scheduled_at is not None
    assert dispatcher.sent == [(job.id, retrying.scheduled_at - clock.now)]
    assert timedelta(0) <= dispatcher.sent[0][1] <= timedelta(seconds=4)


def test_a_permanent_failure_fails_the_job_with_a_readable_message(
    job: ProcessingJob, clock: FakeClock
) -> None:
    def corrupt(work: Work) -> dict[str, Any]:
        raise PermanentError("not a PDF: the file ends after 12 bytes")

    dispatcher = Recorder()
    result = worker(corrupt, dispatcher, clock).handle(JobMessage.for_job(job))

    assert result.disposition is Disposition.FAILED
    failed = stored(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error_message == "PermanentError: not a PDF: the file ends after 12 bytes"
    assert dispatcher.sent == []


def test_a_duplicate_message_for_a_finished_job_is_skipped(
    job: ProcessingJob, clock: FakeClock
) -> None:
    calls: list[str] = []

    def count(work: Work) -> dict[str, Any]:
        calls.append(work.job.id)
        return {}

    service = worker(count, Recorder(), clock)
    first = service.handle(JobMessage.for_job(job))
    again = service.handle(JobMessage.for_job(job))

    assert (first.disposition, again.disposition) == (Disposition.COMPLETED, Disposition.SKIPPED)
    assert again.detail == "finished"
    assert calls == [job.id], "the work ran once"


def test_a_message_naming_another_type_is_skipped_without_a_write(
    job: ProcessingJob, clock: FakeClock
) -> None:
    message = JobMessage(job.id, JobType.COMPRESSION)
    result = worker(lambda work: {}, Recorder(), clock).handle(message)
    assert (result.disposition, result.detail) == (Disposition.SKIPPED, "wrong_type")
    assert stored(job).status is JobStatus.PENDING


def test_a_forged_message_cannot_make_a_worker_take_another_types_job(
    job: ProcessingJob, clock: FakeClock
) -> None:
    # Given a compression worker, and a message that claims a virus_scan job is compression
    service = WorkerService(
        JobRepository(),
        Recorder(),
        lambda work: {},
        JobType.COMPRESSION,
        lease=timedelta(minutes=5),
        retention=KEEP,
        worker_id="w",
        scratch=shared_scratch(),
    )
    result = service.handle(JobMessage(job.id, JobType.COMPRESSION))

    # Then the claim's condition refuses it and the job and its index keys are untouched
    assert (result.disposition, result.detail) == (Disposition.SKIPPED, "wrong_type")
    assert stored(job).status is JobStatus.PENDING
    assert JobRepository().jobs_by_status(JobStatus.RUNNING) == []


def test_a_long_job_keeps_its_lease_alive(job: ProcessingJob) -> None:
    # Given a real clock and a 0.3 s lease, and work that takes four leases' time
    def slow(work: Work) -> dict[str, Any]:
        time.sleep(1.2)
        return {"slow": True}

    result = worker(slow, Recorder(), lease=timedelta(seconds=0.3)).handle(JobMessage.for_job(job))

    # Then heartbeats kept the lease: the job completed on its first attempt
    assert result.disposition is Disposition.COMPLETED
    assert stored(job).attempt == 1


def test_a_cancel_during_processing_stops_the_worker_and_discards_its_result(
    job: ProcessingJob,
) -> None:
    started = threading.Event()

    def cooperative(work: Work) -> dict[str, Any]:
        started.set()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if work.should_stop():
                raise StopRequested
            time.sleep(0.02)
        return {"finished": True}

    service = worker(cooperative, Recorder(), lease=timedelta(seconds=0.3))
    canceller = threading.Thread(target=lambda: _cancel_when(started, job))
    canceller.start()
    result = service.handle(JobMessage.for_job(job))
    canceller.join()

    assert result.disposition is Disposition.ABANDONED
    assert result.detail == "cancelled"
    final = stored(job)
    assert final.status is JobStatus.CANCELLED
    assert final.result_data is None


def test_a_cancel_reaches_a_running_attempt_long_before_its_next_heartbeat(
    job: ProcessingJob,
) -> None:
    # given a 5-minute lease (a heartbeat every 100 s) and a job that would run 20 s
    started = threading.Event()
    ran = []

    def cooperative(work: Work) -> dict[str, Any]:
        started.set()
        began = time.monotonic()
        while time.monotonic() - began < 20:
            if work.should_stop():
                ran.append(time.monotonic() - began)
                raise StopRequested
            time.sleep(0.02)
        return {"finished": True}

    service = worker(cooperative, Recorder(), cancel_look_every=timedelta(seconds=0.2))
    canceller = threading.Thread(target=lambda: _cancel_when(started, job))
    canceller.start()
    # when it is cancelled as it starts
    result = service.handle(JobMessage.for_job(job))
    canceller.join()
    # then the attempt stopped within a look or two, with no heartbeat written meanwhile
    assert (result.disposition, result.detail) == (Disposition.ABANDONED, "cancelled")
    assert ran and ran[0] < 2
    assert stored(job).status is JobStatus.CANCELLED


def test_a_look_that_reads_the_job_as_it_was_before_the_claim_does_not_stop_it(
    job: ProcessingJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given reads that always return the job as it was before this worker claimed it
    before_claim = stored(job)
    monkeypatch.setattr(JobRepository, "get", lambda self, job_id, consistent=True: before_claim)

    def half_a_second(work: Work) -> dict[str, Any]:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            if work.should_stop():
                raise StopRequested
            time.sleep(0.02)
        return {"done": True}

    service = worker(half_a_second, Recorder(), cancel_look_every=timedelta(seconds=0.05))
    # then the stale replica (an earlier attempt, pending) never stops the attempt
    assert service.handle(JobMessage.for_job(job)).disposition is Disposition.COMPLETED


def _cancel_when(started: threading.Event, job: ProcessingJob) -> None:
    started.wait(5)
    cancel = transitions.cancel(now=utcnow(), by="alice", reason="stop", retention=KEEP)
    JobRepository().apply(job.id, job.job_type, cancel)


# --- Scratch space and derived files ----------------------------------------------------------


def test_every_attempt_works_in_a_fresh_directory_that_is_gone_when_it_ends(
    job: ProcessingJob, clock: FakeClock, tmp_path: Path
) -> None:
    # given a processor that fills its workspace, then fails once and succeeds on the retry
    scratch = Scratch(tmp_path / "scratch")
    seen: list[Path] = []

    def fill(work: Work) -> dict[str, Any]:
        assert list(work.workspace.iterdir()) == []
        (work.workspace / "frame.raw").write_bytes(b"\0" * 4096)
        seen.append(work.workspace)
        if len(seen) == 1:
            raise TransientError("decoder crashed")
        return {}

    service = worker(fill, Recorder(), clock, scratch=scratch)
    # when the job fails, is retried and completes
    assert service.handle(JobMessage.for_job(job)).disposition is Disposition.RETRYING
    clock.advance(timedelta(minutes=2))
    assert service.handle(JobMessage.for_job(job)).disposition is Disposition.COMPLETED
    # then each attempt had its own directory, and none is left on disk
    assert len(set(seen)) == 2
    assert not any(path.exists() for path in seen)
    assert list(scratch.root.iterdir()) == []


def test_files_left_by_a_killed_attempt_are_removed_before_the_next_job(
    job: ProcessingJob, clock: FakeClock, tmp_path: Path
) -> None:
    # given the scratch root of this process holds what a timed-out invocation left behind
    scratch = Scratch(tmp_path / "scratch")
    leftover = scratch.root / "job-earlier-0123abcd"
    leftover.mkdir(parents=True)
    (leftover / "half.mp4").write_bytes(b"\0" * 1024)
    # when the next job runs
    worker(lambda work: {}, Recorder(), clock, scratch=scratch).handle(JobMessage.for_job(job))
    # then the leftover is gone
    assert not leftover.exists()


@pytest.fixture
def outputs_bucket(aws: None) -> str:
    bucket = f"outputs-{uuid.uuid4().hex[:8]}"
    create_buckets(boto3.client("s3"), {"OutputsBucket": bucket}, {}, load_template())
    return bucket


def test_derived_files_land_under_deterministic_keys_and_a_rerun_overwrites_them(
    job: ProcessingJob, clock: FakeClock, outputs_bucket: str
) -> None:
    # given a processor writing one derived file, failing the first time after writing it
    s3 = boto3.client("s3")
    outputs = S3Outputs(s3, outputs_bucket)
    attempts: list[int] = []

    def thumbnail(work: Work) -> dict[str, Any]:
        attempts.append(work.job.attempt)
        key = work.outputs.put_bytes(
            "thumb-128.webp", f"attempt {work.job.attempt}".encode(), "image/webp"
        )
        if len(attempts) == 1:
            raise TransientError("S3 SlowDown")
        return {"thumbnail": key}

    service = worker(thumbnail, Recorder(), clock, outputs=outputs.for_job)
    # when the job runs twice (a retry)
    service.handle(JobMessage.for_job(job))
    clock.advance(timedelta(minutes=2))
    result = service.handle(JobMessage.for_job(job))
    # then one object exists, under the job's folder, holding the second attempt's bytes
    expected = f"derived/acme/{job.file_id}/virus_scan/thumb-128.webp"
    assert result.job is not None and result.job.result_data == {"thumbnail": expected}
    listed = s3.list_objects_v2(Bucket=outputs_bucket)["Contents"]
    assert [o["Key"] for o in listed] == [expected]
    stored_object = s3.get_object(Bucket=outputs_bucket, Key=expected)
    assert stored_object["Body"].read() == b"attempt 2"
    assert stored_object["ContentType"] == "image/webp"
    assert stored_object["Metadata"] == {"job-id": job.id, "attempt": "2"}


@pytest.mark.parametrize("name", ["../escape.webp", "a/b.webp", "", ".hidden"])
def test_an_output_name_that_is_not_a_plain_file_name_fails_the_job_for_good(
    job: ProcessingJob, clock: FakeClock, outputs_bucket: str, name: str
) -> None:
    # given a processor that asks for a path outside its folder
    outputs = S3Outputs(boto3.client("s3"), outputs_bucket)

    def escape(work: Work) -> dict[str, Any]:
        work.outputs.put_bytes(name, b"x", "text/plain")
        return {}

    # when the job runs
    result = worker(escape, Recorder(), clock, outputs=outputs.for_job).handle(
        JobMessage.for_job(job)
    )
    # then it failed without a retry, saying why, and nothing was written
    assert result.disposition is Disposition.FAILED
    assert result.job is not None
    assert "is not a plain file name" in (result.job.error_message or "")
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=outputs_bucket)


def test_a_worker_without_an_outputs_bucket_fails_a_writing_job_with_a_clear_error(
    job: ProcessingJob, clock: FakeClock
) -> None:
    def write(work: Work) -> dict[str, Any]:
        work.outputs.put_bytes("x.txt", b"x", "text/plain")
        return {}

    result = worker(write, Recorder(), clock).handle(JobMessage.for_job(job))
    assert result.disposition is Disposition.FAILED
    assert result.job is not None
    assert "no outputs bucket" in (result.job.error_message or "")


def test_a_derived_file_made_in_the_workspace_is_uploaded_from_disk(
    job: ProcessingJob, clock: FakeClock, outputs_bucket: str
) -> None:
    # given a processor that renders a preview into its workspace, then uploads it
    s3 = boto3.client("s3")
    preview = b"%PDF-1.7 preview bytes" * 1000

    def render(work: Work) -> dict[str, Any]:
        path = work.workspace / "preview.pdf"
        path.write_bytes(preview)
        return {"preview": work.outputs.put_file("preview.pdf", path, "application/pdf")}

    # when the job runs
    result = worker(
        render, Recorder(), clock, outputs=S3Outputs(s3, outputs_bucket).for_job
    ).handle(JobMessage.for_job(job))
    # then the file is in the outputs bucket, byte for byte
    assert result.disposition is Disposition.COMPLETED
    key = f"derived/acme/{job.file_id}/virus_scan/preview.pdf"
    assert s3.get_object(Bucket=outputs_bucket, Key=key)["Body"].read() == preview
