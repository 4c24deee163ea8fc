"""What a process that parses hostile bytes may still ask of the kernel: a seccomp-BPF filter.

`no_network()` installs, in the calling process and everything it starts afterwards (a filter
is inherited across fork and exec and can never be removed), a filter that:

- refuses `socket()` for every family but AF_UNIX, with EACCES: no TCP or UDP to the internet,
  to the Lambda Runtime API on 127.0.0.1:9001 or to the instance metadata, no listening port, no
  netlink or packet socket. A Unix socketpair still works (a program talking to its own helper);
- refuses io_uring (it can open sockets and files with no system call for the filter to see);
- refuses what only an attacker wants: ptrace and process_vm_readv/writev (other processes of
  the same user), bpf, perf_event_open, userfaultfd, the keyring, kexec, modules, swap, reboot,
  every mount call, and new namespaces (unshare, setns, namespace flags to clone; clone3, whose
  flags sit in memory a filter cannot read, says ENOSYS so the C library falls back to clone);
- refuses tkill, pidfd_send_signal and pidfd_getfd; and, for a decoder
  (`compiled(protected)`), any signal or pidfd to its zygote, the worker or their process
  group, or to every process at once (what Landlock's signal scoping does on Linux 6.12+);
- lets through only the native system call tables of x86_64 and aarch64: a 32-bit call (int
  0x80 on x86_64) or any other architecture kills the process, an x32 call is refused. The
  filter checks the architecture first because system call numbers differ between tables, and
  the i386 table has `socketcall`, which would slip a socket past the number check.

Why a ctypes BPF program and not a binding: Lambda's python3.13 image does not promise
libseccomp, and the PyPI bindings either need it (pyseccomp) or are young, unmaintained or
unreviewed (seccomplite, seccompy); the program below is some forty instructions, built by
`_program` from the tables beside it, and tested by tests/integration/test_decoder_containment.py
and tests/unit/test_sandbox_confinement.py.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import socket
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass

# The exit code of a decoding process that could not install the filter (zygote.py): it decoded
# nothing, and the worker says so (client.py).
UNCONFINED_EXIT = 71

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
_X32_SYSCALL_BIT = 0x40000000

_RET_KILL_PROCESS = 0x80000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]. The first
# argument's low 32 bits (both architectures are little-endian) hold an int such as a family.
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

# BPF classic opcodes (linux/filter.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME.
_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
_NEW_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080


@dataclass(frozen=True)
class _Table:
    """One architecture's system call numbers for what the filter looks at."""

    arch: int
    socket: int
    clone: int
    clone3: int
    refused: tuple[int, ...]
    # kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_open: a pid (or -group) first.
    signals: tuple[int, ...]


# In the order: io_uring_setup, _enter, _register, ptrace, process_vm_readv, _writev, bpf,
# perf_event_open, userfaultfd, keyctl, add_key, request_key, kexec_load, kexec_file_load,
# init_module, finit_module, delete_module, swapon, swapoff, reboot, mount, umount2,
# pivot_root, open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr, unshare,
# setns, then tkill (a thread of any process, by its id alone: glibc uses tgkill),
# pidfd_send_signal (it also takes a /proc/<pid> directory) and pidfd_getfd (asm/unistd_64.h
# and asm-generic/unistd.h).
_X86_64 = _Table(
    _AUDIT_ARCH_X86_64,
    socket=41,
    clone=56,
    clone3=435,
    refused=(425, 426, 427, 101, 310, 311, 321, 298, 323, 250, 248, 249, 246, 320, 175, 313,
             176, 167, 168, 169, 165, 166, 155, 428, 429, 430, 431, 432, 433, 442, 272, 308,
             200, 424, 438),
    signals=(62, 234, 129, 297, 434),
)  # fmt: skip
_AARCH64 = _Table(
    _AUDIT_ARCH_AARCH64,
    socket=198,
    clone=220,
    clone3=435,
    refused=(425, 426, 427, 117, 270, 271, 280, 241, 282, 219, 217, 218, 104, 294, 105, 273,
             106, 224, 225, 142, 40, 39, 41, 428, 429, 430, 431, 432, 433, 442, 97, 268,
             130, 424, 438),
    signals=(129, 131, 138, 240, 434),
)  # fmt: skip

# An instruction before its jumps are resolved: (code, label if true, label if false, k).
type _Step = tuple[int, str | None, str | None, int]


