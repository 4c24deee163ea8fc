"""Bulk operations (domain/operations.py) in OpsTable, through the plain DynamoDB client.

Items:
- `pk="operations"`, `sk=<operation id>`: the operation, its filter, progress and cursor. Ids
  begin with their creation time (`op-YYYYMMDDTHHMMSSZ-<hex>`), so one Query reads the audit
  list newest first. Operations are few (people start them): one partition serves them.
- `pk="operation-key"`, `sk="<caller>#<Idempotency-Key>"`: the operation a caller's key made.
  Put with the operation in one transaction, both conditional on not existing, so the same key
  can never start two operations.

A tenant's operation is counted against its day's `operations_per_day` in the same transaction
that records it: a third item, the tenant's usage item of the day in FilesTable (a conditional
ADD, data/quota_repository.operation_update). Its running operations are counted by one Query
of the operations of the last `RUNNING_WINDOW` (`running`).

Recording a page's progress is one UpdateItem conditioned on the cursor it started from: two
runs of the same page cannot both record it. An erasure's `removed` (what it removed, by kind) is
written whole with each page's progress.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.data.models import UsageModel
from filejobs.data.quota_repository import operation_update
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.operations import (
    Action,
    FileSelection,
    JobFilter,
    Operation,
    OperationStatus,
    Progress,
)
from filejobs.domain.quotas import OperationCharge, QuotaSpentError, SpentQuota

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_OPERATIONS = "operations"
_KEYS = "operation-key"
_REFUSED = "ConditionalCheckFailedException"
# The running operations a tenant is held to are the ones it started within this window, so the
# count is one bounded Query. At the default 50 jobs a second an operation over 4 million jobs
# ends within it; a longer one stops counting after a day (the daily quota still holds).
RUNNING_WINDOW = timedelta(days=1)


class OperationRepository:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client, self._table = client, table

    def create(
        self,
        operation: Operation,
        *,
        caller: str,
        key: str,
        charge: OperationCharge | None = None,
    ) -> Operation:
        """Records `operation` under the caller's key; when the key was used already, the
        operation it made (whatever its request: the caller compares). With `charge`, counted
        against its tenant's day in the same transaction: QuotaSpentError when the day has no
        operation left (and nothing is recorded)."""
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": _key_item(caller, key, operation.id),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": _to_item(operation),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        if charge is not None:
            items.append({"Update": operation_update(charge, UsageModel.Meta.table_name)})
        try:
            self._client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            existing = self._by_key(caller, key)
            if existing is not None:
                return existing
            if charge is not None and _cancelled_at(error, len(items) - 1):
                raise QuotaSpentError(SpentQuota.OPERATIONS) from None
            raise
        return operation

    def running(self, tenant: str, *, now: datetime) -> int:
        """How many of the tenant's operations started in the last RUNNING_WINDOW are running
        (one Query of that window's operations: people start few). One running longer is not
        counted: the daily quota still bounds how many a tenant starts."""
        since = f"op-{now - RUNNING_WINDOW:%Y%m%dT%H%M%SZ}"
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk >= :since",
            "FilterExpression": "tenant = :tenant AND #status = :running",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {
                ":pk": {"S": _OPERATIONS},
                ":since": {"S": since},
                ":tenant": {"S": tenant},
                ":running": {"S": OperationStatus.RUNNING.value},
            },
            "Select": "COUNT",
        }
        counted = 0
        while True:
            answer = self._client.query(**request)
            counted += answer.get("Count", 0)
            last = answer.get("LastEvaluatedKey")
            if last is None:
                return counted
            request["ExclusiveStartKey"] = last

    def get(self, operation_id: str) -> Operation | None:
        found = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": _OPERATIONS}, "sk": {"S": operation_id}},
            ConsistentRead=True,
        )
        item = found.get("Item")
        return None if item is None else _from_item(item)

    def recent(
        self, *, tenant: str | None, after: str | None, limit: int
    ) -> tuple[list[Operation], str | None]:
        """Operations newest first (a tenant's own when `tenant`); the id to continue after."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": _OPERATIONS}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if tenant is not None:
            request["FilterExpression"] = "tenant = :tenant"
            request["ExpressionAttributeValues"][":tenant"] = {"S": tenant}
        if after is not None:
            request["ExclusiveStartKey"] = {"pk": {"S": _OPERATIONS}, "sk": {"S": after}}
        answer = self._client.query(**request)
        operations = [_from_item(i) for i in answer.get("Items", [])]
        last = answer.get("LastEvaluatedKey")
        return operations, None if last is None else last["sk"]["S"]

    def record_page(self, before: Operation, after: Operation) -> bool:
        """Records `after` (the progress of one more page) if the operation is still as `before`
        left it (same cursor, running); False when another run recorded that page first."""
        condition = "#status = :running AND " + (
            "attribute_not_exists(#cursor)" if before.cursor is None else "#cursor = :before"
        )
        values: dict[str, Any] = {
            ":running": {"S": OperationStatus.RUNNING.value},
            ":status": {"S": after.status.value},
            ":processed": {"N": str(after.progress.processed)},
            ":changed": {"N": str(after.progress.changed)},
            ":skipped": {"N": str(after.progress.skipped)},
            ":errors": {"N": str(after.progress.errors)},
            ":updated": {"S": _iso(after.updated_at)},
        }
        # Every name through a placeholder: "processed", "errors" and others are reserved words.
        names = {"#status": "status", "#cursor": "cursor"}
        sets = ["#status = :status"]
        for name in ("processed", "changed", "skipped", "errors"):
            names[f"#{name}"] = name
            sets.append(f"#{name} = :{name}")
        names["#updated_at"] = "updated_at"
        sets.append("#updated_at = :updated")
        removes = []
        if before.cursor is not None:
            values[":before"] = {"S": before.cursor}
        if after.cursor is None:
            removes.append("#cursor")
        else:
            values[":cursor"] = {"S": after.cursor}
            sets.append("#cursor = :cursor")
        if after.removed:
            # What an erasure removed so far: the whole record, as this page leaves it.
            values[":removed"] = {"S": json.dumps(after.removed)}
            names["#removed"] = "removed"
            sets.append("#removed = :removed")
        for name, value in (("finished_at", after.finished_at), ("error", after.error)):
            if value is not None:
                values[f":{name}"] = {"S": value if isinstance(value, str) else _iso(value)}
                names[f"#{name}"] = name
                sets.append(f"#{name} = :{name}")
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": _OPERATIONS}, "sk": {"S": before.id}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == _REFUSED:
                return False
            raise
        return True

    def _by_key(self, caller: str, key: str) -> Operation | None:
        found = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": _KEYS}, "sk": {"S": f"{caller}#{key}"}},
            ConsistentRead=True,
        )
        item = found.get("Item")
        return None if item is None else self.get(item["operation_id"]["S"])


def _cancelled_at(error: ClientError, position: int) -> bool:
    """Whether the transaction's item at `position` failed its condition."""
    reasons = error.response.get("CancellationReasons", [])
    return position < len(reasons) and reasons[position].get("Code") == "ConditionalCheckFailed"


def _key_item(caller: str, key: str, operation_id: str) -> dict[str, Any]:
    return {
        "pk": {"S": _KEYS},
        "sk": {"S": f"{caller}#{key}"},
        "operation_id": {"S": operation_id},
    }


def _to_item(operation: Operation) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": {"S": _OPERATIONS},
        "sk": {"S": operation.id},
        "action": {"S": operation.action.value},
        "filter": {"S": json.dumps(operation.filter.to_dict(), sort_keys=True)},
        "reason": {"S": operation.reason},
        "created_by": {"S": operation.created_by},
        "created_at": {"S": _iso(operation.created_at)},
        "updated_at": {"S": _iso(operation.updated_at)},
        "matched": {"N": str(operation.matched)},
        "status": {"S": operation.status.value},
        "processed": {"N": str(operation.progress.processed)},
        "changed": {"N": str(operation.progress.changed)},
        "skipped": {"N": str(operation.progress.skipped)},
        "errors": {"N": str(operation.progress.errors)},
        "request_hash": {"S": operation.request_hash},
    }
    if operation.tenant is not None:
        item["tenant"] = {"S": operation.tenant}
    if operation.cursor is not None:
        item["cursor"] = {"S": operation.cursor}
    if operation.files is not None:
        item["files"] = {"S": json.dumps(operation.files.to_dict(), sort_keys=True)}
    if operation.schedule_id is not None:
        item["schedule_id"] = {"S": operation.schedule_id}
    if operation.removed:
        item["removed"] = {"S": json.dumps(operation.removed)}
    return item


