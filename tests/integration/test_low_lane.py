"""Specification: rescans and backfills (negative priority) travel in their job types' low lanes,
new uploads' jobs in the normal ones, and every later send of a job (the sweep's, a retry's)
keeps its lane. The lanes are moto SQS queues; the jobs are stored in moto DynamoDB."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta

import boto3
import pytest
from mypy_boto3_s3 import S3Client
from mypy_boto3_sqs import SQSClient

from filejobs.adapters.s3 import S3HeadReader
from filejobs.adapters.s3_notifications import object_created_records
from filejobs.adapters.sqs import SqsDispatcher
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.ingest import BACKFILL_METADATA_KEY, ObjectCreated
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.messages import Lane
from filejobs.domain.retry import DispatchPolicy
from filejobs.services.ingest import IngestService, UploadIntake
from filejobs.services.rescans import Rescans
from filejobs.services.sweep import SweepService
from filejobs_cli.scanning import ExistingObject, _notification
from tests.conftest import FakeClock

BUCKET = "filejobs-uploads-low-lane"
NOTES = b"Meeting notes\n\n- rescan every file\n" * 8
DISPATCH = DispatchPolicy(grace=timedelta(minutes=2), cap=timedelta(minutes=8), max_dispatches=3)

type Queues = dict[tuple[JobType, Lane], str]


@pytest.fixture
def sqs(tables: dict[str, str]) -> SQSClient:
    return boto3.client("sqs")


@pytest.fixture
def queues(sqs: SQSClient) -> Queues:
    return {
        (t, lane): sqs.create_queue(QueueName=f"{t.value}-{lane.value}")["QueueUrl"]
        for t in JobType
        for lane in Lane
    }


@pytest.fixture
def s3(tables: dict[str, str]) -> S3Client:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return client


def intake(s3: S3Client, sqs: SQSClient, queues: Queues, clock: FakeClock) -> UploadIntake:
    ingest = IngestService(FileRepository(), S3HeadReader(s3), clock)
    return UploadIntake(ingest, JobRepository(), SqsDispatcher(sqs, queues))


def put(s3: S3Client, key: str, **metadata: str) -> ObjectCreated:
    """The object put, and the record S3 delivers for it."""
    answer = s3.put_object(Bucket=BUCKET, Key=key, Body=NOTES, Metadata=metadata)
    return ObjectCreated(BUCKET, key, len(NOTES), answer["ETag"].strip('"'), answer["VersionId"])


def job_ids_in(sqs: SQSClient, url: str) -> set[str]:
    found: set[str] = set()
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        found |= {json.loads(m["Body"])["job_id"] for m in messages}
    return found


def lanes_of_waiting(sqs: SQSClient, queues: Queues) -> dict[str, Lane]:
    """The lane each waiting message's job is in (all drained; a job in two lanes fails)."""
    found: dict[str, Lane] = {}
    for (_, lane), url in queues.items():
        for job_id in job_ids_in(sqs, url):
            assert job_id not in found, f"job {job_id} sent to two lanes"
            found[job_id] = lane
    return found


def lanes_holding(sqs: SQSClient, queues: Queues, jobs: Iterable[ProcessingJob]) -> dict[str, Lane]:
    """Which lane each of `jobs` waits in: the messages waiting are theirs and no others'."""
    found = lanes_of_waiting(sqs, queues)
    assert set(found) == {job.id for job in jobs}
    return found


def test_a_new_uploads_jobs_are_sent_to_the_normal_lane(
    s3: S3Client, sqs: SQSClient, queues: Queues, clock: FakeClock
) -> None:
    # given a tenant's new upload
    record = put(s3, "uploads/acme/notes.md")
    # when the ingest records it and sends the jobs it starts with
    received = intake(s3, sqs, queues, clock).receive(record)
    # then they wait in the normal lane, at priority 0
    assert received.sent
    assert {job.priority for job in received.sent} == {0}
    assert set(lanes_holding(sqs, queues, received.sent).values()) == {Lane.NORMAL}


