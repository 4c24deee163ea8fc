"""SQS fair queues, as the local stack emulates them in moto server.

On AWS a standard queue whose messages carry a `MessageGroupId` is a fair queue ("How Amazon SQS
fair queues work", SQS Developer Guide): SQS watches how the consumers' capacity is shared
between the groups (tenants) and calls a tenant noisy when either

- its concurrency share: more than about 10% of the messages in flight, and at least 30 of
  them; or
- its processing time share: more than about 10% of the consumers' recent processing time.

While a tenant is noisy, a consumer that polls gets the quiet tenants' messages whenever there
are any; the noisy tenants' messages come after them, the noisy tenant with the fewest messages
in flight first. Nothing is dropped or throttled: a noisy tenant's messages wait longer. A
message with no `MessageGroupId` is a tenant of its own.

moto accepts the group id on a standard queue and keeps it, but hands messages out in the order
they were sent. What is emulated, on every receive from a standard queue whose visible messages
carry a group id:

- the two measures, per queue: messages in flight (received, not yet deleted, still hidden),
  and processing time: for each message, the time from its receive to its delete (a message
  in flight counts the time it has been held so far), summed per group and fading with a time
  constant of PROCESSING_MEMORY_SECONDS, SQS's "recent" (whose length it does not publish);
- the thresholds above (NOISY_SHARE, NOISY_IN_FLIGHT);
- the order: the quiet tenants' visible messages first, in the order sent; then the noisy
  tenants' in turn (round-robin), the one with fewest messages in flight first, ties to the
  smaller processing share, then to the oldest message.

Not emulated: SQS's own approximations (it says detection may not start at exactly these
values), the CloudWatch metrics of fair queues, and the rule that a tenant that sent nothing for
5 minutes is quiet again (here its processing time fades). FIFO queues keep moto's own rules
(one group in flight at a time).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

NOISY_SHARE = 0.10
NOISY_IN_FLIGHT = 30
PROCESSING_MEMORY_SECONDS = 60.0
# Set on a moto Message when it is received: the start of its processing.
_RECEIVED_AT = "_filejobs_received_at"
_PROCESSING = "_filejobs_processing"


class Grouped(Protocol):
    @property
    def group_id(self) -> str | None: ...


def noisy_tenants(in_flight: Counter[str], processing: Mapping[str, float]) -> set[str]:
    """The tenants SQS calls noisy, by their concurrency share or their processing time share."""
    flying = sum(in_flight.values())
    spent = sum(processing.values())
    noisy = {
        tenant
        for tenant, count in in_flight.items()
        if count >= NOISY_IN_FLIGHT and count > NOISY_SHARE * flying
    }
    if spent > 0:
        noisy |= {tenant for tenant, seconds in processing.items() if seconds > NOISY_SHARE * spent}
    return noisy


def fair_order[M: Grouped](
    messages: Sequence[M],
    in_flight: Counter[str],
    processing: Mapping[str, float] | None = None,
) -> list[M]:
    """`messages` (visible, in the order sent) in the order a fair queue serves them: the quiet
    tenants' first, in the order sent, then the noisy tenants' in turn."""
    noisy = noisy_tenants(in_flight, processing or {})
    tenants = [_tenant(message, number) for number, message in enumerate(messages)]
    if not noisy.intersection(tenants):
        return list(messages)
    ordered = [m for m, tenant in zip(messages, tenants, strict=True) if tenant not in noisy]
    groups: dict[str, list[M]] = {}
    for message in messages:
        if message.group_id in noisy:
            groups.setdefault(message.group_id, []).append(message)
    # dicts keep insertion order, so a tenant's rank among equals is its oldest message's.
    shares = processing or {}
    turns = sorted(groups, key=lambda group: (in_flight[group], shares.get(group, 0.0)))
    depth = 0
    while len(ordered) < len(messages):
        ordered.extend(groups[group][depth] for group in turns if depth < len(groups[group]))
        depth += 1
    return ordered


def _tenant(message: Grouped, number: int) -> object:
    """The tenant a message counts for: its group, or (without one) itself alone."""
    return message.group_id if message.group_id is not None else ("no group", number)


class ProcessingTime:
    """One queue's recent processing time per group: each finished message's seconds from
    receive to delete, fading exponentially with PROCESSING_MEMORY_SECONDS."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._spent: dict[str, float] = {}
        self._at = clock()
        self._lock = threading.Lock()

    def finished(self, group: str | None, seconds: float) -> None:
        if group is None:
            return  # a tenant of its own: one message, never noisy
        with self._lock:
            self._fade()
            self._spent[group] = self._spent.get(group, 0.0) + max(0.0, seconds)

    def shares(self, held: Mapping[str, float]) -> dict[str, float]:
        """Each group's recent processing time, with `held`: the seconds its messages in
        flight have been held so far."""
        with self._lock:
            self._fade()
            spent = dict(self._spent)
        for group, seconds in held.items():
            spent[group] = spent.get(group, 0.0) + seconds
        return spent

    def _fade(self) -> None:
        now = self._clock()
        factor = math.exp(-(now - self._at) / PROCESSING_MEMORY_SECONDS)
        self._at = now
        self._spent = {t: s * factor for t, s in self._spent.items() if s * factor > 1e-6}


