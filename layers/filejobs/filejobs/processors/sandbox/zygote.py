"""The sandbox's child program: `python -m filejobs.processors.sandbox.zygote FD ROOT MODULE...`.

Started by the worker with a scrubbed environment (client.py). It sheds its capabilities,
makes itself non-dumpable and a child subreaper, imports the decoders' modules once (so each job
starts warm), then serves one request at a time on the socket FD: it forks a fresh process for
the job, which starts a session of its own, keeps only the file it was given and its reply
pipe, moves into a fresh 0700 directory under ROOT (its cwd, TMPDIR and HOME), confines itself
(landlock.py: it writes only there; confinement.py: no socket but Unix ones), takes its limits,
decodes, and writes one JSON reply. Whatever it starts inherits all of that (soffice, ffmpeg).

When the job ends the zygote kills and reaps every process left beneath it, a daemon that
double-forked and called setsid included (as subreaper, orphans become its children), removes
the job's directory, then relays the reply and how the process ended. A decoder never touches
the worker's socket. ROOT "-" runs jobs as before these defences (the benchmark's baseline).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import select
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from filejobs.adapters.workspace import is_private
from filejobs.domain.retry import PermanentError
from filejobs.processors.sandbox import confinement as seccomp
from filejobs.processors.sandbox import frames, landlock, limits, privileges
from filejobs.processors.sandbox.task import resolve

_READ = 1024 * 1024
# A request's descriptors: its file, then what the task may read beside it.
_MAX_FDS = 4
_TICK_SECONDS = 0.05
# How long a reply may still flow after its decoder exited.
_DRAIN_SECONDS = 1.0
_BREACH_ERRNOS = {errno.EMFILE: "open_files", errno.ENFILE: "open_files", errno.EFBIG: "file_bytes"}
# How long the processes left by a job may take to die once killed (one in uninterruptible
# sleep, on a slow disk): past it the zygote says so and the worker recycles the sandbox.
_SWEEP_SECONDS = 5.0


class _Jobs:
    """Where this zygote's jobs work: a fresh directory each under `root`, or, with no root,
    none and no confinement (the benchmark's baseline: the sandbox as before issue 45). What
    confines them is built here, once, so that each job only installs it."""

    def __init__(self, root: str) -> None:
        self.root = None if root == "-" else Path(root)
        self.rules = landlock.Rules(self.root, is_private) if self.root else None
        # The zygote, the worker, and their process group: no job may signal them.
        self.filter = seccomp.compiled((os.getpid(), os.getppid(), os.getpgid(0)))

    @property
    def confined(self) -> bool:
        return self.root is not None

    def confinement(self) -> _Confinement:
        """For the next job: its fresh directory, the current Landlock rules, the filter."""
        if self.root is None or self.rules is None:
            return _Confinement(None, None, b"")
        directory = Path(tempfile.mkdtemp(prefix="job-", dir=self.root))
        return _Confinement(directory, self.rules.prepared(), self.filter)

    def clear(self) -> None:
        """The root emptied: the job's directory and anything else it made there."""
        if self.root is None:
            return
        for entry in self.root.iterdir():
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


class _Confinement(NamedTuple):
    directory: Path | None  # None: unconfined (the benchmark's baseline)
    rules: int | None  # the Landlock ruleset's descriptor; None without Landlock
    filter: bytes  # the seccomp program


def main(argv: list[str]) -> None:
    channel = socket.socket(fileno=int(argv[0]))
    jobs = _Jobs(argv[1])
    # Not die_with_parent here: it follows the worker's *thread* that started the zygote, and a
    # host may start it from a thread that ends with its invocation. The zygote ends when the
    # worker's end of its socket closes instead.
    privileges.drop_capabilities()
    privileges.forbid_new_privileges()
    privileges.make_non_dumpable()
    subreaper = jobs.confined and privileges.become_subreaper()
    for module in argv[2:]:
        warm_up(module)
    if jobs.rules is not None:
        jobs.rules.prepared()  # built now, not on the first job
    frames.send(
        channel,
        {
            "ready": os.getpid(),
            "dumpable": privileges.is_dumpable(),
            "threads": _threads(),
            "subreaper": subreaper,
            "landlock": landlock.abi() if jobs.confined else 0,
        },
    )
    while True:
        try:
            request, fds = frames.receive(channel, max_fds=_MAX_FDS)
        except frames.ChannelClosedError:
            break  # the worker is gone: so is its sandbox
        serve(channel, request, fds, jobs)
    end_descendants()


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


def serve(channel: socket.socket, request: dict[str, Any], fds: list[int], jobs: _Jobs) -> None:
    if not fds:
        frames.send(channel, {"refused": "a request carries its file"})
        return
    attachments = fds[1:]
    request["options"] = {**(request.get("options") or {}), "attachments": attachments}
    confinement = jobs.confinement()
    started = time.time()
    reply_read, reply_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the decoding process: never returns
        os.close(reply_read)
        _decode(request, fds, reply_write, channel.fileno(), confinement)
    os.close(reply_write)
    for fd in fds:
        os.close(fd)
    frames.send(channel, {"started": pid})
    reply, overflow, status = _collect(reply_read, pid, int(request["reply_bytes"]), jobs)
    left, survivors = end_descendants() if jobs.confined else (0, 0)
    if jobs.confined:
        jobs.clear()
        _remove_sockets_left(since=started)
    frames.send(
        channel,
        {
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "reply": None if overflow else reply.decode(errors="replace"),
            "reply_overflow": overflow,
            "left_behind": left,
            "survivors": survivors,
        },
    )


# File systems stamp times with a clock that may lag time.time() by a tick.
_CLOCK_TICK = 0.05


def _remove_sockets_left(since: float) -> None:
    """The Unix socket nodes a job made in the shared temporary directory (all it may make
    there: landlock.py), such as LibreOffice's pipe, which its process could not remove; made
    since the job started, and dead (another process's live socket is left alone)."""
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            # The listing's own types, no stat: of thousands of entries, sockets are a few.
            if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                facts = entry.stat(follow_symlinks=False)
                if (
                    stat.S_ISSOCK(facts.st_mode)
                    and facts.st_uid == os.getuid()
                    and facts.st_ctime >= since - _CLOCK_TICK
                    and not _listened_on(entry.path)
                ):
                    os.unlink(entry.path)


def _listened_on(path: str) -> bool:
    """Whether a process listens on the socket at `path`: not one of the job's, all ended by
    now, but another's (the local stack's other workers share /tmp)."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
        return True


def end_descendants(seconds: float = _SWEEP_SECONDS) -> tuple[int, int]:
    """Kills and reaps every process beneath this one, until there is none: a process that
    forks while being killed leaves a child the next round finds (reparented to this subreaper).
    How many were killed, and how many still stood after `seconds` (0 unless one is stuck)."""
    killed: set[int] = set()
    give_up = time.monotonic() + seconds
    while True:
        found = _descendants(os.getpid())
        if not found:
            return len(killed), 0
        if time.monotonic() > give_up:
            return len(killed), len(found)
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= found
        if not _reap():
            time.sleep(0.001)  # killed, not yet dead: SIGKILL is delivered asynchronously


def _reap() -> int:
    """Reaps the children that have ended (without blocking); how many."""
    reaped = 0
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            reaped += 1
    return reaped


def _descendants(root: int) -> set[int]:
    found: set[int] = set()
    parents = [root]
    while parents:
        for child in _children(parents.pop()):
            if child not in found:
                found.add(child)
                parents.append(child)
    return found


def _children(pid: int) -> list[int]:
    """A process's children, from /proc (every thread's list: a thread may fork too)."""
    children: list[int] = []
    with contextlib.suppress(OSError):
        for thread in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{thread}/children") as f:
                children += [int(number) for number in f.read().split()]
    return children


def _collect(fd: int, pid: int, cap: int, jobs: _Jobs) -> tuple[bytes, bool, int]:
    """The decoder's reply (at most `cap` bytes), whether it overflowed, its wait status.

    The reply ends at end of file, or once the decoder has exited and what it left behind is
    killed: a process it forked holds the pipe open, and must not hold up the job.
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
                    if jobs.confined:
                        end_descendants()  # a daemon out of its session holds the pipe too
            elif time.monotonic() - ended > _DRAIN_SECONDS:
                break  # something outside its session holds the pipe: what came is the reply
    _kill_group(pid)
    if status is None:
        _, status = os.waitpid(pid, 0)
    return (b"" if overflow else b"".join(parts)), overflow, status


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _decode(
    request: dict[str, Any], fds: list[int], reply: int, channel: int, confinement: _Confinement
) -> None:
    status = 0
    try:
        os.setsid()
        privileges.die_with_parent()
        os.close(channel)
        _keep_only(*fds, reply, *([] if confinement.rules is None else [confinement.rules]))
        if confinement.directory is not None and not _confine(confinement, confinement.directory):
            status = seccomp.UNCONFINED_EXIT  # it decoded nothing
            return
        limits.apply(request["limits"])
        payload = _run(request, fds[0])
        _write_all(reply, payload)
    except BaseException:  # nothing may escape into the zygote's loop
        status = 70
    finally:
        os._exit(status)


def _confine(confinement: _Confinement, directory: Path) -> bool:
    """The job's directory as its cwd, TMPDIR and HOME (and Python's own temporary directory,
    cached by the warm-up), writes only there, no socket but Unix ones, no signal to the zygote
    or the worker. False if the filter could not be installed on Linux: a job runs confined or
    not at all. Without Landlock (an old kernel) the job runs with its directory and the filter
    alone (client.py logs it)."""
    if confinement.rules is not None:
        landlock.enforce(confinement.rules)
        os.close(confinement.rules)
    os.chdir(directory)
    os.environ.update(TMPDIR=str(directory), HOME=str(directory))
    tempfile.tempdir = str(directory)
    return seccomp.install(confinement.filter) or not sys.platform.startswith("linux")


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
