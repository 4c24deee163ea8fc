"""Least privilege that still works: every AWS call each handler makes is allowed by its role.

moto never checks IAM, so a grant missing from template.yaml would only show as AccessDenied in
a deployed stack. Here the real handlers run against moto resources created from the template,
every botocore call they make is recorded, and each is checked against the statements of the
function's own role (tests/iam.py), the template's intrinsics resolved to those resources.
"""

from __future__ import annotations

import io
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlparse

import av
import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from PIL import Image

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import JobModel
from filejobs.domain import transitions
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.messages import JobMessage
from filejobs.domain.scanning import GATED_JOB_TYPES
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs_dev.infra.template import (
    FunctionSpec,
    create_buckets,
    create_event_buses,
    create_queues,
    create_secrets,
    create_tables,
    function_definitions,
    load_template,
    queue_arns,
    resources_of_type,
)
from filejobs_dev.local.mirror import DefinitionsMirror, add_hash_signature, build_local_databases
from filejobs_dev.local.stack import on_this_machine
from functions.api import app as api
from functions.definitions import app as definitions
from functions.events import app as events
from functions.file_removals import app as file_removals
from functions.ingest import app as ingest
from functions.ingest_router import app as ingest_router
from functions.operations import app as operations
from functions.reconciler import app as reconciler
from functions.rescan import app as rescan_policy
from functions.stats import app as stats
from functions.sweep import app as sweep
from functions.webhooks import app as webhooks_function
from functions.worker import app as worker
from tests import content_samples
from tests.definitions import EICAR, publish_set
from tests.factories import ingest_plan
from tests.iam import (
    ACCOUNT,
    PARTITION,
    REGION,
    Call,
    Resolver,
    denied,
    grants,
    key_policy_documents,
    recording_calls,
)
from tests.integration.test_handlers import sqs_record
from tests.listing import jobs_of_file
from tests.streams import StreamTap

TEMPLATE = load_template()
FUNCTIONS = function_definitions(TEMPLATE)
EVENTS = Path(__file__).resolve().parents[2] / "events"


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), "red").save(out, "PNG")
    return out.getvalue()


def pdf() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (200, 300), "blue").save(out, "PDF")
    return out.getvalue()


def mp4() -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(10):
            frame = av.VideoFrame.from_image(Image.new("RGB", (64, 48), "green"))  # type: ignore[no-untyped-call]
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return out.getvalue()


@dataclass
class _Context:
    function_name: str = "iam-check"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:iam-check"
    aws_request_id: str = "0f0e4a57-93c1-4b8e-b3a7-5d1a2c9e7f40"

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


CONTEXT = cast(LambdaContext, _Context())
STACK_NAME = "filejobs"  # the stack tests/iam.py's Resolver resolves ${AWS::StackName} to


@dataclass
class Stack:
    refs: dict[str, str]  # logical id -> what its Ref gives (name, or URL for queues)
    resolver: Resolver
    monkeypatch: pytest.MonkeyPatch

    def become(self, function: str, deployed_with: dict[str, str] | None = None) -> FunctionSpec:
        """Set the environment the template gives the function, as Lambda would, with the
        template's parameters at their defaults or at the values `deployed_with` gives."""
        spec = FUNCTIONS[function]
        given = deployed_with or {}
        parameters = {
            name: {**declared, **({"Default": given[name]} if name in given else {})}
            for name, declared in TEMPLATE.get("Parameters", {}).items()
        }
        for name, value in spec.environment.items():
            resolved = value
            if value == {"Ref": "AWS::AccountId"}:
                resolved = ACCOUNT
            elif value == {"Ref": "AWS::StackName"}:
                resolved = STACK_NAME
            elif isinstance(value, dict) and "Ref" in value:
                target = value["Ref"]
                known = target in self.refs
                resolved = self.refs[target] if known else parameters[target]["Default"]
            elif isinstance(value, dict) and "Fn::GetAtt" in value:
                target = value["Fn::GetAtt"]
                attribute = target if isinstance(target, str) else ".".join(target)
                # a role's unique id: only the API reads it, of IAM callers
                resolved = self.resolver.known(attribute) or "unused"
            elif isinstance(value, dict):
                resolved = "unused"
            # The ClamAV layer's programs are this machine's (as on the local stack).
            self.monkeypatch.setenv(name, on_this_machine(str(resolved)))
        runtime.reset()
        return spec

    def refused(self, function: str, calls: list[Call]) -> list[str]:
        assert calls, f"{function} made no AWS call: the check would prove nothing"
        spec = FUNCTIONS[function]
        keys = [] if spec.role is None else key_policy_documents(TEMPLATE, spec.role)
        return denied(calls, grants([*spec.policies, *keys], self.resolver))

    def queue_records(self, logical_id: str) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs")
        url = self.refs[logical_id]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        records = []
        while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
            for message in got:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                records.append(sqs_record(message, arn["Attributes"]["QueueArn"]))
        return records


