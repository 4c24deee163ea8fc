"""Outcome events: the tables' streams in, `Job Completed` / `Job Failed` / ... on the bus out.

Subscribed to the jobs and files tables' streams with a filter that only passes writes that can
be outcomes; the domain decides for sure (domain/outcome_events.py). A record that fails is reported
alone; Lambda retries the stream from it, so an event can be published twice (consumers dedupe
by detail.event_id) and is never skipped.

A job that ended also has its file checked (services/file_completion.py): when all of the file's
jobs are terminal its completion is recorded, and that write comes back on the files' stream as
`File Processed`. The check reads the file and its ingest jobs in one BatchGetItem across both
tables (data/completion_reads.py), and a second one only for jobs the ingest did not make.

A job's finish also applies its type's keep-last-N retention, when KeepLastFinishedJobs names
the type (services/retention.py says why here), before its file is checked. Best effort after
the announcement: a failure is logged and counted (RetentionFailed), never retried at the cost
of holding the shard's outcomes back; the next finish on the file, or the TTL, catches up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from filejobs.data.completion_reads import FileAndJobsReader
from filejobs.data.stream import file_from_image, job_from_image
from filejobs.domain.job import ProcessingJob
from filejobs.instrumentation import instruments
from filejobs.services.file_completion import FileCompletions
from filejobs.services.outcomes import Change, FileChange, JobChange, OutcomeService
from filejobs.services.retention import Retention

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured
processor = BatchProcessor(
    event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
)


class UnknownStreamError(ValueError):
    """A record from a stream that is neither the jobs nor the files table's."""


def change_of(record: DynamoDBRecord) -> Change:
    """The record's item before and after, read from its raw images (typed attribute values)
    as the data layer reads items."""
    images: dict[str, Any] = record.raw_event.get("dynamodb") or {}
    before, after = images.get("OldImage"), images.get("NewImage")
    # arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
    source = record.event_source_arn or ""
    name = source.split(":table/", 1)[-1].split("/stream/", 1)[0]
    settings = runtime.settings()
    if name == settings.jobs_table:
        return JobChange(_read(before, job_from_image), _read(after, job_from_image))
    if name == settings.files_table:
        return FileChange(_read(before, file_from_image), _read(after, file_from_image))
    raise UnknownStreamError(f"record from an unknown stream: {source!r}")


def _read[T](image: dict[str, Any] | None, read: Callable[[dict[str, Any]], T]) -> T | None:
    return None if image is None else read(image)


def record_handler(record: DynamoDBRecord) -> None:
    metrics.add_metric(name="StreamRecordsRead", unit=MetricUnit.Count, value=1)
    change = change_of(record)
    publisher = EventBridgePublisher(runtime.events(), runtime.settings().require_event_bus())
    event = OutcomeService(publisher).announce(change)
    if isinstance(change, JobChange):
        retire_beyond_keep_last(change)
    if event is None:
        return
    detail = event.detail
    logger.info(
        "outcome published",
        detail_type=event.detail_type.value,
        event_id=event.event_id,
        job_id=detail["id"] if isinstance(change, JobChange) else None,
        file_id=detail["file_id"] if isinstance(change, JobChange) else detail["id"],
    )
    metrics.add_metric(name="OutcomesPublished", unit=MetricUnit.Count, value=1)
    if isinstance(change, JobChange) and change.after is not None:
        check_file(change.after)


def check_file(job: ProcessingJob) -> None:
    """Records the job's file as processed when this was the last of its jobs to end."""
    settings = runtime.settings()
    # The file and its ingest jobs in one BatchGetItem across both tables.
    together = FileAndJobsReader(
        runtime.dynamodb(), files_table=settings.files_table, jobs_table=settings.jobs_table
    )
    completions = FileCompletions(runtime.jobs(), runtime.files(), together=together)
    completion = completions.job_ended(job)
    if completion is not None:
        logger.info(
            "file processed",
            file_id=job.file_id,
            fingerprint=completion.fingerprint,
            jobs=completion.counts(),
        )
        metrics.add_metric(name="FilesProcessed", unit=MetricUnit.Count, value=1)


def retire_beyond_keep_last(change: JobChange) -> None:
    keep = runtime.settings().keep_last
    if not keep:
        return
    retention = Retention(runtime.jobs(), runtime.files(), keep)
    if not retention.applies_to(change.before, change.after):
        return
    try:
        retired = retention.on_change(change.before, change.after)
    except Exception:  # the next finish on the file, or the TTL, catches up
        logger.exception("keep-last retention failed")
        metrics.add_metric(name="RetentionFailed", unit=MetricUnit.Count, value=1)
        return
    if retired:
        logger.info("finished jobs retired", retired=retired)
        metrics.add_metric(name="JobsRetired", unit=MetricUnit.Count, value=len(retired))


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
