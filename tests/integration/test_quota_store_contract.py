"""The quota contract: the tenants' own limits (QuotaStore), the day's usage counted by the
ingest (FileStore.record_ingest with a charge) and the per-file count of API jobs
(FileStore.add_api_job). One set of scenarios, run against the in-memory stores the services'
unit tests use (tests/fakes.py) and against the repositories on DynamoDB (moto), so the fakes
cannot drift from the tables unseen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.quota_repository import QuotaRepository
from filejobs.domain.ingest import IngestPlan, new_job
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.quotas import DayUsage, QuotaChange, QuotaOverrides, UsageCharge, rejected
from filejobs.domain.retry import DispatchPolicy
from filejobs.ports import (
    AlreadyIngested,
    ApiJobAdded,
    FileStore,
    Ingested,
    JobStore,
    OverQuota,
    QuotaStore,
)
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
DAY = date(2026, 11, 29)


@dataclass(frozen=True)
class Stores:
    files: FileStore
    jobs: JobStore
    quotas: QuotaStore


@pytest.fixture(params=["in_memory", "dynamodb"])
def stores(request: pytest.FixtureRequest) -> Stores:
    if request.param == "in_memory":
        jobs = InMemoryJobStore()
        files = InMemoryFileStore(jobs)
        return Stores(files, jobs, files.quotas)
    request.getfixturevalue("tables")
    return Stores(FileRepository(), JobRepository(), QuotaRepository())


def plan(n: int, size: int = 100, tenant: str = "acme") -> IngestPlan:
    return ingest_plan(T0, "image/png", name=f"{n}.png", size=size, tenant=tenant)


def charge(
    size: int = 100, max_files: int | None = 3, max_bytes: int | None = None, tenant: str = "acme"
) -> UsageCharge:
    return UsageCharge(tenant, DAY, 1, size, max_files, max_bytes)


# --- the tenants' own limits -------------------------------------------------------------------


def test_a_tenant_without_limits_of_its_own_has_none(stores: Stores) -> None:
    assert stores.quotas.overrides("acme") == QuotaOverrides()


def test_limits_are_set_and_reset_and_each_change_is_recorded(stores: Stores) -> None:
    first = stores.quotas.change(
        "acme", QuotaChange(set={"files_per_day": 5, "max_file_bytes": 0}), at=T0, by="ops"
    )
    later = T0 + timedelta(minutes=1)
    second = stores.quotas.change(
        "acme",
        QuotaChange(set={"bytes_per_day": 10**12}, reset=frozenset({"files_per_day"})),
        at=later,
        by="ops2",
    )

    assert first.as_dict() == {"files_per_day": 5, "max_file_bytes": 0}
    expected = QuotaOverrides(
        bytes_per_day=10**12, max_file_bytes=0, updated_at=later, updated_by="ops2"
    )
    assert second == expected
    assert stores.quotas.overrides("acme") == expected
    assert stores.quotas.overrides("globex") == QuotaOverrides()


# --- usage counted by the ingest ---------------------------------------------------------------


def test_an_accepted_upload_adds_one_file_and_its_bytes_to_its_tenants_day(stores: Stores) -> None:
    assert stores.quotas.usage("acme", DAY) == DayUsage("acme", DAY)

    results = [stores.files.record_ingest(plan(n, size=250), charge(250)) for n in range(2)]

    assert all(isinstance(r, Ingested) for r in results)
    assert stores.quotas.usage("acme", DAY) == DayUsage("acme", DAY, files=2, bytes=500)
    assert stores.quotas.usage("globex", DAY) == DayUsage("globex", DAY)
    assert stores.quotas.usage("acme", DAY + timedelta(days=1)) == DayUsage(
        "acme", DAY + timedelta(days=1)
    )


def test_the_upload_past_the_files_limit_writes_nothing_and_says_how_the_day_stood(
    stores: Stores,
) -> None:
    for n in range(3):
        stores.files.record_ingest(plan(n), charge())
    over = plan(3)

    result = stores.files.record_ingest(over, charge())

    assert result == OverQuota(charge(), DayUsage("acme", DAY, files=3, bytes=300))
    assert stores.files.get(over.file.id) is None
    assert stores.jobs.jobs_of(over.file) == []
    assert stores.quotas.usage("acme", DAY).files == 3


def test_the_bytes_limit_holds_to_the_byte(stores: Stores) -> None:
    assert isinstance(stores.files.record_ingest(plan(0, 600), charge(600, None, 1000)), Ingested)
    refused = stores.files.record_ingest(plan(1, 401), charge(401, None, 1000))
    taken = stores.files.record_ingest(plan(2, 400), charge(400, None, 1000))

    assert isinstance(refused, OverQuota) and refused.usage.bytes == 600
    assert isinstance(taken, Ingested)
    assert stores.quotas.usage("acme", DAY).bytes == 1000


def test_a_file_larger_than_the_whole_days_allowance_is_refused_on_an_empty_day(
    stores: Stores,
) -> None:
    result = stores.files.record_ingest(plan(0, 1001), charge(1001, None, 1000))

    assert result == OverQuota(charge(1001, None, 1000), DayUsage("acme", DAY))


def test_a_duplicate_of_a_counted_upload_counts_nothing_even_when_the_day_is_full(
    stores: Stores,
) -> None:
    for n in range(3):
        stores.files.record_ingest(plan(n), charge())

    again = stores.files.record_ingest(plan(0), charge())

    assert again == AlreadyIngested(plan(0).file.id)
    assert stores.quotas.usage("acme", DAY) == DayUsage("acme", DAY, files=3, bytes=300)


def test_without_limits_the_upload_is_still_counted(stores: Stores) -> None:
    result = stores.files.record_ingest(plan(0, 10**10), charge(10**10, None, None))

    assert isinstance(result, Ingested)
    assert stores.quotas.usage("acme", DAY) == DayUsage("acme", DAY, files=1, bytes=10**10)


def test_a_rejected_upload_is_recorded_once_and_counted_nowhere(stores: Stores) -> None:
    refused = rejected(plan(0), "over quota")

    first = stores.files.record_ingest(refused)
    again = stores.files.record_ingest(refused)

    assert first == Ingested(refused) and again == AlreadyIngested(refused.file.id)
    assert stores.files.get(refused.file.id) == refused.file
    assert stores.quotas.usage("acme", DAY) == DayUsage("acme", DAY)


# --- jobs requested through the API, counted per file ------------------------------------------


def api_job(recorded: IngestPlan, key: str) -> ProcessingJob:
    return new_job(
        recorded.file,
        JobType.COMPRESSION,
        now=T0,
        created_by="api:tenant:acme",
        dispatch=DispatchPolicy(),
        idempotency_key=f"api:{recorded.file.id}:{key}",
    )


def test_api_jobs_are_added_until_the_file_has_had_its_share(stores: Stores) -> None:
    recorded = plan(0)
    stores.files.record_ingest(recorded)

    added = [stores.files.add_api_job(api_job(recorded, k), per_file=2) for k in "abc"]

    assert added == [ApiJobAdded.CREATED, ApiJobAdded.CREATED, ApiJobAdded.FILE_SPENT]
    assert stores.jobs.get(api_job(recorded, "b").id) is not None
    assert stores.jobs.get(api_job(recorded, "c").id) is None


def test_an_api_job_that_exists_is_not_added_or_counted_again(stores: Stores) -> None:
    recorded = plan(0)
    stores.files.record_ingest(recorded)
    job = api_job(recorded, "a")

    added = [stores.files.add_api_job(job, per_file=2) for _ in range(3)]
    other = stores.files.add_api_job(api_job(recorded, "b"), per_file=2)

    assert added == [ApiJobAdded.CREATED, ApiJobAdded.EXISTS, ApiJobAdded.EXISTS]
    assert other is ApiJobAdded.CREATED
