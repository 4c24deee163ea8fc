"""Per-tenant quotas, the pure part: what a tenant may upload in a UTC day, how large one file may
be, and why an upload over them is rejected; and how much work a tenant may start on the files it
has already (rescans, bulk operations), which its uploads do not bound: each rescan is a scan of
up to the largest file again.

The defaults come from the template's parameters (`TenantMaxFilesPerDay`,
`TenantMaxBytesPerDay`, `TenantMaxFileBytes`, `TenantMaxRunningJobs`); an operator may
override any of them for one tenant (`PUT /tenants/{tenant}/quotas`). 0 means unlimited.
`max_in_flight_jobs` is the workers' to enforce: the tenant's running cap per job type
(domain/fairness.py), read through services/quotas.InFlightCaps.

Rescans and operations have defaults of their own (below), the same for every deployment, set
per tenant like the others. A rescan (one file's, or each file of a bulk rescan) counts against
the tenant's `rescans_per_day` and the file's `rescans_per_file_per_day`; starting a bulk
operation against `operations_per_day`, and is refused while the tenant has
`max_running_operations` running. A request over one is answered 429 with Retry-After: the
seconds until the UTC day ends (`retry_after`), or, for running operations, a minute.

Counting is the repository's: an accepted upload adds 1 file and its bytes to the tenant's day in
the same transaction that records the file, on the condition that the totals stay within the
limits the `UsageCharge` carries, so no read-then-write race and no second count of a redelivery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum

from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.ingest import IngestPlan

UNLIMITED = 0
# Jobs a file may be given through `POST /files/{id}/jobs`, over its life: without a cap, a
# request without an Idempotency-Key makes a new job each time, as often as it is sent.
API_JOBS_PER_FILE = 20
# The largest value a quota may take: 2**53 - 1, what every JSON client reads exactly.
MAX_QUOTA_VALUE = 2**53 - 1
# Rescans a tenant may ask for in a UTC day, by default: a whole day's uploads (the default
# files_per_day) scanned once more, so a tenant rescanning everything it sent today is not held.
DEFAULT_RESCANS_PER_DAY = 10_000
# Rescans of one file in a UTC day: a retry or two after new definitions, not a loop.
DEFAULT_RESCANS_PER_FILE_PER_DAY = 3
# Bulk operations (POST /operations) a tenant may start in a UTC day, and have running at once:
# a person's actions, each over up to every job of the tenant.
DEFAULT_OPERATIONS_PER_DAY = 50
DEFAULT_MAX_RUNNING_OPERATIONS = 3
# What a refusal for running operations asks the caller to wait: pages run at most a minute apart.
RUNNING_OPERATIONS_RETRY_SECONDS = 60


@dataclass(frozen=True)
class TenantQuotas:
    """The limits one tenant's uploads are held to (0: unlimited)."""

    files_per_day: int
    bytes_per_day: int
    max_file_bytes: int
    max_in_flight_jobs: int
    rescans_per_day: int = DEFAULT_RESCANS_PER_DAY
    rescans_per_file_per_day: int = DEFAULT_RESCANS_PER_FILE_PER_DAY
    operations_per_day: int = DEFAULT_OPERATIONS_PER_DAY
    max_running_operations: int = DEFAULT_MAX_RUNNING_OPERATIONS

    def overridden(self, overrides: QuotaOverrides) -> TenantQuotas:
        """These limits, with the tenant's overrides in place of the defaults they name."""
        changes = {
            name: value for name in QUOTA_FIELDS if (value := getattr(overrides, name)) is not None
        }
        return replace(self, **changes)


QUOTA_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TenantQuotas))


@dataclass(frozen=True)
class QuotaOverrides:
    """A tenant's own limits, as an operator set them: None where the default applies."""

    files_per_day: int | None = None
    bytes_per_day: int | None = None
    max_file_bytes: int | None = None
    max_in_flight_jobs: int | None = None
    rescans_per_day: int | None = None
    rescans_per_file_per_day: int | None = None
    operations_per_day: int | None = None
    max_running_operations: int | None = None
    updated_at: datetime | None = None
    updated_by: str | None = None

    def as_dict(self) -> dict[str, int]:
        """The limits this tenant has of its own (the ones set), by name."""
        return {name: value for name in QUOTA_FIELDS if (value := getattr(self, name)) is not None}


