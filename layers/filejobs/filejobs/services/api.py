"""The status API's use cases, for one authenticated caller: typed commands in, domain results
out (the API layer parses requests into commands and renders results: filejobs/api/).

A tenant caller sees and changes only its own tenant's files and jobs: another tenant's id
answers "not found", exactly as an id that does not exist, so existence never leaks. Cancel,
retry and delete are each one conditional write (`JobStore.apply`); a job requested again for a
file is one transaction (`FileStore.add_api_job`): a conditional put whose id derives from the
caller's idempotency key, so repeating the request can never make a second job, and a
conditional ADD on the file that stops at API_JOBS_PER_FILE, so requests without a key (each a
new job) cannot make jobs without end. Listings continue with opaque page
tokens (services/page_tokens.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from filejobs.access import Caller
from filejobs.domain import content, delays, scanning, transitions
from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.ingest import new_job
from filejobs.domain.job import EXPLICIT_RETRIES_LIMIT, JobStatus, JobType, ProcessingJob
from filejobs.domain.job_options import OptionError, options_of
from filejobs.domain.operations import JobFilter
from filejobs.domain.outputs import derived_files
from filejobs.domain.quotas import (
    API_JOBS_PER_FILE,
    RescanCharge,
    TenantQuotas,
    names_another_job,
)
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied, Lost, TransitionResult
from filejobs.ports import (
    ApiJobAdded,
    Dispatcher,
    FileStore,
    InvalidCursorError,
    JobStore,
    OutputLinks,
    PageCursor,
)
from filejobs.services.errors import (
    ConflictError,
    InvalidRequestError,
    MalformedRequestError,
    NotFoundError,
)
from filejobs.services.job_search import FilterTooWideError, JobSearch
from filejobs.services.page_tokens import PageTokens
from filejobs.services.rescans import Rescan, Rescans, Skipped
from filejobs.views import Output

logger = logging.getLogger(__name__)

RESCAN_PAGE_LIMIT = 100
# Download URLs of a job's outputs: long enough to fetch them, short enough not to be shared.
OUTPUT_URL_LIFETIME = timedelta(minutes=15)
# S3 keys are at most 1,024 bytes of UTF-8.
MAX_KEY_BYTES = 1024
DEFAULT_CANCEL_REASON = "cancelled through the API"
DEFAULT_RESCAN_REASON = "rescan requested through the API"

# --- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FindFile:
    bucket: str
    key: str


@dataclass(frozen=True)
class FileJobs:
    file_id: str
    status: JobStatus | None = None


@dataclass(frozen=True)
class RequestJob:
    """A job of a type on a file, made once per idempotency key."""

    file_id: str
    job_type: JobType
    idempotency_key: str
    priority: int = 0
    input_data: dict[str, Any] | None = None
    # When to start it: a time (run_at) or a delay from the request (delay), never both;
    # neither: now (domain/delays.py).
    run_at: datetime | None = None
    delay: timedelta | None = None
    max_retries: int | None = None  # the model's default (3) when not given


@dataclass(frozen=True)
class RescanFile:
    file_id: str
    idempotency_key: str
    reason: str = DEFAULT_RESCAN_REASON


@dataclass(frozen=True)
class RescanFiles:
    """One page of a tenant's files under a key prefix, rescanned; `next_token` continues it."""

    idempotency_key: str
    tenant: str | None = None
    prefix: str = ""
    reason: str = DEFAULT_RESCAN_REASON
    dry_run: bool = False
    next_token: str | None = None


@dataclass(frozen=True)
class ListJobs:
    """A search: the filter (a tenant's is its own), a page size, where the last page ended."""

    limit: int
    filter: JobFilter = field(default_factory=JobFilter)
    next_token: str | None = None


@dataclass(frozen=True)
class ListFiles:
    """A tenant's files under a key prefix, in key order."""

    prefix: str
    limit: int
    tenant: str | None = None
    next_token: str | None = None


