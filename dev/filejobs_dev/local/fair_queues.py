"""SQS fair queues, as the local stack emulates them in moto server.

On AWS a standard queue whose messages carry a `MessageGroupId` is a fair queue: when one group
(a tenant) holds a large share of the messages in flight or of the consumers' recent processing
time, SQS serves the other groups' messages first, so a quiet tenant's few messages do not wait
behind a noisy tenant's backlog. moto accepts the group id on a standard queue and keeps it, but
delivers in the order the messages were sent, so the backlog sent first is served first.

What is emulated, on every receive from a standard queue whose visible messages carry a group id:
the visible messages are handed out group by group in turn (round-robin), the groups with the
fewest messages in flight (received, not yet deleted, still hidden) first, ties broken by which
group's oldest visible message was sent first; within a group, in moto's order (the order sent).
A message with no group id is a tenant of its own, as AWS treats it ("How Amazon SQS fair queues
work": each message without a MessageGroupId belongs to its own distinct tenant).

What is not emulated: SQS's thresholds for calling a group noisy (more than about 10% of the
messages in flight and at least 30 of them, or about 10% of the consumers' processing time):
here every receive interleaves the groups, even when none is noisy, so the emulation is the
ideal that AWS approaches once a group is noisy. Nor processing time as a measure, nor the
CloudWatch metrics of fair queues, nor a noisy tenant's return to normal (its backlog drained, or
5 minutes without a message from it): the order is worked out afresh at every receive. FIFO
queues keep moto's own rules (one group in flight at a time).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol


class Grouped(Protocol):
    @property
    def group_id(self) -> str | None: ...


def fair_order[M: Grouped](messages: Sequence[M], in_flight: Counter[str | None]) -> list[M]:
    """`messages` (visible, in the order sent) in the order a fair queue serves them: one from
    each group in turn, the groups with fewer messages in flight first."""
    groups: dict[object, list[M]] = {}
    for number, message in enumerate(messages):
        groups.setdefault(_tenant(message, number), []).append(message)
    if len(groups) < 2:
        return list(messages)
    # dicts keep insertion order, so a group's rank among equals is its oldest message's.
    turns = sorted(groups, key=lambda group: in_flight[group] if isinstance(group, str) else 0)
    ordered: list[M] = []
    depth = 0
    while len(ordered) < len(messages):
        ordered.extend(groups[group][depth] for group in turns if depth < len(groups[group]))
        depth += 1
    return ordered


def _tenant(message: Grouped, number: int) -> object:
    """The tenant a message counts for: its group, or (without one) itself alone."""
    return message.group_id if message.group_id is not None else ("no group", number)


def _fair(visible: Callable[[Any], list[Any]]) -> Callable[[Any], list[Any]]:
    def messages(queue: Any) -> list[Any]:
        found = visible(queue)
        if queue.fifo_queue or not any(message.group_id for message in found):
            return found
        in_flight = Counter(
            message.group_id for message in queue.pending_messages if not message.visible
        )
        return fair_order(found, in_flight)

    messages._filejobs_fair = True  # type: ignore[attr-defined]
    return messages


def apply() -> None:
    """moto's standard queues serve their visible messages in fair order (once per process).
    `Queue.messages` is what moto's receive walks, in order, to pick what it hands out; its
    other readers only count it."""
    from moto.sqs.models import Queue  # noqa: PLC0415 (moto is the local stack's alone)

    current: Any = Queue.__dict__["messages"]  # the property itself
    if getattr(current.fget, "_filejobs_fair", False):
        return
    Queue.messages = property(_fair(current.fget))  # type: ignore[method-assign,assignment]