@pytest.fixture
def stack(aws: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    suffix = uuid.uuid4().hex[:8]
    dynamodb, sqs, s3 = boto3.client("dynamodb"), boto3.client("sqs"), boto3.client("s3")
    tables = {t: f"{t}-{suffix}" for t in resources_of_type(TEMPLATE, "AWS::DynamoDB::Table")}
    create_tables(dynamodb, tables, TEMPLATE)
    urls = create_queues(
        sqs, {q: f"{q}-{suffix}" for q in resources_of_type(TEMPLATE, "AWS::SQS::Queue")}, TEMPLATE
    )
    arns = queue_arns(sqs, urls)
    buckets = {b: f"{b.lower()}-{suffix}" for b in resources_of_type(TEMPLATE, "AWS::S3::Bucket")}
    create_buckets(s3, buckets, arns, TEMPLATE)
    bus_arns = create_event_buses(boto3.client("events"), {"JobEventsBus": f"bus-{suffix}"})
    attributes = {
        **{f"{q}.Arn": arn for q, arn in arns.items()},
        **{f"{b}.Arn": f"arn:{PARTITION}:s3:::{name}" for b, name in buckets.items()},
        **{f"{bus}.Arn": arn for bus, arn in bus_arns.items()},
    }
    for table, name in tables.items():
        described = dynamodb.describe_table(TableName=name)["Table"]
        attributes[f"{table}.Arn"] = described["TableArn"]
        if "LatestStreamArn" in described:  # TenantSlotsTable has no stream
            attributes[f"{table}.StreamArn"] = described["LatestStreamArn"]
    for group in resources_of_type(TEMPLATE, "AWS::Logs::LogGroup"):
        attributes[f"{group}.Arn"] = f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{group}:*"
    # A role's Ref is its name (the API reads the names of the roles its IAM callers assume).
    roles = {lid: f"{lid}-{suffix}" for lid in resources_of_type(TEMPLATE, "AWS::IAM::Role")}
    attributes["SchedulerRole.Arn"] = (
        f"arn:{PARTITION}:iam::{ACCOUNT}:role/{roles['SchedulerRole']}"
    )
    groups = {
        g: f"{g}-{suffix}" for g in resources_of_type(TEMPLATE, "AWS::Scheduler::ScheduleGroup")
    }
    for logical_id, group in groups.items():
        boto3.client("scheduler").create_schedule_group(Name=group)
        attributes[logical_id] = group  # its Ref, as ${ScheduleGroup} in a policy
    # The API's page-token secret: its Ref is its ARN, which the API's role names.
    secrets = create_secrets(
        boto3.client("secretsmanager"),
        {s: f"{s}-{suffix}" for s in resources_of_type(TEMPLATE, "AWS::SecretsManager::Secret")},
        TEMPLATE,
    )
    attributes.update(secrets)
    # The webhook secrets' key (moto's KMS): the API seals with it, the webhooks function opens.
    key = boto3.client("kms").create_key()["KeyMetadata"]
    attributes["WebhookSecretsKey.Arn"] = key["Arn"]
    refs = {
        **tables,
        **urls,
        **buckets,
        **roles,
        **groups,
        **secrets,
        "JobEventsBus": f"bus-{suffix}",
    }
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "filejobs-test")
    # The scan fails closed: a stack scans once its updater has published definitions.
    publish_set(s3, buckets["OutputsBucket"], tmp_path / "definitions", "20261201T000000Z")
    yield Stack(refs, Resolver(attributes), monkeypatch)
    runtime.reset()


def upload(stack: Stack, name: str, body: bytes) -> None:
    boto3.client("s3").put_object(
        Bucket=stack.refs["UploadsBucket"], Key=f"uploads/acme/{name}", Body=body
    )


def route_notifications(stack: Stack) -> list[Call]:
    """S3's notifications moved to the fair ingest queue by the ingest router, as on AWS."""
    stack.become("IngestRouterFunction")
    with recording_calls() as recorder:
        records = stack.queue_records("IngestQueue")
        assert ingest_router.handler({"Records": records}, CONTEXT)["batchItemFailures"] == []
    return recorder.calls


def ingest_everything(stack: Stack) -> list[Call]:
    route_notifications(stack)
    stack.become("IngestFunction")
    with recording_calls() as recorder:
        records = stack.queue_records("FairIngestQueue")
        # a duplicate delivery takes the other path: it re-sends the file's pending jobs
        ingest.handler({"Records": records + records}, CONTEXT)
    return recorder.calls


def test_ingest_may_recognise_a_late_duplicate_of_an_upload_since_removed(stack: Stack) -> None:
    # given an upload ingested, then its version removed (as the scan's quarantine does)
    upload(stack, "gone.png", png())
    route_notifications(stack)
    stack.become("IngestFunction")
    records = stack.queue_records("FairIngestQueue")
    ingest.handler({"Records": records}, CONTEXT)
    bucket = stack.refs["UploadsBucket"]
    versions = boto3.client("s3").list_object_versions(Bucket=bucket, Prefix="uploads/acme/gone")
    for version in versions.get("Versions", []):
        boto3.client("s3").delete_object(
            Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"]
        )
    # when its notification is delivered again, then the ingest may read whether it is recorded
    with recording_calls() as recorder:
        response = ingest.handler({"Records": records}, CONTEXT)
    assert response["batchItemFailures"] == []
    assert "GetItem" in {c.operation for c in recorder.calls}
    assert stack.refused("IngestFunction", recorder.calls) == []


def run_worker(
    stack: Stack, job_type: JobType, deployed_with: dict[str, str] | None = None
) -> None:
    pascal = "".join(part.title() for part in job_type.value.split("_"))
    stack.become(f"{pascal}Worker", deployed_with)
    records = [
        record
        for lane in (f"{pascal}Queue", f"{pascal}HighQueue", f"{pascal}LowQueue")
        for record in stack.queue_records(lane)
    ]
    assert records
    response = worker.handler({"Records": records}, CONTEXT)
    assert response["batchItemFailures"] == []


def test_ingest_may_do_everything_it_does(stack: Stack) -> None:
    # given uploads of an image, a video and a document whose kind is at its end (the sniffer
    # reads its central directory by a ranged GET), each notification delivered twice
    upload(stack, "photo.png", png())
    upload(stack, "clip.mp4", mp4())
    upload(stack, "report.docx", content_samples.ooxml(layout="libreoffice", padding=100_000))
    # when ingest handles them, then every call it made is granted
    calls = ingest_everything(stack)
    # (a redelivery re-sends its file's pending jobs, read by their ids)
    assert {c.operation for c in calls} >= {"GetObject", "TransactWriteItems", "BatchGetItem"}
    # six heads (three uploads, each delivered twice) and the document's end, read twice
    assert sum(c.operation == "GetObject" for c in calls) == 8
    assert stack.refused("IngestFunction", calls) == []


def test_the_ingest_router_may_do_everything_it_does(stack: Stack) -> None:
    # given uploads of two tenants
    upload(stack, "photo.png", png())
    boto3.client("s3").put_object(
        Bucket=stack.refs["UploadsBucket"], Key="uploads/globex/clip.mp4", Body=mp4()
    )
    # when the router moves their notifications, then every call it made is granted
    calls = route_notifications(stack)
    assert {c.operation for c in calls} >= {"ReceiveMessage", "SendMessageBatch"}
    assert stack.refused("IngestRouterFunction", calls) == []


