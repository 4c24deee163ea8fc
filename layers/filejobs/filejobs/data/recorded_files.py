"""Which file ids the files table holds: BatchGetItem of their keys alone, for the reconciler."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# BatchGetItem takes at most 100 keys a request.
MAX_BATCH_KEYS = 100
# Keys DynamoDB left unprocessed (throttling) are asked again, after a growing pause.
UNPROCESSED_RETRIES = 5


class UnprocessedKeysError(RuntimeError):
    """DynamoDB kept leaving keys unread: the run fails, and the next one looks again."""


class DynamoRecordedFiles:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client, self._table = client, table

    def recorded(self, file_ids: Sequence[str]) -> set[str]:
        """Those of `file_ids` the table holds: one request per 100, only the key read back
        (eventually consistent: a file recorded a moment ago may be missed, and the ingest's
        idempotency makes its second announcement a no-op)."""
        found: set[str] = set()
        unique = list(dict.fromkeys(file_ids))
        for start in range(0, len(unique), MAX_BATCH_KEYS):
            batch = unique[start : start + MAX_BATCH_KEYS]
            found |= self._present(
                {"Keys": [{"id": {"S": i}} for i in batch], "ProjectionExpression": "id"}
            )
        return found

    def _present(self, request: Any) -> set[str]:
        found: set[str] = set()
        for attempt in range(UNPROCESSED_RETRIES + 1):
            answer = self._client.batch_get_item(RequestItems={self._table: request})
            found |= {item["id"]["S"] for item in answer.get("Responses", {}).get(self._table, [])}
            left = answer.get("UnprocessedKeys", {}).get(self._table)
            if not left or not left.get("Keys"):
                return found
            request = dict(left)
            time.sleep(min(2.0, 0.05 * 2**attempt))
        raise UnprocessedKeysError(f"{self._table}: keys still unprocessed after retries")
