"""JSON views of domain objects, as the API returns them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from filejobs.domain.attempt_notes import AttemptNotes
from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus, StoredFile
from filejobs.domain.file_completion import FileCompletion
from filejobs.domain.job import Attempt, JobStatus, ProcessingJob
from filejobs.domain.job_options import OPTIONS
from filejobs.domain.outputs import DerivedFile


@dataclass(frozen=True)
class Output:
    """A derived file of a completed job, typed, with a short-lived download URL."""

    file: DerivedFile
    url: str
    expires_at: datetime

    @property
    def key(self) -> str:
        return self.file.key

    @property
    def name(self) -> str:
        return self.file.name


def output_view(output: Output) -> dict[str, Any]:
    return {
        "name": output.name,
        "key": output.key,
        "url": output.url,
        "expires_at": _iso(output.expires_at),
        **output.file.facts(),
    }


def job_view(
    job: ProcessingJob, outputs: Sequence[Output] | None = None, *, logs: bool = False
) -> dict[str, Any]:
    """The job as the API shows it; `outputs` (single-job answers only) adds their URLs, and
    `logs` (GET /jobs/{id} only: a listing stays small) each attempt's log lines."""
    view = _job_fields(job, logs=logs)
    if outputs is not None:
        view["outputs"] = [output_view(o) for o in outputs]
    return view


def _job_fields(job: ProcessingJob, *, logs: bool) -> dict[str, Any]:
    duration = job.duration()
    progress = job.current_progress()
    return {
        "id": job.id,
        "file_id": job.file_id,
        "job_type": job.job_type.value,
        "tenant": job.tenant,
        "status": job.status.value,
        "priority": job.priority,
        "attempt": job.attempt,
        "retry_count": job.retry_count,
        "max_retries": job.max_retries,
        # When a scheduled job is due: a delayed job's requested time, or its next retry.
        "scheduled_at": _iso(job.scheduled_at),
        "next_retry_at": _iso(job.scheduled_at),
        "options": job_options(job),
        "started_at": _iso(job.started_at),
        "completed_at": _iso(job.completed_at),
        "duration_seconds": None if duration is None else duration.total_seconds(),
        "error_message": job.error_message,
        "result": job.result_data,
        "cancelled_by": job.cancelled_by,
        "cancel_reason": job.cancel_reason,
        "progress": None
        if progress is None
        else {
            "attempt": progress.attempt,
            "updated_at": _iso(progress.updated_at),
            **_notes_view(progress.notes, logs=logs),
        },
        "attempts": [
            _attempt_view(a, logs=logs)
            for a in sorted(job.attempts.values(), key=lambda a: a.number)
        ],
        "created_at": _iso(job.metadata.created_at),
        "updated_at": _iso(job.metadata.updated_at),
    }


def job_options(job: ProcessingJob) -> dict[str, Any]:
    """The options the job was requested with (its input_data's option names, as given; the
    object's location and what the system adds are not options)."""
    names = OPTIONS[job.job_type].names
    data = job.input_data or {}
    return {name: data[name] for name in names if name in data}


def _attempt_view(attempt: Attempt, *, logs: bool) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "started_at": _iso(attempt.started_at),
        "ended_at": _iso(attempt.ended_at),
        "outcome": attempt.outcome.value,
        "error": attempt.error,
        **_notes_view(attempt.notes, logs=logs),
    }


def _notes_view(notes: AttemptNotes, *, logs: bool) -> dict[str, Any]:
    """An attempt's progress (fraction, percent, message) and, with `logs`, its log lines (the
    line that says how many were left out in place) and how many were left out."""
    view: dict[str, Any] = {
        "fraction": notes.fraction,
        "percent": None if notes.fraction is None else round(notes.fraction * 100),
        "message": notes.message,
    }
    if logs:
        view["log"] = list(notes.lines)
        view["log_lines_dropped"] = notes.dropped
    return view


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def file_view(stored: StoredFile) -> dict[str, Any]:
    return {
        "id": stored.id,
        "tenant": stored.tenant,
        "bucket": stored.bucket,
        "key": stored.key,
        "version_id": stored.version_id,
        "size": stored.size,
        "content_type": stored.content_type,
        "sha256": stored.sha256,
        "status": stored.status.value,
        "status_reason": stored.status_reason,
        "scan_status": None if stored.scan_status is None else stored.scan_status.value,
        "scan": None if stored.scan is None else scan_view(stored.scan),
        "duplicate_of": stored.duplicate_of,
        "processed": None if stored.processed is None else completion_view(stored.processed),
        "outputs": bundle_view(stored),
        # The upload preset that chose its jobs (None: its content type's default jobs).
        "preset": None if stored.preset is None else asdict(stored.preset),
        "preset_note": stored.preset_note,
        "created_at": _iso(stored.metadata.created_at),
        "updated_at": _iso(stored.metadata.updated_at),
    }


def bundle_view(stored: StoredFile) -> list[dict[str, Any]]:
    """Every file the jobs of the file's last completion wrote, typed, in one list (File
    Processed carries it; GET /files/{id} adds each one's URL), each key once: two jobs of one
    type write the same keys, the later one's files are what is there. None of a file whose
    outputs were withdrawn (quarantined, deleted) or are about to be (recorded infected)."""
    if stored.processed is None or not _outputs_served(stored):
        return []
    bundle = {
        file.key: {"job_id": job.id, "job_type": job.job_type, "key": file.key, **file.facts()}
        for job in stored.processed.jobs
        if job.status == JobStatus.COMPLETED.value
        for file in job.outputs
    }
    return list(bundle.values())


def _outputs_served(stored: StoredFile) -> bool:
    return stored.status is FileStatus.ACTIVE and stored.scan_status is not ScanStatus.INFECTED


def completion_view(completion: FileCompletion) -> dict[str, Any]:
    """The file's last completion: when all its jobs were last terminal, and as what."""
    return {
        "completed_at": _iso(completion.completed_at),
        "fingerprint": completion.fingerprint,
        "counts": completion.counts(),
        "jobs": [job.to_dict() for job in completion.jobs],
        "more_jobs": completion.more_jobs,
    }


def scan_view(record: ScanRecord) -> dict[str, Any]:
    """The evidence behind a file's verdict: when, by which engines, with which definitions."""
    return {
        "verdict": record.verdict.value,
        "scanned_at": _iso(record.scanned_at),
        "job_id": record.job_id,
        "engines": dict(record.engines),
        "definitions_version": record.definitions_version,
        "signatures": list(record.signatures),
        "reason": record.reason,
    }
