"""Entity <-> PynamoDB model, and the derived index keys each item carries."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from filejobs.data import index_keys
from filejobs.data.models import FileModel, JobModel
from filejobs.domain import keys
from filejobs.domain.attempt_notes import AttemptNotes, AttemptProgress
from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus, StoredFile
from filejobs.domain.file_completion import FileCompletion, JobSummary
from filejobs.domain.job import (
    Attempt,
    AttemptOutcome,
    AuditMetadata,
    JobStatus,
    JobType,
    ProcessingJob,
)
from filejobs.domain.outputs import DerivedFile, OutputKind, typed_file
from filejobs.domain.presets import AppliedPreset


def job_to_model(job: ProcessingJob) -> JobModel:
    meta = job.metadata
    return JobModel(
        id=job.id,
        file_id=job.file_id,
        job_type=job.job_type.value,
        tenant=job.tenant,
        idempotency_key=job.idempotency_key,
        status=job.status.value,
        priority=job.priority,
        input_data=job.input_data,
        result_data=job.result_data,
        error_message=job.error_message,
        started_at=job.started_at,
        completed_at=job.completed_at,
        retry_count=job.retry_count,
        max_retries=job.max_retries,
        scheduled_at=job.scheduled_at,
        lease_expires_at=job.lease_expires_at,
        attempt=job.attempt,
        attempts={str(n): attempt_to_map(a) for n, a in job.attempts.items()},
        dispatch_count=job.dispatch_count,
        dispatched_at=job.dispatched_at,
        triggered_by=job.triggered_by,
        cancelled_by=job.cancelled_by,
        cancel_reason=job.cancel_reason,
        expires_at=job.expires_at,
        progress=None if job.progress is None else progress_to_map(job.progress),
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        created_by=meta.created_by,
        updated_by=meta.updated_by,
        deleted_at=meta.deleted_at,
        deleted_by=meta.deleted_by,
        status_type_shard=index_keys.status_type_key(job.status, job.job_type, job.id),
        queue_order=index_keys.queue_order(job.priority, meta.created_at),
        tenant_shard=index_keys.tenant_key(job.tenant, job.id),
        sweep_shard=None if job.sweep_at is None else index_keys.sweep_key(job.id),
        sweep_at=job.sweep_at,
    )


def job_from_model(model: JobModel) -> ProcessingJob:
    return ProcessingJob(
        id=model.id,
        file_id=model.file_id,
        job_type=JobType(model.job_type),
        tenant=model.tenant,
        idempotency_key=model.idempotency_key,
        metadata=AuditMetadata(
            created_at=model.created_at,
            updated_at=model.updated_at,
            created_by=model.created_by,
            updated_by=model.updated_by,
            deleted_at=model.deleted_at,
            deleted_by=model.deleted_by,
        ),
        status=JobStatus(model.status),
        priority=int(model.priority),
        input_data=_plain(model.input_data),
        result_data=_plain(model.result_data),
        error_message=model.error_message,
        started_at=model.started_at,
        completed_at=model.completed_at,
        retry_count=int(model.retry_count),
        max_retries=int(model.max_retries),
        scheduled_at=model.scheduled_at,
        lease_expires_at=model.lease_expires_at,
        attempt=int(model.attempt),
        attempts={
            int(n): attempt_from_map(raw) for n, raw in (_plain(model.attempts) or {}).items()
        },
        sweep_at=model.sweep_at,
        dispatch_count=int(model.dispatch_count),
        dispatched_at=model.dispatched_at,
        triggered_by=model.triggered_by,
        cancelled_by=model.cancelled_by,
        cancel_reason=model.cancel_reason,
        expires_at=None if model.expires_at is None else int(model.expires_at),
        progress=None if model.progress is None else progress_from_map(_plain(model.progress)),
    )


def attempt_to_map(attempt: Attempt) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "number": attempt.number,
        "started_at": attempt.started_at.isoformat(),
        "ended_at": attempt.ended_at.isoformat(),
        "outcome": attempt.outcome.value,
    }
    if attempt.error is not None:
        entry["error"] = attempt.error
    entry.update(notes_to_map(attempt.notes))
    return entry


def attempt_from_map(raw: dict[str, Any]) -> Attempt:
    return Attempt(
        number=int(raw["number"]),
        started_at=datetime.fromisoformat(raw["started_at"]),
        ended_at=datetime.fromisoformat(raw["ended_at"]),
        outcome=AttemptOutcome(raw["outcome"]),
        error=raw.get("error"),
        notes=notes_from_map(raw),
    )


def notes_to_map(notes: AttemptNotes) -> dict[str, Any]:
    """Only what the attempt said: an attempt that said nothing adds no attribute."""
    entry: dict[str, Any] = {}
    if notes.fraction is not None:
        # A DynamoDB number: four decimals are more than any progress bar shows.
        entry["fraction"] = round(notes.fraction, 4)
    if notes.message is not None:
        entry["message"] = notes.message
    if notes.lines:
        entry["log"] = list(notes.lines)
    if notes.dropped:
        entry["log_dropped"] = notes.dropped
    return entry


def notes_from_map(raw: dict[str, Any]) -> AttemptNotes:
    fraction = raw.get("fraction")
    return AttemptNotes(
        fraction=None if fraction is None else float(fraction),
        message=raw.get("message"),
        lines=tuple(str(line) for line in raw.get("log") or ()),
        dropped=int(raw.get("log_dropped") or 0),
    )


def progress_to_map(progress: AttemptProgress) -> dict[str, Any]:
    return {
        "attempt": progress.attempt,
        "updated_at": progress.updated_at.isoformat(),
        **notes_to_map(progress.notes),
    }


def progress_from_map(raw: dict[str, Any]) -> AttemptProgress:
    return AttemptProgress(
        attempt=int(raw["attempt"]),
        updated_at=datetime.fromisoformat(raw["updated_at"]),
        notes=notes_from_map(raw),
    )


def file_to_model(stored: StoredFile) -> FileModel:
    meta = stored.metadata
    return FileModel(
        id=stored.id,
        tenant=stored.tenant,
        bucket=stored.bucket,
        key=stored.key,
        object_ref=keys.object_ref(stored.bucket, stored.key),
        version_id=stored.version_id,
        etag=stored.etag,
        sequencer=stored.sequencer,
        size=stored.size,
        content_type=stored.content_type,
        sha256=stored.sha256,
        status=stored.status.value,
        status_reason=stored.status_reason,
        scan_status=None if stored.scan_status is None else stored.scan_status.value,
        scan_record=None if stored.scan is None else scan_to_map(stored.scan),
        scanned_at=None if stored.scan is None else stored.scan.scanned_at,
        definitions_version=None if stored.scan is None else stored.scan.definitions_version,
        duplicate_of=stored.duplicate_of,
        job_ids=set(stored.job_ids) or None,
        processed_fingerprint=None if stored.processed is None else stored.processed.fingerprint,
        processed_version=None if stored.processed is None else stored.processed.version,
        processed=None if stored.processed is None else completion_to_map(stored.processed),
        preset=None if stored.preset is None else asdict(stored.preset),
        preset_note=stored.preset_note,
        tenant_shard=index_keys.file_tenant_key(stored.tenant, stored.id),
        scan_shard=index_keys.scan_age_key(stored.id) if rescannable(stored) else None,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        created_by=meta.created_by,
        updated_by=meta.updated_by,
        deleted_at=meta.deleted_at,
        deleted_by=meta.deleted_by,
    )


def file_from_model(model: FileModel) -> StoredFile:
    return StoredFile(
        id=model.id,
        tenant=model.tenant,
        bucket=model.bucket,
        key=model.key,
        version_id=model.version_id,
        etag=model.etag,
        sequencer=model.sequencer,
        size=int(model.size),
        content_type=model.content_type,
        sha256=model.sha256,
        status=FileStatus(model.status),
        status_reason=model.status_reason,
        scan_status=None if model.scan_status is None else ScanStatus(model.scan_status),
        scan=None if model.scan_record is None else scan_from_map(_plain(model.scan_record)),
        duplicate_of=model.duplicate_of,
        job_ids=frozenset(model.job_ids or ()),
        processed=_completion(model),
        preset=_applied_preset(model),
        preset_note=model.preset_note,
        metadata=AuditMetadata(
            created_at=model.created_at,
            updated_at=model.updated_at,
            created_by=model.created_by,
            updated_by=model.updated_by,
            deleted_at=model.deleted_at,
            deleted_by=model.deleted_by,
        ),
    )


def _applied_preset(model: FileModel) -> AppliedPreset | None:
    if model.preset is None:
        return None
    raw = _plain(model.preset)
    return AppliedPreset(raw["name"], int(raw["version"]), raw.get("by") or "prefix")


def completion_to_map(completion: FileCompletion) -> dict[str, Any]:
    """What the file item keeps of a completion besides its fingerprint and version."""
    return {
        "completed_at": completion.completed_at.isoformat(),
        "more_jobs": completion.more_jobs,
        "jobs": [_summary_to_map(job) for job in completion.jobs],
    }


def _summary_to_map(job: JobSummary) -> dict[str, Any]:
    # A derived file is kept by its name and the facts it has (its folder is the file's and
    # the job type's): about half the bytes of its full key and nulls, on every file item.
    kept: dict[str, Any] = {
        "id": job.id,
        "job_type": job.job_type,
        "status": job.status,
        "attempt": job.attempt,
        "error": job.error,
        "result": job.result,
    }
    if job.outputs:
        kept["outputs"] = [_output_to_map(file) for file in job.outputs]
    if job.more_outputs:
        kept["more_outputs"] = job.more_outputs
    return kept


def _output_to_map(file: DerivedFile) -> dict[str, Any]:
    stated = {name: value for name, value in file.facts().items() if value is not None}
    return {"name": file.name, **stated}


def _completion(model: FileModel) -> FileCompletion | None:
    if model.processed_fingerprint is None or model.processed is None:
        return None
    raw = _plain(model.processed)
    return FileCompletion(
        fingerprint=model.processed_fingerprint,
        version=model.processed_version or "",
        completed_at=datetime.fromisoformat(raw["completed_at"]),
        more_jobs=int(raw.get("more_jobs") or 0),
        jobs=tuple(
            JobSummary(
                id=job["id"],
                job_type=job["job_type"],
                status=job["status"],
                attempt=int(job["attempt"]),
                error=job.get("error"),
                result=job.get("result"),
                outputs=_outputs_from_map(model, job),
                more_outputs=int(job.get("more_outputs") or 0),
            )
            for job in raw.get("jobs") or ()
        ),
    )


def _outputs_from_map(model: FileModel, job: dict[str, Any]) -> tuple[DerivedFile, ...]:
    folder = f"{keys.derived_prefix(model.tenant, model.id)}{job['job_type']}/"
    return tuple(
        typed_file(folder + kept["name"], kept, OutputKind(kept["kind"]))
        for kept in job.get("outputs") or ()
    )


def rescannable(stored: StoredFile) -> bool:
    """In the rescan policy's index: active, clean, with a recorded verdict."""
    return (
        stored.status is FileStatus.ACTIVE
        and stored.scan_status is ScanStatus.CLEAN
        and stored.scan is not None
    )


def scan_to_map(record: ScanRecord) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "verdict": record.verdict.value,
        "scanned_at": record.scanned_at.isoformat(),
        "job_id": record.job_id,
        "engines": dict(record.engines),
        "signatures": list(record.signatures),
    }
    if record.definitions_version is not None:
        raw["definitions_version"] = record.definitions_version
    if record.reason is not None:
        raw["reason"] = record.reason
    return raw


def scan_from_map(raw: dict[str, Any]) -> ScanRecord:
    return ScanRecord(
        verdict=ScanStatus(raw["verdict"]),
        scanned_at=datetime.fromisoformat(raw["scanned_at"]),
        job_id=str(raw["job_id"]),
        engines={str(k): str(v) for k, v in (raw.get("engines") or {}).items()},
        definitions_version=raw.get("definitions_version"),
        signatures=tuple(str(s) for s in raw.get("signatures") or ()),
        reason=raw.get("reason"),
    )


def _plain(value: Any) -> Any:
    """A raw MapAttribute as plain dicts and lists (PynamoDB hands back MapAttribute objects)."""
    if value is None:
        return None
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
