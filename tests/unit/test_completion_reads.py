"""Specification: the completion check's one request (data/completion_reads.py): the file and the
jobs asked in one BatchGetItem across both tables, consistent; keys left unprocessed asked again;
more jobs than a request holds in further requests."""

from __future__ import annotations

from typing import Any, cast

import pytest

from filejobs.data.completion_reads import FileAndJobsReader, UnprocessedKeysError


class Client:
    """Answers nothing found; leaves the keys of the first `unprocessed` requests unprocessed."""

    def __init__(self, unprocessed: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self._unprocessed = unprocessed

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        self.requests.append(RequestItems)
        if len(self.requests) <= self._unprocessed:
            return {"Responses": {}, "UnprocessedKeys": RequestItems}
        return {"Responses": {table: [] for table in RequestItems}, "UnprocessedKeys": {}}


def waited() -> list[float]:
    return []


def reader(client: Client, waits: list[float]) -> FileAndJobsReader:
    return FileAndJobsReader(
        cast(Any, client), files_table="files", jobs_table="jobs", sleep=waits.append
    )


def keys_of(request: dict[str, Any], table: str) -> list[str]:
    return [key["id"]["S"] for key in request[table]["Keys"]]


def test_the_file_and_its_jobs_are_one_consistent_request() -> None:
    client, waits = Client(), waited()
    assert reader(client, waits).file_and_jobs("f1", ["j2", "j1", "j1"]) == (None, [])
    (request,) = client.requests
    assert keys_of(request, "files") == ["f1"] and keys_of(request, "jobs") == ["j1", "j2"]
    assert request["files"]["ConsistentRead"] and request["jobs"]["ConsistentRead"]


def test_keys_left_unprocessed_are_asked_again_after_a_wait() -> None:
    client, waits = Client(unprocessed=2), waited()
    reader(client, waits).file_and_jobs("f1", ["j1"])
    assert len(client.requests) == 3 and client.requests[1] == client.requests[0]
    assert len(waits) == 2


def test_keys_never_processed_fail_the_check_for_its_record_to_be_retried() -> None:
    client, waits = Client(unprocessed=100), waited()
    with pytest.raises(UnprocessedKeysError):
        reader(client, waits).file_and_jobs("f1", ["j1"])


def test_more_jobs_than_a_request_holds_take_more_requests() -> None:
    client, waits = Client(), waited()
    reader(client, waits).file_and_jobs("f1", [f"j{n:03}" for n in range(150)])
    first, second = client.requests
    assert len(keys_of(first, "jobs")) == 99 and keys_of(first, "files") == ["f1"]
    assert len(keys_of(second, "jobs")) == 51 and "files" not in second
