"""A value per tenant read at most once per `ttl_seconds` per function instance: what a warm
Lambda keeps of a tenant's settings (its quotas, its upload presets) instead of reading them for
every upload. A change reaches every instance within `ttl_seconds`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Remembered[T]:
    """`read(tenant)`, remembered per tenant for `ttl_seconds` (an answer that says "nothing
    set" included). A read that fails raises, as the read itself would, and nothing is kept."""

    read: Callable[[str], T]
    ttl_seconds: float
    monotonic: Callable[[], float] = time.monotonic
    _known: dict[str, tuple[float, T]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, tenant: str) -> T:
        now = self.monotonic()
        with self._lock:
            known = self._known.get(tenant)
        if known is not None and now - known[0] < self.ttl_seconds:
            return known[1]
        fresh = self.read(tenant)
        with self._lock:
            self._known[tenant] = (now, fresh)
        return fresh
