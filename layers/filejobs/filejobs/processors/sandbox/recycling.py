"""Word, to the rest of the worker, that a decoder sandbox was recycled.

A sandbox replaces its zygote and removes its scratch root after a decoder crashed, broke a
limit or ran out of time (client.py): the process that did may have been taken over. What such
a process could reach and other jobs then use (the unpacked LibreOffice tree, the definitions
directory: read-only to it under Landlock, writable without) is worth checking again before its
next use. Two ways to hear of it:

- `generation()`: a number that grows at each recycle. Keep the one seen when you last checked
  and check again when it differs (no callback, no thread, nothing to unregister);
- `on_recycle(callback)`: called, in the worker's thread that ran the job, with the reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from aws_lambda_powertools import Logger

logger = Logger(child=True)

_lock = threading.Lock()
_generation = 0
_listeners: list[Callable[[str], None]] = []


def generation() -> int:
    """How many recycles this process has seen."""
    return _generation


def on_recycle(callback: Callable[[str], None]) -> None:
    """`callback(reason)` after every recycle from now on."""
    with _lock:
        _listeners.append(callback)


def recycled(reason: str) -> None:
    """Called by a sandbox once it has replaced its zygote and removed its scratch root."""
    global _generation  # noqa: PLW0603 (one count per process, by design)
    with _lock:
        _generation += 1
        listeners = list(_listeners)
    logger.warning("the decoder sandbox was recycled", extra={"reason": reason})
    for listener in listeners:
        try:
            listener(reason)
        except Exception:  # one listener's failure neither stops the others nor the job
            logger.exception("a listener to the sandbox's recycling failed")
