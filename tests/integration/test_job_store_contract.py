"""The JobStore contract: one set of scenarios, run against the in-memory store the services'
unit tests use (tests/fakes.py) and against `JobRepository` on DynamoDB (moto).

Whatever a service test learns from the fake holds for the repository only while both pass
every scenario here: a change to either that makes them differ fails one of the two runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.file import StoredFile
from filejobs.domain.ingest import new_job
from filejobs.domain.job import AttemptOutcome, JobStatus, JobType, ProcessingJob
from filejobs.domain.quotas import NAMED_JOBS_PER_FILE
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.transition_result import Applied, Lost, TransitionResult
from filejobs.domain.transitions import Conflict
from filejobs.ports import InvalidCursorError, JobPage, JobStore, PageCursor
from tests.factories import ingest_plan
from tests.fakes import InMemoryJobStore

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)
GRACE = DispatchPolicy().grace


@pytest.fixture(params=["in_memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> JobStore:
    if request.param == "in_memory":
        return InMemoryJobStore()
    request.getfixturevalue("tables")
    return JobRepository()


def a_file(tenant: str = "acme", name: str = "photo.jpg") -> StoredFile:
    return ingest_plan(T0, tenant=tenant, name=name).file


ACME = a_file()
ACME_OTHER_FILE = a_file(name="other.jpg")
GLOBEX = a_file(tenant="globex")


def a_job(
    file: StoredFile = ACME,
    job_type: JobType = JobType.VIRUS_SCAN,
    *,
    at: datetime = T0,
    priority: int = 0,
    key: str | None = None,
) -> ProcessingJob:
    return new_job(
        file,
        job_type,
        now=at,
        created_by="test",
        dispatch=DispatchPolicy(),
        idempotency_key=key or f"{file.id}:{job_type.value}:{at.isoformat()}:{priority}",
        priority=priority,
    )


def naming(stored: StoredFile, *jobs: ProcessingJob) -> StoredFile:
    """The file as its item is once these jobs were added to it (each job's id is ADDed to its
    file's `job_ids` in the write that puts the job)."""
    return replace(stored, job_ids=frozenset(job.id for job in jobs))


def created(store: JobStore, *jobs: ProcessingJob) -> list[ProcessingJob]:
    for job in jobs:
        assert store.create(job)
    return list(jobs)


def write(
    store: JobStore, job: ProcessingJob, transition: transitions.Transition
) -> TransitionResult:
    return store.apply(job.id, job.job_type, transition)


def applied(result: TransitionResult) -> ProcessingJob:
    assert isinstance(result, Applied), result
    return result.job


def claimed(store: JobStore, job: ProcessingJob, at: datetime = T0) -> ProcessingJob:
    return applied(write(store, job, transitions.claim(now=at, lease=LEASE, worker="w1")))


def finished(store: JobStore, job: ProcessingJob) -> ProcessingJob:
    running = claimed(store, job)
    return applied(
        write(store, running, transitions.complete(running, result={}, now=T0, retention=KEEP))
    )


def ids(jobs: list[ProcessingJob]) -> list[str]:
    return [job.id for job in jobs]


def every_page(read: Callable[[PageCursor | None], JobPage]) -> tuple[list[str], list[int]]:
    """The ids of every page in order, and each page's size, following the cursors.

    A filtered page reads a bounded part of each shard: it may end short (even empty) with a
    cursor past the entries the filter skipped; following the cursors still yields every match
    once, in order."""
    seen: list[str] = []
    sizes: list[int] = []
    cursor: PageCursor | None = None
    while True:
        page = read(cursor)
        seen += ids(page.jobs)
        sizes.append(len(page.jobs))
        if page.next is None:
            return seen, sizes
        assert page.next != cursor, "a cursor that does not move on"
        cursor = page.next
        assert len(sizes) < 50, "the cursors never end"


# --- create and get --------------------------------------------------------------------------


def test_a_created_job_is_read_back_as_it_was_stored(store: JobStore) -> None:
    job = a_job(priority=7)

    assert store.create(job)

    assert store.get(job.id) == job
    assert store.get(job.id, consistent=False) == job


def test_a_job_never_stored_reads_as_none(store: JobStore) -> None:
    assert store.get(str(uuid.uuid4())) is None


def test_creating_an_existing_id_again_returns_false_and_writes_nothing(store: JobStore) -> None:
    job = created(store, a_job())[0]
    again = a_job()
    again.priority = 50
    again.input_data = {"other": "request"}

    assert again.id == job.id
    assert store.create(again) is False
    assert store.get(job.id) == job


# --- transitions -----------------------------------------------------------------------------


def test_the_first_claim_wins_and_a_second_loses_as_taken_with_the_running_job(
    store: JobStore,
) -> None:
    job = created(store, a_job())[0]

    first = claimed(store, job)
    second = write(store, job, transitions.claim(now=T0, lease=LEASE, worker="w2"))

    assert (first.status, first.attempt, first.lease_expires_at) == (
        JobStatus.RUNNING,
        1,
        T0 + LEASE,
    )
    assert first.sweep_at == T0 + LEASE and first.scheduled_at is None
    assert first.metadata.updated_by == "w1"
    assert second == Lost(Conflict.TAKEN, first)
    assert store.get(job.id) == first


def test_a_transition_of_a_job_that_does_not_exist_loses_as_not_found(store: JobStore) -> None:
    ghost = a_job(key="never stored")

    result = write(store, ghost, transitions.claim(now=T0, lease=LEASE, worker="w1"))

    assert result == Lost(Conflict.NOT_FOUND, None)
    assert store.get(ghost.id) is None


def test_a_transition_for_another_job_type_loses_as_wrong_type(store: JobStore) -> None:
    job = created(store, a_job(job_type=JobType.VIRUS_SCAN))[0]
    claim = transitions.claim(now=T0, lease=LEASE, worker="w1")

    result = store.apply(job.id, JobType.THUMBNAIL_GENERATION, claim)

    assert result == Lost(Conflict.WRONG_TYPE, job)
    assert store.get(job.id) == job


def test_completing_after_a_cancel_loses_as_cancelled_and_the_job_stays_cancelled(
    store: JobStore,
) -> None:
    running = claimed(store, created(store, a_job())[0])
    cancel = transitions.cancel(now=T0, by="api", reason="not needed", retention=KEEP)
    cancelled = applied(write(store, running, cancel))

    done = transitions.complete(running, result={"ok": True}, now=T0, retention=KEEP)
    result = write(store, running, done)

    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.sweep_at is None and cancelled.lease_expires_at is None
    assert result == Lost(Conflict.CANCELLED, cancelled)
    assert store.get(running.id) == cancelled


def test_a_failure_with_a_retry_left_schedules_the_job_for_its_retry(store: JobStore) -> None:
    running = claimed(store, created(store, a_job())[0])
    retry_at = T0 + timedelta(seconds=30)

    failure = transitions.fail(
        running, error="TimeoutError: slow", now=T0, retry_at=retry_at, retention=KEEP
    )
    scheduled = applied(write(store, running, failure))

    assert scheduled.status is JobStatus.SCHEDULED
    assert (scheduled.scheduled_at, scheduled.sweep_at) == (retry_at, retry_at)
    assert scheduled.retry_count == 1 and scheduled.lease_expires_at is None
    assert scheduled.error_message == "TimeoutError: slow"
    assert scheduled.attempts[1].outcome is AttemptOutcome.RETRYING
    assert store.get(running.id) == scheduled


def test_a_scheduled_job_cannot_be_claimed_before_its_retry_is_due(store: JobStore) -> None:
    running = claimed(store, created(store, a_job())[0])
    retry_at = T0 + timedelta(minutes=1)
    failure = transitions.fail(running, error="slow", now=T0, retry_at=retry_at, retention=KEEP)
    scheduled = applied(write(store, running, failure))

    early = write(store, running, transitions.claim(now=T0, lease=LEASE, worker="w2"))
    on_time = claimed(store, running, at=retry_at)

    assert early == Lost(Conflict.NOT_DUE, scheduled)
    assert (on_time.status, on_time.attempt) == (JobStatus.RUNNING, 2)


def defer(job: ProcessingJob, now: datetime, until: datetime) -> transitions.Transition:
    return transitions.defer(
        now=now, until=until, dispatch_grace=GRACE, job_type=job.job_type, worker="w"
    )


def test_a_deferred_job_stays_pending_and_unclaimed_until_its_message_is_due_back(
    store: JobStore,
) -> None:
    # given a pending job whose tenant is at its cap
    job = created(store, a_job())[0]
    now, until = T0 + timedelta(seconds=5), T0 + timedelta(seconds=25)
    # when a worker defers it, then it is pending, no attempt spent, no dispatch counted
    deferred = applied(write(store, job, defer(job, now, until)))
    assert (deferred.status, deferred.attempt, deferred.dispatch_count) == (
        JobStatus.PENDING,
        0,
        job.dispatch_count,
    )
    assert (deferred.dispatched_at, deferred.sweep_at) == (until, until + GRACE)
    # and the sweep is not given it before its message is due back (and a grace after)
    assert list(store.due_for_sweep(until + GRACE - timedelta(microseconds=1))) == []
    assert ids(list(store.due_for_sweep(until + GRACE))) == [job.id]
    assert store.get(job.id) == deferred


def test_a_deferred_due_retry_is_pending_again_with_its_attempts_kept(store: JobStore) -> None:
    running = claimed(store, created(store, a_job())[0])
    retry_at = T0 + timedelta(minutes=1)
    failure = transitions.fail(running, error="slow", now=T0, retry_at=retry_at, retention=KEEP)
    scheduled = applied(write(store, running, failure))

    early = write(store, running, defer(running, T0, retry_at))
    deferred = applied(write(store, running, defer(running, retry_at, retry_at + GRACE)))

    assert early == Lost(Conflict.NOT_DUE, scheduled)
    assert (deferred.status, deferred.attempt, deferred.retry_count) == (JobStatus.PENDING, 1, 1)
    assert deferred.scheduled_at is None


def test_a_running_job_is_not_deferred(store: JobStore) -> None:
    running = claimed(store, created(store, a_job())[0])
    lost = write(store, running, defer(running, T0, T0 + GRACE))
    assert isinstance(lost, Lost) and lost.conflict is Conflict.TAKEN


def test_a_failure_without_a_retry_fails_the_job_for_good(store: JobStore) -> None:
    running = claimed(store, created(store, a_job())[0])

    failure = transitions.fail(running, error="corrupt", now=T0, retry_at=None, retention=KEEP)
    failed = applied(write(store, running, failure))

    assert failed.status is JobStatus.FAILED
    assert failed.sweep_at is None and failed.completed_at == T0
    assert failed.attempts[1].outcome is AttemptOutcome.FAILED


# --- listings --------------------------------------------------------------------------------


def test_a_files_jobs_are_listed_oldest_first_and_filtered_by_status(store: JobStore) -> None:
    scan = a_job(job_type=JobType.VIRUS_SCAN, at=T0)
    thumb = a_job(job_type=JobType.THUMBNAIL_GENERATION, at=T0 + timedelta(seconds=1))
    dedup = a_job(job_type=JobType.DEDUPLICATION_CHECK, at=T0 + timedelta(seconds=2))
    elsewhere = a_job(ACME_OTHER_FILE, at=T0 + timedelta(seconds=1))
    created(store, dedup, elsewhere, scan, thumb)  # stored newest first
    running = claimed(store, thumb)

    acme = naming(ACME, scan, thumb, dedup)
    assert store.jobs_of(acme) == [scan, running, dedup]
    assert ids(store.jobs_of(acme, JobStatus.PENDING)) == [scan.id, dedup.id]
    assert ids(store.jobs_of(acme, JobStatus.RUNNING)) == [thumb.id]
    assert store.jobs_of(acme, JobStatus.FAILED) == []
    assert store.jobs_of(naming(a_file(name="nothing-yet.jpg"))) == []


def test_the_jobs_a_files_item_cannot_name_are_listed_too(store: JobStore) -> None:
    # A file that names all the jobs it may (NAMED_JOBS_PER_FILE), and one recorded before files
    # named their jobs: their other jobs are found all the same.
    named = [
        a_job(key=f"rescan-{n}", at=T0 + timedelta(seconds=n)) for n in range(NAMED_JOBS_PER_FILE)
    ]
    unnamed = a_job(job_type=JobType.COMPRESSION, at=T0 + timedelta(minutes=5))
    other_tenant = a_job(GLOBEX, at=T0 + timedelta(minutes=5))
    created(store, *named, unnamed, other_tenant)

    assert store.jobs_of(naming(ACME, *named)) == [*named, unnamed]
    assert store.jobs_of(naming(ACME)) == [*named, unnamed]  # names none: every job found


def test_a_tenants_jobs_page_newest_first_with_nothing_repeated_or_left_out(
    store: JobStore,
) -> None:
    mine = [a_job(at=T0 + timedelta(minutes=n)) for n in range(7)]
    theirs = a_job(GLOBEX, at=T0 + timedelta(minutes=3))
    created(store, theirs, *mine)

    seen, sizes = every_page(lambda after: store.tenant_page("acme", after=after, limit=3))

    assert seen == ids(mine[::-1])
    assert sizes == [3, 3, 1]
    assert ids(store.tenant_page("globex").jobs) == [theirs.id]
    assert store.tenant_page("initech").jobs == []


def test_a_tenant_page_that_ends_exactly_at_its_limit_has_no_next_cursor(store: JobStore) -> None:
    mine = created(store, *(a_job(at=T0 + timedelta(minutes=n)) for n in range(3)))

    page = store.tenant_page("acme", limit=3)

    assert ids(page.jobs) == ids(mine[::-1])
    assert page.next is None


def test_jobs_created_at_the_same_instant_page_in_id_order_without_gaps(store: JobStore) -> None:
    # A file's jobs share their created_at: ties are broken by id, across pages too.
    # More jobs than the repository has tenant shards: some share a shard, and a sort key.
    same = [a_job(key=f"same instant {n}") for n in range(20)]
    created(store, *same)

    seen, sizes = every_page(lambda after: store.tenant_page("acme", after=after, limit=3))

    assert seen == sorted(ids(same), reverse=True)
    assert sizes == [3, 3, 3, 3, 3, 3, 2]


def test_a_tenant_page_filters_by_status_and_by_job_type_across_pages(store: JobStore) -> None:
    scans = [a_job(at=T0 + timedelta(minutes=n)) for n in range(5)]
    thumbs = [
        a_job(job_type=JobType.THUMBNAIL_GENERATION, at=T0 + timedelta(minutes=n, seconds=30))
        for n in range(5)
    ]
    created(store, *scans, *thumbs)
    running = [claimed(store, scans[1]), claimed(store, thumbs[3])]

    def by_status(after: PageCursor | None) -> JobPage:
        return store.tenant_page("acme", status=JobStatus.RUNNING, after=after, limit=1)

    def by_type(after: PageCursor | None) -> JobPage:
        kind = JobType.THUMBNAIL_GENERATION
        return store.tenant_page("acme", job_type=kind, after=after, limit=2)

    both = store.tenant_page("acme", status=JobStatus.PENDING, job_type=JobType.VIRUS_SCAN)

    assert every_page(by_status)[0] == [thumbs[3].id, scans[1].id]
    assert store.tenant_page("acme", status=JobStatus.RUNNING).jobs == running[::-1]
    assert every_page(by_type)[0] == ids(thumbs[::-1])
    assert ids(both.jobs) == [scans[4].id, scans[3].id, scans[2].id, scans[0].id]


def test_one_status_is_listed_in_queue_order_across_tenants_and_types(store: JobStore) -> None:
    low_old = a_job(at=T0, priority=-1, key="low")
    normal_old = a_job(GLOBEX, at=T0 + timedelta(minutes=1))
    normal_new = a_job(job_type=JobType.COMPRESSION, at=T0 + timedelta(minutes=2))
    urgent_new = a_job(job_type=JobType.COMPRESSION, at=T0 + timedelta(minutes=5), priority=9)
    urgent_old = a_job(GLOBEX, at=T0 + timedelta(minutes=4), priority=9)
    taken = a_job(at=T0 + timedelta(minutes=3), key="taken")
    created(store, low_old, normal_new, urgent_new, taken, normal_old, urgent_old)
    running = claimed(store, taken)
    queue = [urgent_old, urgent_new, normal_old, normal_new, low_old]

    seen, sizes = every_page(
        lambda after: store.status_page(JobStatus.PENDING, after=after, limit=2)
    )

    assert seen == ids(queue)
    assert sizes == [2, 2, 1]
    assert store.status_page(JobStatus.RUNNING).jobs == [running]
    compression = store.status_page(JobStatus.PENDING, job_type=JobType.COMPRESSION)
    assert ids(compression.jobs) == [urgent_new.id, normal_new.id]


def test_a_cursor_no_listing_could_have_returned_is_refused(store: JobStore) -> None:
    created(store, a_job())
    forged = PageCursor("yesterday", str(uuid.uuid4()))
    empty = PageCursor("", str(uuid.uuid4()))

    with pytest.raises(InvalidCursorError):
        store.tenant_page("acme", after=forged)
    with pytest.raises(InvalidCursorError):
        store.status_page(JobStatus.PENDING, after=empty)
    with pytest.raises(InvalidCursorError):
        store.status_page(JobStatus.PENDING, after=PageCursor("x" * 1025, forged.id))


def test_the_sweep_is_given_only_the_jobs_whose_check_is_due(store: JobStore) -> None:
    now = T0 + timedelta(minutes=10)
    # A new job's check is due `grace` after its creation.
    long_due = a_job(at=now - GRACE - timedelta(minutes=5))
    just_due = a_job(at=now - GRACE, key="due right now")
    not_yet = a_job(at=now - GRACE + timedelta(seconds=1))
    done = a_job(at=T0 - timedelta(hours=1), key="done")
    created(store, long_due, just_due, not_yet, done)
    finished(store, done)

    due = list(store.due_for_sweep(now))

    assert sorted(ids(due)) == sorted([long_due.id, just_due.id])
    assert {job.id: job for job in due} == {long_due.id: long_due, just_due.id: just_due}
    assert list(store.due_for_sweep(T0 - timedelta(days=1))) == []


def test_a_running_job_is_due_for_the_sweep_when_its_lease_runs_out(store: JobStore) -> None:
    running = claimed(store, created(store, a_job())[0])

    before = ids(list(store.due_for_sweep(T0 + LEASE - timedelta(microseconds=1))))
    at_expiry = list(store.due_for_sweep(T0 + LEASE))

    assert before == []
    assert at_expiry == [running]


def test_a_deleted_job_leaves_the_listings_and_no_transition_takes_it(store: JobStore) -> None:
    gone, kept = created(store, a_job(), a_job(at=T0 + timedelta(seconds=1)))
    done = finished(store, gone)
    finished(store, kept)

    deleted = applied(write(store, done, transitions.delete(now=T0, by="api")))
    retry = transitions.retry(now=T0, by="api", dispatch_grace=GRACE)

    assert deleted.metadata.deleted_at == T0 and deleted.metadata.deleted_by == "api"
    assert store.get(gone.id) == deleted  # the item stays (until TTL), marked deleted
    assert write(store, done, retry) == Lost(Conflict.DELETED, deleted)
    assert ids(store.tenant_page("acme").jobs) == [kept.id]
    assert ids(store.status_page(JobStatus.COMPLETED).jobs) == [kept.id]
    assert list(store.due_for_sweep(T0 + timedelta(days=365))) == []


def test_a_deleted_job_leaves_its_files_jobs_too(store: JobStore) -> None:
    # The file's item still names it: the store leaves the deleted job out of the answer, so no
    # reader of a file's jobs has to.
    done = finished(store, created(store, a_job())[0])
    deleted = applied(write(store, done, transitions.delete(now=T0, by="api")))

    assert store.jobs_of(naming(ACME, done)) == []
    assert store.get(deleted.id) == deleted


def test_an_explicit_retry_is_taken_only_below_its_attempt_ceiling(store: JobStore) -> None:
    # Given a job that failed for good on its first attempt
    running = claimed(store, created(store, a_job())[0])
    failing = transitions.fail(running, error="corrupt", now=T0, retry_at=None, retention=KEEP)
    done = applied(write(store, running, failing))
    assert (done.status, done.attempt) == (JobStatus.FAILED, 1)

    def retry(below: int) -> transitions.Transition:
        return transitions.retry(now=T0, by="api", dispatch_grace=GRACE, attempts_below=below)

    # When it is retried with a ceiling it has reached: refused, and nothing changed
    assert write(store, done, retry(1)) == Lost(Conflict.ATTEMPTS_SPENT, done)
    assert store.get(done.id) == done
    # And with one above: retried
    assert applied(write(store, done, retry(2))).status is JobStatus.PENDING


# --- copies ----------------------------------------------------------------------------------


def test_changing_a_job_the_store_returned_changes_nothing_stored(store: JobStore) -> None:
    job = created(store, a_job())[0]
    original = store.get(job.id)
    assert original is not None

    for returned in [
        store.get(job.id),
        claimed(store, job),
        store.jobs_of(naming(ACME, job))[0],
        store.tenant_page("acme").jobs[0],
        store.status_page(JobStatus.RUNNING).jobs[0],
        next(iter(store.due_for_sweep(T0 + timedelta(days=1)))),
    ]:
        assert returned is not None
        returned.status = JobStatus.FAILED
        returned.metadata.updated_by = "someone else"
        assert returned.input_data is not None
        returned.input_data["key"] = "changed"
        returned.attempts.clear()

    stored = store.get(job.id)
    assert stored is not None
    assert stored.status is JobStatus.RUNNING
    assert stored.metadata.updated_by == "w1"
    assert stored.input_data == original.input_data


def test_changing_a_job_after_creating_it_changes_nothing_stored(store: JobStore) -> None:
    job = a_job()
    expected = a_job()
    created(store, job)

    job.priority = 99
    assert job.input_data is not None
    job.input_data["key"] = "changed"

    assert store.get(job.id) == expected
