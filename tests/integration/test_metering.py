"""The local stack's meter: botocore's events, counted and sized against moto's DynamoDB."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3

from filejobs.data import index_keys
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import FileModel, JobModel
from filejobs.domain import transitions
from filejobs.domain.job import ProcessingJob
from filejobs.domain.transition_result import Applied
from filejobs.ports import Ingested
from filejobs.services.ingest import IngestService
from filejobs_dev.local.metering import Invocations, Meter, MeterLog
from tests.conftest import FakeClock
from tests.factories import upload_record
from tests.fakes import FixedHead

LEASE = timedelta(minutes=5)


class Metered:
    """A meter on the models' clients; its lines, read back."""

    def __init__(self, path: Path, images: Any = None) -> None:
        self.path = path
        self.meter = Meter(MeterLog(str(path), "TestFunction", "compression"),
                           images or boto3.client("dynamodb"))  # fmt: skip
        for model in (JobModel, FileModel):
            self.meter.instrument(model._get_connection().connection.client)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def close(self) -> None:
        for model in (JobModel, FileModel):
            self.meter.uninstrument(model._get_connection().connection.client)


def ingested(clock: FakeClock) -> list[ProcessingJob]:
    result = IngestService(FileRepository(), FixedHead(b"hello, plain text\n"), clock).ingest(
        upload_record("a.txt")
    )
    assert isinstance(result, Ingested)
    return list(result.plan.jobs)


