"""In-memory stand-ins for the ports (filejobs/ports.py), for the services' tests without moto.

`InMemoryJobStore` makes each transition with `ProcessingJob.apply` (the transition's guard, then
its changes) and lists jobs in the orders the repository's indexes give them; the same
scenarios run against it and against `JobRepository` on moto
(tests/integration/test_job_store_contract.py), so the two cannot drift apart unnoticed.

Every store hands out copies: a caller that changes a job (or a file) it was given changes
nothing stored, as with the real tables.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filejobs.data import index_keys
from filejobs.domain import fairness
from filejobs.domain.byte_ranges import BytesRanges
from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus, StoredFile
from filejobs.domain.file_completion import FileCompletion
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobError, JobStatus, JobType, ProcessingJob
from filejobs.domain.outcome_events import OutcomeEvent
from filejobs.domain.presets import Preset, PresetSet
from filejobs.domain.quotas import (
    DayUsage,
    QuotaChange,
    QuotaOverrides,
    QuotaSpentError,
    RescanCharge,
    SpentQuota,
    UsageCharge,
)
from filejobs.domain.retry import ObjectGoneError
from filejobs.domain.similar_images import MAX_BUCKET_MEMBERS, Bucket, own_buckets
from filejobs.domain.transition_result import Applied, Lost, TransitionResult
from filejobs.domain.transitions import Conflict, Transition
from filejobs.ports import (
    AlreadyIngested,
    ApiJobAdded,
    BatchDispatcher,
    Dispatcher,
    EventPublisher,
    FilePage,
    FileRef,
    FileStore,
    Ingested,
    IngestResult,
    InvalidCursorError,
    JobPage,
    JobStore,
    ObjectStore,
    OverQuota,
    PageCursor,
    QuotaStore,
    ScannedFile,
    UnreadableItem,
    UploadHead,
    Workspaces,
)

# How the repository serializes a `created_at` page cursor (PynamoDB's UTCDateTimeAttribute).
_CURSOR_TIME = "%Y-%m-%dT%H:%M:%S.%f+0000"
# DynamoDB's limit on a sort key value (job_repository._MAX_RANGE_KEY_BYTES).
_MAX_RANGE_KEY_BYTES = 1024


def _copy[T](value: T) -> T:
    return copy.deepcopy(value)


# --- jobs ------------------------------------------------------------------------------------


class InMemoryJobStore:
    """The JobStore port in a dict: one lock stands for DynamoDB's per-item conditional write."""

    def __init__(self) -> None:
        self._jobs: dict[str, ProcessingJob] = {}
        # Deleted through `apply`: the repository removes their tenant and status index keys.
        self._unlisted: set[str] = set()
        self._lock = threading.Lock()

    def get(self, job_id: str, *, consistent: bool = True) -> ProcessingJob | None:
        with self._lock:
            stored = self._jobs.get(job_id)
            # A soft-deleted job is still an item: `get` returns it, deleted_at set.
            return None if stored is None else _copy(stored)

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True) -> list[ProcessingJob]:
        with self._lock:
            return [_copy(self._jobs[i]) for i in set(job_ids) if i in self._jobs]

    def create(self, job: ProcessingJob) -> bool:
        with self._lock:
            return self._put_new(job)

    def erase(self, job_id: str) -> bool:
        with self._lock:
            self._unlisted.discard(job_id)
            return self._jobs.pop(job_id, None) is not None

    def create_all(self, jobs: Iterable[ProcessingJob]) -> bool:
        """Every job or, when one of their ids exists already, none (an ingest's transaction)."""
        jobs = list(jobs)
        with self._lock:
            if any(job.id in self._jobs for job in jobs):
                return False
            for job in jobs:
                self._put_new(job)
            return True

    def _put_new(self, job: ProcessingJob) -> bool:
        if job.id in self._jobs:
            return False
        self._jobs[job.id] = _copy(job)
        return True

    def apply(self, job_id: str, job_type: JobType, transition: Transition) -> TransitionResult:
        with self._lock:
            stored = self._jobs.get(job_id)
            if stored is None:
                return Lost(Conflict.NOT_FOUND, None)
            # The repository conditions every write on the caller's job type (it derives the
            # index keys), whatever the guard says, and reports that first.
            if stored.job_type is not job_type:
                return Lost(Conflict.WRONG_TYPE, _copy(stored))
            changed = _copy(stored)
            try:
                # The entity's own apply: the transition's guard, then its changes.
                changed.apply(transition)
            except JobError as refused:
                return Lost(Conflict(refused.reason), _copy(stored))
            self._jobs[job_id] = _copy(changed)  # not sharing the caller's values (a result)
            if "deleted_at" in transition.changes.set:
                self._unlisted.add(job_id)
            return Applied(changed)

    # --- listings ------------------------------------------------------------------------

    def jobs_of(
        self, stored: StoredFile, status: JobStatus | None = None, *, consistent: bool = True
    ) -> list[ProcessingJob]:
        with self._lock:
            found = [
                j
                for j in self._jobs.values()
                if j.file_id == stored.id
                and j.metadata.deleted_at is None
                and (status is None or j.status is status)
            ]
            found.sort(key=lambda j: (j.metadata.created_at, j.id))
            return [_copy(j) for j in found]

    def jobs_of_file(self, file_id: str, status: JobStatus | None = None) -> list[ProcessingJob]:
        """A test's view: the file's jobs by its id (no StoredFile at hand)."""
        with self._lock:
            found = [
                j
                for j in self._jobs.values()
                if j.file_id == file_id
                and j.metadata.deleted_at is None
                and (status is None or j.status is status)
            ]
            found.sort(key=lambda j: (j.metadata.created_at, j.id))
            return [_copy(j) for j in found]

    def tenant_page(
        self,
        tenant: str,
        *,
        status: JobStatus | None = None,
        job_type: JobType | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> JobPage:
        start = None if after is None else (_created_at_of(after), after.id)
        with self._lock:
            entries = [
                ((j.metadata.created_at, j.id), j)
                for j in self._listed()
                if j.tenant == tenant
                and (status is None or j.status is status)
                and (job_type is None or j.job_type is job_type)
            ]
            entries.sort(key=lambda entry: entry[0], reverse=True)
            beyond = [job for position, job in entries if start is None or position < start]
            return _page(beyond, limit, lambda j: _cursor_time(j.metadata.created_at))

    def status_page(
        self,
        status: JobStatus,
        *,
        job_type: JobType | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> JobPage:
        if after is not None and not _is_range_key_value(after.range_value):
            raise InvalidCursorError(f"not a queue_order value: {after.range_value[:80]!r}")
        start = None if after is None else (after.range_value, after.id)
        with self._lock:
            entries = [
                ((_queue_order(j), j.id), j)
                for j in self._listed()
                if j.status is status and (job_type is None or j.job_type is job_type)
            ]
            entries.sort(key=lambda entry: entry[0])
            beyond = [job for position, job in entries if start is None or position > start]
            return _page(beyond, limit, _queue_order)

    def due_for_sweep(
        self, now: datetime, *, per_shard: int = 100, on_unreadable: UnreadableItem | None = None
    ) -> Iterator[ProcessingJob]:
        """The due jobs oldest check first. The repository reads its 256 shards from a random
        one on and yields each shard's in order: callers may rely on nothing across shards.
        (Every job held here is readable: `on_unreadable` is never told.)"""
        with self._lock:
            shards: dict[str, list[ProcessingJob]] = {}
            for job in self._jobs.values():
                if job.sweep_at is not None and job.sweep_at <= now:
                    shards.setdefault(index_keys.sweep_key(job.id), []).append(job)
            due = [
                _copy(job)
                for jobs in shards.values()
                for job in sorted(jobs, key=_sweep_order)[:per_shard]
            ]
        # Taken lazily, as the repository's, but from a snapshot: a caller may write meanwhile.
        yield from sorted(due, key=_sweep_order)

    def _listed(self) -> Iterator[ProcessingJob]:
        return (j for j in self._jobs.values() if j.id not in self._unlisted)

    # --- for tests -------------------------------------------------------------------------

    def all(self) -> list[ProcessingJob]:
        """Every stored job (copies), in creation order."""
        with self._lock:
            return [_copy(j) for j in sorted(self._jobs.values(), key=_created)]


def stored(jobs: InMemoryJobStore, job: ProcessingJob) -> ProcessingJob:
    """The job as the store holds it now (it must be there)."""
    found = jobs.get(job.id)
    assert found is not None
    return found


def _created(job: ProcessingJob) -> tuple[datetime, str]:
    return job.metadata.created_at, job.id


def _sweep_order(job: ProcessingJob) -> tuple[datetime, str]:
    assert job.sweep_at is not None
    return job.sweep_at, job.id


def _queue_order(job: ProcessingJob) -> str:
    return index_keys.queue_order(job.priority, job.metadata.created_at)


def _cursor_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_CURSOR_TIME)


def _created_at_of(cursor: PageCursor) -> datetime:
    """The cursor's created_at, refused as the repository refuses it (InvalidCursorError)."""
    text = cursor.range_value
    try:
        moment = datetime.strptime(text, _CURSOR_TIME).replace(tzinfo=UTC)
    except (TypeError, ValueError) as error:
        raise InvalidCursorError(f"not a created_at value: {text!r}") from error
    if _cursor_time(moment) != text or not _is_range_key_value(text):
        raise InvalidCursorError(f"not a created_at value: {text[:80]!r}")
    return moment


def _is_range_key_value(text: str) -> bool:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return 0 < size <= _MAX_RANGE_KEY_BYTES


def _page(ordered: list[ProcessingJob], limit: int, range_value: Any) -> JobPage:
    entries = ordered[:limit]
    cursor = None
    if len(ordered) > limit:
        last = entries[-1]
        cursor = PageCursor(range_value(last), last.id)
    return JobPage([_copy(j) for j in entries], cursor)


class InMemoryTenantSlots:
    """TenantSlots: each (tenant, job type)'s holders, job id -> when its slot lapses, behind
    one lock (as each take is one conditional write). Lapsed slots count until a refused take
    clears them, as the repository does (data/tenant_slots.py)."""

    def __init__(self) -> None:
        self.holders: dict[tuple[str, JobType], dict[str, datetime]] = {}
        self.taken: list[str] = []  # every job id that got a slot, in order
        self._lock = threading.Lock()

    def take(
        self, tenant: str, job_type: JobType, job_id: str, *, cap: int, until: datetime,
        now: datetime,
    ) -> bool:  # fmt: skip
        with self._lock:
            held = self.holders.setdefault((tenant, job_type), {})
            if len(held) >= cap and job_id not in held:
                for stale in fairness.lapsed(held, now):
                    del held[stale]
            if len(held) >= cap and job_id not in held:
                return False
            held[job_id] = until
            self.taken.append(job_id)
            return True

    def give_back(self, tenant: str, job_type: JobType, job_id: str) -> None:
        with self._lock:
            self.holders.get((tenant, job_type), {}).pop(job_id, None)

    def held(self, tenant: str, job_type: JobType) -> set[str]:
        return set(self.holders.get((tenant, job_type), {}))


# --- files -----------------------------------------------------------------------------------


class InMemoryQuotaStore:
    """The QuotaStore port in dicts: the tenants' own limits and their days' usage (which the
    file store's ingest counts, as the repository's transaction does)."""

    def __init__(self) -> None:
        self._overrides: dict[str, QuotaOverrides] = {}
        self._usage: dict[tuple[str, date], DayUsage] = {}
        self.file_rescans: dict[tuple[str, date], int] = {}
        self.lock = threading.Lock()

    def overrides(self, tenant: str) -> QuotaOverrides:
        with self.lock:
            return self._overrides.get(tenant, QuotaOverrides())

    def change(self, tenant: str, change: QuotaChange, *, at: datetime, by: str) -> QuotaOverrides:
        with self.lock:
            limits = self._overrides.get(tenant, QuotaOverrides()).as_dict()
            limits.update(change.set)
            for name in change.reset:
                limits.pop(name, None)
            changed = QuotaOverrides(**limits, updated_at=at, updated_by=by)
            self._overrides[tenant] = changed
            return changed

    def usage(self, tenant: str, day: date) -> DayUsage:
        with self.lock:
            return self._usage.get((tenant, day), DayUsage(tenant, day))

    def charge(self, charge: UsageCharge) -> DayUsage | None:
        """Count the charge if the day stays within its limits (None), else the day as it
        stood (the caller holds `lock`)."""
        key = (charge.tenant, charge.day)
        usage = self._usage.get(key, DayUsage(charge.tenant, charge.day))
        if not charge.fits(usage):
            return usage
        self._usage[key] = replace(
            usage, files=usage.files + charge.files, bytes=usage.bytes + charge.bytes
        )
        return None

    def charge_rescan(self, charge: RescanCharge | None) -> None:
        """Count a rescan against its tenant's and its file's day, or raise QuotaSpentError
        and count nothing (the caller holds `lock`)."""
        if charge is None:
            return
        key = (charge.tenant, charge.day)
        usage = self._usage.get(key, DayUsage(charge.tenant, charge.day))
        if charge.max_per_day is not None and usage.rescans >= charge.max_per_day:
            raise QuotaSpentError(SpentQuota.RESCANS)
        of_file = self.file_rescans.get((charge.file_id, charge.day), 0)
        if charge.max_per_file is not None and of_file >= charge.max_per_file:
            raise QuotaSpentError(SpentQuota.FILE_RESCANS)
        self._usage[key] = replace(usage, rescans=usage.rescans + 1)
        self.file_rescans[(charge.file_id, charge.day)] = of_file + 1


class InMemoryFileStore:
    """The FileStore port in a dict. Its ingest writes the plan's jobs into `jobs`, as the
    repository's one transaction puts the file and its jobs, and counts a charge in `quotas`."""

    def __init__(self, jobs: InMemoryJobStore, quotas: InMemoryQuotaStore | None = None) -> None:
        self._jobs = jobs
        self.quotas = quotas or InMemoryQuotaStore()
        self._files: dict[str, StoredFile] = {}
        self._api_jobs: dict[str, int] = {}
        # The tags a verdict displaced from each file's version (keep_displaced_tags).
        self.displaced_tags: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def get(self, file_id: str, *, consistent: bool = True) -> StoredFile | None:
        with self._lock:
            stored = self._files.get(file_id)
            return None if stored is None else _copy(stored)

    def put(self, stored: StoredFile) -> None:
        """For tests: a file recorded as it is (no jobs)."""
        with self._lock:
            self._files[stored.id] = _copy(stored)

    def record_ingest(self, plan: IngestPlan, charge: UsageCharge | None = None) -> IngestResult:
        with self._lock, self.quotas.lock:
            if plan.file.id in self._files or any(self._jobs.get(j.id) for j in plan.jobs):
                return AlreadyIngested(plan.file.id)
            if charge is not None:
                refused = self.quotas.charge(charge)
                if refused is not None:
                    return OverQuota(charge, refused)
            self._jobs.create_all(plan.jobs)
            self._files[plan.file.id] = _copy(plan.file)
            return Ingested(plan)

    def add_api_job(
        self, job: ProcessingJob, *, per_file: int, charge: RescanCharge | None = None
    ) -> ApiJobAdded:
        with self._lock, self.quotas.lock:
            if self._jobs.get(job.id) is not None:
                return ApiJobAdded.EXISTS
            if job.file_id not in self._files or self._api_jobs.get(job.file_id, 0) >= per_file:
                return ApiJobAdded.FILE_SPENT
            self.quotas.charge_rescan(charge)
            self._jobs.create(job)
            self._api_jobs[job.file_id] = self._api_jobs.get(job.file_id, 0) + 1
            self._add_job_id(job)
            return ApiJobAdded.CREATED

    def add_job(
        self, job: ProcessingJob, *, charge: RescanCharge | None = None, named: bool = True
    ) -> bool:
        with self._lock, self.quotas.lock:
            if job.file_id not in self._files:
                raise LookupError(f"no file {job.file_id} to add job {job.id} to")
            if self._jobs.get(job.id) is not None:
                return False
            self.quotas.charge_rescan(charge)
            self._jobs.create(job)
            if named:
                self._add_job_id(job)
            return True

    def _add_job_id(self, job: ProcessingJob) -> None:
        stored = self._files[job.file_id]
        stored.job_ids = stored.job_ids | {job.id}

    def record_completion(
        self, file_id: str, completion: FileCompletion, *, gone: frozenset[str] = frozenset()
    ) -> bool:
        with self._lock:
            stored = self._files.get(file_id)
            if stored is None:
                return False
            if stored.processed is not None and stored.processed.version >= completion.version:
                return False
            stored.processed = completion
            stored.job_ids = stored.job_ids - gone
            return True

    def record_scan(self, file_id: str, record: ScanRecord, *, by: str) -> StoredFile | None:
        verdict = record.verdict
        earlier = {
            ScanStatus.CLEAN: {ScanStatus.UNSCANNABLE},
            ScanStatus.INFECTED: {ScanStatus.CLEAN, ScanStatus.UNSCANNABLE},
            ScanStatus.UNSCANNABLE: set(),
        }[verdict]

        def allowed(stored: StoredFile) -> bool:
            if stored.scan_status is not None and stored.scan_status not in {verdict, *earlier}:
                return False
            return verdict is not ScanStatus.CLEAN or stored.status is FileStatus.ACTIVE

        def change(stored: StoredFile) -> None:
            stored.scan_status = verdict
            stored.scan = record

        return self._update_if(file_id, allowed, change, at=record.scanned_at, by=by)

    def keep_displaced_tags(
        self, file_id: str, tags: dict[str, str], *, at: datetime, by: str
    ) -> None:
        self.displaced_tags[file_id] = dict(tags)

    def quarantine(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        def allowed(stored: StoredFile) -> bool:
            return stored.status is FileStatus.ACTIVE and stored.metadata.deleted_at is None

        def change(stored: StoredFile) -> None:
            stored.status = FileStatus.QUARANTINED
            stored.status_reason = reason

        return self._update_if(file_id, allowed, change, at=at, by=by)

    def mark_deleted(
        self, file_id: str, *, reason: str, at: datetime, by: str
    ) -> StoredFile | None:
        def allowed(stored: StoredFile) -> bool:
            return stored.status in (FileStatus.ACTIVE, FileStatus.DELETED)

        def change(stored: StoredFile) -> None:
            stored.status, stored.status_reason = FileStatus.DELETED, reason

        return self._update_if(file_id, allowed, change, at=at, by=by)

    def restore(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        def allowed(stored: StoredFile) -> bool:
            return stored.status is FileStatus.DELETED and stored.status_reason == reason

        def change(stored: StoredFile) -> None:
            stored.status, stored.status_reason = FileStatus.ACTIVE, None

        return self._update_if(file_id, allowed, change, at=at, by=by)

    def erase(self, stored: StoredFile) -> bool:
        with self._lock:
            return self._files.pop(stored.id, None) is not None

    def record_content(
        self, file_id: str, *, sha256: str, duplicate_of: str | None, at: datetime, by: str
    ) -> StoredFile | None:
        def change(stored: StoredFile) -> None:
            stored.sha256 = sha256
            stored.duplicate_of = duplicate_of

        return self._update_if(file_id, lambda _: True, change, at=at, by=by)

    def _update_if(
        self,
        file_id: str,
        allowed: Any,
        change: Any,
        *,
        at: datetime,
        by: str,
    ) -> StoredFile | None:
        with self._lock:
            stored = self._files.get(file_id)
            if stored is None:
                return None
            if allowed(stored):
                stored = _copy(stored)
                change(stored)
                stored.metadata.updated_at, stored.metadata.updated_by = at, by
                self._files[file_id] = _copy(stored)
            return _copy(stored)

    def files_of_tenant(
        self,
        tenant: str,
        *,
        prefix: str = "",
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> FilePage:
        with self._lock:
            found = sorted(
                (f.key, f.id)
                for f in self._files.values()
                if f.tenant == tenant
                and f.key.startswith(prefix)
                and (after is None or (f.key, f.id) > after)
            )
        page = [FileRef(file_id, key) for key, file_id in found[:limit]]
        cursor = (page[-1].key, page[-1].id) if len(found) > limit else None
        return FilePage(page, cursor)

    def scanned_before(
        self, cutoff: datetime, *, definitions_before: str | None = None, per_shard: int = 100
    ) -> Iterator[ScannedFile]:
        with self._lock:
            found = [
                ScannedFile(f.id, f.tenant, f.scan.scanned_at, f.scan.definitions_version)
                for f in self._files.values()
                if f.scan is not None
                and f.status is FileStatus.ACTIVE
                and f.scan_status is ScanStatus.CLEAN
                and f.scan.scanned_at < cutoff
                and (
                    definitions_before is None
                    or f.scan.definitions_version is None
                    or f.scan.definitions_version < definitions_before
                )
            ]
        yield from sorted(found, key=lambda s: (s.scanned_at, s.id))

    def versions_of(self, bucket: str, key: str) -> list[StoredFile]:
        with self._lock:
            found = [f for f in self._files.values() if (f.bucket, f.key) == (bucket, key)]
        found.sort(key=lambda f: f.metadata.created_at, reverse=True)
        return [_copy(f) for f in found]

    def same_content(self, stored: StoredFile, *, limit: int = 20) -> list[StoredFile]:
        if stored.sha256 is None:
            return []
        with self._lock:
            found = [
                f
                for f in self._files.values()
                if (f.tenant, f.sha256) == (stored.tenant, stored.sha256) and f.id != stored.id
            ]
        found.sort(key=lambda f: (f.metadata.created_at, f.id))
        return [_copy(f) for f in found[:limit]]


# --- queues, bus, bucket, scratch ------------------------------------------------------------


@dataclass
class RecordingDispatcher:
    """Dispatcher and BatchDispatcher: records each message sent as (job id, delay)."""

    sent: list[tuple[str, timedelta]] = field(default_factory=list)

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent.append((job.id, delay))

    def dispatch_all(self, jobs: Iterable[ProcessingJob]) -> None:
        self.sent.extend((job.id, timedelta(0)) for job in jobs)

    @property
    def sent_ids(self) -> list[str]:
        return [job_id for job_id, _ in self.sent]


@dataclass
class RecordingEvents:
    """EventPublisher: keeps what was published."""

    published: list[OutcomeEvent] = field(default_factory=list)

    def publish(self, event: OutcomeEvent) -> None:
        self.published.append(event)


@dataclass
class InMemoryObjects:
    """ObjectStore: objects by (bucket, key); a missing one is gone (ObjectGoneError)."""

    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    # The preset each upload names in its metadata (x-amz-meta-filejobs-preset).
    presets: dict[tuple[str, str], str] = field(default_factory=dict)
    # (key, offset, length) of each ranged read beyond a head, as S3 would count GETs.
    ranged_reads: list[tuple[str, int, int]] = field(default_factory=list)

    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        return self._body(bucket, key)[:length]

    def byte_ranges(
        self, bucket: str, key: str, version_id: str | None, size: int
    ) -> InMemoryRanges:
        return InMemoryRanges(self, bucket, key, size)

    def _body(self, bucket: str, key: str) -> bytes:
        try:
            return self.objects[(bucket, key)]
        except KeyError:
            raise ObjectGoneError(f"no object s3://{bucket}/{key}") from None

    def read_upload_head(
        self, bucket: str, key: str, version_id: str | None, length: int
    ) -> UploadHead:
        return UploadHead(
            self.read_head(bucket, key, version_id, length), self.presets.get((bucket, key))
        )


@dataclass
class InMemoryRanges:
    """ByteRanges of an InMemoryObjects object: each read recorded there."""

    store: InMemoryObjects
    bucket: str
    key: str
    size: int

    def read(self, offset: int, length: int) -> bytes:
        self.store.ranged_reads.append((self.key, offset, length))
        return self.store._body(self.bucket, self.key)[offset : offset + length]


class TempWorkspaces:
    """Workspaces: a fresh directory under `root` per attempt, removed afterwards."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._numbers = count()
        self.used: list[Path] = []

    @contextmanager
    def for_job(self, job_id: str) -> Iterator[Path]:
        path = self.root / f"job-{job_id}-{next(self._numbers)}"
        path.mkdir(parents=True)
        self.used.append(path)
        try:
            yield path
        finally:
            for entry in sorted(path.rglob("*"), reverse=True):
                entry.rmdir() if entry.is_dir() else entry.unlink()
            path.rmdir()


def aged(job: ProcessingJob, created_at: datetime) -> ProcessingJob:
    """A copy of `job` created (and last updated) at another instant."""
    metadata = replace(job.metadata, created_at=created_at, updated_at=created_at)
    return replace(_copy(job), metadata=metadata)


# mypy checks here that each fake implements its port exactly.
if TYPE_CHECKING:
    _job_store: JobStore = InMemoryJobStore()
    _file_store: FileStore = InMemoryFileStore(InMemoryJobStore())
    _quota_store: QuotaStore = InMemoryQuotaStore()
    _dispatcher: Dispatcher = RecordingDispatcher()
    _batch_dispatcher: BatchDispatcher = RecordingDispatcher()
    _events: EventPublisher = RecordingEvents()
    _objects: ObjectStore = InMemoryObjects()
    _workspaces: Workspaces = TempWorkspaces(Path())


@dataclass
class InMemoryPresets:
    """PresetStore: each tenant's current set, and every version saved; counts its reads."""

    sets: dict[str, PresetSet] = field(default_factory=dict)
    versions: dict[tuple[str, str, int], Preset] = field(default_factory=dict)
    reads: int = 0

    def current(self, tenant: str, *, consistent: bool = False) -> PresetSet:
        self.reads += 1
        return self.sets.get(tenant, PresetSet())

    def save(
        self, tenant: str, presets: tuple[Preset, ...], saved: Preset | None, *, after: int
    ) -> bool:
        stored = self.sets.get(tenant, PresetSet())
        if stored.revision != after:
            return False
        if saved is not None:
            version_key = (tenant, saved.name, saved.version)
            if version_key in self.versions:
                return False
            self.versions[version_key] = saved
        self.sets[tenant] = PresetSet(presets, after + 1)
        return True

    def version(self, tenant: str, name: str, version: int) -> Preset | None:
        return self.versions.get((tenant, name, version))

    def latest_version(self, tenant: str, name: str) -> int:
        numbers = [v for (t, n, v) in self.versions if (t, n) == (tenant, name)]
        return max(numbers, default=0)


@dataclass
class FixedHead:
    """ObjectStore: every object starts with the same bytes (and may name a preset)."""

    head: bytes = b"%PDF-1.7\n"
    preset: str | None = None

    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        return self.head[:length]

    def read_upload_head(
        self, bucket: str, key: str, version_id: str | None, length: int
    ) -> UploadHead:
        return UploadHead(self.head[:length], self.preset)

    def byte_ranges(self, bucket: str, key: str, version_id: str | None, size: int) -> BytesRanges:
        return BytesRanges(self.head)  # the object is its head


class InMemoryNearDuplicateIndex:
    """The near-duplicate index (ports.NearDuplicateIndex) in memory, its buckets capped as
    DynamoDB's are (data/similar_index.py)."""

    def __init__(self, cap: int = MAX_BUCKET_MEMBERS) -> None:
        self.buckets: dict[str, dict[str, str]] = {}
        self.hashes: dict[tuple[str, str], str] = {}
        self._cap = cap

    def listed(self, tenant: str, buckets: Iterable[Bucket]) -> dict[str, str]:
        found: dict[str, str] = {}
        for bucket in buckets:
            found.update(self.buckets.get(bucket.item_id(tenant), {}))
        return found

    def add(self, tenant: str, file_id: str, hash_hex: str) -> int:
        full = 0
        for bucket in own_buckets(hash_hex):
            members = self.buckets.setdefault(bucket.item_id(tenant), {})
            if file_id in members or len(members) < self._cap:
                members[file_id] = hash_hex
            else:
                full += 1
        self.hashes[(tenant, file_id)] = hash_hex
        return full

    def remove(self, tenant: str, file_id: str) -> bool:
        hash_hex = self.hashes.pop((tenant, file_id), None)
        if hash_hex is None:
            return False
        for bucket in own_buckets(hash_hex):
            members = self.buckets.get(bucket.item_id(tenant), {})
            members.pop(file_id, None)
            if not members:
                self.buckets.pop(bucket.item_id(tenant), None)
        return True
