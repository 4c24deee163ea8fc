"""ClamAV as a warm engine: one clamd per execution environment, fed each file by descriptor.

`clamscan` (engines.ClamAvScanner) loads the whole database for every file: with the official
database that is tens of seconds and over a GB per job. Here clamd loads it once per process
(per Lambda execution environment) and every scan after that costs only the scan:

- `ClamdDaemon` owns one clamd child, configured from a file it writes in a private run
  directory (the Unix socket, clamd's temporary files): no TCP socket, no logs or pid files in
  system paths, no `User` switch, an environment without the worker's AWS credentials.
- `ClamdScanner` is the `Scanner` of engines.py over that daemon. Each scan passes the open file
  to clamd over the socket (`FILDES`, SCM_RIGHTS): clamd reads our copy of the upload, where
  INSTREAM would have it write a second copy under /tmp (Lambda's ephemeral storage).
- `warm_clamav` is what the worker calls: one daemon per process, reused across invocations,
  restarted when its database directory or the definitions in it change, or when it died.

What clamd may load and how far it is trusted (issue 45):

- Before every start the database directory must hold exactly the files of its set, each with
  its SHA-256 (`ClamdDefinitions`): clamd loads every database-suffixed file there, and an
  `.ign2` or `.fp` dropped beside the set would turn detections off. Anything extra, missing or
  altered refuses the start (`DefinitionsTamperedError`; the engines fetch the set again). The
  directory's listing (names, inodes, sizes, change times) is taken before the check and again
  once clamd has loaded: a change in between refuses the load too.
- clamd runs with a seccomp filter (sandbox/confinement.py: no socket but Unix ones) in a
  session of its own, whose whole process group is killed when it stops.
- A clamd must find the EICAR canary when it starts and after every clean answer before that
  answer is trusted: a clamd that answers OK forever (taken over, or broken) is replaced, and
  the scan it vouched for retried.

clamd runs apart from the worker on purpose: a libclamav crash, hang or out-of-memory on a
hostile file kills clamd (the scan becomes an engine error, retried, and the next scan restarts
it), never the worker and the jobs it holds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from filejobs.domain.definitions import DatabaseFile
from filejobs.processors.scan.engines import (
    MiB,
    ScanResult,
    Upload,
    Verdict,
    clamav_alerts,
    clamav_found,
)
from filejobs.processors.scan.environment import (
    WRAPPER_EXITS,
    confined_command,
    isolated_environment,
)
from filejobs.processors.scan.sealed import SealedFile, sealed_upload

# A sockaddr_un path holds 108 bytes with its NUL terminator: a longer path cannot be bound.
SUN_PATH_MAX = 107
# clamd's size limits are 32-bit on some builds; 0 would disable a limit altogether.
_SIZE_CEILING = 4 * 1024 * MiB
# The canary every clamd must find: EICAR is in every set (the updater's SetVerifier proves it).
CANARY = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
# Scans clamd runs at once: the worker scans a batch's files one or a few at a time.
MAX_THREADS = 4
# What a reply may hold: clamd's answers are one short line (STATS, which we never ask, is more).
_MAX_REPLY = 64 * 1024
_OUTPUT_LINES = 40  # clamd's last lines kept for error messages
_OK = re.compile(r"^fd\[\d+\]: OK$")
# "ClamAV 1.4.6" alone, or with the daily database's version and build date:
# "ClamAV 1.4.6/27452/Mon Dec  9 09:34:27 2024".
_VERSION = re.compile(r"^(?P<engine>[^/]+?)(?:/(?P<db>\d+)(?:/(?P<date>.+))?)?$")


class ClamdError(Exception):
    """clamd could not be started (missing, or definitions it cannot load): its reason inside."""


class DefinitionsTamperedError(ClamdError):
    """The database directory does not hold exactly its set's files: clamd was not started."""


class CanaryMissedError(ClamdError):
    """clamd did not find the EICAR canary: it cannot be trusted, and was stopped."""


