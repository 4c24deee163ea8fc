"""Fixes to moto server, applied by the local stack in the emulator's process (and by the tests
to their in-process moto, tests/conftest.py: they run on the moto the local stack runs).

Each one was found by running the local stack under load, and each makes the emulator behave as
AWS does where the system depends on it (those that only make it faster, each keeping moto's
answers, are in moto_speedups.py). Each names the moto issue it would close, written out in
docs/MOTO_ISSUES.md with any upstream issue or pull request touching it: drop the fix, and its
test of moto as released, when moto closes it. They patch moto's private internals, so moto is
pinned exactly (pyproject.toml says how to upgrade):

- No register of every object. moto appends every model object it ever makes to a list on its
  class, for its dashboard: every message sent, every stream record, every object version and
  every table backup of every transaction stayed in memory for the life of the server (measured:
  481 whole copies of a table alive after 400 transactions, and the 500-file benchmark killed by
  the kernel's OOM killer at 23 GB). The local stack serves no dashboard, so nothing is kept.
  moto issue: docs/MOTO_ISSUES.md#every-model-object-is-kept-for-the-life-of-the-process
- Atomic requests. moto server answers every request on a thread of its own and its DynamoDB
  backend has no lock, so a conditional write's check and its write can interleave with another
  request's (two workers could both claim one job), and a transaction's rollback can undo a
  write that another request made meanwhile. Every DynamoDB and DynamoDB Streams request now
  runs alone, as each is atomic on AWS.
  moto issue: docs/MOTO_ISSUES.md#dynamodb-requests-in-moto-server-are-not-atomic
- Transactions undo only what they wrote. `transact_write_items` backs up every table it
  touches with `copy.deepcopy` (once per *item* of the transaction) and, on a failure, puts the
  copies in the tables' place. The cost grew with the tables, so the local stack slowed down with
  every upload; and stream readers, holding iterators on the replaced table's stream, saw no
  record after the first rollback (measured: 26 of 4,000 records read). Now the transaction
  first notes the items it may write (a copy of each, or their absence) and the length of each
  table's stream; a failure puts exactly those items back, in the same table objects, and drops
  the stream records of the undone writes, as DynamoDB never publishes them.
  moto issue: docs/MOTO_ISSUES.md#a-failed-transactwriteitems-replaces-whole-tables-and-streams
- S3 notifications name the version. moto's object-created records carry no `versionId` and no
  `sequencer`, so the ingest recorded no version and the virus scan's quarantine could only delete
  the key: S3 then adds a delete marker and the infected version stays in the bucket, noncurrent.
  Each record now carries the new version's id (in a versioned bucket) and a sequencer that grows
  with every event, as S3's records do.
  moto issue: docs/MOTO_ISSUES.md#s3-event-notifications-carry-no-versionid-and-no-sequencer
- S3 notifications of removals name what was removed. moto sent no `ObjectRemoved` event for a
  delete that adds a delete marker (the usual delete in a versioned bucket), and for a delete of
  one version only when the key's last version went, naming the key's current object rather than
  the version deleted. Now, as S3 does, a delete that adds a marker (even to a key that had no
  version: moto added none and answered that nothing happened) sends
  `ObjectRemoved:DeleteMarkerCreated` naming the marker, and each version or marker deleted for
  good sends `ObjectRemoved:Delete` naming it, one DeleteObjects entry as one DeleteObject. Their
  records carry the key, the version id (in a versioned bucket) and the sequencer, and no size or
  eTag: S3 describes no content of what it removed.
  moto issue: docs/MOTO_ISSUES.md#s3-delete-notifications-miss-delete-markers
- Standard queues are fair queues. AWS serves a quiet message group (a tenant, the
  `MessageGroupId` of a job message) before a noisy group's backlog; moto keeps the group id of
  a standard queue's message but delivers in the order sent. Receives now take the groups in
  turn, those with the fewest messages in flight first (fair_queues.py says exactly what is
  emulated and what is not).
  moto issue: docs/MOTO_ISSUES.md#standard-queues-with-messagegroupid-do-not-deliver-as-fair-queues
- A queue's messages change one request at a time. moto server answers each request on a thread
  of its own, and its SQS queue has a lock that only a send takes: a delete copies the queue's
  list of messages without the one deleted and puts the copy in its place, so a message sent
  meanwhile (an S3 notification of an upload going on at the same moment) was in neither and
  vanished, with no error anywhere (issue 46: one upload of 120 never recorded, every queue
  empty); and two receives could hand out the same message, each unaware of the other. A
  receive, a delete, a visibility change and a purge of a queue now hold the queue's lock (a
  long poll gives it up while it waits, as a send's wait does), as each is atomic on AWS.
  moto issue: docs/MOTO_ISSUES.md#sqs-receives-and-deletes-are-not-atomic-in-moto-server
- Browser uploads are held to their form's policy and answered with CORS headers. moto stored
  any form POST whatever its signed policy said (any key, any size, a `tagging` field) and
  answered it with no CORS header, so a page could not read S3's answer (s3_forms.py).
  moto issue: docs/MOTO_ISSUES.md#s3-post-object-ignores-its-policy-and-sends-no-cors-headers

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

from filejobs_dev.local import fair_queues, s3_forms

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


_REMOVED = "s3:ObjectRemoved:"


def _naming_the_version(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(original)
    def event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
        removal = event_name.startswith(_REMOVED)
        # What a removal names may be a delete marker, with no content for moto to describe.
        described_key = SimpleNamespace(name=key.name, etag="", size=0) if removal else key
        body = original(event_name, bucket, described_key, notification_id)
        for record in body.get("Records", []):
            described = record["s3"]["object"]
            if removal:  # S3's removal records describe no content: none is left, or none was
                described.pop("size", None)
                described.pop("eTag", None)
            version = getattr(key, "version_id", None)
            if version and version != "null":  # moto's id of a version in an unversioned bucket
                described["versionId"] = version
            described["sequencer"] = f"{next(_SEQUENCER):018X}"
        return body

    return event


def _unless_removing(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def send_event(account_id: str, event_name: str, bucket: Any, key: Any) -> None:
        # Inside a delete, moto's own removal events are dropped: they name the wrong object, or
        # come when S3 sends none. The delete sends S3's once it is done (_removals_notified).
        if getattr(_state, "removing", False) and event_name.startswith(_REMOVED):
            return
        original(account_id, event_name, bucket, key)

    return send_event


def _removals_notified(backend: type[Any], notifications: Any, marker_type: type[Any]) -> None:
    """Every delete of `backend` notifies what it removed, as S3 does: each version (or delete
    marker) deleted for good, and the delete marker it added."""
    delete_object: Callable[..., tuple[bool, dict[str, Any]]] = backend.delete_object
    set_delete_marker: Callable[..., Any] = backend._set_delete_marker
    events = notifications.S3NotificationEvent

    @functools.wraps(set_delete_marker)
    def _set_delete_marker(self: Any, bucket_name: str, key_name: str) -> Any:
        bucket = self.get_bucket(bucket_name)
        if key_name in bucket.keys:
            marker = set_delete_marker(self, bucket_name, key_name)
        else:
            # S3 adds a marker to a key that has no version too (and says so); moto raised
            # KeyError, added none, and answered the delete as if it had.
            marker = marker_type(key=SimpleNamespace(name=key_name))
            bucket.keys[key_name] = marker
        _state.marker = marker  # the one a delete added, for it to notify
        return marker

    @functools.wraps(delete_object)
    def delete_object_notified(
        self: Any,
        bucket_name: str,
        key_name: str,
        version_id: str | None = None,
        bypass: bool = False,
    ) -> tuple[bool, dict[str, Any]]:
        bucket = self.get_bucket(bucket_name)
        versioned = bucket.is_versioned
        before = list(bucket.keys.getlist(key_name) or [])
        _state.removing, _state.marker = True, None
        try:
            answer = delete_object(self, bucket_name, key_name, version_id, bypass)
            marker = _state.marker
        finally:
            _state.removing, _state.marker = False, None
        if not versioned:  # moto removes every version of the key, whatever the version id
            removed = before
        elif version_id is None:
            removed = []
        else:
            removed = [v for v in before if str(v.version_id) == str(version_id)]
        for version in removed:
            notifications.send_event(
                self.account_id, events.OBJECT_REMOVED_DELETE_EVENT, bucket, version
            )
        if marker is not None:
            notifications.send_event(
                self.account_id, events.OBJECT_REMOVED_DELETE_MARKER_CREATED_EVENT, bucket, marker
            )
        return answer

    backend._set_delete_marker = _set_delete_marker
    backend.delete_object = delete_object_notified


def _holding_the_queue(original: Callable[..., Any], queue_of: Callable[..., Any]) -> Any:
    """`original`, run holding its queue's lock: the one moto's send takes (a re-entrant lock
    under a Condition, whose wait, in a long poll, releases it whole)."""

    @functools.wraps(original)
    def holding(self: Any, *args: Any, **kwargs: Any) -> Any:
        with queue_of(self, *args, **kwargs)._messages_lock:
            return original(self, *args, **kwargs)

    holding._filejobs_atomic = True  # type: ignore[attr-defined]
    return holding


def _atomic_queues(backend: type[Any], queue: type[Any]) -> None:
    """Each request that changes a queue's messages runs alone on that queue."""
    if getattr(queue.delete_message, "_filejobs_atomic", False):
        return

    def named(self: Any, queue_name: str, *_: Any, **__: Any) -> Any:
        return self.get_queue(queue_name)

    def itself(self: Any, *_: Any, **__: Any) -> Any:
        return self

    queue.delete_message = _holding_the_queue(queue.delete_message, itself)
    for operation in ("receive_message", "change_message_visibility", "purge_queue"):
        setattr(backend, operation, _holding_the_queue(getattr(backend, operation), named))


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
    from moto.s3.models import FakeDeleteMarker, S3Backend  # noqa: PLC0415
    from moto.sqs.models import Queue, SQSBackend  # noqa: PLC0415

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
    notifications.send_event = _unless_removing(notifications.send_event)
    _removals_notified(S3Backend, notifications, FakeDeleteMarker)
    fair_queues.apply()
    _atomic_queues(SQSBackend, Queue)  # after fair_queues: a delete's timing is inside the lock
    s3_forms.apply()
    if speedups:
        from filejobs_dev.local import moto_speedups  # noqa: PLC0415 (it builds on these)

        moto_speedups.apply()