def _program(protected: Sequence[int] = ()) -> list[tuple[int, int, int, int]]:
    """The filter, as (code, jump if true, jump if false, k) instructions. With `protected`
    pids (or process groups), a signal to any of them, or to every process (-1), is refused."""
    steps: list[_Step | str] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ_K, "x86_64", None, _AUDIT_ARCH_X86_64),
        (_JEQ_K, "aarch64", None, _AUDIT_ARCH_AARCH64),
        (_RET_K, None, None, _RET_KILL_PROCESS),
        "x86_64",
        (_LD_W_ABS, None, None, _NR),
        (_JGE_K, "refuse", None, _X32_SYSCALL_BIT),
        *_checks(_X86_64, "x86_64", protected),
        "aarch64",
        (_LD_W_ABS, None, None, _NR),
        *_checks(_AARCH64, "aarch64", protected),
        "refuse",
        (_RET_K, None, None, _RET_ERRNO | errno.EPERM),
    ]
    return _resolved(steps)


def _checks(table: _Table, name: str, protected: Sequence[int]) -> list[_Step | str]:
    """The number (already loaded) against one table; ends in a return on every path. BPF
    jumps only forward: each table has its own returns, but for the shared "refuse" at the end."""
    label = f"{name}-".__add__
    targets = {-1, *protected, *(-pid for pid in protected)}
    signals: list[_Step | str] = (
        [(_JEQ_K, label("signal"), None, number) for number in table.signals] if protected else []
    )
    return [
        *signals,
        (_JEQ_K, label("socket"), None, table.socket),
        (_JEQ_K, label("clone"), None, table.clone),
        (_JEQ_K, label("clone3"), None, table.clone3),
        *[(_JEQ_K, "refuse", None, number) for number in table.refused],
        (_RET_K, None, None, _RET_ALLOW),
        label("socket"),
        (_LD_W_ABS, None, None, _ARG0_LOW),
        (_JEQ_K, label("allow"), None, socket.AF_UNIX),
        (_RET_K, None, None, _RET_ERRNO | errno.EACCES),
        label("clone"),
        (_LD_W_ABS, None, None, _ARG0_LOW),
        (_JSET_K, "refuse", None, _NEW_NAMESPACES),
        label("allow"),
        (_RET_K, None, None, _RET_ALLOW),
        label("clone3"),
        (_RET_K, None, None, _RET_ERRNO | errno.ENOSYS),
        *(_signal_checks(label("signal"), sorted(targets)) if protected else []),
    ]


def _signal_checks(name: str, targets: list[int]) -> list[_Step | str]:
    """A signal's (or pidfd's) first argument against the pids and groups it may not reach."""
    return [
        name,
        (_LD_W_ABS, None, None, _ARG0_LOW),
        *[(_JEQ_K, "refuse", None, target & 0xFFFFFFFF) for target in targets],
        (_RET_K, None, None, _RET_ALLOW),
    ]


def _resolved(steps: list[_Step | str]) -> list[tuple[int, int, int, int]]:
    """Labels (strings) turned into BPF's forward jump offsets; a label names the next step."""
    places: dict[str, int] = {}
    instructions: list[_Step] = []
    for step in steps:
        if isinstance(step, str):
            if step in places:
                raise ValueError(f"the filter defines {step!r} twice")
            places[step] = len(instructions)
        else:
            instructions.append(step)
    return [
        (code, _offset(places, if_true, index), _offset(places, if_false, index), k)
        for index, (code, if_true, if_false, k) in enumerate(instructions)
    ]


def _offset(places: dict[str, int], label: str | None, index: int) -> int:
    if label is None:
        return 0
    offset = places[label] - index - 1
    if not 0 <= offset <= 255:
        raise ValueError(f"the filter cannot jump from {index} to {label!r}")
    return offset


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """privileges.c_library's twin: this module imports nothing of the package, as the ClamAV
    wrapper loads it by its path alone (scan/environment.py)."""
    if not sys.platform.startswith("linux"):
        return None
    # The interpreter's own symbols, libc's among them: no find_library, which runs a program.
    return ctypes.CDLL(None, use_errno=True)


def no_network() -> bool:
    """Installs the filter in this process (and all it starts from now on): True once it holds,
    False where seccomp is unavailable (not Linux, a kernel without it). Sets no_new_privs
    first, which the kernel requires of an unprivileged process and which changes nothing for
    one that has already given up its privileges. Safe in a `preexec_fn`."""
    return install(compiled())


def compiled(protected: Sequence[int] = ()) -> bytes:
    """The filter as the kernel takes it. With `protected` pids or process groups: also no
    signal (nor pidfd) to them, nor to every process at once (kill -1): for a decoder, its
    zygote and the worker, which a kernel without Landlock's signal scoping (Linux 6.12) would
    let it kill or stop. Built by the zygote once; installed by each job (`install`)."""
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in _program(protected))


def install(program: bytes) -> bool:
    """`program` (from `compiled`) installed in this process, as `no_network` says."""
    libc = _libc()
    if libc is None:
        return False
    if int(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) != 0:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    return int(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)) == 0
