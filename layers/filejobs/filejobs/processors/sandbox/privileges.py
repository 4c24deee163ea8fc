"""The Linux calls that take power away from a process (prctl, capset), through libc.

Each returns whether it took effect: elsewhere than Linux they do nothing, and the caller says
so in its log instead of failing (the local stack on a laptop still runs).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAPABILITY_SETS = 2  # version 3 takes two 32-bit words per set


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


@functools.cache
def c_library() -> ctypes.CDLL | None:
    """The C library, for the calls Python does not wrap (None elsewhere than Linux): the
    interpreter's own symbols, libc's among them, with no find_library (which runs a program)."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> bool:
    libc = c_library()
    if libc is None:
        return False
    return int(libc.prctl(option, arg, arg3, 0, 0)) == 0


def make_non_dumpable() -> bool:
    """No process of the same user may read this one's /proc environ, memory or ptrace it."""
    return _prctl(_PR_SET_DUMPABLE, 0)


def is_dumpable() -> bool:
    libc = c_library()
    return libc is None or int(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)) != 0


def die_with_parent() -> bool:
    """SIGKILL for this process when the thread that forked it ends (the zygote's only thread,
    for a decoder): a decoder does not outlive its zygote."""
    return _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def become_subreaper() -> bool:
    """Orphans among this process's descendants become its children, not init's: a decoder's
    daemon (a double fork and setsid) stays within reach of the zygote that must end it."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def forbid_new_privileges() -> bool:
    """No exec of a set-user-id program (or file capabilities) may give power back."""
    return _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def drop_capabilities() -> bool:
    """Every capability gone, from every set, for good: a process running as root (the CI
    container, a developer's shell) keeps uid 0's file ownership but loses CAP_SYS_PTRACE and
    CAP_DAC_*, so a non-dumpable process stays closed to it. A no-op for a process that has none
    (Lambda's unprivileged user)."""
    libc = c_library()
    if libc is None:
        return False
    for capability in range(_last_capability() + 1):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)  # EPERM without CAP_SETPCAP: fine
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * _CAPABILITY_SETS)()
    if int(libc.capset(ctypes.byref(header), data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset: {os.strerror(error)}")
    return True


def _last_capability() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 63
