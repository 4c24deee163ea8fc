"""The operations queue on SQS: a bulk operation's next page, as a message naming it; and a
schedule's run, as EventBridge Scheduler sends it.

The message says only which operation to advance; where it stands is in OpsTable. So a message
delivered twice, or late, advances the operation from wherever it is (services/operations.py).
A run names its schedule and scheduled time: the run's operation is started once per time.

Each page's message carries the operation's tenant as its `MessageGroupId` (an operator's
operation over every tenant: OPERATORS_GROUP), which makes the standard queue an SQS fair queue:
one tenant's bulk operations do not hold up another's (adapters/sqs.py does the same for jobs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from filejobs.domain.operations import Operation, is_operation_id
from filejobs.domain.schedules import SCHEDULE_ID_PATTERN

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


# Not a tenant name (domain/keys.py takes no `#`): never one tenant's group.
OPERATORS_GROUP = "#operators"


class SqsOperationQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client, self._url = client, queue_url

    def send(self, operation: Operation, delay: timedelta) -> None:
        self._client.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps({"operation_id": operation.id}),
            DelaySeconds=max(0, int(delay.total_seconds())),
            MessageGroupId=operation_group(operation),
        )


def operation_group(operation: Operation) -> str:
    """The fair queue's group of an operation's messages: its tenant, or the operators' group
    for one over every tenant."""
    return operation.tenant or OPERATORS_GROUP


def operation_of(body: str) -> str | None:
    """The operation a message names; None for a body that names none."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    operation_id = parsed.get("operation_id") if isinstance(parsed, dict) else None
    return operation_id if isinstance(operation_id, str) and is_operation_id(operation_id) else None


@dataclass(frozen=True)
class ScheduleRun:
    """A schedule's run as the scheduler delivers it: which schedule, of which tenant, when."""

    tenant: str
    schedule_id: str
    scheduled_time: datetime


# What EventBridge Scheduler puts in the message for each run: it replaces the placeholder with
# the run's scheduled time (the local stack's scheduler does the same).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def schedule_run_message(tenant: str, schedule_id: str) -> str:
    """The message a schedule's every run sends to the operations queue."""
    run = {"tenant": tenant, "schedule_id": schedule_id, "scheduled_time": SCHEDULED_TIME}
    return json.dumps({"schedule_run": run})


def schedule_run_of(body: str) -> ScheduleRun | None:
    """The run a message names; None for a body that names none (or a bad time)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    run = parsed.get("schedule_run") if isinstance(parsed, dict) else None
    if not isinstance(run, dict):
        return None
    tenant, schedule_id = run.get("tenant"), run.get("schedule_id")
    scheduled = _moment(run.get("scheduled_time"))
    if not (isinstance(tenant, str) and isinstance(schedule_id, str) and scheduled):
        return None
    if not re.match(SCHEDULE_ID_PATTERN, schedule_id):
        return None
    return ScheduleRun(tenant, schedule_id, scheduled)


def _moment(value: object) -> datetime | None:
    """An ISO 8601 time with its offset (the scheduler's `2026-12-05T03:00:00Z`), in UTC."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return None if moment.tzinfo is None else moment.astimezone(UTC)
