"""The worker's side of the sandbox: start the zygote, hand it a job, read its answer.

`Sandbox.decode` is the one call a processor makes: the file at `source` (already downloaded by
the worker) is opened read-only here and passed as a descriptor, so the decoder needs no path,
no directory and no credentials. Every way a decoder can end is mapped to the job's outcome:

- a reply: the decoded result and outputs (checked: JSON, only allowed output names);
- a PermanentError it raised, or any other exception: a permanent failure with its reason (the
  decoder does no I/O but reading its file, so nothing in it is worth a retry);
- a limit reached (memory, CPU time, open files, file size, reply size, wall time) or a crash
  (a signal): a permanent failure that says which;
- the job cancelled or taken over while decoding: the process is killed, StopRequested;
- the zygote itself failing to start or dying: TransientError (the next attempt starts a new one).

After a crash, a limit reached, a timeout, or processes the zygote could not end, the sandbox is
recycled before its next job: the zygote replaced, its scratch root (the jobs' directories)
removed, and the worker told (recycling.py), since the process that did it may have been taken
over.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from aws_lambda_powertools import Logger

from filejobs.adapters.workspace import private_root
from filejobs.config import inherited
from filejobs.domain.retry import PermanentError, TransientError
from filejobs.processors.base import StopRequested
from filejobs.processors.sandbox import frames, privileges, recycling
from filejobs.processors.sandbox.confinement import UNCONFINED_EXIT
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Decoded, Task, task_name

logger = Logger(child=True)

# Only these of the worker's variables reach the zygote: none names a credential.
_PASSED_VARIABLES = ("LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ")
# Nothing the AWS SDKs look for: no keys, no profile files, no instance metadata.
_NO_AWS = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
_START_SECONDS = 60.0
_POLL_SECONDS = 0.2
_AFTER_KILL_SECONDS = 5.0
# How long a zygote told to stop (its socket closed) may take to end what its jobs left.
_STOP_SECONDS = 5.0
# A result is stored on the job item (DynamoDB's items stop at 400 KB): facts, not data.
MAX_RESULT_BYTES = 64 * 1024


class SandboxUnavailableError(TransientError):
    """The sandbox could not take the job (its zygote did not start, or died)."""


class Sandbox:
    """One warm zygote per worker process, serving one decoding job at a time."""

    def __init__(self, modules: Sequence[str], *, confined: bool = True) -> None:
        """`confined=False`: jobs without their own directory, Landlock, the socket filter or
        the sweep of what they leave (the sandbox before issue 45), for the benchmark only."""
        self._modules = tuple(modules)
        self._confined = confined
        self._lock = threading.Lock()
        self._zygote: _Zygote | None = None

    def decode(
        self,
        task: Task,
        source: Path,
        *,
        options: dict[str, Any] | None = None,
        limits: DecoderLimits = DecoderLimits(),  # noqa: B008 - frozen, never mutated
        should_stop: Callable[[], bool] = lambda: False,
        output_allowed: Callable[[str], bool] = lambda _name: False,
        attachments: Sequence[int] = (),
    ) -> Decoded:
        """Runs `task` on the file at `source` inside the sandbox and returns what it decoded.

        `attachments`: more open descriptors the task reads (their numbers in its process are
        in `options["attachments"]`), such as sealed memfds it may not alter."""
        request = {
            "task": task_name(task),
            "options": options or {},
            "limits": limits.as_message(),
            "reply_bytes": limits.reply_bytes,
        }
        # Opened here, not by a path in the decoder: a link planted in the workspace is refused,
        # and the worker's own file errors are not taken for the sandbox's.
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            with self._lock:
                ending = self._run(request, (fd, *attachments), limits, should_stop)
        finally:
            os.close(fd)
        return _outcome(ending, limits, output_allowed)

    def _run(
        self,
        request: dict[str, Any],
        fds: tuple[int, ...],
        limits: DecoderLimits,
        should_stop: Callable[[], bool],
    ) -> _Ending:
        zygote = self._running_zygote()
        try:
            ending = zygote.run(request, fds, limits, should_stop)
        except (OSError, ValueError, frames.ChannelClosedError) as error:
            self._recycle("the zygote failed")
            raise SandboxUnavailableError(f"the decoder sandbox failed: {error}") from error
        reason = _recycle_reason(ending)
        if reason is not None:
            self._recycle(reason)
        return ending

    def _recycle(self, reason: str) -> None:
        self._discard()
        recycling.recycled(reason)

    def start(self) -> None:
        """Starts the zygote now, if it is not running, rather than on the first job."""
        with self._lock:
            self._running_zygote()

    @property
    def running(self) -> bool:
        return self._zygote is not None and self._zygote.alive()

    def close(self) -> None:
        with self._lock:
            self._discard()

    def zygote_state(self) -> dict[str, Any]:
        """What the running zygote reported when it was ready (its pid, whether it is dumpable,
        its thread count, whether it is a subreaper, the Landlock ABI) and its jobs' root,
        starting it if need be."""
        with self._lock:
            return dict(self._running_zygote().ready)

    def _running_zygote(self) -> _Zygote:
        if self._zygote is None or not self._zygote.alive():
            self._discard()
            self._zygote = _Zygote.start(self._modules, confined=self._confined)
        return self._zygote

    def _discard(self) -> None:
        """The zygote stopped and its scratch root removed, with whatever its jobs left."""
        if self._zygote is not None:
            self._zygote.stop()
            self._zygote = None


_SHARED: dict[tuple[str, ...], tuple[int, Sandbox]] = {}


def shared_sandbox(*modules: str) -> Sandbox:
    """This process's sandbox for the decoders of `modules` (a forked child gets its own)."""
    key = tuple(sorted(modules))
    owner, sandbox = _SHARED.get(key, (-1, None))
    if sandbox is None or owner != os.getpid():
        sandbox = Sandbox(key)
        _SHARED[key] = (os.getpid(), sandbox)
    return sandbox


