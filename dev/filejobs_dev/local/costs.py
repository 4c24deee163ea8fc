"""What the meter's lines (`metering.py`) add up to, and what that costs at list prices.

Pure: lines in, tallies and dollars out. `bench/request_costs.py` runs the local stack with the
meter on and renders these figures; `bench/prices/aws-us-east-1.toml` holds the prices.

A tally belongs to a *group*: a worker's job type, or `ingest`, `events`, `api`, `sweep`. What
the platform does for a function counts to the function (Lambda's poller receiving a batch and
deleting what was handled is billed as SQS requests to the account), except the polls that
found nothing: those are idle cost, the same whether one file or a million is processed, and
are kept apart (`idle_receives`).
"""

from __future__ import annotations

import math
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MONTH_SECONDS = 30 * 24 * 3600
# How long the model keeps a job's derived files (thumbnails, previews, compressed copies).
DERIVED_DAYS = 30
GIB = 1024**3  # S3 bills storage per GB of 2**30 bytes
GROUPS_OF_FUNCTIONS = {
    "IngestRouterFunction": "ingest_router",
    "IngestFunction": "ingest",
    "FileRemovalsFunction": "file_removals",
    "EventsFunction": "events",
    "ApiFunction": "api",
    "OperationsFunction": "operations",
    "WebhooksFunction": "webhooks",
    "StatsFunction": "stats",
    "SweepFunction": "sweep",
    "DefinitionsUpdater": "definitions",
    "RescanPolicy": "rescan_policy",
    "ReconcilerFunction": "reconciler",
}
# The groups that run on their schedule, whatever the traffic: priced per run, never per job.
SCHEDULED_GROUPS = ("sweep", "reconciler")
DYNAMODB_READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
# S3 bills LIST with PUT, COPY and POST; DELETE and aborting an upload are free.
S3_PUT_CLASS = {
    "PutObject", "CopyObject", "PostObject", "CreateMultipartUpload", "UploadPart",
    "UploadPartCopy", "CompleteMultipartUpload", "ListObjects", "ListObjectsV2",
    "ListObjectVersions", "ListMultipartUploads", "ListParts", "PutObjectTagging",
}  # fmt: skip
S3_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"}
# The requests that store bytes a job derived (a copy into quarantine moves, stores nothing new).
S3_STORES = {"PutObject", "UploadPart"}


@dataclass
class Usage:
    """Requests, units and compute of one group of the meter's lines."""

    invocations: int = 0
    gb_seconds: float = 0.0
    log_bytes: int = 0
    processor_calls: int = 0
    processor_gb_seconds: float = 0.0
    dynamodb_reads: int = 0
    dynamodb_writes: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    index_write_units: float = 0.0
    sqs_requests: float = 0.0  # billed: per 64 KB chunk
    idle_receives: int = 0
    s3_put_class: int = 0
    s3_get_class: int = 0
    stored_bytes: int = 0  # written by PutObject and UploadPart: kept DERIVED_DAYS
    api_requests: int = 0  # API Gateway's, one per invocation of the API function
    events: int = 0
    operations: Counter[str] = field(default_factory=Counter)
    # DynamoDB's requests by "table:operation" (a transaction counts to each table it writes)
    table_requests: Counter[str] = field(default_factory=Counter)
    # Successful UpdateItems (claims, completions, ...): the floor's write sizes
    update_writes: int = 0
    update_write_units: float = 0.0
    meter_errors: int = 0

    @property
    def dynamodb_requests(self) -> int:
        return self.dynamodb_reads + self.dynamodb_writes

    def add(self, line: Mapping[str, Any], sqs_chunk: int = 65536) -> None:
        kind = line.get("kind")
        if kind == "invoke":
            self._invoked(line)
        elif kind == "process":
            self.processor_calls += 1
            self.processor_gb_seconds += _gb_seconds(line["ms"], line.get("memory_mb", 0))
        elif kind == "request":
            self._requested(line, sqs_chunk)

    def _invoked(self, line: Mapping[str, Any]) -> None:
        self.invocations += 1
        self.api_requests += int(line.get("fn") == "ApiFunction")
        self.gb_seconds += _gb_seconds(line["ms"], line["memory_mb"])
        self.log_bytes += int(line.get("log_bytes", 0))

    def _requested(self, line: Mapping[str, Any], sqs_chunk: int) -> None:
        service, operation = line["svc"], line["op"]
        if line.get("meter_error"):
            self.meter_errors += 1
        if service == "sqs" and operation == "ReceiveMessage" and not line.get("messages"):
            self.idle_receives += 1
            return
        self.operations[f"{service}:{operation}"] += 1
        if service == "dynamodb":
            self._dynamodb(line, operation)
        elif service == "sqs":
            self.sqs_requests += max(1, math.ceil(int(line.get("bytes", 0)) / sqs_chunk))
        elif service == "s3" and operation not in S3_FREE:
            if operation in S3_PUT_CLASS:
                self.s3_put_class += 1
            else:
                self.s3_get_class += 1
            if operation in S3_STORES:
                self.stored_bytes += int(line.get("bytes", 0))
        elif service == "events" and operation == "PutEvents":
            self.events += int(line.get("entries", 1))

    def _dynamodb(self, line: Mapping[str, Any], operation: str) -> None:
        for table in str(line.get("table") or "").split(","):
            if table:
                self.table_requests[f"{table}:{operation}"] += 1
        if operation in DYNAMODB_READS:
            self.dynamodb_reads += 1
        elif "wru" in line:
            self.dynamodb_writes += 1
        self.read_units += float(line.get("rru", 0.0))
        self.write_units += float(line.get("wru", 0.0))
        self.index_write_units += float(line.get("index_wru", 0.0))
        if operation == "UpdateItem" and line.get("ok"):
            self.update_writes += 1
            self.update_write_units += float(line.get("wru", 0.0))


