"""The tenants' cap (domain/fairness.py) in the worker, on the in-memory fakes: at most N jobs of
one tenant run at once per job type; a job over the cap is deferred, never failed, and spends no
attempt; a slot is given back however the attempt ends, and a crashed worker's slot lapses.

(tests/integration/test_tenant_slots.py holds the DynamoDB slots to the same rules.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from filejobs.config import ConfigurationError, Settings
from filejobs.domain import fairness, transitions
from filejobs.domain.fairness import DEFER_MAX, DEFER_MIN, TenantCap
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.quotas import QuotaChange, QuotaOverrides
from filejobs.domain.retry import DispatchPolicy, RetryPolicy, TransientError
from filejobs.processors.base import Work
from filejobs.services.quotas import InFlightCaps
from filejobs.services.worker import Disposition, RunningCap, WorkerService
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.fakes import (
    InMemoryJobStore,
    InMemoryQuotaStore,
    InMemoryTenantSlots,
    RecordingDispatcher,
    TempWorkspaces,
)

SCAN = JobType.VIRUS_SCAN
LEASE = timedelta(minutes=5)
KEEP = timedelta(days=1)
INVOCATION = timedelta(minutes=5)  # what the invocation has left: its slots lapse after it
WAIT = timedelta(seconds=17)  # the deferral delay the tests draw


def scan_job(jobs: InMemoryJobStore, now: datetime, tenant: str, name: str) -> ProcessingJob:
    plan = ingest_plan(now, tenant=tenant, name=name)
    job = next(job for job in plan.jobs if job.job_type is SCAN)
    assert jobs.create(job)
    return job


class Processor:
    """Records each job it runs; raises `error` when given one."""

    def __init__(self, error: Exception | None = None) -> None:
        self.ran: list[str] = []
        self.error = error

    def __call__(self, work: Work) -> dict[str, Any]:
        self.ran.append(work.job.id)
        if self.error is not None:
            raise self.error
        return {"verdict": "clean"}


@pytest.fixture
def slots() -> InMemoryTenantSlots:
    return InMemoryTenantSlots()


def worker(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
    *,
    cap: int = 2,
    own: dict[str, int] | None = None,
    processor: Processor | None = None,
) -> WorkerService:
    limits = RunningCap(
        slots,
        TenantCap(cap),
        deadline=lambda: clock.now + INVOCATION,
        delay=lambda: WAIT,
        own_cap=(own or {}).get,
    )
    return WorkerService(
        jobs,
        sent,
        processor or Processor(),
        SCAN,
        lease=LEASE,
        retention=KEEP,
        worker_id="test-worker",
        scratch=TempWorkspaces(tmp_path),
        retry_policy=RetryPolicy(base=timedelta(seconds=4), cap=timedelta(minutes=1)),
        clock=clock,
        limits=limits,
    )


def hold(slots: InMemoryTenantSlots, tenant: str, count: int, until: datetime) -> None:
    """`count` slots of `tenant` held by other running jobs, until `until`."""
    for n in range(count):
        assert slots.take(tenant, SCAN, f"running-{n}", cap=count, until=until, now=until)


def test_a_job_over_its_tenants_cap_is_deferred_pending_with_no_attempt_spent(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    # given tenant acme with its 2 slots of virus scans held by running jobs
    hold(slots, "acme", 2, clock.now + INVOCATION)
    job = scan_job(jobs, clock.now, "acme", "third.jpg")
    processor = Processor()
    # when a worker receives its third job's message
    result = worker(jobs, sent, clock, tmp_path, slots, processor=processor).handle(
        JobMessage.for_job(job)
    )
    # then the job is not run, not failed and spends no attempt: it waits, pending
    assert result.disposition is Disposition.DEFERRED
    assert processor.ran == []
    stored = jobs.get(job.id)
    assert stored is not None
    assert (stored.status, stored.attempt, stored.retry_count) == (JobStatus.PENDING, 0, 0)
    # and its message is sent again, to come back after the deferral delay
    assert sent.sent == [(job.id, WAIT)]
    # recorded as a dispatch the sweep does not count against the job, nor looks at before
    # the message is due back (plus its grace)
    assert stored.dispatch_count == job.dispatch_count
    assert stored.dispatched_at == clock.now + WAIT
    assert stored.sweep_at == clock.now + WAIT + DispatchPolicy().grace
    assert slots.held("acme", SCAN) == {"running-0", "running-1"}


def test_another_tenants_job_runs_while_one_tenant_is_at_its_cap(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    hold(slots, "acme", 2, clock.now + INVOCATION)
    quiet = scan_job(jobs, clock.now, "globex", "report.jpg")
    result = worker(jobs, sent, clock, tmp_path, slots).handle(JobMessage.for_job(quiet))
    assert result.disposition is Disposition.COMPLETED
    assert sent.sent == []


def test_the_slot_is_taken_before_the_claim_and_given_back_when_the_job_completes(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    result = worker(jobs, sent, clock, tmp_path, slots).handle(JobMessage.for_job(job))
    assert result.disposition is Disposition.COMPLETED
    assert slots.taken == [job.id]
    assert slots.held("acme", SCAN) == set()


def test_the_slot_is_given_back_when_the_attempt_fails(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    failing = Processor(TransientError("S3 slow down"))
    service = worker(jobs, sent, clock, tmp_path, slots, processor=failing)
    result = service.handle(JobMessage.for_job(job))
    assert result.disposition is Disposition.RETRYING
    assert slots.taken == [job.id]
    assert slots.held("acme", SCAN) == set()


def test_a_message_for_a_job_taken_already_gives_its_slot_back_at_once(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    claim = transitions.claim(now=clock.now, lease=LEASE, worker="another worker")
    jobs.apply(job.id, SCAN, claim)
    result = worker(jobs, sent, clock, tmp_path, slots).handle(JobMessage.for_job(job))
    assert result.disposition is Disposition.SKIPPED
    assert slots.held("acme", SCAN) == set()


def test_a_crashed_workers_slot_counts_no_longer_once_its_invocation_has_ended(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    # given both of acme's slots held by invocations that crashed (never gave them back)
    hold(slots, "acme", 2, clock.now + INVOCATION)
    job = scan_job(jobs, clock.now, "acme", "next.jpg")
    # when the next job's message comes after those invocations' deadlines
    clock.advance(INVOCATION + timedelta(seconds=1))
    result = worker(jobs, sent, clock, tmp_path, slots).handle(JobMessage.for_job(job))
    # then the lapsed slots are cleared and the job runs
    assert result.disposition is Disposition.COMPLETED
    assert slots.held("acme", SCAN) == set()


def test_a_deferred_due_retry_waits_pending_with_its_attempt_count_kept(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    # given a job whose first attempt failed and whose retry is due
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    failing = Processor(TransientError("S3 slow down"))
    worker(jobs, sent, clock, tmp_path, slots, processor=failing).handle(JobMessage.for_job(job))
    clock.advance(timedelta(minutes=2))
    scheduled = jobs.get(job.id)
    assert scheduled is not None and scheduled.status is JobStatus.SCHEDULED
    # when its retry's message comes while acme is at its cap
    hold(slots, "acme", 2, clock.now + INVOCATION)
    result = worker(jobs, sent, clock, tmp_path, slots).handle(JobMessage.for_job(job))
    # then it waits its turn pending, its one attempt spent and no more
    assert result.disposition is Disposition.DEFERRED
    stored = jobs.get(job.id)
    assert stored is not None
    assert (stored.status, stored.attempt, stored.retry_count) == (
        JobStatus.PENDING,
        scheduled.attempt,
        scheduled.retry_count,
    )
    assert stored.scheduled_at is None


def test_no_cap_takes_no_slot(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    result = worker(jobs, sent, clock, tmp_path, slots, cap=0).handle(JobMessage.for_job(job))
    assert result.disposition is Disposition.COMPLETED
    assert slots.taken == []


def test_a_message_sent_before_messages_named_their_tenant_is_not_capped(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    hold(slots, "acme", 2, clock.now + INVOCATION)
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    old = JobMessage(job.id, SCAN, job.file_id)
    result = worker(jobs, sent, clock, tmp_path, slots).handle(old)
    assert result.disposition is Disposition.COMPLETED


def test_a_message_naming_another_tenant_fails_its_job_and_gives_the_slot_back(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    job = scan_job(jobs, clock.now, "acme", "a.jpg")
    forged = JobMessage(job.id, SCAN, job.file_id, "globex")
    processor = Processor()
    service = worker(jobs, sent, clock, tmp_path, slots, processor=processor)
    result = service.handle(forged)
    assert result.disposition is Disposition.FAILED
    assert processor.ran == []
    assert slots.held("globex", SCAN) == set()


# --- the rules ---------------------------------------------------------------------------------

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def test_a_cap_counts_live_slots_and_lets_a_holder_in_again() -> None:
    cap = TenantCap(2)
    live = {"a": T0 + timedelta(seconds=1), "b": T0 + timedelta(seconds=1)}
    assert not cap.has_room(live, "c", T0)
    assert cap.has_room(live, "a", T0)  # a redelivered message of a job that holds one
    lapsed = {"a": T0, "b": T0 - timedelta(seconds=9)}
    assert cap.has_room(lapsed, "c", T0)
    assert fairness.lapsed({**live, "old": T0}, T0) == {"old": T0}


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="0 \\(off\\) or more"):
        TenantCap(-1)


def test_the_deferral_delay_is_drawn_between_its_bounds() -> None:
    assert fairness.deferral_delay(lambda low, high: low) == DEFER_MIN
    assert fairness.deferral_delay(lambda low, high: high) == DEFER_MAX
    assert DEFER_MIN <= fairness.deferral_delay() <= DEFER_MAX


def test_a_slot_lapses_a_little_after_its_invocations_deadline() -> None:
    assert fairness.slot_until(T0) == T0 + fairness.SLOT_SLACK


# --- the settings --------------------------------------------------------------------------------

BASE_ENV = {"JOBS_TABLE_NAME": "jobs", "FILES_TABLE_NAME": "files"}


def test_the_cap_and_its_table_come_from_the_workers_environment() -> None:
    env = {**BASE_ENV, "TENANT_MAX_RUNNING_JOBS": "10", "TENANT_SLOTS_TABLE_NAME": "slots"}
    loaded = Settings.from_env(env)
    assert (loaded.tenant_max_running, loaded.tenant_slots_table) == (10, "slots")


def test_no_cap_unless_the_environment_sets_one() -> None:
    loaded = Settings.from_env(BASE_ENV)
    assert (loaded.tenant_max_running, loaded.tenant_slots_table) == (0, None)
    assert Settings.from_env({**BASE_ENV, "TENANT_MAX_RUNNING_JOBS": "0"}).tenant_max_running == 0


@pytest.mark.parametrize("value", ["-1", "ten", "1.5"])
def test_a_cap_that_is_not_a_whole_number_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ConfigurationError, match="TENANT_MAX_RUNNING_JOBS"):
        Settings.from_env({**BASE_ENV, "TENANT_MAX_RUNNING_JOBS": value})


@pytest.mark.parametrize(
    ("default", "own", "held", "expected"),
    [
        (5, 1, 1, Disposition.DEFERRED),  # the tenant's own cap is lower than the default
        (1, 3, 1, Disposition.COMPLETED),  # and may be higher
        (0, 1, 1, Disposition.DEFERRED),  # it holds the tenant with no default cap
        (1, 0, 1, Disposition.COMPLETED),  # 0 of its own: the tenant is not capped
    ],
)
def test_a_tenants_own_in_flight_quota_is_its_cap_in_place_of_the_default(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
    default: int,
    own: int,
    held: int,
    expected: Disposition,
) -> None:
    hold(slots, "acme", held, clock.now + INVOCATION)
    job = scan_job(jobs, clock.now, "acme", "next.jpg")
    service = worker(jobs, sent, clock, tmp_path, slots, cap=default, own={"acme": own})

    assert service.handle(JobMessage.for_job(job)).disposition is expected


def test_the_workers_read_a_tenants_own_cap_once_a_minute_and_keep_it_when_a_read_fails() -> None:
    store = InMemoryQuotaStore()
    now = [0.0]
    caps = InFlightCaps(store, ttl_seconds=60, monotonic=lambda: now[0])
    change = QuotaChange({"max_in_flight_jobs": 3})
    store.change("acme", change, at=datetime(2026, 12, 4, tzinfo=UTC), by="op")
    assert (caps("acme"), caps("globex")) == (3, None)

    store.change("acme", QuotaChange({"max_in_flight_jobs": 1}), at=datetime.now(UTC), by="op")
    now[0] = 59.0
    assert caps("acme") == 3  # within the minute: no read
    now[0] = 61.0
    assert caps("acme") == 1

    def broken(_tenant: str) -> QuotaOverrides:
        raise TransientError("DynamoDB throttled")

    store.overrides = broken  # type: ignore[method-assign,assignment]
    now[0] = 200.0
    assert caps("acme") == 1  # the last known cap, not a failed job


def test_an_early_message_of_a_delayed_job_over_the_cap_is_sent_again_for_its_time(
    jobs: InMemoryJobStore,
    sent: RecordingDispatcher,
    clock: FakeClock,
    tmp_path: Path,
    slots: InMemoryTenantSlots,
) -> None:
    # given acme at its cap, and a scan of acme's delayed to ten minutes from now
    hold(slots, "acme", 2, clock.now + INVOCATION)
    plan = ingest_plan(clock.now, tenant="acme", name="later.jpg")
    job = next(job for job in plan.jobs if job.job_type is SCAN)
    job.status, job.scheduled_at = JobStatus.SCHEDULED, clock.now + timedelta(minutes=10)
    assert jobs.create(job)
    # when a copy of its message comes now, four minutes before its time
    clock.advance(timedelta(minutes=4))
    result = worker(jobs, sent, clock, tmp_path, slots).handle(JobMessage.for_job(job))
    # then it is neither deferred nor run: it waits, its message sent again for its time
    assert result.disposition is Disposition.SKIPPED
    assert sent.sent == [(job.id, timedelta(minutes=6))]
    stored = jobs.get(job.id)
    assert stored is not None and (stored.status, stored.attempt) == (JobStatus.SCHEDULED, 0)
