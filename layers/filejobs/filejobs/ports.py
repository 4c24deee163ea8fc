"""The ports: what the services need from storage, queues, buses and buckets, and nothing more.

The services depend on these Protocols only; `data/` (DynamoDB through PynamoDB) and `adapters/`
(SQS, S3, EventBridge) implement them, and the services' unit tests give them in-memory ones
(tests/fakes.py, held to the repository's behaviour by the contract test,
tests/integration/test_job_store_contract.py). The values that cross a port (pages, cursors,
ingest results, dead letters) are defined here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

# The domain's types are named in annotations only (strings, under the __future__ import): not
# importing them at run time keeps every handler from loading the whole domain (about 60 ms
# of each cold start) for the few types it uses.
if TYPE_CHECKING:
    from filejobs.domain.byte_ranges import ByteRanges
    from filejobs.domain.definitions import DefinitionsManifest, Engine
    from filejobs.domain.file import ScanRecord, StoredFile
    from filejobs.domain.file_completion import FileCompletion
    from filejobs.domain.file_lifecycle import Erasure, KeyVersions, ObjectRemoved, OutputsPurge
    from filejobs.domain.ingest import IngestPlan
    from filejobs.domain.job import JobStatus, JobType, ProcessingJob
    from filejobs.domain.objects import ObjectLocation
    from filejobs.domain.operations import Operation
    from filejobs.domain.outcome_events import OutcomeEvent
    from filejobs.domain.presets import Preset, PresetSet
    from filejobs.domain.quotas import (
        DayUsage,
        OperationCharge,
        QuotaChange,
        QuotaOverrides,
        RescanCharge,
        UsageCharge,
    )
    from filejobs.domain.reconciliation import ListedVersion
    from filejobs.domain.schedules import Schedule
    from filejobs.domain.similar_images import Bucket
    from filejobs.domain.stats import FailureGroupSummary, Overview
    from filejobs.domain.transition_result import TransitionResult
    from filejobs.domain.transitions import Transition
    from filejobs.domain.uploads import UploadGrant
    from filejobs.domain.webhooks import Delivery, Endpoint

# --- jobs ------------------------------------------------------------------------------------


class InvalidCursorError(ValueError):
    """A page cursor whose range value is not one the listing could have returned."""


@dataclass(frozen=True)
class PageCursor:
    """Where a page ended: the last entry's sort value (serialized) and its id."""

    range_value: str
    id: str


@dataclass(frozen=True)
class JobPage:
    jobs: list[ProcessingJob]
    next: PageCursor | None  # None on the last page


class TenantSlots(Protocol):
    """Each tenant's running slots per job type (domain/fairness.py): the tenant's cap.

    Taking a slot is one conditional write that succeeds only while fewer than `cap` slots are
    live (or the job holds one already); slots whose holder's invocation has surely ended are
    cleared on the way. Giving one back removes it, whoever else holds one meanwhile."""

    def take(
        self, tenant: str, job_type: JobType, job_id: str, *, cap: int, until: datetime,
        now: datetime,
    ) -> bool:  # fmt: skip
        """Whether `job_id` now holds one of the tenant's `cap` slots, until `until`."""
        ...

    def give_back(self, tenant: str, job_type: JobType, job_id: str) -> None: ...


# Told of a stored job item no job can be read from (a status no JobStatus names, an attribute
# gone, a corrupt map): its id and the error, never its content.
type UnreadableItem = Callable[[str, Exception], None]


