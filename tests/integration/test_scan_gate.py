"""Scan before parse: parsing jobs wait for a clean verdict and are cancelled on an infected one.

The scan's verdict here comes from a stand-in for the scanning engines (their own tests are
tests/integration/test_virus_scan_processor.py): what is tested is what the verdict does to the
file and its other jobs, through the real worker service and real conditional writes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.file import FileStatus, ScanStatus
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.outcome import Applied
from filejobs.domain.retry import PermanentError, TransientError
from filejobs.domain.scanning import GATED_JOB_TYPES
from filejobs.processors.base import Processor, Work
from filejobs.services.scan_gate import ScanGate, ScanRecording
from filejobs.services.worker import Outcome, WorkerService
from tests.conftest import FakeClock
from tests.factories import ingest_plan

KEEP = timedelta(days=1)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent.append(job.id)


@pytest.fixture
def plan(tables: dict[str, str], clock: FakeClock) -> IngestPlan:
    plan = ingest_plan(clock.now, "image/png")
    FileRepository().record_ingest(plan)
    return plan


def job_of(plan: IngestPlan, job_type: JobType) -> ProcessingJob:
    return next(j for j in plan.jobs if j.job_type is job_type)


def service(
    job_type: JobType, processor: Processor, gate: ScanGate, clock: FakeClock
) -> WorkerService:
    return WorkerService(
        JobRepository(),
        Recorder(),
        processor,
        job_type,
        lease=timedelta(minutes=5),
        retention=KEEP,
        worker_id=f"{job_type.value}-worker",
        gate=gate,
        clock=clock,
    )


def scan_saying(verdict: str, *signatures: str) -> Processor:
    def scan(work: Work) -> dict[str, Any]:
        return {"verdict": verdict, "signatures": list(signatures)}

    return scan


def thumbnail(work: Work) -> dict[str, Any]:
    return {"made": work.job.file_id}


def stored(job: ProcessingJob) -> ProcessingJob:
    found = JobRepository().get(job.id)
    assert found is not None
    return found


def run_scan(plan: IngestPlan, verdict: str, gate: ScanGate, clock: FakeClock) -> None:
    scan = job_of(plan, JobType.VIRUS_SCAN)
    recording = ScanRecording(scan_saying(verdict, "Eicar-Test-Signature"), gate)
    result = service(JobType.VIRUS_SCAN, recording, gate, clock).handle(JobMessage.for_job(scan))
    assert result.outcome is Outcome.COMPLETED


def test_a_parsing_job_waits_for_the_scan_and_runs_once_it_is_clean(
    plan: IngestPlan, clock: FakeClock
) -> None:
    dispatcher = Recorder()
    gate = ScanGate(FileRepository(), JobRepository(), dispatcher, retention=KEEP, clock=clock)
    job = job_of(plan, JobType.THUMBNAIL_GENERATION)
    thumbnails = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock)
    # given the thumbnail's message arrives before the file was scanned
    early = thumbnails.handle(JobMessage.for_job(job))
    # then it is acknowledged without work and the job stays pending, unclaimed
    assert (early.outcome, early.detail) == (Outcome.SKIPPED, "waiting for the virus scan")
    assert stored(job).status is JobStatus.PENDING
    assert stored(job).attempt == 0
    # when the scan comes back clean
    run_scan(plan, "CLEAN", gate, clock)
    # then the file says so and the waiting job was sent again
    assert FileRepository().get(job.file_id).scan_status is ScanStatus.CLEAN  # type: ignore[union-attr]
    assert dispatcher.sent == [job.id]
    # and the re-sent message runs it
    assert thumbnails.handle(JobMessage.for_job(job)).outcome is Outcome.COMPLETED


def test_an_infected_file_is_quarantined_and_its_parsing_jobs_cancelled_with_the_reason(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    # when the scan finds the file infected
    run_scan(plan, "INFECTED", gate, clock)
    # then the file is quarantined, saying by what
    file = FileRepository().get(plan.file.id)
    assert file is not None
    assert (file.status, file.scan_status) == (FileStatus.QUARANTINED, ScanStatus.INFECTED)
    assert file.status_reason == "Eicar-Test-Signature"
    # and every job that would parse it is cancelled by the scan, with the reason
    for job in plan.jobs:
        now = stored(job)
        if job.job_type is JobType.THUMBNAIL_GENERATION or job.job_type is JobType.COMPRESSION:
            assert now.status is JobStatus.CANCELLED, job.job_type
            assert now.cancelled_by == "virus_scan"
            assert "quarantined by the virus scan: Eicar-Test-Signature" in (
                now.cancel_reason or ""
            )
    # and hashing, which never decodes, still runs
    assert stored(job_of(plan, JobType.DEDUPLICATION_CHECK)).status is JobStatus.PENDING
    # and a late message of a cancelled job does nothing
    late = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(
        JobMessage.for_job(job_of(plan, JobType.THUMBNAIL_GENERATION))
    )
    assert late.outcome is Outcome.SKIPPED
    assert late.job is not None and late.job.status is JobStatus.CANCELLED


@pytest.mark.parametrize("code", ["NoSuchKey", "404"])
def test_a_job_whose_file_is_quarantined_while_it_runs_is_cancelled_not_failed(
    plan: IngestPlan, clock: FakeClock, code: str
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)

    def hashing_while_the_scan_quarantines(work: Work) -> dict[str, Any]:
        # the scan finishes first and moves the object away; the read then finds nothing
        run_scan(plan, "INFECTED", gate, clock)
        error = {"Error": {"Code": code, "Message": "gone"}}
        raise ClientError(error, "GetObject")  # type: ignore[arg-type]

    # when the deduplication check (never gated) runs beside the scan of an infected file
    dedup = job_of(plan, JobType.DEDUPLICATION_CHECK)
    result = service(
        JobType.DEDUPLICATION_CHECK, hashing_while_the_scan_quarantines, gate, clock
    ).handle(JobMessage.for_job(dedup))
    # then it is cancelled with the quarantine's reason, not failed with S3's error
    assert result.outcome is Outcome.SKIPPED
    now = stored(dedup)
    assert now.status is JobStatus.CANCELLED, now.error_message
    assert "quarantined by the virus scan" in (now.cancel_reason or "")


def test_a_missing_object_of_an_active_file_still_fails_the_job(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)

    def object_missing(work: Work) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "gone"}}, "GetObject")

    dedup = job_of(plan, JobType.DEDUPLICATION_CHECK)
    service(JobType.DEDUPLICATION_CHECK, object_missing, gate, clock).handle(
        JobMessage.for_job(dedup)
    )
    now = stored(dedup)
    assert now.status is JobStatus.FAILED and "NoSuchKey" in (now.error_message or "")


def test_a_file_the_scan_fails_on_for_good_has_its_parsing_jobs_cancelled_with_the_reason(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan = job_of(plan, JobType.VIRUS_SCAN)

    def refuses(work: Work) -> dict[str, Any]:
        raise PermanentError("the file could not be scanned in full: yara: zip bomb")

    # when the scan fails for good
    result = service(JobType.VIRUS_SCAN, ScanRecording(refuses, gate), gate, clock).handle(
        JobMessage.for_job(scan)
    )
    # then the scan job failed with the engine's reason
    assert result.outcome is Outcome.FAILED
    assert "zip bomb" in (stored(scan).error_message or "")
    # and the file is recorded as unscannable (still active: nothing was found in it)
    file = FileRepository().get(plan.file.id)
    assert file is not None
    assert (file.status, file.scan_status) == (FileStatus.ACTIVE, ScanStatus.UNSCANNABLE)
    # and its parsing jobs are cancelled now, saying why, instead of waiting for the sweep
    gated = [job for job in plan.jobs if job.job_type in GATED_JOB_TYPES]
    assert gated
    for job in gated:
        now = stored(job)
        assert now.status is JobStatus.CANCELLED, job.job_type
        assert now.cancel_reason == (
            "the virus scan could not check the file: "
            "the file could not be scanned in full: yara: zip bomb"
        )
    # and hashing still runs
    assert stored(job_of(plan, JobType.DEDUPLICATION_CHECK)).status is JobStatus.PENDING


def test_a_parsing_job_whose_scan_was_cancelled_before_a_verdict_is_cancelled_not_left_waiting(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # Found by the chaos run (tools/chaos.py): a cancelled scan left the thumbnail pending,
    # re-sent by the sweep with growing gaps, for a day.
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan, job = job_of(plan, JobType.VIRUS_SCAN), job_of(plan, JobType.THUMBNAIL_GENERATION)
    # given the file's scan job is cancelled before it gave a verdict
    cancel = transitions.cancel(now=clock.now, by="someone", reason="not now", retention=KEEP)
    assert isinstance(JobRepository().apply(scan.id, scan.job_type, cancel), Applied)
    # when the thumbnail's message comes (the sweep re-sends a pending job)
    result = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(
        JobMessage.for_job(job)
    )
    # then the job is cancelled, saying why and what to do, without running
    assert result.outcome is Outcome.SKIPPED
    now = stored(job)
    assert (now.status, now.attempt) == (JobStatus.CANCELLED, 0)
    assert now.cancel_reason == (
        "the file's virus scan failed or was cancelled before it gave a verdict"
        " (retry the scan, then this job)"
    )


def test_a_message_naming_another_file_never_cancels_the_job_it_names(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # Found by fuzzing (tests/fuzz/test_malformed_events.py): the refusal was decided on the
    # file the message named, not the job's, so a forged message could cancel a real job.
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    job = job_of(plan, JobType.THUMBNAIL_GENERATION)
    forged = replace(JobMessage.for_job(job), file_id="00000000-0000-4000-8000-000000000000")
    # when a message names a real job with a file that is not its own (and not recorded)
    result = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(forged)
    # then it is acknowledged without touching the job
    assert (result.outcome, result.detail) == (Outcome.SKIPPED, "the message names another file")
    assert stored(job).status is JobStatus.PENDING


def test_a_parsing_job_still_waits_while_its_scan_is_retrying(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan, job = job_of(plan, JobType.VIRUS_SCAN), job_of(plan, JobType.THUMBNAIL_GENERATION)

    def flaky(work: Work) -> dict[str, Any]:
        raise TransientError("the engine timed out")

    # given the scan failed once and is scheduled for a retry
    scans = service(JobType.VIRUS_SCAN, ScanRecording(flaky, gate), gate, clock)
    assert scans.handle(JobMessage.for_job(scan)).outcome is Outcome.RETRYING
    # when the thumbnail's message comes, then it keeps waiting
    result = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(
        JobMessage.for_job(job)
    )
    assert (result.outcome, result.detail) == (Outcome.SKIPPED, "waiting for the virus scan")
    assert stored(job).status is JobStatus.PENDING


def test_a_scan_whose_retries_are_spent_cancels_the_waiting_parsing_jobs_at_once(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan = job_of(plan, JobType.VIRUS_SCAN)

    def flaky(work: Work) -> dict[str, Any]:
        raise TransientError("the engine timed out")

    scans = service(JobType.VIRUS_SCAN, ScanRecording(flaky, gate), gate, clock)
    # when every attempt of the scan fails (each retry due once the clock passes it)
    outcomes = []
    for _ in range(scan.max_retries + 1):
        outcomes.append(scans.handle(JobMessage.for_job(scan)).outcome)
        clock.advance(timedelta(hours=1))
    # then the scan failed for good
    assert outcomes[-1] is Outcome.FAILED
    assert stored(scan).status is JobStatus.FAILED
    # and its file's parsing jobs are cancelled now, not left for the sweep to find
    gated = [job for job in plan.jobs if job.job_type in GATED_JOB_TYPES]
    assert gated
    assert all(stored(job).status is JobStatus.CANCELLED for job in gated)
    # and hashing, which never waits for the scan, is untouched
    assert stored(job_of(plan, JobType.DEDUPLICATION_CHECK)).status is JobStatus.PENDING


def test_a_retried_scan_can_clear_an_unscannable_file_but_nothing_clears_an_infected_one(
    plan: IngestPlan, clock: FakeClock
) -> None:
    files = FileRepository()
    files.record_scan(plan.file.id, ScanStatus.UNSCANNABLE, at=clock.now, by="virus_scan")
    cleared = files.record_scan(plan.file.id, ScanStatus.CLEAN, at=clock.now, by="virus_scan")
    assert cleared is not None and cleared.scan_status is ScanStatus.CLEAN
    files.record_scan(plan.file.id, ScanStatus.INFECTED, at=clock.now, by="virus_scan")
    for later in (ScanStatus.CLEAN, ScanStatus.UNSCANNABLE):
        after = files.record_scan(plan.file.id, later, at=clock.now, by="virus_scan")
        assert after is not None and after.scan_status is ScanStatus.INFECTED


def test_a_later_clean_scan_cannot_clear_an_infected_file(
    plan: IngestPlan, clock: FakeClock
) -> None:
    files = FileRepository()
    files.record_scan(plan.file.id, ScanStatus.INFECTED, at=clock.now, by="virus_scan")
    after = files.record_scan(plan.file.id, ScanStatus.CLEAN, at=clock.now, by="virus_scan")
    assert after is not None and after.scan_status is ScanStatus.INFECTED


def test_a_message_naming_another_file_never_runs_its_job(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # given a clean file, and a message for one of its jobs that names another (clean) file
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    run_scan(plan, "CLEAN", gate, clock)
    other = ingest_plan(clock.now, "image/png", name="other.png")
    FileRepository().record_ingest(other)
    run_scan(other, "CLEAN", gate, clock)
    job = job_of(plan, JobType.THUMBNAIL_GENERATION)
    forged = replace(JobMessage.for_job(job), file_id=other.file.id)
    ran: list[str] = []

    def spy(work: Work) -> dict[str, Any]:
        ran.append(work.job.id)
        return {}

    # when it is handled
    result = service(JobType.THUMBNAIL_GENERATION, spy, gate, clock).handle(forged)
    # then the processor never ran and the job failed, saying why
    assert ran == []
    assert result.outcome is Outcome.FAILED
    assert "names another file" in (stored(job).error_message or "")
