"""Fixes to moto server, applied by the local stack in the emulator's process.

Each one was found by running the local stack under load, and each makes the emulator behave as
AWS does where the system depends on it:

- No register of every object. moto appends every model object it ever makes to a list on its
  class, for its dashboard: every message sent, every stream record, every object version and
  every table backup of every transaction stayed in memory for the life of the server (measured:
  481 whole copies of a table alive after 400 transactions, and the 500-file benchmark killed by
  the kernel's OOM killer at 23 GB). The local stack serves no dashboard, so nothing is kept.

- Atomic requests. moto server answers every request on a thread of its own and its DynamoDB
  backend has no lock, so a conditional write's check and its write can interleave with another
  request's (two workers could both claim one job), and a transaction's rollback can undo a
  write that another request made meanwhile. Every DynamoDB and DynamoDB Streams request now
  runs alone, as each is atomic on AWS.
- Transactions copy each table once. `transact_write_items` backs up each table it touches with
  `copy.deepcopy`, once per *item* of the transaction: an ingest writing a file and four jobs
  copied the whole jobs table four times, so the local stack slowed down with every upload.
- A rolled-back transaction keeps the table's stream. The rollback puts the backup copies in
  the tables' place, and a copy carried its own copy of the stream. Stream readers hold
  iterators on the old stream, so they saw no record after the first rollback (measured: 26 of
  4,000 records read). Now the backup shares the live stream; on a rollback the stream moves to
  the restored table and drops the records of the writes that were undone, as DynamoDB never
  publishes them.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_state = threading.local()
# One lock for DynamoDB and its streams, so a stream read never sees a transaction half done.
_DYNAMODB = threading.RLock()


@dataclass
class _Backup:
    table: Any
    copy: Any
    stream: Any  # the table's StreamShard, shared by the copy; None without a stream
    stream_length: int


def _deepcopy_once(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """copy.deepcopy, answering repeated copies of one table within a transaction from one
    backup that shares the table's stream. Only tables are cached (items are copied afresh each
    time); the backup holds the original too, so no id is reused while it is cached."""
    backups: dict[int, _Backup] | None = getattr(_state, "backups", None)
    if backups is None or memo is not None or type(value).__name__ != "Table":
        return copy.deepcopy(value, memo)
    if id(value) not in backups:
        stream = getattr(value, "stream_shard", None)
        shared = {} if stream is None else {id(stream): stream}
        backups[id(value)] = _Backup(
            table=value,
            copy=copy.deepcopy(value, shared),
            stream=stream,
            stream_length=0 if stream is None else len(stream.items),
        )
    return backups[id(value)].copy


class _CopyModule:
    """Stands in for the `copy` module inside moto's DynamoDB models."""

    deepcopy = staticmethod(_deepcopy_once)
    copy = staticmethod(copy.copy)


def _keep_streams(tables: dict[str, Any], backups: list[_Backup]) -> None:
    """After a transaction: where a backup replaced its table (a rollback), the stream follows
    it, without the records of the undone writes."""
    for backup in backups:
        if backup.stream is not None and tables.get(backup.table.name) is backup.copy:
            backup.stream.table = backup.copy
            del backup.stream.items[backup.stream_length :]


def _serialised(handler: type[Any]) -> None:
    original: Callable[[Any], Any] = handler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _DYNAMODB:
            return original(self)

    handler.call_action = call_action


def _untracked(cls: type[Any], *_: Any, **__: Any) -> Any:
    return object.__new__(cls)


def apply() -> None:
    """Apply every fix once per process, before moto server makes any object."""
    # moto is the local stack's alone: imported here, never by the deployed code.
    from moto.core.common_models import BaseModel  # noqa: PLC0415
    from moto.dynamodb import models  # noqa: PLC0415
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler  # noqa: PLC0415

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "_filejobs_fixed", False):
        return
    BaseModel.__new__ = staticmethod(_untracked)  # type: ignore[method-assign]
    original: Callable[..., None] = backend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        _state.backups = {}
        try:
            original(self, transact_items)
        finally:
            backups, _state.backups = list(_state.backups.values()), None
            _keep_streams(self.tables, backups)

    transact_write_items._filejobs_fixed = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    models.copy = _CopyModule  # type: ignore[attr-defined,assignment]
    _serialised(DynamoHandler)
    _serialised(DynamoDBStreamsHandler)