def group_of(line: Mapping[str, Any]) -> str | None:
    """The group a meter line counts to: a worker's job type, or the function's role."""
    function = str(line.get("fn", ""))
    if function in GROUPS_OF_FUNCTIONS:
        return GROUPS_OF_FUNCTIONS[function]
    job_type = line.get("jt")
    return str(job_type) if job_type else None


def tally(
    lines: Iterable[Mapping[str, Any]],
    *,
    since: float = 0.0,
    until: float = math.inf,
    group: Callable[[Mapping[str, Any]], str | None] = group_of,
) -> dict[str, Usage]:
    """The lines written between `since` and `until`, added up by group."""
    usage: dict[str, Usage] = {}
    for line in lines:
        if not since <= float(line.get("t", 0.0)) <= until:
            continue
        name = group(line)
        if name is not None:
            usage.setdefault(name, Usage()).add(line)
    return usage


def dynamodb_per_job(usage: Mapping[str, Usage], jobs: int) -> tuple[float, float]:
    """DynamoDB requests and reads per job of a path, counting every group but the API's (a
    cancel's own cost) and the scheduled ones' (the sweep's, the reconciler's: they run on their
    schedule, whatever the traffic)."""
    counted = [u for group, u in usage.items() if group not in ("api", *SCHEDULED_GROUPS)]
    per = max(jobs, 1)
    return (
        sum(u.dynamodb_requests for u in counted) / per,
        sum(u.dynamodb_reads for u in counted) / per,
    )


def state_machine_writes_per_job(usage: Mapping[str, Usage], jobs: int, table: str) -> float:
    """The jobs' own transitions per job: the workers' updates of the jobs table (a claim and
    a completion on the happy path), apart from what the features around them cost."""
    workers = [u for group, u in usage.items() if group not in GROUPS_OF_FUNCTIONS.values()]
    return sum(u.table_requests[f"{table}:UpdateItem"] for u in workers) / max(jobs, 1)


