"""Scan before parse: no decoder sees a file the virus scan has not passed.

Thumbnail, video, document and compression jobs parse (or feed a codec with) the file's bytes;
they run only once the file's virus scan came back clean. Until then their messages are
acknowledged without work and the jobs stay pending: the scan's worker sends them again on a
clean verdict (and the sweep re-sends pending jobs as a safety net). On an infected verdict, or
when the scan fails for good (the file is unscannable), they are cancelled, saying why.
"""

from __future__ import annotations

from enum import StrEnum

from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.job import JobType

GATED_JOB_TYPES = frozenset(
    {
        JobType.THUMBNAIL_GENERATION,
        JobType.VIDEO_THUMBNAIL,
        JobType.DOCUMENT_PREVIEW,
        JobType.COMPRESSION,
    }
)
SCANNER = "virus_scan"


class Gate(StrEnum):
    RUN = "run"
    WAIT = "wait"  # the scan has not finished: leave the job pending
    REFUSE = "refuse"  # infected, quarantined or gone: cancel the job


def gate(job_type: JobType, stored: StoredFile | None) -> Gate:
    if job_type not in GATED_JOB_TYPES:
        return Gate.RUN
    if stored is None or stored.status is not FileStatus.ACTIVE:
        return Gate.REFUSE
    if stored.scan_status in (ScanStatus.INFECTED, ScanStatus.UNSCANNABLE):
        return Gate.REFUSE
    if stored.scan_status is ScanStatus.CLEAN:
        return Gate.RUN
    return Gate.WAIT


def refusal_reason(stored: StoredFile | None) -> str:
    if stored is None:
        return "the file is not recorded"
    if stored.scan_status is ScanStatus.INFECTED or stored.status is FileStatus.QUARANTINED:
        detail = f": {stored.status_reason}" if stored.status_reason else ""
        return f"the file was quarantined by the virus scan{detail}"
    if stored.scan_status is ScanStatus.UNSCANNABLE:
        return "the virus scan could not check the file"
    return f"the file is {stored.status.value}"