def _from_item(item: dict[str, Any]) -> Operation:
    def text(name: str) -> str | None:
        value = item.get(name)
        return None if value is None else str(value["S"])

    def number(name: str) -> int:
        value = item.get(name)
        return 0 if value is None else int(value["N"])

    return Operation(
        id=item["sk"]["S"],
        action=Action(item["action"]["S"]),
        filter=filter_from_dict(json.loads(item["filter"]["S"])),
        reason=item["reason"]["S"],
        created_by=item["created_by"]["S"],
        created_at=_parse(item["created_at"]["S"]),
        updated_at=_parse(item["updated_at"]["S"]),
        matched=number("matched"),
        status=OperationStatus(item["status"]["S"]),
        progress=Progress(
            number("processed"), number("changed"), number("skipped"), number("errors")
        ),
        cursor=text("cursor"),
        finished_at=None if (done := text("finished_at")) is None else _parse(done),
        error=text("error"),
        request_hash=text("request_hash") or "",
        files=_files(text("files")),
        schedule_id=text("schedule_id"),
        removed={str(k): int(v) for k, v in json.loads(text("removed") or "{}").items()},
    )


def _files(stored: str | None) -> FileSelection | None:
    return None if stored is None else FileSelection.from_dict(json.loads(stored))


def filter_from_dict(raw: dict[str, Any]) -> JobFilter:
    """A filter as to_dict() wrote it."""

    def moment(name: str) -> datetime | None:
        value = raw.get(name)
        return None if value is None else _parse(value)

    return JobFilter(
        tenant=raw.get("tenant"),
        job_type=None if raw.get("job_type") is None else JobType(raw["job_type"]),
        status=None if raw.get("status") is None else JobStatus(raw["status"]),
        group=raw.get("group"),
        error=raw.get("error"),
        since=moment("since"),
        until=moment("until"),
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)
