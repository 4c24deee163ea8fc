"""One function of the template, running on this machine as Lambda would run it.

A host is a process of its own, like a Lambda execution environment: the function's environment
(resolved from the template) is its environment, its handler is imported from CodeUri once and
called for each batch, and module state (clients, caches) lives as long as the process. It runs
one of the function's event sources:

- `sqs`: long-polls each of the function's queues on a thread of its own (as each of Lambda's
  event source mappings polls on its own), with each event source's BatchSize, calls the
  handler with the batch (one invocation at a time: the process is one execution environment),
  deletes the records it did not report in `batchItemFailures`; the others become visible again
  after the queue's visibility timeout and reach the dead-letter queue after its
  maxReceiveCount, exactly as with Lambda's event source mapping. Of a function's N hosts
  (`--slot` 0 to N-1), a queue is polled by the first MaximumConcurrency only (`polled_by`);
- `schedule`: calls the handler with a Scheduler event at the schedule's rate;
- `stream`: reads the table's stream, drops the records the event's FilterCriteria reject, calls
  the handler in batches, retries failures up to MaximumRetryAttempts, then sends them to the
  OnFailure destination;
- `api`: serves invocations from the stack's HTTP router (stack.py) on a loopback port.

SIGTERM or SIGINT stops it after the batch in hand: a job runs to its end, or (when the stack
stops waiting) the process is killed and the job's lease expires, as when Lambda times out.

    python -m filejobs_dev.local.host --config .filejobs/local.json --function NAME --source sqs
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import importlib
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3

from filejobs.processors import registry
from filejobs.processors.base import Processor
from filejobs_dev.infra.template import FunctionSpec, function_definitions, load_template
from filejobs_dev.local import metering
from filejobs_dev.local.faults import (
    DUPLICATE_ATTRIBUTE,
    FAULTS_VARIABLE,
    POISONED_BODY,
    Fault,
    FaultKind,
    dropped_messages,
    parse_faults,
    record_injection,
    throttle_dynamodb,
    with_processor_faults,
)
from filejobs_dev.local.filter_criteria import filter_patterns, passes
from filejobs_dev.local.payloads import (
    TumblingWindow,
    dynamodb_event,
    scheduled_event,
    sqs_event,
)
from filejobs_dev.local.resources import ACCOUNT, Resources

log = logging.getLogger("filejobs_dev.local")
# Seconds a received message stays hidden, instead of the queue's own visibility timeout.
VISIBILITY_VARIABLE = "FILEJOBS_LOCAL_VISIBILITY_SECONDS"
# "1": a stream event source gathers records for its MaximumBatchingWindowInSeconds before it
# invokes, as Lambda does (`filejobs dev --stream-batching-windows`; off by default, so that a
# test or a demo sees a stream's effect within a second, not after the window).
STREAM_BATCHING_VARIABLE = "FILEJOBS_LOCAL_STREAM_BATCHING"
# The stack's per-run secret, which its router sends with each invocation of an API host.
INVOKE_SECRET_VARIABLE = "FILEJOBS_LOCAL_INVOKE_SECRET"  # noqa: S105 (a name, not a secret)
INVOKE_SECRET_HEADER = "X-Filejobs-Invoke-Secret"  # noqa: S105 (a name, not a secret)
# A receive waits this long for a message (Lambda's pollers wait 20 s): an idle queue costs a
# request per poller every few seconds, not a stream of empty answers. Shorter than Lambda's
# so a stopping host's pollers let go soon.
LONG_POLL_SECONDS = 5
# Set: receives return at once and an idle poller backs off from 0.05 s to 1 s, as the hosts
# polled before they long-polled (the local stack's benchmark baseline: bench/local_stack.py).
SHORT_POLL_VARIABLE = "FILEJOBS_LOCAL_SHORT_POLL"
SHORT_POLL_IDLE_SECONDS = (0.05, 1.0)
Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class LocalContext:
    """The Lambda context object, as far as handlers and Powertools read it."""

    function_name: str
    memory_limit_in_mb: int
    timeout_seconds: int
    region: str
    aws_request_id: str = ""
    deadline: float = 0.0
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def load_handler(spec: FunctionSpec, project_root: Path) -> Handler:
    """The handler of a function, imported from its CodeUri as Lambda's runtime does."""
    module_name, _, attribute = spec.handler.rpartition(".")
    sys.path.insert(0, str(project_root / spec.code_uri))
    module = importlib.import_module(module_name)
    handler: Handler = getattr(module, attribute)
    return handler


