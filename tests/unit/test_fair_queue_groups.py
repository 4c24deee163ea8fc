"""The webhooks and operations queues are SQS fair queues: every message names its tenant as its
`MessageGroupId`, so one tenant's burst is served after the others' (moto keeps the group id of
a message on a standard queue, as SQS does, and hands it back as a system attribute)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws

from filejobs.adapters.operations_queue import OPERATORS_GROUP, SqsOperationQueue, operation_of
from filejobs.adapters.webhook_http import SqsWebhookQueue, delivery_task_of
from filejobs.domain.operations import Action, JobFilter, Operation
from filejobs.ports import DeliveryTask

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def sqs() -> Iterator[SQSClient]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def received(sqs: SQSClient, url: str) -> list[tuple[str, str | None]]:
    """Each message's body with the group id SQS kept for it."""
    answer = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    )
    return [
        (m["Body"], m.get("Attributes", {}).get("MessageGroupId"))
        for m in answer.get("Messages", [])
    ]


def operation(tenant: str | None) -> Operation:
    return Operation(
        id="op-20261205T120000Z-0123abcd",
        action=Action.RESCAN,
        filter=JobFilter(tenant=tenant),
        reason="test",
        created_by="someone",
        created_at=NOW,
        updated_at=NOW,
        matched=1,
    )


def test_a_webhook_delivery_is_in_its_endpoints_tenants_group(sqs: SQSClient) -> None:
    url = sqs.create_queue(QueueName="webhooks")["QueueUrl"]
    task = DeliveryTask(
        "wh-0123456789abcdef01234567-acme", "dl-20261204T120000Z-0123456789abcdef0123"
    )

    SqsWebhookQueue(sqs, url).send(task, timedelta())

    [(body, group)] = received(sqs, url)
    assert group == "acme"
    assert delivery_task_of(body) == task


def test_an_operations_page_is_in_its_tenants_group(sqs: SQSClient) -> None:
    url = sqs.create_queue(QueueName="operations")["QueueUrl"]

    SqsOperationQueue(sqs, url).send(operation("acme"), timedelta())

    [(body, group)] = received(sqs, url)
    assert group == "acme"
    assert operation_of(body) == "op-20261205T120000Z-0123abcd"


def test_an_operators_operation_over_every_tenant_has_a_group_no_tenant_can_have(
    sqs: SQSClient,
) -> None:
    url = sqs.create_queue(QueueName="operations")["QueueUrl"]

    SqsOperationQueue(sqs, url).send(operation(None), timedelta())

    [(_, group)] = received(sqs, url)
    assert group == OPERATORS_GROUP
