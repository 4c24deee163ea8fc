"""The virus_scan job's processor: every engine over the uploaded version, and a verdict.

Verdicts combine strictly: any engine that found something makes the file INFECTED (a detection
is conclusive even if another engine failed); otherwise an engine that failed (a crash, a
timeout, definitions that would not load) makes the attempt fail as transient, to be retried;
otherwise a limit that stopped an engine short of the whole file (a zip bomb, nesting too deep),
content an engine could not read (encrypted, or an archive that cannot be opened), or a file
larger than the scan reads, makes it UNSCANNABLE; only a file every engine read in full
and found nothing in is CLEAN.

The upload is streamed into a sealed descriptor (sealed.py), never a file in the workspace:
every engine reads the same bytes, which no process can change between or under them.

This module reads bytes and decides; it writes nothing. What a verdict does to the file (the
record, the tag, the quarantine, the file's other jobs) is services/virus_scan.py's part.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from filejobs.domain.retry import TransientError
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.scan.sealed import IN_MEMORY_MAX_BYTES, SealedFile, sealed_upload
from filejobs.processors.source import (
    ObjectSource,
    ObjectTooLargeError,
    ReadLimits,
    human_size,
    reading_progress,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    # Types only: the engines module loads YARA, which a worker that merely reads verdicts
    # (services/virus_scan.py) need not have.
    from filejobs.processors.scan.engines import Scanner, ScanResult

MiB = 1024 * 1024
# The largest file scanned unless told otherwise (the ScanMaxFileSizeMB parameter).
DEFAULT_MAX_BYTES = 512 * MiB


class ScanVerdict(StrEnum):
    """A verdict, as the job's result and the version's `scan-status` tag say it."""

    CLEAN = "CLEAN"
    INFECTED = "INFECTED"
    UNSCANNABLE = "UNSCANNABLE"


@dataclass(frozen=True)
class EngineSet:
    """The engines of one scan and what they scan with, for the verdict's record."""

    engines: Sequence[Scanner]
    # Engine name -> version ("clamav": "ClamAV 1.4.6", "yara": "4.5.2").
    versions: Mapping[str, str] = field(default_factory=dict)
    # The definitions set scanned with (domain.definitions.DefinitionsManifest.summary()), and
    # its id; None when only the rules shipped with the code were used.
    definitions: Mapping[str, Any] | None = None
    definitions_version: str | None = None

    @classmethod
    def of(cls, engines: Sequence[Scanner]) -> EngineSet:
        return cls(engines, {e.name: str(getattr(e, "version", "")) for e in engines})


# The engines for one scan. `newest`: look for newer definitions first, whatever the refresh
# interval (a rescan is asked for because definitions changed: it must scan with the newest).
type EngineSource = Callable[[bool], EngineSet]


@dataclass(frozen=True)
class ScanReport:
    verdict: ScanVerdict
    results: tuple[ScanResult, ...] = ()
    engines: EngineSet | None = None
    # Why an UNSCANNABLE file could not be vouched for.
    reason: str | None = None

    @property
    def signatures(self) -> list[str]:
        return sorted({s for r in self.results for s in r.signatures})

    def result_data(self) -> dict[str, Any]:
        """The scan job's result_data: the verdict and its evidence."""
        engines = self.engines
        return {
            "verdict": self.verdict.value,
            "engines": {
                r.engine: {
                    "version": "" if engines is None else engines.versions.get(r.engine, ""),
                    "verdict": r.verdict.value,
                    "infected": r.infected,
                    "signatures": r.signatures,
                    "scanned_files": r.scanned_files,
                    "errors": r.errors,
                    "refusals": r.refusals,
                }
                for r in self.results
            },
            "definitions": None if engines is None else _plain(engines.definitions),
            "definitions_version": None if engines is None else engines.definitions_version,
            "signatures": self.signatures,
            "scanned_files": max((r.scanned_files for r in self.results), default=0),
            "unscannable_reason": self.reason,
        }


def combine(results: Sequence[ScanResult]) -> ScanVerdict:
    """INFECTED, UNSCANNABLE or CLEAN; raises TransientError when an engine failed and nothing
    was found (another attempt may get through)."""
    if any(r.infected for r in results):
        return ScanVerdict.INFECTED
    errors = [f"{r.engine}: {m}" for r in results for m in r.errors]
    if errors:
        raise TransientError("a scan engine failed: " + "; ".join(errors))
    if any(r.refusals for r in results):
        return ScanVerdict.UNSCANNABLE
    return ScanVerdict.CLEAN


