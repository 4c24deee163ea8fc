"""Idempotent ingest, the pure part: from an S3 object-created record to a file and its jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from filejobs.domain import keys
from filejobs.domain.delays import first_sweep_at
from filejobs.domain.file import StoredFile
from filejobs.domain.job import (
    DEFAULT_MAX_RETRIES,
    AuditMetadata,
    JobStatus,
    JobType,
    ProcessingJob,
)
from filejobs.domain.presets import UploadPlan, default_plan
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.tenant_prefixes import UPLOAD_PREFIX

DEFAULT_DISPATCH = DispatchPolicy()
# A backfill's jobs (objects there before the stack, or whose notifications never came:
# `filejobs backfill`) run at most at this priority, in their types' low lanes as rescans do
# (domain/messages.py lane_of): a backfill of a whole bucket never delays a new upload's jobs.
BACKFILL_PRIORITY = -10
# How an upload says it is a backfill's: the notification `filejobs backfill` announces an
# object in place with, or the metadata of the copy it makes from another bucket. An uploader who
# sets either only lowers its own upload's priority.
BACKFILL_EVENT_SOURCE = "filejobs:backfill"
BACKFILL_METADATA_KEY = "backfill-source"


class InvalidUploadError(ValueError):
    """An object-created record we must not ingest (wrong prefix, no tenant, no name)."""


@dataclass(frozen=True)
class ObjectCreated:
    """What an S3 ObjectCreated record says about the new object version (key URL-decoded)."""

    bucket: str
    key: str
    size: int
    etag: str
    version_id: str | None = None
    sequencer: str | None = None
    # Announced by `filejobs backfill`, or a copy it made: its jobs take the low lane.
    backfill: bool = False

    @property
    def version_marker(self) -> str:
        """What tells this version apart from other writes of the same key.

        A versioned bucket gives a version id. Without versioning, the event's sequencer differs
        for every write of the key and is identical in duplicate deliveries of one write.
        """
        marker = self.version_id or self.sequencer or self.etag
        if not marker:
            raise InvalidUploadError(
                f"record for {self.key!r} has no version id, sequencer or etag"
            )
        return marker


@dataclass(frozen=True)
class IngestPlan:
    file: StoredFile
    jobs: tuple[ProcessingJob, ...]


def tenant_of(key: str) -> str:
    """`uploads/{tenant}/{name...}` -> tenant. Anything else is not an upload we process."""
    if not key.startswith(UPLOAD_PREFIX):
        raise InvalidUploadError(f"key {key!r} is not under {UPLOAD_PREFIX}{{tenant}}/")
    tenant, _, name = key[len(UPLOAD_PREFIX) :].partition("/")
    if not keys.is_tenant(tenant):
        raise InvalidUploadError(
            f"key {key!r}: tenant must be 1-63 letters, digits, '-' or '_', got {tenant!r}"
        )
    if not name or name.endswith("/"):
        raise InvalidUploadError(f"key {key!r} names a folder, not a file")
    return tenant


def tenant_of_notification(records: Sequence[ObjectCreated]) -> str | None:
    """The one tenant whose uploads a notification announces (S3 sends one record per message);
    None when it names none, several, or a key that is not an upload."""
    tenants = set()
    for record in records:
        try:
            tenants.add(tenant_of(record.key))
        except InvalidUploadError:
            return None
    return tenants.pop() if len(tenants) == 1 else None


def plan_ingest(
    record: ObjectCreated,
    content_type: str,
    *,
    now: datetime,
    created_by: str = "ingest",
    dispatch: DispatchPolicy = DEFAULT_DISPATCH,
    upload_plan: UploadPlan | None = None,
) -> IngestPlan:
    """The StoredFile and one pending job per planned job type (the tenant's preset's, else the
    default table's: domain/presets.py), with deterministic ids."""
    tenant = tenant_of(record.key)
    file_id = keys.file_id_for(record.bucket, record.key, record.version_marker)
    stored = StoredFile(
        id=file_id,
        tenant=tenant,
        bucket=record.bucket,
        key=record.key,
        version_id=record.version_id,
        etag=record.etag,
        sequencer=record.sequencer,
        size=record.size,
        content_type=content_type,
        metadata=_audit(now, created_by),
    )
    planned = upload_plan or default_plan(content_type)
    stored.preset = planned.preset
    stored.preset_note = planned.note
    jobs = tuple(
        new_job(
            stored,
            job.job_type,
            now=now,
            created_by=created_by,
            dispatch=dispatch,
            priority=min(job.priority, BACKFILL_PRIORITY) if record.backfill else job.priority,
            input_data=dict(job.options) or None,
        )
        for job in planned.jobs
    )
    stored.job_ids = frozenset(job.id for job in jobs)
    return IngestPlan(stored, jobs)


def new_job(
    stored: StoredFile,
    job_type: JobType,
    *,
    now: datetime,
    created_by: str,
    dispatch: DispatchPolicy,
    idempotency_key: str | None = None,
    priority: int = 0,
    max_retries: int | None = None,
    input_data: dict[str, object] | None = None,
    run_at: datetime | None = None,
) -> ProcessingJob:
    """A pending job on `stored`, or a scheduled one when `run_at` is later than `now` (a
    delayed job, domain/delays.py). Its id derives from the idempotency key (tenant-scoped)."""
    key = idempotency_key or keys.ingest_idempotency_key(stored.id, job_type)
    job = ProcessingJob(
        id=keys.job_id_for(stored.tenant, key),
        file_id=stored.id,
        job_type=job_type,
        tenant=stored.tenant,
        idempotency_key=key,
        metadata=_audit(now, created_by),
        priority=priority,
        # The object's location travels with the job, so a worker's claim returns all it needs.
        input_data={**_object_location(stored), **(input_data or {})},
        triggered_by=created_by,
        sweep_at=now + dispatch.grace,
        # Given to the constructor, not set after it: its check refuses a budget out of range.
        max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
    )
    if run_at is not None and run_at > now:
        job.status = JobStatus.SCHEDULED
        job.scheduled_at = run_at
        job.sweep_at = first_sweep_at(now, run_at, dispatch.grace)
    return job


def _object_location(stored: StoredFile) -> dict[str, object]:
    location: dict[str, object] = {
        "bucket": stored.bucket,
        "key": stored.key,
        "size": stored.size,
        "content_type": stored.content_type,
    }
    if stored.version_id:
        location["version_id"] = stored.version_id
    return location


def _audit(now: datetime, actor: str) -> AuditMetadata:
    return AuditMetadata(created_at=now, updated_at=now, created_by=actor, updated_by=actor)
