"""Scan before parse: parsing jobs wait for a clean verdict and are cancelled on an infected one.

The scan's verdict here comes from a stand-in for the scanning engines (their own tests are
tests/integration/test_virus_scan_processor.py), and its marks in S3 go to an in-memory fake
(S3's own are tests/integration/test_quarantine.py): what is tested is what the verdict does to
the file and its other jobs, through the real use case (services/virus_scan.py), the real worker
service and real conditional writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from filejobs.adapters.workspace import shared_scratch
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.objects import ObjectLocation
from filejobs.domain.retry import ObjectGoneError, PermanentError, TransientError
from filejobs.domain.scanning import GATED_JOB_TYPES, UnscannablePolicy
from filejobs.domain.transition_result import Applied
from filejobs.ports import Quarantined
from filejobs.processors.base import Processor, Work
from filejobs.services.scan_gate import ScanGate
from filejobs.services.virus_scan import VirusScan
from filejobs.services.worker import Disposition, WorkerService
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
        scratch=shared_scratch(),
        gate=gate,
        clock=clock,
    )


class FakeMarks:
    """The verdict's marks in S3, in memory: tags set, versions quarantined, outputs withdrawn."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self.quarantined: list[str] = []
        self.withdrawn: list[str] = []
        self.fail_quarantine = False

    def tag(
        self,
        location: ObjectLocation,
        verdict: str,
        *,
        keep_displaced: Callable[[dict[str, str]], None],
    ) -> bool:
        self.tags[location.key] = verdict
        return True

    def quarantine(
        self, location: ObjectLocation, *, tenant: str, file_id: str, etag: str, size: int
    ) -> Quarantined:
        if self.fail_quarantine:
            raise ConnectionResetError("the worker lost S3 mid-quarantine")
        self.tags[location.key] = "INFECTED"
        self.quarantined.append(file_id)
        return Quarantined(f"quarantine/{tenant}/{file_id}/x", True, (location.version_id or "",))

    def withdraw_outputs(self, tenant: str, file_id: str) -> int:
        self.withdrawn.append(file_id)
        return 0


def scan_saying(verdict: str, *signatures: str, reason: str | None = None) -> Processor:
    def scan(work: Work) -> dict[str, Any]:
        return {
            "verdict": verdict,
            "signatures": list(signatures),
            "engines": {"yara": {"version": "4.5.4"}},
            "definitions_version": "20261129T080000Z",
            "unscannable_reason": reason,
        }

    return scan


def virus_scan(
    scanner: Processor, gate: ScanGate, clock: FakeClock, marks: FakeMarks | None = None
) -> VirusScan:
    return VirusScan(scanner, FileRepository(), marks or FakeMarks(), gate, clock)


def verdict(kind: ScanStatus, clock: FakeClock) -> ScanRecord:
    return ScanRecord(kind, clock.now, "00000000-0000-4000-8000-000000000001")


def thumbnail(work: Work) -> dict[str, Any]:
    return {"made": work.job.file_id}


def stored(job: ProcessingJob) -> ProcessingJob:
    found = JobRepository().get(job.id)
    assert found is not None
    return found