class VirusScanProcessor:
    """Downloads the job's version into its workspace and runs every engine over it."""

    def __init__(
        self,
        s3: S3Client,
        engines: EngineSource | Sequence[Scanner],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        in_memory_max_bytes: int = IN_MEMORY_MAX_BYTES,
    ) -> None:
        self._s3 = s3
        self._engines = engines if callable(engines) else _fixed(EngineSet.of(engines))
        self._max_bytes = max_bytes
        self._in_memory_max_bytes = in_memory_max_bytes

    def __call__(self, work: Work) -> dict[str, Any]:
        """The Processor protocol: the scan's report as the job's result_data."""
        return self.scan(work).result_data()

    def scan(self, work: Work) -> ScanReport:
        job = work.job
        declared = int((job.input_data or {}).get("size") or 0)
        if declared > self._max_bytes:
            # Not even downloaded: it would not fit the limits of the engines (or /tmp).
            return ScanReport(ScanVerdict.UNSCANNABLE, reason=self._too_large(declared))
        # Fails closed (TransientError) without usable definitions.
        engines = self._engines(bool((job.input_data or {}).get("rescan")))
        name = _local_name(str((job.input_data or {}).get("key", "")))
        work.log(
            f"definitions {engines.definitions_version or 'shipped with the code'}; engines "
            + ", ".join(f"{n} {v}".strip() for n, v in engines.versions.items())
        )
        chunks = ObjectSource(self._s3).chunks(
            job,
            work.should_stop,
            limits=ReadLimits(max_bytes=self._max_bytes),
            progress=reading_progress(work, verb="downloaded", end=0.5),
        )
        try:
            with sealed_upload(
                chunks,
                name,
                work.workspace,
                expected_size=declared or None,
                in_memory_max_bytes=self._in_memory_max_bytes,
            ) as upload:
                return self._judged(work, engines, upload)
        except ObjectTooLargeError:  # larger than its record said (S3 sizes do not lie: a bug)
            return ScanReport(ScanVerdict.UNSCANNABLE, reason=self._too_large(None))

    def _judged(self, work: Work, engines: EngineSet, upload: SealedFile) -> ScanReport:
        """Every engine over the sealed upload, and the verdict they make together."""
        work.log(f"read {human_size(upload.size)}")
        results: list[ScanResult] = []
        for done, engine in enumerate(engines.engines):
            if work.should_stop():
                raise StopRequested
            work.report_progress(
                0.5 + 0.5 * done / len(engines.engines), f"scanning: {engine.name}"
            )
            result = engine.scan(upload)
            results.append(result)
            work.log(_engine_line(result))
        verdict = combine(results)
        reason = _refusals(results) if verdict is ScanVerdict.UNSCANNABLE else None
        work.log(f"verdict {verdict.value}" + (f": {reason}" if reason else ""))
        return ScanReport(verdict, tuple(results), engines, reason)

    def _too_large(self, size: int | None) -> str:
        actual = "more" if size is None else f"{size}"
        return f"the file is {actual} bytes; the scan reads at most {self._max_bytes}"


def _fixed(engines: EngineSet) -> EngineSource:
    if not engines.engines:
        raise ValueError("a virus scan needs at least one engine")

    def source(newest: bool) -> EngineSet:
        return engines

    return source


def _engine_line(result: ScanResult) -> str:
    """One engine's finding: 'clamav: INFECTED (Eicar-Signature), 1 file scanned'."""
    line = f"{result.engine}: {result.verdict.value}"
    if result.signatures:
        line += f" ({', '.join(result.signatures)})"
    line += f", {result.scanned_files} file{'' if result.scanned_files == 1 else 's'} scanned"
    problems = [*result.errors, *result.refusals]
    return line + (f"; {'; '.join(problems)}" if problems else "")


def _refusals(results: Sequence[ScanResult]) -> str:
    return "; ".join(f"{r.engine}: {m}" for r in results for m in r.refusals)


def _local_name(key: str) -> str:
    """The upload's name made safe as a file name: engines' messages then name what they saw."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", PurePosixPath(key).name)[-100:].lstrip(".")
    return name or "object"


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)
