"""The tenants' running slots (domain/fairness.py) in TenantSlotsTable.

One item per tenant and job type, key `slots` = `{tenant}#{job_type}`, holding a map `holders`
of job id -> the epoch second its slot lapses. Taking a slot is one UpdateItem that sets the
job's entry on the condition that the map has fewer than `cap` entries, or holds the job
already: DynamoDB checks and writes atomically, so two workers racing for the last slot cannot
both win. Lapsed entries (their invocation has surely ended) count against the cap until they
are cleared: a refused take reads the item and removes them, each on the condition that it is
unchanged (a slot taken again by its job meanwhile stays), then tries once more. Giving a slot
back removes the job's entry.

The first take of a pair creates the item with a conditional put (`holders` must exist before
an entry can be set in it). `expires_at` (TTL) lets DynamoDB drop the items of pairs idle for a
day. A take and a give-back are one write unit each while the map stays under 1 KB (about 15
holders); DynamoDB serves about 1,000 writes a second on one item, the ceiling of one tenant's
starts per job type.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.domain.fairness import TenantCap, lapsed
from filejobs.domain.job import JobType
from filejobs.domain.time import epoch_seconds

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# An idle pair's item outlives its last slot by this long, then DynamoDB's TTL removes it.
IDLE_ITEM_KEPT = timedelta(days=1)
_REFUSED = "ConditionalCheckFailedException"


def slots_key(tenant: str, job_type: JobType) -> str:
    return f"{tenant}#{job_type.value}"


class DynamoTenantSlots:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client, self._table = client, table

    def take(
        self, tenant: str, job_type: JobType, job_id: str, *, cap: int, until: datetime,
        now: datetime,
    ) -> bool:  # fmt: skip
        key = slots_key(tenant, job_type)
        if self._set_if_room(key, job_id, cap, until):
            return True
        holders = self._holders(key)
        if holders is None:
            return self._create(key, job_id, until) or self._set_if_room(key, job_id, cap, until)
        stale = lapsed(holders, now)
        if not stale or not TenantCap(cap).has_room(_without(holders, stale), job_id, now):
            return False
        self._clear(key, stale)
        return self._set_if_room(key, job_id, cap, until)

    def give_back(self, tenant: str, job_type: JobType, job_id: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"slots": {"S": slots_key(tenant, job_type)}},
                UpdateExpression="REMOVE holders.#job",
                # Never makes an item: a slot cleared as lapsed is simply gone already.
                ConditionExpression="attribute_exists(holders.#job)",
                ExpressionAttributeNames={"#job": job_id},
            )
        except ClientError as error:
            if _code(error) != _REFUSED:
                raise

    def _set_if_room(self, key: str, job_id: str, cap: int, until: datetime) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"slots": {"S": key}},
                UpdateExpression="SET holders.#job = :until, expires_at = :expires",
                # attribute_exists first: the item may not exist yet (and moto, unlike
                # DynamoDB, errs on size() of a missing attribute rather than failing the check).
                ConditionExpression=(
                    "attribute_exists(holders)"
                    " AND (size(holders) < :cap OR attribute_exists(holders.#job))"
                ),
                ExpressionAttributeNames={"#job": job_id},
                ExpressionAttributeValues={
                    ":until": {"N": str(epoch_seconds(until))},
                    ":expires": {"N": str(epoch_seconds(until + IDLE_ITEM_KEPT))},
                    ":cap": {"N": str(cap)},
                },
            )
        except ClientError as error:
            if _code(error) == _REFUSED:
                return False
            raise
        return True

    def _create(self, key: str, job_id: str, until: datetime) -> bool:
        """The pair's first slot, in a new item; False when another worker made it first."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "slots": {"S": key},
                    "holders": {"M": {job_id: {"N": str(epoch_seconds(until))}}},
                    "expires_at": {"N": str(epoch_seconds(until + IDLE_ITEM_KEPT))},
                },
                ConditionExpression="attribute_not_exists(slots)",
            )
        except ClientError as error:
            if _code(error) == _REFUSED:
                return False
            raise
        return True

    def _holders(self, key: str) -> dict[str, datetime] | None:
        item = self._client.get_item(
            TableName=self._table, Key={"slots": {"S": key}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        entries: Mapping[str, Any] = item.get("holders", {}).get("M", {})
        return {job: datetime.fromtimestamp(int(held["N"]), UTC) for job, held in entries.items()}

    def _clear(self, key: str, stale: Mapping[str, datetime]) -> None:
        """Removes the lapsed slots, each only if it is still as read."""
        names = {f"#s{n}": job for n, job in enumerate(stale)}
        values = {f":s{n}": {"N": str(epoch_seconds(stale[job]))} for n, job in enumerate(stale)}
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"slots": {"S": key}},
                UpdateExpression="REMOVE " + ", ".join(f"holders.{name}" for name in names),
                ConditionExpression=" AND ".join(
                    f"holders.#s{n} = :s{n}" for n in range(len(names))
                ),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if _code(error) != _REFUSED:
                raise  # refused: another worker cleared them, or one was taken again


def _without(holders: Mapping[str, datetime], gone: Mapping[str, datetime]) -> dict[str, datetime]:
    return {job: until for job, until in holders.items() if job not in gone}


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
