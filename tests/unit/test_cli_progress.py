"""Specification: how `filejobs upload` shows the jobs it follows (pure rendering)."""

from __future__ import annotations

import io
from typing import Any

from filejobs_cli.commands import attempt_lines
from filejobs_cli.progress import (
    LineDisplay,
    TableDisplay,
    detail_of,
    redraw,
    render_table,
    row_of,
    summary,
)


def job(status: str, job_type: str = "thumbnail_generation", **extra: Any) -> dict[str, Any]:
    return {"id": f"{job_type}-1", "job_type": job_type, "status": status, "attempt": 1, **extra}


def test_the_table_aligns_a_header_and_one_line_per_job() -> None:
    # given two jobs of one file
    rows = [
        row_of("photo.png", job("completed", result={"thumbnails": [{"size": 128}]})),
        row_of("photo.png", job("failed", "virus_scan", error_message="engine down")),
    ]
    # when rendered
    lines = render_table(rows)
    # then a header comes first and the columns line up
    assert lines[0].split() == ["FILE", "JOB", "STATUS", "ATTEMPT", "RESULT"]
    assert lines[1].index("completed") == lines[2].index("failed") == lines[0].index("STATUS")
    assert lines[1].endswith("1 thumbnails (128)")
    assert lines[2].endswith("engine down")


def test_the_detail_is_a_short_result_or_the_reason_it_has_none() -> None:
    # then a completed job says what it produced, a failed or cancelled one why not
    assert detail_of(job("completed", "virus_scan", result={"verdict": "clean"})) == "verdict clean"
    assert detail_of(job("completed", "deduplication_check", result={"duplicate_of": None})) == (
        "unique"
    )
    assert detail_of(job("cancelled", cancel_reason="not needed")) == "not needed"
    assert detail_of(job("running")) == ""
    assert detail_of(job("scheduled", error_message="timeout")) == "retrying: timeout"
    # and a long error is cut short on one line
    long = detail_of(job("failed", error_message="x " * 100))
    assert len(long) <= 40 and long.endswith("…") and "\n" not in long


def test_without_a_terminal_each_status_change_is_printed_once() -> None:
    # given a line display
    stream = io.StringIO()
    display = LineDisplay(stream)
    # when the same state is shown twice, then a change
    display.show([row_of("a.txt", job("running"))])
    display.show([row_of("a.txt", job("running"))])
    display.show([row_of("a.txt", job("completed", result={"key": "derived/t/f/j/out.gz"}))])
    # then there is one line per change, and no escape codes
    assert stream.getvalue().splitlines() == [
        "a.txt: thumbnail_generation running (attempt 1)",
        "a.txt: thumbnail_generation completed (attempt 1): out.gz",
    ]
    assert "\x1b" not in stream.getvalue()


def test_on_a_terminal_the_table_is_redrawn_in_place() -> None:
    # given a table display that drew one job (header + 1 line)
    stream = io.StringIO()
    display = TableDisplay(stream, width=80)
    display.show([row_of("a.txt", job("running"))])
    first = stream.getvalue()
    assert first.startswith("\x1b[2K")  # nothing to go back over yet: it starts drawing
    # when it is shown again
    display.show([row_of("a.txt", job("completed"))])
    # then the cursor goes back up over the two lines drawn and each line is cleared
    second = stream.getvalue()[len(first) :]
    assert second.startswith("\x1b[2F\x1b[2K")
    assert second.count("\x1b[2K") == 2


def test_redraw_cuts_lines_to_the_width_and_clears_a_longer_earlier_drawing() -> None:
    text = redraw(["x" * 200], previous=3, width=50)
    assert text.startswith("\x1b[3F")
    assert "x" * 50 not in text and "x" * 49 in text
    assert text.endswith("\x1b[J")


def test_the_summary_counts_each_terminal_status() -> None:
    rows = [row_of("f", job(s)) for s in ("completed", "completed", "failed", "running")]
    assert summary(rows) == "2 completed, 1 failed, 0 cancelled, 1 unfinished"


def test_a_running_jobs_progress_is_its_detail_and_a_change_of_it_is_printed() -> None:
    running = {
        "id": "j1",
        "job_type": "video_thumbnail",
        "status": "running",
        "attempt": 1,
        "progress": {"attempt": 1, "fraction": 0.4, "percent": 40, "message": "downloaded 4 MB"},
    }
    assert row_of("clip.mp4", running).detail == "40% downloaded 4 MB"
    out = io.StringIO()
    display = LineDisplay(out)
    display.show([row_of("clip.mp4", running)])
    display.show([row_of("clip.mp4", running)])  # the same: nothing new
    later = {**running, "progress": {"attempt": 1, "percent": 70, "message": "decoding"}}
    display.show([row_of("clip.mp4", later)])
    assert out.getvalue().splitlines() == [
        "clip.mp4: video_thumbnail running (attempt 1): 40% downloaded 4 MB",
        "clip.mp4: video_thumbnail running (attempt 1): 70% decoding",
    ]


def test_the_job_view_shows_the_progress_so_far_and_each_attempts_log() -> None:
    job = {
        "id": "j1",
        "status": "running",
        "attempt": 2,
        "progress": {
            "attempt": 2,
            "updated_at": "2026-12-01T08:00:00+00:00",
            "percent": 40,
            "message": "compressed 4.0 MB of 10.0 MB",
            "log": ["read text/csv, 10.0 MB: zstd level 3"],
        },
        "attempts": [
            {
                "number": 1,
                "outcome": "retrying",
                "ended_at": "2026-12-01T07:59:00+00:00",
                "error": "TransientError: throttled",
                "percent": 10,
                "message": "compressed 1.0 MB of 10.0 MB",
                "log": ["read text/csv, 10.0 MB: zstd level 3"],
            }
        ],
    }
    assert attempt_lines(job) == [
        "  progress: 40% compressed 4.0 MB of 10.0 MB (attempt 2 at 2026-12-01T08:00:00+00:00)",
        "  log so far:",
        "    | read text/csv, 10.0 MB: zstd level 3",
        "  attempts:",
        "    1. retrying 2026-12-01T07:59:00+00:00 (10% compressed 1.0 MB of 10.0 MB)",
        "       error: TransientError: throttled",
        "      log:",
        "        | read text/csv, 10.0 MB: zstd level 3",
    ]
