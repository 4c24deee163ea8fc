"""The tenants' upload limits and daily usage, as items of FilesTable (docs/TABLE_DESIGN.md).

- `quota#{tenant}`: the limits an operator set for the tenant (QuotaModel), an attribute per
  limit set; changed by one UpdateItem (SET the given ones, REMOVE the reset ones).
- `usage#{tenant}#{YYYY-MM-DD}`: files and bytes the tenant's accepted uploads of that UTC day
  add up to (UsageModel). Only the ingest's transaction writes it (FileRepository.record_ingest,
  `usage_update`): one ADD conditional on the new totals staying within the limits, so two
  uploads racing for the last unit of a quota cannot both pass. Kept `USAGE_RETENTION` after its
  day, then expired by TTL. Its `rescans` are counted the same way by the transaction that adds a
  rescan job (FileRepository.add_job, `rescan_updates`), its `operations` by the one that records
  a bulk operation (OperationRepository.create, `operation_update`).
- `usage#{tenant}#{YYYY-MM-DD}#file#{file id}`: one file's rescans of that day, counted in the
  same transaction, kept `FILE_USAGE_RETENTION` (its limit is per day: nothing reads it after).

Neither id can collide with a file's (a UUID) or a content index item's (`sha256#...`), and
neither carries an index key, so no index of the table holds them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from pynamodb.attributes import NumberAttribute
from pynamodb.exceptions import DeleteError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from filejobs.data.models import QuotaModel, UsageModel
from filejobs.domain.quotas import (
    QUOTA_FIELDS,
    DayUsage,
    OperationCharge,
    QuotaChange,
    QuotaOverrides,
    RescanCharge,
    UsageCharge,
)
from filejobs.domain.time import epoch_seconds

USAGE_RETENTION = timedelta(days=35)
FILE_USAGE_RETENTION = timedelta(days=2)


def quota_id(tenant: str) -> str:
    return f"quota#{tenant}"


def usage_id(tenant: str, day: date) -> str:
    return f"usage#{tenant}#{day.isoformat()}"


def file_usage_id(tenant: str, day: date, file_id: str) -> str:
    return f"{usage_id(tenant, day)}#file#{file_id}"


class QuotaRepository:
    def overrides(self, tenant: str) -> QuotaOverrides:
        try:
            model = QuotaModel.get(quota_id(tenant), consistent_read=True)
        except QuotaModel.DoesNotExist:
            return QuotaOverrides()
        return _overrides_from(model)

    def change(self, tenant: str, change: QuotaChange, *, at: datetime, by: str) -> QuotaOverrides:
        """One UpdateItem: SET the limits given, REMOVE the ones reset (the item is made by the
        first change, and kept when every limit is reset: it records who did it)."""
        model = QuotaModel(quota_id(tenant))
        actions: list[Action] = [
            QuotaModel.tenant.set(tenant),
            QuotaModel.updated_at.set(at),
            QuotaModel.updated_by.set(by),
        ]
        for name, value in sorted(change.set.items()):
            actions.append(_quota_attribute(name).set(value))
        for name in sorted(change.reset):
            actions.append(_quota_attribute(name).remove())
        model.update(actions=actions)
        return _overrides_from(model)

    def usage(self, tenant: str, day: date) -> DayUsage:
        try:
            model = UsageModel.get(usage_id(tenant, day), consistent_read=True)
        except UsageModel.DoesNotExist:
            return DayUsage(tenant, day)
        return usage_from(model, tenant, day)

    def erase_tenant(self, tenant: str, today: date) -> tuple[int, int]:
        """A tenant's erasure (services/tenant_erasure.py): its overrides and the usage counters
        of every day still kept (older ones TTL removed), deleted; (overrides, days) there were."""
        overrides = _deleted(QuotaModel(quota_id(tenant)))
        days = (today - timedelta(days=n) for n in range(USAGE_RETENTION.days + 1))
        return overrides, sum(_deleted(UsageModel(usage_id(tenant, day))) for day in days)


def _deleted(model: QuotaModel | UsageModel) -> int:
    """1 when the item was there to delete, else 0."""
    try:
        model.delete(condition=type(model).id.exists())
    except DeleteError as error:
        if error.cause_response_code != "ConditionalCheckFailedException":
            raise
        return 0
    return 1


def usage_update(charge: UsageCharge) -> tuple[UsageModel, list[Action], Condition | None]:
    """The conditional ADD that counts one upload: the item, its actions and its condition
    (None when neither daily limit is set). The caller has checked that the charge alone fits
    an empty day, so an item not made yet always takes it."""
    item = UsageModel(usage_id(charge.tenant, charge.day))
    expires = datetime.combine(charge.day, time(), tzinfo=UTC) + USAGE_RETENTION
    actions: list[Action] = [
        UsageModel.tenant.set(charge.tenant),
        UsageModel.day.set(charge.day.isoformat()),
        UsageModel.files.add(charge.files),
        UsageModel.bytes.add(charge.bytes),
        UsageModel.expires_at.set(epoch_seconds(expires)),
    ]
    condition: Condition | None = None
    if charge.max_files is not None:
        condition = _within(UsageModel.files, charge.max_files - charge.files)
    if charge.max_bytes is not None:
        within = _within(UsageModel.bytes, charge.max_bytes - charge.bytes)
        condition = within if condition is None else condition & within
    return item, actions, condition


type CountedUpdate = tuple[UsageModel, list[Action], Condition | None]


def rescan_updates(charge: RescanCharge) -> tuple[CountedUpdate, CountedUpdate]:
    """The two conditional ADDs that count one rescan, for the transaction that adds its job:
    the tenant's day (its `rescans` within `max_per_day`), then the file's day (within
    `max_per_file`); a condition is None where the limit is unlimited."""
    tenant_day = _counted(
        UsageModel(usage_id(charge.tenant, charge.day)),
        charge,
        charge.max_per_day,
        USAGE_RETENTION,
    )
    file_day = _counted(
        UsageModel(file_usage_id(charge.tenant, charge.day, charge.file_id)),
        charge,
        charge.max_per_file,
        FILE_USAGE_RETENTION,
    )
    return tenant_day, file_day


def _counted(
    item: UsageModel, charge: RescanCharge, limit: int | None, kept: timedelta
) -> CountedUpdate:
    actions: list[Action] = [
        UsageModel.tenant.set(charge.tenant),
        UsageModel.day.set(charge.day.isoformat()),
        UsageModel.rescans.add(1),
        UsageModel.expires_at.set(_expiry(charge.day, kept)),
    ]
    condition = None if limit is None else _within(UsageModel.rescans, limit - 1)
    return item, actions, condition


def operation_update(charge: OperationCharge, table: str) -> dict[str, Any]:
    """The conditional ADD that counts one bulk operation, as a TransactWriteItems `Update` for
    the plain client (OperationRepository writes OpsTable so): 1 more of the tenant's day's
    `operations`, only while they stay within `max_per_day`."""
    update: dict[str, Any] = {
        "TableName": table,
        "Key": {"id": {"S": usage_id(charge.tenant, charge.day)}},
        "UpdateExpression": "SET tenant = :tenant, #day = :day, expires_at = :expires "
        "ADD operations :one",
        "ExpressionAttributeNames": {"#day": "day"},
        "ExpressionAttributeValues": {
            ":tenant": {"S": charge.tenant},
            ":day": {"S": charge.day.isoformat()},
            ":expires": {"N": str(_expiry(charge.day, USAGE_RETENTION))},
            ":one": {"N": "1"},
        },
    }
    if charge.max_per_day is not None:
        update["ConditionExpression"] = "attribute_not_exists(operations) OR operations < :most"
        update["ExpressionAttributeValues"][":most"] = {"N": str(charge.max_per_day)}
    return update


def _expiry(day: date, kept: timedelta) -> int:
    return epoch_seconds(datetime.combine(day, time(), tzinfo=UTC) + kept)


def _within(counter: NumberAttribute, most_before: int) -> Condition:
    """The counter is at most `most_before` before the ADD (or not there yet: 0)."""
    within: Condition = counter.does_not_exist() | (counter <= most_before)
    return within


def usage_from(model: UsageModel, tenant: str, day: date) -> DayUsage:
    return DayUsage(
        tenant,
        day,
        files=int(model.files or 0),
        bytes=int(model.bytes or 0),
        rescans=int(model.rescans or 0),
        operations=int(model.operations or 0),
    )


def _quota_attribute(name: str) -> NumberAttribute:
    if name not in QUOTA_FIELDS:
        raise ValueError(f"unknown quota field {name!r}")
    attribute: NumberAttribute = getattr(QuotaModel, name)
    return attribute


def _overrides_from(model: QuotaModel) -> QuotaOverrides:
    limits = {name: getattr(model, name) for name in QUOTA_FIELDS}
    return QuotaOverrides(
        **{name: None if value is None else int(value) for name, value in limits.items()},
        updated_at=model.updated_at,
        updated_by=model.updated_by,
    )