def start_shared() -> int:
    """Starts the zygote of every sandbox this process shares that is not running yet; the
    number of sandboxes then running. For a process with time before its first job."""
    mine = [sandbox for owner, sandbox in _SHARED.values() if owner == os.getpid()]
    for sandbox in mine:
        sandbox.start()
    return len(mine)


@atexit.register
def _close_shared() -> None:
    for owner, sandbox in _SHARED.values():
        if owner == os.getpid():
            sandbox.close()


def _recycle_reason(ending: _Ending) -> str | None:
    """Why this ending calls for a fresh zygote, if it does: a decoder that crashed, broke a
    limit or ran out of time may have been taken over (one that failed on a corrupt file and
    said so, or was stopped because its job was, has not shown it)."""
    report = ending.report
    if ending.abandoned or report.get("survivors"):
        return "processes the sandbox could not end"
    if ending.killed_for == "time":
        return "timeout"
    if ending.killed_for == "stop":
        return None
    reply = _parsed_reply(report.get("reply"))
    if report.get("reply_overflow") or (reply is not None and "breach" in reply):
        return "limit breach"
    if report.get("signal") is not None or reply is None:
        return "crash"
    return None


_LANDLOCK_LOGGED: list[bool] = []


def _log_confinement(ready: dict[str, Any]) -> None:
    """Once per process: whether Landlock holds here (Lambda's kernel is not documented)."""
    if _LANDLOCK_LOGGED:
        return
    _LANDLOCK_LOGGED.append(True)
    abi = int(ready.get("landlock") or 0)
    if abi:
        logger.info("decoders write only in their own directory (Landlock)", extra={"abi": abi})
    else:
        logger.warning(
            "no Landlock on this kernel: decoders run in their own directory, with no network, "
            "but could write (and read) elsewhere in /tmp; recycling after a crash still holds"
        )


class _Ending:
    """How one decoding process ended, as the zygote saw it, and what the worker did to it."""

    def __init__(self, report: dict[str, Any], *, killed_for: str | None) -> None:
        self.report = report
        self.killed_for = killed_for  # "stop" or "time", when the worker killed it
        self.abandoned = False  # the zygote did not answer after a kill: it is replaced


