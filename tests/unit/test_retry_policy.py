"""Retry policy: full-jitter exponential backoff with a cap, and transient/permanent errors."""

from __future__ import annotations

from datetime import timedelta

import pytest

from filejobs.domain.job import JobType
from filejobs.domain.retry import (
    DispatchPolicy,
    ErrorKind,
    PermanentError,
    RetryPolicy,
    TransientError,
    classify,
)
from tests.conftest import FakeClock
from tests.factories import pending_job

POLICY = RetryPolicy(base=timedelta(seconds=2), cap=timedelta(minutes=1))


class AwsError(Exception):
    """Shaped like botocore's ClientError: the domain matches on the error code only."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}}


@pytest.mark.parametrize(
    ("retry_number", "ceiling_seconds"), [(1, 2), (2, 4), (3, 8), (5, 32), (6, 60), (60, 60)]
)
def test_the_ceiling_doubles_per_retry_up_to_the_cap(
    retry_number: int, ceiling_seconds: int
) -> None:
    assert POLICY.delay(retry_number, rand=lambda: 1.0) == timedelta(seconds=ceiling_seconds)


def test_full_jitter_spreads_the_delay_from_zero_to_the_ceiling() -> None:
    assert POLICY.delay(3, rand=lambda: 0.0) == timedelta(0)
    assert POLICY.delay(3, rand=lambda: 0.25) == timedelta(seconds=2)


def test_jittered_delays_of_simultaneous_failures_differ() -> None:
    delays = {POLICY.delay(4) for _ in range(50)}
    assert len(delays) > 40
    assert all(timedelta(0) <= d <= timedelta(seconds=16) for d in delays)


def test_retry_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        POLICY.delay(0)


def test_a_transient_error_is_retried_after_the_backoff(clock: FakeClock) -> None:
    job = pending_job(clock.now)
    retry_at = POLICY.retry_at(job, TransientError("timeout"), clock.now, rand=lambda: 0.5)
    assert retry_at == clock.now + timedelta(seconds=1)


def test_a_permanent_error_is_never_retried(clock: FakeClock) -> None:
    job = pending_job(clock.now)
    assert POLICY.retry_at(job, PermanentError("corrupt"), clock.now) is None


def test_no_retry_once_the_budget_is_spent(clock: FakeClock) -> None:
    job = pending_job(clock.now, JobType.COMPRESSION)
    job.retry_count = job.max_retries
    assert POLICY.retry_at(job, TransientError("again"), clock.now) is None


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (PermanentError("bad input"), ErrorKind.PERMANENT),
        (TransientError("flaky"), ErrorKind.TRANSIENT),
        (AwsError("SlowDown"), ErrorKind.TRANSIENT),
        (AwsError("ProvisionedThroughputExceededException"), ErrorKind.TRANSIENT),
        (AwsError("NoSuchKey"), ErrorKind.PERMANENT),
        (AwsError("AccessDenied"), ErrorKind.PERMANENT),
        (TimeoutError("read timed out"), ErrorKind.TRANSIENT),
        (RuntimeError("an unknown bug"), ErrorKind.TRANSIENT),
    ],
)
def test_errors_are_classified(error: BaseException, kind: ErrorKind) -> None:
    assert classify(error) is kind


def test_unclaimed_pending_jobs_are_rechecked_with_growing_gaps(clock: FakeClock) -> None:
    policy = DispatchPolicy(grace=timedelta(minutes=2), cap=timedelta(minutes=10))
    job = pending_job(clock.now)
    gaps = []
    for count in range(5):
        job.dispatch_count = count
        gaps.append(policy.next_check(job, clock.now) - clock.now)
    assert gaps == [timedelta(minutes=m) for m in (2, 4, 8, 10, 10)]
