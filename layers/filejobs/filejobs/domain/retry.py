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


class ObjectGoneError(PermanentError):
    """The object version a job or an upload names is not there (any more): quarantined,
    deleted, or never stored. The adapters that read objects raise it in place of their
    storage's own "no such key"."""


type TransientTest = Callable[[BaseException], bool]
"""Whether one error (not its causes) is known to pass if tried again."""


def is_transient_kind(error: BaseException) -> bool:
    """What the domain knows is transient on its own: its TransientError, a timeout, a dropped
    connection. A cloud SDK's throttling codes are the adapters' to recognise
    (adapters/aws_errors.py) and reach a policy as its `transient` test."""
    return isinstance(error, TransientError | TimeoutError | ConnectionError)


def classify(error: BaseException, transient: TransientTest = is_transient_kind) -> ErrorKind:
    """Transient only for what is known to pass (the error or one it wraps); everything else,
    a bug included, is permanent: its job fails at once with its reason instead of spending its
    retries on an answer that will not change."""
    if isinstance(error, PermanentError):
        return ErrorKind.PERMANENT
    return ErrorKind.TRANSIENT if _in_chain(error, transient) else ErrorKind.PERMANENT


_CHAIN_DEPTH = 3


def _in_chain(error: BaseException, test: TransientTest) -> bool:
    for _ in range(_CHAIN_DEPTH + 1):
        if test(error):
            return True
        # Libraries wrap an error (PynamoDB's PutError.cause) or chain it (raise ... from).
        wrapped = getattr(error, "cause", None) or error.__cause__
        if not isinstance(wrapped, BaseException):
            return False
        error = wrapped
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter and a cap: `random() * min(cap, base * 2^(n-1))`.

    Full jitter spreads retries of jobs that failed together (a throttled dependency) instead of
    having them all come back at the same instant.
    """

    base: timedelta = timedelta(seconds=2)
    cap: timedelta = timedelta(minutes=15)
    # Which foreign errors are worth a retry: the runtime passes the AWS adapters' test
    # (throttling codes, network failures); the domain alone knows only its own errors.
    transient: TransientTest = is_transient_kind

    def classify(self, error: BaseException) -> ErrorKind:
        return classify(error, self.transient)

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
        if self.classify(error) is ErrorKind.PERMANENT or not job.can_retry():
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
