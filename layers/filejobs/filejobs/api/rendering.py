"""The status API's answers: results as JSON views (filejobs/views.py), refusals as HTTP
statuses with one error shape, {"error": {"code", "message"}}."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from enum import StrEnum
from typing import Any

from filejobs.domain.job import TERMINAL_STATUSES, ProcessingJob
from filejobs.domain.operations import Action, Operation
from filejobs.domain.presets import METADATA_KEY as PRESET_METADATA_KEY
from filejobs.domain.presets import Preset, preset_to_dict
from filejobs.domain.quotas import UNLIMITED
from filejobs.domain.schedules import Schedule, time_zone
from filejobs.domain.stats import FailureGroupSummary, Percentiles
from filejobs.services.api import (
    FileListing,
    FileVersions,
    FileWithJobs,
    JobListing,
    JobsOfFile,
    JobWithOutputs,
    RescannedPage,
)
from filejobs.services.console import SCOPE_ALL, ConsoleOverview
from filejobs.services.errors import (
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    MalformedRequestError,
    NotFoundError,
    QuotaExceededError,
    RequestRefusedError,
    UnidentifiedCallerError,
)
from filejobs.services.operations import ErasurePreview, Preview, Started
from filejobs.services.quotas import QuotaReport
from filejobs.services.uploads import MintedUpload
from filejobs.views import file_view, job_view, output_view


class ErrorCode(StrEnum):
    """Every code the API's one error shape can carry: the OpenAPI document's enum of
    `error.code` is this list (tools/openapi.py), so a new refusal is documented by naming it."""

    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    UNPROCESSABLE = "unprocessable"
    TOO_MANY_REQUESTS = "too_many_requests"
    INTERNAL = "internal"


# Each refusal's HTTP status and error code (the nearest class of the refusal's MRO).
_STATUSES: dict[type[RequestRefusedError], tuple[int, ErrorCode]] = {
    MalformedRequestError: (400, ErrorCode.BAD_REQUEST),
    UnidentifiedCallerError: (401, ErrorCode.UNAUTHORIZED),
    ForbiddenError: (403, ErrorCode.FORBIDDEN),
    NotFoundError: (404, ErrorCode.NOT_FOUND),
    ConflictError: (409, ErrorCode.CONFLICT),
    InvalidRequestError: (422, ErrorCode.UNPROCESSABLE),
    QuotaExceededError: (429, ErrorCode.TOO_MANY_REQUESTS),
}


def status_of(refusal: RequestRefusedError) -> tuple[int, ErrorCode]:
    return next(
        (_STATUSES[kind] for kind in type(refusal).__mro__ if kind in _STATUSES),
        (500, ErrorCode.INTERNAL),
    )


def error_body(code: ErrorCode, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}})


def job_with_outputs(found: JobWithOutputs, *, logs: bool = True) -> dict[str, Any]:
    """A single-job answer: the job with download URLs of its outputs and its attempts' logs
    (a file's answer lists its jobs without their logs: `logs=False`)."""
    return job_view(found.job, outputs=found.outputs, logs=logs)


def job(found: ProcessingJob) -> dict[str, Any]:
    return job_view(found)


def file_with_jobs(found: FileWithJobs) -> dict[str, Any]:
    return {
        **file_view(found.file),
        "processing_state": processing_state(found),
        "jobs": [job_with_outputs(j, logs=False) for j in found.jobs],
        "outputs": bundle(found),
        "duplicates": [
            {"id": f.id, "key": f.key, "created_at": _iso(f.metadata.created_at)}
            for f in found.duplicates
        ],
    }


def bundle(found: FileWithJobs) -> list[dict[str, Any]]:
    """The file's bundle in one list, each file with its URL: its jobs' own lists, each key once
    (a second job of a type writes the same keys: the later job's entry is what is there)."""
    files = {
        o.key: {"job_id": j.job.id, "job_type": j.job.job_type.value, **output_view(o)}
        for j in sorted(found.jobs, key=lambda j: (j.job.metadata.created_at, j.job.id))
        for o in j.outputs
    }
    return list(files.values())


def processing_state(found: FileWithJobs) -> str:
    """`processed` once the file's completion is recorded (File Processed was announced) and no
    job has been opened again since; `processing` until then; `stored` for a file given no job
    (a preset that stores only, or an upload rejected over a quota): nothing to wait for."""
    if not found.jobs and not found.file.job_ids:
        return "stored"
    finished = all(j.job.status in TERMINAL_STATUSES for j in found.jobs)
    return "processed" if found.file.processed is not None and finished else "processing"


def file_versions(found: FileVersions) -> dict[str, Any]:
    return {"bucket": found.bucket, "key": found.key, "files": [file_view(f) for f in found.files]}


def jobs_of_file(found: JobsOfFile) -> dict[str, Any]:
    return {"file_id": found.file_id, "jobs": [job_view(j) for j in found.jobs]}


def job_listing(found: JobListing) -> dict[str, Any]:
    return {
        "jobs": [job_view(j) for j in found.jobs],
        "order": found.order,
        "next_token": found.next_token,
    }


def file_listing(found: FileListing) -> dict[str, Any]:
    return {
        "tenant": found.tenant,
        "files": [file_view(f) for f in found.files],
        "next_token": found.next_token,
    }


def preview(found: Preview) -> dict[str, Any]:
    """A dry run: what the action would touch, and changes nothing."""
    return {
        "dry_run": True,
        "action": found.action.value,
        "filter": found.filter.to_dict(),
        "matched": found.matched,
        "exact": found.exact,
        "sample": [job_view(j) for j in found.sample],
    }


def operation(found: Operation) -> dict[str, Any]:
    return {
        "id": found.id,
        "action": found.action.value,
        "filter": found.filter.to_dict(),
        "reason": found.reason,
        "tenant": found.tenant,
        "created_by": found.created_by,
        "created_at": _iso(found.created_at),
        "updated_at": _iso(found.updated_at),
        "status": found.status.value,
        "matched": found.matched,
        "processed": found.progress.processed,
        "changed": found.progress.changed,
        "skipped": found.progress.skipped,
        "errors": found.progress.errors,
        "finished_at": _iso(found.finished_at),
        "error": found.error,
        "files": None if found.files is None else found.files.to_dict(),
        "schedule_id": found.schedule_id,
        # What an erasure removed so far, by kind; None for any other operation.
        "removed": dict(found.removed) if found.action is Action.ERASE else None,
    }


def erasure_preview(found: ErasurePreview) -> dict[str, Any]:
    """A tenant erasure's dry run: the files it would erase; it changes nothing."""
    return {"dry_run": True, "tenant": found.tenant, "files": found.files, "exact": found.exact}


def started(found: Started) -> dict[str, Any]:
    return {**operation(found.operation), "dry_run": False}


def operations(found: list[Operation], next_token: str | None) -> dict[str, Any]:
    return {"operations": [operation(o) for o in found], "next_token": next_token}


def rescanned_page(found: RescannedPage) -> dict[str, Any]:
    return {
        "tenant": found.tenant,
        "prefix": found.prefix,
        "dry_run": found.dry_run,
        "requested": [
            {"file_id": r.job.file_id, "job_id": r.job.id, "created": r.created}
            for r in found.requested
        ],
        "skipped": [{"file_id": s.file_id, "reason": s.reason} for s in found.skipped],
        "next_token": found.next_token,
    }


def quota_report(report: QuotaReport) -> dict[str, Any]:
    """A tenant's quotas: in force, the defaults, its own (set by an operator), today's usage."""
    overrides = report.overrides
    return {
        "tenant": report.tenant,
        "limits": asdict(report.limits),
        "defaults": asdict(report.defaults),
        "overrides": overrides.as_dict(),
        "overrides_updated_at": _iso(overrides.updated_at),
        "overrides_updated_by": overrides.updated_by,
        "usage": {
            "day": report.usage.day.isoformat(),
            "files": report.usage.files,
            "bytes": report.usage.bytes,
            "rescans": report.usage.rescans,
            "operations": report.usage.operations,
        },
        "unlimited": UNLIMITED,
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def console_overview(found: ConsoleOverview) -> dict[str, Any]:
    """The overview (docs/CONSOLE.md): queues, dead letters, the last hour's series, the scan."""
    stats = found.stats
    definitions = found.definitions
    return {
        "scope": "all" if stats.scope == SCOPE_ALL else stats.scope,
        "generated_at": _iso(stats.generated_at),
        "queues": [
            {
                "job_type": row.job_type.value,
                "lane": row.lane.value,
                "pending": row.pending,
                "scheduled": row.scheduled,
                "running": row.running,
                "completed_last_hour": row.completed_last_hour,
                "failed_last_hour": row.failed_last_hour,
                "failed_last_day": row.failed_last_day,
            }
            for row in stats.queues
        ],
        "dead_letters": [
            {"queue": queue, "depth": depth} for queue, depth in sorted(found.dead_letters.items())
        ],
        "series": [
            {
                "minute": _iso(point.minute),
                "completed": point.completed,
                "failed": point.failed,
                "cancelled": point.cancelled,
                "latency_seconds": _percentiles(point.latency),
            }
            for point in stats.series
        ],
        "latency_seconds": _percentiles(stats.latency),
        "latency_by_type": {
            job_type.value: _percentiles(value) for job_type, value in stats.latency_by_type.items()
        },
        "virus_scan": {
            "definitions": None
            if definitions is None
            else {
                "version": definitions.version,
                "published_at": _iso(definitions.published_at),
                "age_seconds": round(definitions.age_seconds),
            },
            "verdicts_last_hour": dict(stats.verdicts_last_hour),
            "verdicts_last_day": dict(stats.verdicts_last_day),
        },
    }


def failure_groups(groups: list[FailureGroupSummary]) -> dict[str, Any]:
    return {
        "groups": [
            {
                "id": group.id,
                "job_type": group.job_type.value,
                "fingerprint": group.fingerprint,
                "count": group.count,
                "total": group.total,
                "first_seen": _iso(group.first_seen),
                "last_seen": _iso(group.last_seen),
                "sample": None
                if group.sample is None
                else {
                    "job_id": group.sample.job_id,
                    "tenant": group.sample.tenant,
                    "error_message": group.sample.error_message,
                },
            }
            for group in groups
        ]
    }


def _percentiles(value: Percentiles | None) -> dict[str, float] | None:
    return None if value is None else value.to_json()


# Upcoming runs a schedule's answer lists.
NEXT_RUNS_SHOWN = 3


def schedule(found: Schedule, now: datetime) -> dict[str, Any]:
    zone = time_zone(found.timezone)
    upcoming = found.cron().runs_after(now, zone, NEXT_RUNS_SHOWN) if found.enabled else []
    return {
        "id": found.id,
        "tenant": found.tenant,
        "name": found.name,
        "expression": found.expression,
        "timezone": found.timezone,
        "action": found.action.value,
        "prefix": found.prefix,
        "job_type": None if found.job_type is None else found.job_type.value,
        "input_data": found.options or None,
        "enabled": found.enabled,
        "next_runs": [_iso(run) for run in upcoming],
        "runs": found.runs,
        "last_run_at": _iso(found.last_run_at),
        "last_operation_id": found.last_operation_id,
        "created_by": found.created_by,
        "created_at": _iso(found.created_at),
        "updated_at": _iso(found.updated_at),
    }


def schedules(found: list[Schedule], now: datetime) -> dict[str, Any]:
    return {"schedules": [schedule(s, now) for s in found]}


def preset(found: Preset) -> dict[str, Any]:
    return preset_to_dict(found)


def presets(found: Sequence[Preset]) -> dict[str, Any]:
    return {"presets": [preset(p) for p in found]}


def signed_upload(minted: MintedUpload) -> dict[str, Any]:
    """POST /uploads: the form a browser posts, with what it allows. The fields go first, in
    this order, then the file as the form's last field `file` (S3 reads no field after it)."""
    made = minted.grant
    return {
        "method": "POST",
        "url": minted.signed.url,
        "fields": minted.signed.fields,
        "key": made.key,
        "tenant": made.tenant,
        "max_bytes": made.max_bytes,
        "expires_at": made.expires_at.isoformat(),
        "content_type": made.content_type,
        "preset": made.preset,
        "metadata": {
            name: value for name, value in made.metadata.items() if name != PRESET_METADATA_KEY
        },
    }
