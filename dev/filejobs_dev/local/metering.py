"""The local stack's meter: every AWS request a function makes, counted from botocore's events.

With FILEJOBS_LOCAL_METER_LOG set, each function host appends a JSON line to that file:

- per request (`"kind": "request"`): the service and operation; whether the host made it for
  the platform (the event source mapping's ReceiveMessage and DeleteMessageBatch, which AWS
  bills to the account too) or the function's code made it; for DynamoDB the read and write
  request units (`capacity.py`, sized from the items before and after the write, which the
  meter reads with a client of its own that is not counted), the index units among them, and
  whether the request succeeded; for SQS the messages and payload bytes; for EventBridge the
  entries;
- per invocation (`"kind": "invoke"`): the milliseconds it ran, less the time the meter itself
  spent on that thread (its reads of the items, its log lines: not the function's work), the
  function's configured memory, the records it was given and the bytes it logged;
- per processor call (`"kind": "process"`): the milliseconds the job's processor itself took,
  the design's floor for a job's compute.

Every client any code of the host builds is instrumented, boto3's and PynamoDB's alike: the
meter hooks botocore's `Session.create_client`. Nothing here is imported by the deployed code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

import botocore.session

from filejobs_dev.local.capacity import (
    Item,
    TableShape,
    index_write_units,
    read_units,
    write_units,
)

METER_LOG_VARIABLE = "FILEJOBS_LOCAL_METER_LOG"
_BEFORE_ID = "filejobs-meter-before"
_AFTER_ID = "filejobs-meter-after"
_DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")

# `suspended`: clients built now are the meter's own; `overhead`: seconds this thread spent in
# the meter's handlers (its own reads of the items, its log lines), kept off invocation times.
_local = threading.local()


def meter_seconds() -> float:
    """Seconds this thread has spent in the meter's handlers so far."""
    seconds: float = getattr(_local, "overhead", 0.0)
    return seconds


@contextlib.contextmanager
def _meter_time() -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        _local.overhead = meter_seconds() + time.perf_counter() - started


@contextlib.contextmanager
def unmetered() -> Iterator[None]:
    """Clients built inside are not instrumented (the meter's own, for instance)."""
    previous = getattr(_local, "suspended", False)
    _local.suspended = True
    try:
        yield
    finally:
        _local.suspended = previous


class MeterLog:
    """Appends one JSON line per entry; every host of the stack appends to the same file."""

    def __init__(self, path: str, function: str, job_type: str | None) -> None:
        self._path, self._stamp = path, {"fn": function, "jt": job_type}
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"kind": kind, "t": round(time.time(), 3), **self._stamp, **fields})
        with self._lock, open(self._path, "a", encoding="utf-8") as out:
            out.write(line + "\n")  # one write of a short line: whole lines, in any order


