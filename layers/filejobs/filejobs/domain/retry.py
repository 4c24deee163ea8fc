"""Retry policy: which errors are worth retrying, and when the next attempt runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from filejobs.domain.job import ProcessingJob


class TransientError(Exception):
    """A failure that may succeed on a later attempt (throttling, a timeout, a flaky peer)."""


class PermanentError(Exception):
    """A failure no retry can fix (corrupt input, unsupported format): fail the job now."""


class ErrorKind(StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"


# AWS error codes that say "try again later" / "this will never work". Matched by code, so the
# domain needs no botocore import.
_TRANSIENT_AWS_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "SlowDown",
        "InternalError",
        "InternalServerError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "TransactionConflictException",
    }
)
_PERMANENT_AWS_CODES = frozenset(
    {"NoSuchKey", "NoSuchBucket", "AccessDenied", "InvalidObjectState", "NoSuchVersion"}
)


# The source object is not there (any more): a quarantine or a delete may have moved it.
_MISSING_OBJECT_CODES = frozenset({"NoSuchKey", "NoSuchVersion", "404", "NotFound"})


def is_missing_object(error: BaseException) -> bool:
    return _aws_error_code(error) in _MISSING_OBJECT_CODES


def classify(error: BaseException) -> ErrorKind:
    """Transient unless we know better: an unknown error gets the bounded retry budget."""
    if isinstance(error, PermanentError):
        return ErrorKind.PERMANENT
    if isinstance(error, TransientError):
        return ErrorKind.TRANSIENT
    code = _aws_error_code(error)
    if code in _PERMANENT_AWS_CODES:
        return ErrorKind.PERMANENT
    if code in _TRANSIENT_AWS_CODES:
        return ErrorKind.TRANSIENT
    return ErrorKind.TRANSIENT


def _aws_error_code(error: BaseException) -> str | None:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter and a cap: `random() * min(cap, base * 2^(n-1))`.

    Full jitter spreads retries of jobs that failed together (a throttled dependency) instead of
    having them all come back at the same instant.
    """

    base: timedelta = timedelta(seconds=2)
    cap: timedelta = timedelta(minutes=15)

    def delay(self, retry_number: int, rand: Callable[[], float] = random.random) -> timedelta:
        if retry_number < 1:
            raise ValueError("retry_number starts at 1")
        ceiling = min(self.cap, self.base * (1 << min(retry_number - 1, 32)))
        return ceiling * rand()

    def retry_at(
        self,
        job: ProcessingJob,
        error: BaseException,
        now: datetime,
        rand: Callable[[], float] = random.random,
    ) -> datetime | None:
        """When to run the next attempt, or None when the job must fail now."""
        if classify(error) is ErrorKind.PERMANENT or not job.can_retry():
            return None
        return now + self.delay(job.retry_count + 1, rand)


@dataclass(frozen=True)
class DispatchPolicy:
    """How long a pending job may wait unclaimed before the sweep sends its message again.

    A pending job whose message was lost (the ingest Lambda died between its write and its
    send) is re-dispatched after `grace`; later checks back off to `cap` so a long queue backlog
    is not flooded with copies.
    """

    grace: timedelta = timedelta(minutes=2)
    cap: timedelta = timedelta(hours=1)
    # With the defaults, about a day of re-dispatches before a pending job is given up on.
    max_dispatches: int = 30

    def gives_up(self, job: ProcessingJob) -> bool:
        return job.dispatch_count >= self.max_dispatches

    def next_check(self, job: ProcessingJob, now: datetime) -> datetime:
        return now + min(self.cap, self.grace * (1 << min(job.dispatch_count, 16)))