@dataclass(frozen=True)
class QuotaChange:
    """What an operator changes: `set` limits take the given value, `reset` ones go back to the
    default. A limit named in neither is left as it is."""

    set: dict[str, int]
    reset: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = (set(self.set) | self.reset) - set(QUOTA_FIELDS)
        if unknown:
            raise ValueError(f"unknown quota fields: {', '.join(sorted(unknown))}")
        if set(self.set) & self.reset:
            raise ValueError("a quota cannot be set and reset at once")
        if not self.set and not self.reset:
            raise ValueError("a quota change must set or reset at least one quota")
        for name, value in self.set.items():
            if not 0 <= value <= MAX_QUOTA_VALUE:
                raise ValueError(f"{name} must be from 0 to {MAX_QUOTA_VALUE}")


@dataclass(frozen=True)
class DayUsage:
    """What a tenant uploaded (and was accepted) in one UTC day, and the rescans and bulk
    operations it started."""

    tenant: str
    day: date
    files: int = 0
    bytes: int = 0
    rescans: int = 0
    operations: int = 0


@dataclass(frozen=True)
class UsageCharge:
    """What one accepted upload adds to its tenant's day, and the totals the day may not pass
    (None: unlimited). The store adds it only if the new totals stay within them."""

    tenant: str
    day: date
    files: int
    bytes: int
    max_files: int | None
    max_bytes: int | None

    def fits(self, usage: DayUsage) -> bool:
        """Whether the day, with this upload added, stays within the limits."""
        files_fit = self.max_files is None or usage.files + self.files <= self.max_files
        bytes_fit = self.max_bytes is None or usage.bytes + self.bytes <= self.max_bytes
        return files_fit and bytes_fit


def usage_day(moment: datetime) -> date:
    """The UTC day an upload counts against."""
    return moment.astimezone(UTC).date()


def _limit(value: int) -> int | None:
    return None if value == UNLIMITED else value


def charge_for(stored: StoredFile, quotas: TenantQuotas, *, now: datetime) -> UsageCharge:
    """What recording `stored` adds to its tenant's day."""
    return UsageCharge(
        tenant=stored.tenant,
        day=usage_day(now),
        files=1,
        bytes=stored.size,
        max_files=_limit(quotas.files_per_day),
        max_bytes=_limit(quotas.bytes_per_day),
    )


def too_large(stored: StoredFile, quotas: TenantQuotas) -> str | None:
    """Why the file is over its tenant's largest file size, or None when it is not."""
    limit = _limit(quotas.max_file_bytes)
    if limit is None or stored.size <= limit:
        return None
    return (
        f"file {stored.key} is {stored.size} bytes, over tenant {stored.tenant}'s "
        f"{limit} bytes max file size quota"
    )


def over_quota(charge: UsageCharge, usage: DayUsage) -> str:
    """Why `charge` did not fit the day as it stood (`usage`): the first limit it passes."""
    if charge.max_files is not None and usage.files + charge.files > charge.max_files:
        return (
            f"tenant {charge.tenant} is over its {charge.max_files} files per day quota "
            f"({usage.files} used on {charge.day.isoformat()})"
        )
    if charge.max_bytes is not None and usage.bytes + charge.bytes > charge.max_bytes:
        return (
            f"tenant {charge.tenant} is over its {charge.max_bytes} bytes per day quota "
            f"({usage.bytes} used on {charge.day.isoformat()}; this file is {charge.bytes})"
        )
    # The day moved on between the refusal and this reading: the refusal still stands.
    return (
        f"tenant {charge.tenant} was over its daily quota ({charge.max_files} files, "
        f"{charge.max_bytes} bytes) when the upload was counted"
    )


