"""Fairness between tenants: at most N jobs of one tenant run at once per job type.

SQS fair queues (adapters/sqs.py: every job message's group is its tenant) keep a quiet tenant's
messages from waiting behind a noisy tenant's backlog in the queue. The cap keeps the noisy
tenant from holding every running worker: a worker takes one of its tenant's *slots* for the job
type before it claims a job, and gives it back when the attempt ends.

A slot is a lease: its holder (a job id) and the instant it lapses, which is when the Lambda
invocation that took it must have ended (its deadline: an attempt cannot outlive it). A worker
that crashes never gives its slot back, and the slot counts no more once it lapses: nothing
leaks for longer than one invocation's timeout.

A job whose tenant has no free slot is neither claimed nor failed and spends no attempt: it is
*deferred*, its message sent again to come back after a jittered delay of DEFER_MIN to DEFER_MAX.
The bound: while its tenant has N jobs of the type running, each of the tenant's other jobs of
that type comes back every DEFER_MIN to DEFER_MAX and runs as soon as it finds a slot free, so a
freed slot is taken again within DEFER_MAX; which waiting job gets it is not ordered. Other
tenants never wait for a capped one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

# A deferred job's message comes back after a delay drawn from this range: long enough that a
# capped tenant's backlog costs a receive and a send per job every 20 s or so, not a busy loop;
# short enough that a freed slot is not left idle for long. Jittered so the deferred messages of
# a burst do not all come back at once.
DEFER_MIN = timedelta(seconds=10)
DEFER_MAX = timedelta(seconds=30)
# A slot lapses this long after its invocation's deadline: the clocks of two Lambda hosts may
# disagree by a little; never by this much.
SLOT_SLACK = timedelta(seconds=5)


@dataclass(frozen=True)
class TenantCap:
    """At most `max_running` jobs of one tenant run at once per job type; 0 turns the cap off."""

    max_running: int

    def __post_init__(self) -> None:
        if self.max_running < 0:
            raise ValueError(f"a tenant's cap is 0 (off) or more, not {self.max_running}")

    @property
    def enforced(self) -> bool:
        return self.max_running > 0

    def has_room(self, holders: Mapping[str, datetime], job_id: str, now: datetime) -> bool:
        """Whether `job_id` may hold a slot: it holds one already (a redelivered message), or
        fewer than `max_running` slots are held and not lapsed."""
        if job_id in holders:
            return True
        return len(live(holders, now)) < self.max_running


def live(holders: Mapping[str, datetime], now: datetime) -> dict[str, datetime]:
    """The slots that still count: those whose holder's invocation may still be running."""
    return {job: until for job, until in holders.items() if until > now}


def lapsed(holders: Mapping[str, datetime], now: datetime) -> dict[str, datetime]:
    """The slots whose invocation has surely ended (crashed or timed out, or it would have
    given the slot back): they may be cleared."""
    return {job: until for job, until in holders.items() if until <= now}


def slot_until(deadline: datetime) -> datetime:
    """When a slot taken by an invocation that must end by `deadline` lapses."""
    return deadline + SLOT_SLACK


def deferral_delay(draw: Callable[[float, float], float] = random.uniform) -> timedelta:
    """How long a deferred job's message stays hidden: jittered between DEFER_MIN and DEFER_MAX."""
    low, high = DEFER_MIN.total_seconds(), DEFER_MAX.total_seconds()
    return timedelta(seconds=draw(low, high))