@dataclass(frozen=True)
class CancelJob:
    job_id: str
    reason: str = DEFAULT_CANCEL_REASON


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobWithOutputs:
    """A job as a single-job answer shows it: with download URLs of its derived files."""

    job: ProcessingJob
    outputs: list[Output]


@dataclass(frozen=True)
class FileWithJobs:
    file: StoredFile
    jobs: list[JobWithOutputs]
    duplicates: list[StoredFile] = field(default_factory=list)  # same content, same tenant


@dataclass(frozen=True)
class FileVersions:
    bucket: str
    key: str
    files: list[StoredFile]  # newest first


@dataclass(frozen=True)
class JobsOfFile:
    file_id: str
    jobs: list[ProcessingJob]  # in creation order


@dataclass(frozen=True)
class Requested:
    job: JobWithOutputs
    replayed: bool  # the job an earlier request with the same key made
    idempotency_key: str


@dataclass(frozen=True)
class RescannedPage:
    tenant: str
    prefix: str
    dry_run: bool
    requested: list[Rescan]
    skipped: list[Skipped]
    next_token: str | None
    idempotency_key: str


@dataclass(frozen=True)
class FileListing:
    tenant: str
    files: list[StoredFile]
    next_token: str | None


@dataclass(frozen=True)
class JobListing:
    jobs: list[ProcessingJob]
    order: str  # "newest_first" (a tenant's jobs) or "queue" (one status, every tenant)
    next_token: str | None


# --- the use cases -----------------------------------------------------------------------------