def wrap_processors(wrap: Callable[[Processor], Processor]) -> None:
    """Every processor the registry makes from now on comes wrapped (in the meter's timing, in
    the injected faults): installed before the handler imports the registry's function."""
    original = registry.processor_for

    def processor_for(*args: Any, **kwargs: Any) -> Processor:
        return wrap(original(*args, **kwargs))

    registry.processor_for = processor_for


class Host:
    def __init__(
        self,
        name: str,
        spec: FunctionSpec,
        resources: Resources,
        root: Path,
        *,
        faults: list[Fault] | None = None,
        visibility_seconds: int | None = None,
        stream_batching: bool = False,
    ) -> None:
        self.name, self.spec, self.resources = name, spec, resources
        self.stop = threading.Event()
        self._faults = faults or []
        self._visibility = visibility_seconds
        self.stream_batching = stream_batching
        # Metered (FILEJOBS_LOCAL_METER_LOG): every client built from here on, the handler's too.
        meter = metering.start(name, os.environ.get("JOB_TYPE"))
        self._invocations = metering.Invocations(meter, spec.memory)
        if meter is not None:
            wrap_processors(metering.timed_processor)
        if self._faults:
            wrap_processors(lambda processor: with_processor_faults(processor, self._faults))
            throttle_dynamodb(self._throttles(), name)
        self._handler = load_handler(spec, root)
        self._session = boto3.Session()

    def _platform_client(self, service: str) -> Any:
        """A client for the host's own calls, those Lambda's platform makes on AWS (polling a
        queue or a stream, deleting what was handled): metered apart from the function's."""
        return metering.platform_client(self._session, service)

    def _throttles(self) -> list[Fault]:
        """The throttle rules for this function: its own, and the unnamed ones unless it is the
        API's (a caller's request would fail, not the machinery under test)."""
        serves_api = any(kind == "Api" for kind, _ in self.spec.events)
        return [
            rule
            for rule in self._faults
            if rule.kind is FaultKind.THROTTLE
            and (rule.function == self.name or (rule.function is None and not serves_api))
        ]

    def invoke(self, event: dict[str, Any]) -> Any:
        context = LocalContext(
            function_name=f"{self.resources.stack_name}-{self.name}",
            memory_limit_in_mb=self.spec.memory,
            timeout_seconds=self.spec.timeout,
            region=self.resources.region,
            aws_request_id=str(uuid.uuid4()),
            deadline=time.monotonic() + self.spec.timeout,
        )
        started = time.monotonic()
        records = len(event.get("Records", ())) if isinstance(event, dict) else 0
        try:
            with self._invocations.invocation(records):
                return self._handler(event, context)
        finally:
            elapsed = time.monotonic() - started
            if elapsed > self.spec.timeout:
                # Lambda would have stopped it; locally the work ran on, so say so.
                log.warning(
                    "%s ran %.1f s, over its %d s timeout", self.name, elapsed, self.spec.timeout
                )

    # --- sqs ---------------------------------------------------------------------------------

    def run_sqs(self, slot: int = 0) -> None:
        sqs = self._platform_client("sqs")
        sources = [
            (self.resources.resolve(properties["Queue"]), int(properties.get("BatchSize", 10)))
            for properties in polled_by(slot, self.spec.events, self.resources.resolve)
        ]
        environment = threading.Lock()  # one invocation at a time, whichever queue it is from
        pollers = [
            threading.Thread(
                target=self._poll_forever,
                args=(sqs, self.queue_url(arn), arn, batch_size, environment),
                name=f"poll-{arn.rpartition(':')[2]}",
                daemon=True,
            )
            for arn, batch_size in sources
        ]
        for poller in pollers:
            poller.start()
        self.stop.wait()
        with environment:
            pass  # the batch in hand, if any, finishes before the process ends

    def _poll_forever(
        self, sqs: Any, url: str, arn: str, batch_size: int, environment: threading.Lock
    ) -> None:
        short = bool(os.environ.get(SHORT_POLL_VARIABLE))
        idle = SHORT_POLL_IDLE_SECONDS[0]
        while not self.stop.is_set():
            try:
                busy = self._poll_queue(sqs, url, arn, batch_size, environment, wait=not short)
            except Exception:
                # The emulator timed out or refused a call: like Lambda's poller, try again.
                log.exception("%s: polling %s failed; retrying", self.name, arn)
                self.stop.wait(1.0)
                continue
            if short and not busy:
                self.stop.wait(idle)
            idle = SHORT_POLL_IDLE_SECONDS[0] if busy else min(idle * 2, SHORT_POLL_IDLE_SECONDS[1])

    def queue_url(self, arn: str) -> str:
        for attributes in self.resources.attributes.values():
            if attributes.get("Arn") == arn and "QueueUrl" in attributes:
                return attributes["QueueUrl"]
        raise KeyError(f"{self.name}: no queue {arn}")

    def _poll_queue(
        self,
        sqs: Any,
        url: str,
        arn: str,
        batch_size: int,
        environment: threading.Lock,
        *,
        wait: bool = True,
    ) -> bool:
        """One receive, and its batch handled; whether there was one."""
        extra = {} if self._visibility is None else {"VisibilityTimeout": self._visibility}
        received = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(batch_size, 10),
            WaitTimeSeconds=LONG_POLL_SECONDS if wait else 0,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            **extra,
        ).get("Messages", [])
        if not received:
            return False
        with environment:
            if self.stop.is_set():
                # Received as the host stops: given back at once, not after a visibility timeout.
                sqs.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                        for n, m in enumerate(received)
                    ],
                )
                return True
            self._handle_batch(sqs, url, arn, received)
        return True

    def _handle_batch(self, sqs: Any, url: str, arn: str, received: list[dict[str, Any]]) -> None:
        # Injected: messages lost as if never sent (faults.py "drop"), acknowledged unread.
        lost = dropped_messages(self._faults, self.name, received)
        if lost:
            gone = [m for m in received if m["MessageId"] in lost]
            entries = [
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(gone)
            ]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
            received = [m for m in received if m["MessageId"] not in lost]
            if not received:
                return
        event = sqs_event(received, arn, self.resources.region)
        poisoned = self._poison(event)
        # A mangled message is not copied: its copy would take the same way to the dead-letter
        # queue a whole redrive later (maxReceiveCount x the visibility timeout), adding nothing
        # a run's audit does not already see but minutes of waiting for the queue to drain.
        self._duplicate(sqs, url, [m for m in received if m["MessageId"] not in poisoned])
        try:
            response = self.invoke(event) or {}
            failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        except Exception:
            # A handler that raises fails the whole batch, as on Lambda.
            log.exception("%s failed a batch of %d", self.name, len(received))
            failed = {message["MessageId"] for message in received}
        done = [m for m in received if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done)
                ],
            )

    def _duplicate(self, sqs: Any, url: str, received: list[dict[str, Any]]) -> None:
        """Injected: an original message is delivered once more, as S3 and SQS may."""
        rules = [
            f for f in self._faults if f.kind is FaultKind.DUPLICATE and f.function == self.name
        ]
        for message in received:
            if DUPLICATE_ATTRIBUTE in message.get("MessageAttributes", {}):
                continue  # a copy is not copied again
            if not any(rule.fires(message["MessageId"]) for rule in rules):
                continue
            record_injection(FaultKind.DUPLICATE, function=self.name, message=message["MessageId"])
            # The copy keeps the original's fair-queue group (its tenant), as SQS's own would.
            group = message.get("Attributes", {}).get("MessageGroupId")
            sqs.send_message(
                QueueUrl=url,
                MessageBody=message["Body"],
                MessageAttributes={DUPLICATE_ATTRIBUTE: {"DataType": "String", "StringValue": "1"}},
                **({"MessageGroupId": group} if group else {}),
            )

    def _poison(self, event: dict[str, Any]) -> set[str]:
        """Injected: the matching jobs' messages reach the handler mangled, on every delivery.
        The ids of the messages mangled."""
        rules = [f for f in self._faults if f.kind is FaultKind.POISON]
        poisoned: set[str] = set()
        if not rules:
            return poisoned
        for record in event["Records"]:
            try:
                body = json.loads(record["body"])
                job_type, file_id = str(body["job_type"]), str(body.get("file_id", ""))
            except (ValueError, KeyError, TypeError):
                continue
            key = self._object_key(file_id)
            if any(rule.matches(job_type, key) for rule in rules):
                record["body"] = POISONED_BODY
                poisoned.add(record["messageId"])
        return poisoned

    def _object_key(self, file_id: str) -> str:
        table = os.environ.get("FILES_TABLE_NAME")
        if not table or not file_id:
            return ""
        with metering.unmetered():  # the fault harness's own read: nothing AWS would make
            dynamodb = self._session.client("dynamodb")
        item = dynamodb.get_item(TableName=table, Key={"id": {"S": file_id}}).get("Item", {})
        return str(item.get("key", {}).get("S", ""))

    # --- schedule ----------------------------------------------------------------------------

    def run_schedule(self, every_seconds: float | None) -> None:
        for kind, properties in self.spec.events:
            if kind not in ("Schedule", "ScheduleV2"):
                continue
            interval = schedule_interval(self.resources, properties, every_seconds)
            name = self.resources.resolve(properties.get("Name", self.name))
            arn = f"arn:aws:scheduler:{self.resources.region}:{ACCOUNT}:schedule/default/{name}"
            while not self.stop.wait(interval):
                try:
                    self.invoke(scheduled_event(arn, self.resources.region, ACCOUNT))
                except Exception:
                    # Scheduler's RetryPolicy here is 0 retries: the next run is the retry.
                    log.exception("%s: scheduled run failed", self.name)
            return

    # --- stream ------------------------------------------------------------------------------

    def run_stream(self) -> None:
        streams = self._platform_client("dynamodbstreams")
        sqs = self._platform_client("sqs")
        for kind, properties in self.spec.events:
            if kind != "DynamoDB":
                continue
            stream = StreamSource(self, streams, sqs, properties)
            threading.Thread(target=stream.run, name=f"stream-{kind}", daemon=True).start()
        self.stop.wait()

    # --- api ---------------------------------------------------------------------------------

    def serve_api(self, port: int) -> None:
        server = invocation_server(port, self.invoke, self.name, os.environ[INVOKE_SECRET_VARIABLE])
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.stop.wait()
        server.shutdown()


