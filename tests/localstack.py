"""A running `filejobs dev`, started as a user starts it, for tests that drive the local stack
only through its public faces (S3 API, HTTP API, CLI, `.filejobs/local.json`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filejobs_dev.local.launch import TERMINAL, LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
RunningStack = LaunchedStack
__all__ = ["ROOT", "TERMINAL", "RunningStack", "running_stack"]


@contextmanager
def running_stack(
    scratch: Path, *options: str, schedule_seconds: float | None = 2
) -> Iterator[LaunchedStack]:
    """`filejobs dev` on a copy of the project under `scratch` (the working tree is left
    alone), waiting at most 20 s for running batches on Ctrl-C; its sweep (and any schedule of
    five minutes or less) runs every `schedule_seconds`, or at the template's own rate when
    None: for tests that never wait on a schedule, as a sweep over 256 shards every 2 s is
    most of an idle stack's work."""
    root = project_copy(ROOT, scratch)
    fast = () if schedule_seconds is None else ("--schedule-seconds", str(schedule_seconds))
    with launched(root, *fast, "--grace-seconds", "20", *options) as stack:
        yield stack
