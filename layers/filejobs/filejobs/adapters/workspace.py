"""Scratch space on local disk (/tmp in Lambda) for one job attempt at a time.

Lambda keeps /tmp between invocations of a warm sandbox, and a timed-out invocation never runs
its cleanup: files left by one job would fill the next one's ephemeral storage. So each attempt
gets a fresh directory that is removed when it ends, and directories that no running attempt of
this process owns are removed before a new one starts.

Every such directory (a worker's job directories, the decoder sandbox's) is made 0700 inside a
root named with `PRIVATE_PREFIX` in the temporary directory: the sandbox hides every name with
that prefix from the decoders it runs (processors/sandbox/landlock.py), so a decoder reads no
other job's files, only its own.
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

# The names of the job directories' roots in the temporary directory: hidden from decoders.
PRIVATE_PREFIX = "filejobs-jobs-"


def is_private(name: str) -> bool:
    """Whether a name in the temporary directory is a root of job directories."""
    return name.startswith(PRIVATE_PREFIX)


def private_root(kind: str) -> Path:
    """A fresh 0700 root of job directories for this process, `kind` naming its owner. Roots of
    the same kind whose process is gone (a Lambda runtime killed at a timeout: /tmp outlives it)
    are removed first."""
    parent = Path(tempfile.gettempdir())
    _remove_orphans(parent, f"{PRIVATE_PREFIX}{kind}-")
    return Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{kind}-{os.getpid()}-", dir=parent))


def _remove_orphans(parent: Path, prefix: str) -> None:
    for entry in parent.glob(f"{prefix}*"):
        owner = entry.name.removeprefix(prefix).split("-", 1)[0]
        if owner.isdigit() and not _running(int(owner)):
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    return True


class Scratch:
    def __init__(self, root: Path | None = None) -> None:
        # One root per process: several processes (the local stack) never clean each other's.
        self.root = root or Path(tempfile.gettempdir()) / f"{PRIVATE_PREFIX}{os.getpid()}"
        self._active: set[Path] = set()
        self._lock = threading.Lock()
        # A process's roots outlive it (a Lambda runtime killed at a timeout, mid-download):
        # the first job of the next one removes them, once.
        self._orphans_removed = root is not None

    @contextmanager
    def for_job(self, job_id: str) -> Iterator[Path]:
        path = self.root / f"job-{job_id}-{uuid.uuid4().hex[:8]}"
        with self._lock:
            if not self._orphans_removed:
                _remove_orphans(self.root.parent, PRIVATE_PREFIX)
                self._orphans_removed = True
            self._remove_leftovers()
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.mkdir(mode=0o700)
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
