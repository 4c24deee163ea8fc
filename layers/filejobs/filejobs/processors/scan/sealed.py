"""The upload as the scan engines read it: sealed, with no path another process could rewrite.

A downloaded file in the job's workspace can be replaced between the engines (a rename over it)
or rewritten under them by anything running as the same user in the environment: an exploited
decoder of an earlier job, say. Then YARA and clamd could each vouch for bytes other than the
upload's. So the scan never reads a path: the download streams into

- a memfd (memfd_create(2)) sealed against writing, growing, shrinking and unsealing once
  written (F_ADD_SEALS): no process, not even one that reopens it through /proc, can change a
  byte of it any more, and it never had a name in any directory; or,
- for a file larger than the scan keeps in memory, an O_TMPFILE in the workspace (a file that
  never had a name either), reopened read-only and its writing descriptor closed: no process
  holds it open for writing, and none can find it by a path. It is not sealed (only a memfd
  can be): a process that may ptrace the worker could still reopen it through /proc, which is
  why the memfd is the default up to `IN_MEMORY_MAX_BYTES`.

clamd gets the descriptor itself (FILDES), YARA's sandbox gets it as an attachment, each reads
the same sealed bytes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MiB = 1024 * 1024
# Uploads up to this size are sealed in memory; the scan function's memory (template.yaml,
# 3008 MB) also holds clamd's loaded database (about 1.2 GB with the official one).
IN_MEMORY_MAX_BYTES: Final = 256 * MiB
SEALS: Final = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL


@dataclass(frozen=True)
class SealedFile:
    """One upload, read-only for good, open in this process as `fd`."""

    fd: int
    size: int
    name: str  # the upload's name, for what engines say ("invoice.zip!macro.bin")
    scratch: Path  # the job's workspace: where the archive walk unpacks members
    sealed: bool  # a sealed memfd (True) or a read-only O_TMPFILE (False)

    @property
    def path(self) -> Path:
        """How this process (or one given the descriptor at the same number) opens it again:
        a new reader of the same bytes, never a file anyone can rename over."""
        return Path(f"/proc/self/fd/{self.fd}")

    def rewind(self) -> None:
        """Back to its first byte: a reader given `fd` itself (clamd) shares its offset."""
        os.lseek(self.fd, 0, os.SEEK_SET)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@contextlib.contextmanager
def sealed_upload(
    chunks: Iterable[bytes],
    name: str,
    scratch: Path,
    *,
    expected_size: int | None = None,
    in_memory_max_bytes: int = IN_MEMORY_MAX_BYTES,
) -> Iterator[SealedFile]:
    """The bytes of `chunks`, written once and then sealed; closed when the block ends."""
    in_memory = expected_size is None or expected_size <= in_memory_max_bytes
    writer = _memfd(name) if in_memory else _tmpfile(scratch)
    if writer < 0:  # no O_TMPFILE on the workspace's file system: in memory after all
        in_memory, writer = True, _memfd(name)
    try:
        size = _write_all(writer, chunks)
        sealed = _read_only(writer, in_memory)
    finally:
        os.close(writer)
    upload = SealedFile(sealed, size, name, scratch, in_memory)
    try:
        yield upload
    finally:
        upload.close()


@contextlib.contextmanager
def opened_file(path: Path) -> Iterator[SealedFile]:
    """A file on disk by a read-only descriptor, not copied and so not sealed: for an engine
    given a path (a test's or the bench's own file), which no other process shares."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    upload = SealedFile(fd, os.fstat(fd).st_size, path.name, path.parent, sealed=False)
    try:
        yield upload
    finally:
        upload.close()


@contextlib.contextmanager
def sealed_copy(path: Path, **options: int) -> Iterator[SealedFile]:
    """A sealed copy of a file on disk (a test's or the bench's), scratch beside it."""
    with path.open("rb") as source:
        chunks = iter(lambda: source.read(8 * MiB), b"")
        size = path.stat().st_size
        with sealed_upload(chunks, path.name, path.parent, expected_size=size, **options) as up:
            yield up


def is_sealed(fd: int) -> bool:
    """Whether `fd` is a memfd no one can write any more."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:  # not a memfd
        return False
    return seals & SEALS == SEALS


def _memfd(name: str) -> int:
    # MFD_CLOEXEC: no program the worker starts inherits it unless handed it on purpose.
    return os.memfd_create(f"upload:{name[:200]}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


def _tmpfile(scratch: Path) -> int:
    """A nameless file in `scratch`; -1 where its file system has no O_TMPFILE."""
    try:
        return os.open(scratch, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError as error:
        # EISDIR (an older kernel) or EOPNOTSUPP (a file system without it)
        if error.errno in (errno.EISDIR, errno.EOPNOTSUPP):
            return -1
        raise


def _write_all(fd: int, chunks: Iterable[bytes]) -> int:
    size = 0
    for piece in chunks:
        view = memoryview(piece)
        while view:
            written = os.write(fd, view)
            view = view[written:]
            size += written
    return size


def _read_only(writer: int, in_memory: bool) -> int:
    """A read-only descriptor of what `writer` wrote; the caller closes `writer`."""
    if in_memory:
        fcntl.fcntl(writer, fcntl.F_ADD_SEALS, SEALS)
    # A new open file description, read-only: what it was opened for cannot be changed later.
    reader = os.open(f"/proc/self/fd/{writer}", os.O_RDONLY | os.O_CLOEXEC)
    os.lseek(reader, 0, os.SEEK_SET)
    return reader
