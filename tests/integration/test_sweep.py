"""The sweep: promotes due retries, re-dispatches lost messages, recovers lost leases."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from filejobs.adapters.sqs import SqsDeadLetters
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import JobModel
from filejobs.domain import transitions
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import DispatchPolicy, RetryPolicy
from filejobs.domain.transition_result import Applied
from filejobs.ports import UnreadableItem
from filejobs.services.scan_gate import ScanGate
from filejobs.services.sweep import DeadLetterReview, SweepService
from tests.aws_requests import counting_requests
from tests.conftest import FakeClock
from tests.factories import ingest_plan

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)
RETRY = RetryPolicy(base=timedelta(seconds=10), cap=timedelta(minutes=5))
DISPATCH = DispatchPolicy(grace=timedelta(minutes=2), cap=timedelta(minutes=8), max_dispatches=3)


class RecordingDispatcher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, JobStatus, timedelta]] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent.append((job.id, job.status, delay))


@pytest.fixture
def dispatcher() -> RecordingDispatcher:
    return RecordingDispatcher()


@pytest.fixture
def repo(tables: dict[str, str]) -> JobRepository:
    return JobRepository()


def sweep_of(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> SweepService:
    return SweepService(
        repo, dispatcher, clock=clock, retry_policy=RETRY, dispatch_policy=DISPATCH, retention=KEEP
    )


def new_job(clock: FakeClock, name: str = "f") -> ProcessingJob:
    plan = ingest_plan(clock.now, "application/x-empty", name=name)
    FileRepository().record_ingest(plan)
    return plan.jobs[0]


def claimed(repo: JobRepository, job: ProcessingJob, now: datetime) -> ProcessingJob:
    result = repo.apply(job.id, job.job_type, transitions.claim(now=now, lease=LEASE, worker="w"))
    assert isinstance(result, Applied)
    return result.job


def stored(repo: JobRepository, job: ProcessingJob) -> ProcessingJob:
    found = repo.get(job.id)
    assert found is not None
    return found


def test_a_due_retry_is_promoted_and_dispatched_once(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    # Given a job scheduled for a retry whose delayed message never arrived
    job = new_job(clock)
    running = claimed(repo, job, clock.now)
    fail = transitions.fail(running, error="x", now=clock.now, retry_at=clock.now, retention=KEEP)
    repo.apply(job.id, job.job_type, fail)
    clock.advance(timedelta(seconds=1))

    # When the sweep runs twice
    first = sweep_of(repo, dispatcher, clock).run()
    second = sweep_of(repo, dispatcher, clock).run()

    # Then the job is pending again and was dispatched exactly once
    assert first.actions["promoted"] == 1
    assert second.actions["promoted"] == 0
    assert stored(repo, job).status is JobStatus.PENDING
    assert [(i, s) for i, s, _ in dispatcher.sent].count((job.id, JobStatus.PENDING)) == 1


class SnapshotRepository(JobRepository):
    """Two sweeps that both read the index before either wrote: they see the same snapshot."""

    def __init__(self, snapshot: list[ProcessingJob]) -> None:
        self._snapshot = snapshot

    def due_for_sweep(
        self, now: datetime, *, per_shard: int = 100, on_unreadable: UnreadableItem | None = None
    ) -> Iterator[ProcessingJob]:
        yield from (job.copy() for job in self._snapshot)


def test_overlapping_sweeps_never_double_dispatch(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    jobs = [new_job(clock, f"f{i}") for i in range(3)]
    clock.advance(DISPATCH.grace + timedelta(seconds=1))
    snapshot = list(repo.due_for_sweep(clock.now))
    assert {j.id for j in jobs} <= {j.id for j in snapshot}

    reports = [sweep_of(SnapshotRepository(snapshot), dispatcher, clock).run() for _ in range(2)]

    sent = [job_id for job_id, _, _ in dispatcher.sent]
    assert sorted(sent) == sorted({j.id for j in snapshot})
    assert reports[1].lost_races == len(snapshot)


def test_an_unclaimed_job_is_redispatched_with_growing_gaps_then_given_up(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    job = new_job(clock)
    sweep = sweep_of(repo, dispatcher, clock)
    gaps = []
    for _ in range(DISPATCH.max_dispatches):
        clock.now = stored(repo, job).sweep_at  # type: ignore[assignment]
        before = clock.now
        assert sweep.run().actions["redispatched"] >= 1
        gaps.append(stored(repo, job).sweep_at - before)  # type: ignore[operator]

    clock.now = stored(repo, job).sweep_at  # type: ignore[assignment]
    assert sweep.run().actions["abandoned"] >= 1

    assert gaps == [timedelta(minutes=m) for m in (2, 4, 8)]
    given_up = stored(repo, job)
    assert given_up.status is JobStatus.FAILED
    assert given_up.error_message is not None
    assert "never claimed" in given_up.error_message
    assert given_up.job_type.value in given_up.error_message
    assert given_up.invariant_violations() == []


def test_a_lost_lease_is_a_failed_attempt_retried_with_backoff(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    job = new_job(clock)
    claimed(repo, job, clock.now)
    clock.advance(LEASE + timedelta(seconds=1))

    report = sweep_of(repo, dispatcher, clock).run()

    recovered = stored(repo, job)
    assert report.actions["recovered"] == 1
    assert recovered.status is JobStatus.SCHEDULED
    assert recovered.retry_count == 1
    assert recovered.error_message is not None
    assert "lost its lease" in recovered.error_message
    assert recovered.scheduled_at is not None
    sent_delay = next(d for i, s, d in dispatcher.sent if i == job.id)
    assert sent_delay == recovered.scheduled_at - clock.now <= RETRY.delay(1, lambda: 1.0)


def test_a_lost_lease_with_no_retry_left_fails_with_a_reason(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    job = new_job(clock)
    for _ in range(job.max_retries):
        claimed(repo, job, clock.now)
        clock.advance(LEASE + timedelta(seconds=1))
        sweep_of(repo, dispatcher, clock).run()
        clock.now = stored(repo, job).scheduled_at  # type: ignore[assignment]
    claimed(repo, job, clock.now)
    clock.advance(LEASE + timedelta(seconds=1))

    sweep_of(repo, dispatcher, clock).run()

    failed = stored(repo, job)
    assert failed.status is JobStatus.FAILED
    assert failed.retry_count == failed.max_retries
    assert failed.error_message is not None
    assert "no retries left" in failed.error_message
    assert len(failed.attempts) == failed.max_retries + 1


class FlakyRepository(JobRepository):
    def __init__(self, broken_id: str) -> None:
        self._broken = broken_id

    def apply(self, job_id, job_type, transition):  # type: ignore[no-untyped-def]
        if job_id == self._broken:
            raise TimeoutError("DynamoDB did not answer")
        return super().apply(job_id, job_type, transition)


def test_one_failing_item_does_not_stop_the_sweep(
    tables: dict[str, str], dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    broken, fine = new_job(clock, "broken"), new_job(clock, "fine")
    clock.advance(DISPATCH.grace + timedelta(seconds=1))

    report = sweep_of(FlakyRepository(broken.id), dispatcher, clock).run()

    assert report.errors == 1
    assert fine.id in {i for i, _, _ in dispatcher.sent}
    assert broken.id not in {i for i, _, _ in dispatcher.sent}


def test_the_sweep_reads_no_finished_job(
    repo: JobRepository, dispatcher: RecordingDispatcher, clock: FakeClock
) -> None:
    # Given 60 finished jobs and 3 due ones
    for i in range(60):
        running = claimed(repo, new_job(clock, f"done-{i}"), clock.now)
        done = transitions.complete(running, result={}, now=clock.now, retention=KEEP)
        repo.apply(running.id, running.job_type, done)
    due = [claimed(repo, new_job(clock, f"due-{i}"), clock.now) for i in range(3)]
    clock.advance(LEASE + timedelta(seconds=1))

    # When the sweep runs, counting the items its queries read
    scanned: list[int] = []

    def count_items(parsed: dict[str, int], **_: object) -> None:
        scanned.append(parsed.get("ScannedCount", 0))

    with counting_requests() as requests:
        client = repo_client()
        client.meta.events.register("after-call.dynamodb.Query", count_items)
        try:
            report = sweep_of(repo, dispatcher, clock).run()
        finally:
            client.meta.events.unregister("after-call.dynamodb.Query", count_items)

    # Then it read only what needed attention: the 3 expired leases and the other unclaimed jobs
    unclaimed = 60 + 3  # every file also has a deduplication job nobody claimed in this test
    assert sum(scanned) == len(due) + unclaimed
    assert report.actions["recovered"] == len(due)
    assert requests.calls["dynamodb:Query"] == len(scanned)


def repo_client() -> Any:
    """The botocore client behind the JobModel: what the repository's requests go through."""
    return JobModel._get_connection().connection.client