class _Zygote:
    def __init__(
        self, process: subprocess.Popen[bytes], channel: socket.socket, root: Path | None
    ) -> None:
        self._process = process
        self._channel = channel
        self._root = root  # where its jobs' directories are: removed with it
        self.ready: dict[str, Any] = {}  # what the zygote said of itself once it was ready

    @classmethod
    def start(cls, modules: Sequence[str], *, confined: bool = True) -> _Zygote:
        if not privileges.make_non_dumpable():
            logger.warning("could not make the worker non-dumpable (not Linux?)")
        root = private_root("sandbox") if confined else None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - read only if the start fails
        command = [sys.executable, "-s", "-B", "-m", "filejobs.processors.sandbox.zygote"]
        try:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [*command, str(theirs.fileno()), str(root or "-"), *modules],
                env=zygote_environment(),
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                cwd="/",
            )
        finally:
            theirs.close()
        zygote = cls(process, ours, root)
        zygote.await_ready(errors)
        zygote.ready["root"] = str(root) if root else None
        if confined:
            _log_confinement(zygote.ready)
        return zygote

    def await_ready(self, errors: IO[bytes]) -> None:
        self._channel.settimeout(_START_SECONDS)
        try:
            ready, _ = frames.receive(self._channel)
        except (OSError, ValueError) as error:
            self.stop()
            errors.seek(0)
            tail = errors.read()[-2000:].decode(errors="replace").strip()
            raise SandboxUnavailableError(
                f"the decoder sandbox did not start ({error}): {tail}"
            ) from error
        finally:
            errors.close()
        self._channel.settimeout(None)
        self.ready = ready
        if ready.get("threads") != 1 or ready.get("dumpable"):
            logger.warning("the decoder sandbox's zygote is not as it must be", extra=ready)

    def alive(self) -> bool:
        return self._process.poll() is None

    def run(
        self,
        request: dict[str, Any],
        fds: tuple[int, ...],
        limits: DecoderLimits,
        should_stop: Callable[[], bool],
    ) -> _Ending:
        """`fds`: the file, then the attachments."""
        frames.send(self._channel, request, fds=fds)
        started, _ = frames.receive(self._channel)
        if "started" not in started:
            raise ValueError(f"the sandbox refused the job: {started.get('refused')}")
        pid = int(started["started"])
        deadline = time.monotonic() + limits.wall_seconds
        killed_for: str | None = None
        while not self._answered(_POLL_SECONDS):
            if killed_for is None and should_stop():
                killed_for = "stop"
            elif killed_for is None and time.monotonic() > deadline:
                killed_for = "time"
            if killed_for is not None:
                return self._after_kill(pid, killed_for)
        return _Ending(frames.receive(self._channel)[0], killed_for=None)

    def _after_kill(self, pid: int, reason: str) -> _Ending:
        _kill_group(pid)
        if self._answered(_AFTER_KILL_SECONDS):
            return _Ending(frames.receive(self._channel)[0], killed_for=reason)
        ending = _Ending({}, killed_for=reason)  # something holds its pipe: start afresh
        ending.abandoned = True
        return ending

    def _answered(self, seconds: float) -> bool:
        readable, _, _ = select.select([self._channel], [], [], seconds)
        return bool(readable)

    def stop(self) -> None:
        """Closing its socket tells the zygote to end what its jobs left and exit; killed if it
        has not within _STOP_SECONDS. Its scratch root goes with it."""
        with contextlib.suppress(OSError):
            self._channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=_STOP_SECONDS)
        if self._process.poll() is None:
            self._process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=5)
        if self._root is not None:
            _remove(self._root)


def _remove(root: Path) -> None:
    """The zygote's scratch root, whatever its jobs left. Twice at most: a zygote killed while
    it removed a job's directory leaves a half-removed tree that one pass may trip on."""
    for _attempt in range(2):
        shutil.rmtree(root, ignore_errors=True)
        if not root.exists():
            return
    logger.warning("could not remove the decoder sandbox's scratch root", extra={"root": root})


