"""The local stack's fair queues (filejobs_dev/local/fair_queues.py): the order in which a
standard queue whose messages name a group hands them out."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from filejobs_dev.local.fair_queues import fair_order


@dataclass(frozen=True)
class Message:
    group_id: str | None
    body: str


def sent(*pairs: tuple[str | None, int]) -> list[Message]:
    """Messages sent in this order: (group, how many), each body `{group}{n}`."""
    return [Message(group, f"{group}{n}") for group, count in pairs for n in range(count)]


def bodies(messages: list[Message]) -> list[str]:
    return [message.body for message in messages]


def test_a_quiet_groups_messages_are_served_among_the_first_of_a_noisy_backlog() -> None:
    # given a noisy group's 6 messages sent before a quiet group's 2
    queue = sent(("noisy", 6), ("quiet", 2))
    # when neither has a message in flight, the groups take turns, the oldest group first
    assert bodies(fair_order(queue, Counter())) == [
        "noisy0", "quiet0", "noisy1", "quiet1", "noisy2", "noisy3", "noisy4", "noisy5",
    ]  # fmt: skip


def test_the_groups_with_fewest_messages_in_flight_go_first() -> None:
    queue = sent(("noisy", 3), ("quiet", 2), ("other", 1))
    in_flight: Counter[str | None] = Counter({"noisy": 10, "other": 1})
    assert bodies(fair_order(queue, in_flight)) == [
        "quiet0", "other0", "noisy0", "quiet1", "noisy1", "noisy2",
    ]  # fmt: skip


def test_each_message_without_a_group_is_a_tenant_of_its_own() -> None:
    # as SQS counts it: a message with no MessageGroupId is a distinct tenant, never noisy
    queue = sent(("acme", 3), (None, 2))
    in_flight: Counter[str | None] = Counter({"acme": 5})
    assert bodies(fair_order(queue, in_flight)) == ["None0", "None1", "acme0", "acme1", "acme2"]


def test_a_single_group_keeps_the_order_sent() -> None:
    queue = sent(("acme", 4))
    assert fair_order(queue, Counter({"acme": 3})) == queue