@dataclass
class StatusApi:
    jobs: JobStore
    files: FileStore
    dispatcher: Callable[[], Dispatcher]  # built only when a job is sent
    retention: timedelta
    tokens: PageTokens = field(default_factory=lambda: PageTokens(None))
    links: OutputLinks | None = None  # without it a job's outputs are listed with no URL
    clock: Callable[[], datetime] = utcnow
    dispatch_policy: DispatchPolicy = field(default_factory=DispatchPolicy)
    # Told of a scan job a caller cancelled: the jobs that wait on its verdict are settled
    # (services/scan_gate.py `scan_ended`), not left to their next look by the sweep.
    scan_ended: Callable[[ProcessingJob], None] | None = None
    # Jobs one file may be given through request_job, over its life (a replay counts none).
    jobs_per_file: int = API_JOBS_PER_FILE
    # Each tenant's quotas in force (services/quotas.TenantLimits.limits): rescans count against
    # them. None: not counted (a StatusApi built without quotas: tests of other things).
    limits: Callable[[str], TenantQuotas] | None = None

    # --- files --------------------------------------------------------------------------------

    def file(self, caller: Caller, file_id: str) -> FileWithJobs:
        stored = self._visible_file(caller, file_id)
        jobs = self._jobs_of(caller, stored)
        duplicates = [f for f in self.files.same_content(stored) if _visible(caller, f)]
        return FileWithJobs(stored, [self._with_outputs(j, stored) for j in jobs], duplicates)

    def file_by_key(self, caller: Caller, query: FindFile) -> FileVersions:
        if len(query.key.encode()) > MAX_KEY_BYTES:
            # There is none; and the query would exceed DynamoDB's 2,048-byte partition key (a
            # ValidationException, a 500).
            raise NotFoundError(f"no file with key {query.key!r}")
        versions = self.files.versions_of(query.bucket, query.key)
        visible = [f for f in versions if _visible(caller, f)]
        if not visible:
            raise NotFoundError(f"no file with key {query.key!r}")
        return FileVersions(query.bucket, query.key, visible)

    def file_jobs(self, caller: Caller, query: FileJobs) -> JobsOfFile:
        stored = self._visible_file(caller, query.file_id)
        return JobsOfFile(stored.id, self._jobs_of(caller, stored, query.status))

    def request_job(
        self, caller: Caller, command: RequestJob, *, counted: bool = True
    ) -> Requested:
        """A new job of a type on a file, once per idempotency key, at most `jobs_per_file`
        per file (a conflict beyond). A schedule's runs are not `counted`: a schedule is bounded
        by its own interval (domain/schedules.py), not by the file's API jobs.

        The same key again answers the job it made (`replayed`), whatever became of it; the same
        key with another request is a conflict. A parsing job on a file not yet scanned clean is
        accepted: it waits behind the scan gate like ingest's own jobs.
        """
        key = command.idempotency_key
        stored = self._visible_file(caller, command.file_id)
        _may_run(command.job_type, stored)
        if command.priority > 0 and not caller.operator:
            # The high lane is the operators' to hand out: a tenant who could take it for every
            # job would queue ahead of every other tenant's.
            raise InvalidRequestError(
                f"priority {command.priority} is an operator's to give: a tenant's jobs run at "
                "priority 0 or below",
                log="tenant asked for a raised priority",
            )
        try:
            # Checked again here, whoever built the command (the API's parser has; a schedule's
            # run may not have): the job type's one definition of its options.
            options_of(command.job_type).check(command.input_data or {})
        except OptionError as error:
            raise InvalidRequestError(str(error), log="job options refused") from None
        now = self.clock()
        try:
            run_at = delays.run_time(now, run_at=command.run_at, delay=command.delay)
        except delays.DelayError as error:
            raise InvalidRequestError(str(error), log="job requested at a time refused") from None
        job = new_job(
            stored,
            command.job_type,
            now=now,
            created_by=caller.name,
            dispatch=self.dispatch_policy,
            idempotency_key=f"api:{stored.id}:{key}",
            priority=command.priority,
            max_retries=command.max_retries,
            input_data=command.input_data,
            run_at=run_at,
        )
        store = self._counted_on_file if counted else self._added_to(stored)
        if store(job, None):
            if job.scheduled_at is None:
                self._send(job, "requested job")
            elif (wait := delays.message_delay(now, job.scheduled_at)) is not None:
                # SQS holds it until the time; a longer delay is the sweep's to start.
                self._send(job, "delayed job", wait)
            return Requested(JobWithOutputs(job, []), replayed=False, idempotency_key=key)
        existing = self.jobs.get(job.id)
        if existing is None or existing.metadata.deleted_at is not None:
            raise ConflictError(
                f"Idempotency-Key {key!r} was used for a job of file {stored.id} that was "
                "deleted; the key stays taken until the job's record expires: send another",
                log="idempotency key of a deleted job",
            )
        # The time is not compared: a delay is from each request's own moment, and a job that
        # ran no longer says when it was due. The replay answers the job as first requested.
        same = (
            existing.job_type,
            existing.priority,
            existing.input_data,
            existing.max_retries,
        ) == (job.job_type, job.priority, job.input_data, job.max_retries)
        if not same:
            raise ConflictError(
                f"Idempotency-Key {key!r} was used for another request on file {stored.id} "
                f"(job {existing.id}: {existing.job_type.value}, priority {existing.priority})",
                log="idempotency key reused with another request",
            )
        return Requested(self._with_outputs(existing), replayed=True, idempotency_key=key)

    def rescan_file(
        self, caller: Caller, command: RescanFile, *, counted: bool = True
    ) -> Requested:
        """A new virus scan of the file with the current definitions, once per idempotency key.
        A quarantined or deleted file has nothing to rescan. Not `counted` (a schedule's run),
        it is not one of the file's API jobs."""
        stored = self._visible_file(caller, command.file_id)
        rescans = self._rescans()
        refusal = rescans.why_not(stored)
        if refusal is not None:
            raise ConflictError(f"file {stored.id} cannot be rescanned: {refusal}")
        key = command.idempotency_key
        done = rescans.rescan(
            stored,
            key=f"api:{key}",
            by=caller.name,
            reason=command.reason,
            store=self._counted_on_file if counted else self._added_to(stored),
        )
        job = JobWithOutputs(done.job, []) if done.created else self._with_outputs(done.job)
        return Requested(job, replayed=not done.created, idempotency_key=key)

    def _added_to(self, stored: StoredFile) -> Callable[[ProcessingJob, RescanCharge | None], bool]:
        """How a job not counted among the file's API jobs is stored: named on the file while
        it names fewer than it may (domain/quotas.NAMED_JOBS_PER_FILE)."""

        def add(job: ProcessingJob, charge: RescanCharge | None = None) -> bool:
            return self.files.add_job(job, charge=charge, named=names_another_job(stored))

        return add

    def _counted_on_file(self, job: ProcessingJob, charge: RescanCharge | None = None) -> bool:
        """Stores a job asked for one file, counted among its API jobs: True when stored now,
        False when it exists (a replay). Without an Idempotency-Key every request (a job or a
        rescan) is a new job: this cap is what bounds them. A rescan's `charge` is counted
        against the day's rescans in the same write."""
        added = self.files.add_api_job(job, per_file=self.jobs_per_file, charge=charge)
        if added is ApiJobAdded.FILE_SPENT:
            raise ConflictError(
                f"file {job.file_id} has had the {self.jobs_per_file} jobs a file may be given "
                "through the API: no more can be requested for it",
                log="API jobs of the file spent",
            )
        return added is ApiJobAdded.CREATED

    def rescan_files(self, caller: Caller, command: RescanFiles) -> RescannedPage:
        """One page of a tenant's files under a key prefix, each rescanned; the answer's
        next_token continues the same operation (the same key: a page run twice makes no second
        job)."""
        tenant = command.tenant
        if not caller.operator:
            if tenant is not None and tenant != caller.tenant:
                raise NotFoundError(f"no tenant {tenant!r}")
            tenant = caller.tenant
        if tenant is None:
            raise InvalidRequestError("an operator rescans the files of one tenant (tenant)")
        key = command.idempotency_key
        scope = {"operation": "rescan", "tenant": tenant, "prefix": command.prefix, "key": key}
        after = None
        if command.next_token is not None:
            cursor = self.tokens.decode(command.next_token, scope)
            after = (cursor.range_value, cursor.id)
        page = self._rescans().rescan_prefix(
            tenant,
            prefix=command.prefix,
            key=f"bulk:{key}",
            by=caller.name,
            reason=command.reason,
            after=after,
            limit=RESCAN_PAGE_LIMIT,
            dry_run=command.dry_run,
        )
        next_token = None
        if page.next is not None:
            next_token = self.tokens.encode(PageCursor(page.next[0], page.next[1]), scope)
        return RescannedPage(
            tenant=tenant,
            prefix=command.prefix,
            dry_run=command.dry_run,
            requested=page.requested,
            skipped=page.skipped,
            next_token=next_token,
            idempotency_key=key,
        )

    # --- jobs ---------------------------------------------------------------------------------

    def job(self, caller: Caller, job_id: str) -> JobWithOutputs:
        return self._with_outputs(self._visible_job(caller, job_id))

    def list_jobs(self, caller: Caller, query: ListJobs) -> JobListing:
        """A page of the jobs a filter matches (services/job_search.py): a tenant's newest
        first, or every tenant's in queue order, one status after another."""
        wanted = query.filter
        if not caller.operator:
            if wanted.tenant not in (None, caller.tenant) or caller.tenant is None:
                raise NotFoundError(f"no tenant {wanted.tenant!r}")
            wanted = wanted.scoped_to(caller.tenant)
        named = wanted.to_dict()
        scope = {
            "caller": "operator" if caller.operator else f"tenant:{caller.tenant}",
            **{field: named.pop(field, None) for field in ("tenant", "status", "job_type")},
            **named,
        }
        token = query.next_token
        after = None if token is None else self.tokens.decode(token, scope)
        try:
            page = JobSearch(self.jobs).page(wanted, after=after, limit=query.limit)
        except FilterTooWideError:
            raise MalformedRequestError(
                "an operator lists the jobs of one tenant (tenant=), in one status (status=) or "
                "of one failure group (group=)"
            ) from None
        except InvalidCursorError:
            raise MalformedRequestError("next_token is not valid") from None
        # The partitions read were the caller's own; checked again all the same.
        jobs = [j for j in page.jobs if caller.may_see(j.tenant)]
        next_token = None if page.next is None else self.tokens.encode(page.next, scope)
        order = "newest_first" if wanted.tenant is not None else "queue"
        return JobListing(jobs, order, next_token)

    def list_files(self, caller: Caller, query: ListFiles) -> FileListing:
        """A page of a tenant's files whose key starts with the prefix, in key order."""
        tenant = query.tenant
        if not caller.operator:
            if tenant not in (None, caller.tenant):
                raise NotFoundError(f"no tenant {tenant!r}")
            tenant = caller.tenant
        if tenant is None:
            raise MalformedRequestError("an operator lists the files of one tenant (tenant=)")
        scope = {"listing": "files", "tenant": tenant, "prefix": query.prefix}
        after = None
        if query.next_token is not None:
            cursor = self.tokens.decode(query.next_token, scope)
            after = (cursor.range_value, cursor.id)
        page = self.files.files_of_tenant(
            tenant, prefix=query.prefix, after=after, limit=query.limit
        )
        found = [self.files.get(ref.id, consistent=False) for ref in page.files]
        visible = [f for f in found if f is not None and _visible(caller, f)]
        next_token = None
        if page.next is not None:
            next_token = self.tokens.encode(PageCursor(page.next[0], page.next[1]), scope)
        return FileListing(tenant, visible, next_token)

    def cancel(self, caller: Caller, command: CancelJob) -> ProcessingJob:
        job = self._visible_job(caller, command.job_id)
        transition = transitions.cancel(
            now=self.clock(), by=caller.name, reason=command.reason, retention=self.retention
        )
        cancelled = self._apply(job, transition)
        if cancelled.job_type is JobType.VIRUS_SCAN and self.scan_ended is not None:
            try:
                self.scan_ended(cancelled)
            except Exception:
                # The cancel stands; the sweep settles the waiting jobs at their next look.
                logger.exception("the jobs waiting on scan %s were not settled", cancelled.id)
        return cancelled

    def retry(self, caller: Caller, job_id: str) -> ProcessingJob:
        job = self._visible_job(caller, job_id)
        allowed = job.attempts_allowed()
        transition = transitions.retry(
            now=self.clock(),
            by=caller.name,
            dispatch_grace=self.dispatch_policy.grace,
            attempts_below=allowed,
        )
        result = self.jobs.apply(job.id, job.job_type, transition)
        if isinstance(result, Lost) and result.conflict is transitions.Conflict.ATTEMPTS_SPENT:
            raise ConflictError(
                f"job {job.id} has run all {allowed} attempts a job may ({job.max_retries + 1} "
                f"per retry budget, {EXPLICIT_RETRIES_LIMIT + 1} budgets): request a new job of "
                "its type instead",
                log="explicit retry past the job's attempts",
            )
        retried = self._applied(job, transition, result)
        self._send(retried, "retried job")
        return retried

    def delete(self, caller: Caller, job_id: str) -> None:
        """Soft-delete a finished job: one conditional write; a job still active is a conflict."""
        job = self._visible_job(caller, job_id)
        self._apply(job, transitions.delete(now=self.clock(), by=caller.name))

    # --- helpers ------------------------------------------------------------------------------

    def _send(self, job: ProcessingJob, what: str, delay: timedelta = timedelta(0)) -> None:
        try:
            self.dispatcher().dispatch(job, delay)
        except Exception:
            # The job is pending with sweep_at = now + grace: the sweep sends it if this did not.
            logger.exception("%s not dispatched; the sweep will send it", what)

    def _rescans(self) -> Rescans:
        return Rescans(
            self.jobs,
            self.files,
            _LazyDispatcher(self.dispatcher),
            clock=self.clock,
            dispatch=self.dispatch_policy,
            limits=self.limits,
        )

    def _with_outputs(self, job: ProcessingJob, stored: StoredFile | None = None) -> JobWithOutputs:
        return JobWithOutputs(job, self._outputs(job, stored))

    def _outputs(self, job: ProcessingJob, stored: StoredFile | None) -> list[Output]:
        found = derived_files(job)
        if not found or self.links is None:
            return []
        stored = stored or self.files.get(job.file_id, consistent=False)
        if stored is None or stored.status is not FileStatus.ACTIVE:
            return []  # a quarantined file's outputs were withdrawn: no URL to a deleted object
        if stored.scan_status is ScanStatus.INFECTED:
            return []  # recorded infected, about to be quarantined: nothing made from it served
        expires_at = self.clock() + OUTPUT_URL_LIFETIME
        return [
            Output(file, self.links.link(file.key, OUTPUT_URL_LIFETIME), expires_at)
            for file in found
        ]

    def _visible_file(self, caller: Caller, file_id: str) -> StoredFile:
        stored = self.files.get(file_id, consistent=False)
        if stored is None or not _visible(caller, stored):
            raise NotFoundError(f"no file {file_id}", log="file not found")
        return stored

    def _jobs_of(
        self, caller: Caller, stored: StoredFile, status: JobStatus | None = None
    ) -> list[ProcessingJob]:
        jobs = self.jobs.jobs_of(stored, status, consistent=False)
        return [j for j in jobs if caller.may_see(j.tenant)]

    def _visible_job(self, caller: Caller, job_id: str) -> ProcessingJob:
        job = self.jobs.get(job_id, consistent=False)
        if job is None or job.metadata.deleted_at is not None or not caller.may_see(job.tenant):
            raise NotFoundError(f"no job {job_id}", log="job not found")
        return job

    def _apply(self, job: ProcessingJob, transition: transitions.Transition) -> ProcessingJob:
        return self._applied(job, transition, self.jobs.apply(job.id, job.job_type, transition))

    @staticmethod
    def _applied(
        job: ProcessingJob, transition: transitions.Transition, result: TransitionResult
    ) -> ProcessingJob:
        """The job `result` applied, or the refusal it is in the caller's terms."""
        if isinstance(result, Applied):
            return result.job
        if result.conflict in (transitions.Conflict.NOT_FOUND, transitions.Conflict.DELETED):
            raise NotFoundError(f"no job {job.id}")
        status = job.status.value if result.current is None else result.current.status.value
        raise ConflictError(
            f"job {job.id} cannot {transition.name}: it is {status} ({result.conflict.value})"
        )


