"""What an attempt says about itself while it runs: its progress and a bounded log.

A processor reports progress (a fraction 0..1 and a short message) and logs its key lines (what
it read, decided and wrote) through its `Work`, which holds one `AttemptRecorder` per attempt.
Recording costs a lock and an assignment: nothing is written when a processor reports. The
lease's heartbeat (a write the attempt makes anyway) carries the latest `AttemptNotes` into the
job's `progress` attribute, and the attempt's end (complete or fail: the write that records the
attempt) freezes them into its entry of the job's attempt history. No write is added.

Bounds (all in this module), so a job item stays far below DynamoDB's 400 KB whatever a
processor does: a message is at most PROGRESS_MESSAGE_LIMIT characters; a log line at most
LOG_LINE_BYTES bytes of UTF-8 (cut at a character); a log at most LOG_LINES_LIMIT lines. A
processor that logs more keeps its first LOG_HEAD_LINES lines and its latest lines, with one
line in between that says how many were left out (`dropped`). Worst case per attempt:
LOG_LINES_LIMIT x LOG_LINE_BYTES = 4,000 bytes of log.

The recorder is shared by two threads: the processor's (report, log) and the lease keeper's
(snapshot). Progress is monotonic within an attempt: a report below the last one keeps the
fraction (its message is still taken).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

PROGRESS_MESSAGE_LIMIT = 120
LOG_LINE_BYTES = 200
LOG_LINES_LIMIT = 20
# When a log overflows: its first lines (what the attempt read and decided), then one line that
# says how many were left out, then its latest lines (how it ended).
LOG_HEAD_LINES = 8
LOG_TAIL_LINES = LOG_LINES_LIMIT - LOG_HEAD_LINES - 1


@dataclass(frozen=True)
class AttemptNotes:
    """A snapshot of an attempt's progress and log, as the job stores and shows it.

    `fraction` is None until the processor reports any; `lines` is the log as shown, with the
    marker line in place when `dropped` lines were left out.
    """

    fraction: float | None = None
    message: str | None = None
    lines: tuple[str, ...] = ()
    dropped: int = 0

    @property
    def empty(self) -> bool:
        return self.fraction is None and self.message is None and not self.lines

    def finished(self) -> AttemptNotes:
        """The notes of an attempt that completed: its progress is whole."""
        return AttemptNotes(1.0, self.message, self.lines, self.dropped)


@dataclass(frozen=True)
class AttemptProgress:
    """The running attempt's notes as its last heartbeat wrote them (the job's `progress`).

    `attempt` fences it: notes of an earlier attempt are never shown as the current one's.
    """

    attempt: int
    updated_at: datetime
    notes: AttemptNotes = field(default_factory=AttemptNotes)


def dropped_line(count: int) -> str:
    return f"[... {count:,} line{'s' if count != 1 else ''} left out ...]"


def clean_line(text: str, limit_bytes: int = LOG_LINE_BYTES) -> str:
    """One printable line of at most `limit_bytes` bytes of UTF-8: control characters and line
    breaks become spaces, runs of spaces one, and an over-long line ends with an ellipsis."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    if len(flat.encode("utf-8")) <= limit_bytes:
        return flat
    room = limit_bytes - len("…".encode())
    cut = flat.encode("utf-8")[:room].decode("utf-8", errors="ignore")
    return cut.rstrip() + "…"


def clean_message(text: str | None) -> str | None:
    if text is None:
        return None
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    if not flat:
        return None
    if len(flat) <= PROGRESS_MESSAGE_LIMIT:
        return flat
    return flat[: PROGRESS_MESSAGE_LIMIT - 1].rstrip() + "…"


def clamp_fraction(value: float) -> float | None:
    """The fraction within 0..1, or None for what is no number (NaN, a string)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return None
    return min(1.0, max(0.0, number))


class AttemptRecorder:
    """Progress and log lines of one attempt, thread-safe and bounded (see the module's doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fraction: float | None = None
        self._message: str | None = None
        self._head: list[str] = []
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES + 1)
        self._overflow = 0  # lines pushed out of the tail

    def report_progress(self, fraction: float, message: str | None = None) -> None:
        """Record `fraction` (0..1; never below what was reported before) and its message."""
        value = clamp_fraction(fraction)
        text = clean_message(message)
        with self._lock:
            if value is not None and (self._fraction is None or value > self._fraction):
                self._fraction = value
            if text is not None:
                self._message = text

    def log(self, line: str) -> None:
        """Append one line (cleaned and capped); beyond the cap, the oldest after the head go."""
        text = clean_line(line)
        if not text:
            return
        with self._lock:
            if len(self._head) < LOG_HEAD_LINES:
                self._head.append(text)
                return
            if len(self._tail) == self._tail.maxlen:
                self._overflow += 1
            self._tail.append(text)

    def snapshot(self) -> AttemptNotes:
        with self._lock:
            fraction, message = self._fraction, self._message
            head, tail, overflow = list(self._head), list(self._tail), self._overflow
        if overflow == 0 and len(head) + len(tail) <= LOG_LINES_LIMIT:
            return AttemptNotes(fraction, message, (*head, *tail), 0)
        # Over the cap: the tail's oldest line gives way to the line that says what was dropped.
        dropped = overflow + len(tail) - LOG_TAIL_LINES
        kept = tail[len(tail) - LOG_TAIL_LINES :]
        return AttemptNotes(fraction, message, (*head, dropped_line(dropped), *kept), dropped)