@pytest.mark.parametrize("job_type", list(JobType))
def test_each_worker_may_do_everything_it_does(stack: Stack, job_type: JobType) -> None:
    # given uploads that make jobs of every type, ingested
    for name, body in (("photo.png", png()), ("clip.mp4", mp4()), ("doc.pdf", pdf())):
        upload(stack, name, body)
    ingest_everything(stack)
    # and the files scanned (parsing jobs wait for that), unless this is the scan itself
    if job_type is not JobType.VIRUS_SCAN:
        run_worker(stack, JobType.VIRUS_SCAN)
    # when the worker of one type handles both its lanes' messages, deployed with a tenants' cap
    with recording_calls() as recorder:
        run_worker(stack, job_type, {"TenantMaxRunningJobs": "10"})
    # then every call it made is granted by its own role
    assert stack.refused(f"{_pascal(job_type)}Worker", recorder.calls) == []
    # among them its tenant's slots taken and given back (TenantMaxRunningJobs)
    slots_table = stack.refs["TenantSlotsTable"]
    assert {c.operation for c in recorder.calls if c.params.get("TableName") == slots_table} >= {
        "UpdateItem"
    }


def test_the_thumbnail_worker_may_list_near_duplicates(stack: Stack) -> None:
    # given two images of one photo ingested and scanned, their thumbnail jobs asking for near
    # duplicates (as a preset or an API request would)
    upload(stack, "photo.png", png())
    upload(stack, "copy.png", png())
    ingest_everything(stack)
    run_worker(stack, JobType.VIRUS_SCAN)
    for job in JobModel.scan(JobModel.job_type == JobType.THUMBNAIL_GENERATION.value):
        job.update(actions=[JobModel.input_data["similar_images"].set(True)])
    # when the thumbnail worker handles them
    with recording_calls() as recorder:
        run_worker(stack, JobType.THUMBNAIL_GENERATION)
    # then the index's reads and writes, and the near image's file read, are its role's
    files = stack.refs["FilesTable"]
    made = {c.operation for c in recorder.calls if c.params.get("TableName") == files}
    batch_gets = [c for c in recorder.calls if c.operation == "BatchGetItem"]
    assert made >= {"UpdateItem", "PutItem", "GetItem"}
    assert any(files in c.params["RequestItems"] for c in batch_gets)
    assert stack.refused("ThumbnailGenerationWorker", recorder.calls) == []


def _pascal(job_type: JobType) -> str:
    return "".join(part.title() for part in job_type.value.split("_"))


def test_the_virus_scan_may_quarantine_and_withdraw_what_it_must(stack: Stack) -> None:
    # given EICAR uploaded under a key no metadata could hold, ingested
    upload(stack, "Счёт №7 + акт.pdf.exe", EICAR)
    ingest_everything(stack)
    # and a derived output of that file already written (as a rescan finds it)
    [stored] = FileRepository().versions_of(
        stack.refs["UploadsBucket"], "uploads/acme/Счёт №7 + акт.pdf.exe"
    )
    derived = f"derived/acme/{stored.id}/thumbnail_generation/128.webp"
    boto3.client("s3").put_object(Bucket=stack.refs["OutputsBucket"], Key=derived, Body=b"w")
    # when the scan finds it and quarantines it
    with recording_calls() as recorder:
        run_worker(stack, JobType.VIRUS_SCAN)
    quarantined = FileRepository().get(stored.id)
    assert quarantined is not None and quarantined.status.value == "quarantined"
    # then every call it made (the tag, the copy, the delete, the withdrawal) is granted
    operations = {c.operation for c in recorder.calls}
    assert operations >= {"PutObjectTagging", "CopyObject", "DeleteObject", "DeleteObjects"}
    assert stack.refused("VirusScanWorker", recorder.calls) == []


def test_the_rescan_policy_may_do_everything_it_does(stack: Stack) -> None:
    # given a file scanned clean 40 days ago
    stack.become("RescanPolicy")
    stack.monkeypatch.setenv("RESCAN_AFTER_DAYS", "30")
    runtime.tables()
    plan = ingest_plan(utcnow(), "image/png")
    FileRepository().record_ingest(plan)
    record = ScanRecord(ScanStatus.CLEAN, utcnow() - timedelta(days=40), plan.jobs[0].id)
    FileRepository().record_scan(plan.file.id, record, by="virus_scan")
    schedule = json.loads((EVENTS / "sweep_schedule.json").read_text())
    # when the policy runs
    with recording_calls() as recorder:
        summary = rescan_policy.handler(schedule, CONTEXT)
    # then it rescanned the file, and every call it made is granted
    assert summary["requested"] == 1
    assert {c.operation for c in recorder.calls} >= {
        "Query",
        "GetItem",
        "TransactWriteItems",
        "SendMessage",
    }
    assert stack.refused("RescanPolicy", recorder.calls) == []


def test_the_sweep_may_do_everything_it_does(stack: Stack) -> None:
    # given jobs written an hour ago whose messages were never sent (the sweep must send them)
    stack.become("SweepFunction")
    runtime.tables()
    FileRepository().record_ingest(ingest_plan(utcnow() - timedelta(hours=1), "image/png"))
    # and a job whose message was dead-lettered
    poisoned = ingest_plan(utcnow(), "image/png", name="poisoned.png")
    FileRepository().record_ingest(poisoned)
    letter = JobMessage.for_job(poisoned.jobs[0]).to_json()
    dead_letters = stack.refs[f"{_pascal(poisoned.jobs[0].job_type)}DeadLetterQueue"]
    boto3.client("sqs").send_message(QueueUrl=dead_letters, MessageBody=letter)
    # when the sweep runs
    with recording_calls() as recorder:
        summary = sweep.handler({}, CONTEXT)
    # then it re-sent them, failed the dead-lettered job, and every call it made is granted
    assert sum(summary["actions"].values()) >= 1
    assert summary["dead_letters"] == {"dead_lettered_jobs_failed": 1}
    assert {c.operation for c in recorder.calls} >= {
        "Query",
        "UpdateItem",
        "SendMessage",
        "GetQueueAttributes",
        "GetItem",
        "ReceiveMessage",
        "DeleteMessage",
    }
    assert stack.refused("SweepFunction", recorder.calls) == []


