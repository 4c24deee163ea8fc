"""What the happy path costs in DynamoDB requests, counted with botocore event hooks."""

from __future__ import annotations

from datetime import timedelta

import boto3

from filejobs.data.file_repository import FileRepository, Ingested
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.outcome import Applied
from filejobs.services.ingest import IngestService
from tests.aws_requests import DYNAMODB_READS, counting_requests
from tests.conftest import FakeClock
from tests.factories import upload_record

LEASE = timedelta(minutes=5)


class FixedHead:
    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        return b"%PDF-1.7\n"


def test_ingest_is_one_dynamodb_request_per_file(tables: dict[str, str], clock: FakeClock) -> None:
    service = IngestService(FileRepository(), FixedHead(), clock)
    records = [upload_record(f"doc-{i}.pdf") for i in range(5)]

    with counting_requests() as requests:
        results = [service.ingest(r) for r in records]

    assert all(isinstance(r, Ingested) for r in results)
    assert requests.count("dynamodb") == 5
    assert requests.calls["dynamodb:TransactWriteItems"] == 5


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
