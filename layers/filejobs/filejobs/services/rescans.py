"""Rescans: a stored file's virus scan run again, with today's definitions.

A rescan is a new `virus_scan` job on the file (input_data `rescan`: who asked and why), made
once per idempotency key by one conditional put, like any requested job. What its verdict does is
the scan's usual part (services/virus_scan.py): a clean file stays clean with a newer record; an
infection found now quarantines the file, withdraws what was derived from it and publishes
`File Quarantined`.

Three ways in: one file (`POST /files/{id}/rescan`, `filejobs rescan FILE_ID`); a tenant's files
under a key prefix, a page at a time (`POST /rescans`, `filejobs rescan --tenant T --prefix P`);
and the scheduled policy (functions/rescan): clean verdicts older than N days, or given with
definitions older than a version, a bounded number per run so the scans of new uploads are not
held up behind a backlog of old files.

Every rescan a tenant asks for (one file's, each of a bulk rescan's, each of its schedules' and
operations') is counted against its tenant's `rescans_per_day` and its file's
`rescans_per_file_per_day` (domain/quotas.py) in the transaction that stores its job: a rescan
over either is not made (QuotaExceededError: the API's 429, Retry-After the end of the UTC day).
The scheduled policy's are the operator's, bounded by their own `max_files` a run, and not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.ingest import new_job
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.quotas import (
    QuotaSpentError,
    RescanCharge,
    SpentQuota,
    TenantQuotas,
    names_another_job,
    rescan_charge,
    retry_after,
    spent_message,
)
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import utcnow
from filejobs.ports import Dispatcher, FilePage, FileStore, JobStore, ScannedFile
from filejobs.services.errors import QuotaExceededError

logger = logging.getLogger(__name__)

# Below new uploads' scans (priority 0): a backlog of rescans is served after them by the sweep.
RESCAN_PRIORITY = -10
POLICY = "rescan-policy"

# How a rescan's job is stored: put with its id added to the file, the charge counted with it;
# True when stored now, False when it exists (nothing counted).
type StoreJob = Callable[[ProcessingJob, RescanCharge | None], bool]


@dataclass(frozen=True)
class Rescan:
    job: ProcessingJob
    created: bool  # False: the same key made this job earlier


@dataclass(frozen=True)
class Skipped:
    file_id: str
    reason: str


@dataclass
class RescanPage:
    requested: list[Rescan] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # Where the next page starts, or None after the last.
    next: tuple[str, str] | None = None


@dataclass(frozen=True)
class PolicyReport:
    requested: int
    already_requested: int
    examined: int


class Rescans:
    def __init__(
        self,
        jobs: JobStore,
        files: FileStore,
        dispatcher: Dispatcher,
        *,
        clock: Callable[[], datetime] = utcnow,
        dispatch: DispatchPolicy = DispatchPolicy(),  # noqa: B008 (frozen dataclass)
        limits: Callable[[str], TenantQuotas] | None = None,
    ) -> None:
        self._jobs, self._files, self._dispatcher = jobs, files, dispatcher
        self._clock, self._dispatch = clock, dispatch
        # The tenant's quotas in force; None: rescans are not counted (the policy's function).
        self._limits = limits
        self._known: dict[str, TenantQuotas] = {}  # read once per tenant: a page is one tenant's

    def why_not(self, stored: StoredFile) -> str | None:
        """Why the file cannot be rescanned, or None when it can."""
        if stored.metadata.deleted_at is not None or stored.status is FileStatus.DELETED:
            return "the file is deleted"
        if stored.status is FileStatus.QUARANTINED:
            return "the file is quarantined: there is nothing left to scan"
        if stored.status is FileStatus.REJECTED:
            return f"the upload was rejected ({stored.status_reason}): it is never processed"
        return None

    def rescan(
        self,
        stored: StoredFile,
        *,
        key: str,
        by: str,
        reason: str,
        store: StoreJob | None = None,
        counted: bool = True,
    ) -> Rescan:
        """The file's rescan job for this key: made and sent once, found again after.

        `store` puts the job (True: stored now; False: it exists); by default the file store's
        `add_job`, which names it among the file's jobs in the same write. The status API's
        counts it against the file's API jobs. Unless not `counted` (the operator's policy), the
        same write counts it against the tenant's and the file's rescans of the day."""
        now = self._clock()
        job = new_job(
            stored,
            JobType.VIRUS_SCAN,
            now=now,
            created_by=by,
            dispatch=self._dispatch,
            idempotency_key=f"rescan:{stored.id}:{key}",
            priority=RESCAN_PRIORITY,
            input_data={"rescan": {"reason": reason, "requested_by": by}},
        )
        quotas = self._quotas_of(stored.tenant) if counted else None
        charge = (
            None if quotas is None else rescan_charge(stored.tenant, stored.id, quotas, now=now)
        )
        add = store or (
            lambda job, charge: self._files.add_job(
                job, charge=charge, named=names_another_job(stored)
            )
        )
        try:
            stored_now = add(job, charge)
        except QuotaSpentError as error:
            if quotas is None:  # only a charge is refused: a store that says so is wrong
                raise
            raise _exceeded(error.spent, stored, quotas, now) from None
        if not stored_now:
            existing = self._jobs.get(job.id)
            return Rescan(existing or job, created=False)
        try:
            self._dispatcher.dispatch(job)
        except Exception:
            # Pending with sweep_at = now + grace: the sweep sends it if this did not.
            logger.exception("rescan job %s not dispatched; the sweep will send it", job.id)
        return Rescan(job, created=True)

    def rescan_prefix(
        self,
        tenant: str,
        *,
        prefix: str,
        key: str,
        by: str,
        reason: str,
        after: tuple[str, str] | None = None,
        limit: int = 100,
        dry_run: bool = False,
    ) -> RescanPage:
        """One page of a tenant's files under `prefix`, each rescanned (or, with `dry_run`,
        only counted). The same `key` again makes no second job for a file."""
        page: FilePage = self._files.files_of_tenant(
            tenant, prefix=prefix, after=after, limit=limit
        )
        result = RescanPage(next=page.next)
        for ref in page.files:
            stored = self._files.get(ref.id, consistent=False)
            refusal = "the file is not recorded" if stored is None else self.why_not(stored)
            if stored is None or refusal is not None:
                result.skipped.append(Skipped(ref.id, refusal or ""))
            elif dry_run:
                result.requested.append(Rescan(_planned(stored), created=False))
            else:
                self._rescan_in_page(result, stored, key=key, by=by, reason=reason)
        return result

    def _rescan_in_page(
        self, page: RescanPage, stored: StoredFile, *, key: str, by: str, reason: str
    ) -> None:
        """One file of a bulk rescan: a file rescanned all it may be today is skipped; the
        tenant's rescans of the day spent stops the page (QuotaExceededError): the same key
        and page again, after the Retry-After, makes only what this one did not."""
        try:
            page.requested.append(self.rescan(stored, key=key, by=by, reason=reason))
        except QuotaExceededError as refusal:
            if refusal.spent is not SpentQuota.FILE_RESCANS:
                raise
            page.skipped.append(Skipped(stored.id, refusal.message))

    def _quotas_of(self, tenant: str) -> TenantQuotas | None:
        if self._limits is None:
            return None
        if tenant not in self._known:
            self._known[tenant] = self._limits(tenant)
        return self._known[tenant]

    def run_policy(
        self,
        *,
        older_than: timedelta | None,
        definitions_before: str | None,
        max_files: int,
    ) -> PolicyReport:
        """The scheduled policy: clean verdicts older than `older_than`, or given with
        definitions older than `definitions_before`, at most `max_files` rescans a run."""
        requested = already = examined = 0
        for due in self._due(older_than, definitions_before, max_files):
            examined += 1
            stored = self._files.get(due.id, consistent=False)
            if stored is None or self.why_not(stored) is not None:
                continue
            # One rescan per verdict: until it replaces this verdict, every run finds the same
            # job again instead of making another.
            key = f"{POLICY}:{due.scanned_at.isoformat()}"
            outcome = self.rescan(
                stored, key=key, by=POLICY, reason=_policy_reason(due), counted=False
            )
            requested += outcome.created
            already += not outcome.created
            if requested >= max_files:
                break
        return PolicyReport(requested, already, examined)

    def _due(
        self, older_than: timedelta | None, definitions_before: str | None, max_files: int
    ) -> Iterator[ScannedFile]:
        now = self._clock()
        seen: set[str] = set()
        queries: list[tuple[datetime, str | None]] = []
        if older_than is not None:
            queries.append((now - older_than, None))
        if definitions_before:
            # Any verdict may have been given with an old set (a set stays current as long as
            # the mirror has nothing newer): the whole index is read, filtered by version.
            # Clear RescanDefinitionsBefore once its rescans are done.
            queries.append((now, definitions_before))
        for cutoff, version in queries:
            for due in self._files.scanned_before(
                cutoff, definitions_before=version, per_shard=max_files
            ):
                if due.id not in seen:
                    seen.add(due.id)
                    yield due


def _exceeded(
    spent: SpentQuota, stored: StoredFile, quotas: TenantQuotas, now: datetime
) -> QuotaExceededError:
    return QuotaExceededError(
        spent_message(spent, stored.tenant, quotas, stored.id),
        spent=spent,
        retry_after=retry_after(spent, now),
    )


def _policy_reason(due: ScannedFile) -> str:
    version = due.definitions_version or "the shipped rules"
    return f"rescan policy: verdict of {due.scanned_at.isoformat()} with {version}"


def _planned(stored: StoredFile) -> ProcessingJob:
    """What a dry run reports for a file: the job a rescan would make (never written)."""
    return new_job(
        stored,
        JobType.VIRUS_SCAN,
        now=utcnow(),
        created_by="dry-run",
        dispatch=DispatchPolicy(),
        idempotency_key=f"rescan:{stored.id}:dry-run",
        priority=RESCAN_PRIORITY,
    )
