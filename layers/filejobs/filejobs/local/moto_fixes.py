"""One fix to moto server's DynamoDB, applied by the local stack in the emulator's process.

moto's `transact_write_items` backs up each table a transaction touches with `copy.deepcopy`,
once per *item* of the transaction: an ingest writing a file and four jobs deep-copies the whole
jobs table four times. The cost grows with the table, so the local stack slowed down with every
upload (measured: most of the emulator's CPU in those copies after a few hundred files). The fix
makes the backup loop copy each table once per transaction; the copies it skips were identical
(the loop runs before the transaction changes anything), so the rollback is unchanged.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from typing import Any

_state = threading.local()


def _deepcopy_once(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """copy.deepcopy, answering repeated copies of one table within a transaction from a cache.

    Only tables are cached (items are copied afresh each time), and the cache holds the original
    too, so no id can be reused by another object while it is in the cache.
    """
    cache: dict[int, tuple[Any, Any]] | None = getattr(_state, "cache", None)
    if cache is None or memo is not None or type(value).__name__ != "Table":
        return copy.deepcopy(value, memo)
    if id(value) not in cache:
        cache[id(value)] = (value, copy.deepcopy(value))
    return cache[id(value)][1]


class _CopyModule:
    """Stands in for the `copy` module inside moto's DynamoDB models."""

    deepcopy = staticmethod(_deepcopy_once)
    copy = staticmethod(copy.copy)


def copy_each_table_once_per_transaction() -> None:
    from moto.dynamodb import models  # noqa: PLC0415 (moto is the local stack's alone)

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "_filejobs_fixed", False):
        return
    original: Callable[..., None] = backend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        _state.cache = {}
        try:
            original(self, transact_items)
        finally:
            _state.cache = None

    transact_write_items._filejobs_fixed = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    models.copy = _CopyModule  # type: ignore[attr-defined,assignment]
