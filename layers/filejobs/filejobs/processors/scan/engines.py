"""Scan engines: one protocol, YARA in-process and ClamAV as a subprocess.

An engine scans one upload and says what it found: the sealed upload the processor hands it
(sealed.py: no path another process could rewrite), or, for a test or the bench, a file by its
path. It never raises for what it found or
could not do: an infection, an engine failure (`errors`: another attempt may succeed) and a limit
that refused part of the file (`refusals`: no attempt will get further) are all in its result.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import yara  # type: ignore[import-not-found]  # a C extension without stubs

from filejobs.domain.definitions import YARA_SUFFIXES
from filejobs.processors.scan.archives import ArchiveLimits, ArchiveWalker
from filejobs.processors.scan.environment import confined_command, isolated_environment
from filejobs.processors.scan.sealed import SealedFile

# The rules shipped with the code; a definitions set adds its own (processors/scan/current.py).
BUILTIN_RULES = Path(__file__).parent / "rules"
MiB = 1024 * 1024


class Verdict(StrEnum):
    CLEAN = "CLEAN"
    INFECTED = "INFECTED"
    # The scan could not vouch for the whole file (an engine failed, or a limit refused part).
    ERROR = "ERROR"


@dataclass(frozen=True)
class ScanResult:
    engine: str
    infected: bool
    signatures: list[str] = field(default_factory=list)
    # The file itself plus every archive member the engine looked at.
    scanned_files: int = 0
    # The engine failed (crash, timeout, broken definitions): another attempt may succeed.
    errors: list[str] = field(default_factory=list)
    # A limit refused part of the file (zip bomb, too deep, too large): no attempt will do better.
    refusals: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        if self.infected:
            return Verdict.INFECTED
        if self.errors or self.refusals:
            return Verdict.ERROR
        return Verdict.CLEAN


# What an engine scans: the processor's sealed upload, or a file on disk.
type Upload = Path | SealedFile


class Scanner(Protocol):
    @property
    def name(self) -> str: ...

    def scan(self, upload: Upload) -> ScanResult: ...


def reading(upload: Upload) -> tuple[Path, str, Path]:
    """How an engine reads `upload`: the path it opens (a sealed upload's own descriptor,
    reopened through /proc), the name it reports, and where it may unpack members."""
    if isinstance(upload, SealedFile):
        return upload.path, upload.name, upload.scratch
    return upload, upload.name, upload.parent


class SignatureError(Exception):
    """Definitions that cannot be loaded (a rule file that does not compile)."""


def rule_files(*directories: Path) -> list[Path]:
    """The YARA rule files (`.yar`, `.yara`) of each directory, in a stable order (missing
    directories skipped)."""
    return [
        path
        for directory in directories
        if directory.is_dir()
        for path in sorted(directory.iterdir())
        if path.suffix.lower() in YARA_SUFFIXES and path.is_file()
    ]


class YaraScanner:
    """YARA rules over the file and every member of the archives in it (archives.py)."""

    name = "yara"

    def __init__(
        self, rules: Any, limits: ArchiveLimits | None = None, timeout_seconds: int = 60
    ) -> None:
        # `rules` is a compiled yara.Rules (the extension ships no types).
        self._rules = rules
        self.limits = limits or ArchiveLimits()
        self.timeout_seconds = timeout_seconds

    def sealed_rules(self) -> int:
        """The compiled rules in a sealed memfd (no write, grow, shrink or unseal: not by this
        process, not by one it is passed to), at offset 0; the caller closes it."""
        fd = os.memfd_create("yara-rules", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            with os.fdopen(os.dup(fd), "wb") as out:
                self._rules.save(file=out)
            seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @classmethod
    def from_files(cls, files: Iterable[Path], **options: Any) -> YaraScanner:
        """Compiles rule files; SignatureError names the file that does not compile."""
        paths = list(files)
        if not paths:
            raise SignatureError("no YARA rule files to compile")
        # One namespace per file: two files may define a rule of the same name.
        namespaces = {f"r{n}_{path.stem}": str(path) for n, path in enumerate(paths)}
        try:
            rules = yara.compile(filepaths=namespaces)
        except yara.Error as error:
            raise SignatureError(f"YARA rules do not compile: {error}") from error
        return cls(rules, **options)

    @classmethod
    def with_rules_in(cls, *extra: Path, **options: Any) -> YaraScanner:
        """The shipped rules plus the `*.yar` files of `extra` directories (synced from S3)."""
        return cls.from_files(rule_files(BUILTIN_RULES, *extra), **options)

    def scan(self, upload: Upload) -> ScanResult:
        path, name, workspace = reading(upload)
        signatures: set[str] = set()
        errors: list[str] = []
        scanned = 0
        # Members are unpacked in the job's workspace, removed after the attempt.
        with tempfile.TemporaryDirectory(dir=workspace, prefix=".yara-") as scratch:
            walker = ArchiveWalker(self.limits, Path(scratch))
            for member in walker.walk(path, name):
                scanned += 1
                try:
                    matches = self._rules.match(
                        filepath=str(member.path), timeout=self.timeout_seconds
                    )
                except yara.Error as error:  # TimeoutError is a yara.Error too
                    errors.append(f"{member.name}: {error}")
                    continue
                signatures.update(str(match.rule) for match in matches)
        return ScanResult(
            engine=self.name,
            infected=bool(signatures),
            signatures=sorted(signatures),
            scanned_files=scanned,
            errors=errors,
            refusals=list(walker.refusals),
        )


def load_rules(file: BinaryIO) -> Any:
    """Rules saved by `YaraScanner.sealed_rules` (a yara.Rules)."""
    return yara.load(file=file)


# "path: Signature.Name FOUND" (the signature may contain spaces in third-party databases).
# clamd answers in the same form, its path being "fd[N]" for a file passed by descriptor.
_FOUND = re.compile(r"^(?P<path>.*): (?P<signature>.+) FOUND$")
# Alerts that say ClamAV could not read the file, not that it found a virus: a refusal each,
# with words a person can act on. Heuristics.Limits.Exceeded.* is raised by --alert-exceeds-max
# (clamd: AlertExceedsMax) when ClamAV stopped at one of our limits; Heuristics.Encrypted.* by
# --alert-encrypted, --alert-encrypted-archive, --alert-encrypted-doc (clamd: AlertEncrypted,
# AlertEncryptedArchive, AlertEncryptedDoc) for a password-protected archive (.Zip, .RAR,
# .7Zip) or document (.PDF, .OLE2...), whose content no engine sees: without those alerts
# ClamAV answers OK, and the file passed as CLEAN.
_UNREADABLE_ALERTS = (
    ("Heuristics.Limits.Exceeded", "clamav stopped at a limit: {}"),
    ("Heuristics.Encrypted", "encrypted, its content cannot be scanned: {}"),
)
# The options that turn those alerts on, for clamscan (ClamAvScanner); clamd.py writes the same
# in clamd.conf.
ALERT_OPTIONS = (
    "--alert-exceeds-max=yes",
    "--alert-encrypted=yes",
    "--alert-encrypted-archive=yes",
    "--alert-encrypted-doc=yes",
)


def clamav_found(line: str) -> str | None:
    """The signature a ClamAV "<path>: <signature> FOUND" line names, else None."""
    match = _FOUND.match(line)
    return match["signature"] if match else None


def clamav_alerts(found: Iterable[str]) -> tuple[list[str], list[str]]:
    """ClamAV's FOUND names split into (detections, refusals), each sorted and unique.

    A Heuristics.Limits.Exceeded.* or Heuristics.Encrypted.* alert says the scan could not read
    the file, not that it found something: it must neither quarantine the file nor pass it as
    clean (the verdict is UNSCANNABLE, with the refusal as its reason).
    """
    signatures: set[str] = set()
    refusals: set[str] = set()
    for name in set(found):
        refusal = _refusal(name)
        if refusal is None:
            signatures.add(name)
        else:
            refusals.add(refusal)
    return sorted(signatures), sorted(refusals)


def _refusal(signature: str) -> str | None:
    for prefix, words in _UNREADABLE_ALERTS:
        if signature == prefix or signature.startswith(f"{prefix}."):
            return words.format(signature)
    return None


class ClamAvScanner:
    """`clamscan` over one file, with the definitions of `database_dir` and hard limits.

    Exit status 0 is clean, 1 found something, 2 (or anything else) an error. With
    --alert-exceeds-max, a file past a limit is reported as Heuristics.Limits.Exceeded.*, which
    this turns into a refusal rather than a detection.

    clamscan loads its whole database on every run: right for a Lambda scanning one object per
    job and for the small databases of tests; a fleet scanning many files would run clamd.

    clamscan parses hostile files, so it runs with an environment of its own: no AWS credentials
    (Lambda passes them in the environment), only PATH, TMPDIR and, for a clamscan shipped with
    its libraries (the ClamAV layer: /opt/clamav/bin and /opt/clamav/lib), LD_LIBRARY_PATH
    pointing at those libraries alone, so they never meet the Python runtime's.
    """

    name = "clamav"

    def __init__(
        self,
        database_dir: Path,
        clamscan: str = "clamscan",
        *,
        timeout_seconds: float = 300,
        max_filesize: int = 512 * MiB,
        max_scansize: int = 512 * MiB,
        max_files: int = 10_000,
        max_recursion: int = 3,
    ) -> None:
        if max_scansize > max_filesize:
            # clamscan skips an archive member over --max-filesize *silently* (no alert, "OK").
            # With max-scansize <= max-filesize such a member trips MaxScanSize first, which
            # --alert-exceeds-max reports: nothing is skipped without saying so.
            raise ValueError("max_scansize must not exceed max_filesize")
        self._database = database_dir
        self._clamscan = clamscan
        self._timeout = timeout_seconds
        self._limits = [
            f"--max-filesize={max_filesize}",
            f"--max-scansize={max_scansize}",
            f"--max-files={max_files}",
            f"--max-recursion={max_recursion}",
        ]

    def environment(self) -> dict[str, str]:
        """What clamscan sees of the environment: nothing secret, its own libraries first."""
        return isolated_environment(self._clamscan)

    def command(self, path: Path) -> list[str]:
        return [
            self._clamscan,
            "--no-summary",
            "--stdout",
            f"--database={self._database}",
            "--scan-archive=yes",
            *ALERT_OPTIONS,
            *self._limits,
            "--",
            str(path),
        ]

    def scan(self, upload: Upload) -> ScanResult:
        path, _name, _workspace = reading(upload)
        # A sealed upload is clamscan's descriptor at the same number: /proc/self/fd/N there too.
        inherited = (upload.fd,) if isinstance(upload, SealedFile) else ()
        try:
            # Confined as clamd is: no socket but Unix ones, a session of its own.
            argv, environment = confined_command(self.command(path), self.environment())
            run = subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                env=environment,
                timeout=self._timeout,
                check=False,
                pass_fds=inherited,
            )
        except subprocess.TimeoutExpired:
            return self._failed(f"clamscan timed out after {self._timeout} seconds")
        except OSError as error:  # not installed, not executable
            return self._failed(f"clamscan could not run: {error}")
        return self.parse(run.returncode, run.stdout, run.stderr)

    def parse(self, returncode: int, stdout: str, stderr: str) -> ScanResult:
        """A ScanResult from clamscan's exit status and output."""
        lines = [line for line in stdout.splitlines() if line.strip()]
        found = [s for line in lines if (s := clamav_found(line)) is not None]
        signatures, refusals = clamav_alerts(found)
        if returncode not in (0, 1):
            detail = _last_lines(stderr) or _last_lines(stdout) or f"exit status {returncode}"
            # What it did find before failing still counts: a detection is conclusive.
            return ScanResult(
                engine=self.name,
                infected=bool(signatures),
                signatures=signatures,
                scanned_files=len(lines),
                errors=[f"clamscan failed ({returncode}): {detail}"],
                refusals=refusals,
            )
        if returncode == 1 and not found:
            return self._failed(f"clamscan reported a detection it did not name: {stdout!r}")
        return ScanResult(
            engine=self.name,
            infected=bool(signatures),
            signatures=signatures,
            scanned_files=max(len(lines), 1),
            refusals=refusals,
        )

    def _failed(self, message: str) -> ScanResult:
        return ScanResult(engine=self.name, infected=False, errors=[message])


def _last_lines(text: str, count: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-count:])
