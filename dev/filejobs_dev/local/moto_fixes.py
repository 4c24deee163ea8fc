"""Fixes to moto server, applied by the local stack in the emulator's process (and by the tests
to their in-process moto, tests/conftest.py: they run on the moto the local stack runs).

Each one was found by running the local stack under load, and each makes the emulator behave as
AWS does where the system depends on it (those that only make it faster, each keeping moto's
answers, are in moto_speedups.py):

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
- Transactions undo only what they wrote. `transact_write_items` backs up every table it
  touches with `copy.deepcopy` (once per *item* of the transaction) and, on a failure, puts the
  copies in the tables' place. The cost grew with the tables, so the local stack slowed down with
  every upload; and stream readers, holding iterators on the replaced table's stream, saw no
  record after the first rollback (measured: 26 of 4,000 records read). Now the transaction
  first notes the items it may write (a copy of each, or their absence) and the length of each
  table's stream; a failure puts exactly those items back, in the same table objects, and drops
  the stream records of the undone writes, as DynamoDB never publishes them.
- S3 notifications name the version. moto's object-created records carry no `versionId` and no
  `sequencer`, so the ingest recorded no version and the virus scan's quarantine could only delete
  the key: S3 then adds a delete marker and the infected version stays in the bucket, noncurrent.
  Each record now carries the new version's id (in a versioned bucket) and a sequencer that grows
  with every event, as S3's records do.
- Standard queues are fair queues. AWS serves a quiet message group (a tenant, the
  `MessageGroupId` of a job message) before a noisy group's backlog; moto keeps the group id of
  a standard queue's message but delivers in the order sent. Receives now take the groups in
  turn, those with the fewest messages in flight first (fair_queues.py says exactly what is
  emulated and what is not).

"""

from __future__ import annotations

import copy
import functools
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from filejobs_dev.local import fair_queues

_state = threading.local()
# One lock for DynamoDB and its streams, so a stream read never sees a transaction half done.
_DYNAMODB = threading.RLock()


@dataclass
class _Before:
    """One item a transaction may write, as it was before: a copy, or None when absent."""

    table: Any
    hash_value: Any
    range_value: Any
    item: Any

    def restore(self) -> None:
        items = self.table.items
        if self.range_value is None:
            if self.item is None:
                items.pop(self.hash_value, None)
            else:
                items[self.hash_value] = self.item
        elif self.item is None:
            partition = items.get(self.hash_value)
            if partition is not None:
                partition.pop(self.range_value, None)
        else:
            items[self.hash_value][self.range_value] = self.item


def _undo_log(tables: dict[str, Any], transact_items: list[dict[str, Any]]) -> list[_Before]:
    """The items a transaction may write, as they are now. An operation whose table or key
    cannot be read writes nothing (moto counts it as that item's error), so it has nothing to
    undo."""
    from moto.dynamodb.models.dynamo_type import DynamoType  # noqa: PLC0415

    befores: list[_Before] = []
    for entry in transact_items:
        try:
            operation, details = next(iter(entry.items()))
            table = tables[details["TableName"]]
            key = details["Item"] if operation == "Put" else details["Key"]
            hash_value = DynamoType(key[table.hash_key_attr])
            range_key = table.range_key_attr
            range_value = None if range_key is None else DynamoType(key[range_key])
            current = table.get_item(hash_value, range_value)
        except Exception:  # noqa: S112 (any malformed operation: moto answers it)
            continue
        befores.append(_Before(table, hash_value, range_value, copy.deepcopy(current)))
    return befores


def _stream_lengths(befores: list[_Before]) -> dict[int, tuple[Any, int]]:
    streams = (b.table.stream_shard for b in befores if b.table.stream_shard is not None)
    return {id(stream): (stream, len(stream.items)) for stream in streams}


def copy_module(uncopied: Callable[[Any], bool]) -> Any:
    """Stands in for the `copy` module inside one of moto's modules: its deepcopy returns a
    value `uncopied` picks as it is, and copies any other."""

    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if uncopied(value) else copy.deepcopy(value, memo)

    return SimpleNamespace(deepcopy=deepcopy, copy=copy.copy)


def _backed_up_table(value: Any) -> bool:
    """A table being backed up by a transaction is not copied: its rollback then puts the same
    table back, and the undo log restores what the transaction wrote."""
    return getattr(_state, "in_transaction", False) and type(value).__name__ == "Table"


# Told of every DynamoDB request that may have changed items (its operation, its parameters),
# under the lock, once it is answered: moto_speedups keeps its index groups current from them.
_after_writes: list[Callable[[str, Any], None]] = []


def after_writes(listener: Callable[[str, Any], None]) -> None:
    if listener not in _after_writes:
        _after_writes.append(listener)


# DynamoDB's read-only operations; every other request may change items.
_READS = frozenset(
    {
        "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "DescribeTable",
        "ListTables", "DescribeTimeToLive", "DescribeContinuousBackups", "ListTagsOfResource",
        "DescribeStream", "GetRecords", "GetShardIterator", "ListStreams",
    }
)  # fmt: skip


def _serialised(handler: type[Any]) -> None:
    original: Callable[[Any], Any] = handler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        operation = str(self.headers.get("X-Amz-Target", "")).rpartition(".")[2]
        with _DYNAMODB:
            try:
                return original(self)
            finally:
                if operation not in _READS:
                    for listener in _after_writes:
                        listener(operation, getattr(self, "params", None))

    handler.call_action = call_action


def _untracked(cls: type[Any], *_: Any, **__: Any) -> Any:
    return object.__new__(cls)


# S3's sequencer: hexadecimal, of one width here, so a later event of a key sorts after an earlier.
_SEQUENCER = itertools.count(1)


def _naming_the_version(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(original)
    def event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
        body = original(event_name, bucket, key, notification_id)
        for record in body.get("Records", []):
            described = record["s3"]["object"]
            version = getattr(key, "version_id", None)
            if version and version != "null":  # moto's id of a version in an unversioned bucket
                described["versionId"] = version
            described["sequencer"] = f"{next(_SEQUENCER):018X}"
        return body

    return event


def apply(*, speedups: bool = True) -> None:
    """Apply every fix once per process, before moto server makes any object.
    `speedups=False` leaves out those that only make it faster (routing, queries, scans,
    expressions, response members, retention checks): the local stack's benchmark baseline."""
    # moto is the local stack's alone: imported here, never by the deployed code.
    from moto.core.common_models import BaseModel  # noqa: PLC0415
    from moto.dynamodb import models  # noqa: PLC0415
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler  # noqa: PLC0415
    from moto.s3 import notifications  # noqa: PLC0415

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "_filejobs_fixed", False):
        return
    BaseModel.__new__ = staticmethod(_untracked)  # type: ignore[method-assign]
    original: Callable[..., None] = backend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        befores = _undo_log(self.tables, transact_items)
        streams = _stream_lengths(befores)
        _state.in_transaction = True
        try:
            original(self, transact_items)
        except Exception:
            for before in reversed(befores):
                before.restore()
            for stream, length in streams.values():
                del stream.items[length:]
            raise
        finally:
            _state.in_transaction = False

    transact_write_items._filejobs_fixed = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    models.copy = copy_module(_backed_up_table)  # type: ignore[attr-defined]
    _serialised(DynamoHandler)
    _serialised(DynamoDBStreamsHandler)
    notifications._get_s3_event = _naming_the_version(notifications._get_s3_event)
    fair_queues.apply()
    if speedups:
        from filejobs_dev.local import moto_speedups  # noqa: PLC0415 (it builds on these)

        moto_speedups.apply()
