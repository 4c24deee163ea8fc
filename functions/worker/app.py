"""A job worker: one function per job type (JOB_TYPE), fed by its type's two queue lanes."""

from __future__ import annotations

import os
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
from filejobs.domain.job import JobType
from filejobs.domain.messages import JobMessage
from filejobs.observability import METRICS_NAMESPACE, SERVICE
from filejobs.processors.digest import ObjectDigest
from filejobs.services.worker import Outcome, WorkerService, WorkResult

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
# A batch whose every record failed is reported item by item, like any other: no function error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

_METRIC = {
    Outcome.COMPLETED: "JobsCompleted",
    Outcome.RETRYING: "JobsRetried",
    Outcome.FAILED: "JobsFailed",
    Outcome.SKIPPED: "MessagesSkipped",
    Outcome.ABANDONED: "JobsAbandoned",
}


def job_type() -> JobType:
    return JobType(os.environ["JOB_TYPE"])


def record_handler(record: SQSRecord) -> None:
    # A malformed message raises here: it fails alone and, after maxReceiveCount, rests in the DLQ.
    message = JobMessage.parse(record.body)
    # Keys scoped to this record: the next record of the batch must not inherit them.
    with logger.append_context_keys(job_id=message.job_id, job_type=message.job_type.value):
        handle(message, record.message_id)


def handle(message: JobMessage, message_id: str) -> None:
    settings = runtime.settings()
    service = WorkerService(
        runtime.jobs(),
        runtime.dispatcher(),
        ObjectDigest(runtime.s3()),
        job_type(),
        lease=settings.lease,
        retention=settings.retention,
        worker_id=runtime.worker_id(message_id),
    )
    result = service.handle(message)
    job = result.job
    logger.info(
        "job handled",
        extra={
            "outcome": result.outcome.value,
            "detail": result.detail,
            "file_id": None if job is None else job.file_id,
            "attempt": None if job is None else job.attempt,
        },
    )
    record_metrics(result)


def record_metrics(result: WorkResult) -> None:
    metrics.add_dimension(name="job_type", value=job_type().value)
    if result.outcome is not Outcome.SKIPPED:
        metrics.add_metric(name="JobsStarted", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=_METRIC[result.outcome], unit=MetricUnit.Count, value=1)
    duration = result.job.duration() if result.job is not None else None
    if result.outcome is Outcome.COMPLETED and duration is not None:
        metrics.add_metric(
            name="JobDuration", unit=MetricUnit.Seconds, value=duration.total_seconds()
        )


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
