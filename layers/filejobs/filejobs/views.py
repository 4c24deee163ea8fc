"""JSON views of domain objects, as the API returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from filejobs.domain.file import StoredFile
from filejobs.domain.job import ProcessingJob


def job_view(job: ProcessingJob) -> dict[str, Any]:
    duration = job.duration()
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
        "next_retry_at": _iso(job.scheduled_at),
        "started_at": _iso(job.started_at),
        "completed_at": _iso(job.completed_at),
        "duration_seconds": None if duration is None else duration.total_seconds(),
        "error_message": job.error_message,
        "result": job.result_data,
        "cancelled_by": job.cancelled_by,
        "cancel_reason": job.cancel_reason,
        "attempts": [
            {
                "number": a.number,
                "started_at": _iso(a.started_at),
                "ended_at": _iso(a.ended_at),
                "outcome": a.outcome.value,
                "error": a.error,
            }
            for a in sorted(job.attempts.values(), key=lambda a: a.number)
        ],
        "created_at": _iso(job.metadata.created_at),
        "updated_at": _iso(job.metadata.updated_at),
    }


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
        "duplicate_of": stored.duplicate_of,
        "created_at": _iso(stored.metadata.created_at),
        "updated_at": _iso(stored.metadata.updated_at),
    }
