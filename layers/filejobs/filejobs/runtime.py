"""Wiring for Lambda handlers: clients and repositories built once per container, and the loop
that runs an SQS batch record by record.

Only what every handler uses is imported here: a handler that needs more (the ingest's files
repository) imports it itself, so the others do not load it at every cold start. Clients come
from botocore itself: boto3 would add its resources and S3 transfer manager (and, through them,
multiprocessing), some 30 ms of each cold start, and none of it is used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, TypedDict, cast

import botocore.session

from filejobs.adapters.sqs import SqsDispatcher
from filejobs.config import Settings
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import bind_tables
from filejobs.observability import RecordFailedError, record_scope

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient


type SqsRecord = Mapping[str, Any]


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    """What an SQS event source with ReportBatchItemFailures reads from the function."""

    batchItemFailures: list[BatchItemFailure]


@cache
def settings() -> Settings:
    """The environment's settings; the PynamoDB models are bound to its tables from here on."""
    loaded = Settings.from_env()
    bind_tables(
        jobs_table=loaded.jobs_table,
        files_table=loaded.files_table,
        endpoint_url=loaded.endpoint_url,
    )
    return loaded


@cache
def aws_session() -> botocore.session.Session:
    """The one session every client here comes from (as boto3.client's default session is)."""
    return botocore.session.get_session()


@cache
def s3() -> S3Client:
    return cast("S3Client", _client("s3"))


@cache
def sqs() -> SQSClient:
    return cast("SQSClient", _client("sqs"))


@cache
def events() -> EventBridgeClient:
    return cast("EventBridgeClient", _client("events"))


def _client(service: str) -> object:
    return aws_session().create_client(service, endpoint_url=settings().endpoint_url)


def jobs() -> JobRepository:
    settings()
    return JobRepository()


def dispatcher() -> SqsDispatcher:
    return SqsDispatcher(sqs(), settings().queue_urls)


def sqs_batch(
    event: Mapping[str, Any], handle: Callable[[SqsRecord], None], logger: Logger
) -> PartialBatchResponse:
    """Handle an SQS event's records one at a time and report the ones that failed.

    SQS deletes the records that succeeded and redelivers the failed ones until maxReceiveCount
    moves them to the dead-letter queue; an all-failed batch is reported item by item too, not
    as a function error. Each record's log lines carry its message_id, and a failure is logged
    once, with the keys of the innermost `record_scope` it escaped.

    (Powertools' BatchProcessor does the same, but importing it loads asyncio and all of its
    event data classes: tens of milliseconds of every cold start for nothing used here.)
    """
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("not an SQS event: it has no Records list")
    failures: list[BatchItemFailure] = []
    for record in records:
        message_id = str(record["messageId"])
        try:
            with record_scope(logger, message_id=message_id):
                handle(record)
        except RecordFailedError:
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}


def worker_id(context_request_id: str | None = None) -> str:
    name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "worker")
    return f"{name}:{context_request_id}" if context_request_id else name


def reset() -> None:
    """Forget every cached client and setting (tests change the environment between cases)."""
    for cached in (settings, aws_session, s3, sqs, events):
        cached.cache_clear()
