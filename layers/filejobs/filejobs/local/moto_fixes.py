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
- Transactions undo only what they wrote. `transact_write_items` backs up every table it
  touches with `copy.deepcopy` (once per *item* of the transaction) and, on a failure, puts the
  copies in the tables' place. The cost grew with the tables, so the local stack slowed down with
  every upload; and stream readers, holding iterators on the replaced table's stream, saw no
  record after the first rollback (measured: 26 of 4,000 records read). Now the transaction
  first notes the items it may write (a copy of each, or their absence) and the length of each
  table's stream; a failure puts exactly those items back, in the same table objects, and drops
  the stream records of the undone writes, as DynamoDB never publishes them.
- Each request's service found once per host name. moto server finds the backend of every
  request by listing its own package folder on disk (an `isdir` per service, about 150) and
  trying every service's URL pattern, under one lock that all requests share: a sixth of the
  emulator's time under load (py-spy, 2026-12-01), and every request waits its turn. The answer
  depends on the host name alone and moto's services do not change while it runs, so each host
  name's backend is now found once and remembered.
- A query reads its partition, not the table. moto answers every Query, of the table or of an
  index, by listing every item of the table, sorting them all, then testing each against the
  key condition: the cost of every query grew with the table (58% of the DynamoDB emulator's
  time at 1,050 jobs, py-spy 2026-12-01; the sweep's 256 queries a run slowed with every job
  ever made). A table query now starts from the items under its partition key, and an index
  query from the items whose index key attributes hold the queried strings (the table grouped
  by them in one pass, kept until the next request that may change an item); moto then applies
  its own conditions, order and paging to those, so the answer is the same.
  A key of another type (a number, whose "1" equals "1.0") is left to moto's own way.
- A response's members read straight from its dict. moto serializes every response by walking
  the operation's output shape, and for every member of every structure (each attribute value
  of each item is one, with ten members) it asks a chain of alias providers which keys to try,
  building an object per provider: about a fifth of the DynamoDB emulator's time under load
  (py-spy, 2026-12-02). For a plain dict the keys the chain tries depend only on the member's
  shape, its parent and its name, so they are now worked out once per member and tried in the
  same order; the value is the first that the dict holds, as moto's chain picks it.
- A received message's retention read from its queue. For every message it hands out, moto's
  SQS checks the retention period by building every attribute of the queue, three times, and
  two of them count the queue's messages: a receive from a queue of n messages cost n times
  the batch, a sixth of the stack process's time with four pollers per queue (py-spy,
  2026-12-02). The period is now read from the queue itself, and compared the same way.
- S3 notifications name the version. moto's object-created records carry no `versionId` and no
  `sequencer`, so the ingest recorded no version and the virus scan's quarantine could only delete
  the key: S3 then adds a delete marker and the infected version stays in the bucket, noncurrent.
  Each record now carries the new version's id (in a versioned bucket) and a sequencer that grows
  with every event, as S3's records do.
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def _no_table_copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """copy.deepcopy inside moto's DynamoDB models, except that a table being backed up by a
    transaction is not copied: its rollback then puts the same table back, and the undo log
    restores what the transaction wrote."""
    if getattr(_state, "in_transaction", False) and type(value).__name__ == "Table":
        return value
    return copy.deepcopy(value, memo)


class _CopyModule:
    """Stands in for the `copy` module inside moto's DynamoDB models."""

    deepcopy = staticmethod(_no_table_copy)
    copy = staticmethod(copy.copy)


# DynamoDB's read-only operations; every other request may change items, and moves `_writes` on.
_READS = frozenset(
    {
        "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "DescribeTable",
        "ListTables", "DescribeTimeToLive", "DescribeContinuousBackups", "ListTagsOfResource",
        "DescribeStream", "GetRecords", "GetShardIterator", "ListStreams",
    }
)  # fmt: skip
_writes = itertools.count()
_changes = 0  # the count of requests that may have changed an item; read under _DYNAMODB


def _serialised(handler: type[Any]) -> None:
    original: Callable[[Any], Any] = handler.call_action

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        global _changes  # noqa: PLW0603 (one counter for the process, guarded by the lock)
        operation = str(self.headers.get("X-Amz-Target", "")).rpartition(".")[2]
        with _DYNAMODB:
            if operation not in _READS:
                _changes = next(_writes)
            return original(self)

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


