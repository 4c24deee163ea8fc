"""The scan's release of a file's gated jobs (services/scan_gate.py `settle`): with no read of
the jobs when the verdict's scan can be the only thing that ever decided about them, and with
the jobs read whenever something else may have (a rescan, a later attempt, jobs of the API, a
preset's priorities), so a job an earlier refusal cancelled is still given back."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.file import ScanRecord, ScanStatus, StoredFile
from filejobs.domain.ingest import IngestPlan, new_job
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.presets import AppliedPreset
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.scanning import GATED_JOB_TYPES, SCANNER
from filejobs.domain.transition_result import Applied
from filejobs.services.scan_gate import ScanGate
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher

KEEP = timedelta(days=7)


class ReadCountingJobs(InMemoryJobStore):
    """The job store, counting the reads of a file's jobs."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def jobs_of(
        self, stored: StoredFile, status: JobStatus | None = None, *, consistent: bool = True
    ) -> list[ProcessingJob]:
        self.reads += 1
        return super().jobs_of(stored, status, consistent=consistent)


@pytest.fixture
def jobs() -> ReadCountingJobs:
    return ReadCountingJobs()


@pytest.fixture
def gate(
    files: InMemoryFileStore, jobs: ReadCountingJobs, sent: RecordingDispatcher, clock: FakeClock
) -> ScanGate:
    return ScanGate(files, jobs, sent, retention=KEEP, clock=clock)


@pytest.fixture
def plan(files: InMemoryFileStore, clock: FakeClock) -> IngestPlan:
    plan = ingest_plan(clock.now, "image/png")  # a scan, a thumbnail, a dedup check
    files.record_ingest(plan)
    return plan


def of_type(plan: IngestPlan, job_type: JobType) -> ProcessingJob:
    return next(job for job in plan.jobs if job.job_type is job_type)


def gated_ids(plan: IngestPlan) -> list[str]:
    return sorted(job.id for job in plan.jobs if job.job_type in GATED_JOB_TYPES)


def claimed(jobs: InMemoryJobStore, job: ProcessingJob, clock: FakeClock) -> ProcessingJob:
    claim = transitions.claim(now=clock.now, lease=timedelta(minutes=5), worker="scan-worker")
    result = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(result, Applied)
    return result.job


def verdict(
    files: InMemoryFileStore, plan: IngestPlan, kind: ScanStatus, clock: FakeClock
) -> StoredFile:
    scan = of_type(plan, JobType.VIRUS_SCAN)
    after = files.record_scan(plan.file.id, ScanRecord(kind, clock.now, scan.id), by=SCANNER)
    assert after is not None
    return after


def test_a_clean_first_verdict_of_the_ingest_scan_sends_the_gated_jobs_without_a_read(
    gate: ScanGate,
    plan: IngestPlan,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    scan = claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock)

    released = gate.settle(plan.file.id, verdict(files, plan, ScanStatus.CLEAN, clock), scan)

    assert jobs.reads == 0
    assert sorted(sent.sent_ids) == gated_ids(plan) and released == len(gated_ids(plan)) > 0


def test_a_blind_release_sends_in_the_scan_jobs_lane(
    gate: ScanGate,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    clock: FakeClock,
) -> None:
    # a backfill's upload: every ingest job of it at the backfill's priority, the scan's too
    plan = ingest_plan(clock.now, "image/png", name="old.png")
    plan = IngestPlan(plan.file, tuple(replace(job, priority=-10) for job in plan.jobs))
    files.record_ingest(plan)
    lanes = Lanes()
    gate = ScanGate(files, jobs, lanes, retention=KEEP, clock=clock)
    scan = claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock)

    gate.settle(plan.file.id, verdict(files, plan, ScanStatus.CLEAN, clock), scan)

    stored = {job.id: job for job in plan.jobs}
    assert lanes.sent and all(
        (job.job_type, job.priority, job.file_id, job.tenant)
        == (stored[job.id].job_type, stored[job.id].priority, plan.file.id, plan.file.tenant)
        for job in lanes.sent
    )


class Lanes:
    """A dispatcher that keeps each job it was given (what its message and lane are made of)."""

    def __init__(self) -> None:
        self.sent: list[ProcessingJob] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent.append(job)