# --- dead letters ----------------------------------------------------------------------------


@pytest.fixture
def dead_letter_queue(aws: None) -> str:
    sqs = boto3.client("sqs")
    return sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]


def dead_letter(url: str, body: str) -> None:
    boto3.client("sqs").send_message(QueueUrl=url, MessageBody=body)


def letters_in(url: str) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def review_of(
    repo: JobRepository, url: str, job: ProcessingJob, clock: FakeClock
) -> DeadLetterReview:
    letters = SqsDeadLetters(boto3.client("sqs"), {job.job_type: url})
    return DeadLetterReview(repo, letters, clock=clock, retention=KEEP)


def test_a_pending_job_whose_message_was_dead_lettered_is_failed_with_the_reason(
    repo: JobRepository, clock: FakeClock, dead_letter_queue: str
) -> None:
    # Given a pending job whose message its queue gave up on
    job = new_job(clock)
    dead_letter(dead_letter_queue, JobMessage.for_job(job).to_json())
    # When the sweep reviews the dead letters
    outcomes = review_of(repo, dead_letter_queue, job, clock).run()
    # Then the job failed, saying why, and the letter is gone: the job carries the outcome
    assert outcomes == {"dead_lettered_jobs_failed": 1}
    failed = stored(repo, job)
    assert failed.status is JobStatus.FAILED
    assert "moved to the dead-letter queue" in (failed.error_message or "")
    assert failed.expires_at is not None
    assert letters_in(dead_letter_queue) == 0
    # and a second review finds nothing to do
    assert review_of(repo, dead_letter_queue, job, clock).run() == {}


