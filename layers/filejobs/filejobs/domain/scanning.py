"""Scan before parse: no decoder sees a file the virus scan has not passed.

Thumbnail, video, document and compression jobs parse (or feed a codec with) the file's bytes;
they run only once the file's virus scan came back clean. The ingest does not send their
messages (`sent_at_ingest`): they stay pending until the scan's worker sends them on a clean
verdict. The sweep never sends one before the verdict (its worker could only skip it); it looks
at a held job through the gate (`ScanGate.review`), and sends it only when a verdict let it go
and the release was lost. A message that arrives before the verdict all the same (a forged or
duplicated one) is acknowledged without work. On an
infected verdict, or when the scan fails for good (the file is unscannable), they are
cancelled, saying why. So are they when the scan job ends with no verdict at all (it failed, or
someone cancelled it): no verdict will come, and a job must not wait for one.

A file the scan cannot vouch for (UNSCANNABLE: larger than the scan reads, an archive past the
engines' limits or one that cannot be opened, or encrypted content) is held by default, its
parsing jobs cancelled with the reason; a stack may choose to process such files anyway
(`UnscannablePolicy.PROCESS`, the UnscannableFiles parameter).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob

GATED_JOB_TYPES = frozenset(
    {
        JobType.THUMBNAIL_GENERATION,
        JobType.VIDEO_THUMBNAIL,
        JobType.DOCUMENT_PREVIEW,
        JobType.COMPRESSION,
    }
)
SCANNER = "virus_scan"
# A scan job in one of these states gives no verdict unless it is retried.
SCAN_ENDED_WITHOUT_VERDICT = frozenset({JobStatus.FAILED, JobStatus.CANCELLED})


class UnscannablePolicy(StrEnum):
    """What the parsing jobs of an UNSCANNABLE file do."""

    HOLD = "hold"  # cancelled, saying why
    PROCESS = "process"  # run, as for a clean file


class Gate(StrEnum):
    RUN = "run"
    WAIT = "wait"  # the scan has not finished: leave the job pending
    REFUSE = "refuse"  # infected, quarantined or gone: cancel the job


@dataclass(frozen=True)
class GateReview:
    """What the gate says of a job the sweep found waiting: run (since `released_at`, when the
    verdict let it go), wait (until `wait_until`, when the scan is next looked at), or refused
    (cancelled by the review itself)."""

    decision: Gate
    released_at: datetime | None = None
    wait_until: datetime | None = None


def gate(
    job_type: JobType,
    stored: StoredFile | None,
    scan_status: JobStatus | None = None,
    *,
    unscannable: UnscannablePolicy = UnscannablePolicy.HOLD,
) -> Gate:
    """May a job of this type run on the file? `scan_status`, the status of the file's scan
    job, matters only while the file has no verdict."""
    if job_type not in GATED_JOB_TYPES:
        return Gate.RUN
    if stored is None or stored.status is not FileStatus.ACTIVE:
        return Gate.REFUSE
    if stored.scan_status is not None:
        return _verdict_gate(stored.scan_status, unscannable)
    if scan_status in SCAN_ENDED_WITHOUT_VERDICT:
        return Gate.REFUSE
    return Gate.WAIT


def _verdict_gate(verdict: ScanStatus, unscannable: UnscannablePolicy) -> Gate:
    if verdict is ScanStatus.CLEAN:
        return Gate.RUN
    if verdict is ScanStatus.UNSCANNABLE and unscannable is UnscannablePolicy.PROCESS:
        return Gate.RUN
    return Gate.REFUSE


def sent_at_ingest(jobs: Iterable[ProcessingJob]) -> list[ProcessingJob]:
    """The new jobs whose messages the ingest sends. A file's gated jobs are held back while it
    has a scan job: a message sent before the verdict would only be acknowledged unread, an
    invocation and two reads wasted per gated job (bench/request_costs.py measured it), and the
    scan's clean verdict sends them anyway. Should the release be lost, the sweep sends a held
    job once its file has a verdict that lets it run (`ScanGate.review`), never before."""
    jobs = list(jobs)
    if not any(job.job_type is JobType.VIRUS_SCAN for job in jobs):
        return jobs
    return [job for job in jobs if job.job_type not in GATED_JOB_TYPES]


def refusal_reason(stored: StoredFile | None) -> str:
    if stored is None:
        return "the file is not recorded"
    if stored.scan_status is ScanStatus.INFECTED or stored.status is FileStatus.QUARANTINED:
        detail = f": {stored.status_reason}" if stored.status_reason else ""
        return f"the file was quarantined by the virus scan{detail}"
    if stored.scan_status is ScanStatus.UNSCANNABLE:
        detail = f": {stored.scan.reason}" if stored.scan and stored.scan.reason else ""
        return f"the virus scan could not vouch for the file{detail}"
    if stored.status is FileStatus.ACTIVE and stored.scan_status is None:
        # An active file with no verdict is refused only when its scan job ended without one.
        return (
            "the file's virus scan failed or was cancelled before it gave a verdict"
            " (retry the scan, then this job)"
        )
    return f"the file is {stored.status.value}"
