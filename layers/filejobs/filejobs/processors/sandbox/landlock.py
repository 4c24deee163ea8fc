"""Landlock (Linux 5.13+): a decoding process writes only in its own directory.

`Rules(writable, hidden)` is built by the zygote; `enforce` limits the calling process (a job's),
and everything it starts afterwards, for good (no privilege is needed, none can lift it):

- writing, creating, removing, renaming, linking and truncating: only inside `writable` (and
  writing `/dev/null`, where programs send what they discard; and making a Unix socket's node
  in the temporary directory, for LibreOffice's pipe: see `_base`);
- reading files and listing directories: everywhere a decoder needs (its Python, the libraries,
  the fonts, the unpacked LibreOffice tree, /proc/self) except the entries of the temporary
  directory that `hidden` names: the workers' job directories and the sandbox's, so one job
  cannot read another job's download. A name created there after the restriction is hidden too;
- with Landlock ABI 4+ (Linux 6.7), no TCP connect or bind (seccomp refuses the socket already);
- with ABI 6+ (Linux 6.12), no signal to a process outside the job (the worker, the zygote,
  clamd) and no connecting to an abstract Unix socket made outside it.

Landlock allows by listing, never by exception: "everything but the hidden entries" is the list
of every sibling of the path from / down to the temporary directory, and every entry of the
temporary directory but the hidden ones, kept current by the zygote before each job (`Rules`).

On a kernel without Landlock, `Rules.prepared` is None and nothing is enforced: the job still has
its private directory as cwd, TMPDIR and HOME, but could write (and read) anywhere its user may.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from filejobs.processors.sandbox.privileges import c_library

# The same numbers on x86_64 and aarch64 (every architecture: added after the tables merged).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
_MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_CHANGES = (
    _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK
    | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
)  # fmt: skip
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE  # all a rule on a file may hold
_DISCARD = Path(os.devnull)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in linux/landlock.h
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def abi() -> int:
    """The Landlock ABI this kernel offers: 0 where there is none (before Linux 5.13, or
    disabled at boot, or not Linux)."""
    libc = c_library()
    if libc is None:
        return 0
    version = int(
        libc.syscall(
            ctypes.c_long(_CREATE_RULESET),
            ctypes.c_void_p(None),
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    )
    return max(version, 0)


class Rules:
    """The zygote's ruleset for its jobs. The rules outside the temporary directory are made
    once; those for its entries are added as entries appear (the directory's mtime says when to
    look): a job pays one system call, not one per entry (a developer's /tmp holds thousands,
    Lambda's a handful). A ruleset takes rules but never drops one, so once many entries it
    names are gone (their inodes stay pinned by it) it is made afresh. A name created in the
    temporary directory after a job started is hidden from that job.

    `writable`: the zygote's root, where the one running job has its directory (the zygote
    empties the root after each job); `hidden` is asked about each name in the shared temporary
    directory (`tempfile.gettempdir()` of the zygote)."""

    _GONE_BEFORE_REBUILD = 256

    def __init__(self, writable: Path, hidden: Callable[[str], bool]) -> None:
        self._writable, self._hidden = writable, hidden
        self._temporary = Path(tempfile.gettempdir()).resolve()
        self._fd: int | None = None
        self._stamp: int | None = None
        self._granted: set[tuple[str, int]] = set()  # (name, inode) in the temporary directory

    def prepared(self) -> int | None:
        """The ruleset's descriptor, current, for the next job to `enforce`; None without
        Landlock."""
        version = abi()
        libc = c_library()
        if version < 1 or libc is None:
            return None
        stamp = self._temporary.stat().st_mtime_ns  # before listing: a change while it lists
        if self._fd is not None and stamp == self._stamp:  # is seen by the next job
            return self._fd
        present = self._visible_entries()
        if self._fd is None or len(self._granted - present) > self._GONE_BEFORE_REBUILD:
            self.close()
            self._fd, self._granted = _base(libc, version, self._writable, self._temporary), set()
        for name, _inode in present - self._granted:
            _allow(libc, self._fd, self._temporary / name, _READ_FILE | _READ_DIR, missing_ok=True)
        self._granted |= present
        self._stamp = stamp
        return self._fd

    def _visible_entries(self) -> set[tuple[str, int]]:
        with os.scandir(self._temporary) as listing:
            return {
                (entry.name, entry.inode()) for entry in listing if not self._hidden(entry.name)
            }

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _base(libc: ctypes.CDLL, version: int, writable: Path, temporary: Path) -> int:
    """A ruleset with every rule but those of the temporary directory's entries."""
    handled = _READ_FILE | _READ_DIR | _CHANGES
    handled |= (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
    ruleset = _create_ruleset(libc, version, handled)
    try:
        _allow(libc, ruleset, writable, handled)
        _allow(libc, ruleset, _DISCARD, handled & (_READ_FILE | _WRITE_FILE | _TRUNCATE))
        # LibreOffice 7 binds its single-instance pipe (a Unix socket) in /tmp itself whenever
        # /tmp is writable to its user, whatever TMPDIR says. A socket node is all this allows:
        # it overwrites, removes or renames nothing, the process behind it ends with the job,
        # and the zygote removes the nodes a job left (zygote._remove_sockets_left).
        _allow(libc, ruleset, temporary, _MAKE_SOCK)
        for root in _outside(temporary):
            _allow(libc, ruleset, root, _READ_FILE | _READ_DIR, missing_ok=True)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def enforce(ruleset: int) -> None:
    """In the decoding process: the prepared ruleset, on it and all it starts, for good."""
    libc = c_library()
    if libc is None:
        raise OSError("Landlock is Linux's")
    _check(libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), 0), "restrict")


def _create_ruleset(libc: ctypes.CDLL, version: int, handled_fs: int) -> int:
    attr = _RulesetAttr(handled_fs, 0, 0)
    size = 8  # ABI 1-3 know handled_access_fs only
    if version >= 4:
        attr.handled_access_net, size = _NET_BIND_TCP | _NET_CONNECT_TCP, 16
    if version >= 6:
        attr.scoped, size = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL, 24
    fd = libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), 0)
    return _check(fd, "create a ruleset")


def _allow(
    libc: ctypes.CDLL, ruleset: int, path: Path, access: int, *, missing_ok: bool = False
) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        if missing_ok:  # gone since it was listed, or not ours to open (/root)
            return
        raise
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS  # directory rights on a file are refused (EINVAL)
        rule = _PathBeneathAttr(access, fd)
        _check(
            libc.syscall(
                ctypes.c_long(_ADD_RULE),
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                0,
            ),
            f"allow {path}",
        )
    finally:
        os.close(fd)


def _check(result: int, what: str) -> int:
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"Landlock could not {what}: {os.strerror(error)}")
    return result


def _outside(temporary: Path) -> list[Path]:
    """Every sibling of the path from / down to the temporary directory: all a decoder may
    read, but the temporary directory's own entries."""
    on_the_way = {temporary, *temporary.parents}
    entries = [entry for folder in temporary.parents for entry in _entries(folder)]
    return [entry for entry in entries if entry not in on_the_way]


def _entries(folder: Path) -> Iterator[Path]:
    with contextlib.suppress(OSError), os.scandir(folder) as listing:
        for entry in listing:
            yield folder / entry.name
