"""File removals: S3's ObjectRemoved notifications (via SQS), followed by the files they concern.

A delete of an upload's version, or a delete marker over its current one, marks its file deleted,
cancels its open jobs and deletes its derived outputs; deleting the marker again restores the
file (services/file_lifecycle.py). Each record is looked at again in S3, so a duplicate, late or
out-of-order notification changes nothing more.

The same queue carries what the function sends itself, delayed: the purges a deletion or an
erasure asks for (a file's outputs deleted once more when no attempt that was running at the
deletion can still write one), and a removal read again that came before its upload's ingest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import process_partial_response

from filejobs import runtime
from filejobs.adapters.s3_lifecycle import outputs_purge_of, removal_again_of
from filejobs.adapters.s3_notifications import object_removed_records
from filejobs.domain.file_lifecycle import ObjectRemoved, OutputsPurge, Restore
from filejobs.instrumentation import instruments, sqs_batch
from filejobs.observability import record_scope

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured
# A failed record comes back (its queue's redrive policy moves it aside after a few tries).
processor = sqs_batch()


def follow(removed: ObjectRemoved) -> None:
    with record_scope(logger, bucket=removed.bucket, key=removed.key, removal=removed.kind.value):
        changes = runtime.file_lifecycle().follow(removed)
        restored = [c.file.id for c in changes if isinstance(c, Restore)]
        deleted = [c.file.id for c in changes if not isinstance(c, Restore)]
        logger.info("removal followed", deleted=deleted, restored=restored)
        if deleted:
            metrics.add_metric(name="FilesDeleted", unit=MetricUnit.Count, value=len(deleted))
        if restored:
            metrics.add_metric(name="FilesRestored", unit=MetricUnit.Count, value=len(restored))


def purge(requested: OutputsPurge) -> None:
    with record_scope(logger, file_id=requested.file_id):
        deleted = runtime.file_lifecycle().purge(requested)
        logger.info("outputs purged again", outputs_deleted=deleted)


@tracer.capture_method(capture_response=False)
def record_handler(record: SQSRecord) -> None:
    with record_scope(logger, message_id=record.message_id):
        requested = outputs_purge_of(record.body)
        if requested is not None:
            purge(requested)
            return
        again = removal_again_of(record.body)
        for removed in [again] if again is not None else object_removed_records(record.body):
            follow(removed)


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
