"""Erasures' audit records (domain/file_lifecycle.py `Erasure`) in OpsTable.

Items: `pk="erasures#<tenant>"`, `sk="<erased at, ISO 8601>#<first file id>"`: one Query reads a
tenant's erasures oldest first. The record holds ids, counts, who and when: nothing that was in
the file (its key, name, hash or metadata), so it may be kept as long as the audit needs.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from filejobs.domain.file_lifecycle import Erasure

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ErasureRepository:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client, self._table = client, table

    def record(self, erasure: Erasure) -> None:
        first = erasure.file_ids[0] if erasure.file_ids else "-"
        self._client.put_item(
            TableName=self._table,
            Item={
                "pk": {"S": f"erasures#{erasure.tenant}"},
                "sk": {"S": f"{erasure.erased_at.isoformat()}#{first}"},
                "record": {"S": json.dumps(erasure.to_dict(), sort_keys=True)},
            },
        )

    def of_tenant(self, tenant: str) -> list[Erasure]:
        """The tenant's erasures, oldest first."""
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"erasures#{tenant}"}},
            ConsistentRead=True,
        )
        return [_erasure(item) for page in pages for item in page.get("Items", [])]


def _erasure(item: dict[str, Any]) -> Erasure:
    raw = json.loads(item["record"]["S"])
    return Erasure(
        tenant=raw["tenant"],
        file_ids=tuple(raw["file_ids"]),
        erased_at=datetime.fromisoformat(raw["erased_at"]),
        erased_by=raw["erased_by"],
        versions_deleted=raw["versions_deleted"],
        outputs_deleted=raw["outputs_deleted"],
        jobs_erased=raw["jobs_erased"],
        operation_id=raw.get("operation_id"),
        quarantined_copies_deleted=raw.get("quarantined_copies_deleted", 0),
    )
