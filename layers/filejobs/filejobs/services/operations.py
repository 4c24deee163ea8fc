"""Bulk actions by filter or failure group, as tracked operations (domain/operations.py).

`preview` counts what an action would touch and changes nothing (the dry run). `start` records
the operation (the audit record: who, when, why, what filter) and sends it to the operations
queue; `advance`, run by OperationsFunction for each message, changes one page of jobs and
records the page, then sends the operation on, delayed so that it changes at most `rate` jobs a
second: an operation over 40,000 jobs cannot flood the queues the jobs go back to.

Each job is changed through the status API's own use case (one conditional write each, the
caller's visibility checked again), as the operation's creator: a job whose status no longer
allows the action is skipped, so running an operation again, or a page twice, changes nothing
more.

A tenant's own operation counts against its `operations_per_day` (in the write that records it)
and is refused while it has `max_running_operations` running (domain/quotas.py): the API's 429
with Retry-After. An operator's, and a schedule's run, are not counted (a tenant's schedules run
at most as often as their cron allows).

A tenant's erasure (`erase_tenant`, an operator's only) is an operation over the tenant's files
in three stages (domain/tenant_erasure.py), each stage's work done by services/tenant_erasure.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from filejobs.access import Caller
from filejobs.domain.ingest import BACKFILL_PRIORITY
from filejobs.domain.job import ProcessingJob
from filejobs.domain.operations import (
    PAGE_SIZE,
    Action,
    FileSelection,
    JobFilter,
    Operation,
    OperationStatus,
    Progress,
)
from filejobs.domain.quotas import (
    UNLIMITED,
    OperationCharge,
    QuotaSpentError,
    SpentQuota,
    TenantQuotas,
    operation_charge,
    retry_after,
    spent_message,
)
from filejobs.domain.schedules import Schedule, ScheduleAction, run_key
from filejobs.domain.tenant_erasure import (
    REMAINS_BATCH,
    ErasureCursorError,
    ErasureStep,
    Stage,
    removed_total,
)
from filejobs.domain.time import utcnow
from filejobs.ports import InvalidCursorError, OperationQueue, OperationStore, PageCursor
from filejobs.services.api import CancelJob, RequestJob, RescanFile, StatusApi
from filejobs.services.errors import (
    ConflictError,
    ForbiddenError,
    MalformedRequestError,
    NotFoundError,
    QuotaExceededError,
    RequestRefusedError,
)
from filejobs.services.job_search import FilterTooWideError, JobSearch, SearchPage
from filejobs.services.tenant_erasure import TenantErasure

logger = logging.getLogger(__name__)

# The dry run's count reads at most this many listing pages; past them it says "at least".
COUNT_READS = 40
COUNT_PAGE = 100
SAMPLE_SIZE = 10
# SQS delays a message 15 minutes at most.
MAX_DELAY = timedelta(minutes=15)
SCOPE_ALL = "*"


@dataclass(frozen=True)
class StartOperation:
    action: Action
    filter: JobFilter
    reason: str
    dry_run: bool
    idempotency_key: str | None


@dataclass(frozen=True)
class Preview:
    action: Action
    filter: JobFilter
    matched: int
    exact: bool  # False: at least `matched` (the count stopped at its read budget)
    sample: list[ProcessingJob]


@dataclass(frozen=True)
class Started:
    operation: Operation
    replayed: bool


@dataclass(frozen=True)
class EraseTenant:
    tenant: str
    reason: str
    dry_run: bool
    idempotency_key: str | None


@dataclass(frozen=True)
class ErasurePreview:
    """A tenant erasure's dry run: the files it would erase (besides the tenant's settings and
    what no file names, which it does not count)."""

    tenant: str
    files: int
    exact: bool  # False: at least `files` (the count stopped at its read budget)


class BulkOperations:
    def __init__(
        self,
        *,
        store: OperationStore,
        queue: Callable[[], OperationQueue],
        status_api: StatusApi,
        failed_in_group: Callable[[str, str], int | None] | None = None,
        tenant_erasure: Callable[[], TenantErasure] | None = None,
        rate: int = 50,
        clock: Callable[[], datetime] = utcnow,
        limits: Callable[[str], TenantQuotas] | None = None,
    ) -> None:
        self._store, self._queue, self._api = store, queue, status_api
        self._failed_in_group, self._rate, self._clock = failed_in_group, max(rate, 1), clock
        self._limits = limits  # the tenants' quotas in force; None: operations are not counted
        self._tenant_erasure = tenant_erasure  # built on an erasure's first page only
        self._search = JobSearch(status_api.jobs)

    # --- the API's ------------------------------------------------------------------------------

    def preview(self, caller: Caller, action: Action, wanted: JobFilter) -> Preview:
        wanted = _scoped(caller, wanted)
        sample = self._sample(wanted, action)
        counted = self._group_count(wanted, action)
        if counted is not None:
            return Preview(action, wanted, counted, True, sample)
        matched, exact = self._count(wanted, action)
        return Preview(action, wanted, matched, exact, sample)

    def start(self, caller: Caller, command: StartOperation) -> Started:
        wanted = _scoped(caller, command.filter)
        request_hash = _request_hash(command.action, wanted, command.reason)
        preview = self.preview(caller, command.action, wanted)
        operation = self._new(
            command.action,
            wanted,
            command.reason,
            by=caller.name,
            matched=preview.matched,
            request_hash=request_hash,
        )
        charge = None
        if not caller.operator and wanted.tenant is not None and self._limits is not None:
            charge = self._charge_for(wanted.tenant, self._limits(wanted.tenant))
        return self._record_and_send(caller, operation, command.idempotency_key, charge)

    def _charge_for(self, tenant: str, quotas: TenantQuotas) -> OperationCharge:
        """What starting one more of the tenant's operations counts; refused while it has
        its most running (a Query, before the write: two starts racing may pass it by one)."""
        now = self._clock()
        most = quotas.max_running_operations
        if most != UNLIMITED and self._store.running(tenant, now=now) >= most:
            raise _exceeded(SpentQuota.RUNNING_OPERATIONS, tenant, quotas, now)
        return operation_charge(tenant, quotas, now=now)

    def preview_erasure(self, caller: Caller, tenant: str) -> ErasurePreview:
        """A tenant erasure's dry run (an operator's only): how many files it would erase."""
        _operator_only(caller, "erasing a tenant")
        counted = self._count_files(FileSelection(tenant=tenant, prefix=""))
        return ErasurePreview(tenant, counted, exact=counted < COUNT_READS * COUNT_PAGE)

    def erase_tenant(self, caller: Caller, command: EraseTenant) -> Started:
        """Starts the erasure of a whole tenant (an operator's only): recorded with its dry-run
        count, then advanced page by page by the operations function."""
        preview = self.preview_erasure(caller, command.tenant)
        wanted = JobFilter(tenant=command.tenant)
        operation = self._new(
            Action.ERASE,
            wanted,
            command.reason,
            by=caller.name,
            matched=preview.files,
            request_hash=_request_hash(Action.ERASE, wanted, command.reason),
            files=FileSelection(tenant=command.tenant, prefix=""),
        )
        return self._record_and_send(caller, operation, command.idempotency_key)

    def _new(
        self,
        action: Action,
        wanted: JobFilter,
        reason: str,
        *,
        by: str,
        matched: int,
        request_hash: str = "",
        files: FileSelection | None = None,
        schedule_id: str | None = None,
    ) -> Operation:
        """A new operation, its id opening with the time it is made (the audit list's order)."""
        now = self._clock()
        return Operation(
            id=f"op-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}",
            action=action,
            filter=wanted,
            reason=reason,
            created_by=by,
            created_at=now,
            updated_at=now,
            matched=matched,
            request_hash=request_hash,
            files=files,
            schedule_id=schedule_id,
        )

    def _record_and_send(
        self,
        caller: Caller,
        operation: Operation,
        idempotency_key: str | None,
        charge: OperationCharge | None = None,
    ) -> Started:
        """The operation recorded under the caller's key (its own id without one) and its first
        page sent; with a key used before for the same request, the operation it started."""
        key = idempotency_key or operation.id
        try:
            stored = self._store.create(operation, caller=caller.name, key=key, charge=charge)
        except QuotaSpentError as error:
            if charge is None or self._limits is None:
                raise
            quotas = self._limits(charge.tenant)
            raise _exceeded(error.spent, charge.tenant, quotas, self._clock()) from None
        if stored.id != operation.id:
            if stored.request_hash != operation.request_hash:
                raise ConflictError(
                    f"Idempotency-Key {key!r} started operation {stored.id} with another request",
                    log="idempotency key reused with another operation",
                )
            if not stored.finished:
                # Its first message may never have been sent (the request failed after the
                # record). A second chain of pages dies at its first page: a page is recorded by
                # one run only, and only that run sends the next.
                self._queue().send(stored, timedelta(0))
            return Started(stored, replayed=True)
        self._queue().send(stored, timedelta(0))
        return Started(stored, replayed=False)

    def start_run(self, schedule: Schedule, scheduled_time: datetime) -> Started:
        """A schedule's run at `scheduled_time`, as an operation over its files, started once
        however many times the scheduler delivers that run."""
        files = FileSelection(
            tenant=schedule.tenant,
            prefix=schedule.prefix,
            job_type=schedule.job_type if schedule.action is ScheduleAction.RUN else None,
            options=dict(schedule.options) if schedule.action is ScheduleAction.RUN else {},
        )
        action = Action.RUN if schedule.action is ScheduleAction.RUN else Action.RESCAN
        operation = self._new(
            action,
            JobFilter(tenant=schedule.tenant),
            schedule.reason(scheduled_time),
            by=f"schedule:{schedule.id}",
            matched=self._count_files(files),
            files=files,
            schedule_id=schedule.id,
        )
        key = run_key(schedule.id, scheduled_time)
        stored = self._store.create(operation, caller=operation.created_by, key=key)
        replayed = stored.id != operation.id
        if not stored.finished:
            # A replayed run still going is sent again, as `start` does: its first message may
            # never have gone; a second chain of pages dies at its first page.
            self._queue().send(stored, timedelta(0))
        return Started(stored, replayed=replayed)

    def get(self, caller: Caller, operation_id: str) -> Operation:
        found = self._store.get(operation_id)
        if found is None or not _may_see(caller, found):
            raise NotFoundError(f"no operation {operation_id[:80]!r}")
        return found

    def recent(
        self, caller: Caller, *, tenant: str | None, after: str | None, limit: int
    ) -> tuple[list[Operation], str | None]:
        """The audit list, newest first: a tenant's own; an operator's, all or one tenant's."""
        if not caller.operator:
            if tenant not in (None, caller.tenant):
                raise NotFoundError(f"no tenant {tenant!r}")
            tenant = caller.tenant
        return self._store.recent(tenant=tenant, after=after, limit=limit)

    # --- the operations function's --------------------------------------------------------------

    def advance(self, operation_id: str) -> Operation | None:
        """One more page of the operation; None when there is no such operation."""
        operation = self._store.get(operation_id)
        if operation is None or operation.finished:
            return operation
        if operation.action is Action.ERASE:
            return self._advance_erasure(operation)
        if operation.files is not None:
            return self._advance_files(operation, operation.files)
        return self._advance_jobs(operation)

    def _advance_jobs(self, operation: Operation) -> Operation | None:
        """One page of an operation over the jobs its filter matches."""
        try:
            page = self._search.page(
                operation.filter,
                action=operation.action,
                after=_cursor_from(operation.cursor),
                limit=PAGE_SIZE,
            )
        except (InvalidCursorError, FilterTooWideError) as error:
            return self._finish(operation, Progress(), error=f"cannot go on: {error}")
        progress, spent = self._act_on(operation, page.jobs)
        if spent is not None:
            return self._finish(operation, progress, error=_stopped_by(spent))
        if page.next is None:
            return self._finish(operation, progress)
        return self._go_on(operation, progress, _cursor_to(page.next))

    def _advance_files(self, operation: Operation, files: FileSelection) -> Operation | None:
        """One page of an operation over files: each file rescanned, or given its new job."""
        try:
            after = _file_cursor_from(operation.cursor)
        except InvalidCursorError as error:
            return self._finish(operation, Progress(), error=f"cannot go on: {error}")
        page = self._api.files.files_of_tenant(
            files.tenant, prefix=files.prefix, after=after, limit=PAGE_SIZE
        )
        caller = _caller_of(operation)
        progress = Progress()
        for ref in page.files:
            try:
                progress += self._act_on_file(operation, files, caller, ref.id)
            except QuotaExceededError as spent:
                return self._finish(operation, progress, error=_stopped_by(spent))
        if page.next is None:
            return self._finish(operation, progress)
        return self._go_on(operation, progress, json.dumps(list(page.next)))

    def _advance_erasure(self, operation: Operation) -> Operation | None:
        """One page of a tenant's erasure: its settings stopped, a page of its files erased, or
        a batch of what no file names deleted (domain/tenant_erasure.py)."""
        tenant = operation.tenant
        try:
            step = ErasureStep.from_cursor(operation.cursor)
        except ErasureCursorError as error:
            return self._finish(operation, Progress(), error=f"cannot go on: {error}")
        if tenant is None or self._tenant_erasure is None:
            return self._finish(operation, Progress(), error="cannot go on: no erasure here")
        erasure = self._tenant_erasure()
        if step.stage is Stage.SETTINGS:
            removed = erasure.stop_settings(tenant)
            return self._go_on(
                operation, Progress(), ErasureStep(Stage.FILES).to_cursor(), removed=removed
            )
        if step.stage is Stage.FILES:
            return self._erase_files(operation, erasure, tenant, step.after)
        removed = erasure.erase_remains(tenant)
        if sum(removed.values()) >= REMAINS_BATCH:
            after = ErasureStep(Stage.REMAINS, round=step.round + 1).to_cursor()
            return self._go_on(operation, Progress(), after, removed=removed)
        return self._finish(operation, Progress(), removed=removed)

    def _erase_files(
        self,
        operation: Operation,
        erasure: TenantErasure,
        tenant: str,
        after: tuple[str, str] | None,
    ) -> Operation | None:
        page = self._api.files.files_of_tenant(tenant, after=after, limit=PAGE_SIZE)
        caller = _caller_of(operation)
        progress, removed = Progress(), dict[str, int]()
        for ref in page.files:
            try:
                erased = erasure.erase_file(caller, ref.id, operation.id)
            except NotFoundError:
                # Erased already: with another version of its key, or by this page done before.
                progress += Progress(processed=1, skipped=1)
                continue
            except Exception:
                logger.exception("operation %s could not erase file %s", operation.id, ref.id)
                progress += Progress(processed=1, errors=1)
                continue
            progress += Progress(processed=1, changed=1)
            removed = removed_total(
                removed,
                {
                    "upload_versions": erased.versions_deleted,
                    "outputs": erased.outputs_deleted,
                    "jobs": erased.jobs_erased,
                    "quarantined_versions": erased.quarantined_copies_deleted,
                },
            )
        following = ErasureStep(Stage.FILES, after=page.next) if page.next else None
        cursor = (following or ErasureStep(Stage.REMAINS)).to_cursor()
        return self._go_on(operation, progress, cursor, removed=removed)

    def _go_on(
        self,
        operation: Operation,
        progress: Progress,
        cursor: str,
        *,
        removed: Mapping[str, int] | None = None,
    ) -> Operation | None:
        """Records a page (by one write conditioned on the cursor it started from), then sends
        the next, delayed to keep to `rate`; the page's other run, if it recorded first, goes on
        instead."""
        moved = replace(
            operation,
            progress=operation.progress + progress,
            cursor=cursor,
            updated_at=self._clock(),
            removed=removed_total(operation.removed, removed or {}),
        )
        if not self._store.record_page(operation, moved):
            logger.info("operation %s: page recorded by another run", operation.id)
            return self._store.get(operation.id)
        pause = timedelta(seconds=math.ceil(progress.processed / self._rate))
        self._queue().send(moved, min(pause, MAX_DELAY))
        return moved

    def _act_on_file(
        self, operation: Operation, files: FileSelection, caller: Caller, file_id: str
    ) -> Progress:
        """The run's action on one file. Its idempotency key is the operation's, so a page done
        twice makes nothing twice (the second time is a replay: skipped)."""
        try:
            if operation.action is Action.RUN and files.job_type is not None:
                # A job on every file under a prefix is a backfill: in the type's low lane,
                # behind the tenant's new uploads (domain/messages.py lane_of).
                command = RequestJob(
                    file_id,
                    files.job_type,
                    operation.id,
                    priority=BACKFILL_PRIORITY,
                    input_data=dict(files.options) or None,
                )
                replayed = self._api.request_job(caller, command, counted=False).replayed
            else:
                rescan = RescanFile(file_id, operation.id, operation.reason)
                replayed = self._api.rescan_file(caller, rescan, counted=False).replayed
        except QuotaExceededError as refusal:
            _raise_unless_of_one_file(refusal)
            logger.info("operation %s skipped file %s: %s", operation.id, file_id, refusal)
            return Progress(processed=1, skipped=1)
        except RequestRefusedError as refusal:
            # Quarantined, deleted, rejected, or out of API jobs: nothing to do on this file.
            logger.info("operation %s skipped file %s: %s", operation.id, file_id, refusal)
            return Progress(processed=1, skipped=1)
        except Exception:
            logger.exception("operation %s could not act on file %s", operation.id, file_id)
            return Progress(processed=1, errors=1)
        return Progress(processed=1, skipped=1) if replayed else Progress(processed=1, changed=1)

    def _count_files(self, files: FileSelection) -> int:
        """The files a run will visit, counted up to COUNT_READS pages (then "at least")."""
        counted, after = 0, None
        for _ in range(COUNT_READS):
            page = self._api.files.files_of_tenant(
                files.tenant, prefix=files.prefix, after=after, limit=COUNT_PAGE
            )
            counted += len(page.files)
            if page.next is None:
                break
            after = page.next
        return counted

    # --- helpers --------------------------------------------------------------------------------

    def _finish(
        self,
        operation: Operation,
        progress: Progress,
        *,
        error: str | None = None,
        removed: Mapping[str, int] | None = None,
    ) -> Operation | None:
        now = self._clock()
        done = replace(
            operation,
            progress=operation.progress + progress,
            removed=removed_total(operation.removed, removed or {}),
            cursor=None,
            updated_at=now,
            finished_at=now,
            status=OperationStatus.FAILED if error else OperationStatus.SUCCEEDED,
            error=error,
        )
        if not self._store.record_page(operation, done):
            return self._store.get(operation.id)
        logger.info("operation %s %s: %s", operation.id, done.status.value, done.progress)
        return done

    def _act_on(
        self, operation: Operation, jobs: list[ProcessingJob]
    ) -> tuple[Progress, QuotaExceededError | None]:
        """Each job acted on, until the tenant's quota of the day for the action is spent: what
        was done, and the refusal that stopped it."""
        caller = _caller_of(operation)
        progress = Progress()
        for job in jobs:
            try:
                progress += self._act(operation, caller, job)
            except QuotaExceededError as spent:
                return progress, spent
        return progress, None

    def _act(self, operation: Operation, caller: Caller, job: ProcessingJob) -> Progress:
        try:
            if operation.action is Action.RETRY:
                self._api.retry(caller, job.id)
            elif operation.action is Action.CANCEL:
                self._api.cancel(caller, CancelJob(job.id, operation.reason))
            elif operation.action is Action.DELETE:
                self._api.delete(caller, job.id)
            else:
                rescan = RescanFile(job.file_id, operation.id, operation.reason)
                if self._api.rescan_file(caller, rescan).replayed:
                    return Progress(processed=1, skipped=1)
        except QuotaExceededError as refusal:
            _raise_unless_of_one_file(refusal)
            logger.info("operation %s skipped job %s: %s", operation.id, job.id, refusal)
            return Progress(processed=1, skipped=1)
        except RequestRefusedError as refusal:
            # Its status changed since it was listed (another run, a worker, a person).
            logger.info("operation %s skipped job %s: %s", operation.id, job.id, refusal)
            return Progress(processed=1, skipped=1)
        except Exception:
            logger.exception(
                "operation %s could not %s job %s", operation.id, operation.action, job.id
            )
            return Progress(processed=1, errors=1)
        return Progress(processed=1, changed=1)

    def _page(
        self, wanted: JobFilter, action: Action, after: PageCursor | None, limit: int, *, what: str
    ) -> SearchPage:
        try:
            return self._search.page(wanted, action=action, after=after, limit=limit)
        except FilterTooWideError as error:
            raise MalformedRequestError(f"{what}: {error}") from None

    def _group_count(self, wanted: JobFilter, action: Action) -> int | None:
        """The exact count of a whole failure group, from the aggregates (no job read)."""
        only_group = wanted.group is not None and (
            wanted.error,
            wanted.since,
            wanted.until,
        ) == (None, None, None)
        if not only_group or self._failed_in_group is None or wanted.group is None:
            return None
        if not wanted.statuses(action):
            return 0
        return self._failed_in_group(wanted.tenant or SCOPE_ALL, wanted.group)

    def _sample(self, wanted: JobFilter, action: Action) -> list[ProcessingJob]:
        """SAMPLE_SIZE matching jobs, or all there are: a search page may end short (one
        DynamoDB page a shard, its cursor never past what it read), so pages are read on,
        within the count's budget of reads."""
        sample: list[ProcessingJob] = []
        after, reads = None, 0
        while len(sample) < SAMPLE_SIZE and reads < COUNT_READS:
            page = self._page(wanted, action, after, SAMPLE_SIZE - len(sample), what="preview")
            sample, reads = sample + list(page.jobs), reads + max(page.reads, 1)
            if page.next is None:
                break
            after = page.next
        return sample

    def _count(self, wanted: JobFilter, action: Action) -> tuple[int, bool]:
        matched, after, reads = 0, None, 0
        while reads < COUNT_READS:
            page = self._page(wanted, action, after, COUNT_PAGE, what="count")
            matched, reads = matched + len(page.jobs), reads + page.reads
            if page.next is None:
                return matched, True
            after = page.next
        return matched, False


def _raise_unless_of_one_file(refusal: QuotaExceededError) -> None:
    """A file rescanned all it may be today is skipped; the tenant's day spent stops the
    operation (every file after would be refused too, each a write)."""
    if refusal.spent is not SpentQuota.FILE_RESCANS:
        raise refusal


def _stopped_by(spent: QuotaExceededError) -> str:
    return f"stopped: {spent.message}; start it again after {spent.retry_after} s"


def _exceeded(
    spent: SpentQuota, tenant: str, quotas: TenantQuotas, now: datetime
) -> QuotaExceededError:
    return QuotaExceededError(
        spent_message(spent, tenant, quotas), spent=spent, retry_after=retry_after(spent, now)
    )


def _scoped(caller: Caller, wanted: JobFilter) -> JobFilter:
    """A tenant's filter is its own tenant's, whatever it named."""
    if caller.operator:
        return wanted
    if caller.tenant is None or wanted.tenant not in (None, caller.tenant):
        raise NotFoundError(f"no tenant {wanted.tenant!r}")
    return wanted.scoped_to(caller.tenant)


def _operator_only(caller: Caller, what: str) -> None:
    if not caller.operator:
        raise ForbiddenError(f"{what} is an operator's power")


def _may_see(caller: Caller, operation: Operation) -> bool:
    if caller.operator:
        return True
    return operation.tenant is not None and operation.tenant == caller.tenant


def _caller_of(operation: Operation) -> Caller:
    if operation.schedule_id is not None:
        # A schedule acts for its tenant, and its jobs say it made them.
        return Caller(tenant=operation.tenant, operator=False, agent=operation.created_by)
    operator = operation.created_by.startswith("api:operator")
    return Caller(tenant=None if operator else operation.tenant, operator=operator)


def _request_hash(action: Action, wanted: JobFilter, reason: str) -> str:
    request = {"action": action.value, "filter": wanted.to_dict(), "reason": reason}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def _file_cursor_from(stored: str | None) -> tuple[str, str] | None:
    if stored is None:
        return None
    try:
        key, file_id = json.loads(stored)
    except (ValueError, TypeError) as error:
        raise InvalidCursorError("not a file cursor") from error
    return str(key), str(file_id)


def _cursor_to(cursor: PageCursor) -> str:
    return json.dumps([cursor.range_value, cursor.id])


def _cursor_from(stored: str | None) -> PageCursor | None:
    if stored is None:
        return None
    try:
        range_value, item_id = json.loads(stored)
    except (ValueError, TypeError) as error:
        raise InvalidCursorError("not an operation cursor") from error
    return PageCursor(str(range_value), str(item_id))