def test_a_dead_lettered_scan_settles_the_jobs_waiting_on_its_verdict(
    repo: JobRepository, clock: FakeClock, dead_letter_queue: str, dispatcher: RecordingDispatcher
) -> None:
    # Given an image whose scan message its queue gave up on, the thumbnail waiting on it
    plan = ingest_plan(clock.now, "image/png")
    FileRepository().record_ingest(plan)
    scan = next(j for j in plan.jobs if j.job_type is JobType.VIRUS_SCAN)
    thumbnail = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    dead_letter(dead_letter_queue, JobMessage.for_job(scan).to_json())
    gate = ScanGate(FileRepository(), repo, dispatcher, retention=KEEP, clock=clock)
    letters = SqsDeadLetters(boto3.client("sqs"), {JobType.VIRUS_SCAN: dead_letter_queue})
    # When the sweep reviews the dead letters
    review = DeadLetterReview(repo, letters, held=gate, clock=clock, retention=KEEP)
    assert review.run() == {"dead_lettered_jobs_failed": 1}
    # Then the scan failed and the thumbnail, which no verdict will release, was cancelled
    assert stored(repo, scan).status is JobStatus.FAILED
    assert stored(repo, thumbnail).status is JobStatus.CANCELLED
    assert dispatcher.sent == []


def test_a_dead_letter_of_a_running_job_is_left(
    repo: JobRepository, clock: FakeClock, dead_letter_queue: str
) -> None:
    # Given a job a worker is running (another copy of its message got through)
    running = claimed(repo, new_job(clock, "a"), clock.now)
    dead_letter(dead_letter_queue, JobMessage.for_job(running).to_json())
    # When the sweep reviews its dead letter, then the job runs on and the letter stays
    assert review_of(repo, dead_letter_queue, running, clock).run() == {"dead_letters_left": 1}
    assert stored(repo, running).status is JobStatus.RUNNING
    assert letters_in(dead_letter_queue) == 1


