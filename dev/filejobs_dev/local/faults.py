"""Faults the local stack injects on request, to show how the system recovers from them.

`filejobs dev --faults FILE` takes a JSON list of rules; each applies to the jobs (or messages)
it matches, by job type and by a substring of the uploaded object's key:

    [{"kind": "transient", "job_type": "thumbnail_generation", "key_contains": "flaky",
      "attempts": 2},
     {"kind": "slow", "job_type": "compression", "key_contains": "big", "seconds": 20},
     {"kind": "poison", "job_type": "document_preview", "key_contains": "poison"},
     {"kind": "duplicate", "function": "IngestFunction"},
     {"kind": "crash", "probability": 0.05},
     {"kind": "throttle", "function": "SweepFunction", "every": 30, "seconds": 3,
      "probability": 0.5},
     {"kind": "noop", "job_type": "compression"},
     {"kind": "drop", "function": "IngestRouterFunction", "probability": 0.03}]

- transient: the job's processor raises a TransientError on its first `attempts` attempts;
- slow: each attempt waits `seconds` before working, stopping early when the job is cancelled;
- poison: the worker gets the job's message with its body mangled, every time, so the record
  fails on each delivery until the queue moves it to its dead-letter queue;
- duplicate: every message the function receives is delivered a second time (S3's and SQS's
  at-least-once delivery), as a separate message;
- crash: the worker's process dies in the middle of the job (before its processor runs, or
  after it ran and wrote its outputs), writing nothing: the job stays `running` until its lease
  expires and the sweep takes it back; the host exits with CRASH_EXIT_CODE and the stack
  starts it again, as Lambda replaces a crashed execution environment;
- throttle: bursts of DynamoDB throttling. Every `every` seconds a burst of `seconds` starts,
  during which each DynamoDB request of the function is refused with ThrottlingException
  before it is sent; botocore's retries see it as they would see AWS's;
- drop: every message the function receives is deleted unread, as if it had never been sent: on
  the ingest router, an S3 notification lost before the ingest queue (a changed notification
  configuration, a deleted queue policy, an outage; issue 46's emulator race). Nothing but the
  reconciler (services/reconciler.py) can then find the upload;
- noop: the job's processor is not run: the attempt returns NOOP_RESULT at once, and the job is
  claimed and completed as any other (a virus scan's result has no INFECTED verdict, so its file
  is recorded clean and its gated jobs are released). The machinery alone is then measured
  (bench/local_stack.py). Not a fault, so nothing goes to the fault log. The other rules still
  apply around it (a matching crash, transient or slow rule strikes as usual).

`probability` (default 1) makes a rule apply to that share of what it matches: attempts
(transient, crash, noop), messages (duplicate, drop), requests within a burst (throttle). The
draw is made from `seed` and what it decides on (job and attempt, message id), so a decision is
the same in whichever process makes it. With FILEJOBS_LOCAL_FAULT_LOG set, each injection
appends a line of JSON to that file, for a harness to count.

Nothing here is imported by the deployed code: the host applies the rules around the handler.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import unquote_plus

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.endpoint import Endpoint

from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.retry import TransientError
from filejobs.processors.base import Processor, StopRequested, Work

FAULTS_VARIABLE = "FILEJOBS_LOCAL_FAULTS"
FAULT_LOG_VARIABLE = "FILEJOBS_LOCAL_FAULT_LOG"
# A host that exits with this code was crashed on purpose: the stack restarts it without
# counting the exit towards its crash-loop limit.
CRASH_EXIT_CODE = 86
DUPLICATE_ATTRIBUTE = "filejobs-local-duplicate"
POISONED_BODY = "poisoned by the local stack's fault injection"


class FaultKind(StrEnum):
    TRANSIENT = "transient"
    SLOW = "slow"
    POISON = "poison"
    DUPLICATE = "duplicate"
    CRASH = "crash"
    THROTTLE = "throttle"
    NOOP = "noop"
    DROP = "drop"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    job_type: str | None = None  # None: every job type
    key_contains: str | None = None  # None: every object
    # duplicate: the function (logical id) whose messages repeat; drop: whose messages are
    # lost; throttle: the function whose requests are refused (None: every function but the
    # API's)
    function: str | None = None
    attempts: int = 1
    seconds: float = 5.0
    probability: float = 1.0
    every: float = 30.0  # throttle: seconds from the start of one burst to the next
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be between 0 and 1, not {self.probability}")
        if self.kind is FaultKind.THROTTLE and not 0 < self.seconds <= self.every:
            raise ValueError("a throttle burst lasts 0 < seconds <= every")

    def matches(self, job_type: str, key: str) -> bool:
        return (self.job_type is None or self.job_type == job_type) and (
            self.key_contains is None or self.key_contains in key
        )

    def bursting(self, now: float) -> bool:
        """Whether a throttle burst is on at `now` (epoch seconds): every host bursts at the
        same moments, as a hot table throttles every client at once."""
        return now % self.every < self.seconds

    def fires(self, *subject: object) -> bool:
        """Whether the rule applies to `subject` (a job attempt, a message)."""
        return self.probability >= 1.0 or self.draw(*subject) < self.probability

    def draw(self, *subject: object) -> float:
        """A number in [0, 1) that is the same for the same subject, rule and seed, in any
        process: which attempts fail does not depend on which host gets the message."""
        text = "|".join(str(part) for part in (self.seed, self.kind, *subject))
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


class FaultConfigError(ValueError):
    """A fault rule that cannot be applied (unknown kind, field or value)."""


def parse_faults(text: str) -> list[Fault]:
    try:
        rules = json.loads(text)
    except json.JSONDecodeError as error:
        raise FaultConfigError(f"fault rules are not JSON: {error}") from error
    if not isinstance(rules, list):
        raise FaultConfigError("fault rules must be a JSON list of objects")
    faults = []
    for number, rule in enumerate(rules, 1):
        if not isinstance(rule, dict):
            raise FaultConfigError(f"rule {number} is not an object")
        try:
            faults.append(Fault(**{**rule, "kind": FaultKind(str(rule.get("kind")))}))
        except (TypeError, ValueError) as error:
            raise FaultConfigError(f"rule {number}: {error}") from error
    return faults


def record_injection(kind: FaultKind, **details: object) -> None:
    """One line in the fault log (FILEJOBS_LOCAL_FAULT_LOG), written through before the fault
    strikes: a crash must not lose its own record."""
    path = os.environ.get(FAULT_LOG_VARIABLE)
    if not path:
        return
    line = json.dumps({"kind": str(kind), "at": time.time(), **details}, default=str) + "\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line.encode())  # one write with O_APPEND: lines never interleave
    finally:
        os.close(descriptor)


def crash() -> None:
    """The process dies on the spot: no exception handler, no finally, no buffered write runs."""
    os._exit(CRASH_EXIT_CODE)


def dropped_messages(
    faults: list[Fault], function: str, received: list[dict[str, Any]]
) -> set[str]:
    """The ids of the received messages (SQS's ReceiveMessage entries) the function's drop
    rules lose: each logged with what its body names, for the audit to tell which uploads no
    notification announced."""
    rules = [f for f in faults if f.kind is FaultKind.DROP and f.function == function]
    dropped: set[str] = set()
    for message in received:
        if any(rule.fires(message["MessageId"]) for rule in rules):
            record_injection(
                FaultKind.DROP, function=function, message=message["MessageId"],
                keys=_keys_named(message.get("Body", "")),
            )  # fmt: skip
            dropped.add(message["MessageId"])
    return dropped


def _keys_named(body: str) -> list[str]:
    """The object keys an S3 notification names (URL-decoded); [] for any other body."""
    try:
        records = json.loads(body).get("Records", [])
        return [unquote_plus(str(r["s3"]["object"]["key"])) for r in records]
    except (ValueError, AttributeError, KeyError, TypeError):
        return []


PROCESSOR_KINDS = (FaultKind.TRANSIENT, FaultKind.SLOW, FaultKind.CRASH, FaultKind.NOOP)
# What a job whose processor a noop rule skipped returns (each attempt gets a copy); a skipped
# virus scan says CLEAN, so the file's other jobs run; a skipped digest names a content of the
# file's own, so the deduplication check still claims it and records it on the file.
NOOP_RESULT: dict[str, Any] = {"noop": True}
NOOP_SCAN_RESULT: dict[str, Any] = {"noop": True, "verdict": "CLEAN", "engines": {}}


def with_processor_faults(
    processor: Processor, faults: list[Fault], die: Callable[[], None] = crash
) -> Processor:
    """The processor, failing, slowed down, crashing or skipped as the matching rules say."""
    rules = [f for f in faults if f.kind in PROCESSOR_KINDS]
    if not rules:
        return processor

    def faulty(work: Work) -> dict[str, Any]:
        job = work.job
        key = str((job.input_data or {}).get("key", ""))
        matching = [rule for rule in rules if rule.matches(job.job_type.value, key)]
        crash_after = skip = False
        for rule in matching:
            if not rule.fires(job.id, job.attempt):
                continue
            if rule.kind is FaultKind.TRANSIENT and job.attempt <= rule.attempts:
                record_injection(rule.kind, job_id=job.id, attempt=job.attempt)
                raise TransientError(
                    f"injected transient failure (attempt {job.attempt} of {rule.attempts})"
                )
            if rule.kind is FaultKind.SLOW:
                _wait(rule.seconds, work.should_stop)
            if rule.kind is FaultKind.CRASH:
                # Half the crashes come after the processor wrote its outputs: the retry must
                # write them again without harm, and the job still completes once.
                crash_after = rule.draw(job.id, job.attempt, "after") < 0.5
                if not crash_after:
                    _crash_now(die, job.id, job.attempt, "before")
            if rule.kind is FaultKind.NOOP:
                skip = True
        result = _noop_result(job) if skip else processor(work)
        if crash_after:
            _crash_now(die, job.id, job.attempt, "after")
        return result

    return faulty


def _noop_result(job: ProcessingJob) -> dict[str, Any]:
    if job.job_type is JobType.VIRUS_SCAN:
        return dict(NOOP_SCAN_RESULT)
    if job.job_type is JobType.DEDUPLICATION_CHECK:
        return {**NOOP_RESULT, "sha256": hashlib.sha256(job.file_id.encode()).hexdigest()}
    return dict(NOOP_RESULT)


def _crash_now(die: Callable[[], None], job_id: str, attempt: int, when: str) -> None:
    record_injection(FaultKind.CRASH, job_id=job_id, attempt=attempt, when=when)
    die()


THROTTLED_BODY = json.dumps(
    {
        "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        "message": "Rate of requests exceeds the allowed throughput (injected by the local stack)",
    }
).encode()


class _Body:
    """What botocore reads an HTTP response's body from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def throttle_dynamodb(
    rules: list[Fault],
    function: str,
    clock: Callable[[], float] = time.time,
    rand: Callable[[], float] = random.random,
) -> None:
    """Every DynamoDB request this process sends during a burst of one of `rules` is answered
    with a ThrottlingException instead of being sent, below botocore's retry handler: the SDK's
    backoff and the code's error handling see it exactly as they would see AWS's."""
    if not rules:
        return
    endpoints: Any = Endpoint  # _send and _endpoint_prefix are private: not in the stubs
    original = endpoints._send

    def send(endpoint: Any, request: AWSPreparedRequest) -> AWSResponse:
        if endpoint._endpoint_prefix == "dynamodb":  # not streams.dynamodb
            now = clock()
            for rule in rules:
                if rule.bursting(now) and rand() < rule.probability:
                    operation = _operation_of(request)
                    record_injection(rule.kind, function=function, operation=operation)
                    headers = HTTPHeaders()
                    headers["Content-Type"] = "application/x-amz-json-1.0"
                    return AWSResponse(request.url, 400, headers, _Body(THROTTLED_BODY))
        response: AWSResponse = original(endpoint, request)
        return response

    endpoints._send = send


def _operation_of(request: AWSPreparedRequest) -> str:
    """ "DynamoDB_20120810.PutItem" -> "PutItem" (the header may be bytes)."""
    target = request.headers.get("X-Amz-Target", b"")
    text = target.decode() if isinstance(target, bytes) else str(target)
    return text.rpartition(".")[2]


def _wait(seconds: float, should_stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if should_stop():
            raise StopRequested
        time.sleep(0.1)
