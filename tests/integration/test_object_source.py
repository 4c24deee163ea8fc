"""A processor's reads of its object: the exact version its job names, and S3's "no such key or
version" turned into the domain's ObjectGoneError, which the services act on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.exceptions import ClientError

from filejobs.adapters.aws_errors import AWS_RETRY_POLICY
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.retry import ErrorKind, ObjectGoneError
from filejobs.processors.source import (
    ObjectSource,
    ObjectTooLargeError,
    ReadLimits,
    ReadTooLongError,
)
from tests.factories import pending_job

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

BUCKET = "uploads-source"
KEY = "uploads/acme/reports/q3 ünïcode.pdf"


@pytest.fixture
def s3(aws: None) -> S3Client:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return client


def job_reading(version_id: str | None, now: datetime) -> ProcessingJob:
    job = pending_job(now, JobType.COMPRESSION)
    job.input_data = {"bucket": BUCKET, "key": KEY, "version_id": version_id}
    return job


def never() -> bool:
    return False


Read = Callable[[ObjectSource, ProcessingJob], object]
READS: dict[str, Read] = {
    "size (HeadObject)": lambda source, job: source.size(job),
    "head (ranged GetObject)": lambda source, job: source.head(job, 16),
    "chunks (GetObject)": lambda source, job: b"".join(source.chunks(job, never)),
}


def test_each_read_gets_the_version_the_job_names(s3: S3Client) -> None:
    first = s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"first version")["VersionId"]
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"second, longer version")
    source = ObjectSource(s3)
    job = job_reading(first, datetime(2026, 12, 4))
    assert source.size(job) == len(b"first version")
    assert source.head(job, 5) == b"first"
    assert b"".join(source.chunks(job, never, chunk=4)) == b"first version"


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_a_version_deleted_since_ingest_is_gone_for_every_read(s3: S3Client, read: Read) -> None:
    version = s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"quarantined meanwhile")["VersionId"]
    s3.delete_object(Bucket=BUCKET, Key=KEY, VersionId=version)
    with pytest.raises(ObjectGoneError) as gone:
        read(ObjectSource(s3), job_reading(version, datetime(2026, 12, 4)))
    # the job's error names the object and S3's answer; no retry can bring it back
    assert f"s3://{BUCKET}/{KEY} (version {version}) is gone" in str(gone.value)
    assert isinstance(gone.value.__cause__, ClientError)
    assert AWS_RETRY_POLICY.classify(gone.value) is ErrorKind.PERMANENT


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_a_key_never_stored_is_gone_for_every_read(s3: S3Client, read: Read) -> None:
    with pytest.raises(ObjectGoneError, match="is gone"):
        read(ObjectSource(s3), job_reading(None, datetime(2026, 12, 4)))


def test_an_error_that_is_not_a_missing_object_passes_through_as_it_is(s3: S3Client) -> None:
    # a throttled read stays S3's error, so the retry policy retries it
    throttled = ClientError({"Error": {"Code": "SlowDown", "Message": "slow"}}, "GetObject")

    class Throttled:
        def get_object(self, **_: object) -> object:
            raise throttled

    source = ObjectSource(Throttled())  # type: ignore[arg-type]
    with pytest.raises(ClientError) as raised:
        list(source.chunks(job_reading(None, datetime(2026, 12, 4)), never))
    assert raised.value is throttled
    assert AWS_RETRY_POLICY.classify(raised.value) is ErrorKind.TRANSIENT


def test_a_read_past_its_size_limit_fails_for_good_before_the_next_chunk(s3: S3Client) -> None:
    version = s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"x" * 10_000)["VersionId"]
    job = job_reading(version, datetime(2026, 12, 4))
    chunks = ObjectSource(s3).chunks(job, never, chunk=4096, limits=ReadLimits(max_bytes=5000))

    assert next(chunks) == b"x" * 4096
    with pytest.raises(ObjectTooLargeError, match=r"larger than the 4\.9 KiB this job type reads"):
        next(chunks)
    assert AWS_RETRY_POLICY.classify(ObjectTooLargeError("")) is ErrorKind.PERMANENT


def test_an_object_recorded_larger_than_the_limit_is_refused_before_it_is_read(
    s3: S3Client,
) -> None:
    job = job_reading("v-never-read", datetime(2026, 12, 4))
    job.input_data = {**(job.input_data or {}), "size": 6 * 1024**3}
    limits = ReadLimits(max_bytes=5 * 1024**3)

    # No object is stored: a GetObject would fail with ObjectGoneError, not this.
    with pytest.raises(ObjectTooLargeError, match=r"the object is 6\.0 GiB, larger than the 5\.0"):
        next(ObjectSource(s3).chunks(job, never, limits=limits))


def test_a_read_past_its_time_limit_fails_for_good_saying_how_far_it_got(s3: S3Client) -> None:
    version = s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"y" * 10_000)["VersionId"]
    job = job_reading(version, datetime(2026, 12, 4))
    ticks = iter([0.0, 100.0, 250.0])  # started; after chunk 1; after chunk 2
    chunks = ObjectSource(s3).chunks(
        job, never, chunk=4096, limits=ReadLimits(max_seconds=240), clock=lambda: next(ticks)
    )

    assert len(next(chunks)) == 4096
    with pytest.raises(ReadTooLongError, match=r"longer than the 240 s .* \(8\.0 KiB read\)"):
        next(chunks)
    assert AWS_RETRY_POLICY.classify(ReadTooLongError("")) is ErrorKind.PERMANENT
