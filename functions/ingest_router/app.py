"""Ingest router: S3's upload notifications, re-sent to the fair ingest queue in their tenants'
groups, so that one tenant's burst of uploads does not hold back another tenant's ingest.

S3 cannot give the messages it sends a `MessageGroupId`, so the queue it notifies serves uploads
in arrival order. This function reads each notification's tenant from its key and re-sends the
message, body unchanged, with that tenant as its group: the ingest reads an SQS fair queue
(adapters/ingest_queue.py). It touches no table and no object, so it drains a burst far faster
than the ingest can record it. A message it cannot read goes on without a group, for the ingest
to refuse or acknowledge as it always has: nothing is dropped here, and a message SQS refuses
to take is reported as failed, to come back.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import SQSEvent

from filejobs import runtime
from filejobs.adapters.s3_notifications import tenant_of_body
from filejobs.instrumentation import instruments
from filejobs.ports import Notification

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured


def notifications(event: dict[str, Any]) -> list[Notification]:
    return [
        Notification(record.message_id, record.body, tenant_of_body(record.body))
        for record in SQSEvent(event).records
    ]


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    routed = notifications(event)
    refused = set(runtime.fair_ingest_queue().send_all(routed))
    tenants = Counter(n.tenant or "(none)" for n in routed if n.message_id not in refused)
    logger.info("notifications routed", tenants=dict(tenants), refused=len(refused))
    metrics.add_metric(name="NotificationsRouted", unit=MetricUnit.Count, value=tenants.total())
    if refused:
        logger.warning("SQS refused notifications; they will be redelivered", count=len(refused))
        metrics.add_metric(name="NotificationsRefused", unit=MetricUnit.Count, value=len(refused))
    return {"batchItemFailures": [{"itemIdentifier": m} for m in sorted(refused)]}