class JobStore(Protocol):
    """The jobs, each change one conditional write: `apply` checks the transition's guard and
    makes its changes atomically, or says who won the race (`Lost`)."""

    def get(self, job_id: str, *, consistent: bool = True) -> ProcessingJob | None: ...

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True) -> list[ProcessingJob]:
        """The stored jobs among `job_ids` (soft-deleted ones included), in no order."""
        ...

    def create(self, job: ProcessingJob) -> bool:
        """Store a new job; False (and nothing written) when its id exists already."""
        ...

    def apply(self, job_id: str, job_type: JobType, transition: Transition) -> TransitionResult: ...

    def jobs_of(
        self, stored: StoredFile, status: JobStatus | None = None, *, consistent: bool = True
    ) -> list[ProcessingJob]:
        """A file's jobs, oldest first, deleted ones left out; with `status`, only those in it."""
        ...

    def tenant_page(
        self,
        tenant: str,
        *,
        status: JobStatus | None = None,
        job_type: JobType | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> JobPage:
        """A tenant's jobs, newest first."""
        ...

    def status_page(
        self,
        status: JobStatus,
        *,
        job_type: JobType | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> JobPage:
        """Every tenant's jobs in one status, in their queue order."""
        ...

    def due_for_sweep(
        self, now: datetime, *, per_shard: int = 100, on_unreadable: UnreadableItem | None = None
    ) -> Iterator[ProcessingJob]:
        """Jobs whose sweep check is due: oldest check first within a shard, the shards in an
        order that moves from run to run (so a run cut short leaves no shard always last).

        A due item no job can be read from is told to `on_unreadable` (its id, and why) and
        skipped, the rest still yielded; without `on_unreadable` its error is raised."""
        ...

    def erase(self, job_id: str) -> bool:
        """Remove the job's item for good (an erasure: its input, result and keys with it);
        False when there was none."""
        ...


# --- files -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ingested:
    plan: IngestPlan


@dataclass(frozen=True)
class AlreadyIngested:
    file_id: str


@dataclass(frozen=True)
class OverQuota:
    """The upload did not fit its tenant's day: nothing was written. `usage` is the day as it
    stood when the count was refused (for the reason's wording)."""

    charge: UsageCharge
    usage: DayUsage


type IngestResult = Ingested | AlreadyIngested | OverQuota


class ApiJobAdded(StrEnum):
    """What adding a job requested through the API to its file did."""

    CREATED = "created"  # the job is stored, and counted on its file
    EXISTS = "exists"  # a job of this id exists already: nothing written, nothing counted
    FILE_SPENT = "file_spent"  # the file has had all the API jobs it may: nothing written


@dataclass(frozen=True)
class FileRef:
    """A file as a listing names it: enough to page on and to read the file."""

    id: str
    key: str


@dataclass(frozen=True)
class FilePage:
    files: list[FileRef]
    # Where the next page starts (the last file's key and id), or None after the last page.
    next: tuple[str, str] | None


@dataclass(frozen=True)
class ScannedFile:
    """A clean file as the rescan policy lists it."""

    id: str
    tenant: str
    scanned_at: datetime
    definitions_version: str | None


class FileStore(Protocol):
    """The StoredFiles, and the ingest that records a file with all its jobs at once."""

    def get(self, file_id: str, *, consistent: bool = True) -> StoredFile | None: ...

    def record_ingest(self, plan: IngestPlan, charge: UsageCharge | None = None) -> IngestResult:
        """The file and all its jobs, or nothing when the file is recorded already.

        With `charge`, the upload is also counted against its tenant's day, in the same atomic
        write, only if the day stays within the charge's limits (else `OverQuota`, nothing
        written). A file recorded already is `AlreadyIngested` and counts nothing again.
        """
        ...

    def add_api_job(
        self, job: ProcessingJob, *, per_file: int, charge: RescanCharge | None = None
    ) -> ApiJobAdded:
        """A job requested through the API, stored and counted on its file in one atomic write,
        while the file has had fewer than `per_file` of them. With a rescan's `charge`, counted
        against its tenant's and its file's day in the same write (QuotaSpentError if not)."""
        ...

    def add_job(
        self, job: ProcessingJob, *, charge: RescanCharge | None = None, named: bool = True
    ) -> bool:
        """A new job on an existing file, its id added to the file's `job_ids` in the same atomic
        write (not `named`: left out, only counted on the file); False (nothing written) when the
        job exists already. With a rescan's `charge`, counted as add_api_job does."""
        ...

    def record_completion(
        self, file_id: str, completion: FileCompletion, *, gone: frozenset[str] = frozenset()
    ) -> bool:
        """The file's completion, only if newer (by version) than the one recorded: False when
        it is not (or there is no such file). `gone` leave the file's job_ids in the same write."""
        ...

    def record_scan(self, file_id: str, record: ScanRecord, *, by: str) -> StoredFile | None:
        """The scan's verdict, unless a later one is recorded; None when it was not written."""
        ...

    def keep_displaced_tags(
        self, file_id: str, tags: dict[str, str], *, at: datetime, by: str
    ) -> None:
        """Keeps on the file's record the uploader's tags the verdict tag displaced from its
        version (S3 holds at most 10): nothing the uploader set is lost."""
        ...

    def quarantine(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        """The file as stored after marking it quarantined (one already quarantined or deleted is
        left as it is, and returned so); None when there is no such file."""
        ...

    def files_of_tenant(
        self,
        tenant: str,
        *,
        prefix: str = "",
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> FilePage:
        """A tenant's files whose key starts with `prefix`, in key order (then id)."""
        ...

    def scanned_before(
        self, cutoff: datetime, *, definitions_before: str | None = None, per_shard: int = 100
    ) -> Iterator[ScannedFile]:
        """Clean files whose verdict is older than `cutoff` (or its definitions than a version)."""
        ...

    def same_content(self, stored: StoredFile, *, limit: int = 20) -> list[StoredFile]:
        """The tenant's other files with the same content (by its recorded hash), oldest first."""
        ...

    def versions_of(self, bucket: str, key: str) -> list[StoredFile]:
        """Every recorded version of an object key, newest first."""
        ...

    def record_content(
        self, file_id: str, *, sha256: str, duplicate_of: str | None, at: datetime, by: str
    ) -> StoredFile | None:
        """The file's content hash and the file it duplicates (none: it owns its content), in
        one write; None when there is no such file."""
        ...

    def mark_deleted(
        self, file_id: str, *, reason: str, at: datetime, by: str
    ) -> StoredFile | None:
        """An active (or deleted) file marked deleted with `reason`, in one conditional write (it
        is still shown, as deleted); a quarantined or rejected file is left as it is. The file
        as stored afterwards; None when there is no such file."""
        ...

    def restore(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        """A file deleted with `reason` made active again, in one conditional write; the file as
        stored afterwards (unchanged when it was not so deleted); None when there is none."""
        ...

    def erase(self, stored: StoredFile) -> bool:
        """Remove the file's record for good, and the content index's entry that names it;
        False when there was no record."""
        ...


# --- a file's life after its upload (domain/file_lifecycle.py) ---------------------------------


@dataclass(frozen=True)
class Notification:
    """A message of S3's queue, to be re-sent: `message_id` names it in a partial batch failure."""

    message_id: str
    body: str
    tenant: str | None  # None: a tenant of its own on the fair queue

    @property
    def size(self) -> int:
        return len(self.body.encode())


class IngestQueue(Protocol):
    """The fair ingest queue: S3's notifications, each in its tenant's group."""

    def send_all(self, notifications: Sequence[Notification]) -> list[str]:
        """Sends them; the message ids of those refused."""
        ...


class UploadListing(Protocol):
    """The uploads bucket's object versions under a prefix (the reconciler's listing)."""

    def versions(self, prefix: str) -> Iterable[ListedVersion]:
        """Every object version under `prefix`, delete markers left out."""
        ...


class RecordedFiles(Protocol):
    """Which file ids the files table holds (the reconciler's lookup)."""

    def recorded(self, file_ids: Sequence[str]) -> set[str]:
        """Those of `file_ids` the files table holds."""
        ...


class UploadVersions(Protocol):
    """A key's versions in the uploads bucket."""

    def versions(self, bucket: str, key: str) -> KeyVersions:
        """The key's versions as S3 lists them now (exactly this key, not those it prefixes)."""
        ...

    def delete_all(self, bucket: str, key: str) -> int:
        """Every version and delete marker of the key deleted for good; how many there were."""
        ...

    def delete_version(self, bucket: str, key: str, version_id: str) -> None:
        """One version deleted for good (none there: nothing to do)."""
        ...


class DerivedOutputs(Protocol):
    def delete_all(self, tenant: str, file_id: str) -> int:
        """Every derived file of the file deleted; how many there were."""
        ...


class OutputsPurges(Protocol):
    def purge_later(self, purge: OutputsPurge) -> None:
        """Have the file's outputs deleted again once no attempt running now can write any."""
        ...

    def follow_later(self, removed: ObjectRemoved, delay: timedelta) -> None:
        """Have the removal read again after `delay` (its next attempt)."""
        ...


class QuarantinedCopies(Protocol):
    def delete_all(self, tenant: str, file_id: str) -> int:
        """Every version of the file's copy in the quarantine bucket deleted (an erasure: the
        infected bytes are the upload's too); how many there were."""
        ...


class ErasureLog(Protocol):
    def record(self, erasure: Erasure) -> None:
        """Keep the erasure's audit record (it holds no content of what was erased)."""
        ...


class TenantObjects(Protocol):
    """What a tenant left in the buckets that no file record names (domain/tenant_erasure.py):
    each call deletes at most `most` object versions (and delete markers) for good."""

    def delete_uploads(self, tenant: str, *, most: int) -> int:
        """Versions under `uploads/{tenant}/` in the uploads bucket; how many were deleted."""
        ...

    def delete_outputs(self, tenant: str, *, most: int) -> int:
        """Versions under `derived/{tenant}/` in the outputs bucket."""
        ...

    def delete_quarantined(self, tenant: str, *, most: int) -> int:
        """Versions under `quarantine/{tenant}/` in the quarantine bucket."""
        ...


class TenantSettings(Protocol):
    """A tenant's own settings besides its schedules: webhook endpoints with their deliveries,
    presets with their versions, quota overrides and usage counters."""

    def erase(self, tenant: str) -> dict[str, int]:
        """All of them deleted; how many of each kind (domain/tenant_erasure.py REMOVED_KINDS)."""
        ...


class QuotaStore(Protocol):
    """The tenants' own upload limits, and what each uploaded in a day (counted by
    `FileStore.record_ingest`)."""

    def overrides(self, tenant: str) -> QuotaOverrides:
        """The limits an operator set for the tenant (none set: every field None)."""
        ...

    def change(self, tenant: str, change: QuotaChange, *, at: datetime, by: str) -> QuotaOverrides:
        """Set and reset some of the tenant's limits in one write; the limits as stored after."""
        ...

    def usage(self, tenant: str, day: date) -> DayUsage:
        """What the tenant's accepted uploads of that UTC day add up to."""
        ...


class ContentOwners(Protocol):
    def claim(self, tenant: str, sha256: str, file_id: str, *, at: datetime) -> str:
        """The id of the tenant's file that owns this content: `file_id` when it is the first
        (also when it claimed it before), else the first one's."""
        ...


class NearDuplicateIndex(Protocol):
    """Per tenant, images listed by the bands of their perceptual hash
    (domain/similar_images.py; data/similar_index.py)."""

    def listed(self, tenant: str, buckets: Iterable[Bucket]) -> dict[str, str]:
        """Every image listed in the buckets: file id -> its hash."""
        ...

    def add(self, tenant: str, file_id: str, hash_hex: str) -> int:
        """The image listed in its own buckets (again: the same entries); how many of them were
        full and did not take it."""
        ...

    def remove(self, tenant: str, file_id: str) -> bool:
        """The image unlisted everywhere; False when it never was."""
        ...


# --- queues, bus, bucket ---------------------------------------------------------------------


class Dispatcher(Protocol):
    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        """Send the job's message to its worker queue, visible after `delay`."""


class BatchDispatcher(Protocol):
    def dispatch_all(self, jobs: Iterable[ProcessingJob]) -> None:
        """Send new jobs' messages, batched per queue (a file's jobs go to several queues)."""


@dataclass(frozen=True)
class DeadLetter:
    """A job message SQS gave up on, as read from its job type's dead-letter queue."""

    job_type: JobType
    body: str
    receipt_handle: str
    message_id: str


class DeadLetters(Protocol):
    def receive(self, job_type: JobType, limit: int = 10) -> list[DeadLetter]: ...

    def settle(self, letter: DeadLetter) -> None:
        """The letter's job carries its outcome: delete the letter."""


class EventPublisher(Protocol):
    def publish(self, event: OutcomeEvent) -> None: ...


class ObjectStore(Protocol):
    """The uploads bucket as the services read it (the processors read and write through
    processors/source.py and processors/base.OutputWriter)."""

    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        """The first `length` bytes of one version of an object (fewer if it is shorter)."""
        ...

    def byte_ranges(self, bucket: str, key: str, version_id: str | None, size: int) -> ByteRanges:
        """One version of an object (of `size` bytes), to be read by ranges: what the sniffer
        reads beyond the head of a ZIP, an OLE2 file or audio (domain/byte_ranges.py)."""
        ...

    def read_upload_head(
        self, bucket: str, key: str, version_id: str | None, length: int
    ) -> UploadHead:
        """`read_head`'s bytes and, from the same request, the upload's own metadata."""
        ...


@dataclass(frozen=True)
class UploadHead:
    data: bytes
    # The preset the upload names (x-amz-meta-filejobs-preset), None when it names none.
    preset: str | None = None
    # A copy `filejobs backfill` made (x-amz-meta-backfill-source): its jobs take the low lane.
    backfill: bool = False


class OutputLinks(Protocol):
    def link(self, key: str, lifetime: timedelta) -> str:
        """A URL that reads one derived file for `lifetime`, without credentials."""
        ...


@dataclass(frozen=True)
class SignedUpload:
    """A form a browser posts one file with, straight to the bucket: the URL and the fields to
    send before the file (the key, the signed policy, its signature)."""

    url: str
    fields: dict[str, str]


class UploadSigner(Protocol):
    def sign(self, grant: UploadGrant) -> SignedUpload:
        """A presigned POST that allows exactly what `grant` says, signed locally (no request):
        its key, its size range, its content type and metadata, until its expiry."""
        ...


@dataclass(frozen=True)
class Quarantined:
    """Where the infected version went, and what this attempt did (for the job's result)."""

    key: str
    copied: bool  # False: an earlier attempt's copy was found and kept
    deleted_versions: tuple[str, ...]


class VerdictMarks(Protocol):
    """What a verdict does to the object (adapters/quarantine.py S3VerdictStore)."""

    def tag(
        self,
        location: ObjectLocation,
        verdict: str,
        *,
        keep_displaced: Callable[[dict[str, str]], None],
    ) -> bool: ...

    def quarantine(
        self, location: ObjectLocation, *, tenant: str, file_id: str, etag: str, size: int
    ) -> Quarantined: ...

    def withdraw_outputs(self, tenant: str, file_id: str) -> int: ...


class Workspaces(Protocol):
    def for_job(self, job_id: str) -> AbstractContextManager[Path]:
        """An empty directory of the attempt's own, removed with its contents at the end."""
        ...


# --- the virus scan's definitions ------------------------------------------------------------

# The updater's own state, kept beside the published sets (read_state / write_state).
FRESHCLAM_STATE = "freshclam.dat"
BACKOFF_STATE = "backoff.json"


@dataclass(frozen=True)
class ManifestRead:
    """What `current()` found: the manifest and its ETag; or `unchanged` (the ETag asked about
    is still current, nothing downloaded); or neither (nothing published yet)."""

    manifest: DefinitionsManifest | None
    etag: str | None
    unchanged: bool = False


@dataclass(frozen=True)
class LocalDefinitions:
    """One set on local disk, every file checked: give `clamav_dir` to clamd/clamscan as its
    database directory and `yara_dir`'s rules to YARA."""

    manifest: DefinitionsManifest
    clamav_dir: Path
    yara_dir: Path


@dataclass(frozen=True)
class CuratedFile:
    """A database or rule file an operator put under custom/."""

    key: str
    name: str
    engine: Engine
    size: int


# --- bulk operations -----------------------------------------------------------------------------


class OperationStore(Protocol):
    """Bulk operations and their progress (data/operation_repository.py)."""

    def create(
        self,
        operation: Operation,
        *,
        caller: str,
        key: str,
        charge: OperationCharge | None = None,
    ) -> Operation:
        """Records the operation under the caller's key; the key's earlier one when it has one.
        With `charge`, counted against its tenant's day in the same write (QuotaSpentError when
        the day has none left: nothing recorded)."""
        ...

    def running(self, tenant: str, *, now: datetime) -> int:
        """How many of the tenant's recent operations are running."""
        ...

    def get(self, operation_id: str) -> Operation | None: ...

    def recent(
        self, *, tenant: str | None, after: str | None, limit: int
    ) -> tuple[list[Operation], str | None]: ...

    def record_page(self, before: Operation, after: Operation) -> bool:
        """Records `after` if the operation is still as `before` left it; False otherwise."""
        ...


class OperationQueue(Protocol):
    def send(self, operation: Operation, delay: timedelta) -> None:
        """The operation's next page, visible after `delay` (the message names its id only)."""
        ...


# --- the console's aggregates -------------------------------------------------------------------


class StatsReader(Protocol):
    """The aggregates kept from the jobs' stream (data/stats_repository.py)."""

    def overview(self, scope: str, now: datetime) -> Overview: ...

    def failure_groups(
        self, scope: str, job_type: JobType | None = None, limit: int = 100
    ) -> list[FailureGroupSummary]: ...

    def failure_group(self, scope: str, group_id: str) -> FailureGroupSummary | None: ...


# --- webhooks ------------------------------------------------------------------------------------


class WebhookStore(Protocol):
    """Tenants' endpoints and their deliveries (data/webhook_repository.py): every change one
    conditional write."""

    def create_endpoint(self, endpoint: Endpoint) -> None: ...

    def endpoint(self, endpoint_id: str) -> Endpoint | None: ...

    def endpoints(self, tenant: str) -> list[Endpoint]: ...

    def replace_endpoint(self, before: Endpoint, after: Endpoint) -> bool:
        """Writes `after` if the endpoint is still at `before.version`; False otherwise."""
        ...

    def delete_endpoint(self, endpoint: Endpoint) -> bool: ...

    def create_delivery(self, delivery: Delivery) -> bool:
        """Records a new delivery; False when one of that id exists already."""
        ...

    def delivery(self, endpoint_id: str, delivery_id: str) -> Delivery | None: ...

    def deliveries(
        self, endpoint_id: str, *, after: str | None, limit: int
    ) -> tuple[list[Delivery], str | None]:
        """An endpoint's deliveries, newest first; the id to continue after."""
        ...

    def update_delivery(self, before: Delivery, after: Delivery) -> bool:
        """Writes `after` if the delivery is still as `before` left it (status, attempts)."""
        ...


@dataclass(frozen=True)
class DeliveryTask:
    """One delivery to attempt (a message of the webhooks queue)."""

    endpoint_id: str
    delivery_id: str


class WebhookQueue(Protocol):
    def send(self, task: DeliveryTask, delay: timedelta) -> None:
        """Visible after `delay`, at most the queue's longest delay (SQS: 15 minutes)."""
        ...


@dataclass(frozen=True)
class WebhookAnswer:
    """What one POST got: the status (None when no answer came), how long, and what went wrong."""

    status_code: int | None
    latency_ms: int
    error: str | None = None


class WebhookSender(Protocol):
    def post(self, url: str, body: bytes, headers: dict[str, str]) -> WebhookAnswer: ...


class WebhookNotices(Protocol):
    def disabled(self, endpoint: Endpoint, reason: str, at: datetime) -> None:
        """Announce on the stack's bus that `endpoint` was disabled."""
        ...


# --- schedules ---------------------------------------------------------------------------------


class PresetStore(Protocol):
    def current(self, tenant: str, *, consistent: bool = False) -> PresetSet: ...

    def save(
        self, tenant: str, presets: tuple[Preset, ...], saved: Preset | None, *, after: int
    ) -> bool:
        """Every preset of the tenant replaced by `presets` (the set's revision becoming
        `after + 1`), and `saved` recorded as a new version; False (nothing written) when the
        stored revision is no longer `after`."""
        ...

    def version(self, tenant: str, name: str, version: int) -> Preset | None: ...

    def latest_version(self, tenant: str, name: str) -> int: ...


class ScheduleStore(Protocol):
    def create(self, schedule: Schedule) -> bool: ...

    def get(self, schedule_id: str) -> Schedule | None: ...

    def of_tenant(self, tenant: str | None) -> list[Schedule]: ...

    def set_enabled(
        self, schedule_id: str, enabled: bool, *, at: datetime, by: str
    ) -> Schedule | None: ...

    def delete(self, schedule_id: str) -> bool: ...

    def record_run(self, schedule_id: str, scheduled_time: datetime, operation_id: str) -> bool: ...


class Scheduler(Protocol):
    """What runs the schedules' crons (adapters/scheduler.py)."""

    def arm(self, schedule: Schedule) -> None: ...

    def disarm(self, schedule_id: str) -> None: ...