def invocation_server(
    port: int, invoke: Callable[[dict[str, Any]], Any], name: str, secret: str
) -> ThreadingHTTPServer:
    """The loopback server of an API function's host: one API Gateway event per POST, from the
    stack's router alone. Any process of this machine can reach a loopback port, and an event
    names its own authorizer context (the caller, the tenant, operator or not): a request
    without the stack's per-run secret is refused (403) and never reaches the function."""

    class Invocations(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            offered = self.headers.get(INVOKE_SECRET_HEADER, "")
            if not hmac.compare_digest(offered.encode(), secret.encode()):
                self._answer(403, {"errorType": "Forbidden"})
                return
            event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                result, status = invoke(event), 200
            except Exception as error:
                log.exception("%s failed", name)
                result, status = {"errorType": type(error).__name__}, 502
            self._answer(status, result)

        def _answer(self, status: int, result: Any) -> None:
            body = json.dumps(result).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the router logs requests

    return ThreadingHTTPServer(("127.0.0.1", port), Invocations)


class BatchGathering:
    """Lambda's MaximumBatchingWindowInSeconds for a stream, per shard: records are held until a
    batch is full or the first of them has waited the window (at once with no window)."""

    def __init__(self, batch_size: int, window_seconds: float) -> None:
        self._size, self._window = batch_size, window_seconds
        self._held: dict[str, tuple[float, list[dict[str, Any]]]] = {}

    def due(
        self, shard: str, records: list[dict[str, Any]], now: float
    ) -> list[list[dict[str, Any]]]:
        """The batches to invoke with now: every full one, and what is held once it waited."""
        since, held = self._held.pop(shard, (now, []))
        held = held + records
        full = len(held) - len(held) % self._size
        batches = [held[start : start + self._size] for start in range(0, full, self._size)]
        rest = held[full:]
        if rest and now - since >= self._window:
            batches.append(rest)
        elif rest:
            self._held[shard] = (since if not batches else now, rest)
        return batches

    def rest(self, shard: str) -> list[dict[str, Any]]:
        """What is held for a shard that ended: delivered without waiting."""
        return self._held.pop(shard, (0.0, []))[1]


class StreamSource:
    """A DynamoDB stream event source: filter, batch, retry, then the OnFailure destination."""

    def __init__(self, host: Host, streams: Any, sqs: Any, properties: dict[str, Any]) -> None:
        self._host, self._streams, self._sqs = host, streams, sqs
        self._arn = host.resources.resolve(properties["Stream"])
        self._batch = int(properties.get("BatchSize", 100))
        self._patterns = filter_patterns(properties)
        self._retries = int(properties.get("MaximumRetryAttempts", 0))
        self._start = str(properties.get("StartingPosition", "LATEST"))
        # A tumbling window: each batch names its shard and window, and carries the state the
        # function answered last in that window; an answer without `state` is a failure, as on
        # Lambda. (The window's final invocation, with no records, is not emulated.)
        self._window_seconds = int(properties.get("TumblingWindowInSeconds", 0))
        self._states: dict[str, tuple[datetime, dict[str, Any]]] = {}
        # MaximumBatchingWindowInSeconds, where honoured: records read are held (per shard)
        # until a batch is full or the first of them has waited this long.
        gather = properties.get("MaximumBatchingWindowInSeconds", 0) if host.stream_batching else 0
        self._gathering = BatchGathering(self._batch, float(gather))
        destination = properties.get("DestinationConfig", {}).get("OnFailure", {})
        target = destination.get("Destination")
        self._on_failure = None if target is None else host.resources.resolve(target)

    def run(self) -> None:
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        iterators = {
            shard["ShardId"]: self._streams.get_shard_iterator(
                StreamArn=self._arn, ShardId=shard["ShardId"], ShardIteratorType=self._start
            )["ShardIterator"]
            for shard in shards
        }
        while not self._host.stop.is_set():
            try:
                busy = self._read(iterators)
            except Exception:
                # The emulator timed out or refused a call: the iterator is kept, try again.
                log.exception("%s: reading %s failed; retrying", self._host.name, self._arn)
                busy = False
            if not busy:
                self._host.stop.wait(0.25)

    def _read(self, iterators: dict[str, str]) -> bool:
        """One pass over the shards; whether any record was delivered."""
        busy = False
        for shard_id, iterator in list(iterators.items()):
            page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
            records = [r for r in page.get("Records", []) if passes(self._patterns, r)]
            for batch in self._gathering.due(shard_id, records, time.monotonic()):
                busy = True
                self._deliver(batch, shard_id)
            # Moved on only once the page was delivered (or given up on by _deliver).
            if page.get("NextShardIterator"):
                iterators[shard_id] = page["NextShardIterator"]
            else:
                del iterators[shard_id]  # a closed shard: read to its end
                held = self._gathering.rest(shard_id)
                if held:
                    busy = True
                    self._deliver(held, shard_id)
        return busy

    def _deliver(self, records: list[dict[str, Any]], shard_id: str) -> None:
        pending = records
        for _ in range(self._retries + 1):
            window = self._window(shard_id)
            event = dynamodb_event(pending, self._arn, self._host.resources.region, window=window)
            try:
                response = self._host.invoke(event) or {}
            except Exception:
                log.exception("%s failed a stream batch", self._host.name)
                continue
            if window is not None:
                if not isinstance(response.get("state"), dict):
                    log.error("%s answered a windowed stream batch without state", self._host.name)
                    continue
                self._states[shard_id] = (window.start, response["state"])
            failures = [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]
            if not failures:
                return
            # Lambda resumes from the first failed sequence number.
            first = failures[0]
            index = next(
                n for n, r in enumerate(pending) if r["dynamodb"]["SequenceNumber"] == first
            )
            pending = pending[index:]
        if self._on_failure and pending:
            url = self._host.queue_url(self._on_failure)
            body = {
                "requestContext": {"condition": "RetryAttemptsExhausted"},
                "DDBStreamBatchInfo": {
                    "streamArn": self._arn,
                    "startSequenceNumber": pending[0]["dynamodb"]["SequenceNumber"],
                    "endSequenceNumber": pending[-1]["dynamodb"]["SequenceNumber"],
                    "batchSize": len(pending),
                },
            }
            self._sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))

    def _window(self, shard_id: str) -> TumblingWindow | None:
        """The tumbling window now (windows start on multiples of their length, UTC), with
        the shard's state in it; None without a window."""
        if not self._window_seconds:
            return None
        now = time.time()
        start = datetime.fromtimestamp(now - now % self._window_seconds, UTC)
        started, state = self._states.get(shard_id, (None, {}))
        return TumblingWindow(
            shard_id, start, self._window_seconds, state if started == start else {}
        )


