"""DynamoDB request units, sized from the items themselves by AWS's published rules.

moto answers `ReturnConsumedCapacity` with fixed figures (0.5 or 1 whatever the item), so the
local stack's meter (`metering.py`) sizes each request itself from the items before and after
it, with these rules (DynamoDB developer guide, "Item sizes and formats", "Read/write capacity
mode", "Global secondary indexes: provisioned throughput considerations"):

- an item's size is the sum of its attribute names' and values' sizes: a string its UTF-8
  bytes, a number about half its significant digits plus one, binary its bytes, a boolean or
  null 1, a list or map 3 plus its elements plus 1 per element, a set its elements;
- a write costs 1 write unit per started KB of the larger of the item before and after it
  (at least 1, also when its condition fails); a transactional write twice that;
- a read costs 1 read unit per started 4 KB (a strongly consistent read; half for an eventually
  consistent one, twice for a transactional one); a query or scan sizes all the items it
  evaluated together, before any filter, so a small page costs half a unit;
- each global secondary index a write touches costs its own write units: putting an index entry
  (the item gained the index's keys), deleting one (it lost them), both (a key changed value),
  or updating one (a projected attribute changed). An index entry's size is its projected
  attributes plus 100 bytes. A transaction's changes reach its indexes afterwards, as ordinary
  writes: only the table's share is doubled.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

Item = Mapping[str, Any]  # DynamoDB's wire form: {"name": {"S": "value"}, ...}

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
INDEX_ENTRY_OVERHEAD = 100


@dataclass(frozen=True)
class Index:
    """A global secondary index: its key attributes and what it projects."""

    name: str
    keys: tuple[str, ...]
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    included: tuple[str, ...] = ()

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> Index:
        projection = description.get("Projection", {})
        return cls(
            name=description["IndexName"],
            keys=tuple(key["AttributeName"] for key in description["KeySchema"]),
            projection=projection.get("ProjectionType", "ALL"),
            included=tuple(projection.get("NonKeyAttributes", ())),
        )


@dataclass(frozen=True)
class TableShape:
    """What sizing a write needs to know of its table: its key and its indexes."""

    name: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()

    @classmethod
    def from_description(cls, table: Mapping[str, Any]) -> TableShape:
        return cls(
            name=table["TableName"],
            keys=tuple(key["AttributeName"] for key in table["KeySchema"]),
            indexes=tuple(
                Index.from_description(index) for index in table.get("GlobalSecondaryIndexes", ())
            ),
        )

    def entry(self, item: Item | None, index: Index) -> dict[str, Any] | None:
        """The item's entry in the index, or None when the item has not all its keys."""
        if item is None or any(key not in item for key in index.keys):
            return None
        if index.projection == "ALL":
            return dict(item)
        wanted = {*self.keys, *index.keys}
        if index.projection == "INCLUDE":
            wanted.update(index.included)
        return {name: value for name, value in item.items() if name in wanted}


@dataclass(frozen=True)
class WriteUnits:
    table: float
    indexes: float

    @property
    def total(self) -> float:
        return self.table + self.indexes


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes a DynamoDB attribute value counts for (wire form: {"S": ...}, {"N": ...}, ...)."""
    ((kind, content),) = value.items()
    try:
        return _SIZERS[kind](content)
    except KeyError:
        raise ValueError(f"not a DynamoDB attribute value type: {kind}") from None


def _map_size(content: Mapping[str, Any]) -> int:
    return 3 + sum(len(name.encode()) + value_size(v) + 1 for name, v in content.items())


_SIZERS: dict[str, Callable[[Any], int]] = {
    "S": lambda text: len(str(text).encode()),
    "N": lambda text: number_size(str(text)),
    "B": lambda data: len(_binary(data)),
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
    "SS": lambda members: sum(len(str(m).encode()) for m in members),
    "NS": lambda members: sum(number_size(str(m)) for m in members),
    "BS": lambda members: sum(len(_binary(m)) for m in members),
    "L": lambda members: 3 + sum(value_size(m) + 1 for m in members),
    "M": _map_size,
}


def number_size(text: str) -> int:
    """About half the significant digits, plus one byte (leading and trailing zeros are not
    significant)."""
    try:
        digits = Decimal(text).normalize().as_tuple().digits
    except InvalidOperation:
        return len(text)
    significant = len(digits) if any(digits) else 1
    return math.ceil(significant / 2) + 1


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(before: Item | None, after: Item | None, *, transactional: bool = False) -> float:
    """Units of one write of the table's item: the larger of before and after, per started KB."""
    size = max(item_size(before), item_size(after))
    units = max(1, math.ceil(size / WRITE_UNIT_BYTES))
    return float(units * (2 if transactional else 1))


def index_write_units(shape: TableShape, before: Item | None, after: Item | None) -> float:
    """Units the write costs in the table's indexes, from the item before and after it."""
    total = 0
    for index in shape.indexes:
        old, new = shape.entry(before, index), shape.entry(after, index)
        if old == new:
            continue
        if old is None or new is None:
            total += _entry_units(new if old is None else old)
        elif any(old[key] != new[key] for key in index.keys):
            total += _entry_units(old) + _entry_units(new)  # moved: a delete and a put
        else:
            total += max(_entry_units(old), _entry_units(new))
    return float(total)


def read_units(
    items: Iterable[Item | None], *, consistent: bool, transactional: bool = False
) -> float:
    """Units of one read evaluating `items` together (a GetItem: one item, None if absent)."""
    size = sum(item_size(item) for item in items)
    started = max(1, math.ceil(size / READ_UNIT_BYTES))
    factor = 2.0 if transactional else 1.0 if consistent else 0.5
    return started * factor


def _entry_units(entry: Item | None) -> int:
    size = item_size(entry) + INDEX_ENTRY_OVERHEAD
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def _binary(content: bytes | str) -> bytes:
    if isinstance(content, bytes):
        return content
    return base64.b64decode(content)
