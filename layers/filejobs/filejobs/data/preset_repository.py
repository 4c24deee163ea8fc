"""Upload presets (domain/presets.py) in OpsTable, through the plain DynamoDB client.

Items:
- `pk="presets"`, `sk=<tenant>`: the tenant's current presets, one JSON document and a
  `revision`. Ingest reads this one item (and caches it, services/presets.py); every change
  rewrites it conditioned on the revision it read, so concurrent changes cannot both win.
- `pk="preset-versions#<tenant>"`, `sk=<name>#<version, 6 digits>`: every version ever saved,
  written once (never overwritten) in the same transaction as the change that made it, so a file
  that records "avatars v3" can always be shown what v3 was.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.domain.presets import Preset, PresetSet, preset_from_dict, preset_to_dict

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_CURRENT = "presets"
_REFUSED = ("TransactionCanceledException", "ConditionalCheckFailedException")


class PresetRepository:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client, self._table = client, table

    def current(self, tenant: str, *, consistent: bool = False) -> PresetSet:
        found = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": _CURRENT}, "sk": {"S": tenant}},
            ConsistentRead=consistent,
        ).get("Item")
        if found is None:
            return PresetSet()
        presets = tuple(preset_from_dict(data) for data in json.loads(found["presets"]["S"]))
        return PresetSet(presets, int(found["revision"]["N"]))

    def save(
        self, tenant: str, presets: tuple[Preset, ...], saved: Preset | None, *, after: int
    ) -> bool:
        """The tenant's presets replaced by `presets` (revision `after + 1`) and, for a put,
        the new version recorded; False (nothing written) when the revision is no longer
        `after` or the version exists."""
        writes: list[dict[str, Any]] = [{"Put": self._current_item(tenant, presets, after)}]
        if saved is not None:
            writes.append({"Put": self._version_item(saved)})
        try:
            self._client.transact_write_items(TransactItems=writes)  # type: ignore[arg-type]
        except ClientError as error:
            if error.response["Error"]["Code"] not in _REFUSED:
                raise
            return False
        return True

    def version(self, tenant: str, name: str, version: int) -> Preset | None:
        found = self._client.get_item(
            TableName=self._table, Key=_version_key(tenant, name, version)
        ).get("Item")
        return None if found is None else preset_from_dict(json.loads(found["preset"]["S"]))

    def latest_version(self, tenant: str, name: str) -> int:
        """The last version the tenant's preset of this name had (0: never saved), so a preset
        removed and made again goes on from it rather than reusing its numbers."""
        found = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :name)",
            ExpressionAttributeValues={
                ":pk": {"S": f"preset-versions#{tenant}"},
                ":name": {"S": f"{name}#"},
            },
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        ).get("Items", [])
        return int(found[0]["sk"]["S"].rpartition("#")[2]) if found else 0

    def erase_tenant(self, tenant: str) -> tuple[int, int]:
        """A tenant's erasure (services/tenant_erasure.py): its current presets and every version
        ever saved, deleted; (presets current, versions) there were."""
        current = len(self.current(tenant, consistent=True).presets)
        self._client.delete_item(TableName=self._table, Key=_current_key(tenant))
        versions = 0
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"preset-versions#{tenant}"}},
            ProjectionExpression="pk, sk",
            ConsistentRead=True,
        )
        for page in pages:
            for item in page.get("Items", []):
                self._client.delete_item(
                    TableName=self._table, Key={"pk": item["pk"], "sk": item["sk"]}
                )
                versions += 1
        return current, versions

    def _current_item(self, tenant: str, presets: tuple[Preset, ...], after: int) -> dict[str, Any]:
        document = json.dumps([preset_to_dict(preset) for preset in presets])
        condition = "attribute_not_exists(pk)" if after == 0 else "revision = :after"
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": {
                "pk": {"S": _CURRENT},
                "sk": {"S": tenant},
                "tenant": {"S": tenant},
                "presets": {"S": document},
                "revision": {"N": str(after + 1)},
            },
            "ConditionExpression": condition,
        }
        if after:
            put["ExpressionAttributeValues"] = {":after": {"N": str(after)}}
        return put

    def _version_item(self, preset: Preset) -> dict[str, Any]:
        key = _version_key(preset.tenant, preset.name, preset.version)
        return {
            "TableName": self._table,
            "Item": {**key, "preset": {"S": json.dumps(preset_to_dict(preset))}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }


def _current_key(tenant: str) -> dict[str, Any]:
    return {"pk": {"S": _CURRENT}, "sk": {"S": tenant}}


def _version_key(tenant: str, name: str, version: int) -> dict[str, Any]:
    return {"pk": {"S": f"preset-versions#{tenant}"}, "sk": {"S": f"{name}#{version:06d}"}}
