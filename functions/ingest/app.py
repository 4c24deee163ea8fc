"""Ingest: S3 upload notifications (via SQS) become StoredFiles with their ProcessingJobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import process_partial_response

from filejobs import runtime
from filejobs.adapters.s3 import S3HeadReader
from filejobs.adapters.s3_lifecycle import S3UploadVersions
from filejobs.adapters.s3_notifications import object_created_records
from filejobs.domain import keys
from filejobs.domain.ingest import InvalidUploadError, ObjectCreated
from filejobs.instrumentation import instruments, sqs_batch
from filejobs.observability import record_scope
from filejobs.services.ingest import IngestService, UploadIntake

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured
processor = sqs_batch()


def file_id_of(created: ObjectCreated) -> str | None:
    """The id the upload gets (or got, on a redelivery): known before any I/O."""
    try:
        return keys.file_id_for(created.bucket, created.key, created.version_marker)
    except InvalidUploadError:
        return None  # no version marker: refused by the ingest itself


def ingest_one(created: ObjectCreated) -> None:
    file_id = file_id_of(created)
    if file_id is not None:
        tracer.put_annotation(key="file_id", value=file_id)
    # Every line about this object names it and its file; the next one starts clean.
    with record_scope(logger, bucket=created.bucket, key=created.key, file_id=file_id):
        record_upload(created)


def intake() -> UploadIntake:
    ingest = IngestService(
        runtime.files(),
        S3HeadReader(runtime.s3()),
        limits=runtime.ingest_limits(),
        presets=runtime.preset_cache().of,
    )
    return UploadIntake(
        ingest,
        runtime.jobs(),
        runtime.dispatcher(),
        files=runtime.files(),
        uploads=S3UploadVersions(runtime.s3()),
    )


def record_upload(created: ObjectCreated) -> None:
    try:
        received = intake().receive(created)
    except InvalidUploadError as refused:
        # Acknowledged, not retried: no retry turns a stray key into an upload.
        logger.warning("upload refused", reason=str(refused))
        metrics.add_metric(name="UploadsRefused", unit=MetricUnit.Count, value=1)
        return
    if not received.first:
        logger.info("duplicate delivery", redispatched=len(received.sent))
        metrics.add_metric(name="DuplicateDeliveries", unit=MetricUnit.Count, value=1)
        return
    if received.rejected is not None:
        # Recorded with its reason and no jobs, its version deleted from the bucket; the
        # stream announces `Upload Rejected`.
        logger.warning("upload rejected", reason=received.rejected)
        metrics.add_metric(name="UploadsRejected", unit=MetricUnit.Count, value=1)
        return
    logger.info(
        "file ingested",
        content_type=received.content_type,
        preset=received.preset,
        jobs=[j.job_type.value for j in received.jobs],
    )
    metrics.add_metric(name="FilesIngested", unit=MetricUnit.Count, value=1)


@tracer.capture_method(capture_response=False)
def record_handler(record: SQSRecord) -> None:
    # One notification usually holds one object; each is ingested in its own log scope.
    with record_scope(logger, message_id=record.message_id):
        for created in object_created_records(record.body):
            ingest_one(created)


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
