"""Quotas on the in-memory stores: uploads within a tenant's quotas are counted once, uploads
over them are recorded rejected with no jobs; who may read and change the quotas; and the cap
on jobs requested through the API for one file.

(tests/integration/test_quotas.py runs them on DynamoDB, handlers included.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from filejobs.access import Caller
from filejobs.domain.file import FileStatus
from filejobs.domain.ingest import IngestPlan, ObjectCreated
from filejobs.domain.job import JobType
from filejobs.domain.outcome_events import DetailType
from filejobs.domain.quotas import QuotaChange, TenantQuotas
from filejobs.domain.retry import TransientError
from filejobs.services.api import RequestJob, RescanFile, StatusApi
from filejobs.services.errors import ConflictError, ForbiddenError, NotFoundError
from filejobs.services.ingest import IngestService, UploadIntake
from filejobs.services.outcomes import FileChange, outcome_event
from filejobs.services.quotas import RememberedLimits, TenantLimits
from tests.conftest import FakeClock
from tests.factories import ingest_plan, upload_record
from tests.fakes import (
    InMemoryFileStore,
    InMemoryJobStore,
    InMemoryObjects,
    RecordingDispatcher,
)

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 60
DEFAULTS = TenantQuotas(
    files_per_day=3, bytes_per_day=5000, max_file_bytes=2000, max_in_flight_jobs=9
)
ACME = Caller(tenant="acme", operator=False)
GLOBEX = Caller(tenant="globex", operator=False)
OPERATOR = Caller(tenant=None, operator=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def limits(files: InMemoryFileStore, clock: FakeClock) -> TenantLimits:
    return TenantLimits(files.quotas, DEFAULTS, clock)


@pytest.fixture
def objects() -> InMemoryObjects:
    return Uploads()


class Uploads(InMemoryObjects):
    """Every object is a small PNG: the tests name uploads freely."""

    def __init__(self) -> None:
        super().__init__({})

    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        return PNG[:length]


@pytest.fixture
def intake(
    jobs: InMemoryJobStore,
    files: InMemoryFileStore,
    objects: InMemoryObjects,
    sent: RecordingDispatcher,
    clock: FakeClock,
    limits: TenantLimits,
) -> UploadIntake:
    return UploadIntake(IngestService(files, objects, clock, limits=limits.limits), jobs, sent)


def upload(n: int, size: int = 100, tenant: str = "acme") -> ObjectCreated:
    return upload_record(f"{n}.png", tenant=tenant, size=size, sequencer=f"{n:018d}")


# --- the ingest ------------------------------------------------------------------------------


def test_uploads_within_the_quota_are_processed_and_counted_against_the_day(
    intake: UploadIntake, files: InMemoryFileStore, limits: TenantLimits
) -> None:
    received = [intake.receive(upload(n, size=1000)) for n in range(3)]

    assert all(r.first and r.rejected is None and r.jobs for r in received)
    assert limits.report(ACME, "acme").usage.files == 3
    assert limits.report(ACME, "acme").usage.bytes == 3000


def test_the_upload_past_the_files_quota_is_recorded_rejected_with_no_jobs(
    intake: UploadIntake,
    files: InMemoryFileStore,
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
) -> None:
    for n in range(3):
        intake.receive(upload(n))
    sent.sent.clear()

    over = intake.receive(upload(3))

    reason = "tenant acme is over its 3 files per day quota (3 used on 2026-11-29)"
    assert (over.first, over.rejected, over.jobs, over.sent) == (True, reason, (), [])
    stored = files.get(over.file_id)
    assert stored is not None
    assert (stored.status, stored.status_reason) == (FileStatus.REJECTED, reason)
    assert jobs.jobs_of_file(over.file_id) == [] and sent.sent == []
    # and it was not counted: the day holds the three accepted
    assert files.quotas.usage("acme", T0.date()).files == 3


def test_the_upload_past_the_bytes_quota_is_rejected_and_a_smaller_one_still_fits(
    intake: UploadIntake,
) -> None:
    intake.receive(upload(0, size=2000))
    intake.receive(upload(1, size=2000))

    over = intake.receive(upload(2, size=1001))
    fits = intake.receive(upload(3, size=1000))

    assert over.rejected is not None and "5000 bytes per day quota (4000 used" in over.rejected
    assert fits.rejected is None and fits.jobs


def test_a_file_over_the_max_file_size_is_rejected_and_not_counted(
    intake: UploadIntake, files: InMemoryFileStore
) -> None:
    over = intake.receive(upload(0, size=2001))

    assert over.rejected is not None and "max file size" in over.rejected
    assert over.jobs == ()
    assert files.quotas.usage("acme", T0.date()).files == 0


def test_a_redelivered_upload_is_counted_once(
    intake: UploadIntake, files: InMemoryFileStore
) -> None:
    first = intake.receive(upload(0, size=700))
    again = intake.receive(upload(0, size=700))

    assert (first.first, again.first) == (True, False)
    usage = files.quotas.usage("acme", T0.date())
    assert (usage.files, usage.bytes) == (1, 700)


def test_a_redelivered_rejection_stays_one_rejection(
    intake: UploadIntake, files: InMemoryFileStore
) -> None:
    first = intake.receive(upload(0, size=2001))
    again = intake.receive(upload(0, size=2001))

    assert (first.first, again.first, again.rejected) == (True, False, None)
    assert files.quotas.usage("acme", T0.date()).files == 0


def test_the_next_utc_day_starts_from_nothing(
    intake: UploadIntake, clock: FakeClock, files: InMemoryFileStore
) -> None:
    for n in range(3):
        intake.receive(upload(n))
    clock.advance(timedelta(days=1))

    assert intake.receive(upload(3)).rejected is None
    assert files.quotas.usage("acme", (T0 + timedelta(days=1)).date()).files == 1


def test_a_tenants_own_quota_replaces_the_default_and_other_tenants_keep_theirs(
    intake: UploadIntake, limits: TenantLimits
) -> None:
    limits.change(OPERATOR, "acme", QuotaChange(set={"files_per_day": 1}))

    assert intake.receive(upload(0)).rejected is None
    assert intake.receive(upload(1)).rejected is not None
    assert intake.receive(upload(2, tenant="globex")).rejected is None


def test_a_rejected_upload_is_announced_with_tenant_key_size_and_reason(
    intake: UploadIntake, files: InMemoryFileStore
) -> None:
    over = intake.receive(upload(0, size=2001))
    stored = files.get(over.file_id)
    assert stored is not None

    event = outcome_event(FileChange(before=None, after=stored))

    assert event is not None and event.detail_type is DetailType.UPLOAD_REJECTED
    detail = event.detail
    assert (detail["tenant"], detail["key"], detail["size"]) == ("acme", stored.key, 2001)
    assert detail["reason"] == over.rejected and detail["status"] == "rejected"
    # once: a later write of the rejected file (none is made today) announces nothing again
    assert outcome_event(FileChange(before=stored, after=stored)) is None


# --- reading and changing quotas -------------------------------------------------------------


def test_a_tenant_reads_its_own_quotas_and_todays_usage(
    intake: UploadIntake, limits: TenantLimits
) -> None:
    intake.receive(upload(0, size=300))

    report = limits.report(ACME, "acme")

    assert (report.limits, report.defaults) == (DEFAULTS, DEFAULTS)
    assert report.overrides.as_dict() == {}
    assert (report.usage.files, report.usage.bytes) == (1, 300)


def test_another_tenants_quotas_are_not_found_as_if_there_were_no_such_tenant(
    limits: TenantLimits,
) -> None:
    with pytest.raises(NotFoundError) as theirs:
        limits.report(ACME, "globex")
    assert theirs.value.message == "no tenant 'globex'"


def test_a_tenant_cannot_change_quotas_not_even_its_own(limits: TenantLimits) -> None:
    for tenant in ("acme", "globex"):
        with pytest.raises(ForbiddenError):
            limits.change(ACME, tenant, QuotaChange(set={"files_per_day": 10**6}))
    assert limits.report(OPERATOR, "acme").limits == DEFAULTS


def test_an_operator_sets_and_resets_a_tenants_quotas_and_is_recorded(
    limits: TenantLimits, clock: FakeClock
) -> None:
    limits.change(OPERATOR, "acme", QuotaChange(set={"files_per_day": 7, "max_file_bytes": 0}))
    report = limits.change(
        OPERATOR,
        "acme",
        QuotaChange(set={"max_in_flight_jobs": 2}, reset=frozenset({"files_per_day"})),
    )

    assert report.overrides.as_dict() == {"max_file_bytes": 0, "max_in_flight_jobs": 2}
    assert report.limits == TenantQuotas(3, 5000, 0, 2)
    assert (report.overrides.updated_at, report.overrides.updated_by) == (clock.now, OPERATOR.name)
    assert limits.report(OPERATOR, "globex").limits == DEFAULTS


# --- jobs requested through the API, per file ------------------------------------------------


@pytest.fixture
def api(
    jobs: InMemoryJobStore, files: InMemoryFileStore, sent: RecordingDispatcher, clock: FakeClock
) -> StatusApi:
    return StatusApi(
        jobs=jobs,
        files=files,
        dispatcher=lambda: sent,
        retention=timedelta(days=30),
        clock=clock,
        jobs_per_file=3,
    )


@pytest.fixture
def recorded(files: InMemoryFileStore) -> IngestPlan:
    plan = ingest_plan(T0, "image/png")
    files.record_ingest(plan)
    return plan


def test_requests_without_an_idempotency_key_stop_at_the_files_cap(
    api: StatusApi, recorded: IngestPlan, jobs: InMemoryJobStore
) -> None:
    # Without a key the parser gives each request a fresh one: each is a new job
    made = [
        api.request_job(ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, f"fresh-{n}"))
        for n in range(3)
    ]
    assert len({m.job.job.id for m in made}) == 3
    before = jobs.all()

    with pytest.raises(ConflictError) as spent:
        api.request_job(ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, "fresh-3"))

    assert spent.value.message == (
        f"file {recorded.file.id} has had the 3 jobs a file may be given through the API: no "
        "more can be requested for it"
    )
    assert jobs.all() == before


def test_a_replayed_request_counts_nothing_against_the_cap(
    api: StatusApi, recorded: IngestPlan
) -> None:
    first = api.request_job(ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, "k"))
    replays = [
        api.request_job(ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, "k"))
        for _ in range(5)
    ]

    assert all(r.replayed and r.job.job.id == first.job.job.id for r in replays)
    # two more new jobs still fit the cap of 3
    for key in ("a", "b"):
        assert not api.request_job(
            ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, key)
        ).replayed


def test_a_spent_file_still_answers_the_replay_of_an_earlier_request(
    api: StatusApi, recorded: IngestPlan
) -> None:
    for key in ("a", "b", "c"):
        api.request_job(ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, key))

    replay = api.request_job(ACME, RequestJob(recorded.file.id, JobType.COMPRESSION, "a"))

    assert replay.replayed


def test_the_cap_is_per_file(api: StatusApi, files: InMemoryFileStore) -> None:
    one, two = (
        ingest_plan(T0, "image/png", name="1.png"),
        ingest_plan(T0, "image/png", name="2.png"),
    )
    files.record_ingest(one)
    files.record_ingest(two)
    for key in ("a", "b", "c"):
        api.request_job(ACME, RequestJob(one.file.id, JobType.COMPRESSION, key))

    assert not api.request_job(ACME, RequestJob(two.file.id, JobType.COMPRESSION, "a")).replayed


def test_rescans_asked_for_one_file_count_against_the_same_cap(
    api: StatusApi, recorded: IngestPlan, jobs: InMemoryJobStore
) -> None:
    file_id = recorded.file.id
    api.request_job(ACME, RequestJob(file_id, JobType.COMPRESSION, "job"))
    made = [api.rescan_file(ACME, RescanFile(file_id, f"fresh-{n}")) for n in range(2)]
    assert not any(m.replayed for m in made)
    before = jobs.all()

    with pytest.raises(ConflictError, match="has had the 3 jobs a file may be given"):
        api.rescan_file(ACME, RescanFile(file_id, "fresh-2"))

    assert jobs.all() == before
    assert api.rescan_file(ACME, RescanFile(file_id, "fresh-0")).replayed  # a replay still answers


# --- the ingest's quotas, remembered a minute per function instance ----------------------------


class CountedReads:
    """TenantLimits.limits, counting its reads of the tenant's quota item."""

    def __init__(self, limits: TenantLimits) -> None:
        self.limits, self.reads = limits, 0

    def __call__(self, tenant: str) -> TenantQuotas:
        self.reads += 1
        return self.limits.limits(tenant)