@dataclass(frozen=True)
class ClamdDefinitions:
    """A database directory and exactly what clamd may load from it: name -> SHA-256."""

    directory: Path
    files: frozenset[tuple[str, str]]

    @classmethod
    def of_set(cls, directory: Path, files: Iterable[DatabaseFile]) -> ClamdDefinitions:
        """The ClamAV files a manifest names (domain/definitions.py), in their fetched folder."""
        return cls(directory.resolve(), frozenset((f.name, f.sha256) for f in files))

    @classmethod
    def as_found(cls, directory: Path) -> ClamdDefinitions:
        """Every file in `directory` as it is now, trusted: for a directory its caller just
        wrote (a test, the bench). A later change to it is refused like any other."""
        directory = directory.resolve()
        files: set[tuple[str, str]] = set()
        with contextlib.suppress(FileNotFoundError), os.scandir(directory) as listing:
            for entry in listing:
                if entry.is_file(follow_symlinks=False):
                    files.add((entry.name, _sha256(Path(entry.path))))
        return cls(directory, frozenset(files))

    def check(self) -> None:
        """DefinitionsTamperedError unless the directory holds these files and nothing else
        (no file, link or folder clamd might read), each with its SHA-256."""
        expected = dict(self.files)
        found: dict[str, str] = {}
        odd: list[str] = []
        with os.scandir(self.directory) as listing:
            for entry in listing:
                if entry.name in expected and entry.is_file(follow_symlinks=False):
                    found[entry.name] = _sha256(Path(entry.path))
                else:
                    odd.append(entry.name)
        altered = sorted(name for name, digest in found.items() if digest != expected[name])
        missing = sorted(set(expected) - set(found))
        problems = [
            *([f"not in its set: {', '.join(sorted(odd))}"] if odd else []),
            *([f"altered: {', '.join(altered)}"] if altered else []),
            *([f"missing: {', '.join(missing)}"] if missing else []),
        ]
        if problems:
            raise DefinitionsTamperedError(
                f"the definitions in {self.directory} are not their set's, refused before "
                f"clamd loads them ({'; '.join(problems)})"
            )


def _sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


@dataclass(frozen=True)
class ClamLimits:
    """clamd's limits; the defaults are engines.ClamAvScanner's (and scan_timeout_seconds is
    clamscan's default --max-scantime, which ClamAvScanner leaves as it is).

    A file or archive past one is reported as Heuristics.Limits.Exceeded.* (AlertExceedsMax):
    a refusal, never a clean verdict.
    """

    max_filesize: int = 512 * MiB
    max_scansize: int = 512 * MiB
    max_files: int = 10_000
    max_recursion: int = 3
    scan_timeout_seconds: float = 120.0

    def __post_init__(self) -> None:
        if self.max_scansize > self.max_filesize:
            # clamd, as clamscan, skips an archive member over MaxFileSize *silently* (no alert,
            # "OK"). With MaxScanSize <= MaxFileSize such a member trips MaxScanSize first, which
            # AlertExceedsMax reports: nothing is skipped without saying so.
            raise ValueError("max_scansize must not exceed max_filesize")
        sizes = (self.max_filesize, self.max_scansize)
        if not all(0 < size < _SIZE_CEILING for size in sizes):
            raise ValueError("sizes must be above 0 (which clamd reads as no limit) and < 4 GiB")
        if self.max_files < 1 or self.max_recursion < 1 or self.scan_timeout_seconds <= 0:
            raise ValueError("every limit must be positive (clamd reads 0 as no limit)")

    def config_lines(self) -> list[str]:
        return [
            f"MaxFileSize {self.max_filesize}",
            f"MaxScanSize {self.max_scansize}",
            f"MaxFiles {self.max_files}",
            f"MaxRecursion {self.max_recursion}",
            f"MaxScanTime {max(1, round(self.scan_timeout_seconds * 1000))}",
            "AlertExceedsMax yes",
            # What ClamAV cannot open is said, never passed as OK (engines.clamav_alerts).
            "AlertEncrypted yes",
            "AlertEncryptedArchive yes",
            "AlertEncryptedDoc yes",
        ]


@dataclass(frozen=True)
class ClamdVersion:
    """clamd's VERSION answer: the engine, and with the official database its daily version."""

    text: str  # as clamd said it
    engine: str  # "ClamAV 1.4.6"
    database: int | None = None  # the daily database's version: 27452
    database_date: datetime | None = None  # when that database was built (clamd's local time)

    @classmethod
    def parse(cls, reply: str) -> ClamdVersion:
        text = reply.strip()
        match = _VERSION.match(text)
        if not match or not match["engine"].startswith("ClamAV "):
            raise ValueError(f"not a clamd version: {reply!r}")
        database = int(match["db"]) if match["db"] else None
        return cls(text, match["engine"].strip(), database, _database_date(match["date"]))