def test_the_reconciler_may_do_everything_it_does(stack: Stack) -> None:
    # given an upload whose notification never reached the ingest, past its grace
    stack.become("ReconcilerFunction")
    stack.monkeypatch.setenv("RECONCILE_GRACE_SECONDS", "0")
    boto3.client("s3").put_object(
        Bucket=stack.refs["UploadsBucket"], Key="uploads/acme/unannounced.png", Body=png()
    )
    # when the reconciler runs
    with recording_calls() as recorder:
        summary = reconciler.handler({}, CONTEXT)
    # then it announced it, and every call it made is granted
    assert summary["unannounced"] == 1
    assert {c.operation for c in recorder.calls} >= {
        "ListObjectVersions",
        "BatchGetItem",
        "SendMessageBatch",
    }
    assert stack.refused("ReconcilerFunction", recorder.calls) == []


def api_request(
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    *,
    body: str | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "api_get_job.json").read_text())
    event.update(httpMethod=method, path=path, resource=path, queryStringParameters=query)
    event["requestContext"]["authorizer"] = {"role": "operator"}
    if body is not None:
        event["body"] = body
    if headers:
        event["headers"] = {**(event.get("headers") or {}), **headers}
    return event


def presigned_requests(view: dict[str, Any]) -> list[Call]:
    """The S3 requests a job view's output URLs stand for: signing makes no call, but each URL
    carries the API role's permissions, so each must be one the role may make."""
    calls = []
    for output in view["outputs"]:
        url = urlparse(output["url"])
        path = unquote(url.path).lstrip("/")
        bucket, key = (
            (url.netloc.split(".", 1)[0], path)
            if output["key"] == path
            else tuple(path.split("/", 1))
        )
        calls.append(Call("s3", "GetObject", {"Bucket": bucket, "Key": key}))
    return calls


def test_the_api_may_do_everything_it_does(stack: Stack) -> None:
    # given the API's environment
    stack.become("ApiFunction")
    # and jobs of a file, one of them failed (so that it can be retried)
    runtime.tables()
    plan = ingest_plan(utcnow(), "image/png")
    FileRepository().record_ingest(plan)
    jobs = JobRepository()
    failed, other = plan.jobs[0], plan.jobs[1]
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    jobs.apply(failed.id, failed.job_type, claim)
    claimed = jobs.get(failed.id)
    assert claimed is not None
    give_up = transitions.fail(
        claimed, error="boom", now=utcnow(), retry_at=None, retention=timedelta(days=1)
    )
    jobs.apply(failed.id, failed.job_type, give_up)
    # and a completed job of another file, with a derived output (its view presigns a URL)
    done_plan = ingest_plan(utcnow(), "image/png", name="done.png")
    FileRepository().record_ingest(done_plan)
    done = done_plan.jobs[0]
    claimed_done = jobs.apply(done.id, done.job_type, claim)
    assert isinstance(claimed_done, Applied)
    output = f"derived/{done.tenant}/{done.file_id}/{done.job_type.value}/out.webp"
    complete = transitions.complete(
        claimed_done.job, result={"key": output}, now=utcnow(), retention=timedelta(days=1)
    )
    jobs.apply(done.id, done.job_type, complete)
    # and a file whose virus scan a caller cancels (its waiting thumbnail is settled at once)
    unscanned = ingest_plan(utcnow(), "image/png", name="unscanned.png")
    FileRepository().record_ingest(unscanned)
    scan = unscanned.jobs[0]
    assert scan.job_type is JobType.VIRUS_SCAN
    file = plan.file
    job_request = json.dumps({"job_type": "thumbnail_generation", "priority": 1})
    requests = [
        api_request("GET", f"/jobs/{other.id}"),
        api_request("GET", "/jobs", {"tenant": file.tenant, "limit": "1"}),
        api_request("GET", "/jobs", {"status": "pending", "limit": "1"}),
        api_request("GET", f"/files/{file.id}"),
        api_request("GET", "/files", {"key": file.key, "bucket": file.bucket}),
        api_request("GET", f"/files/{file.id}/jobs", {"status": "pending"}),
        api_request("POST", f"/jobs/{other.id}/cancel"),
        api_request("POST", f"/jobs/{scan.id}/cancel"),
        api_request("POST", f"/jobs/{failed.id}/retry"),
        api_request("DELETE", f"/jobs/{other.id}"),
        api_request("GET", f"/jobs/{done.id}"),
        api_request(
            "POST", f"/files/{file.id}/jobs", body=job_request, headers={"Idempotency-Key": "k1"}
        ),
        api_request(
            "POST", f"/files/{file.id}/jobs", body=job_request, headers={"Idempotency-Key": "k1"}
        ),
        api_request("GET", "/openapi.json"),
        api_request("GET", "/docs"),
        api_request("POST", f"/files/{file.id}/rescan", headers={"Idempotency-Key": "r1"}),
        api_request(
            "POST",
            "/rescans",
            body=json.dumps({"tenant": file.tenant, "prefix": "uploads/"}),
            headers={"Idempotency-Key": "r2"},
        ),
        api_request("PUT", f"/tenants/{file.tenant}/quotas", body='{"files_per_day": 9}'),
        api_request("GET", f"/tenants/{file.tenant}/quotas"),
    ]
    # when each route is asked
    with recording_calls() as recorder:
        responses = [api.handler(event, CONTEXT) for event in requests]
    # then each answered (the job request made a job, its repeat answered it again)
    statuses = [r["statusCode"] for r in responses]
    assert statuses == [200] * 9 + [204, 200, 201, 200, 200, 200, 201, 200, 200, 200]
    waiting = [j for j in jobs_of_file(scan.file_id) if j.job_type in GATED_JOB_TYPES]
    assert waiting and all(j.status is JobStatus.CANCELLED for j in waiting)
    # and every call made, and every request an output URL stands for, is granted
    operations = {c.operation for c in recorder.calls}
    assert operations >= {
        "GetItem",
        "Query",
        "BatchGetItem",
        "UpdateItem",
        "TransactWriteItems",
        "SendMessage",
    }
    urls = presigned_requests(json.loads(responses[10]["body"]))
    assert [c.params["Key"] for c in urls] == [output]
    assert urls[0].params["Bucket"] == stack.refs["OutputsBucket"]
    assert stack.refused("ApiFunction", recorder.calls + urls) == []