class Meter:
    def __init__(self, log: MeterLog, images: Any) -> None:
        self.log = log
        self._images = images  # an uncounted DynamoDB client: items before and after writes
        self._shapes: dict[str, TableShape] = {}
        self._lock = threading.Lock()

    def instrument(self, client: Any, *, platform: bool = False) -> None:
        self.uninstrument(client)
        events = client.meta.events
        events.register("before-parameter-build", self._before, unique_id=_BEFORE_ID)
        after = self._after_platform if platform else self._after_function
        events.register("after-call", after, unique_id=_AFTER_ID)

    @staticmethod
    def uninstrument(client: Any) -> None:
        client.meta.events.unregister("before-parameter-build", unique_id=_BEFORE_ID)
        client.meta.events.unregister("after-call", unique_id=_AFTER_ID)

    # --- botocore event handlers -----------------------------------------------------------

    def _before(self, **kwargs: Any) -> None:
        with _meter_time():
            self._note_request(**kwargs)

    def _note_request(
        self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        service = model.service_model.service_name
        entry: dict[str, Any] = {"params": params}
        context["filejobs_meter"] = entry
        if service == "dynamodb" and model.name in _DYNAMODB_WRITES:
            try:
                entry["before"] = self._images_of(model.name, params)
            except Exception as error:  # a meter that cannot size a request must not fail it
                entry["error"] = f"{type(error).__name__}: {error}"

    def _after_function(self, **kwargs: Any) -> None:
        with _meter_time():
            self._after(platform=False, **kwargs)

    def _after_platform(self, **kwargs: Any) -> None:
        with _meter_time():
            self._after(platform=True, **kwargs)

    def _after(
        self,
        *,
        platform: bool,
        http_response: Any,
        parsed: Mapping[str, Any],
        model: Any,
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        entry = context.get("filejobs_meter", {})
        params: Mapping[str, Any] = entry.get("params", {})
        service, operation = model.service_model.service_name, model.name
        ok = http_response is not None and http_response.status_code < 300
        fields: dict[str, Any] = {"svc": service, "op": operation, "ok": ok, "platform": platform}
        try:
            if "error" in entry:
                fields["meter_error"] = entry["error"]
            else:
                fields.update(self._measure(service, operation, params, parsed, entry))
        except Exception as error:  # a meter that cannot size a request must not fail it
            fields["meter_error"] = f"{type(error).__name__}: {error}"
        self.log.write("request", **fields)

    # --- sizing ----------------------------------------------------------------------------

    def _measure(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        parsed: Mapping[str, Any],
        entry: Mapping[str, Any],
    ) -> dict[str, Any]:
        if service == "dynamodb":
            return self._dynamodb(operation, params, parsed, entry)
        if service == "sqs":
            return _sqs(operation, params, parsed)
        if service == "events" and operation == "PutEvents":
            return {"entries": len(params.get("Entries", ()))}
        if service == "s3":
            return {"bytes": int(params.get("ContentLength") or _body_size(params.get("Body")))}
        return {}

    def _dynamodb(
        self,
        operation: str,
        params: Mapping[str, Any],
        parsed: Mapping[str, Any],
        entry: Mapping[str, Any],
    ) -> dict[str, Any]:
        if operation in _DYNAMODB_WRITES:
            return self._writes(operation, params, entry.get("before", []))
        if operation == "GetItem":
            item = parsed.get("Item")
            if "ProjectionExpression" in params:  # billed on the whole item, not what came back
                item = self._get(params["TableName"], params["Key"])
            units = read_units([item], consistent=bool(params.get("ConsistentRead")))
            return {"table": params["TableName"], "rru": units, "items": int(item is not None)}
        if operation == "BatchGetItem":
            # Each key is read as a GetItem would be, found or not: an absent item still costs
            # the least a read costs (a unit strongly consistent, half a unit eventually).
            units = 0.0
            responses = parsed.get("Responses", {})
            for table, asked in params["RequestItems"].items():
                consistent = bool(asked.get("ConsistentRead"))
                found = responses.get(table, [])
                units += sum(read_units([item], consistent=consistent) for item in found)
                unprocessed = parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
                missing = max(0, len(asked.get("Keys", [])) - len(found) - len(unprocessed))
                units += missing * read_units([None], consistent=consistent)
            return {
                "rru": units,
                "items": sum(len(i) for i in parsed.get("Responses", {}).values()),
            }
        if operation in ("Query", "Scan"):
            evaluated = self._evaluated(operation, params, parsed)
            units = read_units(evaluated, consistent=bool(params.get("ConsistentRead")))
            return {
                "table": params["TableName"],
                "index": params.get("IndexName"),
                "rru": units,
                "items": len(evaluated),
            }
        return {}

    def _writes(
        self, operation: str, params: Mapping[str, Any], before: list[tuple[str, Item, Item | None]]
    ) -> dict[str, Any]:
        transactional = operation == "TransactWriteItems"
        table_units = index_units = 0.0
        for table, key, old in before:
            new = self._get(table, key)
            table_units += write_units(old, new, transactional=transactional)
            index_units += index_write_units(self._shape(table), old, new)
        tables = sorted({table for table, _, _ in before})
        return {
            "table": ",".join(tables),
            "wru": table_units + index_units,
            "index_wru": index_units,
            "items": len(before),
        }

    def _images_of(
        self, operation: str, params: Mapping[str, Any]
    ) -> list[tuple[str, Item, Item | None]]:
        """(table, key, item before) of each item the write may change."""
        targets = [(table, key) for table, key in self._write_targets(operation, params)]
        return [(table, key, self._get(table, key)) for table, key in targets]

    def _write_targets(self, operation: str, params: Mapping[str, Any]) -> list[tuple[str, Item]]:
        if operation in ("UpdateItem", "DeleteItem"):
            return [(params["TableName"], params["Key"])]
        if operation == "PutItem":
            return [(params["TableName"], self._key_of(params["TableName"], params["Item"]))]
        targets = []
        if operation == "TransactWriteItems":
            for action in params.get("TransactItems", ()):
                ((kind, body),) = action.items()
                key = body["Item"] if kind == "Put" else body["Key"]
                targets.append((body["TableName"], self._key_of(body["TableName"], key)))
        else:  # BatchWriteItem
            for table, requests in params.get("RequestItems", {}).items():
                for request in requests:
                    ((kind, body),) = request.items()
                    key = body["Item"] if kind == "PutRequest" else body["Key"]
                    targets.append((table, self._key_of(table, key)))
        return targets

    def _evaluated(
        self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> list[Item]:
        """The items a query or scan read, before its filter and projection dropped any."""
        if "FilterExpression" not in params and "ProjectionExpression" not in params:
            return list(parsed.get("Items", ()))
        bare = {
            name: value
            for name, value in params.items()
            if name not in ("FilterExpression", "ProjectionExpression", "Select")
        }
        used = set(_PLACEHOLDER.findall(str(bare.get("KeyConditionExpression", ""))))
        for names in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            kept = {k: v for k, v in bare.get(names, {}).items() if k in used}
            bare.pop(names, None)
            if kept:
                bare[names] = kept
        call = self._images.query if operation == "Query" else self._images.scan
        items: list[Item] = call(**bare).get("Items", [])
        return items

    def _get(self, table: str, key: Item) -> Item | None:
        item: Item | None = self._images.get_item(
            TableName=table, Key=dict(key), ConsistentRead=True
        ).get("Item")
        return item

    def _key_of(self, table: str, item: Item) -> Item:
        return {name: item[name] for name in self._shape(table).keys}

    def _shape(self, table: str) -> TableShape:
        with self._lock:
            if table not in self._shapes:
                described = self._images.describe_table(TableName=table)["Table"]
                self._shapes[table] = TableShape.from_description(described)
            return self._shapes[table]


def _sqs(operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> dict[str, Any]:
    if operation == "SendMessage":
        return {"messages": 1, "bytes": len(str(params.get("MessageBody", "")).encode())}
    if operation == "SendMessageBatch":
        entries = params.get("Entries", ())
        size = sum(len(str(e.get("MessageBody", "")).encode()) for e in entries)
        return {"messages": len(entries), "bytes": size}
    if operation == "ReceiveMessage":
        return {"messages": len(parsed.get("Messages", ()))}
    if operation in ("DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
        return {"messages": len(params.get("Entries", ()))}
    return {"messages": 1}


# --- the host's side ---------------------------------------------------------------------------

_installed: dict[str, Meter] = {}  # the process's meter, once started


def start(function: str, job_type: str | None) -> Meter | None:
    """Instruments every client built from now on in this process, if the stack asked for it."""
    path = os.environ.get(METER_LOG_VARIABLE)
    if not path or "meter" in _installed:
        return _installed.get("meter")
    with unmetered():
        images = botocore.session.get_session().create_client("dynamodb")
    meter = Meter(MeterLog(path, function, job_type), images)
    original: Callable[..., Any] = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        if not getattr(_local, "suspended", False):
            meter.instrument(client)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    _installed["meter"] = meter
    return meter


def platform_client(session: Any, service: str) -> Any:
    """A client the host uses as Lambda's platform would (an event source mapping's poller):
    counted, but apart from the function's own requests."""
    with unmetered():
        client = session.client(service)
    if "meter" in _installed:
        _installed["meter"].instrument(client, platform=True)
    return client


class _CountingStream(io.TextIOBase):
    """Passes writes through to `target`, counting their bytes."""

    def __init__(self, target: TextIO) -> None:
        self._target, self.written = target, 0

    def write(self, text: str) -> int:
        self.written += len(text.encode(errors="replace"))
        return self._target.write(text)

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()


class Invocations:
    """Times each invocation and counts what it logged (stdout and stderr, where Lambda's
    runtime takes a function's log lines from)."""

    def __init__(self, meter: Meter | None, memory_mb: int) -> None:
        self._meter, self._memory = meter, memory_mb
        self._out: _CountingStream | None = None
        self._err: _CountingStream | None = None
        self._originals = sys.stdout, sys.stderr
        if meter is not None:
            self._out, self._err = _CountingStream(sys.stdout), _CountingStream(sys.stderr)
            sys.stdout, sys.stderr = self._out, self._err

    def close(self) -> None:
        """Gives the process its own streams back (a host keeps counting until it exits)."""
        sys.stdout, sys.stderr = self._originals

    @contextlib.contextmanager
    def invocation(self, records: int) -> Iterator[None]:
        if self._meter is None or self._out is None or self._err is None:
            yield
            return
        logged = self._out.written + self._err.written
        started, metered = time.perf_counter(), meter_seconds()
        try:
            yield
        finally:
            # Lambda would not have spent the meter's own reads: they are not the function's.
            own = time.perf_counter() - started - (meter_seconds() - metered)
            elapsed = own * 1000
            logged = self._out.written + self._err.written - logged
            self._meter.log.write(
                "invoke", ms=round(elapsed, 3), memory_mb=self._memory, records=records,
                log_bytes=logged,
            )  # fmt: skip


def timed_processor(processor: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The processor, its every call's time in the meter log (the floor of a job's compute)."""

    def timed(work: Any) -> Any:
        started, metered = time.perf_counter(), meter_seconds()
        ok = False
        try:
            result = processor(work)
            ok = True
            return result
        finally:
            if "meter" in _installed:
                own = time.perf_counter() - started - (meter_seconds() - metered)
                memory = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0"))
                with _meter_time():
                    _installed["meter"].log.write(
                        "process", ms=round(own * 1000, 3), ok=ok, memory_mb=memory
                    )

    return timed


def _body_size(body: object) -> int:
    """Bytes an S3 request uploads: of a bytes body, or of a stream (botocore turns bytes into
    one before the request is sent) by its end, its position left as it was."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return len(body)
    seek, tell = getattr(body, "seek", None), getattr(body, "tell", None)
    if callable(seek) and callable(tell):
        try:
            position = tell()
            end = seek(0, os.SEEK_END)
            seek(position)
            return int(end)
        except (OSError, ValueError):
            return 0
    return 0
