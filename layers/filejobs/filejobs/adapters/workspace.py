"""Scratch space on local disk (/tmp in Lambda) for one job attempt at a time.

Lambda keeps /tmp between invocations of a warm sandbox, and a timed-out invocation never runs
its cleanup: files left by one job would fill the next one's ephemeral storage. So each attempt
gets a fresh directory that is removed when it ends, and directories that no running attempt of
this process owns are removed before a new one starts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Scratch:
    def __init__(self, root: Path | None = None) -> None:
        # One root per process: several processes (the local stack) never clean each other's.
        self.root = root or Path(tempfile.gettempdir()) / f"filejobs-{os.getpid()}"
        self._active: set[Path] = set()
        self._lock = threading.Lock()

    @contextmanager
    def for_job(self, job_id: str) -> Iterator[Path]:
        path = self.root / f"job-{job_id}-{uuid.uuid4().hex[:8]}"
        with self._lock:
            self._remove_leftovers()
            path.mkdir(parents=True)
            self._active.add(path)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
            with self._lock:
                self._active.discard(path)

    def _remove_leftovers(self) -> None:
        if not self.root.is_dir():
            return
        for entry in self.root.iterdir():
            if entry not in self._active:
                shutil.rmtree(entry, ignore_errors=True)


_shared: Scratch | None = None


def shared_scratch() -> Scratch:
    """The process's Scratch: every worker of the process must share one to know what is live."""
    global _shared  # noqa: PLW0603 (one per process, created on first use)
    if _shared is None:
        _shared = Scratch()
    return _shared
