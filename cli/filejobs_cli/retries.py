"""When the CLI sends an API request again, and how long it waits first.

A request is sent again when the answer says it was not processed (429: API Gateway throttled
it before the function ran), or when it may have been lost on the way (502, 503, 504, a reset
connection, a timeout) and sending it twice cannot do a thing twice: a GET or HEAD, a request
carrying an Idempotency-Key (the API answers a repeat with the first answer), or one the caller
marks repeatable (a dry run, a PUT of absolute values). The wait is capped exponential backoff
with full jitter (`random() * min(cap, base * 2^(attempt - 1))`, so many clients throttled
together do not come back together), and never shorter than the answer's Retry-After.
"""

from __future__ import annotations

import email.utils
import http.client
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

NOT_PROCESSED = frozenset({429})
MAYBE_LOST = frozenset({502, 503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD"})
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Connection failures after which the request may or may not have reached the API.
LOST_IN_TRANSIT: tuple[type[BaseException], ...] = (
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    http.client.RemoteDisconnected,
    http.client.IncompleteRead,
    TimeoutError,
)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # in all, the first one included
    base_seconds: float = 0.5
    cap_seconds: float = 20.0
    # A Retry-After longer than this is not waited for: the failure is reported instead.
    longest_wait_seconds: float = 120.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    random: Callable[[], float] = field(default=random.random, compare=False)

    def backoff(self, attempt: int) -> float:
        """Full jitter: anywhere from 0 to the capped exponential bound of this attempt."""
        return self.random() * min(self.cap_seconds, self.base_seconds * 2.0 ** (attempt - 1))

    def wait_before_next(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None when there is none to make."""
        if attempt >= self.attempts:
            return None
        if retry_after is not None and retry_after > self.longest_wait_seconds:
            return None
        return max(self.backoff(attempt), retry_after or 0.0)


def repeatable_request(method: str, headers: Mapping[str, str], marked: bool | None) -> bool:
    """Whether sending this request twice can do no more than sending it once."""
    if marked is not None:
        return marked
    named = {name.lower() for name in headers}
    return method.upper() in SAFE_METHODS or IDEMPOTENCY_HEADER.lower() in named


def retried_status(status: int, *, is_repeatable: bool) -> bool:
    return status in NOT_PROCESSED or (status in MAYBE_LOST and is_repeatable)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds ("120") or an HTTP date; None if absent or bad."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())