def rejected(plan: IngestPlan, reason: str) -> IngestPlan:
    """The upload recorded as rejected, with the reason, and given no jobs."""
    file = replace(plan.file, status=FileStatus.REJECTED, status_reason=reason)
    return IngestPlan(file, ())


# --- the file item's bound ----------------------------------------------------------------------

# The jobs a file's item names in its `job_ids`, at most (a few more when adds race): the ingest's
# (one per type) and the API's (API_JOBS_PER_FILE) fit with room. A job added to a file that
# names this many already (rescans, schedule runs, restores, over months) is not named: it is
# found through the jobs table's by_tenant index (from the file's creation on), and the item
# stays a few KB instead of growing with every rescan toward DynamoDB's 400 KB.
NAMED_JOBS_PER_FILE = 32


def names_another_job(stored: StoredFile) -> bool:
    """Whether a job added to the file now is named in its item's `job_ids`."""
    return len(stored.job_ids) < NAMED_JOBS_PER_FILE


# --- rescans and bulk operations -----------------------------------------------------------------


class SpentQuota(StrEnum):
    """Which limit refused a rescan or an operation."""

    RESCANS = "rescans_per_day"
    FILE_RESCANS = "rescans_per_file_per_day"
    OPERATIONS = "operations_per_day"
    RUNNING_OPERATIONS = "max_running_operations"


@dataclass(frozen=True)
class RescanCharge:
    """What one rescan adds: 1 to its tenant's day, 1 to its file's day; each only while it
    stays within its limit (None: unlimited)."""

    tenant: str
    file_id: str
    day: date
    max_per_day: int | None
    max_per_file: int | None


@dataclass(frozen=True)
class OperationCharge:
    """What starting one bulk operation adds to its tenant's day, within `max_per_day`."""

    tenant: str
    day: date
    max_per_day: int | None


class QuotaSpentError(Exception):
    """A store refused a count: the limit it would have passed."""

    def __init__(self, spent: SpentQuota) -> None:
        super().__init__(spent.value)
        self.spent = spent


def rescan_charge(
    tenant: str, file_id: str, quotas: TenantQuotas, *, now: datetime
) -> RescanCharge:
    return RescanCharge(
        tenant=tenant,
        file_id=file_id,
        day=usage_day(now),
        max_per_day=_limit(quotas.rescans_per_day),
        max_per_file=_limit(quotas.rescans_per_file_per_day),
    )


def operation_charge(tenant: str, quotas: TenantQuotas, *, now: datetime) -> OperationCharge:
    return OperationCharge(tenant, usage_day(now), _limit(quotas.operations_per_day))


def retry_after(spent: SpentQuota, now: datetime) -> int:
    """Seconds a refused caller should wait: to the end of the UTC day for a daily limit (at
    least 1), a minute for running operations (one may end any time)."""
    if spent is SpentQuota.RUNNING_OPERATIONS:
        return RUNNING_OPERATIONS_RETRY_SECONDS
    moment = now.astimezone(UTC)
    next_day = datetime.combine(moment.date() + timedelta(days=1), time(), tzinfo=UTC)
    return max(1, math.ceil((next_day - moment).total_seconds()))


def spent_message(spent: SpentQuota, tenant: str, quotas: TenantQuotas, file_id: str = "") -> str:
    """Why the request was refused, in the caller's terms."""
    limit = getattr(quotas, spent.value)
    return {
        SpentQuota.RESCANS: f"tenant {tenant} has used its {limit} rescans of today (UTC)",
        SpentQuota.FILE_RESCANS: (
            f"file {file_id} has been rescanned {limit} times today (UTC), the most a file may be"
        ),
        SpentQuota.OPERATIONS: (
            f"tenant {tenant} has started its {limit} bulk operations of today (UTC)"
        ),
        SpentQuota.RUNNING_OPERATIONS: (
            f"tenant {tenant} has {limit} bulk operations running, the most it may have at once: "
            "wait for one to finish"
        ),
    }[spent]
