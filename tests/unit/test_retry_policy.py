"""Retry policy: full-jitter exponential backoff with a cap, and transient/permanent errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)
from pynamodb.exceptions import PutError

from filejobs.adapters.aws_errors import AWS_RETRY_POLICY
from filejobs.domain.job import JobType
from filejobs.domain.retry import (
    DispatchPolicy,
    ErrorKind,
    ObjectGoneError,
    PermanentError,
    RetryPolicy,
    TransientError,
    classify,
)
from tests.conftest import FakeClock
from tests.factories import pending_job

POLICY = RetryPolicy(base=timedelta(seconds=2), cap=timedelta(minutes=1))


class AwsError(Exception):
    """Shaped like botocore's ClientError: the adapters match on the error code only."""

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


def _client_error(code: str, status: int = 400) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {}}
    response["ResponseMetadata"]["HTTPStatusCode"] = status
    return ClientError(response, "PutObject")


def _wrapped_by_pynamodb(code: str) -> PutError:
    return PutError("Failed to put item", _client_error(code))


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (PermanentError("bad input"), ErrorKind.PERMANENT),
        (TransientError("flaky"), ErrorKind.TRANSIENT),
        (AwsError("SlowDown"), ErrorKind.TRANSIENT),
        (AwsError("ProvisionedThroughputExceededException"), ErrorKind.TRANSIENT),
        (_client_error("ThrottlingException"), ErrorKind.TRANSIENT),
        (_client_error("SomethingNew", status=503), ErrorKind.TRANSIENT),
        (_client_error("SomethingNew", status=429), ErrorKind.TRANSIENT),
        (_wrapped_by_pynamodb("ThrottlingException"), ErrorKind.TRANSIENT),
        (EndpointConnectionError(endpoint_url="https://s3.amazonaws.com"), ErrorKind.TRANSIENT),
        (ReadTimeoutError(endpoint_url="https://s3.amazonaws.com"), ErrorKind.TRANSIENT),
        (TimeoutError("read timed out"), ErrorKind.TRANSIENT),
        (ConnectionResetError("reset by peer"), ErrorKind.TRANSIENT),
        (AwsError("NoSuchKey"), ErrorKind.PERMANENT),
        (ObjectGoneError("s3://uploads/k is gone"), ErrorKind.PERMANENT),
        (AwsError("AccessDenied"), ErrorKind.PERMANENT),
        (_client_error("InvalidArgument"), ErrorKind.PERMANENT),
        (_wrapped_by_pynamodb("ValidationException"), ErrorKind.PERMANENT),
        # A request botocore refuses before sending (non-ASCII metadata, a missing parameter)
        # will be refused again: retrying it only delays the job's failure.
        (
            ParamValidationError(report="Non ascii characters found in S3 metadata"),
            ErrorKind.PERMANENT,
        ),
        (RuntimeError("an unknown bug"), ErrorKind.PERMANENT),
        (KeyError("version_id"), ErrorKind.PERMANENT),
    ],
)
def test_errors_are_transient_only_when_known_to_pass(
    error: BaseException, kind: ErrorKind
) -> None:
    assert AWS_RETRY_POLICY.classify(error) is kind


def test_the_domain_alone_retries_only_its_own_transient_errors() -> None:
    # AWS's codes are the adapters' knowledge: without their test a throttle is not recognised
    assert classify(_client_error("ThrottlingException")) is ErrorKind.PERMANENT
    assert RetryPolicy().classify(AwsError("SlowDown")) is ErrorKind.PERMANENT
    # what the domain knows it recognises anywhere in the chain of causes
    wrapped = RuntimeError("upload failed")
    wrapped.__cause__ = TimeoutError("read timed out")
    assert classify(wrapped) is ErrorKind.TRANSIENT


def test_a_transient_error_may_say_how_soon_a_retry_can_help(clock: FakeClock) -> None:
    job = pending_job(clock.now)
    later = TransientError("definitions missing", retry_after=timedelta(minutes=5))
    assert POLICY.retry_at(job, later, clock.now, rand=lambda: 0.5) == clock.now + timedelta(
        minutes=5
    )
    # and never sooner than its own backoff would have retried
    soon = TransientError("flaky", retry_after=timedelta(milliseconds=1))
    assert POLICY.retry_at(job, soon, clock.now, rand=lambda: 0.5) == clock.now + timedelta(
        seconds=1
    )


def test_unclaimed_pending_jobs_are_rechecked_with_growing_gaps(clock: FakeClock) -> None:
    policy = DispatchPolicy(grace=timedelta(minutes=2), cap=timedelta(minutes=10))
    job = pending_job(clock.now)
    gaps = []
    for count in range(5):
        job.dispatch_count = count
        gaps.append(policy.next_check(job, clock.now) - clock.now)
    assert gaps == [timedelta(minutes=m) for m in (2, 4, 8, 10, 10)]
