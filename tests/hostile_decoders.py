"""Decoders that try to escape the sandbox, as an exploited parser would.

Each returns what it stole as its result if its attempt works: a job that completes with one of
these is a hole. tests/integration/test_decoder_sandbox.py runs them in the real sandbox.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import boto3

from filejobs.domain.retry import PermanentError
from filejobs.processors.sandbox.task import Decoded


def _worker_pid() -> int:
    """The worker's pid: the zygote's parent (the decoder's parent is the zygote)."""
    status = Path(f"/proc/{os.getppid()}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid")))


def read_environment_credentials(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({"stolen": os.environ["AWS_SECRET_ACCESS_KEY"]})


def read_worker_environ(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({"stolen": Path(f"/proc/{_worker_pid()}/environ").read_bytes().hex()})


def read_worker_memory(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    with Path(f"/proc/{_worker_pid()}/mem").open("rb") as memory:
        return Decoded({"stolen": memory.read(16).hex()})


def call_aws(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    identity = boto3.client("sts", region_name="us-east-1").get_caller_identity()
    return Decoded({"stolen": identity["Arn"]})


def exhaust_memory(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    hoard = bytearray(8 * 1024**3)
    return Decoded({"bytes": len(hoard)})


def spin(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    while True:
        pass


def open_many_files(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(100_000)]
    return Decoded({"opened": len(opened)})


def write_big_file(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    with tempfile.TemporaryFile() as spill:
        for _ in range(64):
            spill.write(b"\0" * 1024 * 1024)
        return Decoded({"written": spill.tell()})


def answer_too_much(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({}, {"thumb.webp": b"\0" * (8 * 1024 * 1024)})


def write_another_name(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({}, {"../../uploads/other-tenant/file": b"overwritten"})


def sleep(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    time.sleep(600)
    return Decoded({})


def crash(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    os.kill(os.getpid(), signal.SIGSEGV)
    return Decoded({})


def leave_a_process_behind(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    return Decoded({"left": child})


def echo(source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """A well-behaved decoder: the file's bytes, reversed, and what it could see."""
    status = Path("/proc/self/status").read_text().splitlines()
    capabilities = next(line.split()[1] for line in status if line.startswith("CapEff"))
    return Decoded(
        {"environment": sorted(os.environ), "capabilities": capabilities},
        {"thumb.webp": source.read()[::-1]},
    )


def rewrite_attached_rules(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """Tries to replace the scan's rules, for every later scan, through its descriptor and by
    reopening it writable."""
    (rules,) = options["attachments"]
    failures = []
    for attempt in (
        lambda: os.write(rules, b"rule pass_everything { condition: false }"),
        lambda: Path(f"/proc/self/fd/{rules}").write_bytes(b""),
        lambda: os.ftruncate(rules, 0),
    ):
        try:
            attempt()
        except OSError as error:
            failures.append(type(error).__name__)
    return Decoded({"refused": failures})


# --- escapes from the job itself (issue 45): the network, a daemon, other jobs' files ---------
# Each raises what the kernel said when it is stopped; a decoder whose attempt works returns.


def connect_out(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """Sends what it read to `host`:`port` over TCP (the internet, the Runtime API)."""
    with socket.create_connection((options["host"], options["port"]), timeout=2) as out:
        out.sendall(b"stolen")
    return Decoded({"connected": f"{options['host']}:{options['port']}"})


def send_datagram(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        out.sendto(b"stolen", (options["host"], options["port"]))
    return Decoded({"sent": True})


def listen(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """Opens a port for a later connection to come and take what the next jobs hold."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    return Decoded({"listening": server.getsockname()[1]})


def use_a_unix_socketpair(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """What a decoder's own helper may still do: talk to it over a Unix socketpair."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(b"ping")
        return Decoded({"heard": theirs.recv(4).decode()})


def set_up_io_uring(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """io_uring opens sockets and files with no system call a seccomp filter sees."""
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    fd = libc.syscall(425, 4, params)  # io_uring_setup: the same number on x86_64 and aarch64
    if fd < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return Decoded({"io_uring": fd})


def daemonize(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """A double fork and setsid: a daemon out of the job's session, reparented away from it,
    that would wait for the next tenant's files. Its pid is the result."""
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            _daemon_body(options, write)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        return Decoded({"daemon": int(pipe.readline())})


def _daemon_body(options: dict[str, Any], announce: int) -> None:
    """Sleeps, or (`walk`) keeps forking and exiting so its pid never stays still: a process
    that forks while it is being killed."""
    os.write(announce, f"{os.getpid()}\n".encode())
    os.close(announce)
    _name_process(str(options.get("name", "hostile-daemon")))
    while options.get("walk"):
        time.sleep(0.005)
        if os.fork():
            os._exit(0)
    time.sleep(600)
    os._exit(0)


def _name_process(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME: /proc/<pid>/comm


def write_to(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """Overwrites (or creates) the file at `path`: another job's download, a definitions file
    that allow-lists everything, a library of the LibreOffice tree."""
    Path(options["path"]).write_bytes(b"planted")
    return Decoded({"written": options["path"]})


def read_from(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    return Decoded({"stolen": Path(options["path"]).read_text()})


def send_a_signal(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """Signal 0 to the worker, the zygote, the worker's process group or every process (-1):
    if it goes through, SIGKILL or SIGSTOP would too."""
    targets: dict[str, Callable[[], int]] = {
        "worker": _worker_pid,
        "zygote": os.getppid,
        "worker's group": lambda: -os.getpgid(_worker_pid()),
        "every process": lambda: -1,
    }
    target = targets[options["target"]]()
    os.kill(target, 0)
    return Decoded({"signalled": target})


def describe_its_directory(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """A well-behaved decoder that writes a scratch file where it is meant to."""
    here = Path.cwd()
    with tempfile.NamedTemporaryFile(delete=False) as scratch:
        scratch.write(b"scratch")
    return Decoded(
        {
            "cwd": str(here),
            "tmpdir": os.environ.get("TMPDIR"),
            "home": os.environ.get("HOME"),
            "gettempdir": tempfile.gettempdir(),
            "mode": oct(here.stat().st_mode & 0o777),
            "scratch": scratch.name,
        }
    )


def write_then_crash(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """Leaves a file in its directory, then crashes (what an exploit gone wrong looks like)."""
    Path("implant").write_bytes(b"planted")
    os.kill(os.getpid(), signal.SIGSEGV)
    return Decoded({})


def fail_politely(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    raise PermanentError("not a file this decoder reads")


def leave_a_socket_in_tmp(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """Binds a Unix socket at `path` (in the shared /tmp, as LibreOffice's pipe does)."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(options["path"])
    return Decoded({"bound": options["path"]})
