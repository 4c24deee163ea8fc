# ruff: noqa: PLC0415 (imports per job type, on purpose: see below)
"""Which processor runs each job type, built from the worker's settings.

Each branch imports its processor when asked: a worker has only its own media layer (the
thumbnail worker has Pillow, not PyAV), so importing every processor would fail, not just cost.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filejobs.domain.job import JobType
from filejobs.processors.base import Processor, Work

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# ClamAV reads these; without one, clamscan has nothing to scan with and ClamAV is left out.
CLAMAV_DATABASES = (".cvd", ".cld", ".hdb", ".hsb", ".ndb", ".ldb")
# How often a warm worker looks for new signatures in S3 (one ListObjectsV2 when unchanged).
SIGNATURE_REFRESH_SECONDS = 300.0


@dataclass(frozen=True)
class ScanSettings:
    quarantine_bucket: str
    signatures_bucket: str | None = None
    signatures_prefix: str = "signatures/"
    clamscan: str | None = "clamscan"


def processor_for(job_type: JobType, s3: S3Client, scan: ScanSettings | None) -> Processor:
    if job_type is JobType.THUMBNAIL_GENERATION:
        from filejobs.processors.thumbnail import ThumbnailProcessor

        return ThumbnailProcessor(s3)
    if job_type is JobType.VIDEO_THUMBNAIL:
        from filejobs.processors.video import VideoPosterProcessor

        return VideoPosterProcessor(s3)
    if job_type is JobType.DOCUMENT_PREVIEW:
        from filejobs.processors.document import DocumentPreviewProcessor

        return DocumentPreviewProcessor(s3)
    if job_type is JobType.COMPRESSION:
        from filejobs.processors.compression import CompressionProcessor

        return CompressionProcessor(s3)
    if job_type is JobType.DEDUPLICATION_CHECK:
        from filejobs.processors.dedup import DeduplicationCheck

        return DeduplicationCheck(s3)
    if scan is None:
        raise ValueError("the virus scan needs its settings (a quarantine bucket)")
    return SyncedVirusScan(s3, scan)


class SyncedVirusScan:
    """The virus scan with its engines rebuilt whenever the signatures in S3 change."""

    def __init__(
        self, s3: S3Client, settings: ScanSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._s3, self._settings, self._clock = s3, settings, clock
        self._cache = Path(tempfile.gettempdir()) / "filejobs-signatures"
        self._scan: Processor | None = None
        self._synced_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self, work: Work) -> dict[str, Any]:
        return self._current()(work)

    def _current(self) -> Processor:
        from filejobs.processors.scan.processor import VirusScanProcessor, default_engines
        from filejobs.processors.scan.signatures import SignatureSync

        with self._lock:
            settings, now = self._settings, self._clock()
            changed = False
            due = self._synced_at is None or now - self._synced_at > SIGNATURE_REFRESH_SECONDS
            if settings.signatures_bucket and due:
                sync = SignatureSync(
                    self._s3, settings.signatures_bucket, settings.signatures_prefix, self._cache
                )
                report = sync.sync()
                changed = bool(report.downloaded or report.removed)
                self._synced_at = now
            if self._scan is None or changed:
                self._cache.mkdir(parents=True, exist_ok=True)
                engines = default_engines(self._cache, self._clamscan())
                self._scan = VirusScanProcessor(self._s3, engines, settings.quarantine_bucket)
            return self._scan

    def _clamscan(self) -> str | None:
        """clamscan, when it is installed and there are ClamAV databases to give it."""
        program = self._settings.clamscan and shutil.which(self._settings.clamscan)
        has_databases = any(p.suffix in CLAMAV_DATABASES for p in self._cache.glob("*"))
        return program if program and has_databases else None
