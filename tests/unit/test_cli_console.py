"""The console commands' pure parts: what a dry run says, how progress is followed."""

from __future__ import annotations

import io
from typing import Any

from filejobs_cli.console import describe_preview, follow, progress_line, render_groups


def test_a_dry_run_says_how_many_and_names_a_few() -> None:
    sample = [{"id": f"job-{n}"} for n in range(7)]
    text = describe_preview({"action": "retry", "matched": 40000, "exact": True, "sample": sample})
    assert text.splitlines() == [
        "would retry 40000 jobs",
        "for example: job-0, job-1, job-2, job-3, job-4, ...",
    ]
    inexact = describe_preview({"action": "cancel", "matched": 4000, "exact": False, "sample": []})
    assert inexact == "would cancel at least 4000 jobs"


class Answers:
    """The API's answers to GET /operations/{id}, one per poll."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)

    def get(self, path: str) -> dict[str, Any]:
        assert path == "/operations/op-1"
        return self.answers.pop(0)


def test_progress_is_printed_as_it_moves_then_the_end() -> None:
    running = {"status": "running", "matched": 100, "processed": 50, "changed": 49, "skipped": 1}
    done = {**running, "status": "succeeded", "processed": 100, "changed": 99}
    out = io.StringIO()  # not a terminal: one line per change
    final = follow(Answers(running, running, done), "op-1", out, sleep=lambda _: None)  # type: ignore[arg-type]
    assert final["status"] == "succeeded"
    assert out.getvalue().splitlines() == [progress_line(running), progress_line(done)]
    assert progress_line(done) == "succeeded: 100/100 processed, 99 changed, 1 skipped, 0 errors"


def test_failure_groups_are_a_table_largest_first_as_given() -> None:
    groups = [
        {"id": "thumbnail_generation.0123456789abcdef", "count": 40000, "fingerprint": "boom <n>"},
        {"id": "virus_scan.fedcba9876543210", "count": 2, "fingerprint": "timeout"},
    ]
    lines = render_groups(groups).splitlines()
    assert lines[0].split() == ["GROUP", "COUNT", "FIRST", "SEEN", "LAST", "SEEN", "FINGERPRINT"]
    assert lines[1].startswith("thumbnail_generation.0123456789abcdef  40000")