def test_the_api_may_keep_and_arm_schedules(stack: Stack) -> None:
    # given the API's environment (an operator, making schedules for acme)
    stack.become("ApiFunction")
    runtime.tables()
    body = json.dumps(
        {"name": "nightly", "expression": "cron(0 3 * * ? *)", "action": "rescan",
         "prefix": "uploads/acme/", "tenant": "acme"}
    )  # fmt: skip
    # when a schedule is made, read, listed, paused and removed
    with recording_calls() as recorder:
        made = api.handler(api_request("POST", "/schedules", body=body), CONTEXT)
        schedule_id = json.loads(made["body"])["id"]
        responses = [
            made,
            api.handler(api_request("GET", f"/schedules/{schedule_id}"), CONTEXT),
            api.handler(api_request("GET", "/schedules"), CONTEXT),
            api.handler(
                api_request("PATCH", f"/schedules/{schedule_id}", body='{"enabled": false}'),
                CONTEXT,
            ),
            api.handler(api_request("DELETE", f"/schedules/{schedule_id}"), CONTEXT),
        ]
    # then each answered, and every call made (the scheduler's, passing its role) is granted
    assert [r["statusCode"] for r in responses] == [201, 200, 200, 200, 204]
    assert {c.operation for c in recorder.calls} >= {
        "CreateSchedule",
        "UpdateSchedule",
        "DeleteSchedule",
        "PutItem",
        "DeleteItem",
    }
    assert stack.refused("ApiFunction", recorder.calls) == []


def test_the_operations_function_may_start_a_schedule_s_run(stack: Stack) -> None:
    # given a nightly thumbnail schedule of acme's and an image under its prefix
    stack.become("ApiFunction")
    runtime.tables()
    FileRepository().record_ingest(ingest_plan(utcnow(), "image/png", name="avatars/a.png"))
    body = json.dumps(
        {"name": "nightly", "expression": "cron(0 3 * * ? *)", "action": "run",
         "job_type": "thumbnail_generation", "prefix": "uploads/acme/avatars/",
         "tenant": "acme"}
    )  # fmt: skip
    made = json.loads(api.handler(api_request("POST", "/schedules", body=body), CONTEXT)["body"])
    run = {"tenant": "acme", "schedule_id": made["id"], "scheduled_time": "2030-01-01T03:00:00Z"}
    stack.become("OperationsFunction")
    runtime.tables()
    queue = stack.refs["OperationsQueue"]
    boto3.client("sqs").send_message(QueueUrl=queue, MessageBody=json.dumps({"schedule_run": run}))
    # when the operations function starts the run, then runs its page
    with recording_calls() as recorder:
        for _ in range(2):
            records = stack.queue_records("OperationsQueue")
            assert operations.handler({"Records": records}, CONTEXT)["batchItemFailures"] == []
    # then the file got its job, and every call made is granted
    assert {c.operation for c in recorder.calls} >= {"TransactWriteItems", "SendMessage"}
    assert stack.refused("OperationsFunction", recorder.calls) == []


def test_the_api_and_the_operations_function_may_erase_a_file_and_a_tenant(stack: Stack) -> None:
    # given acme's uploads, recorded, with their objects and an output each
    stack.become("ApiFunction")
    runtime.tables()
    s3, bucket = boto3.client("s3"), stack.refs["UploadsBucket"]
    plans = [
        ingest_plan(utcnow(), "image/png", name=f"erase-{n}.png", bucket=bucket, version_id=None)
        for n in range(3)
    ]
    for plan in plans:
        s3.put_object(Bucket=bucket, Key=plan.file.key, Body=png())
        FileRepository().record_ingest(plan)
        output = f"derived/acme/{plan.file.id}/thumbnail_generation/out.webp"
        s3.put_object(Bucket=stack.refs["OutputsBucket"], Key=output, Body=b"x")
    # and what acme left besides: an upload never ingested, a quarantined copy, its settings
    s3.put_object(Bucket=bucket, Key="uploads/acme/refused.exe", Body=b"MZ")
    s3.put_object(Bucket=stack.refs["QuarantineBucket"], Key="quarantine/acme/f/v.exe", Body=b"x")
    schedule = json.dumps(
        {"name": "nightly", "expression": "cron(0 3 * * ? *)", "action": "rescan",
         "prefix": "uploads/acme/", "tenant": "acme"}
    )  # fmt: skip
    preset = json.dumps({"jobs": [{"job_type": "virus_scan"}], "tenant_default": True})
    for request in (
        api_request("POST", "/schedules", body=schedule),
        api_request("PUT", "/presets/thumbs", {"tenant": "acme"}, body=preset),
        api_request("PUT", "/tenants/acme/quotas", body='{"files_per_day": 9}'),
    ):
        assert api.handler(request, CONTEXT)["statusCode"] in (200, 201)
    # when the API erases one file, counts acme's files and starts acme's erasure
    erasure = json.dumps({"reason": "leaving"})
    with recording_calls() as api_calls:
        answers = [
            api.handler(api_request("DELETE", f"/files/{plans[0].file.id}"), CONTEXT),
            api.handler(
                api_request("POST", "/tenants/acme/erasure", body='{"reason": "leaving", '
                            '"dry_run": true}'),
                CONTEXT,
            ),
            api.handler(api_request("POST", "/tenants/acme/erasure", body=erasure), CONTEXT),
        ]  # fmt: skip
    assert [a["statusCode"] for a in answers] == [200, 200, 202]
    # and the operations function runs every page of the erasure
    stack.become("OperationsFunction")
    runtime.tables()
    done = json.loads(answers[2]["body"])["id"]
    operations_calls: list[Call] = []
    for _ in range(60):  # a page's next message is delayed, to keep to the operation's rate
        with recording_calls() as recorder:
            for record in stack.queue_records("OperationsQueue"):
                assert operations.handler({"Records": [record]}, CONTEXT)["batchItemFailures"] == []
        operations_calls += recorder.calls
        if operation_status(stack, done) != "running":
            break
        time.sleep(0.5)
    # then acme is gone, and every call each made is granted by its own role
    stack.become("ApiFunction")
    final = json.loads(api.handler(api_request("GET", f"/operations/{done}"), CONTEXT)["body"])
    assert final["status"] == "succeeded" and final["errors"] == 0, final
    assert final["removed"]["quarantined_versions"] == 1
    assert {c.operation for c in operations_calls} >= {
        "ListObjectVersions",
        "DeleteObjects",
        "DeleteItem",
        "DeleteSchedule",
        "SendMessage",
    }
    assert stack.refused("ApiFunction", api_calls.calls) == []
    assert stack.refused("OperationsFunction", operations_calls) == []


