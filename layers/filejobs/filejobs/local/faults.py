"""Faults the local stack injects on request, to show how the system recovers from them.

`filejobs dev --faults FILE` takes a JSON list of rules; each applies to the jobs (or messages)
it matches, by job type and by a substring of the uploaded object's key:

    [{"kind": "transient", "job_type": "thumbnail_generation", "key_contains": "flaky",
      "attempts": 2},
     {"kind": "slow", "job_type": "compression", "key_contains": "big", "seconds": 20},
     {"kind": "poison", "job_type": "document_preview", "key_contains": "poison"},
     {"kind": "duplicate", "function": "IngestFunction"}]

- transient: the job's processor raises a TransientError on its first `attempts` attempts;
- slow: each attempt waits `seconds` before working, stopping early when the job is cancelled;
- poison: the worker gets the job's message with its body mangled, every time, so the record
  fails on each delivery until the queue moves it to its dead-letter queue;
- duplicate: every message the function receives is delivered a second time (S3's and SQS's
  at-least-once delivery), as a separate message.

Nothing here is imported by the deployed code: the host applies the rules around the handler.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from filejobs.domain.retry import TransientError
from filejobs.processors.base import Processor, StopRequested, Work

FAULTS_VARIABLE = "FILEJOBS_LOCAL_FAULTS"
DUPLICATE_ATTRIBUTE = "filejobs-local-duplicate"
POISONED_BODY = "poisoned by the local stack's fault injection"


class FaultKind(StrEnum):
    TRANSIENT = "transient"
    SLOW = "slow"
    POISON = "poison"
    DUPLICATE = "duplicate"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    job_type: str | None = None  # None: every job type
    key_contains: str | None = None  # None: every object
    function: str | None = None  # duplicate: the function (logical id) whose messages repeat
    attempts: int = 1
    seconds: float = 5.0

    def matches(self, job_type: str, key: str) -> bool:
        return (self.job_type is None or self.job_type == job_type) and (
            self.key_contains is None or self.key_contains in key
        )


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


def with_processor_faults(processor: Processor, faults: list[Fault]) -> Processor:
    """The processor, failing or slowed down as the matching rules say."""
    rules = [f for f in faults if f.kind in (FaultKind.TRANSIENT, FaultKind.SLOW)]
    if not rules:
        return processor

    def faulty(work: Work) -> dict[str, Any]:
        job = work.job
        key = str((job.input_data or {}).get("key", ""))
        for rule in rules:
            if not rule.matches(job.job_type.value, key):
                continue
            if rule.kind is FaultKind.TRANSIENT and job.attempt <= rule.attempts:
                raise TransientError(
                    f"injected transient failure (attempt {job.attempt} of {rule.attempts})"
                )
            if rule.kind is FaultKind.SLOW:
                _wait(rule.seconds, work.should_stop)
        return processor(work)

    return faulty


def _wait(seconds: float, should_stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if should_stop():
            raise StopRequested
        time.sleep(0.1)
