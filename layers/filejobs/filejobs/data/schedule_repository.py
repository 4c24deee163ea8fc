"""Recurring schedules (domain/schedules.py) in OpsTable, through the plain DynamoDB client.

Items: `pk="schedules"`, `sk=<schedule id>`, the tenant an attribute. Schedules are few (at most
MAX_SCHEDULES_PER_TENANT a tenant, made by people), so one partition holds them all and a
tenant's list is that partition's Query filtered on the tenant. Every change is one conditional
write: the put of a new id, a pause or resume of an existing one, a run recorded only if its
scheduled time is later than the last one recorded.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.domain.job import JobType
from filejobs.domain.schedules import Schedule, ScheduleAction

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_SCHEDULES = "schedules"
_REFUSED = "ConditionalCheckFailedException"


class ScheduleRepository:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client, self._table = client, table

    def create(self, schedule: Schedule) -> bool:
        """False when a schedule of this id exists already (nothing written)."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item=_to_item(schedule),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != _REFUSED:
                raise
            return False
        return True

    def get(self, schedule_id: str) -> Schedule | None:
        found = self._client.get_item(
            TableName=self._table, Key=_key(schedule_id), ConsistentRead=True
        ).get("Item")
        return None if found is None else _from_item(found)

    def of_tenant(self, tenant: str | None) -> list[Schedule]:
        """A tenant's schedules (every tenant's with None), oldest first."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": _SCHEDULES}},
        }
        if tenant is not None:
            request["FilterExpression"] = "tenant = :tenant"
            request["ExpressionAttributeValues"][":tenant"] = {"S": tenant}
        found: list[Schedule] = []
        for page in self._client.get_paginator("query").paginate(**request):
            found += [_from_item(item) for item in page.get("Items", [])]
        return sorted(found, key=lambda s: (s.created_at, s.id))

    def set_enabled(
        self, schedule_id: str, enabled: bool, *, at: datetime, by: str
    ) -> Schedule | None:
        """The schedule paused or resumed; None when there is none."""
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=_key(schedule_id),
                UpdateExpression="SET enabled = :enabled, updated_at = :at, updated_by = :by",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={
                    ":enabled": {"BOOL": enabled},
                    ":at": {"S": _iso(at)},
                    ":by": {"S": by},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != _REFUSED:
                raise
            return None
        return _from_item(answer["Attributes"])

    def delete(self, schedule_id: str) -> bool:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=_key(schedule_id),
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != _REFUSED:
                raise
            return False
        return True

    def record_run(self, schedule_id: str, scheduled_time: datetime, operation_id: str) -> bool:
        """The run counted, once: False when a run at this time or later is recorded already
        (the scheduler delivered it again), or the schedule is gone."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(schedule_id),
                UpdateExpression=(
                    "SET last_run_at = :time, last_operation_id = :operation ADD runs :one"
                ),
                ConditionExpression=(
                    "attribute_exists(pk) AND "
                    "(attribute_not_exists(last_run_at) OR last_run_at < :time)"
                ),
                ExpressionAttributeValues={
                    ":time": {"S": _iso(scheduled_time)},
                    ":operation": {"S": operation_id},
                    ":one": {"N": "1"},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != _REFUSED:
                raise
            return False
        return True


def _key(schedule_id: str) -> dict[str, Any]:
    return {"pk": {"S": _SCHEDULES}, "sk": {"S": schedule_id}}


def _to_item(schedule: Schedule) -> dict[str, Any]:
    item: dict[str, Any] = {
        **_key(schedule.id),
        "tenant": {"S": schedule.tenant},
        "name": {"S": schedule.name},
        "expression": {"S": schedule.expression},
        "timezone": {"S": schedule.timezone},
        "action": {"S": schedule.action.value},
        "prefix": {"S": schedule.prefix},
        "options": {"S": json.dumps(schedule.options, sort_keys=True)},
        "enabled": {"BOOL": schedule.enabled},
        "created_by": {"S": schedule.created_by},
        "created_at": {"S": _iso(schedule.created_at)},
        "updated_at": {"S": _iso(schedule.updated_at)},
        "runs": {"N": str(schedule.runs)},
    }
    if schedule.job_type is not None:
        item["job_type"] = {"S": schedule.job_type.value}
    if schedule.last_run_at is not None:
        item["last_run_at"] = {"S": _iso(schedule.last_run_at)}
    if schedule.last_operation_id is not None:
        item["last_operation_id"] = {"S": schedule.last_operation_id}
    return item


def _from_item(item: dict[str, Any]) -> Schedule:
    def text(name: str) -> str | None:
        value = item.get(name)
        return None if value is None else str(value["S"])

    job_type, last_run = text("job_type"), text("last_run_at")
    return Schedule(
        id=item["sk"]["S"],
        tenant=item["tenant"]["S"],
        name=item["name"]["S"],
        expression=item["expression"]["S"],
        timezone=item["timezone"]["S"],
        action=ScheduleAction(item["action"]["S"]),
        prefix=item["prefix"]["S"],
        created_by=item["created_by"]["S"],
        created_at=_parse(item["created_at"]["S"]),
        updated_at=_parse(item["updated_at"]["S"]),
        job_type=None if job_type is None else JobType(job_type),
        options=json.loads(text("options") or "{}"),
        enabled=bool(item.get("enabled", {}).get("BOOL", True)),
        runs=int(item.get("runs", {}).get("N", "0")),
        last_run_at=None if last_run is None else _parse(last_run),
        last_operation_id=text("last_operation_id"),
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)