def ready_folder(config: Path) -> Path:
    """Where hosts mark themselves ready, beside the stack's local.json."""
    return config.parent / "hosts-ready"


def ready_marker(config: Path, pid: int) -> Path:
    """The file a host makes once its handler is imported and it starts serving: the stack
    waits for every host's before it says it is up."""
    return ready_folder(config) / str(pid)


def _stop_when_orphaned(host: Host) -> None:
    """A host whose stack died without stopping it (SIGKILL) stops too: nothing to talk to."""
    parent = os.getppid()
    while not host.stop.wait(1.0):
        if os.getppid() != parent:
            host.stop.set()


# `--schedule-seconds` speeds up the schedules that keep the system moving (the sweep, every
# minute); those of hours (the definitions updater, the rescan policy) keep their own rate: a
# demo or a chaos run that sweeps every 2 s must not run freshclam every 2 s too.
FAST_SCHEDULE_SECONDS = 300


def schedule_interval(
    resources: Resources, properties: dict[str, Any], every_seconds: float | None = None
) -> float:
    """Seconds between runs of a schedule event: its rate, which may be a parameter's
    (`ScheduleExpression: !Ref DefinitionsUpdateSchedule`), or `every_seconds` instead for a
    rate of at most FAST_SCHEDULE_SECONDS."""
    rate = rate_seconds(str(resources.resolve(properties["ScheduleExpression"])))
    if every_seconds and rate <= FAST_SCHEDULE_SECONDS:
        return every_seconds
    return rate


