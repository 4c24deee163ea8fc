"""Job messages go to their type's queue: in the high lane when the job's priority is above 0,
in the low lane when it is below."""

from __future__ import annotations

import json
from datetime import timedelta

import boto3
import pytest
from mypy_boto3_sqs import SQSClient

from filejobs.adapters.sqs import SqsDispatcher
from filejobs.domain.job import JobType
from filejobs.domain.messages import JobMessage, Lane
from tests.conftest import FakeClock
from tests.factories import ingest_plan


@pytest.fixture
def sqs(aws: None) -> SQSClient:
    return boto3.client("sqs")


@pytest.fixture
def queues(sqs: SQSClient) -> dict[tuple[JobType, Lane], str]:
    return {
        (t, lane): sqs.create_queue(QueueName=f"{t.value}-{lane.value}")["QueueUrl"]
        for t in JobType
        for lane in Lane
    }


def drain(sqs: SQSClient, url: str) -> list[dict[str, str]]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def test_new_jobs_go_to_their_types_queue_in_batches(
    sqs: SQSClient, queues: dict[tuple[JobType, Lane], str], clock: FakeClock
) -> None:
    plan = ingest_plan(clock.now, "image/jpeg")

    SqsDispatcher(sqs, queues).dispatch_all(plan.jobs)

    for job in plan.jobs:
        assert drain(sqs, queues[(job.job_type, Lane.NORMAL)]) == [
            {
                "job_id": job.id,
                "job_type": job.job_type.value,
                "file_id": job.file_id,
                "tenant": job.tenant,
            }
        ]
        assert drain(sqs, queues[(job.job_type, Lane.HIGH)]) == []
        assert drain(sqs, queues[(job.job_type, Lane.LOW)]) == []


def test_a_high_priority_job_takes_the_high_lane(
    sqs: SQSClient, queues: dict[tuple[JobType, Lane], str], clock: FakeClock
) -> None:
    job = ingest_plan(clock.now, "application/x-empty").jobs[0]
    job.priority = 5

    SqsDispatcher(sqs, queues).dispatch(job)

    assert drain(sqs, queues[(job.job_type, Lane.HIGH)]) == [
        json.loads(JobMessage.for_job(job).to_json())
    ]


def test_a_negative_priority_job_takes_the_low_lane(
    sqs: SQSClient, queues: dict[tuple[JobType, Lane], str], clock: FakeClock
) -> None:
    job = ingest_plan(clock.now, "application/x-empty").jobs[0]
    job.priority = -1

    SqsDispatcher(sqs, queues).dispatch_all([job])

    assert drain(sqs, queues[(job.job_type, Lane.LOW)]) == [
        json.loads(JobMessage.for_job(job).to_json())
    ]
    assert drain(sqs, queues[(job.job_type, Lane.NORMAL)]) == []


def test_a_retry_is_delayed_at_most_fifteen_minutes(
    sqs: SQSClient, queues: dict[tuple[JobType, Lane], str], clock: FakeClock
) -> None:
    job = ingest_plan(clock.now, "application/x-empty").jobs[0]
    SqsDispatcher(sqs, queues).dispatch(job, timedelta(hours=2))
    attributes = sqs.get_queue_attributes(
        QueueUrl=queues[(job.job_type, Lane.NORMAL)],
        AttributeNames=["ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"


def groups(sqs: SQSClient, url: str) -> list[str]:
    """The MessageGroupId of each message waiting in the queue."""
    messages = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    ).get("Messages", [])
    return [m.get("Attributes", {}).get("MessageGroupId", "") for m in messages]


def test_every_message_names_its_tenant_as_its_fair_queue_group(
    sqs: SQSClient, queues: dict[tuple[JobType, Lane], str], clock: FakeClock
) -> None:
    # given a file's new jobs, and a retry of one, of tenant "globex"
    plan = ingest_plan(clock.now, "image/jpeg", tenant="globex")
    retry = plan.jobs[0]
    dispatcher = SqsDispatcher(sqs, queues)
    # when they are sent, in batches and alone
    dispatcher.dispatch_all(plan.jobs)
    dispatcher.dispatch(retry, timedelta(0))
    # then each message's group is the tenant: SQS fair queues keep one tenant from starving
    assert {job.tenant for job in plan.jobs} == {"globex"}
    sent = [g for job in plan.jobs for g in groups(sqs, queues[(job.job_type, Lane.NORMAL)])]
    assert sent == ["globex"] * (len(plan.jobs) + 1)


def test_a_type_without_a_queue_is_a_clear_error(sqs: SQSClient, clock: FakeClock) -> None:
    job = ingest_plan(clock.now, "application/x-empty").jobs[0]
    with pytest.raises(LookupError, match="no queue configured for virus_scan"):
        SqsDispatcher(sqs, {}).dispatch(job)