def _processing_of(queue: Any) -> ProcessingTime:
    processing: ProcessingTime | None = queue.__dict__.get(_PROCESSING)
    if processing is None:
        processing = queue.__dict__.setdefault(_PROCESSING, ProcessingTime())
    return processing


def _fair(visible: Callable[[Any], list[Any]]) -> Callable[[Any], list[Any]]:
    def messages(queue: Any) -> list[Any]:
        found = visible(queue)
        if queue.fifo_queue or not any(message.group_id for message in found):
            return found
        now = time.monotonic()
        in_flight: Counter[str] = Counter()
        held: dict[str, float] = {}
        for message in list(queue.pending_messages):
            if not message.visible and message.group_id is not None:
                in_flight[message.group_id] += 1
                started = getattr(message, _RECEIVED_AT, now)
                held[message.group_id] = held.get(message.group_id, 0.0) + now - started
        return fair_order(found, in_flight, _processing_of(queue).shares(held))

    messages._filejobs_fair = True  # type: ignore[attr-defined]
    return messages


def _stamped(mark_received: Callable[..., None]) -> Callable[..., None]:
    def received(message: Any, *args: Any, **kwargs: Any) -> None:
        mark_received(message, *args, **kwargs)
        setattr(message, _RECEIVED_AT, time.monotonic())

    return received


def _timed(delete_message: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    def delete(queue: Any, receipt_handle: str) -> None:
        # Received messages stay in pending_messages until deleted: a short search.
        done = [m for m in list(queue.pending_messages) if m.had_receipt_handle(receipt_handle)]
        delete_message(queue, receipt_handle)
        now = time.monotonic()
        for message in done:
            started = getattr(message, _RECEIVED_AT, None)
            if started is not None:
                _processing_of(queue).finished(message.group_id, now - started)

    return delete


def apply() -> None:
    """moto's standard queues serve their visible messages in fair order (once per process).
    `Queue.messages` is what moto's receive walks, in order, to pick what it hands out; its
    other readers only count it. A message's receive and delete are timed for the processing
    time share."""
    from moto.sqs.models import Message, Queue  # noqa: PLC0415 (moto is the local stack's alone)

    current: Any = Queue.__dict__["messages"]  # the property itself
    if getattr(current.fget, "_filejobs_fair", False):
        return
    Queue.messages = property(_fair(current.fget))  # type: ignore[method-assign,assignment]
    Message.mark_received = _stamped(Message.mark_received)  # type: ignore[method-assign]
    Queue.delete_message = _timed(Queue.delete_message)  # type: ignore[method-assign,assignment]
