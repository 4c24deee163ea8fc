"""What a processor is given, what it returns, and how it stops early."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from filejobs.domain.attempt_notes import AttemptRecorder
from filejobs.domain.job import ProcessingJob


def short_error(error: BaseException | str, limit: int = 200) -> str:
    """An error as a job's message or a skipped page's reason takes it: one line (its whitespace
    collapsed), at most `limit` characters, its type's name when it says nothing."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class StopRequested(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by a processor that noticed its job was cancelled or taken over."""


class OutputWriter(Protocol):
    """Writes a job's derived files under deterministic keys (domain.keys.derived_key).

    Each method returns the object key written; writing the same name again overwrites it.
    """

    def put_bytes(self, name: str, data: bytes, content_type: str) -> str: ...

    def put_file(self, name: str, path: Path, content_type: str) -> str: ...

    def put_stream(self, name: str, chunks: Iterable[bytes], content_type: str) -> str:
        """Writes the bytes as they come (multipart above one part); aborts on any failure."""
        ...


@dataclass(frozen=True)
class Work:
    """One attempt of one job, as the worker hands it to a processor."""

    job: ProcessingJob
    # True once the job was cancelled or taken over: check it often, then raise StopRequested.
    should_stop: Callable[[], bool]
    # An empty directory of this attempt's own; removed with everything in it when it ends.
    workspace: Path
    outputs: OutputWriter
    # The attempt's progress and bounded log (domain/attempt_notes.py): the worker's lease
    # keeper reads it for each heartbeat, and the attempt's end records it.
    notes: AttemptRecorder = field(default_factory=AttemptRecorder)

    def report_progress(self, fraction: float, message: str | None = None) -> None:
        """How far the attempt is (0..1, never going back) and what it is at, in a few words.

        Costs no write: the lease's next heartbeat carries the latest report. Cheap enough to
        call per chunk; thread-safe.
        """
        self.notes.report_progress(fraction, self._scrubbed(message))

    def log(self, line: str) -> None:
        """One key line of the attempt: what it read, decided or wrote (object keys and facts;
        never a secret). Capped: 20 lines of 200 bytes, the first and the latest kept."""
        self.notes.log(self._scrubbed(line) or "")

    def _scrubbed(self, text: str | None) -> str | None:
        """The text without this attempt's scratch directory (a local path says nothing)."""
        if text is None:
            return None
        return str(text).replace(str(self.workspace), "<workspace>")


# Does the job's work and returns its result_data (sizes, dimensions, output keys, verdicts).
type Processor = Callable[[Work], dict[str, Any]]
