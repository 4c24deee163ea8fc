"""Webhooks function: tenants' events to their endpoints (services/webhooks.py).

A message is either an event of the stack's bus, forwarded by WebhookEventsRule (one delivery
recorded and queued per endpoint that wants it), or one delivery to attempt. A message that is
neither is logged and acknowledged: it can never become valid. A message that fails on an AWS
error is reported failed and comes back (each delivery's attempts are recorded by conditional
writes, so a repeated message records nothing twice); after 5 receives it is dead-lettered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import process_partial_response

from filejobs import runtime
from filejobs.adapters.webhook_http import bus_event_of, delivery_task_of
from filejobs.instrumentation import instruments, sqs_batch
from filejobs.services.webhooks import bus_event

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments(measured=False)
logger, tracer = observed.logger, observed.tracer
processor = sqs_batch()


def record_handler(record: SQSRecord) -> None:
    task = delivery_task_of(record.body)
    if task is not None:
        logger.append_keys(webhook_id=task.endpoint_id, delivery_id=task.delivery_id)
        outcome = runtime.webhooks().deliver(task)
        logger.info("delivery", outcome=outcome)
        return
    raw = bus_event_of(record.body)
    event = None if raw is None else bus_event(raw)
    if event is None:
        logger.warning("message is neither a tenant's event nor a delivery; dropped")
        return
    made = runtime.webhooks().fan_out(event)
    logger.info(
        "event fanned out",
        event_id=event.event_id,
        event_type=event.event_type,
        tenant=event.tenant,
        deliveries=len(made),
    )


@observed.entry_point(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
