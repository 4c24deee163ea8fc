"""The local stack's stream event sources gather records for MaximumBatchingWindowInSeconds as
Lambda does, when asked (`filejobs dev --stream-batching-windows`; the cost bench asks): a
batch goes when it is full, or when its first record has waited the window."""

from __future__ import annotations

from typing import Any

from filejobs_dev.local.host import BatchGathering


def records(*numbers: int) -> list[dict[str, Any]]:
    return [{"n": n} for n in numbers]


def numbers(batches: list[list[dict[str, Any]]]) -> list[list[int]]:
    return [[record["n"] for record in batch] for batch in batches]


def test_records_are_held_until_the_first_has_waited_the_window() -> None:
    gathering = BatchGathering(batch_size=100, window_seconds=30)
    assert gathering.due("shard", records(1, 2), now=0.0) == []
    assert gathering.due("shard", records(3), now=29.0) == []
    assert numbers(gathering.due("shard", [], now=30.0)) == [[1, 2, 3]]
    assert gathering.due("shard", [], now=31.0) == []  # nothing held any more


def test_a_full_batch_goes_at_once_and_the_rest_waits_its_own_window() -> None:
    gathering = BatchGathering(batch_size=2, window_seconds=30)
    assert numbers(gathering.due("shard", records(1, 2, 3), now=10.0)) == [[1, 2]]
    assert gathering.due("shard", [], now=39.0) == []
    assert numbers(gathering.due("shard", [], now=40.0)) == [[3]]


def test_without_a_window_every_record_goes_at_once_and_shards_are_apart() -> None:
    gathering = BatchGathering(batch_size=2, window_seconds=0)
    assert numbers(gathering.due("a", records(1, 2, 3), now=0.0)) == [[1, 2], [3]]
    waiting = BatchGathering(batch_size=10, window_seconds=5)
    waiting.due("a", records(1), now=0.0)
    assert waiting.due("b", records(2), now=5.0) == []  # b's first record has not waited
    assert numbers(waiting.due("a", [], now=5.0)) == [[1]]
    assert numbers([waiting.rest("b")]) == [[2]]  # a shard that ended hands over what it held
