"""Retry policy: which errors are worth retrying, and when the next attempt runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from filejobs.domain.job import ProcessingJob


class TransientError(Exception):
    """A failure that may succeed on a later attempt (throttling, a timeout, a flaky peer).

    `retry_after`: the soonest a retry can help (the virus scan's definitions are missing: the
    next updater run is minutes away, so seconds of backoff would spend the retries for nothing).
    """

    def __init__(self, *args: object, retry_after: timedelta | None = None) -> None:
        super().__init__(*args)
        self.retry_after = retry_after


class PermanentError(Exception):
    """A failure no retry can fix (corrupt input, unsupported format): fail the job now."""


class ErrorKind(StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"


# AWS error codes that say "try again later". Matched by code, so the domain needs no botocore
# import. Transient is an allow-list: an error not known to pass (a ParamValidationError, a
# KeyError, any bug) fails the job at once with its reason, instead of spending its retries on
# an answer that will not change.
_TRANSIENT_AWS_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "InternalError",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "RequestTimeTooSkewed",
        "TransactionConflictException",
        "TransactionInProgressException",
        "LimitExceededException",
    }
)
# botocore's network failures (a connection refused, reset or timed out mid-request), by class
# name: any of them in an error's class hierarchy makes it transient.
_TRANSIENT_NETWORK_ERRORS = frozenset(
    {
        "HTTPClientError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ProxyConnectionError",
        "ResponseStreamingError",
        "IncompleteReadError",
    }
)
_SERVER_ERROR = 500
_TOO_MANY_REQUESTS = 429


# The source object is not there (any more): a quarantine or a delete may have moved it.
_MISSING_OBJECT_CODES = frozenset({"NoSuchKey", "NoSuchVersion", "404", "NotFound"})


def is_missing_object(error: BaseException) -> bool:
    return _aws_error_code(error) in _MISSING_OBJECT_CODES


def classify(error: BaseException) -> ErrorKind:
    """Transient only for what is known to pass; everything else is permanent."""
    if isinstance(error, PermanentError):
        return ErrorKind.PERMANENT
    return ErrorKind.TRANSIENT if _is_transient(error) else ErrorKind.PERMANENT


def _is_transient(error: BaseException, depth: int = 0) -> bool:
    if isinstance(error, TransientError | TimeoutError | ConnectionError):
        return True
    if any(kind.__name__ in _TRANSIENT_NETWORK_ERRORS for kind in type(error).__mro__):
        return True
    if _aws_error_code(error) in _TRANSIENT_AWS_CODES:
        return True
    status = _http_status(error)
    if status is not None and (status >= _SERVER_ERROR or status == _TOO_MANY_REQUESTS):
        return True
    # PynamoDB wraps botocore's error (PutError.cause); others chain it (raise ... from).
    wrapped = getattr(error, "cause", None) or error.__cause__
    return isinstance(wrapped, BaseException) and depth < 3 and _is_transient(wrapped, depth + 1)


def _http_status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


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
        delay = self.delay(job.retry_count + 1, rand)
        soonest = error.retry_after if isinstance(error, TransientError) else None
        return now + (delay if soonest is None else max(delay, soonest))


@dataclass(frozen=True)
class DispatchPolicy:
    """How long a pending job may wait unclaimed before the sweep sends its message again.

    A pending job whose message was lost (the ingest Lambda died between its write and its
    send) is re-dispatched after `grace`, once its queue has got past it (domain/backlog.py); a
    job still queued behind a backlog is not sent again, only looked at later, less often the
    longer it has waited (up to `patience`). Only sends count against `max_dispatches`: a job
    whose every copy was received and none claimed has no worker, and is given up on; a job
    that waits in a backlog for days never is.
    """

    grace: timedelta = timedelta(minutes=2)
    cap: timedelta = timedelta(hours=1)
    # With the defaults, about a day of re-dispatches that reached a worker and were not
    # claimed before a pending job is given up on.
    max_dispatches: int = 30
    patience: timedelta = timedelta(hours=6)

    def gives_up(self, job: ProcessingJob) -> bool:
        return job.dispatch_count >= self.max_dispatches

    def next_check(self, job: ProcessingJob, now: datetime) -> datetime:
        return now + min(self.cap, self.grace * (1 << min(job.dispatch_count, 16)))

    def next_look(self, waiting_since: datetime, now: datetime) -> datetime:
        """When to look again at a job that may still be queued: after as long again as it has
        waited so far (so a backlog costs a few checks per job, not one per sweep run)."""
        waited = max(now - waiting_since, timedelta(0))
        return now + min(self.patience, max(self.grace, waited))
