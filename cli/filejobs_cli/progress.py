"""Following jobs: a table redrawn in place on a terminal, one line per change elsewhere.

The rendering is pure (rows in, lines out); the two displays only decide how lines reach the
stream. No dependency beyond ANSI escapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

TERMINAL_STATUSES = ("completed", "failed", "cancelled")
_COLUMNS = ("FILE", "JOB", "STATUS", "ATTEMPT", "RESULT")
_MAX_CELL = 40


@dataclass(frozen=True)
class JobRow:
    file: str  # what the user calls the file: the path given, or its id
    job_id: str
    job_type: str
    status: str
    attempt: int
    detail: str  # a short result, or the error
    percent: int | None = None  # a running attempt's progress, as its last heartbeat said

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


def row_of(file: str, job: Mapping[str, Any]) -> JobRow:
    return JobRow(
        file=file,
        job_id=str(job.get("id", "")),
        job_type=str(job.get("job_type", "")),
        status=str(job.get("status", "")),
        attempt=int(job.get("attempt") or 0),
        detail=detail_of(job),
        percent=percent_of(job),
    )


def percent_of(job: Mapping[str, Any]) -> int | None:
    progress = job.get("progress")
    if job.get("status") != "running" or not isinstance(progress, Mapping):
        return None
    percent = progress.get("percent")
    return percent if isinstance(percent, int) else None


def progress_phrase(progress: Any) -> str:
    """'40% encoded 12 of 30 s' from a job's or an attempt's progress fields ('' if none)."""
    if not isinstance(progress, Mapping):
        return ""
    percent, message = progress.get("percent"), progress.get("message")
    parts = [f"{percent}%" if isinstance(percent, int) else "", str(message or "")]
    return " ".join(p for p in parts if p)


def detail_of(job: Mapping[str, Any]) -> str:
    """One short phrase: what the job produced, or why it did not."""
    status = job.get("status")
    if status == "failed":
        return shorten(str(job.get("error_message") or "failed"))
    if status == "cancelled":
        return shorten(str(job.get("cancel_reason") or "cancelled"))
    if status == "running" and progress_phrase(job.get("progress")):
        return shorten(progress_phrase(job.get("progress")))
    if status in {"pending", "scheduled", "running"} and job.get("error_message"):
        return shorten(f"retrying: {job['error_message']}")
    result = job.get("result")
    if status != "completed" or not isinstance(result, dict):
        return ""
    return shorten(result_summary(result))


def result_summary(result: Mapping[str, Any]) -> str:  # noqa: PLR0911 (one per result kind)
    thumbnails = result.get("thumbnails")
    if isinstance(thumbnails, list):
        sizes = [str(t.get("size")) for t in thumbnails if isinstance(t, dict)]
        return f"{len(thumbnails)} thumbnails ({', '.join(sizes)})"
    poster = result.get("poster")
    if isinstance(poster, dict):
        return f"poster {poster.get('width')}x{poster.get('height')}"
    if result.get("skipped"):
        return f"skipped: {result.get('reason', '')}".rstrip(": ")
    if "verdict" in result:
        return f"verdict {result['verdict']}"
    if "duplicate_of" in result:
        duplicate = result.get("duplicate_of")
        return "unique" if duplicate is None else f"duplicate of {duplicate}"
    if "ratio" in result:
        return f"{result.get('algorithm', 'compressed')} ratio {result['ratio']}"
    if isinstance(result.get("key"), str):
        return str(result["key"]).rsplit("/", 1)[-1]
    scalars = [f"{k}={v}" for k, v in result.items() if isinstance(v, str | int | float)]
    return " ".join(scalars[:2])


def shorten(text: str, width: int = _MAX_CELL) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(rows: Sequence[JobRow]) -> list[str]:
    """A header and one aligned line per job, in the order given."""
    cells = [(shorten(r.file, 28), r.job_type, r.status, str(r.attempt), r.detail) for r in rows]
    widths = [max([len(c[i]) for c in cells] + [len(_COLUMNS[i])]) for i in range(4)]
    lines = []
    for cell in [_COLUMNS, *cells]:
        head = "  ".join(value.ljust(widths[i]) for i, value in enumerate(cell[:4]))
        lines.append(f"{head}  {cell[4]}".rstrip())
    return lines


def change_line(row: JobRow) -> str:
    line = f"{row.file}: {row.job_type} {row.status} (attempt {row.attempt})"
    return f"{line}: {row.detail}" if row.detail else line


def changed(previous: Mapping[str, JobRow], rows: Iterable[JobRow]) -> list[JobRow]:
    """The rows whose status, attempt or progress differ from what was last shown."""
    out = []
    for row in rows:
        before = previous.get(row.job_id)
        now = (row.status, row.attempt, row.percent)
        if before is None or (before.status, before.attempt, before.percent) != now:
            out.append(row)
    return out


def summary(rows: Iterable[JobRow]) -> str:
    counts = dict.fromkeys(TERMINAL_STATUSES, 0)
    other = 0
    for row in rows:
        if row.status in counts:
            counts[row.status] += 1
        else:
            other += 1
    text = ", ".join(f"{counts[s]} {s}" for s in TERMINAL_STATUSES)
    return text + (f", {other} unfinished" if other else "")


class Display(Protocol):
    def show(self, rows: Sequence[JobRow]) -> None: ...

    def note(self, line: str) -> None: ...


class LineDisplay:
    """Not a terminal: one line per job status change, for logs and pipes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown: dict[str, JobRow] = {}

    def show(self, rows: Sequence[JobRow]) -> None:
        for row in changed(self.shown, rows):
            self.stream.write(change_line(row) + "\n")
            self.shown[row.job_id] = row
        self.stream.flush()

    def note(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


class TableDisplay:
    """A terminal: the table redrawn in place (cursor up over the last drawing, clear lines)."""

    def __init__(self, stream: TextIO, width: int = 120) -> None:
        self.stream = stream
        self.width = width
        self.drawn = 0

    def show(self, rows: Sequence[JobRow]) -> None:
        self.stream.write(redraw(render_table(rows), self.drawn, self.width))
        self.drawn = len(rows) + 1
        self.stream.flush()

    def note(self, line: str) -> None:
        # Notes go above the table: the table is drawn again below them on the next show().
        self.stream.write(redraw([line], self.drawn, self.width))
        self.drawn = 0
        self.stream.flush()


def redraw(lines: Sequence[str], previous: int, width: int) -> str:
    """ANSI text that replaces the `previous` lines above the cursor with `lines`."""
    up = f"\x1b[{previous}F" if previous else ""
    body = "".join(f"\x1b[2K{line[: max(width - 1, 10)]}\n" for line in lines)
    # Clear what remains of a longer earlier drawing.
    tail = "\x1b[J" if previous > len(lines) else ""
    return up + body + tail
