"""The quota rules (domain/quotas.py): which limits hold a tenant, what an upload charges its
day, and the reasons a rejected upload is recorded with."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from filejobs.domain.file import FileStatus
from filejobs.domain.quotas import (
    NAMED_JOBS_PER_FILE,
    UNLIMITED,
    DayUsage,
    QuotaChange,
    QuotaOverrides,
    SpentQuota,
    TenantQuotas,
    UsageCharge,
    charge_for,
    names_another_job,
    operation_charge,
    over_quota,
    rejected,
    rescan_charge,
    retry_after,
    too_large,
    usage_day,
)
from tests.factories import ingest_plan

T0 = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
DEFAULTS = TenantQuotas(
    files_per_day=1000, bytes_per_day=10_000, max_file_bytes=2000, max_in_flight_jobs=50
)


def test_a_tenants_own_limits_replace_the_defaults_they_name_and_only_those() -> None:
    own = QuotaOverrides(files_per_day=5, max_file_bytes=UNLIMITED)

    assert DEFAULTS.overridden(own) == TenantQuotas(
        files_per_day=5, bytes_per_day=10_000, max_file_bytes=0, max_in_flight_jobs=50
    )
    assert DEFAULTS.overridden(QuotaOverrides()) == DEFAULTS
    assert own.as_dict() == {"files_per_day": 5, "max_file_bytes": 0}


def test_an_upload_counts_against_the_utc_day_of_its_ingest() -> None:
    # 23:30 UTC is already the next day in Tokyo: the day is UTC's, whatever the clock's zone
    tokyo = T0.astimezone(timezone(timedelta(hours=9)))
    assert usage_day(tokyo) == date(2026, 11, 29)

    stored = ingest_plan(T0, size=700).file
    charge = charge_for(stored, DEFAULTS, now=tokyo)

    assert charge == UsageCharge("acme", date(2026, 11, 29), 1, 700, 1000, 10_000)


def test_zero_is_no_limit_in_the_charge() -> None:
    unlimited = TenantQuotas(0, 0, 0, 0)
    charge = charge_for(ingest_plan(T0, size=10**12).file, unlimited, now=T0)

    assert (charge.max_files, charge.max_bytes) == (None, None)
    assert charge.fits(DayUsage("acme", charge.day, files=10**9, bytes=10**15))
    assert too_large(ingest_plan(T0, size=10**12).file, unlimited) is None


@pytest.mark.parametrize(
    ("files", "bytes_", "fits"),
    [(999, 9_300, True), (1000, 0, False), (0, 9_301, False), (999, 9_301, False)],
)
def test_a_charge_fits_while_both_totals_stay_within_their_limits(
    files: int, bytes_: int, fits: bool
) -> None:
    charge = charge_for(ingest_plan(T0, size=700).file, DEFAULTS, now=T0)
    assert charge.fits(DayUsage("acme", charge.day, files=files, bytes=bytes_)) is fits


def test_the_reason_names_the_tenant_the_quota_and_what_was_used() -> None:
    charge = charge_for(ingest_plan(T0, size=700).file, DEFAULTS, now=T0)

    files = over_quota(charge, DayUsage("acme", charge.day, files=1000, bytes=0))
    bytes_ = over_quota(charge, DayUsage("acme", charge.day, files=3, bytes=9_900))

    assert files == "tenant acme is over its 1000 files per day quota (1000 used on 2026-11-29)"
    assert bytes_ == (
        "tenant acme is over its 10000 bytes per day quota (9900 used on 2026-11-29; "
        "this file is 700)"
    )


def test_a_file_over_the_max_file_size_says_so_and_one_at_it_passes() -> None:
    assert too_large(ingest_plan(T0, size=2000).file, DEFAULTS) is None
    reason = too_large(ingest_plan(T0, size=2001).file, DEFAULTS)
    assert reason == (
        "file uploads/acme/photo.jpg is 2001 bytes, over tenant acme's 2000 bytes max file "
        "size quota"
    )


def test_a_rejected_upload_keeps_its_file_with_the_reason_and_has_no_jobs() -> None:
    plan = ingest_plan(T0)
    assert plan.jobs

    refused = rejected(plan, "over quota")

    assert refused.jobs == ()
    assert (refused.file.status, refused.file.status_reason) == (FileStatus.REJECTED, "over quota")
    assert refused.file.id == plan.file.id  # the same id: a redelivery finds it recorded
    assert plan.file.status is FileStatus.ACTIVE  # the plan itself is left as it was


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (dict(set={}), "at least one"),
        (dict(set={"files_per_day": -1}), "from 0"),
        (dict(set={"files_per_day": 2**53}), "from 0"),
        (dict(set={"speed": 1}), "unknown"),
        (dict(set={"files_per_day": 1}, reset=frozenset({"files_per_day"})), "set and reset"),
    ],
)
def test_a_quota_change_that_means_nothing_or_too_much_is_refused(
    change: dict[str, object], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        QuotaChange(**change)  # type: ignore[arg-type]


# --- rescans and bulk operations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "seconds"),
    [
        (datetime(2026, 12, 5, 23, 59, 30, tzinfo=UTC), 30),
        (datetime(2026, 12, 5, 0, 0, tzinfo=UTC), 86_400),
        (datetime(2026, 12, 5, 23, 59, 59, 900_000, tzinfo=UTC), 1),  # never 0: "now"
        # the UTC day, whatever the caller's zone
        (datetime(2026, 12, 5, 18, 0, tzinfo=timezone(timedelta(hours=-5))), 3_600),
    ],
)
def test_a_daily_quota_is_retried_when_the_utc_day_ends(now: datetime, seconds: int) -> None:
    assert retry_after(SpentQuota.RESCANS, now) == seconds
    assert retry_after(SpentQuota.OPERATIONS, now) == seconds


def test_running_operations_are_retried_a_minute_later_whatever_the_hour() -> None:
    assert retry_after(SpentQuota.RUNNING_OPERATIONS, T0) == 60


def test_a_rescan_charges_the_tenants_day_and_the_files_with_zero_as_unlimited() -> None:
    quotas = replace(DEFAULTS, rescans_per_day=0, rescans_per_file_per_day=2)

    charge = rescan_charge("acme", "f-1", quotas, now=T0)

    assert (charge.day, charge.max_per_day, charge.max_per_file) == (T0.date(), None, 2)


def test_the_defaults_of_what_a_tenant_starts_are_set_and_overridable() -> None:
    assert DEFAULTS.rescans_per_day == 10_000
    assert DEFAULTS.rescans_per_file_per_day == 3
    own = DEFAULTS.overridden(QuotaOverrides(operations_per_day=5, max_running_operations=0))
    assert (own.operations_per_day, own.max_running_operations) == (5, UNLIMITED)
    assert operation_charge("acme", own, now=T0).max_per_day == 5


def test_a_file_names_jobs_on_its_item_up_to_its_bound() -> None:
    stored = ingest_plan(T0).file
    stored.job_ids = frozenset(str(n) for n in range(NAMED_JOBS_PER_FILE - 1))
    assert names_another_job(stored)
    stored.job_ids |= {"one more"}
    assert not names_another_job(stored)
