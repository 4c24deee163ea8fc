"""Delayed jobs: a job requested to run later waits in `scheduled` until its time.

A caller asks for a time (`run_at`, RFC 3339 with its UTC offset) or a delay (`delay_seconds`),
never both, at most MAX_DELAY ahead; a time in the past by no more than PAST_SKEW (the two
clocks disagree a little) runs now, further back is refused. Then:

- a delay of at most MAX_MESSAGE_DELAY (SQS's 15 minutes) sends the job's message at once,
  held back by SQS until the time (rounded up to the second: never early); the worker's claim
  takes a scheduled job once its time has come (domain/transitions.py `claim`), and a copy
  that arrives early is sent again for the time (services/worker.py). The sweep looks at the
  job a dispatch grace after its time, in case that message was lost;
- a longer delay sends nothing: the sweep promotes the job to pending when it is due (its
  `sweep_at` is the time itself) and sends it, so it starts within one sweep period (the
  template's rate(1 minute)) of its time.

Either way the virus scan's gate holds: a gated job's worker looks at the file's verdict before
every claim, and the sweep reviews the gate before it promotes a job.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from filejobs.domain.messages import MAX_MESSAGE_DELAY

MAX_DELAY: Final = timedelta(days=30)
MAX_DELAY_SECONDS: Final = int(MAX_DELAY.total_seconds())  # 2,592,000
PAST_SKEW: Final = timedelta(seconds=60)


class DelayError(ValueError):
    """A requested time the API refuses (422): `field` names the request's field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def run_time(
    now: datetime, *, run_at: datetime | None = None, delay: timedelta | None = None
) -> datetime | None:
    """When a requested job should start: None for now (no delay, or a time already here)."""
    if run_at is not None and delay is not None:
        raise DelayError("run_at", "give run_at or delay_seconds, not both")
    if delay is not None:
        if not timedelta(0) <= delay <= MAX_DELAY:
            raise DelayError(
                "delay_seconds", f"must be from 0 to {MAX_DELAY_SECONDS} seconds (30 days)"
            )
        return now + delay if delay > timedelta(0) else None
    if run_at is None:
        return None
    if run_at < now - PAST_SKEW:
        raise DelayError(
            "run_at",
            f"{run_at.isoformat()} is in the past (now {now.isoformat()}; "
            f"{int(PAST_SKEW.total_seconds())} s of clock skew allowed)",
        )
    if run_at > now + MAX_DELAY:
        raise DelayError(
            "run_at", f"{run_at.isoformat()} is more than 30 days ahead of {now.isoformat()}"
        )
    return run_at if run_at > now else None


def message_delay(now: datetime, run_at: datetime) -> timedelta | None:
    """How long SQS holds the message of a job due at `run_at`; None when longer than it can
    (the sweep sends it when due)."""
    wait = max(run_at - now, timedelta(0))
    return wait if wait <= MAX_MESSAGE_DELAY else None


def first_sweep_at(now: datetime, run_at: datetime, grace: timedelta) -> datetime:
    """When the sweep first looks at a delayed job: a grace after its time when its delayed
    message is out (it only checks that the message was not lost), at its time otherwise (it
    is what starts the job)."""
    return run_at + grace if message_delay(now, run_at) is not None else run_at