class _LazyDispatcher:
    """The dispatcher, built on the first send only (a dry run or a replay sends nothing)."""

    def __init__(self, build: Callable[[], Dispatcher]) -> None:
        self._build = build

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self._build().dispatch(job, delay)


def _visible(caller: Caller, stored: StoredFile) -> bool:
    return stored.metadata.deleted_at is None and caller.may_see(stored.tenant)


def _may_run(job_type: JobType, stored: StoredFile) -> None:
    """Refuse a job the file cannot have: a quarantined or deleted file, a decoding job for
    content it does not decode (a thumbnail of a PDF), or a parsing job the scan gate would
    cancel. One still waiting for its scan is accepted (the gate holds it)."""
    if stored.status is not FileStatus.ACTIVE:
        raise ConflictError(
            f"file {stored.id} is {stored.status.value}: no job can be requested for it",
            log="job requested on an inactive file",
        )
    if not content.fits(job_type, stored.content_type):
        raise InvalidRequestError(
            f"a {job_type.value} job does not fit file {stored.id}: its content is "
            f"{stored.content_type}",
            log="job requested for content it does not decode",
        )
    if scanning.gate(job_type, stored) is scanning.Gate.REFUSE:
        raise ConflictError(
            f"file {stored.id} cannot be parsed: {scanning.refusal_reason(stored)}",
            log="parsing job requested on a refused file",
        )