def run_scan(
    plan: IngestPlan,
    verdict: str,
    gate: ScanGate,
    clock: FakeClock,
    marks: FakeMarks | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    scan = job_of(plan, JobType.VIRUS_SCAN)
    scanner = scan_saying(verdict, "Eicar-Test-Signature", reason=reason)
    use_case = virus_scan(scanner, gate, clock, marks)
    result = service(JobType.VIRUS_SCAN, use_case, gate, clock).handle(JobMessage.for_job(scan))
    assert result.disposition is Disposition.COMPLETED
    assert result.job is not None and result.job.result_data is not None
    return result.job.result_data


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
    assert (early.disposition, early.detail) == (Disposition.SKIPPED, "waiting for the virus scan")
    assert stored(job).status is JobStatus.PENDING
    assert stored(job).attempt == 0
    # when the scan comes back clean
    scanned = run_scan(plan, "CLEAN", gate, clock)
    # then the file says so and the waiting job was sent again, as the scan's result says
    assert FileRepository().get(job.file_id).scan_status is ScanStatus.CLEAN  # type: ignore[union-attr]
    assert dispatcher.sent == [job.id]
    assert scanned["released"] == 1
    # and the re-sent message runs it
    assert thumbnails.handle(JobMessage.for_job(job)).disposition is Disposition.COMPLETED


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
    assert late.disposition is Disposition.SKIPPED
    assert late.job is not None and late.job.status is JobStatus.CANCELLED


def test_a_job_whose_file_is_quarantined_while_it_runs_is_cancelled_not_failed(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)

    def hashing_while_the_scan_quarantines(work: Work) -> dict[str, Any]:
        # the scan finishes first and moves the object away; the read then finds nothing
        run_scan(plan, "INFECTED", gate, clock)
        raise ObjectGoneError(f"{ObjectLocation.of(work.job)} is gone (NoSuchKey)")

    # when the deduplication check (never gated) runs beside the scan of an infected file
    dedup = job_of(plan, JobType.DEDUPLICATION_CHECK)
    result = service(
        JobType.DEDUPLICATION_CHECK, hashing_while_the_scan_quarantines, gate, clock
    ).handle(JobMessage.for_job(dedup))
    # then it is cancelled with the quarantine's reason, not failed with S3's error
    assert result.disposition is Disposition.SKIPPED
    now = stored(dedup)
    assert now.status is JobStatus.CANCELLED, now.error_message
    assert "quarantined by the virus scan" in (now.cancel_reason or "")


def test_a_missing_object_of_an_active_file_still_fails_the_job(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)

    def object_missing(work: Work) -> dict[str, Any]:
        raise ObjectGoneError(f"{ObjectLocation.of(work.job)} is gone (NoSuchKey)")

    dedup = job_of(plan, JobType.DEDUPLICATION_CHECK)
    service(JobType.DEDUPLICATION_CHECK, object_missing, gate, clock).handle(
        JobMessage.for_job(dedup)
    )
    now = stored(dedup)
    assert now.status is JobStatus.FAILED and "is gone (NoSuchKey)" in (now.error_message or "")


def test_an_unscannable_file_has_its_parsing_jobs_cancelled_with_the_reason(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    marks = FakeMarks()
    # when the scan cannot vouch for the file (an archive past the engines' limits)
    run_scan(plan, "UNSCANNABLE", gate, clock, marks, reason="yara: a likely zip bomb")
    # then the file is recorded as unscannable (still active: nothing was found in it), with
    # the reason in its record, and its version says so too
    file = FileRepository().get(plan.file.id)
    assert file is not None and file.scan is not None
    assert (file.status, file.scan_status) == (FileStatus.ACTIVE, ScanStatus.UNSCANNABLE)
    assert file.scan.reason == "yara: a likely zip bomb"
    assert marks.tags == {plan.file.key: "UNSCANNABLE"}
    # and its parsing jobs are cancelled now, saying why
    gated = [job for job in plan.jobs if job.job_type in GATED_JOB_TYPES]
    assert gated
    for job in gated:
        now = stored(job)
        assert now.status is JobStatus.CANCELLED, job.job_type
        assert now.cancel_reason == (
            "the virus scan could not vouch for the file: yara: a likely zip bomb"
        )
    # and hashing still runs
    assert stored(job_of(plan, JobType.DEDUPLICATION_CHECK)).status is JobStatus.PENDING


def test_under_the_process_policy_an_unscannable_files_parsing_jobs_run(
    plan: IngestPlan, clock: FakeClock
) -> None:
    dispatcher = Recorder()
    gate = ScanGate(
        FileRepository(),
        JobRepository(),
        dispatcher,
        retention=KEEP,
        unscannable=UnscannablePolicy.PROCESS,
        clock=clock,
    )
    run_scan(plan, "UNSCANNABLE", gate, clock, reason="the file is 3 GB; the scan reads 512 MB")
    gated = [job for job in plan.jobs if job.job_type in GATED_JOB_TYPES]
    assert sorted(dispatcher.sent) == sorted(j.id for j in gated)
    job = job_of(plan, JobType.THUMBNAIL_GENERATION)
    ran = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(
        JobMessage.for_job(job)
    )
    assert ran.disposition is Disposition.COMPLETED


def test_a_scan_that_fails_for_good_leaves_no_verdict_and_cancels_the_parsing_jobs(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan = job_of(plan, JobType.VIRUS_SCAN)

    def broken(work: Work) -> dict[str, Any]:
        raise PermanentError("job input_data names no object (bucket and key)")

    result = service(JobType.VIRUS_SCAN, virus_scan(broken, gate, clock), gate, clock).handle(
        JobMessage.for_job(scan)
    )
    assert result.disposition is Disposition.FAILED
    file = FileRepository().get(plan.file.id)
    assert file is not None and file.scan_status is None
    for job in plan.jobs:
        if job.job_type in GATED_JOB_TYPES:
            now = stored(job)
            assert now.status is JobStatus.CANCELLED
            assert "failed or was cancelled before it gave a verdict" in (now.cancel_reason or "")


def test_a_rescan_that_gets_through_gives_back_the_jobs_the_failed_scan_cancelled(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # Given a scan that failed closed until its retries ran out (no definitions), its file's
    # parsing jobs cancelled for want of a verdict
    dispatcher = Recorder()
    gate = ScanGate(FileRepository(), JobRepository(), dispatcher, retention=KEEP, clock=clock)
    scan = job_of(plan, JobType.VIRUS_SCAN)

    def no_definitions(work: Work) -> dict[str, Any]:
        raise TransientError("no ClamAV definitions have been published yet")

    scans = service(JobType.VIRUS_SCAN, virus_scan(no_definitions, gate, clock), gate, clock)
    for _ in range(scan.max_retries + 1):
        scans.handle(JobMessage.for_job(scan))
        clock.advance(timedelta(hours=1))
    gated = [job for job in plan.jobs if job.job_type in GATED_JOB_TYPES]
    assert all(stored(job).status is JobStatus.CANCELLED for job in gated)
    # When the definitions are back and the scan is retried, clean
    retry = transitions.retry(now=clock.now, by="operator", dispatch_grace=KEEP)
    assert isinstance(JobRepository().apply(scan.id, scan.job_type, retry), Applied)
    run_scan(plan, "CLEAN", gate, clock)
    # Then the jobs the scan had cancelled are pending again and sent; one an operator
    # cancelled by hand would have been left alone (cancelled_by is the scan's own)
    for job in gated:
        now = stored(job)
        assert now.status is JobStatus.PENDING, job.job_type
        assert now.triggered_by == "virus_scan"
    assert set(dispatcher.sent) >= {j.id for j in gated}


def test_the_infected_verdict_is_recorded_before_the_quarantine_and_a_retry_finishes_it(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    marks = FakeMarks()
    scan = job_of(plan, JobType.VIRUS_SCAN)
    scanned: list[str] = []

    def finds_eicar(work: Work) -> dict[str, Any]:
        scanned.append(work.job.id)
        return scan_saying("INFECTED", "Eicar-Test-Signature")(work)

    scans = service(JobType.VIRUS_SCAN, virus_scan(finds_eicar, gate, clock, marks), gate, clock)
    # given an attempt that found the infection and then lost S3 mid-quarantine
    marks.fail_quarantine = True
    assert scans.handle(JobMessage.for_job(scan)).disposition is Disposition.RETRYING
    # then the verdict is on the file and the file marked quarantined, its outputs withdrawn,
    # though not a byte of it is moved yet: nothing will parse it, no link is given to them
    file = FileRepository().get(plan.file.id)
    assert file is not None and file.scan is not None
    assert (file.status, file.scan_status) == (FileStatus.QUARANTINED, ScanStatus.INFECTED)
    assert file.scan.signatures == ("Eicar-Test-Signature",)
    assert marks.withdrawn == [plan.file.id] and marks.quarantined == []
    thumb = job_of(plan, JobType.THUMBNAIL_GENERATION)
    early = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(
        JobMessage.for_job(thumb)
    )
    assert early.disposition is Disposition.SKIPPED and stored(thumb).status is JobStatus.CANCELLED
    # when the retry comes, it scans again (the version is still there), records the same
    # verdict, and finishes the quarantine
    marks.fail_quarantine = False
    clock.advance(timedelta(hours=1))
    done = scans.handle(JobMessage.for_job(scan))
    assert done.disposition is Disposition.COMPLETED
    assert scanned == [scan.id, scan.id]
    assert marks.quarantined == [plan.file.id]
    result = stored(scan).result_data or {}
    assert result["verdict"] == "INFECTED"
    assert result["signatures"] == ["Eicar-Test-Signature"]
    file = FileRepository().get(plan.file.id)
    assert file is not None and file.status is FileStatus.QUARANTINED


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
    assert result.disposition is Disposition.SKIPPED
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
    assert (result.disposition, result.detail) == (
        Disposition.SKIPPED,
        "the message names another file",
    )
    assert stored(job).status is JobStatus.PENDING


def test_a_parsing_job_still_waits_while_its_scan_is_retrying(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan, job = job_of(plan, JobType.VIRUS_SCAN), job_of(plan, JobType.THUMBNAIL_GENERATION)

    def flaky(work: Work) -> dict[str, Any]:
        raise TransientError("the engine timed out")

    # given the scan failed once and is scheduled for a retry
    scans = service(JobType.VIRUS_SCAN, virus_scan(flaky, gate, clock), gate, clock)
    assert scans.handle(JobMessage.for_job(scan)).disposition is Disposition.RETRYING
    # when the thumbnail's message comes, then it keeps waiting
    result = service(JobType.THUMBNAIL_GENERATION, thumbnail, gate, clock).handle(
        JobMessage.for_job(job)
    )
    assert (result.disposition, result.detail) == (
        Disposition.SKIPPED,
        "waiting for the virus scan",
    )
    assert stored(job).status is JobStatus.PENDING


def test_a_scan_whose_retries_are_spent_cancels_the_waiting_parsing_jobs_at_once(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    scan = job_of(plan, JobType.VIRUS_SCAN)

    def flaky(work: Work) -> dict[str, Any]:
        raise TransientError("the engine timed out")

    scans = service(JobType.VIRUS_SCAN, virus_scan(flaky, gate, clock), gate, clock)
    # when every attempt of the scan fails (each retry due once the clock passes it)
    outcomes = []
    for _ in range(scan.max_retries + 1):
        outcomes.append(scans.handle(JobMessage.for_job(scan)).disposition)
        clock.advance(timedelta(hours=1))
    # then the scan failed for good
    assert outcomes[-1] is Disposition.FAILED
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
    files.record_scan(plan.file.id, verdict(ScanStatus.UNSCANNABLE, clock), by="virus_scan")
    cleared = files.record_scan(plan.file.id, verdict(ScanStatus.CLEAN, clock), by="virus_scan")
    assert cleared is not None and cleared.scan_status is ScanStatus.CLEAN
    files.record_scan(plan.file.id, verdict(ScanStatus.INFECTED, clock), by="virus_scan")
    for later in (ScanStatus.CLEAN, ScanStatus.UNSCANNABLE):
        after = files.record_scan(plan.file.id, verdict(later, clock), by="virus_scan")
        assert after is not None and after.scan_status is ScanStatus.INFECTED


def test_a_later_clean_scan_cannot_clear_an_infected_file(
    plan: IngestPlan, clock: FakeClock
) -> None:
    files = FileRepository()
    files.record_scan(plan.file.id, verdict(ScanStatus.INFECTED, clock), by="virus_scan")
    after = files.record_scan(plan.file.id, verdict(ScanStatus.CLEAN, clock), by="virus_scan")
    assert after is not None and after.scan_status is ScanStatus.INFECTED


def test_a_verdict_records_its_evidence_and_a_clean_one_enters_the_rescan_index(
    plan: IngestPlan, clock: FakeClock
) -> None:
    gate = ScanGate(FileRepository(), JobRepository(), Recorder(), retention=KEEP, clock=clock)
    run_scan(plan, "CLEAN", gate, clock)
    file = FileRepository().get(plan.file.id)
    assert file is not None and file.scan is not None
    assert file.scan.engines == {"yara": "4.5.4"}
    assert file.scan.definitions_version == "20261129T080000Z"
    assert file.scan.scanned_at == clock.now
    assert file.scan.job_id == job_of(plan, JobType.VIRUS_SCAN).id
    due = list(FileRepository().scanned_before(clock.now + timedelta(seconds=1)))
    assert [d.id for d in due] == [plan.file.id]
    assert list(FileRepository().scanned_before(clock.now)) == []


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
    assert result.disposition is Disposition.FAILED
    assert "names another file" in (stored(job).error_message or "")
