"""The socket filter (processors/sandbox/confinement.py), instruction by instruction and live.

The filter is a BPF program the kernel runs on each system call. Here it is also run by a small
interpreter of the five instructions it uses, on the call a process would make, for both
architectures Lambda offers (this machine runs only one of them) and for those it must refuse;
then installed for real in a child process, as clamd's `preexec_fn` does.
"""

from __future__ import annotations

import errno
import socket
import struct
import subprocess
import sys

import pytest

from filejobs.processors.sandbox import confinement

X86_64, AARCH64 = 0xC000003E, 0xC00000B7
I386, ARM = 0x40000003, 0x40000028
KILL, ALLOW = 0x80000000, 0x7FFF0000
SOCKET = {X86_64: 41, AARCH64: 198}
CLONE = {X86_64: 56, AARCH64: 220}
READ = {X86_64: 0, AARCH64: 63}
PTRACE = {X86_64: 101, AARCH64: 117}
UNSHARE = {X86_64: 272, AARCH64: 97}
CLONE_NEWUSER, CLONE_VM, SIGCHLD = 0x10000000, 0x00000100, 17


def refused(number: int) -> int:
    return 0x00050000 | number


def verdict(arch: int, nr: int, arg0: int = 0) -> int:
    """What the filter returns for this call (struct seccomp_data, run as the kernel would)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    program, pc, accumulator = confinement._program(), 0, 0
    while True:
        code, if_true, if_false, k = program[pc]
        if code == 0x06:  # ret k
            return k
        if code == 0x20:  # ld [k]
            accumulator, pc = struct.unpack_from("=I", data, k)[0], pc + 1
            continue
        taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: accumulator & k}[code]
        pc += 1 + (if_true if taken else if_false)


both = pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=["x86_64", "aarch64"])


@both
@pytest.mark.parametrize(
    "family", [socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET]
)
def test_a_socket_of_any_family_but_unix_is_refused_with_eacces(arch: int, family: int) -> None:
    assert verdict(arch, SOCKET[arch], family) == refused(errno.EACCES)


@both
def test_a_unix_socket_and_ordinary_calls_go_through(arch: int) -> None:
    assert verdict(arch, SOCKET[arch], socket.AF_UNIX) == ALLOW
    assert verdict(arch, READ[arch]) == ALLOW
    assert verdict(arch, CLONE[arch], CLONE_VM | SIGCHLD) == ALLOW  # a thread, a fork


@both
@pytest.mark.parametrize("nr", [425, 426, 427], ids=["setup", "enter", "register"])
def test_io_uring_is_refused(arch: int, nr: int) -> None:
    assert verdict(arch, nr) == refused(errno.EPERM)


@both
def test_what_only_an_attacker_wants_is_refused(arch: int) -> None:
    assert verdict(arch, PTRACE[arch]) == refused(errno.EPERM)
    assert verdict(arch, UNSHARE[arch], CLONE_NEWUSER) == refused(errno.EPERM)
    assert verdict(arch, CLONE[arch], CLONE_NEWUSER | SIGCHLD) == refused(errno.EPERM)
    # clone3's flags are in memory the filter cannot read: ENOSYS, and libc falls back to clone
    assert verdict(arch, 435) == refused(errno.ENOSYS)


@pytest.mark.parametrize("arch", [I386, ARM], ids=["i386", "arm"])
def test_a_call_through_any_other_table_kills_the_process(arch: int) -> None:
    # i386's socketcall (102) would open a socket past the number check.
    assert verdict(arch, 102, 1) == KILL


def test_an_x32_call_is_refused() -> None:
    assert verdict(X86_64, 0x40000000 | SOCKET[X86_64], socket.AF_INET) == refused(errno.EPERM)


PROBE = """
import socket
tried = []
for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_STREAM),
                     (socket.AF_INET, socket.SOCK_DGRAM)):
    try:
        socket.socket(family, kind).close()
        tried.append("opened")
    except OSError as error:
        tried.append(error.errno)
ours, theirs = socket.socketpair()
ours.sendall(b"ok")
tried.append(theirs.recv(2).decode())
print(tried)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_a_program_started_with_no_network_opens_no_socket_but_a_unix_one() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", PROBE],
        preexec_fn=confinement.no_network,  # what clamd's start does
        capture_output=True,
        text=True,
        check=True,
    )

    assert ran.stdout.strip() == str([errno.EACCES, errno.EACCES, errno.EACCES, "ok"])


ZYGOTE, WORKER, GROUP = 4242, 4200, 4100
KILL_NR = {X86_64: 62, AARCH64: 129}
TGKILL = {X86_64: 234, AARCH64: 131}


def decoder_verdict(arch: int, nr: int, arg0: int) -> int:
    """As `verdict`, for a decoder's filter (its zygote, the worker and their group protected)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0 & 0xFFFFFFFFFFFFFFFF, 0, 0, 0, 0, 0)
    return _run(confinement._program((ZYGOTE, WORKER, GROUP)), data)


def _run(program: list[tuple[int, int, int, int]], data: bytes) -> int:
    pc, accumulator = 0, 0
    while True:
        code, if_true, if_false, k = program[pc]
        if code == 0x06:
            return k
        if code == 0x20:
            accumulator, pc = struct.unpack_from("=I", data, k)[0], pc + 1
            continue
        taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: accumulator & k}[code]
        pc += 1 + (if_true if taken else if_false)


@both
@pytest.mark.parametrize("target", [ZYGOTE, WORKER, -GROUP, -1], ids=str)
def test_a_decoder_cannot_signal_its_zygote_the_worker_their_group_or_everyone(
    arch: int, target: int
) -> None:
    assert decoder_verdict(arch, KILL_NR[arch], target) == refused(errno.EPERM)
    assert decoder_verdict(arch, TGKILL[arch], target) == refused(errno.EPERM)
    assert decoder_verdict(arch, 434, target) == refused(errno.EPERM)  # pidfd_open


@both
def test_a_decoder_still_signals_its_own_processes(arch: int) -> None:
    assert decoder_verdict(arch, KILL_NR[arch], 5000) == ALLOW  # soffice, which it started
    assert decoder_verdict(arch, KILL_NR[arch], -5000) == ALLOW  # soffice's own session
    assert decoder_verdict(arch, KILL_NR[arch], 0) == ALLOW  # its own group
