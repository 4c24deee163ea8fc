"""The Lambda handlers, fed real S3 notifications, job messages and every events/ file, against
moto resources built from template.yaml (tables, queues with their redrive, buckets with their
notifications)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO, cast
from urllib.parse import unquote_plus

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from mypy_boto3_s3 import S3Client
from mypy_boto3_sqs import SQSClient

from filejobs import runtime
from filejobs.adapters.sqs import SqsDispatcher
from filejobs.config import dead_letter_url_variable
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.file import ScanStatus
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import TransientError
from filejobs.domain.time import utcnow
from filejobs.observability import SERVICE
from filejobs.processors.base import Work
from filejobs.processors.digest import ObjectDigest
from filejobs.processors.source import ObjectSource
from filejobs.services.worker import WorkerService
from filejobs_dev.infra.template import (
    create_buckets,
    create_queues,
    create_tables,
    function_definitions,
    load_template,
    queue_arns,
    resources_of_type,
)
from filejobs_dev.local.stack import on_this_machine
from functions.api import app as api
from functions.ingest import app as ingest
from functions.sweep import app as sweep
from functions.worker import app as worker
from tests.definitions import publish_set
from tests.factories import ingest_plan
from tests.listing import jobs_of_file

EVENTS = Path(__file__).resolve().parents[2] / "events"
TEMPLATE = load_template()


@dataclass
class _Context:
    function_name: str = "test-function"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    aws_request_id: str = "52fdfc07-2182-454f-963f-5f0f9a621d72"

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


def FakeContext() -> LambdaContext:  # noqa: N802 (reads as the class it stands for)
    """What the handlers read of Lambda's context object."""
    return cast(LambdaContext, _Context())


@dataclass
class Stack:
    names: dict[str, str]  # logical id -> physical name (or URL for queues)
    s3: S3Client
    sqs: SQSClient

    @property
    def uploads(self) -> str:
        return self.names["UploadsBucket"]

    def queue(self, logical_id: str) -> str:
        return self.names[logical_id]


# The pseudo parameters the functions' environment names (the stack's name: its metrics).
PSEUDO = {"AWS::StackName": "filejobs-test", "AWS::Region": "us-east-1"}


def _resolve(value: Any, refs: dict[str, str], parameters: dict[str, Any]) -> str:
    """An environment value of the template: a literal, a Ref to a resource, parameter or
    pseudo parameter, or a Sub of those."""
    known = {**PSEUDO, **refs}
    if isinstance(value, dict) and "Ref" in value:
        name = value["Ref"]
        return str(known[name] if name in known else parameters[name]["Default"])
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return re.sub(r"\$\{([^}]+)\}", lambda m: known[m.group(1)], value["Fn::Sub"])
    return str(value)


@pytest.fixture
def stack(aws: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    suffix = uuid.uuid4().hex[:8]
    s3, sqs = boto3.client("s3"), boto3.client("sqs")
    tables = {lid: f"{lid}-{suffix}" for lid in resources_of_type(TEMPLATE, "AWS::DynamoDB::Table")}
    create_tables(boto3.client("dynamodb"), tables, TEMPLATE)
    queue_names = {lid: f"{lid}-{suffix}" for lid in resources_of_type(TEMPLATE, "AWS::SQS::Queue")}
    urls = create_queues(sqs, queue_names, TEMPLATE)
    buckets = {
        lid: f"{lid.lower()}-{suffix}" for lid in resources_of_type(TEMPLATE, "AWS::S3::Bucket")
    }
    create_buckets(s3, buckets, queue_arns(sqs, urls), TEMPLATE)
    refs = {**tables, **urls, **buckets}
    # Globals' environment, plus what the virus scan's worker adds (JOB_TYPE is set per run).
    functions = function_definitions(TEMPLATE)
    environment = {**functions["IngestFunction"].environment}
    environment.update(functions["VirusScanWorker"].environment)
    environment.pop("JOB_TYPE")
    for name, value in environment.items():
        # The ClamAV layer's programs are this machine's (as on the local stack).
        resolved = on_this_machine(_resolve(value, refs, TEMPLATE.get("Parameters", {})))
        monkeypatch.setenv(name, resolved)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "filejobs-test")
    # The scan fails closed: a stack scans once its updater has published definitions.
    publish_set(s3, buckets["OutputsBucket"], tmp_path / "definitions", "20261201T000000Z")
    runtime.reset()
    yield Stack(refs, s3, sqs)
    runtime.reset()