@dataclass(frozen=True)
class Prices:
    as_of: str
    region: str
    lambda_gb_second: float
    lambda_request: float
    write_unit: float
    read_unit: float
    sqs_request: float
    sqs_chunk_bytes: int
    s3_put_class: float
    s3_get_class: float
    s3_storage_gb_month: float
    api_gateway_request: float
    eventbridge_event: float
    logs_ingested_gb: float
    xray_trace: float
    xray_reservoir_per_second: float
    xray_fixed_rate: float

    @classmethod
    def load(cls, path: Path) -> Prices:
        table = tomllib.loads(path.read_text())
        return cls(
            as_of=str(table["as_of"]),
            region=str(table["region"]),
            lambda_gb_second=table["lambda"]["gb_second_arm64"],
            lambda_request=table["lambda"]["request"],
            write_unit=table["dynamodb"]["write_request_unit"],
            read_unit=table["dynamodb"]["read_request_unit"],
            sqs_request=table["sqs"]["request"],
            sqs_chunk_bytes=int(table["sqs"]["chunk_bytes"]),
            s3_put_class=table["s3"]["put_copy_post_list"],
            s3_get_class=table["s3"]["get_and_others"],
            s3_storage_gb_month=table["s3"]["storage_gb_month"],
            api_gateway_request=table["api_gateway"]["rest_request"],
            eventbridge_event=table["eventbridge"]["event"],
            logs_ingested_gb=table["cloudwatch_logs"]["ingested_gb"],
            xray_trace=table["xray"]["trace_recorded"],
            xray_reservoir_per_second=table["xray"]["reservoir_per_second"],
            xray_fixed_rate=table["xray"]["fixed_rate"],
        )

    def sampled_share(self, invocations_per_month: float) -> float:
        """The share of a function's invocations X-Ray's default rule records, when they come
        evenly over a month: the reservoir's one a second, then the fixed rate of the rest."""
        per_second = invocations_per_month / MONTH_SECONDS
        if per_second <= self.xray_reservoir_per_second:
            return 1.0
        extra = per_second - self.xray_reservoir_per_second
        return (self.xray_reservoir_per_second + self.xray_fixed_rate * extra) / per_second


SERVICES = (
    "lambda", "dynamodb", "sqs", "s3", "storage", "api_gateway", "eventbridge", "logs", "xray",
)  # fmt: skip


def dollars(usage: Usage, prices: Prices, scale: float, *, traced: bool = True) -> dict[str, float]:
    """What `usage` costs, by service, when it happens `scale` times (in a month, for X-Ray's
    sampling); not `traced` (FunctionTracing=PassThrough, nothing upstream sampled), no trace."""
    invocations = usage.invocations * scale
    return {
        "lambda": scale
        * (usage.gb_seconds * prices.lambda_gb_second + usage.invocations * prices.lambda_request),
        "dynamodb": scale
        * (usage.read_units * prices.read_unit + usage.write_units * prices.write_unit),
        "sqs": scale * usage.sqs_requests * prices.sqs_request,
        "s3": scale
        * (usage.s3_put_class * prices.s3_put_class + usage.s3_get_class * prices.s3_get_class),
        "storage": scale
        * usage.stored_bytes
        / GIB
        * prices.s3_storage_gb_month
        * DERIVED_DAYS
        / 30,
        "api_gateway": scale * usage.api_requests * prices.api_gateway_request,
        "eventbridge": scale * usage.events * prices.eventbridge_event,
        "logs": scale * usage.log_bytes / 1e9 * prices.logs_ingested_gb,
        "xray": invocations * prices.sampled_share(invocations) * prices.xray_trace
        if traced
        else 0.0,
    }


def floor_dollars(usage: Usage, per: int, prices: Prices, scale: float) -> dict[str, float]:
    """The least a job of this group can cost in this design, `scale` times: one invocation that
    lasts only as long as its processor; two conditional writes (the claim and the completion,
    each the size measured for this group's updates), no read; one message sent, received and
    deleted; the processor's own S3 requests and the storage of what it wrote. No logs, traces
    or outcome events."""
    jobs = max(per, 1)
    update_units = usage.update_write_units / max(usage.update_writes, 1)
    floor = Usage(
        invocations=jobs,
        gb_seconds=usage.processor_gb_seconds,
        dynamodb_writes=2 * jobs,
        write_units=2 * update_units * jobs,
        sqs_requests=3.0 * jobs,
        s3_put_class=usage.s3_put_class,
        s3_get_class=usage.s3_get_class,
        stored_bytes=usage.stored_bytes,
    )
    costs = dollars(floor, prices, scale)
    costs["xray"] = costs["logs"] = 0.0
    return costs


def _gb_seconds(milliseconds: float, memory_mb: int, granularity_ms: int = 1) -> float:
    billed = math.ceil(float(milliseconds) / granularity_ms) * granularity_ms
    return billed / 1000 * memory_mb / 1024