def operation_status(stack: Stack, operation_id: str) -> str:
    found = boto3.client("dynamodb").get_item(
        TableName=stack.refs["OpsTable"],
        Key={"pk": {"S": "operations"}, "sk": {"S": operation_id}},
    )
    return str(found["Item"]["status"]["S"])


def test_the_events_function_may_do_everything_it_does(stack: Stack) -> None:
    # given every job of a file cancelled, as its table's stream carries them
    stack.become("EventsFunction")
    runtime.tables()
    plan = ingest_plan(utcnow(), "image/png")
    FileRepository().record_ingest(plan)
    jobs = JobRepository()
    for job in plan.jobs:
        cancel = transitions.cancel(now=utcnow(), by="alice", reason="r", retention=timedelta(1))
        jobs.apply(job.id, job.job_type, cancel)
    dynamodb = boto3.client("dynamodb")
    job_changes = StreamTap.of_table(dynamodb, stack.refs["JobsTable"])
    file_changes = StreamTap.of_table(dynamodb, stack.refs["FilesTable"])
    file_changes.read()  # the ingest's put
    # when the events function handles the jobs' stream, then the file's completion it recorded
    job_records = job_changes.read()
    with recording_calls() as recorder:
        jobs_response = events.handler({"Records": job_records}, CONTEXT)
    file_records = file_changes.read()
    with recording_calls() as then:
        files_response = events.handler({"Records": file_records}, CONTEXT)
    recorder.calls.extend(then.calls)
    # then it published each end, read the file and its jobs (one BatchGetItem across both
    # tables), recorded the completion and published File Processed; every call it made is
    # granted
    assert jobs_response["batchItemFailures"] == files_response["batchItemFailures"] == []
    assert {c.operation for c in recorder.calls} == {"PutEvents", "BatchGetItem", "UpdateItem"}
    assert [c.operation for c in recorder.calls].count("PutEvents") == len(plan.jobs) + 1
    assert stack.refused("EventsFunction", recorder.calls) == []


def test_the_stats_function_may_do_everything_it_does(stack: Stack) -> None:
    # given jobs that ran and failed, as their table's stream carries them
    stack.become("StatsFunction")
    runtime.tables()
    plan = ingest_plan(utcnow(), "image/png")
    FileRepository().record_ingest(plan)
    jobs = JobRepository()
    job = plan.jobs[0]
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    claimed = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(claimed, Applied)
    give_up = transitions.fail(
        claimed.job, error="boom", now=utcnow(), retry_at=None, retention=timedelta(days=1)
    )
    jobs.apply(job.id, job.job_type, give_up)
    tap = StreamTap.of_table(boto3.client("dynamodb"), stack.refs["JobsTable"])
    records = tap.read()
    event = {"Records": records, "shardId": "shardId-1", "eventSourceARN": tap.stream_arn}
    # and then a record that changes no aggregate (as a heartbeat's)
    last = records[-1]["dynamodb"]
    same = {
        **last,
        "OldImage": last["NewImage"],
        "SequenceNumber": str(int(last["SequenceNumber"]) + 1),
    }
    quiet = {**event, "Records": [{**records[-1], "dynamodb": same}]}
    # when the stats function applies the batch, then the other
    with recording_calls() as recorder:
        assert stats.handler(event, CONTEXT) == {"state": {}}
        assert stats.handler(quiet, CONTEXT) == {"state": {}}
    # then it read its cursor and wrote one transaction, then advanced its cursor alone (from
    # the cursor it remembered writing), and every call it made is granted
    ops = [c.operation for c in recorder.calls]
    assert ops == ["GetItem", "TransactWriteItems", "UpdateItem"]
    assert stack.refused("StatsFunction", recorder.calls) == []
    # and the API may read what it wrote (GET /overview, GET /failures)
    stack.become("ApiFunction")
    with recording_calls() as recorder:
        aggregates = runtime.stats_table()
        [group] = aggregates.failure_groups("*")
        aggregates.failure_group("*", group.id)
        aggregates.overview("*", utcnow())
    assert {c.operation for c in recorder.calls} == {"GetItem", "Query"}
    assert stack.refused("ApiFunction", recorder.calls) == []


@pytest.mark.skipif(
    shutil.which("freshclam") is None or shutil.which("clamscan") is None,
    reason="ClamAV is not installed (apt-get install clamav clamav-freshclam)",
)
def test_the_definitions_updater_may_do_everything_it_does(stack: Stack, tmp_path: Path) -> None:
    # given the updater's environment, its ClamAV this machine's, its mirror one on 127.0.0.1
    stack.become("DefinitionsUpdater")
    build_local_databases(tmp_path / "mirror")
    bucket = stack.refs["OutputsBucket"]
    rule = b'rule House { strings: $m = "HOUSE-7" condition: $m }\n'
    boto3.client("s3").put_object(Bucket=bucket, Key="signatures/custom/yara/house.yar", Body=rule)
    schedule = json.loads((EVENTS / "definitions_schedule.json").read_text())
    with DefinitionsMirror(tmp_path / "mirror") as mirror:
        local = {
            "FRESHCLAM": "freshclam",
            "CLAMSCAN": "clamscan",
            "DEFINITIONS_MIRROR": mirror.url,
            "OFFICIAL_DATABASES": "",
            "DEFINITIONS_CUSTOM_URLS": ",".join(mirror.database_urls()),
            "DEFINITIONS_KEEP": "2",
        }
        for name, value in local.items():
            stack.monkeypatch.setenv(name, value)
        # moto in this process, not an endpoint override: the mirror's plain http on 127.0.0.1
        # is allowed as the local stack allows it
        stack.monkeypatch.setattr(definitions, "local_mirror_allowed", lambda env: True)
        # when it publishes three sets (the third prunes the first), reports and rolls back
        with recording_calls() as recorder:
            reports = []
            for n in range(3):
                add_hash_signature(mirror.directory, f"sample {n}\n".encode(), f"Local.S{n}")
                reports.append(definitions.handler(schedule, CONTEXT))
            status = definitions.handler({"action": "status"}, CONTEXT)
            rolled = definitions.handler({"action": "rollback"}, CONTEXT)
    assert [r["status"] for r in reports] == ["published"] * 3, reports
    assert reports[2]["pruned"] == [reports[0]["set_id"]]
    assert (status["set_id"], rolled["set_id"]) == (reports[2]["set_id"], reports[1]["set_id"])
    # then every call it made is granted by its own role
    operations = {c.operation for c in recorder.calls}
    assert operations >= {"GetObject", "PutObject", "ListObjectsV2", "HeadObject", "DeleteObject"}
    assert stack.refused("DefinitionsUpdater", recorder.calls) == []
    # by statements that each name their resources (no `*` needed), its listings within the
    # prefix its ListBucket grant is conditioned on
    role = grants(FUNCTIONS["DefinitionsUpdater"].policies, stack.resolver)
    named = [grant for grant in role if "*" not in grant.resources]
    assert denied(recorder.calls, named) == []
    listed = [c.params.get("Prefix", "") for c in recorder.calls if c.operation == "ListObjectsV2"]
    assert listed and all(fnmatchcase(prefix, "signatures/*") for prefix in listed)


