# ruff: noqa: PLC0415 (imports per job type, on purpose: see below)
"""Which processor runs each job type, built from the worker's settings.

Each branch imports its processor when asked: a worker has only its own media layer (the
thumbnail worker has Pillow, not PyAV), so importing every processor would fail, not just cost.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from filejobs.domain.job import JobType
from filejobs.processors.base import Processor

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from filejobs.config import OfficeSettings

MiB = 1024 * 1024
# Where a warm environment keeps the definitions sets it fetched (Lambda's /tmp survives between
# invocations of one environment).
DEFINITIONS_CACHE = "filejobs-definitions"


@dataclass(frozen=True)
class ScanSettings:
    quarantine_bucket: str
    signatures_bucket: str | None = None
    signatures_prefix: str = "signatures/"
    # The clamd to keep warm; None scans with YARA alone (ScanEngines=yara, by choice).
    clamd: str | None = "clamd"
    max_definitions_age: timedelta = timedelta(hours=48)
    max_bytes: int = 512 * MiB


def processor_for(
    job_type: JobType,
    s3: S3Client,
    scan: ScanSettings | None,
    *,
    thumbnail_sizes: str | None = None,
    office: OfficeSettings | None = None,
) -> Processor:
    """`job_type`'s processor; `thumbnail_sizes` is the deployment's THUMBNAIL_SIZES
    (config.Settings), the sizes of a thumbnail job that names none; `office`, where the
    document preview finds LibreOffice (config.OfficeSettings)."""
    if job_type is JobType.THUMBNAIL_GENERATION:
        from filejobs.processors.thumbnail import ThumbnailProcessor, sizes_setting

        sizes = sizes_setting(thumbnail_sizes)
        return ThumbnailProcessor(s3, default_sizes=sizes)
    if job_type is JobType.VIDEO_THUMBNAIL:
        from filejobs.processors.video import VideoPosterProcessor

        return VideoPosterProcessor(s3)
    if job_type is JobType.DOCUMENT_PREVIEW:
        from filejobs.processors.document import DocumentPreviewProcessor

        return DocumentPreviewProcessor(s3, office=office)
    if job_type is JobType.COMPRESSION:
        from filejobs.processors.compression import CompressionProcessor

        return CompressionProcessor(s3)
    if job_type is JobType.DEDUPLICATION_CHECK:
        from filejobs.processors.dedup import ContentDigest

        return ContentDigest(s3)
    if scan is None:
        raise ValueError("the virus scan needs its settings (a quarantine bucket)")
    return virus_scan(s3, scan)


def virus_scan(s3: S3Client, scan: ScanSettings) -> Processor:
    """The scan over the engines of the current definitions set (fail closed: current.py)."""
    from filejobs.adapters.definitions import DefinitionsStore
    from filejobs.processors.scan.clamd import ClamLimits
    from filejobs.processors.scan.current import CurrentEngines, EngineSettings
    from filejobs.processors.scan.processor import VirusScanProcessor

    source = None
    if scan.signatures_bucket:
        source = DefinitionsStore(s3, scan.signatures_bucket, scan.signatures_prefix)
    # ClamAV's limits are the scan's: a file or archive past them is UNSCANNABLE, never clean.
    limits = ClamLimits(max_filesize=scan.max_bytes, max_scansize=scan.max_bytes)
    settings = EngineSettings(
        use_clamav=scan.clamd is not None,
        clamd=scan.clamd or "clamd",
        limits=limits,
        max_age=scan.max_definitions_age,
    )
    # One cache per process: Lambda runs one per execution environment; the local stack runs
    # several on one /tmp, and a set being fetched must not be pruned by a neighbour.
    cache = Path(tempfile.gettempdir()) / f"{DEFINITIONS_CACHE}-{os.getpid()}"
    engines = CurrentEngines(source, cache, settings)
    return VirusScanProcessor(s3, engines, max_bytes=scan.max_bytes)
