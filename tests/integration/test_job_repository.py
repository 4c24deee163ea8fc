"""JobRepository against DynamoDB (moto): every transition is one conditional write.

Lost races come back as typed outcomes, learned from the item DynamoDB returns on a failed
condition; the database itself refuses what the state machine refuses.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import ATTEMPT_HISTORY_LIMIT, JobStatus, JobType, ProcessingJob
from filejobs.domain.transition_result import Applied, Lost, TransitionResult
from filejobs.domain.transitions import Conflict
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.listing import jobs_of_file

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)


@pytest.fixture
def repo(tables: dict[str, str]) -> JobRepository:
    return JobRepository()


@pytest.fixture
def plan(tables: dict[str, str], clock: FakeClock) -> IngestPlan:
    plan = ingest_plan(clock.now, "image/tiff")
    FileRepository().record_ingest(plan)
    return plan


@pytest.fixture
def job(plan: IngestPlan) -> ProcessingJob:
    return plan.jobs[0]


def write(
    repo: JobRepository, job: ProcessingJob, transition: transitions.Transition
) -> TransitionResult:
    return repo.apply(job.id, job.job_type, transition)


def applied(result: TransitionResult) -> ProcessingJob:
    assert isinstance(result, Applied), result
    return result.job


def lost(result: TransitionResult) -> Lost:
    assert isinstance(result, Lost), result
    return result


def claim(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock, worker: str = "w1"
) -> TransitionResult:
    return write(repo, job, transitions.claim(now=clock.now, lease=LEASE, worker=worker))


def raw_item(tables: dict[str, str], job_id: str) -> dict[str, Any]:
    item = boto3.client("dynamodb").get_item(
        TableName=tables["JobsTable"], Key={"id": {"S": job_id}}, ConsistentRead=True
    )
    return item.get("Item", {})


def test_a_claim_returns_the_running_job_with_its_lease(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    running = applied(claim(repo, job, clock))

    assert running.status is JobStatus.RUNNING
    assert running.attempt == 1
    assert running.started_at == clock.now
    assert running.lease_expires_at == clock.now + LEASE
    assert running.input_data == job.input_data, "the claim returns everything a worker needs"
    assert repo.get(job.id) == running


def test_only_one_of_two_claims_wins(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    applied(claim(repo, job, clock, "w1"))

    second = lost(claim(repo, job, clock, "w2"))

    assert second.conflict is Conflict.TAKEN
    assert second.current is not None and second.current.metadata.updated_by == "w1"


def test_claiming_a_job_that_does_not_exist_creates_nothing(
    repo: JobRepository, tables: dict[str, str], clock: FakeClock
) -> None:
    ghost = "00000000-0000-4000-8000-000000000000"
    result = lost(
        repo.apply(
            ghost, JobType.VIRUS_SCAN, transitions.claim(now=clock.now, lease=LEASE, worker="w")
        )
    )

    assert result.conflict is Conflict.NOT_FOUND
    assert raw_item(tables, ghost) == {}


def test_a_worker_of_another_type_cannot_claim_the_job(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    wrong = transitions.claim(now=clock.now, lease=LEASE, worker="w", job_type=JobType.COMPRESSION)
    assert lost(write(repo, job, wrong)).conflict is Conflict.WRONG_TYPE
    assert current(repo, job.id).status is JobStatus.PENDING


def test_completion_stores_the_result_and_the_attempt(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    running = applied(claim(repo, job, clock))
    clock.advance(timedelta(seconds=3))

    done = applied(
        write(
            repo,
            job,
            transitions.complete(
                running, result={"sha256": "ab" * 32, "n": 3}, now=clock.now, retention=KEEP
            ),
        )
    )

    assert done.status is JobStatus.COMPLETED
    assert done.result_data == {"sha256": "ab" * 32, "n": 3}
    assert done.duration() == timedelta(seconds=3)
    assert done.sweep_at is None and done.lease_expires_at is None
    assert done.attempts[1].ended_at == clock.now
    assert done.invariant_violations() == []


def test_cancel_wins_and_the_workers_result_is_discarded(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    running = applied(claim(repo, job, clock))
    applied(
        write(
            repo,
            job,
            transitions.cancel(now=clock.now, by="alice", reason="changed my mind", retention=KEEP),
        )
    )

    late = lost(
        write(
            repo,
            job,
            transitions.complete(running, result={"x": 1}, now=clock.now, retention=KEEP),
        )
    )

    assert late.conflict is Conflict.CANCELLED
    stored = repo.get(job.id)
    assert stored is not None
    assert stored.status is JobStatus.CANCELLED and stored.result_data is None
    assert (stored.cancelled_by, stored.cancel_reason) == ("alice", "changed my mind")


def test_a_worker_that_lost_its_lease_cannot_overwrite_the_new_attempt(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    # Given worker 1 claimed attempt 1 and stalled past its lease
    stale = applied(claim(repo, job, clock, "w1"))
    clock.advance(LEASE + timedelta(seconds=1))
    # When the sweep recovers the job and worker 2 claims and completes attempt 2
    recovered = applied(
        write(
            repo,
            job,
            transitions.recover_lease(stale, now=clock.now, retry_at=clock.now, retention=KEEP),
        )
    )
    assert recovered.status is JobStatus.SCHEDULED and recovered.retry_count == 1
    fresh = applied(claim(repo, job, clock, "w2"))
    applied(
        write(
            repo,
            job,
            transitions.complete(fresh, result={"by": "w2"}, now=clock.now, retention=KEEP),
        )
    )

    # Then worker 1's late completion loses as a stale attempt and changes nothing
    late = lost(
        write(
            repo,
            job,
            transitions.complete(stale, result={"by": "w1"}, now=clock.now, retention=KEEP),
        )
    )
    assert late.conflict is Conflict.STALE_ATTEMPT
    stored = repo.get(job.id)
    assert stored is not None and stored.result_data == {"by": "w2"}


def test_the_database_refuses_a_retry_past_max_retries(
    repo: JobRepository, job: ProcessingJob, tables: dict[str, str], clock: FakeClock
) -> None:
    # Given a worker whose view says a retry is left, while the stored job has none
    running = applied(claim(repo, job, clock))
    boto3.client("dynamodb").update_item(
        TableName=tables["JobsTable"],
        Key={"id": {"S": job.id}},
        UpdateExpression="SET retry_count = max_retries",
    )
    assert running.can_retry()

    # When it asks to schedule a retry, the condition (retry_count < max_retries) refuses
    result = lost(
        write(
            repo,
            job,
            transitions.fail(
                running, error="boom", now=clock.now, retry_at=clock.now, retention=KEEP
            ),
        )
    )

    assert result.conflict is Conflict.RETRIES_EXHAUSTED
    stored = repo.get(job.id)
    assert stored is not None and stored.retry_count == stored.max_retries
    assert stored.status is JobStatus.RUNNING


def test_a_soft_deleted_job_takes_no_transition(
    repo: JobRepository, job: ProcessingJob, tables: dict[str, str], clock: FakeClock
) -> None:
    boto3.client("dynamodb").update_item(
        TableName=tables["JobsTable"],
        Key={"id": {"S": job.id}},
        UpdateExpression="SET deleted_at = :t, deleted_by = :u",
        ExpressionAttributeValues={
            ":t": {"S": "2026-11-29T12:00:00.000000+0000"},
            ":u": {"S": "ops"},
        },
    )
    assert lost(claim(repo, job, clock)).conflict is Conflict.DELETED


def test_a_deleted_job_leaves_the_listing_indexes_in_the_same_write(
    repo: JobRepository, job: ProcessingJob, tables: dict[str, str], clock: FakeClock
) -> None:
    cancel = transitions.cancel(now=clock.now, by="ops", reason="x", retention=KEEP)
    applied(write(repo, job, cancel))

    applied(write(repo, job, transitions.delete(now=clock.now, by="ops")))

    item = boto3.client("dynamodb").get_item(
        TableName=tables["JobsTable"], Key={"id": {"S": job.id}}
    )["Item"]
    # the by_tenant and by_status_type indexes are sparse: without their keys no listing reads it
    assert "tenant_shard" not in item and "status_type_shard" not in item
    assert item["deleted_by"] == {"S": "ops"} and item["status"] == {"S": "cancelled"}


def test_heartbeat_moves_the_lease_and_the_sweep_check(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    running = applied(claim(repo, job, clock))
    clock.advance(timedelta(minutes=4))

    beat = applied(
        write(
            repo,
            job,
            transitions.heartbeat(running, now=clock.now, lease=LEASE, worker="w1"),
        )
    )

    assert beat.lease_expires_at == clock.now + LEASE == beat.sweep_at
    due = repo.due_for_sweep(clock.now + timedelta(minutes=1))
    assert job.id not in {j.id for j in due}, "the renewed lease is not due yet"


def test_the_attempt_history_stays_bounded_in_the_table(
    repo: JobRepository, job: ProcessingJob, tables: dict[str, str], clock: FakeClock
) -> None:
    boto3.client("dynamodb").update_item(
        TableName=tables["JobsTable"],
        Key={"id": {"S": job.id}},
        UpdateExpression="SET max_retries = :m",
        ExpressionAttributeValues={":m": {"N": "25"}},
    )
    for _ in range(ATTEMPT_HISTORY_LIMIT + 3):
        running = applied(claim(repo, job, clock))
        applied(
            write(
                repo,
                job,
                transitions.fail(
                    running,
                    error=f"attempt {running.attempt}",
                    now=clock.now,
                    retry_at=clock.now,
                    retention=KEEP,
                ),
            )
        )

    stored = repo.get(job.id)
    assert stored is not None
    assert sorted(stored.attempts) == list(range(4, ATTEMPT_HISTORY_LIMIT + 4))
    assert stored.attempts[13].error == "attempt 13"


def test_an_explicit_retry_reopens_a_failed_job_and_keeps_its_history(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    running = applied(claim(repo, job, clock))
    applied(
        write(
            repo,
            job,
            transitions.fail(
                running, error="corrupt", now=clock.now, retry_at=None, retention=KEEP
            ),
        )
    )

    reopened = applied(
        write(repo, job, transitions.retry(now=clock.now, by="bob", dispatch_grace=LEASE))
    )

    assert reopened.status is JobStatus.PENDING and reopened.expires_at is None
    assert reopened.attempts[1].error == "corrupt"
    assert applied(claim(repo, job, clock)).attempt == 2


def test_requeueing_a_due_scheduled_job_wins_once(
    repo: JobRepository, job: ProcessingJob, clock: FakeClock
) -> None:
    running = applied(claim(repo, job, clock))
    applied(
        write(
            repo,
            job,
            transitions.fail(running, error="x", now=clock.now, retry_at=clock.now, retention=KEEP),
        )
    )
    promote = transitions.requeue_scheduled(now=clock.now, dispatch_grace=LEASE)

    first = write(repo, job, promote)
    second = write(repo, job, promote)

    assert applied(first).status is JobStatus.PENDING
    assert lost(second).conflict is Conflict.CHANGED


# --- access patterns ---------------------------------------------------------------------------


def current(repo: JobRepository, job_id: str) -> ProcessingJob:
    job = repo.get(job_id)
    assert job is not None
    return job


def test_the_sweep_reads_only_jobs_that_need_attention(
    repo: JobRepository, tables: dict[str, str], clock: FakeClock
) -> None:
    # Given a finished job, a running one with a live lease, a running one whose lease expired,
    # a pending one past its dispatch grace and a scheduled one that is due
    files = FileRepository()
    plans = [ingest_plan(clock.now, "application/x-empty", name=f"f{i}") for i in range(5)]
    for plan in plans:
        files.record_ingest(plan)
    finished, live, expired, _pending, due = (p.jobs[0] for p in plans)
    for j in (finished, live, expired, due):
        applied(claim(repo, j, clock))
    done = transitions.complete(
        current(repo, finished.id), result={}, now=clock.now, retention=KEEP
    )
    applied(write(repo, finished, done))
    in_a_minute = clock.now + timedelta(minutes=1)
    retry = transitions.fail(
        current(repo, due.id), error="x", now=clock.now, retry_at=in_a_minute, retention=KEEP
    )
    applied(write(repo, due, retry))
    beat = transitions.heartbeat(
        current(repo, live.id), now=clock.now + timedelta(minutes=5), lease=LEASE, worker="w"
    )
    applied(write(repo, live, beat))

    # When the sweep looks 6 minutes later
    found = {j.id: j.status for j in repo.due_for_sweep(clock.now + timedelta(minutes=6))}

    # Then it sees the expired lease, the due retry and the unclaimed pending jobs, and nothing else
    unclaimed = {plans[3].jobs[0].id} | {p.jobs[1].id for p in plans}
    assert found == {
        expired.id: JobStatus.RUNNING,
        due.id: JobStatus.SCHEDULED,
        **dict.fromkeys(unclaimed, JobStatus.PENDING),
    }
    assert finished.id not in found and live.id not in found
    # And 30 seconds in, before any grace, retry or lease is up, nothing is due at all
    assert list(repo.due_for_sweep(clock.now + timedelta(seconds=30))) == []


def test_jobs_of_a_file_optionally_by_status(
    repo: JobRepository, plan: IngestPlan, clock: FakeClock
) -> None:
    first = plan.jobs[0]
    applied(claim(repo, first, clock))

    all_jobs = jobs_of_file(plan.file.id)
    running = jobs_of_file(plan.file.id, JobStatus.RUNNING)

    assert {j.id for j in all_jobs} == {j.id for j in plan.jobs}
    assert [j.id for j in running] == [first.id]


def test_jobs_by_status_come_highest_priority_first_then_oldest(
    repo: JobRepository, tables: dict[str, str], clock: FakeClock
) -> None:
    files = FileRepository()
    order = []
    for name, priority in [
        ("old-low", 0),
        ("old-high", 5),
        ("new-high", 5),
        ("new-low", 0),
        ("urgent", 9),
    ]:
        plan = ingest_plan(clock.now, "application/x-empty", name=name)
        for j in plan.jobs:
            j.priority = priority
        files.record_ingest(plan)
        order.append((name, plan.jobs[0].id))
        clock.advance(timedelta(seconds=1))
    by_name = dict(order)

    queue = repo.jobs_by_status(JobStatus.PENDING, job_type=JobType.VIRUS_SCAN)

    assert [j.id for j in queue] == [
        by_name[n] for n in ("urgent", "old-high", "new-high", "old-low", "new-low")
    ]
    assert len(repo.jobs_by_status(JobStatus.PENDING)) == 10, "both job types of each file"
    assert len(repo.jobs_by_status(JobStatus.PENDING, limit=3)) == 3


def test_a_tenants_recent_jobs_come_newest_first_and_only_its_own(
    repo: JobRepository, tables: dict[str, str], clock: FakeClock
) -> None:
    files = FileRepository()
    start = clock.now
    for i in range(4):
        files.record_ingest(
            ingest_plan(clock.now, "application/x-empty", name=f"a{i}", tenant="acme")
        )
        files.record_ingest(
            ingest_plan(clock.now, "application/x-empty", name=f"b{i}", tenant="umbrella")
        )
        clock.advance(timedelta(minutes=1))

    recent = repo.recent_jobs("acme", limit=3)
    since = repo.recent_jobs("acme", since=start + timedelta(minutes=2))

    assert len(recent) == 3 and {j.tenant for j in recent} == {"acme"}
    created = [j.metadata.created_at for j in recent]
    assert created == sorted(created, reverse=True)
    assert created[0] == start + timedelta(minutes=3)
    assert {j.metadata.created_at for j in since} == {start + timedelta(minutes=m) for m in (2, 3)}
    assert len(since) == 4


def test_a_file_is_found_by_bucket_and_key_newest_version_first(
    tables: dict[str, str], clock: FakeClock
) -> None:
    files = FileRepository()
    v1 = ingest_plan(clock.now, "text/plain", version_id="v1")
    clock.advance(timedelta(seconds=1))
    v2 = ingest_plan(clock.now, "text/plain", version_id="v2")
    files.record_ingest(v1)
    files.record_ingest(v2)

    versions = files.versions_of("uploads-bucket", "uploads/acme/photo.jpg")

    assert [f.version_id for f in versions] == ["v2", "v1"]
    assert files.get(v1.file.id) == v1.file