# --- webhooks ----------------------------------------------------------------------------------


@pytest.fixture
def gone_receiver() -> Iterator[str]:
    """A receiver on 127.0.0.1 that answers every POST 410 Gone (its endpoint is disabled, and
    the notice published)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: PLC0415
    from threading import Thread  # noqa: PLC0415

    class Gone(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(410)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gone)
    Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_the_api_may_manage_webhooks(stack: Stack, gone_receiver: str) -> None:
    stack.become("ApiFunction")
    stack.monkeypatch.setenv("FILEJOBS_WEBHOOKS_LOCAL_MODE", "1")
    runtime.reset()
    body = json.dumps({"url": gone_receiver, "event_types": ["Job Completed"], "tenant": "acme"})
    from filejobs.services.webhooks import BusEvent  # noqa: PLC0415

    with recording_calls() as registering:
        made = api.handler(api_request("POST", "/webhooks", body=body), CONTEXT)
    assert made["statusCode"] == 201, made
    webhook = json.loads(made["body"])["id"]
    # a delivery of it, as the webhooks function makes one (not an API call: not recorded)
    event = BusEvent("e-1", "Job Completed", utcnow(), "acme", {"tenant": "acme"})
    (delivery,) = runtime.webhooks().fan_out(event)
    with recording_calls() as recorder:
        answers = [
            api.handler(event, CONTEXT)
            for event in (
                api_request("GET", "/webhooks", {"tenant": "acme"}),
                api_request("GET", f"/webhooks/{webhook}"),
                api_request("POST", f"/webhooks/{webhook}/rotate"),
                api_request("POST", f"/webhooks/{webhook}/enable"),
                api_request("GET", f"/webhooks/{webhook}/deliveries"),
                api_request("GET", f"/webhooks/{webhook}/deliveries/{delivery.id}"),
                api_request("POST", f"/webhooks/{webhook}/deliveries/{delivery.id}/resend"),
                api_request("DELETE", f"/webhooks/{webhook}"),
            )
        ]
    assert [a["statusCode"] for a in answers] == [200] * 6 + [202, 204]
    api_calls = registering.calls + recorder.calls
    operations = {c.operation for c in api_calls}
    assert operations >= {"PutItem", "GetItem", "Query", "DeleteItem", "SendMessage"}
    assert stack.refused("ApiFunction", api_calls) == []


def test_the_webhooks_function_may_do_everything_it_does(stack: Stack, gone_receiver: str) -> None:
    stack.become("WebhooksFunction")
    stack.monkeypatch.setenv("FILEJOBS_WEBHOOKS_LOCAL_MODE", "1")
    runtime.reset()
    from filejobs.domain import webhooks as rules  # noqa: PLC0415

    now = utcnow()
    endpoint = rules.Endpoint(
        id=rules.new_endpoint_id("acme"),
        tenant="acme",
        url=gone_receiver,
        event_types=frozenset({"Job Completed"}),
        secrets=(rules.Secret("whsec_x", now),),
        created_at=now,
        updated_at=now,
        created_by="api:tenant:acme",
    )
    from filejobs.adapters.kms_secrets import KmsSecretCipher  # noqa: PLC0415
    from filejobs.data.webhook_repository import WebhookRepository  # noqa: PLC0415

    # registered as the API registers one: its secret sealed with the stack's key
    key = stack.resolver.known("WebhookSecretsKey.Arn") or ""
    sealer = KmsSecretCipher(boto3.client("kms"), key)
    store = WebhookRepository(boto3.client("dynamodb"), stack.refs["OpsTable"], sealer=sealer)
    store.create_endpoint(endpoint)
    event = {
        "source": "filejobs",
        "detail-type": "Job Completed",
        "time": now.isoformat(),
        "detail": {"event_id": "e-1", "tenant": "acme"},
    }
    boto3.client("sqs").send_message(
        QueueUrl=stack.refs["WebhooksQueue"], MessageBody=json.dumps(event)
    )
    calls = []
    for _ in range(2):  # the event, then its delivery
        records = stack.queue_records("WebhooksQueue")
        with recording_calls() as recorder:
            answer = webhooks_function.handler({"Records": records}, CONTEXT)
        assert answer["batchItemFailures"] == []
        calls += recorder.calls
    # it found the endpoint, recorded and queued the delivery, opened the sealed secret to sign
    # the attempt (410), recorded the attempt, disabled the endpoint (writing the secret back
    # sealed, never sealing one itself) and announced it: every call granted
    assert {c.operation for c in calls} == {
        "Query",
        "PutItem",
        "SendMessage",
        "GetItem",
        "Decrypt",
        "PutEvents",
    }
    assert stack.refused("WebhooksFunction", calls) == []


def test_the_api_may_sign_uploads_and_only_into_uploads(stack: Stack) -> None:
    # given the API's environment and a tenant's preset
    stack.become("ApiFunction")
    preset = json.dumps({"jobs": [{"job_type": "virus_scan"}]})
    saved = api.handler(
        api_request("PUT", "/presets/scan-only", {"tenant": "acme"}, body=preset), CONTEXT
    )
    assert saved["statusCode"] == 200, saved
    body = json.dumps({"tenant": "acme", "filename": "a.png", "preset": "scan-only"})
    # when a signed upload is asked for
    with recording_calls() as recorder:
        answer = api.handler(api_request("POST", "/uploads", body=body), CONTEXT)
    # then it is answered (reading the tenant's quotas and presets)
    assert answer["statusCode"] == 200, answer
    signed = json.loads(answer["body"])
    assert signed["key"].startswith("uploads/acme/")
    # and the form stands for a PutObject of its key, which the API's role may sign: signing
    # makes no call, but the form carries the role's permissions
    upload = Call("s3", "PutObject", {"Bucket": stack.refs["UploadsBucket"], "Key": signed["key"]})
    assert stack.refused("ApiFunction", [*recorder.calls, upload]) == []
    # and the same form anywhere else in the bucket would be refused
    elsewhere = Call("s3", "PutObject", {"Bucket": stack.refs["UploadsBucket"], "Key": "x/a.png"})
    assert stack.refused("ApiFunction", [elsewhere]) != []


def test_the_file_removals_function_may_delete_restore_and_purge(stack: Stack) -> None:
    # given a photo ingested, with a derived output of its own
    upload(stack, "kept.png", png())
    ingest_everything(stack)
    s3, uploads = boto3.client("s3"), stack.refs["UploadsBucket"]
    [stored] = FileRepository().versions_of(uploads, "uploads/acme/kept.png")
    output = f"derived/acme/{stored.id}/thumbnail_generation/thumb-128.webp"
    s3.put_object(Bucket=stack.refs["OutputsBucket"], Key=output, Body=b"webp")
    stack.queue_records("FileRemovalsQueue")  # S3's test event
    stack.become("FileRemovalsFunction")
    stack.monkeypatch.setenv("OUTPUTS_PURGE_DELAY_SECONDS", "1")  # not the template's 360 s
    runtime.reset()
    # when the object is deleted (a delete marker), then the marker deleted again (a restore)
    marker = s3.delete_object(Bucket=uploads, Key="uploads/acme/kept.png")["VersionId"]
    with recording_calls() as recorder:
        records = stack.queue_records("FileRemovalsQueue")
        assert file_removals.handler({"Records": records}, CONTEXT)["batchItemFailures"] == []
    s3.delete_object(Bucket=uploads, Key="uploads/acme/kept.png", VersionId=marker)
    with recording_calls() as restoring:
        records = stack.queue_records("FileRemovalsQueue")
        assert file_removals.handler({"Records": records}, CONTEXT)["batchItemFailures"] == []
    # and the purge the deletion asked for comes due
    time.sleep(1.2)
    with recording_calls() as purging:
        records = stack.queue_records("FileRemovalsQueue")
        assert [json.loads(r["body"]) for r in records] == [
            {"purge_outputs": {"tenant": "acme", "file_id": stored.id}}
        ]
        assert file_removals.handler({"Records": records}, CONTEXT)["batchItemFailures"] == []
    # then it did each thing it had to, and every call was granted
    restored = FileRepository().get(stored.id)
    assert restored is not None and restored.status.value == "active"
    calls = recorder.calls + restoring.calls + purging.calls
    assert {c.operation for c in calls} >= {
        "ListObjectVersions",
        "Query",
        "BatchGetItem",
        "UpdateItem",
        "ListObjectsV2",
        "DeleteObjects",
        "SendMessage",
        "TransactWriteItems",
        "SendMessageBatch",
    }
    assert stack.refused("FileRemovalsFunction", calls) == []
    # and its listings are granted under uploads/ and derived/ only
    elsewhere = Call("s3", "ListObjectVersions", {"Bucket": uploads, "Prefix": "private/"})
    assert stack.refused("FileRemovalsFunction", [elsewhere]) != []


def test_the_api_may_erase_an_upload(stack: Stack) -> None:
    # given two versions of an upload, ingested
    upload(stack, "erased.png", png())
    upload(stack, "erased.png", png())
    ingest_everything(stack)
    uploads = stack.refs["UploadsBucket"]
    [newest, older] = FileRepository().versions_of(uploads, "uploads/acme/erased.png")
    output = f"derived/acme/{newest.id}/thumbnail_generation/thumb-128.webp"
    boto3.client("s3").put_object(Bucket=stack.refs["OutputsBucket"], Key=output, Body=b"webp")
    # (and a copy of the older version in quarantine, as the virus scan keeps one)
    copy = f"quarantine/acme/{older.id}/erased.png"
    boto3.client("s3").put_object(Bucket=stack.refs["QuarantineBucket"], Key=copy, Body=b"x")
    stack.become("ApiFunction")
    # when a caller erases it
    with recording_calls() as recorder:
        answer = api.handler(api_request("DELETE", f"/files/{newest.id}"), CONTEXT)
    # then it is erased, and every call it took was granted
    assert answer["statusCode"] == 200, answer
    erasure = json.loads(answer["body"])
    assert (erasure["versions_deleted"], erasure["quarantined_copies_deleted"]) == (2, 1)
    assert {c.operation for c in recorder.calls} >= {
        "ListObjectVersions",
        "DeleteObjects",
        "ListObjectsV2",
        "DeleteItem",
        "PutItem",
        "SendMessage",
    }
    assert stack.refused("ApiFunction", recorder.calls) == []


def test_ingest_may_remove_an_upload_it_records_rejected(stack: Stack) -> None:
    upload(stack, "too-big.png", png())
    route_notifications(stack)
    stack.become("IngestFunction")
    stack.monkeypatch.setenv("TENANT_MAX_FILE_BYTES", "10")
    runtime.reset()
    with recording_calls() as recorder:
        records = stack.queue_records("FairIngestQueue")
        assert ingest.handler({"Records": records + records}, CONTEXT)["batchItemFailures"] == []
    removed = [c for c in recorder.calls if c.operation == "DeleteObject"]
    assert removed and all(c.params.get("VersionId") for c in removed)
    assert stack.refused("IngestFunction", recorder.calls) == []
