"""The ingest use case: an S3 object-created record becomes a StoredFile, its jobs, and the
messages that start them, however often the record is delivered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from filejobs.domain import keys
from filejobs.domain.content import SNIFF_BYTES, Sniffed, sniff
from filejobs.domain.file import FileStatus
from filejobs.domain.ingest import (
    IngestPlan,
    InvalidUploadError,
    ObjectCreated,
    plan_ingest,
    tenant_of,
)
from filejobs.domain.job import JobStatus, ProcessingJob
from filejobs.domain.presets import TenantPresets, UploadPlan, default_plan
from filejobs.domain.quotas import TenantQuotas, charge_for, over_quota, rejected, too_large
from filejobs.domain.retry import ObjectGoneError
from filejobs.domain.scanning import sent_at_ingest
from filejobs.domain.time import utcnow
from filejobs.ports import (
    AlreadyIngested,
    BatchDispatcher,
    FileStore,
    Ingested,
    JobStore,
    ObjectStore,
    OverQuota,
    UploadVersions,
)

type Recorded = Ingested | AlreadyIngested


class IngestService:
    """Records each upload once, within its tenant's quotas.

    `limits` gives the quotas in force for a tenant (services/quotas.py `TenantLimits.limits`);
    without it nothing is limited or counted. An upload over a quota is recorded all the same,
    `rejected` with the reason and no jobs, so it is seen (the file's view, `Upload Rejected`)
    rather than dropped.
    """

    def __init__(
        self,
        files: FileStore,
        heads: ObjectStore,
        clock: Callable[[], datetime] = utcnow,
        limits: Callable[[str], TenantQuotas] | None = None,
        presets: Callable[[str], TenantPresets] | None = None,
    ) -> None:
        self._files = files
        self._heads = heads
        self._clock = clock
        self._limits = limits
        # A tenant's upload presets (services/presets.py PresetCache.of); None: none, the
        # default table for every upload.
        self._presets = presets

    def ingest(self, record: ObjectCreated) -> Recorded:
        """Record the upload once, however often the record is delivered.

        Raises `InvalidUploadError` for keys outside `uploads/{tenant}/`, before any I/O.
        """
        tenant = tenant_of(record.key)
        try:
            head = self._heads.read_upload_head(
                record.bucket, record.key, record.version_id, SNIFF_BYTES
            )
            rest = self._heads.byte_ranges(
                record.bucket, record.key, record.version_id, record.size
            )
            sniffed = sniff(head.data, rest)  # ZIP, OLE2 and audio only: a few ranged reads more
        except ObjectGoneError:
            return self._gone(record)
        now = self._clock()
        upload_plan = self._upload_plan(tenant, record.key, sniffed, head.preset)
        # A backfill's copy is announced by S3 like any upload: its metadata says what it is.
        announced = replace(record, backfill=True) if head.backfill else record
        plan = plan_ingest(announced, sniffed.content_type, now=now, upload_plan=upload_plan)
        if self._limits is None:
            return self._recorded(self._files.record_ingest(plan))
        return self._within_quotas(plan, self._limits(plan.file.tenant), now)

    def _upload_plan(
        self, tenant: str, key: str, sniffed: Sniffed, requested: str | None
    ) -> UploadPlan:
        content_type, cover_art = sniffed.content_type, sniffed.cover_art
        if self._presets is None:
            return default_plan(content_type, cover_art=cover_art)
        return self._presets(tenant).plan(
            key, content_type, requested=requested, cover_art=cover_art
        )

    def _within_quotas(self, plan: IngestPlan, quotas: TenantQuotas, now: datetime) -> Recorded:
        """The upload counted against its tenant's day with its file and jobs, or, over a
        quota, recorded rejected (and counted nowhere)."""
        reason = too_large(plan.file, quotas)
        if reason is not None:
            return self._recorded(self._files.record_ingest(rejected(plan, reason)))
        result = self._files.record_ingest(plan, charge_for(plan.file, quotas, now=now))
        if isinstance(result, OverQuota):
            reason = over_quota(result.charge, result.usage)
            return self._recorded(self._files.record_ingest(rejected(plan, reason)))
        return result

    @staticmethod
    def _recorded(result: Ingested | AlreadyIngested | OverQuota) -> Recorded:
        if isinstance(result, OverQuota):  # no charge was given: nothing could be over
            raise AssertionError("an upload recorded without a charge was refused as over quota")
        return result

    def _gone(self, record: ObjectCreated) -> Recorded:
        """The version is no longer there. A late duplicate of a recorded upload (its file
        since quarantined or deleted) is a duplicate like any other; an upload never recorded
        was withdrawn before its ingest, and there is nothing to process."""
        file_id = keys.file_id_for(record.bucket, record.key, record.version_marker)
        if self._files.get(file_id) is not None:
            return AlreadyIngested(file_id)
        raise InvalidUploadError(
            f"key {record.key!r}: the object was deleted before it could be ingested"
        )


@dataclass(frozen=True)
class Received:
    """What one delivery of an upload record did."""

    file_id: str
    first: bool  # False: a redelivery of a record already ingested
    content_type: str | None  # sniffed on the first delivery
    jobs: tuple[ProcessingJob, ...]  # the jobs the first delivery recorded (none on a redelivery)
    sent: list[ProcessingJob]  # the jobs whose messages this delivery sent
    # Why the first delivery recorded the upload rejected (over a quota), with no jobs.
    rejected: str | None = None
    # "name v3" of the upload preset that chose the jobs; None: the default table's.
    preset: str | None = None


class UploadIntake:
    """Records an upload with its jobs and sends the messages that start them.

    A redelivered record finds its file recorded: the first delivery may have died between
    recording and sending, so the jobs it would have sent and that are still pending are sent
    again (a job's claim is conditional: a duplicate message is acknowledged unread).
    """

    def __init__(
        self,
        ingest: IngestService,
        jobs: JobStore,
        dispatcher: BatchDispatcher,
        *,
        files: FileStore | None = None,
        uploads: UploadVersions | None = None,
    ) -> None:
        self._ingest = ingest
        self._jobs = jobs
        self._dispatcher = dispatcher
        # With both, an upload recorded rejected (over its tenant's quotas) is deleted from the
        # bucket: its record says why, and its bytes are kept nowhere nobody will process.
        self._files = files
        self._uploads = uploads

    def receive(self, record: ObjectCreated) -> Received:
        """Raises `InvalidUploadError` for a record that can never become an upload."""
        result = self._ingest.ingest(record)
        if isinstance(result, AlreadyIngested):
            pending = self._pending_ingest_jobs(tenant_of(record.key), result.file_id)
            resent = sent_at_ingest(pending)
            self._dispatcher.dispatch_all(resent)
            if not pending:
                self._remove_if_rejected(record, result.file_id)  # the first died before
            return Received(result.file_id, first=False, content_type=None, jobs=(), sent=resent)
        plan = result.plan
        sent = sent_at_ingest(plan.jobs)
        self._dispatcher.dispatch_all(sent)
        reason = plan.file.status_reason if plan.file.status is FileStatus.REJECTED else None
        if reason is not None:
            self._remove(record)
        applied = plan.file.preset
        return Received(
            plan.file.id,
            first=True,
            content_type=plan.file.content_type,
            jobs=plan.jobs,
            sent=sent,
            rejected=reason,
            preset=None if applied is None else f"{applied.name} v{applied.version}",
        )

    def _pending_ingest_jobs(self, tenant: str, file_id: str) -> list[ProcessingJob]:
        """The file's ingest jobs still pending, by their derived ids: one BatchGetItem."""
        candidates = keys.ingest_job_types(tenant, file_id)
        found = self._jobs.get_many(candidates)
        pending = [job for job in found if job.status is JobStatus.PENDING]
        return sorted(pending, key=lambda job: (job.metadata.created_at, job.id))

    def _remove_if_rejected(self, record: ObjectCreated, file_id: str) -> None:
        if self._files is None or self._uploads is None:
            return
        stored = self._files.get(file_id, consistent=False)
        if stored is not None and stored.status is FileStatus.REJECTED:
            self._remove(record)

    def _remove(self, record: ObjectCreated) -> None:
        """The rejected version deleted by its id; a record without one (an unversioned bucket)
        is left: deleting the key could delete a later upload of it."""
        if self._uploads is not None and record.version_id:
            self._uploads.delete_version(record.bucket, record.key, record.version_id)