def receive(stack: Stack, logical_id: str) -> list[dict[str, Any]]:
    """Every visible message of a queue, as Lambda's SQS event source would hand them over."""
    url = stack.queue(logical_id)
    arn = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    records: list[dict[str, Any]] = []
    while True:
        got = stack.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not got:
            return records
        for message in got:
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            records.append(sqs_record(message, arn["Attributes"]["QueueArn"]))


def sqs_record(message: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    """A received message as Lambda's SQS event source hands it to the handler."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


def invoke(handler: Any, records: list[dict[str, Any]]) -> list[str]:
    """Run an SQS-triggered handler; return the ids of the records it reported as failed."""
    response = handler({"Records": records}, FakeContext())
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]


# The scan first: the jobs that parse a file wait for its clean verdict (scan before parse).
WORKER_ORDER = (
    JobType.VIRUS_SCAN,
    *(job_type for job_type in JobType if job_type is not JobType.VIRUS_SCAN),
)


def run_workers(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    for job_type in WORKER_ORDER:
        pascal = "".join(part.title() for part in job_type.value.split("_"))
        monkeypatch.setenv("JOB_TYPE", job_type.value)
        for lane in (f"{pascal}Queue", f"{pascal}HighQueue", f"{pascal}LowQueue"):
            records = receive(stack, lane)
            if records:
                assert invoke(worker.handler, records) == []


def event_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


# --- the upload path, end to end through the handlers ---------------------------------------


def test_an_upload_flows_from_s3_through_ingest_to_completed_jobs(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a CSV uploaded with a space in its name
    body = b"id,name\n1,alpha\n2,beta\n"
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/q1 sales.csv", Body=body)

    # When the ingest queue's messages (the S3 test event and the upload) reach the ingest handler
    assert invoke(ingest.handler, receive(stack, "IngestQueue")) == []
    # and every job queue's messages reach their workers
    run_workers(stack, monkeypatch)

    # Then the file has its four jobs, each completed on the real bytes
    [stored] = FileRepository().versions_of(stack.uploads, "uploads/acme/q1 sales.csv")
    assert stored.content_type == "text/csv"
    jobs = {j.job_type: j for j in jobs_of_file(stored.id)}
    assert sorted(t.value for t in jobs) == [
        "compression",
        "deduplication_check",
        "document_preview",
        "virus_scan",
    ]
    for job in jobs.values():
        assert job.status is JobStatus.COMPLETED, job
    results = {t: j.result_data or {} for t, j in jobs.items()}
    # the scan passed the file, which let the parsing jobs run
    assert results[JobType.VIRUS_SCAN]["verdict"] == "CLEAN"
    assert FileRepository().get(stored.id).scan_status is ScanStatus.CLEAN  # type: ignore[union-attr]
    # and each job did its own work on the file's bytes
    assert results[JobType.DEDUPLICATION_CHECK]["sha256"] == hashlib.sha256(body).hexdigest()
    for derived in (JobType.DOCUMENT_PREVIEW, JobType.COMPRESSION):
        key = json.dumps(results[derived])
        assert f"derived/acme/{stored.id}/{derived.value}/" in key, results[derived]


def test_a_files_parsing_jobs_are_sent_by_its_clean_scan_not_by_the_ingest(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a text file uploaded and ingested
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/notes.txt", Body=b"notes\n" * 9)
    assert invoke(ingest.handler, receive(stack, "IngestQueue")) == []

    # Then only the scan and the hash have messages: a parsing job's would be read for nothing
    assert len(receive(stack, "DocumentPreviewQueue")) == 0
    assert len(receive(stack, "CompressionQueue")) == 0
    scans = receive(stack, "VirusScanQueue")
    assert len(scans) == 1 and len(receive(stack, "DeduplicationCheckQueue")) == 1

    # When the scan finds the file clean
    monkeypatch.setenv("JOB_TYPE", JobType.VIRUS_SCAN.value)
    assert invoke(worker.handler, scans) == []

    # Then its verdict sends each parsing job once
    assert len(receive(stack, "DocumentPreviewQueue")) == 1
    assert len(receive(stack, "CompressionQueue")) == 1


def test_a_duplicate_s3_notification_creates_no_duplicate_jobs(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/a.txt", Body=b"hello\n")
    records = receive(stack, "IngestQueue")

    assert invoke(ingest.handler, records) == []
    assert invoke(ingest.handler, records) == []  # the same S3 event, delivered again

    [stored] = FileRepository().versions_of(stack.uploads, "uploads/acme/a.txt")
    assert len(jobs_of_file(stored.id)) == 4
    run_workers(stack, monkeypatch)  # the re-sent messages of pending jobs are harmless
    assert {j.status for j in jobs_of_file(stored.id)} == {JobStatus.COMPLETED}


def test_a_folder_marker_under_uploads_is_acknowledged_and_ignored(stack: Stack) -> None:
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/folder/", Body=b"")

    assert invoke(ingest.handler, receive(stack, "IngestQueue")) == []

    assert FileRepository().versions_of(stack.uploads, "uploads/acme/folder/") == []


def test_a_malformed_job_message_fails_alone(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/b.txt", Body=b"data\n")
    invoke(ingest.handler, receive(stack, "IngestQueue"))
    good = receive(stack, "VirusScanQueue")
    bad = {**good[0], "messageId": "bad-1", "body": '{"job_id": "not-a-uuid"}'}
    monkeypatch.setenv("JOB_TYPE", "virus_scan")

    failed = invoke(worker.handler, [bad, *good])

    assert failed == ["bad-1"]


def test_a_poison_message_ends_in_the_dead_letter_queue(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_TYPE", "virus_scan")
    url = stack.queue("VirusScanQueue")
    stack.sqs.send_message(QueueUrl=url, MessageBody="this is not a job")
    redrive = json.loads(
        stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])[
            "Attributes"
        ]["RedrivePolicy"]
    )

    # Each delivery fails; the handler leaves it on the queue, as Lambda does for a failed item
    deliveries = 0
    while True:
        got = stack.sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages", [])
        if not got:
            break
        deliveries += 1
        record = {
            "messageId": got[0]["MessageId"],
            "body": got[0]["Body"],
            "receiptHandle": "r",
            "attributes": {},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
            "awsRegion": "us-east-1",
        }
        assert invoke(worker.handler, [record]) == [got[0]["MessageId"]]

    dead = stack.sqs.receive_message(QueueUrl=stack.queue("VirusScanDeadLetterQueue"))
    assert deliveries == int(redrive["maxReceiveCount"])
    assert [m["Body"] for m in dead.get("Messages", [])] == ["this is not a job"]


# --- every events/ file ------------------------------------------------------------------------


def test_the_s3_test_event_file_is_acknowledged(stack: Stack) -> None:
    assert invoke(ingest.handler, event_file("ingest_s3_test_event.json")["Records"]) == []


def test_the_upload_event_file_is_ingested(stack: Stack) -> None:
    event = event_file("ingest_s3_upload.json")
    s3_event = json.loads(event["Records"][0]["body"])
    s3_event["Records"][0]["s3"]["bucket"]["name"] = stack.uploads
    del s3_event["Records"][0]["s3"]["object"]["versionId"]  # moto assigns its own versions
    key = unquote_plus(s3_event["Records"][0]["s3"]["object"]["key"])
    stack.s3.put_object(Bucket=stack.uploads, Key=key, Body=b"%PDF-1.7\n%%EOF\n")
    event["Records"][0]["body"] = json.dumps(s3_event)

    assert invoke(ingest.handler, event["Records"]) == []

    [stored] = FileRepository().versions_of(stack.uploads, "uploads/acme/Quarterly report 2026.pdf")
    assert stored.content_type == "application/pdf"


def test_the_job_message_file_for_an_unknown_job_is_acknowledged(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_TYPE", "virus_scan")
    assert invoke(worker.handler, event_file("worker_job_message.json")["Records"]) == []


def test_the_schedule_event_file_runs_the_sweep(stack: Stack) -> None:
    summary = sweep.handler(event_file("sweep_schedule.json"), FakeContext())
    assert summary == {
        "examined": 0,
        "actions": {},
        "lost_races": 0,
        "errors": 0,
        "cut_short": False,
        "unreadable": 0,
        "dead_letters": {},
    }


def test_the_api_event_file_answers_404_for_an_unknown_job(stack: Stack) -> None:
    response = api.handler(event_file("api_get_job.json"), FakeContext())
    assert response["statusCode"] == 404
    assert "Traceback" not in response["body"]


def test_the_api_returns_a_jobs_view(stack: Stack) -> None:
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/c.txt", Body=b"c\n")
    invoke(ingest.handler, receive(stack, "IngestQueue"))
    [stored] = FileRepository().versions_of(stack.uploads, "uploads/acme/c.txt")
    job = jobs_of_file(stored.id)[0]
    event = event_file("api_get_job.json")
    event["path"] = f"/jobs/{job.id}"
    event["pathParameters"] = {"job_id": job.id}

    response = api.handler(event, FakeContext())

    assert response["statusCode"] == 200
    view = json.loads(response["body"])
    assert (view["id"], view["status"], view["attempts"]) == (job.id, "pending", [])


def test_the_api_rejects_an_id_that_is_not_a_uuid(stack: Stack) -> None:
    event = event_file("api_get_job.json")
    event["path"] = "/jobs/..%2F..%2Fetc"
    event["pathParameters"] = {"job_id": "../../etc"}
    response = api.handler(event, FakeContext())
    assert response["statusCode"] == 400
    assert "must be a UUID" in response["body"]


def test_a_scan_refused_for_want_of_definitions_is_counted_for_its_alarm(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stack whose definitions were withdrawn (the manifest gone: nothing to scan with)
    stack.s3.delete_object(Bucket=stack.names["OutputsBucket"], Key="signatures/manifest.json")
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/e.txt", Body=b"e\n")
    invoke(ingest.handler, receive(stack, "IngestQueue"))
    capsys.readouterr()
    monkeypatch.setenv("JOB_TYPE", "virus_scan")
    # When the scan's worker handles its message
    invoke(worker.handler, receive(stack, "VirusScanQueue"))
    # Then the scan is retried (no verdict), and DefinitionsUnavailable is counted: the metric
    # ScanDefinitionsUnavailableAlarm watches
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [blob] = emf
    assert blob["DefinitionsUnavailable"] == [1.0] and blob["JobsRetried"] == [1.0]
    assert blob["job_type"] == "virus_scan"
    [stored] = FileRepository().versions_of(stack.uploads, "uploads/acme/e.txt")
    assert stored.scan_status is None


def test_a_throttled_read_of_the_upload_is_retried_not_failed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an upload whose content hash cannot be read: S3 answers SlowDown (503), as it does
    # when a prefix takes more requests than it can serve
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/t.txt", Body=b"t\n")
    invoke(ingest.handler, receive(stack, "IngestQueue"))
    answer: Any = {
        "Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."},
        "ResponseMetadata": {"HTTPStatusCode": 503},
    }

    def throttled(*_: Any, **__: Any) -> Iterator[bytes]:
        raise ClientError(answer, "GetObject")

    monkeypatch.setattr(ObjectSource, "chunks", throttled)
    monkeypatch.setenv("JOB_TYPE", JobType.DEDUPLICATION_CHECK.value)
    # When the deduplication check's worker handles its message
    assert invoke(worker.handler, receive(stack, "DeduplicationCheckQueue")) == []
    # Then the job waits for a retry (the function's retry policy knows AWS's throttling), with
    # S3's answer as its error, instead of failing for good
    [stored] = FileRepository().versions_of(stack.uploads, "uploads/acme/t.txt")
    [job] = jobs_of_file(stored.id, JobStatus.SCHEDULED)
    assert job.job_type is JobType.DEDUPLICATION_CHECK
    assert "SlowDown" in (job.error_message or "")


def test_a_completed_job_is_measured(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/d.txt", Body=b"d\n")
    invoke(ingest.handler, receive(stack, "IngestQueue"))
    capsys.readouterr()
    monkeypatch.setenv("JOB_TYPE", "virus_scan")

    invoke(worker.handler, receive(stack, "VirusScanQueue"))

    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [blob] = [b for b in emf if "JobsCompleted" in b]
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    names = {m["Name"] for m in directive["Metrics"]}
    assert {"JobsStarted", "JobsCompleted", "JobDuration"} <= names
    assert blob["job_type"] == "virus_scan"
    assert blob["JobsStarted"] == blob["JobsCompleted"] == [1.0]
    [seconds] = blob["JobDuration"]
    assert 0 <= seconds < 60
    # by job type, and again under the stack alone (what its failure-rate alarm adds up)
    assert directive["Dimensions"] == [["job_type", "service"], ["service"]]
    assert blob["service"] == SERVICE  # the stack's name on AWS (tests/.../test_two_local_stacks)
    # and the verdict the scan gave is counted by verdict, in a record of its own
    [verdicts] = [b for b in emf if "ScanVerdicts" in b]
    assert verdicts["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service", "verdict"]]
    assert (verdicts["verdict"], verdicts["ScanVerdicts"]) == ("CLEAN", [1.0])


# --- every log line of a record names what it is about --------------------------------------

type LogLine = dict[str, Any]


class _CurrentStdout:
    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def logs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[[], list[LogLine]]:
    """The JSON log lines the handlers wrote since the last call (metric blobs left out).

    Every handler's Logger writes through one stream handler, whose stream was taken at import:
    for the test it writes to whatever sys.stdout is when a line is written, capsys's.
    """
    handler = cast(logging.StreamHandler[TextIO], worker.logger.registered_handler)
    monkeypatch.setattr(handler, "stream", _CurrentStdout())

    def read() -> list[LogLine]:
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        return [line for line in lines if "level" in line]

    return read


def by_message(lines: list[LogLine]) -> dict[str, list[LogLine]]:
    grouped: dict[str, list[LogLine]] = {}
    for line in lines:
        grouped.setdefault(line.get("message_id", "(none)"), []).append(line)
    return grouped


def job_of(record: dict[str, Any]) -> ProcessingJob:
    job = JobRepository().get(json.loads(record["body"])["job_id"])
    assert job is not None
    return job


def upload(stack: Stack, *names: str) -> list[dict[str, Any]]:
    """Upload text files and ingest them; return the virus-scan queue's job messages."""
    for name in names:
        stack.s3.put_object(Bucket=stack.uploads, Key=f"uploads/acme/{name}", Body=b"text\n")
    assert invoke(ingest.handler, receive(stack, "IngestQueue")) == []
    return receive(stack, "VirusScanQueue")


def test_every_worker_line_names_its_job_and_file_and_the_next_record_starts_clean(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, logs: Callable[[], list[LogLine]]
) -> None:
    # Given a batch of two job messages for two files, and a malformed message last
    flaky, steady = upload(stack, "one.txt", "two.txt")
    malformed = {**steady, "messageId": "malformed-1", "body": '{"job_id": "nope"}'}
    flaky_job, steady_job = job_of(flaky), job_of(steady)

    def processor() -> Callable[[Work], dict[str, Any]]:
        def process(work: Work) -> dict[str, Any]:
            if work.job.id == flaky_job.id:
                raise TransientError("throttled")  # logged by the worker service, then retried
            return ObjectDigest(runtime.s3())(work)

        return process

    monkeypatch.setattr(worker, "build_processor", processor)
    monkeypatch.setenv("JOB_TYPE", "virus_scan")
    logs()

    # When the worker handles the batch
    failed = invoke(worker.handler, [flaky, steady, malformed])

    # Then every line of a job's record names that job and its file, and nothing else's
    assert failed == ["malformed-1"]
    lines = by_message(logs())
    for record, job in ((flaky, flaky_job), (steady, steady_job)):
        assert lines[record["messageId"]], record
        for line in lines[record["messageId"]]:
            assert (line.get("job_id"), line.get("file_id")) == (job.id, job.file_id), line
    assert {line["level"] for line in lines[flaky["messageId"]]} == {"WARNING", "INFO"}
    # and the malformed message's lines inherit no job from the records before it
    [refusal] = lines["malformed-1"]
    assert "job_id" not in refusal and "file_id" not in refusal
    assert "job_id must be a UUID" in refusal["exception"]


def test_a_failure_escaping_a_job_is_logged_once_with_its_job_and_file(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, logs: Callable[[], list[LogLine]]
) -> None:
    [record] = upload(stack, "three.txt")
    job = job_of(record)

    def unreachable(self: object, message: object) -> object:
        raise ConnectionError("table unreachable")

    monkeypatch.setattr(WorkerService, "handle", unreachable)
    monkeypatch.setenv("JOB_TYPE", "virus_scan")
    logs()

    assert invoke(worker.handler, [record]) == [record["messageId"]]

    [failure] = logs()
    assert (failure["level"], failure["message"]) == ("ERROR", "record failed")
    assert (failure["job_id"], failure["file_id"]) == (job.id, job.file_id)
    assert "table unreachable" in failure["exception"]


def test_a_message_without_a_file_id_still_runs_and_its_outcome_names_the_file(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, logs: Callable[[], list[LogLine]]
) -> None:
    # Given a job message as sent before messages carried the file id
    [record] = upload(stack, "four.txt")
    job = job_of(record)
    old = {**record, "body": json.dumps({"job_id": job.id, "job_type": job.job_type.value})}
    monkeypatch.setenv("JOB_TYPE", "virus_scan")
    logs()

    assert invoke(worker.handler, [old]) == []

    # Then the job completes and the outcome line names the file the claim returned
    [handled] = logs()
    assert (handled["message"], handled["disposition"]) == ("job handled", "completed")
    assert (handled["job_id"], handled["file_id"]) == (job.id, job.file_id)


def test_every_ingest_line_names_the_file_being_ingested(
    stack: Stack, logs: Callable[[], list[LogLine]]
) -> None:
    # Given two uploads, each announced by its own notification, and one delivered twice
    for name in ("five.txt", "six.txt"):
        stack.s3.put_object(Bucket=stack.uploads, Key=f"uploads/acme/{name}", Body=b"x\n")
    records = [r for r in receive(stack, "IngestQueue") if "TestEvent" not in r["body"]]
    again = {**records[0], "messageId": "redelivered-1"}
    logs()

    # When the ingest handles them in one batch
    assert invoke(ingest.handler, [*records, again]) == []

    # Then each record's lines name its file (the id it is stored under) and no other
    lines = by_message(logs())
    for record in [*records, again]:
        key = json.loads(record["body"])["Records"][0]["s3"]["object"]["key"]
        [stored] = FileRepository().versions_of(stack.uploads, unquote_plus(key))
        assert lines[record["messageId"]], record
        for line in lines[record["messageId"]]:
            assert (line["file_id"], line["key"]) == (stored.id, stored.key), line
    assert [line["message"] for line in lines["redelivered-1"]] == ["duplicate delivery"]


def test_every_sweep_line_about_a_job_names_the_job_and_its_file(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, logs: Callable[[], list[LogLine]]
) -> None:
    # Given a file's jobs left pending an hour ago (their messages lost), and SQS refusing one
    runtime.tables()
    plan = ingest_plan(utcnow() - timedelta(hours=1), "text/plain")
    FileRepository().record_ingest(plan)
    refused = plan.jobs[0]
    send = SqsDispatcher.dispatch

    def dispatch(self: SqsDispatcher, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        if job.id == refused.id:
            raise ConnectionError("SQS unreachable")
        send(self, job, delay)

    monkeypatch.setattr(SqsDispatcher, "dispatch", dispatch)
    logs()

    # When the sweep runs
    summary = sweep.handler(event_file("sweep_schedule.json"), FakeContext())

    # Then the line about the job it could not re-dispatch names that job and its file
    assert summary["errors"] == 1
    *about_jobs, finished = logs()
    assert about_jobs
    for line in about_jobs:
        assert (line["job_id"], line["file_id"]) == (refused.id, refused.file_id), line
    # and the run's summary, after the last job, carries no job's keys
    assert finished["message"] == "sweep finished"
    assert "job_id" not in finished and "file_id" not in finished


def test_an_unreadable_job_item_is_counted_and_the_dead_letters_are_still_reviewed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two files' jobs left pending an hour ago: one job's item damaged (a status no
    # JobStatus names), the other file's scan message given up on by its queue (the sweep's
    # environment names the dead-letter queue)
    dead_letters = stack.queue("VirusScanDeadLetterQueue")
    monkeypatch.setenv(dead_letter_url_variable(JobType.VIRUS_SCAN), dead_letters)
    runtime.tables()
    hour_ago = utcnow() - timedelta(hours=1)
    plans = [ingest_plan(hour_ago, "text/plain", name=name) for name in ("a.txt", "b.txt")]
    for plan in plans:
        FileRepository().record_ingest(plan)
    damaged = plans[0].jobs[0]
    scan = next(j for j in plans[1].jobs if j.job_type is JobType.VIRUS_SCAN)
    dynamodb = boto3.client("dynamodb")
    dynamodb.update_item(
        TableName=stack.names["JobsTable"],
        Key={"id": {"S": damaged.id}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "exploded"}},
    )
    stack.sqs.send_message(
        QueueUrl=dead_letters,
        MessageBody=JobMessage.for_job(scan).to_json(),
    )
    capsys.readouterr()

    # When the sweep runs
    summary = sweep.handler(event_file("sweep_schedule.json"), FakeContext())

    # Then the damaged item is counted, for its metric, and the run goes on to the dead letters
    assert summary["unreadable"] == 1
    assert summary["dead_letters"] == {"dead_lettered_jobs_failed": 1}
    assert JobRepository().get(scan.id).status is JobStatus.FAILED  # type: ignore[union-attr]
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [blob] = emf
    assert blob["UnreadableJobs"] == [1.0]


def dead_lettered_scan(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, *, created: datetime
) -> ProcessingJob:
    """A text file's scan job, recorded as made at `created`, whose message is in its
    dead-letter queue (a poisoned message SQS gave up on)."""
    dead_letters = stack.queue("VirusScanDeadLetterQueue")
    monkeypatch.setenv(dead_letter_url_variable(JobType.VIRUS_SCAN), dead_letters)
    runtime.tables()
    plan = ingest_plan(created, "text/plain")
    FileRepository().record_ingest(plan)
    scan = next(j for j in plan.jobs if j.job_type is JobType.VIRUS_SCAN)
    stack.sqs.send_message(QueueUrl=dead_letters, MessageBody=JobMessage.for_job(scan).to_json())
    return scan


def test_a_sweep_run_that_fails_still_reviews_the_dead_letters_then_fails(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a scan whose message its queue gave up on, and DynamoDB throttling the sweep's query
    scan = dead_lettered_scan(stack, monkeypatch, created=utcnow())
    throttled: Any = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": ""}}

    def due_for_sweep(*_: Any, **__: Any) -> Iterator[ProcessingJob]:
        raise ClientError(throttled, "Query")

    monkeypatch.setattr(JobRepository, "due_for_sweep", due_for_sweep)

    # When the sweep runs, then the invocation fails (for its alarm and Lambda's retry)
    with pytest.raises(ClientError):
        sweep.handler(event_file("sweep_schedule.json"), FakeContext())

    # but the dead letters were reviewed first: the scan failed, saying why
    failed = JobRepository().get(scan.id)
    assert failed is not None and failed.status is JobStatus.FAILED
    assert "dead-letter" in (failed.error_message or "")


def test_a_job_whose_message_was_dead_lettered_is_failed_before_the_sweep_could_resend_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a scan job an hour old, due for the sweep's look, whose message its queue gave up on
    # (a poisoned message): the job queue is empty, so the sweep alone would take the message
    # for lost and send a copy, which SQS would deliver (and fail) five times over again
    scan = dead_lettered_scan(stack, monkeypatch, created=utcnow() - timedelta(hours=1))

    # When the sweep runs
    summary = sweep.handler(event_file("sweep_schedule.json"), FakeContext())

    # Then the letter failed the job, and no copy of its message went out
    assert summary["dead_letters"] == {"dead_lettered_jobs_failed": 1}
    failed = JobRepository().get(scan.id)
    assert failed is not None and failed.status is JobStatus.FAILED
    assert stack.sqs.receive_message(QueueUrl=stack.queue("VirusScanQueue")).get("Messages") is None


def test_an_api_line_names_the_requested_job(
    stack: Stack, logs: Callable[[], list[LogLine]]
) -> None:
    event = event_file("api_get_job.json")
    logs()

    assert api.handler(event, FakeContext())["statusCode"] == 404

    [line] = logs()
    assert (line["message"], line["job_id"]) == ("job not found", event["pathParameters"]["job_id"])


def test_a_workers_tenant_slots_lapse_at_its_invocations_deadline(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a worker of a stack deployed with a tenants' cap (TenantMaxRunningJobs=10), invoked
    # with a context that has 120 s left
    monkeypatch.setenv("JOB_TYPE", JobType.VIRUS_SCAN.value)
    monkeypatch.setenv("TENANT_MAX_RUNNING_JOBS", "10")
    contexts: list[object] = []
    monkeypatch.setattr(
        worker, "handle", lambda message, message_id, context=None: contexts.append(context)
    )
    context = FakeContext()
    body = json.dumps({"job_id": str(uuid.uuid4()), "job_type": "virus_scan", "tenant": "acme"})
    record = {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "handle",
        "body": body,
        "attributes": {},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobs",
        "awsRegion": "us-east-1",
    }
    worker.handler({"Records": [record]}, context)
    # then each record is handled with the invocation's context (Powertools hands it over)
    assert contexts == [context]
    # and the stack's cap applies, each slot lapsing when the invocation must have ended
    limits = worker.running_cap(context)
    assert limits is not None and limits.cap.max_running == 10
    expected = utcnow() + timedelta(milliseconds=context.get_remaining_time_in_millis())
    assert abs((limits.deadline() - expected).total_seconds()) < 5
