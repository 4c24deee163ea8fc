"""What the happy path costs in DynamoDB requests, counted with botocore event hooks."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import boto3

from filejobs.adapters.workspace import shared_scratch
from filejobs.config import DEFAULT_TENANT_QUOTAS
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import QuotaModel
from filejobs.data.quota_repository import QuotaRepository
from filejobs.domain import transitions
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.scanning import GATED_JOB_TYPES
from filejobs.domain.transition_result import Applied
from filejobs.ports import Ingested
from filejobs.services.ingest import IngestService
from filejobs.services.quotas import RememberedLimits, TenantLimits
from filejobs.services.scan_gate import ScanGate
from filejobs.services.worker import Disposition, WorkerService
from tests.aws_requests import DYNAMODB_READS, counting_requests
from tests.conftest import FakeClock
from tests.factories import upload_record
from tests.fakes import FixedHead

LEASE = timedelta(minutes=5)


def test_ingest_is_one_dynamodb_request_per_file(tables: dict[str, str], clock: FakeClock) -> None:
    service = IngestService(FileRepository(), FixedHead(), clock)
    records = [upload_record(f"doc-{i}.pdf") for i in range(5)]

    with counting_requests() as requests:
        results = [service.ingest(r) for r in records]

    assert all(isinstance(r, Ingested) for r in results)
    assert requests.count("dynamodb") == 5
    assert requests.calls["dynamodb:TransactWriteItems"] == 5


def test_ingest_within_quotas_adds_one_read_of_the_tenants_quotas_and_no_write(
    tables: dict[str, str], clock: FakeClock
) -> None:
    limits = TenantLimits(QuotaRepository(), DEFAULT_TENANT_QUOTAS, clock)
    service = IngestService(FileRepository(), FixedHead(), clock, limits=limits.limits)
    records = [upload_record(f"doc-{i}.pdf") for i in range(5)]

    with counting_requests(QuotaModel._get_connection().connection.client) as requests:
        results = [service.ingest(r) for r in records]

    # the count rides in the file's own transaction
    assert all(isinstance(r, Ingested) for r in results)
    assert requests.calls == {"dynamodb:GetItem": 5, "dynamodb:TransactWriteItems": 5}


def test_the_ingests_remembered_quotas_cost_one_read_a_minute_per_tenant(
    tables: dict[str, str], clock: FakeClock
) -> None:
    # the ingest function's wiring: the tenant's quotas kept a minute (RememberedLimits)
    limits = TenantLimits(QuotaRepository(), DEFAULT_TENANT_QUOTAS, clock)
    remembered = RememberedLimits(limits.limits, monotonic=lambda: 0.0)
    service = IngestService(FileRepository(), FixedHead(), clock, limits=remembered)
    records = [upload_record(f"doc-{i}.pdf") for i in range(5)]

    with counting_requests(QuotaModel._get_connection().connection.client) as requests:
        results = [service.ingest(r) for r in records]

    # the tenant has no quota item: that too is remembered, not read again
    assert all(isinstance(r, Ingested) for r in results)
    assert requests.calls == {"dynamodb:GetItem": 1, "dynamodb:TransactWriteItems": 5}


def test_each_job_costs_two_writes_and_no_read(tables: dict[str, str], clock: FakeClock) -> None:
    # Given an ingested file with its jobs
    result = IngestService(FileRepository(), FixedHead(), clock).ingest(upload_record("a.pdf"))
    assert isinstance(result, Ingested)
    jobs = result.plan.jobs
    repo = JobRepository()

    # When a worker claims and completes every job, knowing only the job id and type
    with counting_requests() as requests:
        for job in jobs:
            claimed = repo.apply(
                job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w")
            )
            assert isinstance(claimed, Applied)
            done = transitions.complete(
                claimed.job, result={"ok": True}, now=clock.now, retention=LEASE
            )
            assert isinstance(repo.apply(job.id, job.job_type, done), Applied)

    # Then each job took exactly two UpdateItems and no read
    assert requests.count("dynamodb") == 2 * len(jobs)
    assert requests.calls["dynamodb:UpdateItem"] == 2 * len(jobs)
    assert requests.count("dynamodb", DYNAMODB_READS) == 0


def test_a_lost_race_is_explained_without_a_read(tables: dict[str, str], clock: FakeClock) -> None:
    result = IngestService(FileRepository(), FixedHead(), clock).ingest(upload_record("b.pdf"))
    assert isinstance(result, Ingested)
    job = result.plan.jobs[0]
    repo = JobRepository()
    repo.apply(job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w1"))

    with counting_requests() as requests:
        outcome = repo.apply(
            job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w2")
        )

    assert not isinstance(outcome, Applied) and outcome.current is not None
    assert requests.count("dynamodb") == 1
    assert requests.count("dynamodb", DYNAMODB_READS) == 0
    assert boto3.client("dynamodb")  # the counter saw the models' own clients, not this one


class Dispatched:
    def __init__(self) -> None:
        self.jobs: list[str] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.jobs.append(job.id)


def test_a_parsing_job_costs_its_verdict_read_and_two_writes(
    tables: dict[str, str], clock: FakeClock
) -> None:
    # Given a file whose scan came back clean, and its document preview job's message
    files = FileRepository()
    result = IngestService(files, FixedHead(), clock).ingest(upload_record("c.pdf"))
    assert isinstance(result, Ingested)
    files.record_scan(
        result.plan.file.id, ScanRecord(ScanStatus.CLEAN, clock.now, "scan"), by="virus_scan"
    )
    job = next(j for j in result.plan.jobs if j.job_type is JobType.DOCUMENT_PREVIEW)
    dispatcher = Dispatched()
    gate = ScanGate(files, JobRepository(), dispatcher, retention=LEASE, clock=clock)
    worker = WorkerService(
        JobRepository(), dispatcher, lambda work: {"pages": 1}, JobType.DOCUMENT_PREVIEW,
        lease=LEASE, retention=LEASE, worker_id="w", scratch=shared_scratch(), gate=gate,
        clock=clock,
    )  # fmt: skip

    # When the worker runs it
    with counting_requests() as requests:
        outcome = worker.handle(JobMessage.for_job(job))

    # Then scan before parse cost one (strongly consistent) read of the file, and the job its
    # claim and its completion
    assert outcome.disposition is Disposition.COMPLETED
    assert requests.calls == {"dynamodb:GetItem": 1, "dynamodb:UpdateItem": 2}


def test_a_clean_verdict_costs_a_file_write_and_no_read_to_release_the_parsing_jobs(
    tables: dict[str, str], clock: FakeClock
) -> None:
    files = FileRepository()
    result = IngestService(files, FixedHead(), clock).ingest(upload_record("d.pdf"))
    assert isinstance(result, Ingested)
    scan = next(j for j in result.plan.jobs if j.job_type is JobType.VIRUS_SCAN)
    dispatcher = Dispatched()
    gate = ScanGate(files, JobRepository(), dispatcher, retention=LEASE, clock=clock)

    with counting_requests() as requests:
        stored = files.record_scan(
            scan.file_id, ScanRecord(ScanStatus.CLEAN, clock.now, scan.id), by="virus_scan"
        )
        # the ingest scan's first attempt: the file's write returned all the release needs
        gate.settle(scan.file_id, stored, replace(scan, attempt=1))

    assert requests.calls == {"dynamodb:UpdateItem": 1}
    gated = {j.id for j in result.plan.jobs if j.job_type in GATED_JOB_TYPES}
    assert set(dispatcher.jobs) == gated and gated


def test_a_released_message_of_a_job_cancelled_meanwhile_costs_a_read_and_a_refused_claim(
    tables: dict[str, str], clock: FakeClock
) -> None:
    # Given a file scanned clean whose document preview its owner cancelled before the verdict:
    # the scan's release sent its message all the same, unread (services/scan_gate.py)
    files = FileRepository()
    result = IngestService(files, FixedHead(), clock).ingest(upload_record("w.pdf"))
    assert isinstance(result, Ingested)
    files.record_scan(
        result.plan.file.id, ScanRecord(ScanStatus.CLEAN, clock.now, "scan"), by="virus_scan"
    )
    job = next(j for j in result.plan.jobs if j.job_type is JobType.DOCUMENT_PREVIEW)
    cancel = transitions.cancel(now=clock.now, by="acme", reason="not wanted", retention=LEASE)
    assert isinstance(JobRepository().apply(job.id, job.job_type, cancel), Applied)
    dispatcher = Dispatched()
    gate = ScanGate(files, JobRepository(), dispatcher, retention=LEASE, clock=clock)
    worker = WorkerService(
        JobRepository(), dispatcher, lambda work: {"pages": 1}, JobType.DOCUMENT_PREVIEW,
        lease=LEASE, retention=LEASE, worker_id="w", scratch=shared_scratch(), gate=gate,
        clock=clock,
    )  # fmt: skip

    # When the worker gets the message
    with counting_requests() as requests:
        outcome = worker.handle(JobMessage.for_job(job))

    # Then it is acknowledged without work: the gate's read of the file and the claim its
    # condition refused (no slot here; with TenantSlotsTable, a take and a give-back besides)
    assert outcome.disposition is Disposition.SKIPPED
    assert requests.calls == {"dynamodb:GetItem": 1, "dynamodb:UpdateItem": 1}