def test_the_ingest_reads_a_tenants_quotas_once_a_minute_no_quota_item_included(
    limits: TenantLimits,
) -> None:
    now = [0.0]
    read = CountedReads(limits)
    remembered = RememberedLimits(read, ttl_seconds=60, monotonic=lambda: now[0])

    # a tenant with no quota item: the defaults, read once for a minute of uploads
    assert [remembered("acme") for _ in range(3)] == [DEFAULTS] * 3
    assert read.reads == 1

    # an operator's change applies once the minute is over, not before
    change = QuotaChange({"files_per_day": 1})
    limits.change(OPERATOR, "acme", change)
    now[0] = 59.0
    assert remembered("acme").files_per_day == DEFAULTS.files_per_day
    now[0] = 60.0
    assert remembered("acme").files_per_day == 1
    assert read.reads == 2

    # each tenant is its own
    assert remembered("globex") == DEFAULTS
    assert read.reads == 3


def test_a_failed_read_of_the_quotas_fails_the_upload_rather_than_let_it_through(
    limits: TenantLimits,
) -> None:
    now = [0.0]

    def throttled(_tenant: str) -> TenantQuotas:
        raise TransientError("DynamoDB throttled")

    remembered = RememberedLimits(throttled, monotonic=lambda: now[0])
    with pytest.raises(TransientError):
        remembered("acme")


def test_uploads_within_the_remembered_minute_are_held_by_the_quota_read_at_its_start(
    jobs: InMemoryJobStore,
    files: InMemoryFileStore,
    objects: InMemoryObjects,
    sent: RecordingDispatcher,
    clock: FakeClock,
    limits: TenantLimits,
) -> None:
    # the quota lowered to 1 file a day after the first upload read the defaults (3)
    remembered = RememberedLimits(limits.limits, monotonic=lambda: 0.0)
    service = IngestService(files, objects, clock, limits=remembered)
    intake = UploadIntake(service, jobs, sent)
    intake.receive(upload(0))
    limits.change(OPERATOR, "acme", QuotaChange({"files_per_day": 1}))

    second = intake.receive(upload(1))

    # counted against the day all the same: the transaction's condition holds what was read
    assert second.rejected is None
    assert files.quotas.usage("acme", T0.date()).files == 2