def _database_date(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None  # a format we do not know: the raw text stays in ClamdVersion.text


@dataclass(frozen=True)
class ClamdStatus:
    """One running clamd: what it loaded, and what loading cost."""

    pid: int
    database_dir: Path
    version: ClamdVersion
    load_seconds: float  # from starting the process to its first PONG


class ClamdDaemon:
    """One clamd process for one set of definitions at a time, thread-safe.

    `ensure(definitions)` returns the running daemon when it runs with those definitions, their
    directory has not changed since it loaded them and it is alive; otherwise it checks the
    directory against the set, (re)starts clamd, waits for it to load and tries the canary on
    it. A daemon stopped or crashed (OOM-killed, say) is so restarted by the next scan. clamd's
    SelfCheck is off: definitions change only when the signature sync fetches a new set (a new
    directory), and `ensure` notices any change to the directory itself.

    The process is stopped by `stop()`, and at interpreter exit (a weakref finalizer, which runs
    through atexit) if nobody called it: no clamd outlives its worker by a normal exit.
    """

    def __init__(
        self,
        program: str,
        limits: ClamLimits | None = None,
        *,
        run_dir: Path | None = None,
        load_timeout_seconds: float = 300.0,
        command_timeout_seconds: float = 10.0,
        stop_grace_seconds: float = 5.0,
    ) -> None:
        self.program = program
        self.limits = limits or ClamLimits()
        # Per process by default: several workers on one machine (the local stack) each get
        # their own clamd and socket.
        self._default_run_dir = run_dir is None
        self.run_dir = run_dir or default_run_dir()
        _check_socket_path(self.socket_path)
        self._load_timeout = load_timeout_seconds
        self._command_timeout = command_timeout_seconds
        self._grace = stop_grace_seconds
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._output: deque[str] = deque(maxlen=_OUTPUT_LINES)
        self._drainer = threading.Thread()
        self._status: ClamdStatus | None = None
        self._definitions: ClamdDefinitions | None = None
        self._fingerprint: frozenset[tuple[str, int, int, int, int]] = frozenset()
        self._suspect = False  # a scan failed while clamd was alive: ping it before trusting it
        self._finalizer: weakref.finalize[..., ClamdDaemon] | None = None
        _LIVE.add(self)

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "clamd.sock"

    @property
    def config_path(self) -> Path:
        return self.run_dir / "clamd.conf"

    @property
    def status(self) -> ClamdStatus | None:
        """The running clamd's figures; None before its first start and after a stop."""
        return self._status

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def alive(self) -> bool:
        return self.pid is not None

    def ensure(self, definitions: ClamdDefinitions | Path) -> ClamdStatus:
        """The running clamd for `definitions`, (re)started when needed; ClamdError if it
        cannot start (its reason, "Malformed database" for instance, in the message),
        DefinitionsTamperedError if the directory is not exactly the set, CanaryMissedError if
        the clamd it started does not find EICAR. A bare directory is trusted as it is now."""
        wanted = _definitions(definitions)
        with self._lock:
            if self._serves(wanted):
                assert self._status is not None
                return self._status
            self._stop_locked()
            return self._start_locked(wanted)

    def start(self, definitions: ClamdDefinitions | Path) -> ClamdStatus:
        """A fresh clamd for `definitions`, whatever ran before."""
        wanted = _definitions(definitions)
        with self._lock:
            self._stop_locked()
            return self._start_locked(wanted)

    def vouch(self) -> None:
        """Whether the running clamd still finds the canary, asked after it answered OK and
        before that answer is trusted: CanaryMissedError (and clamd stopped, to be replaced by
        the next scan) if it does not, OSError if it does not answer."""
        try:
            found = self._canary_found(self._command_timeout)
        except OSError:
            self._suspect = True
            raise
        if not found:
            self.stop()
            raise CanaryMissedError(
                "clamd answered OK, then missed the EICAR canary: its answers cannot be "
                "trusted; it was stopped and will be replaced"
            )

    def stop(self) -> None:
        """Terminates clamd (SIGTERM, then SIGKILL after the grace) and removes its files."""
        with self._lock:
            self._stop_locked()

    def scan_descriptor(self, fd: int, timeout: float) -> str:
        """clamd's answer to FILDES for the open file `fd`: "fd[N]: OK", "... FOUND", "... ERROR".

        Raises OSError (TimeoutError, ConnectionError...) when clamd does not answer; the daemon
        is then checked before its next use.
        """
        try:
            return exchange(self.socket_path, b"FILDES", timeout, fd=fd)
        except OSError:
            self._suspect = True
            raise

    def describe_failure(self, error: OSError) -> str:
        """Words for a scan that got no answer: did clamd die, or just not answer?"""
        process = self._process
        code = process.poll() if process is not None else None
        if code is not None:
            return f"clamd {_exit_reason(code)} during the scan ({error}){self._tail(': ')}"
        return f"clamd did not answer the scan: {error!r}"

    # Under the lock.

    def _serves(self, definitions: ClamdDefinitions) -> bool:
        status, process = self._status, self._process
        if status is None or process is None or process.poll() is not None:
            return False
        if self._definitions != definitions:
            return False
        if _fingerprint(definitions.directory) != self._fingerprint:
            return False  # something changed in the directory: checked again before a load
        if self._suspect:
            try:
                answered = self._command(b"PING") == "PONG"
            except OSError:
                answered = False
            self._suspect = not answered
            return answered
        return True

    def _start_locked(self, definitions: ClamdDefinitions) -> ClamdStatus:
        database_dir = definitions.directory
        if not database_dir.is_dir():
            raise ClamdError(f"no database directory {database_dir}")
        try:
            _private_dir(self.run_dir)
            _private_dir(self.run_dir / "tmp")
            self.socket_path.unlink(missing_ok=True)
            self.config_path.write_text(self._config(database_dir))
        except OSError as error:  # /tmp full, say
            raise ClamdError(f"clamd's run directory could not be prepared: {error}") from error
        # Taken before the check: any change from here until clamd has loaded (a file written,
        # renamed or added: each changes a change time, an inode or the listing) shows below.
        before = _fingerprint(database_dir)
        definitions.check()
        self._fingerprint, self._definitions = before, definitions
        begin = time.perf_counter()
        self._process = self._spawn()
        self._finalizer = weakref.finalize(
            self, _terminate, self._process, self._grace, self.run_dir
        )
        try:
            self._wait_until_ready(begin)
            version = ClamdVersion.parse(self._command(b"VERSION"))
        except ClamdError:
            self._stop_locked()
            raise
        except (OSError, ValueError) as error:  # it answered PING, then not VERSION
            self._stop_locked()
            raise ClamdError(f"clamd answered PING, then not VERSION: {error}") from error
        if _fingerprint(database_dir) != before:
            self._stop_locked()
            raise DefinitionsTamperedError(
                f"the definitions in {database_dir} changed while clamd loaded them: refused"
            )
        self._check_canary_locked()
        self._suspect = False
        self._status = ClamdStatus(
            self._process.pid, database_dir, version, time.perf_counter() - begin
        )
        return self._status

    def _spawn(self) -> subprocess.Popen[bytes]:
        self._output = deque(maxlen=_OUTPUT_LINES)
        command = [self.program, f"--config-file={self.config_path}"]
        try:
            # Forked from the spawner thread, which lives as long as the process: the child's
            # parent-death signal is tied to the forking thread, not to the process.
            process = _Spawner.run(lambda: _popen(command, isolated_environment(self.program)))
        except OSError as error:  # not installed, not executable
            raise ClamdError(f"{self.program} could not run: {error}") from error
        assert process.stdout is not None
        # clamd logs its errors (and each detection) to its output: drained into a short
        # memory, so it never blocks on a full pipe and its last words explain a failure.
        self._drainer = threading.Thread(
            target=_drain, args=(process.stdout, self._output), name="clamd-output", daemon=True
        )
        self._drainer.start()
        return process

    def _wait_until_ready(self, begin: float) -> None:
        """Until clamd answers PING; ClamdError as soon as it exits, or when the load is late."""
        assert self._process is not None
        deadline = begin + self._load_timeout
        while True:
            code = self._process.poll()
            if code is not None:
                self._drainer.join(timeout=2.0)  # its last lines, still in the pipe
                raise ClamdError(f"clamd {_exit_reason(code)} while loading{self._tail(': ')}")
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise ClamdError(
                    f"clamd did not answer within {self._load_timeout:g} s of starting"
                    f"{self._tail(': ')}"
                )
            if self.socket_path.exists():
                with contextlib.suppress(OSError):  # bound, not accepting yet
                    if self._command(b"PING", min(remaining, 1.0)) == "PONG":
                        return
            time.sleep(min(0.02, max(remaining, 0)))

    def _command(self, command: bytes, timeout: float | None = None) -> str:
        return exchange(self.socket_path, command, timeout or self._command_timeout)

    def _check_canary_locked(self) -> None:
        try:
            found = self._canary_found(self._command_timeout)
        except OSError as error:
            self._stop_locked()
            raise ClamdError(f"clamd did not answer the EICAR canary: {error}") from error
        if not found:
            self._stop_locked()
            raise CanaryMissedError(
                "clamd loaded its definitions but did not find the EICAR canary: not trusted, "
                "stopped (a set without EICAR's signature, or a clamd that answers OK to all)"
            )

    def _canary_found(self, timeout: float) -> bool:
        """One FILDES scan of EICAR, sealed in memory like an upload (clamd cannot tell it
        from one by how it arrives)."""
        with sealed_upload([CANARY], "canary", self.run_dir) as canary:
            reply = exchange(self.socket_path, b"FILDES", timeout, fd=canary.fd)
        return parse_reply(reply).infected

    def _stop_locked(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs _terminate once; later calls do nothing
        self._finalizer = None
        self._process = None
        self._status = None
        self._definitions = None

    def _forget_after_fork(self) -> None:
        """In a forked child: the clamd belongs to the parent, neither stopped nor used here."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = None
        self._process = None
        self._status = None
        if self._default_run_dir:
            self.run_dir = default_run_dir()

    def _tail(self, prefix: str) -> str:
        lines = [line for line in list(self._output) if line.strip()]
        return prefix + " | ".join(lines[-4:]) if lines else ""

    def _config(self, database_dir: Path) -> str:
        lines = [
            "# Written by filejobs (processors/scan/clamd.py) for this process alone.",
            "Foreground yes",
            f"LocalSocket {self.socket_path}",
            "LocalSocketMode 600",
            "FixStaleSocket yes",
            f"DatabaseDirectory {database_dir}",
            f"TemporaryDirectory {self.run_dir / 'tmp'}",
            *self.limits.config_lines(),
            # Definitions change only when the sync replaces files; `ensure` then restarts clamd
            # (one engine in memory at a time: a concurrent reload would hold two).
            "SelfCheck 0",
            "ConcurrentDatabaseReload no",
            # Its cache of clean files is keyed by MD5, which can be collided on purpose: a
            # tenant's harmless file would vouch for another tenant's crafted twin. Each upload
            # is scanned once anyway.
            "DisableCache yes",
            "ExitOnOOM yes",
            "ScanArchive yes",
            f"MaxThreads {MAX_THREADS}",
            # Errors and detections to its output (kept in memory by us): no log file, no syslog.
            "LogSyslog no",
            "LogTime no",
            "LogClean no",
            "LogVerbose no",
            "ExtendedDetectionInfo no",
            "FollowFileSymlinks no",
            "FollowDirectorySymlinks no",
            "LeaveTemporaryFiles no",
        ]
        for line in lines:
            if any(ord(char) < 32 for char in line):
                raise ClamdError(f"a control character in clamd's configuration: {line!r}")
        return "\n".join(lines) + "\n"


class ClamdScanner:
    """ClamAV through a warm clamd: the `Scanner` protocol of engines.py.

    Never raises for what it found or could not do: clamd's FOUND is a detection (or a refusal
    for Heuristics.Limits.Exceeded.* and Heuristics.Encrypted.*), its ERROR, no answer, a clamd
    that died or would not start, or one that answered OK and then missed the canary, are
    engine errors (the job is retried; the next scan restarts clamd).
    """

    name = "clamav"

    def __init__(
        self,
        daemon: ClamdDaemon,
        definitions: ClamdDefinitions | Path,
        *,
        timeout_seconds: float | None = None,
    ) -> None:
        self.daemon = daemon
        self.definitions = _definitions(definitions)
        self.database_dir = self.definitions.directory
        # clamd gives up at MaxScanTime and says so: this bounds only a clamd that stopped
        # answering (hung, or stopped), with room for a scan queued behind others.
        self._timeout = timeout_seconds or daemon.limits.scan_timeout_seconds + 30.0

    @property
    def version(self) -> str | None:
        """clamd's version as it states it ("ClamAV 1.4.6", or ".../daily/date"), once started."""
        status = self.daemon.status
        return status.version.text if status else None

    @property
    def load_seconds(self) -> float | None:
        """How long the running clamd took to load its definitions."""
        status = self.daemon.status
        return status.load_seconds if status else None

    def scan(self, upload: Upload) -> ScanResult:
        try:
            self.daemon.ensure(self.definitions)
        except ClamdError as error:
            return self._failed(f"clamd could not start: {error}")
        try:
            reply = self._reply(upload)
        except _UnreadableError as error:
            return self._failed(f"the file could not be opened for clamd: {error.__cause__}")
        except OSError as error:
            return self._failed(self.daemon.describe_failure(error))
        result = parse_reply(reply, self.name)
        if result.verdict is Verdict.CLEAN:
            return self._vouched(result)
        return result

    def _reply(self, upload: Upload) -> str:
        """clamd's answer for the upload: a sealed one by its own descriptor, a path opened."""
        if isinstance(upload, SealedFile):
            upload.rewind()  # clamd reads through our descriptor: its offset is ours
            return self.daemon.scan_descriptor(upload.fd, self._timeout)
        try:
            file = upload.open("rb")
        except OSError as error:
            raise _UnreadableError from error
        with file:
            return self.daemon.scan_descriptor(file.fileno(), self._timeout)

    def _vouched(self, result: ScanResult) -> ScanResult:
        """A clean answer, trusted only if the same clamd finds the canary right after."""
        try:
            self.daemon.vouch()
        except CanaryMissedError as error:
            return self._failed(str(error))
        except OSError as error:
            return self._failed(f"clamd did not answer the canary after a clean answer: {error}")
        return result

    def _failed(self, message: str) -> ScanResult:
        return ScanResult(engine=self.name, infected=False, errors=[message])


class _UnreadableError(Exception):
    """The upload's path could not be opened (its OSError is the cause)."""


def _definitions(definitions: ClamdDefinitions | Path) -> ClamdDefinitions:
    if isinstance(definitions, ClamdDefinitions):
        return definitions
    return ClamdDefinitions.as_found(definitions)


def parse_reply(reply: str, engine: str = "clamav") -> ScanResult:
    """A ScanResult from clamd's answer to FILDES; anything but OK or FOUND is an error."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    found: list[str] = []
    errors: list[str] = []
    for line in lines:
        if (signature := clamav_found(line)) is not None:
            found.append(signature)
        elif not _OK.match(line):
            errors.append(f"clamd: {line}")  # "fd[N]: <reason> ERROR", or an answer we do not know
    if not lines:
        errors.append("clamd gave an empty answer")
    signatures, refusals = clamav_alerts(found)
    return ScanResult(
        engine=engine,
        infected=bool(signatures),
        signatures=signatures,
        scanned_files=1,
        errors=errors,
        refusals=refusals,
    )


def exchange(socket_path: Path, command: bytes, timeout: float, *, fd: int | None = None) -> str:
    """One clamd command on a connection of its own (clamd closes it after answering): the
    answer, without its NUL. `fd` goes with FILDES, in a message after the command, as clamd
    wants it. OSError (TimeoutError, ConnectionError...) when there is no whole answer."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout)
        connection.connect(os.fspath(socket_path))
        connection.sendall(b"z" + command + b"\0")  # z: NUL-terminated command and answer
        if fd is not None:
            socket.send_fds(connection, [b"\0"], [fd])
        return _read_answer(connection, deadline)


def _read_answer(connection: socket.socket, deadline: float) -> str:
    received = bytearray()
    while b"\0" not in received:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("clamd's answer did not arrive in time")
        connection.settimeout(remaining)
        chunk = connection.recv(4096)
        if not chunk:
            raise ConnectionError(f"clamd closed the connection mid-answer: {bytes(received)!r}")
        received += chunk
        if len(received) > _MAX_REPLY:
            raise ConnectionError("clamd's answer is too long")
    return received[: received.index(b"\0")].decode("utf-8", "replace")


class _Spawner:
    """The one thread of this process that starts clamd (made on first use, after a fork too):
    the parent-death signal is tied to the thread that forked, so it must outlive every job."""

    lock = threading.Lock()
    pool: ThreadPoolExecutor | None = None

    @classmethod
    def run[T](cls, call: Callable[[], T]) -> T:
        with cls.lock:
            if cls.pool is None:
                cls.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clamd-spawner")
            pool = cls.pool
        return pool.submit(call).result()


def _popen(command: list[str], environment: dict[str, str]) -> subprocess.Popen[bytes]:
    # Through environment.confined_command: a session of its own, dead with its starter's
    # thread, the socket filter, then clamd with exactly `environment`.
    argv, start_with = confined_command(command, environment)
    return subprocess.Popen(  # noqa: S603 (a fixed argument list, no shell)
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=start_with,
        close_fds=True,
    )


def default_run_dir() -> Path:
    """Where this process's clamd keeps its socket, config and temporary files."""
    return Path(tempfile.gettempdir()) / f"filejobs-clamd-{os.getpid()}"


def _check_socket_path(path: Path) -> None:
    length = len(os.fsencode(path))
    if length > SUN_PATH_MAX:
        raise ValueError(
            f"clamd's socket path is {length} bytes, over the {SUN_PATH_MAX} a Unix socket "
            f"address holds: choose a shorter run directory than {path.parent}"
        )


def _private_dir(path: Path) -> None:
    """`path` as a directory only we can enter: made if missing, refused if a link or not ours
    (a shared /tmp elsewhere than Lambda)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ClamdError(f"{path} is not a directory of ours")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def _fingerprint(database_dir: Path) -> frozenset[tuple[str, int, int, int, int]]:
    """Name, size, mtime, change time and inode of every entry of the directory: a file added,
    renamed over, written or even touched back to its old mtime shows (the change time cannot
    be set back)."""
    entries: set[tuple[str, int, int, int, int]] = set()
    with contextlib.suppress(OSError), os.scandir(database_dir) as listing:
        for entry in listing:
            info = entry.stat(follow_symlinks=False)
            entries.add((entry.name, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino))
    return frozenset(entries)


def _drain(stream: IO[bytes], into: deque[str]) -> None:
    """Keeps clamd's last lines, but not its detections: those name another job's file (each
    answer comes over the socket anyway), and the lines end up in error messages."""
    with contextlib.suppress(OSError, ValueError), stream:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            if not line.endswith(" FOUND"):
                into.append(line)


def _terminate(process: subprocess.Popen[bytes], grace: float, run_dir: Path) -> None:
    """Stops clamd: SIGTERM (it removes its socket), SIGKILL after `grace`; then whatever is
    left of its process group (clamd leads it: anything it forked and left), and its files."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    for name in ("clamd.sock", "clamd.conf"):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "tmp", ignore_errors=True)
    with contextlib.suppress(OSError):
        run_dir.rmdir()  # only when empty: a run directory we were given may hold more


def _exit_reason(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    if code in WRAPPER_EXITS:
        return f"did not start: {WRAPPER_EXITS[code]}"
    return f"exited with status {code}"


# Every daemon of this process, for the fork handler below (weak: a dropped daemon is stopped by
# its finalizer).
_LIVE: weakref.WeakSet[ClamdDaemon] = weakref.WeakSet()


class _Shared:
    """The one daemon of this process that `warm_clamav` hands out."""

    lock = threading.Lock()
    daemon: ClamdDaemon | None = None


def warm_clamav(
    program: str, definitions: ClamdDefinitions | Path, limits: ClamLimits | None = None
) -> ClamdScanner:
    """The worker's ClamAV engine: this process's clamd, started now if it is not running with
    these definitions (ClamdError if it cannot load them), reused by every later call.

    Call it from a job, not from module import: on Lambda, loading the official database takes
    longer than the 10 s the init phase allows.
    """
    limits = limits or ClamLimits()
    with _Shared.lock:
        daemon = _Shared.daemon
        if daemon is None or daemon.program != program or daemon.limits != limits:
            if daemon is not None:
                daemon.stop()
            daemon = _Shared.daemon = ClamdDaemon(program, limits)
    wanted = _definitions(definitions)
    daemon.ensure(wanted)
    return ClamdScanner(daemon, wanted)


def shared_daemon() -> ClamdDaemon | None:
    """The daemon `warm_clamav` keeps, if it made one."""
    return _Shared.daemon


def _after_fork_in_child() -> None:
    _Shared.lock = threading.Lock()
    _Shared.daemon = None
    _Spawner.lock, _Spawner.pool = threading.Lock(), None
    for daemon in list(_LIVE):
        daemon._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
