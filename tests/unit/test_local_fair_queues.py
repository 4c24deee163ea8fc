"""The local stack's fair queues (filejobs_dev/local/fair_queues.py): the order in which a
standard queue whose messages name a group hands them out, as SQS documents it: a tenant is
noisy by its share of the messages in flight or of the consumers' recent processing time, and
while one is, the quiet tenants' messages are served first."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest
from moto import mock_aws

from filejobs_dev.local import fair_queues
from filejobs_dev.local.fair_queues import ProcessingTime, fair_order, noisy_tenants


@dataclass(frozen=True)
class Message:
    group_id: str | None
    body: str


def sent(*pairs: tuple[str | None, int]) -> list[Message]:
    """Messages sent in this order: (group, how many), each body `{group}{n}`."""
    return [Message(group, f"{group}{n}") for group, count in pairs for n in range(count)]


def bodies(messages: list[Message]) -> list[str]:
    return [message.body for message in messages]


def test_while_no_tenant_is_noisy_the_order_sent_is_kept() -> None:
    queue = sent(("acme", 3), ("globex", 2), ("acme", 1))
    processing = {"acme": 1.0, "globex": 1.0, "initech": 8.0}  # initech: noisy, none visible
    assert fair_order(queue, Counter(), processing) == queue


def test_a_tenant_with_most_of_the_recent_processing_time_waits_for_the_quiet_ones() -> None:
    # given a noisy tenant's backlog sent before a quiet tenant's two messages, and nothing in
    # flight (a consumer taking one message at a time), the noisy one having used 95% of the
    # consumers' recent time
    queue = sent(("noisy", 4), ("quiet", 2))
    processing = {"noisy": 19.0, "quiet": 1.0}
    # then the quiet tenant's messages come first
    assert bodies(fair_order(queue, Counter(), processing)) == [
        "quiet0", "quiet1", "noisy0", "noisy1", "noisy2", "noisy3",
    ]  # fmt: skip


def test_a_tenant_is_noisy_by_its_messages_in_flight_from_30_and_10_percent() -> None:
    assert noisy_tenants(Counter({"a": 30, "b": 5}), {}) == {"a"}
    assert noisy_tenants(Counter({"a": 29, "b": 5}), {}) == set()  # fewer than 30 in flight
    assert noisy_tenants(Counter({"a": 30, "b": 300}), {}) == {"b"}  # a: 30 of 330, under 10%


def test_a_tenant_is_noisy_by_more_than_10_percent_of_the_processing_time() -> None:
    shares: dict[str, float] = {"a": 10.0, "b": 89.0, "c": 1.0}
    assert noisy_tenants(Counter(), shares) == {"b"}  # a: exactly 10%, not more
    assert noisy_tenants(Counter(), {"a": 11.0, "b": 89.0}) == {"a", "b"}


def test_noisy_tenants_take_turns_the_one_with_fewest_in_flight_first() -> None:
    queue = sent(("big", 3), ("bigger", 3), ("quiet", 1))
    in_flight: Counter[str] = Counter({"big": 1, "bigger": 2})
    processing = {"big": 40.0, "bigger": 50.0, "quiet": 0.5}
    assert bodies(fair_order(queue, in_flight, processing)) == [
        "quiet0", "big0", "bigger0", "big1", "bigger1", "big2", "bigger2",
    ]  # fmt: skip


def test_among_noisy_tenants_with_as_many_in_flight_the_smaller_share_goes_first() -> None:
    queue = sent(("heavy", 2), ("light", 2))
    processing = {"heavy": 80.0, "light": 20.0}
    assert bodies(fair_order(queue, Counter(), processing)) == [
        "light0", "heavy0", "light1", "heavy1",
    ]  # fmt: skip


def test_each_message_without_a_group_is_a_quiet_tenant_of_its_own() -> None:
    # as SQS counts it: a message with no MessageGroupId is a distinct tenant
    queue = sent(("acme", 3), (None, 2))
    assert bodies(fair_order(queue, Counter(), {"acme": 5.0})) == [
        "None0", "None1", "acme0", "acme1", "acme2",
    ]  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_processing_time_fades_so_a_tenant_that_stopped_is_quiet_again() -> None:
    clock = Clock()
    processing = ProcessingTime(clock)
    processing.finished("noisy", 30.0)
    processing.finished("quiet", 1.0)
    assert noisy_tenants(Counter(), processing.shares({})) == {"noisy"}
    # ten minutes on, the quiet tenant has worked a second more and the noisy one not at all
    clock.now = 600.0
    processing.finished("quiet", 1.0)
    assert noisy_tenants(Counter(), processing.shares({})) == {"quiet"}


def test_the_time_a_message_in_flight_has_been_held_counts_to_its_tenant() -> None:
    processing = ProcessingTime(Clock())
    processing.finished("quiet", 1.0)
    assert noisy_tenants(Counter(), processing.shares({"slow": 30.0})) == {"slow"}


@pytest.fixture
def queue_url() -> Iterator[str]:
    fair_queues.apply()
    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1")
        yield client.create_queue(QueueName="fair")["QueueUrl"]


def test_on_moto_a_quiet_message_overtakes_a_backlog_being_worked_one_at_a_time(
    queue_url: str,
) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    # given a noisy tenant's backlog, its first two messages received and deleted one by one
    for n in range(20):
        sqs.send_message(QueueUrl=queue_url, MessageBody=f"noisy{n}", MessageGroupId="noisy")
    served = [take_one(sqs, queue_url) for _ in range(2)]
    # when a quiet tenant's message arrives, then it is the next one served
    sqs.send_message(QueueUrl=queue_url, MessageBody="quiet0", MessageGroupId="quiet")
    served += [take_one(sqs, queue_url) for _ in range(2)]
    assert served == ["noisy0", "noisy1", "quiet0", "noisy2"]


def take_one(sqs: object, url: str) -> str:
    """Receive one message and delete it, as a consumer with batch size 1 does."""
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]  # type: ignore[attr-defined]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])  # type: ignore[attr-defined]
    return str(message["Body"])
