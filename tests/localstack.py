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
def running_stack(scratch: Path, *options: str) -> Iterator[LaunchedStack]:
    """`filejobs dev` on a copy of the project under `scratch` (the working tree is left
    alone), sweeping every 2 seconds and waiting at most 20 for running batches on Ctrl-C."""
    root = project_copy(ROOT, scratch)
    with launched(root, "--schedule-seconds", "2", "--grace-seconds", "20", *options) as stack:
        yield stack
