"""Operations function: advances bulk operations (services/operations.py), one page a message,
and starts schedules' runs (services/schedules.py) as EventBridge Scheduler delivers them.

Each message names an operation, or a schedule's run; the page it changes and the message that
continues it are the service's. A message that names neither is logged and acknowledged: it can
never become valid. A page that fails on an AWS error is reported as failed, and SQS delivers it
again (the operation's cursor makes a repeated page change nothing twice; a run is started once
per scheduled time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import process_partial_response

from filejobs import runtime
from filejobs.adapters.operations_queue import ScheduleRun, operation_of, schedule_run_of
from filejobs.instrumentation import instruments, sqs_batch

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments(measured=False)
logger, tracer = observed.logger, observed.tracer
processor = sqs_batch()


def record_handler(record: SQSRecord) -> None:
    operation_id = operation_of(record.body)
    if operation_id is None:
        run = schedule_run_of(record.body)
        if run is None:
            logger.warning("message names no operation; dropped", message_id=record.message_id)
            return
        start_run(run)
        return
    logger.append_keys(operation_id=operation_id)
    advanced = runtime.bulk_operations().advance(operation_id)
    if advanced is None:
        logger.warning("no such operation; message dropped")
        return
    logger.info(
        "operation advanced",
        status=advanced.status.value,
        processed=advanced.progress.processed,
        matched=advanced.matched,
    )


def start_run(run: ScheduleRun) -> None:
    logger.append_keys(schedule_id=run.schedule_id, scheduled_time=run.scheduled_time.isoformat())
    started = runtime.schedules().run(run.tenant, run.schedule_id, run.scheduled_time)
    if started is None:
        return
    logger.info(
        "schedule run started",
        operation_id=started.operation.id,
        replayed=started.replayed,
        matched=started.operation.matched,
    )


@observed.entry_point(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