def _picked_from_dicts(original: Callable[[Any, Any, str, Any], Any]) -> Callable[..., Any]:
    from moto.core.serialize import (  # noqa: PLC0415
        DEFAULT_ALIAS_PROVIDERS,
        AttributePickerContext,
    )

    # (member shape, its parent, member name) -> the keys moto's chain tries on a dict, in
    # order; None where one is a dotted path (moto would walk it): moto's own way then.
    tried: dict[tuple[Any, Any, str], tuple[str, ...] | None] = {}

    def plain(picker: Any) -> bool:
        """moto's default chain of aliases, and no transformer of any value."""
        providers = getattr(picker, "alias_providers", None)
        return providers == DEFAULT_ALIAS_PROVIDERS and not picker.response_transformers

    def keys_tried(serializer: Any, value: dict[str, Any], key: str, shape: Any) -> Any:
        context = AttributePickerContext(
            obj=value,
            key=key,
            shape=shape,
            operation_model=serializer.operation_model,
            service_model=serializer.operation_model.service_model,
            key_path=".".join(serializer.path),
        )
        keys = tuple(serializer._value_picker.get_possible_keys(context))
        return None if any("." in k for k in keys) else keys

    @functools.wraps(original)
    def get_value(self: Any, value: Any, key: str, shape: Any) -> Any:
        if type(value) is not dict or not plain(self._value_picker):
            return original(self, value, key, shape)
        # What the chain tries depends on the shape, its parent and the key (and on the
        # value's class, here always dict), never on the value's contents.
        memo = (shape, getattr(shape, "parent", None), key)
        if memo not in tried:
            tried[memo] = keys_tried(self, value, key, shape)
        keys = tried[memo]
        if keys is None:
            return original(self, value, key, shape)
        return next((value[k] for k in keys if k in value), None)

    return get_value


def _retained(self: Any, queue_name: str, message: Any) -> bool:
    """moto's `is_message_valid_based_on_retention_period`, reading the one attribute it needs."""
    from moto.core.utils import unix_time  # noqa: PLC0415 (as moto's own check reads the time)

    retention_period = self.get_queue(queue_name).message_retention_period
    return bool(retention_period + message.sent_timestamp / 1000 > unix_time())


def _remembered(original: Callable[[Any, str | None], Any]) -> Callable[[Any, str | None], Any]:
    found: dict[str | None, Any] = {}

    @functools.wraps(original)
    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in found:
            found[host] = original(self, host)
        return found[host]

    return get_backend_for_host


# (table, index key attributes) -> (the change count it was built at, key values -> items).
_groups: dict[tuple[int, tuple[str, ...]], tuple[int, dict[tuple[str, ...], list[Any]]]] = {}


def _grouped(table: Any, names: tuple[str, ...]) -> dict[tuple[str, ...], list[Any]]:
    """The table's items by their string values of `names`, rebuilt only after a change: the
    sweep's 256 shard queries in a row read the table once, not 256 times."""
    key = (id(table), names)
    built = _groups.get(key)
    if built is not None and built[0] == _changes:
        return built[1]
    groups: dict[tuple[str, ...], list[Any]] = {}
    for partition in table.items.values():
        for item in partition.values() if table.range_key_attr else (partition,):
            held = [item.attrs.get(name) for name in names]
            if all(value is not None and value.type == "S" for value in held):
                groups.setdefault(tuple(value.value for value in held), []).append(item)
    _groups[key] = (_changes, groups)
    return groups


def _query_candidates(table: Any, arguments: dict[str, Any]) -> list[Any] | None:
    """The items a query can match (a superset of its answer), or None for moto's own list."""
    if arguments.get("index_name") is None:
        hash_key = arguments.get("hash_key")
        if hash_key is None:
            return None
        partition = table.items.get(hash_key)
        if partition is None:
            return []
        return list(partition.values()) if table.range_key_attr else [partition]
    conditions = arguments.get("hash_key_conditions") or []
    if not conditions or any(value.type != "S" for _, value in conditions):
        return None
    names = tuple(name for name, _ in conditions)
    return list(_grouped(table, names).get(tuple(value.value for _, value in conditions), []))


def _from_candidates(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        candidates = _query_candidates(self, arguments)
        if candidates is None:
            return original(self, *args, **kwargs)
        # moto's query takes its items from `all_items()`: this one call gets the candidates.
        self.all_items = lambda: candidates
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.all_items

    return query


def apply(*, speedups: bool = True) -> None:
    """Apply every fix once per process, before moto server makes any object.
    `speedups=False` leaves out the four that only make it faster (routing, queries, response
    members, retention checks): the local stack's benchmark baseline."""
    # moto is the local stack's alone: imported here, never by the deployed code.
    from moto.core.common_models import BaseModel  # noqa: PLC0415
    from moto.core.serialize import ResponseSerializer  # noqa: PLC0415
    from moto.dynamodb import models  # noqa: PLC0415
    from moto.dynamodb.models.table import Table  # noqa: PLC0415
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler  # noqa: PLC0415
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication  # noqa: PLC0415
    from moto.s3 import notifications  # noqa: PLC0415
    from moto.sqs.models import SQSBackend  # noqa: PLC0415

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
    models.copy = _CopyModule  # type: ignore[attr-defined,assignment]
    _serialised(DynamoHandler)
    _serialised(DynamoDBStreamsHandler)
    notifications._get_s3_event = _naming_the_version(notifications._get_s3_event)
    if speedups:
        Table.query = _from_candidates(Table.query)  # type: ignore[method-assign]
        dispatcher = DomainDispatcherApplication
        dispatcher.get_backend_for_host = _remembered(dispatcher.get_backend_for_host)  # type: ignore[method-assign,assignment]
        ResponseSerializer.get_value = _picked_from_dicts(ResponseSerializer.get_value)  # type: ignore[method-assign]
        SQSBackend.is_message_valid_based_on_retention_period = _retained  # type: ignore[method-assign]