def test_a_rescans_job_is_sent_to_the_low_lane(
    s3: S3Client, sqs: SQSClient, queues: Queues, clock: FakeClock
) -> None:
    # given a file recorded (its own jobs' messages drained)
    received = intake(s3, sqs, queues, clock).receive(put(s3, "uploads/acme/old.md"))
    lanes_holding(sqs, queues, received.sent)
    stored = FileRepository().get(received.file_id)
    assert stored is not None
    # when an operator rescans it
    rescans = Rescans(JobRepository(), FileRepository(), SqsDispatcher(sqs, queues), clock=clock)
    rescan = rescans.rescan(stored, key="k1", by="operator", reason="new definitions")
    # then its scan waits in the virus scan's low lane, below every new upload's
    assert rescan.job.priority < 0
    assert lanes_holding(sqs, queues, [rescan.job]) == {rescan.job.id: Lane.LOW}
    assert rescan.job.job_type is JobType.VIRUS_SCAN


def test_the_sweep_sends_a_lost_rescan_again_to_the_low_lane(
    s3: S3Client, sqs: SQSClient, queues: Queues, clock: FakeClock
) -> None:
    # given a rescan whose first message was never sent
    received = intake(s3, sqs, queues, clock).receive(put(s3, "uploads/acme/lost.md"))
    lanes_holding(sqs, queues, received.sent)
    stored = FileRepository().get(received.file_id)
    assert stored is not None

    class Refused:
        def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
            raise ConnectionError("SQS unreachable")

    rescans = Rescans(JobRepository(), FileRepository(), Refused(), clock=clock, dispatch=DISPATCH)
    lost = rescans.rescan(stored, key="k1", by="operator", reason="r").job
    assert job_ids_in(sqs, queues[(JobType.VIRUS_SCAN, Lane.LOW)]) == set()
    # when the sweep finds it unclaimed after its grace
    clock.advance(DISPATCH.grace + timedelta(seconds=1))
    sweep = SweepService(
        JobRepository(),
        SqsDispatcher(sqs, queues),
        clock=clock,
        dispatch_policy=DISPATCH,
        retention=timedelta(days=30),
    )
    assert sweep.run().actions["redispatched"] >= 1
    # then its message goes to the low lane again, and the upload's own unclaimed jobs, sent
    # again with it, to the normal lane
    lanes = lanes_of_waiting(sqs, queues)
    assert lanes.pop(lost.id) is Lane.LOW
    assert lanes and set(lanes) <= {job.id for job in received.jobs}
    assert set(lanes.values()) == {Lane.NORMAL}


def test_a_backfill_announced_in_place_has_its_jobs_sent_to_the_low_lane(
    s3: S3Client, sqs: SQSClient, queues: Queues, clock: FakeClock
) -> None:
    # given an object that was in the uploads bucket before the stack, announced by
    # `filejobs backfill` as S3 would have announced it
    put(s3, "uploads/acme/legacy.md")
    version = s3.head_object(Bucket=BUCKET, Key="uploads/acme/legacy.md")
    existing = ExistingObject(
        "uploads/acme/legacy.md", version["VersionId"], len(NOTES), version["ETag"].strip('"')
    )
    (record,) = object_created_records(json.dumps(_notification(BUCKET, existing)))
    # when the ingest records it
    received = intake(s3, sqs, queues, clock).receive(record)
    # then every job it made is a backfill's, and the ones it sent wait in the low lane
    assert received.first and received.sent
    assert {job.priority < 0 for job in received.jobs} == {True}
    assert set(lanes_holding(sqs, queues, received.sent).values()) == {Lane.LOW}


def test_a_backfills_copy_from_another_bucket_has_its_jobs_sent_to_the_low_lane(
    s3: S3Client, sqs: SQSClient, queues: Queues, clock: FakeClock
) -> None:
    # given the copy `filejobs backfill` made of another bucket's object (S3 announces it as
    # any upload; the copy's metadata names its source)
    record = put(s3, "uploads/acme/imported.md", **{BACKFILL_METADATA_KEY: "f00d"})
    # when the ingest records it
    received = intake(s3, sqs, queues, clock).receive(record)
    # then its jobs are a backfill's, in the low lane
    assert {job.priority < 0 for job in received.jobs} == {True}
    assert set(lanes_holding(sqs, queues, received.sent).values()) == {Lane.LOW}