def test_an_infected_first_verdict_cancels_the_gated_jobs_without_a_read(
    gate: ScanGate,
    plan: IngestPlan,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    scan = claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock)

    released = gate.settle(plan.file.id, verdict(files, plan, ScanStatus.INFECTED, clock), scan)

    assert (jobs.reads, released, sent.sent_ids) == (0, 0, [])
    for job_id in gated_ids(plan):
        cancelled = jobs.get(job_id)
        assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
        assert cancelled.cancelled_by == SCANNER
    dedup = jobs.get(of_type(plan, JobType.DEDUPLICATION_CHECK).id)
    assert dedup is not None and dedup.status is JobStatus.PENDING  # not gated: left alone


def test_a_job_its_owner_cancelled_before_the_verdict_is_sent_and_stays_cancelled(
    gate: ScanGate,
    plan: IngestPlan,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    thumbnail = of_type(plan, JobType.THUMBNAIL_GENERATION)
    cancel = transitions.cancel(now=clock.now, by="acme", reason="not wanted", retention=KEEP)
    assert isinstance(jobs.apply(thumbnail.id, thumbnail.job_type, cancel), Applied)
    scan = claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock)

    gate.settle(plan.file.id, verdict(files, plan, ScanStatus.CLEAN, clock), scan)

    # its message is sent unread (the worker's claim acknowledges it), the job is as it was
    assert thumbnail.id in sent.sent_ids
    after = jobs.get(thumbnail.id)
    assert after is not None and after.status is JobStatus.CANCELLED


def give_back_case(
    plan: IngestPlan, jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock
) -> None:
    """An unscannable verdict under the hold policy cancelled the gated jobs, by the scanner."""
    verdict(files, plan, ScanStatus.UNSCANNABLE, clock)
    cancel = transitions.cancel(now=clock.now, by=SCANNER, reason="unscannable", retention=KEEP)
    for job_id in gated_ids(plan):
        assert isinstance(jobs.apply(job_id, JobType.THUMBNAIL_GENERATION, cancel), Applied)


def test_a_later_attempt_of_the_scan_reads_the_jobs_and_gives_back_what_a_refusal_cancelled(
    gate: ScanGate,
    plan: IngestPlan,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    # attempt 1 found the file unscannable and cancelled its gated jobs, then died
    give_back_case(plan, jobs, files, clock)
    scan = replace(claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock), attempt=2)

    released = gate.settle(plan.file.id, verdict(files, plan, ScanStatus.CLEAN, clock), scan)

    assert jobs.reads == 1
    assert sorted(sent.sent_ids) == gated_ids(plan) and released == len(gated_ids(plan))
    for job_id in gated_ids(plan):
        given_back = jobs.get(job_id)
        assert given_back is not None and given_back.status is JobStatus.PENDING


def test_a_file_with_a_rescan_reads_the_jobs_even_on_the_ingest_scans_first_attempt(
    gate: ScanGate,
    plan: IngestPlan,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    # a rescan asked before the ingest's scan ended found the file unscannable first
    rescan = new_job(
        plan.file,
        JobType.VIRUS_SCAN,
        now=clock.now,
        created_by="acme",
        dispatch=DispatchPolicy(),
        idempotency_key="api:rescan:1",
    )
    assert files.add_job(rescan)
    give_back_case(plan, jobs, files, clock)
    scan = claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock)

    gate.settle(plan.file.id, verdict(files, plan, ScanStatus.CLEAN, clock), scan)

    assert jobs.reads == 1
    assert sorted(sent.sent_ids) == gated_ids(plan)  # given back, not left cancelled


@pytest.mark.parametrize(
    "why",
    ["no scan told", "another scan job", "a preset chose the jobs", "a file naming no jobs"],
)
def test_anything_but_the_plain_case_reads_the_jobs(
    why: str,
    gate: ScanGate,
    plan: IngestPlan,
    jobs: ReadCountingJobs,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    first = claimed(jobs, of_type(plan, JobType.VIRUS_SCAN), clock)
    scan: ProcessingJob | None = first
    after = verdict(files, plan, ScanStatus.CLEAN, clock)
    if why == "no scan told":
        scan = None
    elif why == "another scan job":
        scan = replace(first, id="00000000-0000-4000-8000-00000000abcd")
    elif why == "a preset chose the jobs":
        after = replace(after, preset=AppliedPreset("fast", 1, "tenant"))
    else:  # recorded before files named their jobs
        after = replace(after, job_ids=frozenset())

    gate.settle(plan.file.id, after, scan)

    assert jobs.reads == 1
    assert sorted(sent.sent_ids) == gated_ids(plan)
