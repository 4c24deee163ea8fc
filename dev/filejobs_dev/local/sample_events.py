"""`filejobs events`: an event per function of the template that does something real on the
running local stack, named with the stack's own ids and objects, for `sam local invoke FUNCTION
-e FILE` (and `filejobs invoke`, which answers them alike).

It first uploads a small PNG to `uploads/{tenant}/sam-local/sample-{time}.png` (and, for the
virus scan's event, the same as `scan-sample-{time}.png`) and waits until the stack has processed
them (every job terminal); then it writes, in the folder given:

- `IngestRouterFunction.json`, `IngestFunction.json`: the upload's S3 notification as each one's
  queue delivers it (its bucket, key, version, size). The stack has ingested it already, so
  the ingest takes the event as S3's redelivery: it finds the file recorded and adds nothing.
- `<Worker>.json` for each worker whose job type fits a PNG: the message of a job recorded
  pending on the sample whose message is held back (held_jobs.py): invoking it runs the job.
- `ApiFunction-*.json`: requests as `sam local start-api` hands them over (no caller of their
  own) naming one in the local-caller header (access.py): the sample file, one of its jobs,
  the tenant's jobs, and a cancel of another held pending job.
- `EventsFunction.json`, `StatsFunction.json`: the jobs stream's real records of the sample's
  virus scan (the stats one with its shard's tumbling window, as Lambda adds it).
- `WebhooksFunction.json`: that scan's `Job Completed` as the bus's rule delivers it.
- `SweepFunction.json`, `RescanPolicy.json`, `DefinitionsUpdater.json`: their schedules' event.
- `FileRemovalsFunction.json`: the notification of a delete marker the command puts over a third
  sample (`removed-sample-{time}.png`). The stack follows it at once (the file `deleted`, its
  thumbnails gone), so, as with the ingest's, invoking it is S3's redelivery: it reads the key
  again, finds the file deleted and finishes nothing more.

The functions it writes none for are said on stderr (with why): a kind of file the sample is
not (video, documents) or a message that needs a record the stack does not have (an operation).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import boto3

from filejobs.access import LOCAL_CALLER_HEADER
from filejobs.domain import content
from filejobs.domain.job import JobType
from filejobs_cli.local_stack_file import LOCAL_CREDENTIALS
from filejobs_dev.local.launch import TERMINAL, endpoint_for
from filejobs_dev.local.payloads import (
    TumblingWindow,
    dynamodb_event,
    scheduled_event,
    sqs_event,
)
from filejobs_dev.local.resources import ACCOUNT
from filejobs_dev.local.stack import LocalStack

SETTLE_SECONDS = 180.0
API_FUNCTION = "ApiFunction"
FILE_REMOVALS = "FileRemovalsFunction"
# The job the stream, bus and API events are about: every upload gets one.
SCANNED = JobType.VIRUS_SCAN.value


class SampleError(RuntimeError):
    """The stack did not do what the events need (the sample not processed in time...)."""


@dataclass(frozen=True)
class Sample:
    """The uploaded sample as S3 and the stack know it."""

    bucket: str
    key: str
    version: str
    size: int
    etag: str
    file: dict[str, Any]  # the API's view of the file, its jobs with it

    @property
    def file_id(self) -> str:
        return str(self.file["id"])

    @property
    def tenant(self) -> str:
        return str(self.file["tenant"])

    def job(self, job_type: str) -> dict[str, Any]:
        return next(job for job in self.file["jobs"] if job["job_type"] == job_type)


def sample_png(width: int = 96, height: int = 64) -> bytes:
    """A small gradient PNG, made here so that the command needs no imaging library."""
    rows = b"".join(
        b"\x00" + bytes(channel for x in range(width) for channel in (x * 2, y * 3, 160))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


class EventWriter:
    """Writes the events of one running local stack (its `.filejobs/local.json`)."""

    def __init__(self, stack: LocalStack, config: dict[str, Any], tenant: str, log: IO[str]):
        self.stack, self.config, self.tenant, self.log = stack, config, tenant, log
        self.region = str(config["region"])
        assert stack.resources is not None, "the stack's resources are read from its local.json"
        self.resources = stack.resources
        # Why a function gets no event, for the ones that need more than the sample.
        self.skipped: dict[str, str] = {
            "OperationsFunction": "its message names an operation (POST /operations makes one, "
            "and the stack runs it at once)",
        }

    def client(self, service: str) -> Any:
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint_for(self.config, service),
            region_name=self.region,
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    # --- the sample --------------------------------------------------------------------------

    def upload_samples(self, names: list[str]) -> list[Sample]:
        """One sample per name, uploaded together, each once the stack has processed it."""
        bucket, body = str(self.config["uploads_bucket"]), sample_png()
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
        puts = {}
        for name in names:
            key = f"uploads/{self.tenant}/sam-local/{name}-{stamp}.png"
            puts[key] = self.client("s3").put_object(
                Bucket=bucket, Key=key, Body=body, ContentType="image/png"
            )
            print(f"uploaded s3://{bucket}/{key}", file=self.log)
        print("waiting for the stack to process them", file=self.log)
        return [
            Sample(
                bucket=bucket,
                key=key,
                version=str(put.get("VersionId") or "null"),
                size=len(body),
                etag=str(put["ETag"]).strip('"'),
                file=self._settled(bucket, key),
            )
            for key, put in puts.items()
        ]

    def _settled(self, bucket: str, key: str) -> dict[str, Any]:
        """The file at `key` once every one of its jobs is terminal (read through the API)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        query = urllib.parse.urlencode({"key": key, "bucket": bucket})
        while time.monotonic() < deadline:
            status, found = self.api(f"/files?{query}")
            if status == 200 and found.get("files"):
                _, stored = self.api(f"/files/{found['files'][0]['id']}")
                jobs = stored.get("jobs") or []
                if jobs and all(job["status"] in TERMINAL for job in jobs):
                    return dict(stored)
            time.sleep(0.5)
        raise SampleError(f"{key}: not processed within {SETTLE_SECONDS:.0f} s")

    def api(self, path: str) -> tuple[int, dict[str, Any]]:
        """A GET to the stack's own API (its router, the operator's token)."""
        request = urllib.request.Request(  # noqa: S310 (the stack's loopback URL)
            str(self.config["api_url"]) + path,
            headers={"Authorization": f"Bearer {self.config['api_token']}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                return answer.status, dict(json.loads(answer.read()))
        except urllib.error.HTTPError as error:
            return error.code, {}

    def hold_jobs(self, sample: Sample, job_types: list[str], purpose: str) -> list[dict[str, str]]:
        """Jobs recorded pending on the sample, their messages held back (held_jobs.py)."""
        if not job_types:
            return []
        held = subprocess.run(  # noqa: S603 (our own module, arguments we made)
            [sys.executable, "-m", "filejobs_dev.local.held_jobs", sample.file_id, *job_types,
             "--purpose", purpose],
            env=self.stack.function_environment(API_FUNCTION),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if held.returncode != 0:
            raise SampleError(f"the sample's jobs were not recorded: {held.stderr.strip()}")
        return [json.loads(line) for line in held.stdout.splitlines() if line.startswith("{")]

    # --- the events --------------------------------------------------------------------------

    def removed(self, sample: Sample) -> dict[str, dict[str, Any]]:
        """The sample deleted (a delete marker) and, once the stack has followed it, the
        notification S3 sent, as FileRemovalsFunction's queue delivers it."""
        if FILE_REMOVALS not in self.stack.functions:
            return {}
        deleted = self.client("s3").delete_object(Bucket=sample.bucket, Key=sample.key)
        print(f"deleted s3://{sample.bucket}/{sample.key} (a delete marker)", file=self.log)
        deadline = time.monotonic() + SETTLE_SECONDS
        while self.api(f"/files/{sample.file_id}")[1].get("status") != "deleted":
            if time.monotonic() > deadline:
                raise SampleError(f"{sample.key}: not followed within {SETTLE_SECONDS:.0f} s")
            time.sleep(0.5)
        record = self._object_created(sample)
        record["eventName"] = "ObjectRemoved:DeleteMarkerCreated"
        # S3 names the marker, and no size or ETag, in a removal's record.
        record["s3"]["object"] = {
            "key": record["s3"]["object"]["key"],
            "versionId": str(deleted.get("VersionId")),
            "sequencer": record["s3"]["object"]["sequencer"],
        }
        notification = json.dumps({"Records": [record]})
        return {FILE_REMOVALS: self._sqs_event(FILE_REMOVALS, [notification], group=None)}

    def events(self, sample: Sample, scanned: Sample) -> dict[str, dict[str, Any]]:
        """Each event file's name (without .json) and its event. The virus scan's held job is on
        a sample of its own: a scan's verdict sends its file's waiting jobs (the scan gate), and
        would send the other workers' held ones to the stack's workers."""
        written: dict[str, dict[str, Any]] = {}
        written.update(self._ingest_events(sample))
        for function, job_type in self._workers_for(sample).items():
            on = scanned if job_type == SCANNED else sample
            [job] = self.hold_jobs(on, [job_type], "worker")
            written[function] = self._sqs_event(function, [job["body"]], group=on.tenant)
        written.update(self._api_events(sample))
        written.update(self._stream_events(sample))
        written.update(self._schedule_events())
        return written

    def _workers_for(self, sample: Sample) -> dict[str, str]:
        """Each worker function whose job type fits the sample, with that type."""
        fitting = {}
        for name, spec in sorted(self.stack.functions.items()):
            job_type = spec.environment.get("JOB_TYPE")
            if not isinstance(job_type, str):
                continue
            if content.fits(JobType(job_type), sample.file["content_type"]):
                fitting[name] = job_type
            else:
                self.skipped[name] = (
                    f"a {job_type} job does not fit the sample ({sample.file['content_type']})"
                )
        return fitting

    def _ingest_events(self, sample: Sample) -> dict[str, dict[str, Any]]:
        notification = json.dumps({"Records": [self._object_created(sample)]})
        return {
            name: self._sqs_event(name, [notification], group=None)
            for name in ("IngestRouterFunction", "IngestFunction")
            if name in self.stack.functions
        }

    def _object_created(self, sample: Sample) -> dict[str, Any]:
        """The S3 notification record of the sample's upload (S3's event message structure)."""
        return {
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": self.region,
            "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "eventName": "ObjectCreated:Put",
            "userIdentity": {"principalId": "AWS:local"},
            "requestParameters": {"sourceIPAddress": "127.0.0.1"},
            "responseElements": {"x-amz-request-id": uuid.uuid4().hex[:16].upper()},
            "s3": {
                "s3SchemaVersion": "1.0",
                "configurationId": "filejobs-events",
                "bucket": {
                    "name": sample.bucket,
                    "ownerIdentity": {"principalId": "local"},
                    "arn": f"arn:aws:s3:::{sample.bucket}",
                },
                "object": {
                    "key": urllib.parse.quote_plus(sample.key, safe="/"),
                    "size": sample.size,
                    "eTag": sample.etag,
                    "versionId": sample.version,
                    "sequencer": f"{time.time_ns():020X}",
                },
            },
        }

    def _sqs_event(self, function: str, bodies: list[str], group: str | None) -> dict[str, Any]:
        """A batch from the function's (first) queue, as Lambda's SQS event source hands it."""
        queue_arn = next(
            str(self.resources.resolve(properties["Queue"]))
            for kind, properties in self.stack.functions[function].events
            if kind == "SQS"
        )
        now_ms = str(int(time.time() * 1000))
        attributes = {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": now_ms,
            "SenderId": "AROALOCAL:filejobs-events",
            "ApproximateFirstReceiveTimestamp": now_ms,
            **({"MessageGroupId": group} if group else {}),
        }
        # As ReceiveMessage returns them: the local stack's own payload builder makes the event.
        received = [
            {
                "MessageId": str(uuid.uuid4()),
                "ReceiptHandle": f"filejobs-events-{uuid.uuid4().hex}",
                "Body": body,
                "Attributes": attributes,
            }
            for body in bodies
        ]
        return sqs_event(received, queue_arn, self.region)

    def _api_events(self, sample: Sample) -> dict[str, dict[str, Any]]:
        if API_FUNCTION not in self.stack.functions:
            return {}
        caller = f"tenant:{sample.tenant}"
        # A job of its own to cancel: the sample's others are finished, and a cancel of a
        # finished job is refused (409).
        [to_cancel] = self.hold_jobs(sample, [JobType.COMPRESSION.value], "cancel")
        job_id = sample.job(SCANNED)["id"]
        return {
            f"{API_FUNCTION}-get-file": sam_api_event(
                "GET", "/files/{file_id}", {"file_id": sample.file_id}, caller=caller
            ),
            f"{API_FUNCTION}-get-job": sam_api_event(
                "GET", "/jobs/{job_id}", {"job_id": job_id}, caller=caller
            ),
            f"{API_FUNCTION}-list-jobs": sam_api_event(
                "GET", "/jobs", {}, query={"job_type": SCANNED, "limit": "10"}, caller=caller
            ),
            f"{API_FUNCTION}-cancel-job": sam_api_event(
                "POST",
                "/jobs/{job_id}/cancel",
                {"job_id": to_cancel["job_id"]},
                body={"reason": "cancelled from a sam local event"},
                caller=caller,
            ),
        }

    def _stream_events(self, sample: Sample) -> dict[str, dict[str, Any]]:
        """The jobs stream's records of the sample's scan, as the stream's consumers get them."""
        stream_arn = str(self.resources.attributes["JobsTable"]["StreamArn"])
        shard, records = self._records_of(stream_arn, sample.job(SCANNED)["id"])
        completed = [
            record
            for record in records
            if record["dynamodb"].get("NewImage", {}).get("status", {}).get("S") == "completed"
        ]
        if not completed:
            for name in ("EventsFunction", "StatsFunction", "WebhooksFunction"):
                self.skipped[name] = "the sample scan's completion is not on the jobs stream"
            return {}
        written: dict[str, dict[str, Any]] = {}
        if "EventsFunction" in self.stack.functions:
            written["EventsFunction"] = dynamodb_event(completed[-1:], stream_arn, self.region)
        if "StatsFunction" in self.stack.functions:
            seconds = self._window_seconds("StatsFunction")
            start = datetime.fromtimestamp(time.time() // seconds * seconds, UTC)
            window = TumblingWindow(shard_id=shard, start=start, seconds=seconds, state={})
            written["StatsFunction"] = dynamodb_event(
                records, stream_arn, self.region, window=window
            )
        if "WebhooksFunction" in self.stack.functions:
            job = sample.job(SCANNED)
            written["WebhooksFunction"] = self._sqs_event(
                "WebhooksFunction", [json.dumps(self._completed_on_bus(job))], group=None
            )
        return written

    def _records_of(self, stream_arn: str, job_id: str) -> tuple[str, list[dict[str, Any]]]:
        """The shard that holds the job's records, and those records in order."""
        streams = self.client("dynamodbstreams")
        shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            iterator = streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            mine: list[dict[str, Any]] = []
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                mine += [
                    record
                    for record in page["Records"]
                    if record["dynamodb"].get("Keys", {}).get("id", {}).get("S") == job_id
                ]
                iterator = page.get("NextShardIterator") if page["Records"] else None
            if mine:
                return str(shard["ShardId"]), mine
        raise SampleError(f"no record of job {job_id} on {stream_arn}")

    def _window_seconds(self, function: str) -> int:
        return next(
            int(properties.get("TumblingWindowInSeconds", 60))
            for kind, properties in self.stack.functions[function].events
            if kind == "DynamoDB"
        )

    def _completed_on_bus(self, job: dict[str, Any]) -> dict[str, Any]:
        """The scan's `Job Completed` as EventBridge hands it to the webhooks queue."""
        finished = str(job.get("completed_at") or job.get("updated_at") or "")
        detail = {
            "event_id": f"job:{job['id']}:{job.get('attempt', 1)}:completed:{finished}",
            "id": job["id"],
            "file_id": job.get("file_id"),
            "tenant": job["tenant"],
            "job_type": job["job_type"],
            "status": job["status"],
        }
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Job Completed",
            "source": "filejobs",
            "account": ACCOUNT,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.region,
            "resources": [],
            "detail": detail,
        }

    def _schedule_events(self) -> dict[str, dict[str, Any]]:
        written = {}
        for name, spec in sorted(self.stack.functions.items()):
            for kind, properties in spec.events:
                if kind in ("Schedule", "ScheduleV2"):
                    schedule = self.resources.resolve(properties.get("Name", name))
                    arn = f"arn:aws:scheduler:{self.region}:{ACCOUNT}:schedule/default/{schedule}"
                    written[name] = scheduled_event(arn, self.region, ACCOUNT)
                    break
        return written


def sam_api_event(
    method: str,
    resource: str,
    path_parameters: dict[str, str],
    *,
    caller: str,
    query: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A REST API request as `sam local start-api` hands it to the function
    (samcli/local/apigw/event_constructor.py): no authorizer, an identity with no signer; the
    caller named in the local-caller header, which only `sam local` (and `filejobs invoke`) read."""
    path = resource
    for name, value in path_parameters.items():
        path = path.replace("{" + name + "}", value)
    headers = {
        "Accept": "application/json",
        "Host": "127.0.0.1:3001",
        LOCAL_CALLER_HEADER: caller,
        **({"Content-Type": "application/json"} if body is not None else {}),
    }
    identity = dict.fromkeys(
        ("apiKey", "userArn", "cognitoAuthenticationType", "caller", "user",
         "cognitoIdentityPoolId", "cognitoAuthenticationProvider", "accountId"),
    )  # fmt: skip
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": path_parameters or None,
        "stageVariables": None,
        "requestContext": {
            "resourceId": "123456",
            "apiId": "1234567890",
            "resourcePath": resource,
            "httpMethod": method,
            "requestId": str(uuid.uuid4()),
            "accountId": "123456789012",
            "stage": "Prod",
            "identity": {**identity, "userAgent": "filejobs-events", "sourceIp": "127.0.0.1"},
            "path": path,
            "protocol": "HTTP/1.1",
            "domainName": "127.0.0.1:3001",
            "requestTimeEpoch": int(time.time() * 1000),
        },
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def write_events(
    stack: LocalStack, config: dict[str, Any], out: Path, tenant: str, log: IO[str]
) -> list[Path]:
    """Uploads the samples, writes every event into `out`; the files written."""
    writer = EventWriter(stack, config, tenant, log)
    sample, scanned, removed = writer.upload_samples(["sample", "scan-sample", "removed-sample"])
    out.mkdir(parents=True, exist_ok=True)
    written = []
    events = {**writer.events(sample, scanned), **writer.removed(removed)}
    for name, event in sorted(events.items()):
        path = out / f"{name}.json"
        path.write_text(json.dumps(event, indent=2) + "\n")
        written.append(path)
    for name in sorted(set(stack.functions) - {p.stem.split("-")[0] for p in written}):
        print(f"no event for {name}: {writer.skipped.get(name, 'none made')}", file=log)
    return written