def zygote_environment() -> dict[str, str]:
    """The zygote's whole environment: how to find Python and its libraries, nothing more."""
    return {
        **inherited(_PASSED_VARIABLES),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/nonexistent",
        **_NO_AWS,
    }


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
            return


# --- what an ending means for the job ------------------------------------------------------


def _outcome(
    ending: _Ending, limits: DecoderLimits, output_allowed: Callable[[str], bool]
) -> Decoded:
    if ending.killed_for == "stop":
        raise StopRequested
    if ending.killed_for == "time":
        raise PermanentError(
            f"the decoder took longer than its {limits.wall_seconds:g} s time limit on this file"
        )
    report = ending.report
    if report.get("reply_overflow"):
        raise PermanentError(
            f"the decoder's output is over its {limits.reply_bytes // MiB} MiB limit"
        )
    reply = _parsed_reply(report.get("reply"))
    if reply is None:
        raise PermanentError(_abnormal_end(report, limits))
    return _reply_outcome(reply, limits, output_allowed)


def _parsed_reply(text: object) -> dict[str, Any] | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        reply = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return reply if isinstance(reply, dict) else None


def _abnormal_end(report: dict[str, Any], limits: DecoderLimits) -> str:
    number = report.get("signal")
    if isinstance(number, int):
        return _signal_message(number, limits)
    if report.get("exit_code") == UNCONFINED_EXIT:
        return "the decoder sandbox could not confine the decoder (its socket filter): not run"
    return f"the decoder ended without an answer (exit code {report.get('exit_code')})"


def _signal_message(number: int, limits: DecoderLimits) -> str:
    if number in (signal.SIGXCPU, signal.SIGKILL):
        return f"the decoder used up its {limits.cpu_seconds} s CPU time limit on this file"
    if number == signal.SIGXFSZ:
        return _breach_message("file_bytes", limits)
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"the decoder crashed on this file ({name})"


def _breach_message(breach: object, limits: DecoderLimits) -> str:
    if breach == "memory":
        return f"the decoder ran out of its {limits.memory_bytes // MiB} MiB memory limit"
    if breach == "open_files":
        return f"the decoder tried to open more than its {limits.open_files} files"
    if breach == "file_bytes":
        return f"the decoder tried to write more than its {limits.file_bytes // MiB} MiB limit"
    return f"the decoder broke a limit ({breach})"


def _reply_outcome(
    reply: dict[str, Any], limits: DecoderLimits, output_allowed: Callable[[str], bool]
) -> Decoded:
    if "permanent" in reply:
        raise PermanentError(str(reply["permanent"]))
    if "breach" in reply:
        raise PermanentError(_breach_message(reply["breach"], limits))
    if "failed" in reply:
        raise PermanentError(f"the decoder failed on this file: {reply['failed']}")
    decoded = reply.get("decoded")
    if not isinstance(decoded, dict):
        raise PermanentError("the decoder's answer is malformed (no result)")
    return _checked(decoded, output_allowed)


def _checked(decoded: dict[str, Any], output_allowed: Callable[[str], bool]) -> Decoded:
    """The answer as the worker will store it: a result object, outputs only under names the
    job may write, each valid base64."""
    result, outputs = decoded.get("result"), decoded.get("outputs")
    if not isinstance(result, dict) or not isinstance(outputs, dict):
        raise PermanentError("the decoder's answer is malformed (result or outputs)")
    if len(json.dumps(result)) > MAX_RESULT_BYTES:
        raise PermanentError(f"the decoder's result is over {MAX_RESULT_BYTES // 1024} KiB")
    files: dict[str, bytes] = {}
    for name, data in outputs.items():
        if not output_allowed(name) or not isinstance(data, str):
            raise PermanentError(f"the decoder answered with an output it may not write: {name!r}")
        try:
            files[name] = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise PermanentError(f"the decoder's output {name!r} is malformed") from None
    return Decoded(result, files)