def test_a_dead_letter_of_a_finished_job_is_settled_without_touching_the_job(
    repo: JobRepository, clock: FakeClock, dead_letter_queue: str
) -> None:
    job = claimed(repo, new_job(clock, "b"), clock.now)
    done = repo.apply(
        job.id,
        job.job_type,
        transitions.complete(job, result={"ok": True}, now=clock.now, retention=KEEP),
    )
    assert isinstance(done, Applied)
    dead_letter(dead_letter_queue, JobMessage.for_job(job).to_json())
    assert review_of(repo, dead_letter_queue, job, clock).run() == {"dead_letters_settled": 1}
    assert stored(repo, job).status is JobStatus.COMPLETED
    assert letters_in(dead_letter_queue) == 0


def test_an_unreadable_dead_letter_is_left_for_a_person(
    repo: JobRepository, clock: FakeClock, dead_letter_queue: str
) -> None:
    job = new_job(clock, "c")
    dead_letter(dead_letter_queue, "not a job message")
    assert review_of(repo, dead_letter_queue, job, clock).run() == {"unreadable_letters": 1}
    assert stored(repo, job).status is JobStatus.PENDING
    assert letters_in(dead_letter_queue) == 1


# --- items no job can be read from -----------------------------------------------------------


def corrupt(job: ProcessingJob, damage: Callable[[dict[str, Any]], None]) -> None:
    """The job's item rewritten as raw DynamoDB data, damaged: what a hand edit, a botched
    migration or an older writer leaves behind. It keeps its due `sweep_at` and shard."""
    client = boto3.client("dynamodb")
    table = JobModel.Meta.table_name
    item = client.get_item(TableName=table, Key={"id": {"S": job.id}})["Item"]
    damage(item)
    client.put_item(TableName=table, Item=item)


def bad_status(item: dict[str, Any]) -> None:
    item["status"] = {"S": "exploded"}


def missing_attribute(item: dict[str, Any]) -> None:
    del item["retry_count"]


def corrupt_map(item: dict[str, Any]) -> None:
    item["attempts"] = {"M": {"1": {"M": {"number": {"S": "one"}}}}}


@pytest.mark.parametrize("damage", [bad_status, missing_attribute, corrupt_map])
def test_an_unreadable_job_item_is_counted_and_skipped_and_every_other_due_job_attended(
    repo: JobRepository,
    dispatcher: RecordingDispatcher,
    clock: FakeClock,
    damage: Callable[[dict[str, Any]], None],
) -> None:
    # Given due jobs nobody claimed, one of whose items no job can be read from
    jobs = [new_job(clock, f"f{i}") for i in range(4)]
    broken = jobs[1]
    corrupt(broken, damage)
    clock.advance(DISPATCH.grace + timedelta(seconds=1))

    # When the sweep runs
    report = sweep_of(repo, dispatcher, clock).run()

    # Then the unreadable item is counted and left as it is; every other due job is sent again
    assert report.unreadable == 1
    sent = {job_id for job_id, _, _ in dispatcher.sent}
    assert {j.id for j in jobs if j is not broken} <= sent
    assert broken.id not in sent


def test_the_repository_tells_each_unreadable_item_by_its_id_or_raises_when_not_asked(
    repo: JobRepository, clock: FakeClock
) -> None:
    # Given two due jobs, one of whose items is damaged
    readable, broken = new_job(clock, "ok"), new_job(clock, "broken")
    corrupt(broken, bad_status)
    now = clock.now + DISPATCH.grace
    # When the due jobs are read with somewhere to tell an unreadable one
    told: list[tuple[str, str]] = []

    def tell(job_id: str, error: Exception) -> None:
        told.append((job_id, type(error).__name__))

    due = list(repo.due_for_sweep(now, on_unreadable=tell))
    # Then the damaged item is told by its id, and every other due job is yielded
    assert told == [(broken.id, "ValueError")]
    assert readable.id in {job.id for job in due} and broken.id not in {job.id for job in due}
    # and a reader that gave nowhere to tell it gets the error, as before
    with pytest.raises(ValueError, match="JobStatus"):
        list(repo.due_for_sweep(now))
