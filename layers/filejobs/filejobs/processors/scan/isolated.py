"""The YARA engine in the decoder sandbox: archives unpacked and rules matched without the
worker's credentials.

YARA's modules (pe, elf, dotnet, ...) and the archive walker (archives.py) parse the uploaded
bytes: they run in a sandboxed process (processors/sandbox), not in the worker. The worker
compiles the definitions set's rules once (trusted input, from our own bucket) into a sealed
memfd, and each scan's fresh process loads them from it: a scan that took over its process
cannot alter the rules the next scans use (a file in /tmp it could rewrite).

The upload reaches the sandbox the same way: the sealed descriptor the processor made
(sealed.py), passed as the second attachment, the very bytes clamd reads; never a path in the
worker's workspace. (Sandbox.decode opens its `source` by a path, with O_NOFOLLOW, which a
memfd has none of: the task's source slot holds /dev/null.) The walk unpacks members in the
job's own directory, the sandbox's temporary directory.

How it ends maps onto the engine's result, never onto a clean verdict by accident:
- what the engine found, failed at or refused: its ScanResult, as in-process;
- a sandbox limit reached or a crash, on this file: a refusal (no attempt will get further,
  and the scan is ERROR, not CLEAN);
- the sandbox itself unavailable: TransientError, the attempt retried.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO, Final

from filejobs.domain.retry import PermanentError
from filejobs.processors.sandbox.client import Sandbox, shared_sandbox
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Decoded
from filejobs.processors.scan.archives import ArchiveLimits
from filejobs.processors.scan.engines import ScanResult, Upload, YaraScanner, load_rules
from filejobs.processors.scan.sealed import SealedFile, is_sealed, opened_file

# The walk unpacks at most ArchiveLimits.max_total_bytes (512 MiB) and YARA maps each member it
# matches: address space for both, file size for the unpacked members. CPU and wall time stay
# inside the scan function's 300 s timeout, ClamAV's turn included.
LIMITS: Final = DecoderLimits(
    memory_bytes=4096 * MiB,
    cpu_seconds=180,
    file_bytes=640 * MiB,
    reply_bytes=4 * MiB,
    wall_seconds=200,
)


class SandboxedYara:
    """A Scanner (engines.py) that runs a YaraScanner's rules and walk in the sandbox."""

    name = "yara"

    def __init__(
        self,
        scanner: YaraScanner,
        *,
        sandbox: Sandbox | None = None,
        limits: DecoderLimits = LIMITS,
    ) -> None:
        self._scanner = scanner
        self._rules = scanner.sealed_rules()
        self._sandbox = sandbox or shared_sandbox(__name__)
        self._limits = limits

    def __del__(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.close(self._rules)

    def scan(self, upload: Upload) -> ScanResult:
        if isinstance(upload, SealedFile):
            return self._scan_sealed(upload)
        with opened_file(upload) as opened:  # a test's or the bench's own file
            return self._scan_sealed(opened)

    def _scan_sealed(self, upload: SealedFile) -> ScanResult:
        options = {
            "name": upload.name,
            "archive_limits": asdict(self._scanner.limits),
            "timeout_seconds": self._scanner.timeout_seconds,
        }
        try:
            decoded = self._sandbox.decode(
                yara_scan,
                Path(os.devnull),
                options=options,
                limits=self._limits,
                attachments=(self._rules, upload.fd),
            )
        except PermanentError as error:
            return ScanResult(engine=self.name, infected=False, refusals=[str(error)])
        return _result(decoded.result)


def yara_scan(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: the walk and the rules over the sealed upload of its second
    attachment, with the compiled rules of its first; members unpacked in the job's own
    temporary directory."""
    rules, upload = options["attachments"]
    os.lseek(rules, 0, os.SEEK_SET)
    scanner = YaraScanner(
        load_rules(os.fdopen(rules, "rb", closefd=False)),
        ArchiveLimits(**options["archive_limits"]),
        timeout_seconds=int(options["timeout_seconds"]),
    )
    workspace = Path(tempfile.gettempdir())
    return Decoded(asdict(scanner.scan(_readable(upload, str(options["name"]), workspace))))


def _readable(fd: int, name: str, workspace: Path) -> Upload:
    """The upload at descriptor `fd` as the walk reads it: reopened through /proc (a memfd,
    which Landlock lets any process reopen), or, where the sandbox may not reopen it (an
    O_TMPFILE in the worker's workspace, hidden from jobs by Landlock), copied from the
    descriptor itself into the job's own directory, which no other job can reach."""
    reopened = Path(f"/proc/self/fd/{fd}")
    try:
        os.close(os.open(reopened, os.O_RDONLY))
    except PermissionError:
        copy = workspace / "upload"
        with os.fdopen(os.dup(fd), "rb") as source, copy.open("wb") as target:
            source.seek(0)
            shutil.copyfileobj(source, target)
        # Read back by its own descriptor (this process ends with the job, closing it).
        fd = os.open(copy, os.O_RDONLY)
    return SealedFile(fd, os.fstat(fd).st_size, name, workspace, sealed=is_sealed(fd))


def _result(facts: dict[str, Any]) -> ScanResult:
    """The sandboxed engine's answer, checked field by field (it is not trusted)."""
    return ScanResult(
        engine="yara",
        infected=facts.get("infected") is True,
        signatures=_strings(facts.get("signatures")),
        scanned_files=int(facts.get("scanned_files") or 0),
        errors=_strings(facts.get("errors")),
        refusals=_strings(facts.get("refusals")),
    )


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []
