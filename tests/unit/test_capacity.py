"""DynamoDB request units, sized from items by AWS's published rules (the local meter's model)."""

from __future__ import annotations

from typing import Any

import pytest

from filejobs_dev.local.capacity import (
    Index,
    TableShape,
    index_write_units,
    item_size,
    number_size,
    read_units,
    value_size,
    write_units,
)

JOBS = TableShape(
    "jobs",
    keys=("id",),
    indexes=(
        Index("by_status", keys=("status_shard", "order"), projection="INCLUDE",
              included=("status",)),
        Index("by_sweep", keys=("sweep_shard", "sweep_at"), projection="ALL"),
        Index("by_file", keys=("file_id",), projection="KEYS_ONLY"),
    ),
)  # fmt: skip


def s(text: str) -> dict[str, Any]:
    return {"S": text}


def job(**attributes: str) -> dict[str, Any]:
    return {"id": s("j1"), **{name: s(value) for name, value in attributes.items()}}


def test_an_items_size_counts_its_names_and_values() -> None:
    # The developer guide's rule: names and values, strings in UTF-8 bytes
    assert item_size({"shirtColor": s("R")}) == len("shirtColor") + 1
    assert item_size({"é": s("ü")}) == 2 + 2
    assert item_size(None) == 0


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"B": b"\x00\x01\x02"}, 3),
        ({"SS": ["ab", "c"]}, 3),
        ({"L": [{"S": "ab"}, {"N": "1"}]}, 3 + (2 + 1) + (2 + 1)),
        ({"M": {"k": {"S": "v"}}}, 3 + (1 + 1 + 1)),
        ({"L": []}, 3),
    ],
)
def test_each_kind_of_value_has_its_size(value: dict[str, Any], size: int) -> None:
    assert value_size(value) == size


def test_a_number_counts_about_half_its_significant_digits_plus_one() -> None:
    assert number_size("7") == 2
    assert number_size("1234") == 3
    assert number_size("0001200") == 2  # leading and trailing zeros are not significant
    assert number_size("-3.14159") == 4  # six significant digits


def test_a_write_costs_a_unit_per_started_kilobyte_of_the_larger_image() -> None:
    small, large = job(note="x"), job(note="x" * 1500)
    assert write_units(None, small) == 1
    assert write_units(small, large) == 2
    assert write_units(large, small) == 2  # shrinking an item is paid at its old size
    assert write_units(small, small, transactional=True) == 2


def test_a_read_costs_half_a_unit_per_4_kb_when_eventually_consistent() -> None:
    item = job(note="x" * 5000)
    assert read_units([item], consistent=True) == 2
    assert read_units([item], consistent=False) == 1
    assert read_units([None], consistent=False) == 0.5  # a miss is still read
    assert read_units([job(), job(), job()], consistent=False) == 0.5  # a query's page together
    assert read_units([item], consistent=True, transactional=True) == 4


def test_an_index_entry_put_deleted_moved_or_updated_costs_accordingly() -> None:
    pending = job(status="pending", status_shard="pending#3", order="1", sweep_shard="7",
                  sweep_at="10:00", file_id="f")  # fmt: skip
    running = {**pending, "status": s("running"), "status_shard": s("running#3"),
               "sweep_at": s("10:05")}  # fmt: skip
    done = {k: v for k, v in running.items() if k != "sweep_at"} | {"status": s("done"),
            "status_shard": s("done#3")}  # fmt: skip

    # created: an entry put in each index whose keys it has
    assert index_write_units(JOBS, None, pending) == 3
    # claimed: status and sweep keys move (a delete and a put each); by_file is untouched
    assert index_write_units(JOBS, pending, running) == 4
    # completed: the status key moves, the sweep entry is deleted (sweep_at removed)
    assert index_write_units(JOBS, running, done) == 3
    # a change no index projects costs the indexes nothing
    assert index_write_units(JOBS, done, {**done, "note": s("x")}) == 0


def test_a_projected_attribute_changing_updates_the_entry_in_place() -> None:
    before = job(status="a", status_shard="p", order="1")
    after = {**before, "status": s("b")}
    assert index_write_units(JOBS, before, after) == 1


def test_a_table_shape_comes_from_describe_table() -> None:
    described = {
        "TableName": "t",
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "i",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]},
            }
        ],
    }
    shape = TableShape.from_description(described)
    assert shape.keys == ("id",)
    assert shape.indexes == (Index("i", ("g",), "INCLUDE", ("x",)),)
    entry = shape.entry({"id": s("1"), "g": s("2"), "x": s("3"), "y": s("4")}, shape.indexes[0])
    assert entry == {"id": s("1"), "g": s("2"), "x": s("3")}