def polled_by(
    slot: int, events: Iterable[tuple[str, dict[str, Any]]], resolve: Callable[[Any], Any]
) -> list[dict[str, Any]]:
    """The SQS event sources a function's host number `slot` (from 0) polls: each source is
    polled by at most its ScalingConfig.MaximumConcurrency of the function's hosts, as Lambda
    gives it at most that many of the function's environments. A job type's low lane (2) thus
    leaves its third host and up to the normal and high lanes alone."""
    return [
        properties
        for kind, properties in events
        if kind == "SQS"
        and slot < int(resolve(properties.get("ScalingConfig", {}).get("MaximumConcurrency", 1000)))
    ]


def rate_seconds(expression: str) -> float:
    """Seconds between runs of `rate(N unit)`; cron schedules are not emulated."""
    if not expression.startswith("rate(") or not expression.endswith(")"):
        raise ValueError(f"the local stack runs rate() schedules only, not {expression!r}")
    amount, unit = expression[5:-1].split()
    seconds = {
        "minute": 60,
        "minutes": 60,
        "hour": 3600,
        "hours": 3600,
        "day": 86400,
        "days": 86400,
    }
    return int(amount) * seconds[unit]


def main() -> int:
    parser = argparse.ArgumentParser(description="Runs one function of the template locally.")
    parser.add_argument("--config", type=Path, required=True, help="the stack's local.json")
    parser.add_argument("--function", required=True)
    parser.add_argument("--source", choices=["sqs", "schedule", "stream", "api", "invoke"])
    parser.add_argument("--port", type=int, help="api: the loopback port to serve on")
    parser.add_argument(
        "--slot", type=int, default=0, help="sqs: this host's number among its function's pollers"
    )
    parser.add_argument("--every", type=float, help="schedule: seconds between runs")
    parser.add_argument("--event", type=Path, help="invoke: the event file")
    parser.add_argument("--result", type=Path, help="invoke: write the function's answer here")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    config = json.loads(arguments.config.read_text())
    root = Path(config["project_root"])
    spec = function_definitions(load_template(root / "template.yaml"))[arguments.function]
    faults = parse_faults(os.environ.get(FAULTS_VARIABLE, "[]"))
    visibility = os.environ.get(VISIBILITY_VARIABLE)
    host = Host(
        arguments.function,
        spec,
        Resources.from_json(config["resources"]),
        root,
        faults=faults,
        visibility_seconds=None if visibility is None else int(visibility),
        stream_batching=os.environ.get(STREAM_BATCHING_VARIABLE) == "1",
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: host.stop.set())
    threading.Thread(target=_stop_when_orphaned, args=(host,), daemon=True).start()
    if arguments.source == "invoke":
        event = json.loads(arguments.event.read_text()) if arguments.event else {}
        answer = json.dumps(host.invoke(event), indent=2, default=str)
        if arguments.result is not None:
            arguments.result.write_text(answer)  # the function's own logs share stdout
        else:
            print(answer)
        return 0
    marker = ready_marker(arguments.config, os.getpid())
    marker.parent.mkdir(exist_ok=True)
    marker.touch()
    runners: dict[str, Callable[[], None]] = {
        "sqs": lambda: host.run_sqs(arguments.slot),
        "schedule": lambda: host.run_schedule(arguments.every),
        "stream": host.run_stream,
        "api": lambda: host.serve_api(arguments.port),
    }
    with contextlib.suppress(KeyboardInterrupt):
        runners[arguments.source]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
