"""Ingest: S3 upload notifications (via SQS) become StoredFiles with their ProcessingJobs."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.adapters.s3 import S3HeadReader
from filejobs.adapters.s3_events import object_created_records
from filejobs.data.file_repository import AlreadyIngested
from filejobs.domain.ingest import InvalidUploadError, ObjectCreated
from filejobs.domain.job import JobStatus
from filejobs.observability import METRICS_NAMESPACE, SERVICE
from filejobs.services.ingest import IngestService

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
# A batch whose every record failed is reported item by item, like any other: no function error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def ingest_one(created: ObjectCreated) -> None:
    # Keys scoped to this object: the next record of the batch must not inherit them.
    with logger.append_context_keys(bucket=created.bucket, key=created.key):
        record_upload(created)


def record_upload(created: ObjectCreated) -> None:
    service = IngestService(runtime.files(), S3HeadReader(runtime.s3()))
    try:
        result = service.ingest(created)
    except InvalidUploadError as refused:
        # Acknowledged, not retried: no retry turns a stray key into an upload.
        logger.warning("upload refused", reason=str(refused))
        metrics.add_metric(name="UploadsRefused", unit=MetricUnit.Count, value=1)
        return
    if isinstance(result, AlreadyIngested):
        # A redelivery: the first delivery may have died before sending the messages.
        pending = runtime.jobs().jobs_of_file(result.file_id, JobStatus.PENDING)
        runtime.dispatcher().dispatch_all(pending)
        logger.info("duplicate delivery", file_id=result.file_id, redispatched=len(pending))
        metrics.add_metric(name="DuplicateDeliveries", unit=MetricUnit.Count, value=1)
        return
    runtime.dispatcher().dispatch_all(result.plan.jobs)
    logger.info(
        "file ingested",
        file_id=result.plan.file.id,
        content_type=result.plan.file.content_type,
        jobs=[j.job_type.value for j in result.plan.jobs],
    )
    metrics.add_metric(name="FilesIngested", unit=MetricUnit.Count, value=1)


def record_handler(record: SQSRecord) -> None:
    for created in object_created_records(record.body):
        ingest_one(created)


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
