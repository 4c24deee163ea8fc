"""Outcome events: the tables' streams in, `Job Completed` / `Job Failed` / ... on the bus out.

Subscribed to the jobs and files tables' streams with a filter that only passes writes that can
be outcomes; the domain decides for sure (domain/events.py). A record that fails is reported
alone; Lambda retries the stream from it, so an event can be published twice (consumers dedupe
by detail.event_id) and is never skipped.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.adapters.eventbridge import EventBridgePublisher
from filejobs.observability import METRICS_NAMESPACE, SERVICE, TRACED_MODULES
from filejobs.services.outcomes import Change, OutcomeService, Table

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)
processor = BatchProcessor(
    event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
)


class UnknownStreamError(ValueError):
    """A record from a stream that is neither the jobs nor the files table's."""


def table_of(record: DynamoDBRecord) -> Table:
    # arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
    source = record.event_source_arn or ""
    name = source.split(":table/", 1)[-1].split("/stream/", 1)[0]
    settings = runtime.settings()
    if name == settings.jobs_table:
        return Table.JOBS
    if name == settings.files_table:
        return Table.FILES
    raise UnknownStreamError(f"record from an unknown stream: {source!r}")


def change_of(record: DynamoDBRecord) -> Change:
    # The raw images (typed attribute values), as the data layer reads items.
    images: dict[str, Any] = record.raw_event.get("dynamodb") or {}
    return Change(table_of(record), images.get("OldImage"), images.get("NewImage"))


def record_handler(record: DynamoDBRecord) -> None:
    metrics.add_metric(name="StreamRecordsRead", unit=MetricUnit.Count, value=1)
    change = change_of(record)
    publisher = EventBridgePublisher(runtime.events(), runtime.settings().require_event_bus())
    event = OutcomeService(publisher).announce(change)
    if event is None:
        return
    detail = event.detail
    logger.info(
        "outcome published",
        detail_type=event.detail_type.value,
        event_id=event.event_id,
        job_id=detail["id"] if change.table is Table.JOBS else None,
        file_id=detail["file_id"] if change.table is Table.JOBS else detail["id"],
    )
    metrics.add_metric(name="OutcomesPublished", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