def test_an_ingest_transaction_is_one_request_its_table_writes_doubled(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    metered = Metered(tmp_path / "meter.jsonl")
    try:
        jobs = ingested(clock)
    finally:
        metered.close()

    [line] = metered.lines()
    assert (line["op"], line["ok"], line["items"]) == ("TransactWriteItems", True, 1 + len(jobs))
    # every item is under 1 KB: 2 units each for a transaction, then each index entry put once
    assert line["wru"] - line["index_wru"] == 2 * (1 + len(jobs))
    # a job enters its three indexes (status, tenant, sweep), the file its two (by object,
    # by tenant and key; not the rescan index, which only a clean verdict enters)
    assert line["index_wru"] == 3 * len(jobs) + 2


def test_a_claim_and_a_completion_are_metered_with_every_index_they_move(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    job = ingested(clock)[0]
    repo = JobRepository()
    metered = Metered(tmp_path / "meter.jsonl")
    try:
        claim = transitions.claim(now=clock.now, lease=LEASE, worker="w")
        claimed = repo.apply(job.id, job.job_type, claim)
        assert isinstance(claimed, Applied)
        done = transitions.complete(claimed.job, result={"ok": 1}, now=clock.now, retention=LEASE)
        repo.apply(job.id, job.job_type, done)
    finally:
        metered.close()

    claim_line, complete_line = metered.lines()
    assert claim_line["op"] == complete_line["op"] == "UpdateItem"
    # claim: the job leaves the status index (running jobs are not in it), its sweep key moves
    # (a delete and a put), its tenant entry is rewritten (the status is projected there)
    assert (claim_line["wru"], claim_line["index_wru"]) == (5.0, 4.0)
    # completion: it enters the status index again, leaves the sweep index, tenant rewritten
    assert (complete_line["wru"], complete_line["index_wru"]) == (4.0, 3.0)


def test_a_lost_race_still_costs_a_write_unit_but_moves_no_index(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    job = ingested(clock)[0]
    repo = JobRepository()
    repo.apply(job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w1"))
    metered = Metered(tmp_path / "meter.jsonl")
    try:
        repo.apply(job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w2"))
    finally:
        metered.close()

    [line] = metered.lines()
    assert (line["ok"], line["wru"], line["index_wru"]) == (False, 1.0, 0.0)


def test_a_filtered_query_is_read_at_the_size_of_what_it_evaluated(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    jobs = ingested(clock)
    repo = JobRepository()
    shard = index_keys.tenant_key(jobs[0].tenant, jobs[0].id)
    in_shard = [j for j in jobs if index_keys.tenant_key(j.tenant, j.id) == shard]
    metered = Metered(tmp_path / "meter.jsonl")
    try:
        completed = list(
            JobModel.by_tenant.query(shard, filter_condition=JobModel.status == "completed")
        )
        found = repo.get(jobs[0].id, consistent=False)
        strong = repo.get(jobs[0].id)
    finally:
        metered.close()

    query, eventual, consistent = metered.lines()
    assert completed == [] and found is not None and strong is not None
    # none matched the filter, but every job of the shard was read
    assert (query["op"], query["index"], query["items"]) == ("Query", "by_tenant", len(in_shard))
    assert query["rru"] == 0.5
    assert (eventual["op"], eventual["rru"], consistent["rru"]) == ("GetItem", 0.5, 1.0)


def test_a_batch_read_costs_every_key_asked_for_found_or_not(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    # DynamoDB reads each key of a BatchGetItem as a GetItem: an absent one still costs a unit
    jobs = ingested(clock)
    metered = Metered(tmp_path / "meter.jsonl")
    try:
        found = JobRepository().get_many([*(j.id for j in jobs), str(uuid.uuid4())])
    finally:
        metered.close()

    [line] = metered.lines()
    assert len(found) == len(jobs)
    assert (line["op"], line["items"], line["rru"]) == ("BatchGetItem", len(jobs), len(jobs) + 1.0)


def test_messages_are_counted_and_the_platforms_requests_marked(tmp_path: Path, aws: None) -> None:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="metered")["QueueUrl"]
    meter = Meter(MeterLog(str(tmp_path / "m.jsonl"), "W", None), boto3.client("dynamodb"))
    function, platform = boto3.client("sqs"), boto3.client("sqs")
    meter.instrument(function)
    meter.instrument(platform, platform=True)

    function.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": "x" * 10} for n in range(3)]
    )
    platform.receive_message(QueueUrl=url, MaxNumberOfMessages=10)

    sent, received = (json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines())
    assert (sent["op"], sent["messages"], sent["bytes"], sent["platform"]) == (
        "SendMessageBatch", 3, 30, False,
    )  # fmt: skip
    assert (received["op"], received["messages"], received["platform"]) == (
        "ReceiveMessage", 3, True,
    )  # fmt: skip


def test_what_a_put_stores_is_counted_whether_its_body_is_bytes_or_a_file(
    tmp_path: Path, aws: None
) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="metered-outputs")
    meter = Meter(MeterLog(str(tmp_path / "m.jsonl"), "W", None), boto3.client("dynamodb"))
    meter.instrument(s3)
    on_disk = tmp_path / "preview.webp"
    on_disk.write_bytes(b"w" * 5000)

    s3.put_object(Bucket="metered-outputs", Key="a", Body=b"x" * 1234)
    with on_disk.open("rb") as body:
        s3.put_object(Bucket="metered-outputs", Key="b", Body=body)
    s3.get_object(Bucket="metered-outputs", Key="a")["Body"].read()

    lines = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [(line["op"], line["bytes"]) for line in lines] == [
        ("PutObject", 1234), ("PutObject", 5000), ("GetObject", 0),
    ]  # fmt: skip


class BrokenImages:
    def get_item(self, **_: Any) -> Any:
        raise RuntimeError("the meter's own read failed")

    def describe_table(self, **_: Any) -> Any:
        raise RuntimeError("the meter's own read failed")


def test_a_meter_that_cannot_size_a_request_never_fails_it(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    # Given a meter whose own reads of the items fail
    job = ingested(clock)[0]
    metered = Metered(tmp_path / "meter.jsonl", images=BrokenImages())

    # When a write it must size goes through
    try:
        claim = transitions.claim(now=clock.now, lease=LEASE, worker="w")
        result = JobRepository().apply(job.id, job.job_type, claim)
    finally:
        metered.close()

    # Then the write is applied, and the meter's line says why it has no units
    assert isinstance(result, Applied)
    [line] = metered.lines()
    assert line["ok"] is True and "wru" not in line
    assert line["meter_error"] == "RuntimeError: the meter's own read failed"


class SlowImages:
    """The meter's own client, taking its time over every read."""

    def __init__(self, seconds: float) -> None:
        self._client, self._seconds = boto3.client("dynamodb"), seconds

    def get_item(self, **params: Any) -> Any:
        time.sleep(self._seconds)
        return self._client.get_item(**params)

    def describe_table(self, **params: Any) -> Any:
        return self._client.describe_table(**params)


def test_an_invocation_is_timed_without_the_meters_own_reads(
    tables: dict[str, str], clock: FakeClock, tmp_path: Path
) -> None:
    # Given a meter whose reads of the items before and after a write take 0.3 s each
    job = ingested(clock)[0]
    metered = Metered(tmp_path / "meter.jsonl", images=SlowImages(0.3))
    invocations = Invocations(metered.meter, memory_mb=1024)

    # When an invocation claims the job (one write: two of the meter's reads around it)
    try:
        started = time.perf_counter()
        with invocations.invocation(records=1):
            claim = transitions.claim(now=clock.now, lease=LEASE, worker="w")
            assert isinstance(JobRepository().apply(job.id, job.job_type, claim), Applied)
        wall_ms = (time.perf_counter() - started) * 1000
    finally:
        invocations.close()
        metered.close()

    # Then the invocation is billed for the claim, not for the meter's 0.6 s (measured against the
    # wall time around it, so a busy machine cannot make the claim itself look too slow)
    [invoked] = [line for line in metered.lines() if line["kind"] == "invoke"]
    assert invoked["ms"] <= wall_ms - 600
