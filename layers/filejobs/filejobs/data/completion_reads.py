"""A file and some of its jobs in one request, for the completion check
(services/file_completion.py): one BatchGetItem across FilesTable and JobsTable, every key read
strongly consistently, instead of a GetItem of the file and then a BatchGetItem of its jobs.

Items are read as the tables' streams carry them (data/stream.py), with the plain client: PynamoDB
batches one model, one table, a request. Keys DynamoDB leaves unprocessed (throttling, 16 MB) are
asked again after a short wait; a key that names no item is simply absent from the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from filejobs.data.stream import file_from_image, job_from_image
from filejobs.domain.file import StoredFile
from filejobs.domain.job import ProcessingJob

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# BatchGetItem takes at most 100 keys a request: the file and 99 jobs.
KEYS_PER_REQUEST = 100
_UNPROCESSED_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


class UnprocessedKeysError(RuntimeError):
    """DynamoDB kept leaving keys unprocessed: the check fails, and its record is retried."""


class FileAndJobsReader:
    def __init__(
        self,
        client: DynamoDBClient,
        *,
        files_table: str,
        jobs_table: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client, self._sleep = client, sleep
        self._files_table, self._jobs_table = files_table, jobs_table

    def file_and_jobs(
        self, file_id: str, job_ids: Iterable[str]
    ) -> tuple[StoredFile | None, list[ProcessingJob]]:
        """The file and those of `job_ids` that are stored (in no order), read consistently: one
        request for up to 99 jobs, one more per 100 beyond."""
        ids = sorted(set(job_ids))
        first, rest = ids[: KEYS_PER_REQUEST - 1], ids[KEYS_PER_REQUEST - 1 :]
        found = self._batch(
            {
                self._files_table: [file_id],
                **({self._jobs_table: first} if first else {}),
            }
        )
        for start in range(0, len(rest), KEYS_PER_REQUEST):
            found += self._batch({self._jobs_table: rest[start : start + KEYS_PER_REQUEST]})
        files = [file_from_image(item) for table, item in found if table == self._files_table]
        jobs = [job_from_image(item) for table, item in found if table == self._jobs_table]
        return (files[0] if files else None), jobs

    def _batch(self, keys: dict[str, list[str]]) -> list[tuple[str, dict[str, Any]]]:
        request: dict[str, Any] = {
            table: {"Keys": [{"id": {"S": key}} for key in ids], "ConsistentRead": True}
            for table, ids in keys.items()
        }
        found: list[tuple[str, dict[str, Any]]] = []
        for wait in (*_UNPROCESSED_WAITS, None):
            answer = self._client.batch_get_item(RequestItems=request)
            for table, items in answer.get("Responses", {}).items():
                found += [(table, item) for item in items]
            request = dict(answer.get("UnprocessedKeys") or {})
            if not request:
                return found
            if wait is None:
                break
            self._sleep(wait)
        raise UnprocessedKeysError(f"keys left unprocessed: {sorted(request)}")
