"""EventBridge Scheduler: a schedule's cron armed to send its runs to the operations queue.

Each schedule is one EventBridge schedule of the stack's group, named by the schedule's id. Its
target is the operations queue, its message the run (adapters/operations_queue.py), with the
scheduled time filled in by the scheduler. OpsTable stays the record: a run whose schedule is
gone or paused there is dropped by the operations function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.adapters.operations_queue import schedule_run_message
from filejobs.domain.schedules import Schedule

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

# A run the scheduler could not deliver is retried for an hour, then dropped (the next run comes).
RETRY_POLICY = {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 20}


class EventBridgeScheduler:
    def __init__(
        self,
        client: EventBridgeSchedulerClient,
        *,
        group: str,
        target_arn: str,
        role_arn: str,
        dead_letter_arn: str | None = None,
    ) -> None:
        self._client, self._group = client, group
        self._target_arn, self._role_arn = target_arn, role_arn
        self._dead_letter_arn = dead_letter_arn

    def arm(self, schedule: Schedule) -> None:
        """Create the schedule's EventBridge schedule, or bring it in line with the record."""
        request = self._request(schedule)
        try:
            self._client.create_schedule(**request)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConflictException":
                raise
            self._client.update_schedule(**request)

    def disarm(self, schedule_id: str) -> None:
        try:
            self._client.delete_schedule(Name=schedule_id, GroupName=self._group)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceNotFoundException":
                raise

    def _request(self, schedule: Schedule) -> Any:
        target: dict[str, Any] = {
            "Arn": self._target_arn,
            "RoleArn": self._role_arn,
            "Input": schedule_run_message(schedule.tenant, schedule.id),
            "RetryPolicy": RETRY_POLICY,
        }
        if self._dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": self._dead_letter_arn}
        return {
            "Name": schedule.id,
            "GroupName": self._group,
            "ScheduleExpression": schedule.expression,
            "ScheduleExpressionTimezone": schedule.timezone,
            "State": "ENABLED" if schedule.enabled else "DISABLED",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Description": f"filejobs schedule {schedule.name!r} of tenant {schedule.tenant}"[:512],
            "Target": target,
        }
