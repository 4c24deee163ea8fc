"""The sandbox's child program: `python -m filejobs.processors.sandbox.zygote FD MODULE...`.

Started by the worker with a scrubbed environment (client.py). It sheds its capabilities,
makes itself non-dumpable, imports the decoders' modules once (so each job starts warm), then
serves one request at a time on the socket FD: it forks a fresh process for the job, which
starts a session of its own, keeps only the file it was given and its reply pipe, takes its
limits, decodes, and writes one JSON reply. The zygote relays the reply and how the process
ended; a decoder never touches the worker's socket.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from filejobs.domain.retry import PermanentError
from filejobs.processors.sandbox import frames, limits, privileges
from filejobs.processors.sandbox.task import resolve

_READ = 1024 * 1024
# A request's descriptors: its file, then what the task may read beside it.
_MAX_FDS = 4
_TICK_SECONDS = 0.05
# How long a reply may still flow after its decoder exited.
_DRAIN_SECONDS = 1.0
_BREACH_ERRNOS = {errno.EMFILE: "open_files", errno.ENFILE: "open_files", errno.EFBIG: "file_bytes"}


def main(argv: list[str]) -> None:
    channel = socket.socket(fileno=int(argv[0]))
    # Not die_with_parent here: it follows the worker's *thread* that started the zygote, and a
    # host may start it from a thread that ends with its invocation. The zygote ends when the
    # worker's end of its socket closes instead.
    privileges.drop_capabilities()
    privileges.forbid_new_privileges()
    privileges.make_non_dumpable()
    for module in argv[1:]:
        warm_up(module)
    frames.send(
        channel,
        {"ready": os.getpid(), "dumpable": privileges.is_dumpable(), "threads": _threads()},
    )
    while True:
        try:
            request, fds = frames.receive(channel, max_fds=_MAX_FDS)
        except frames.ChannelClosedError:
            return  # the worker is gone: so is its sandbox
        serve(channel, request, fds)


def warm_up(module_name: str) -> None:
    """Imports a decoders' module and runs its `warm_up()`, if it has one (loading what its
    library would otherwise load lazily on the first file)."""
    module = importlib.import_module(module_name)
    hook = getattr(module, "warm_up", None)
    if callable(hook):
        hook()


def _threads() -> int:
    """How many threads this process runs: it must be one, or a fork may copy a lock some other
    thread held (a decoder library's warm-up that starts a thread pool breaks this)."""
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def serve(channel: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    if not fds:
        frames.send(channel, {"refused": "a request carries its file"})
        return
    attachments = fds[1:]
    request["options"] = {**(request.get("options") or {}), "attachments": attachments}
    reply_read, reply_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the decoding process: never returns
        os.close(reply_read)
        _decode(request, fds, reply_write, channel.fileno())
    os.close(reply_write)
    for fd in fds:
        os.close(fd)
    frames.send(channel, {"started": pid})
    reply, overflow, status = _collect(reply_read, pid, int(request["reply_bytes"]))
    frames.send(
        channel,
        {
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "reply": None if overflow else reply.decode(errors="replace"),
            "reply_overflow": overflow,
        },
    )


def _collect(fd: int, pid: int, cap: int) -> tuple[bytes, bool, int]:
    """The decoder's reply (at most `cap` bytes), whether it overflowed, its wait status.

    The reply ends at end of file, or once the decoder has exited and what it left behind in its
    session is killed: a process it forked holds the pipe open, and must not hold up the job.
    """
    parts: list[bytes] = []
    size, overflow, status, ended = 0, False, None, 0.0
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            if select.select([pipe], [], [], _TICK_SECONDS)[0]:
                chunk = pipe.read(_READ)
                if not chunk:
                    break
                size += len(chunk)
                if size > cap:
                    overflow = True
                    break
                parts.append(chunk)
            if status is None:
                done, waited = os.waitpid(pid, os.WNOHANG)
                if done:
                    status, ended = waited, time.monotonic()
                    _kill_group(pid)
            elif time.monotonic() - ended > _DRAIN_SECONDS:
                break  # something outside its session holds the pipe: what came is the reply
    _kill_group(pid)
    if status is None:
        _, status = os.waitpid(pid, 0)
    return (b"" if overflow else b"".join(parts)), overflow, status


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _decode(request: dict[str, Any], fds: list[int], reply: int, channel: int) -> None:
    status = 0
    try:
        os.setsid()
        privileges.die_with_parent()
        os.close(channel)
        _keep_only(*fds, reply)
        limits.apply(request["limits"])
        payload = _run(request, fds[0])
        _write_all(reply, payload)
    except BaseException:  # nothing may escape into the zygote's loop
        status = 70
    finally:
        os._exit(status)


def _run(request: dict[str, Any], source: int) -> bytes:
    try:
        task = resolve(str(request["task"]))
        with os.fdopen(source, "rb") as file:
            decoded = task(file, dict(request.get("options") or {}))
        return json.dumps({"decoded": decoded.to_message()}).encode()
    except PermanentError as error:
        return json.dumps({"permanent": str(error)}).encode()
    except BaseException as error:  # every failure is the job's answer
        return json.dumps(_failure(error)).encode()


def _failure(error: BaseException) -> dict[str, Any]:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, MemoryError):
            return {"breach": "memory"}
        if isinstance(seen, OSError) and seen.errno in _BREACH_ERRNOS:
            return {"breach": _BREACH_ERRNOS[seen.errno]}
        seen = seen.__cause__ or seen.__context__
    text = " ".join(str(error).split())[:300]
    return {"failed": f"{type(error).__name__}: {text}" if text else type(error).__name__}


def _keep_only(*keep: int) -> None:
    """Standard streams on /dev/null and every other inherited descriptor closed."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    highest = max(keep)
    for fd in range(3, highest + 1):
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.closerange(highest + 1, _descriptor_ceiling())


def _descriptor_ceiling() -> int:
    return max(os.sysconf("SC_OPEN_MAX"), 1024)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


if __name__ == "__main__":
    main(sys.argv[1:])
