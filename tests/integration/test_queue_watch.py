"""A job queue's progress, read from SQS's own counts (adapters/sqs.py: SqsQueueWatch)."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest

from filejobs.adapters.sqs import SqsQueueWatch
from filejobs.domain.backlog import COUNT_LAG
from filejobs.domain.job import JobType
from filejobs.domain.messages import Lane
from tests.conftest import FakeClock

VISIBILITY_SECONDS = 900
RETENTION_SECONDS = 345600


@pytest.fixture
def queue(aws: None) -> tuple[object, str]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(
        QueueName="thumbnails",
        Attributes={
            "VisibilityTimeout": str(VISIBILITY_SECONDS),
            "MessageRetentionPeriod": str(RETENTION_SECONDS),
        },
    )["QueueUrl"]
    return sqs, url


def watch(sqs: object, url: str, clock: FakeClock) -> SqsQueueWatch:
    urls = {(JobType.THUMBNAIL_GENERATION, Lane.NORMAL): url}
    return SqsQueueWatch(sqs, urls, clock=clock)  # type: ignore[arg-type]


def test_an_empty_queue_has_got_past_everything_sent_before_the_counts_lag(
    queue: tuple[object, str], clock: FakeClock
) -> None:
    sqs, url = queue
    progress = watch(sqs, url, clock).progress(JobType.THUMBNAIL_GENERATION, Lane.NORMAL)
    assert progress.reach == clock.now - COUNT_LAG


def test_a_received_message_not_yet_deleted_holds_the_reach_a_visibility_timeout_back(
    queue: tuple[object, str], clock: FakeClock
) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="{}")  # type: ignore[attr-defined]
    sqs.receive_message(QueueUrl=url)  # type: ignore[attr-defined]
    progress = watch(sqs, url, clock).progress(JobType.THUMBNAIL_GENERATION, Lane.NORMAL)
    assert progress.reach == clock.now - timedelta(seconds=VISIBILITY_SECONDS) - COUNT_LAG


def test_a_backlog_holds_it_back_by_the_retention_period_and_the_high_lane_falls_back(
    queue: tuple[object, str], clock: FakeClock
) -> None:
    sqs, url = queue
    for _ in range(3):
        sqs.send_message(QueueUrl=url, MessageBody="{}")  # type: ignore[attr-defined]
    # No high lane configured for the type: its jobs go to (and are judged by) the normal queue
    progress = watch(sqs, url, clock).progress(JobType.THUMBNAIL_GENERATION, Lane.HIGH)
    assert progress.reach == clock.now - timedelta(seconds=RETENTION_SECONDS)


def test_a_message_sqs_delivers_again_before_dead_lettering_holds_the_reach_that_many_times_back(
    queue: tuple[object, str], clock: FakeClock
) -> None:
    # given a queue whose messages are delivered 5 times before its dead-letter queue takes them
    sqs, url = queue
    letters = sqs.create_queue(QueueName="thumbnails-dlq")["QueueUrl"]  # type: ignore[attr-defined]
    dlq_arn = sqs.get_queue_attributes(  # type: ignore[attr-defined]
        QueueUrl=letters, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    policy = f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": 5}}'
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})  # type: ignore[attr-defined]
    # when a message is received (and may be one a worker fails before claiming its job)
    sqs.send_message(QueueUrl=url, MessageBody="{}")  # type: ignore[attr-defined]
    sqs.receive_message(QueueUrl=url)  # type: ignore[attr-defined]
    progress = watch(sqs, url, clock).progress(JobType.THUMBNAIL_GENERATION, Lane.NORMAL)
    # then its job is not taken for lost until its five deliveries could all have run out
    assert progress.reach == clock.now - 5 * timedelta(seconds=VISIBILITY_SECONDS) - COUNT_LAG
