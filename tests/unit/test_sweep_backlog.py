"""The sweep under a backlog: a queued job is never taken for a lost one.

A waiting job is sent again only once its queue has got past the moment its message became
visible (domain/backlog.py); a job whose file's virus scan has no verdict yet is not sent at all
(its worker could only skip it). The sweep runs for hours and days of a fake clock, so on the
in-memory stores (tests/fakes.py; tests/integration/test_job_store_contract.py holds them to the
repositories' behaviour); the queue's progress comes from a stand-in the test moves by hand
(tests/integration/test_queue_watch.py reads it from SQS).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from filejobs.domain import transitions
from filejobs.domain.backlog import QueueProgress
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import Lane
from filejobs.domain.retry import DispatchPolicy, RetryPolicy
from filejobs.domain.transition_result import Applied
from filejobs.services.scan_gate import ScanGate
from filejobs.services.sweep import SweepService
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher, stored

KEEP = timedelta(days=30)
DISPATCH = DispatchPolicy(grace=timedelta(minutes=2), cap=timedelta(minutes=8), max_dispatches=3)
RETRY = RetryPolicy(base=timedelta(seconds=10), cap=timedelta(minutes=5))


class HandMovedQueues:
    """Every queue's reach, set by the test: where a real queue's counts would put it."""

    def __init__(self, reach: datetime) -> None:
        self.reach = reach
        self.asked: list[tuple[JobType, Lane]] = []
        self.broken = False

    def progress(self, job_type: JobType, lane: Lane) -> QueueProgress:
        self.asked.append((job_type, lane))
        if self.broken:
            raise ConnectionError("SQS is unreachable")
        return QueueProgress(self.reach)


def sweep(
    jobs: InMemoryJobStore,
    clock: FakeClock,
    sent: RecordingDispatcher,
    queues: HandMovedQueues,
    *,
    held: ScanGate | None = None,
) -> SweepService:
    return SweepService(
        jobs,
        sent,
        queues=queues,
        held=held,
        clock=clock,
        retry_policy=RETRY,
        dispatch_policy=DISPATCH,
        retention=KEEP,
    )


def gate(
    files: InMemoryFileStore, jobs: InMemoryJobStore, sent: RecordingDispatcher, clock: FakeClock
) -> ScanGate:
    return ScanGate(files, jobs, sent, retention=KEEP, clock=clock)


def ingested(
    files: InMemoryFileStore, clock: FakeClock, content_type: str, name: str = "f"
) -> IngestPlan:
    plan = ingest_plan(clock.now, content_type, name=name)
    files.record_ingest(plan)
    return plan


def job_of(plan: IngestPlan, job_type: JobType) -> ProcessingJob:
    return next(j for j in plan.jobs if j.job_type is job_type)


def failed_to_retry_at(
    jobs: InMemoryJobStore, job: ProcessingJob, clock: FakeClock, retry_at: datetime
) -> ProcessingJob:
    """`job` claimed and failed now, its retry scheduled for `retry_at`."""
    claimed = jobs.apply(
        job.id, job.job_type, transitions.claim(now=clock.now, lease=KEEP, worker="w")
    )
    assert isinstance(claimed, Applied)
    failing = transitions.fail(
        claimed.job, error="busy", now=clock.now, retry_at=retry_at, retention=KEEP
    )
    failed = jobs.apply(job.id, job.job_type, failing)
    assert isinstance(failed, Applied)
    return failed.job


def test_a_job_queued_behind_a_backlog_is_put_off_not_sent(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given an empty file's jobs (scan, dedup), in queues that have not reached their sending
    plan = ingested(files, clock, "application/x-empty")
    job = plan.jobs[0]
    queues = HandMovedQueues(reach=clock.now - timedelta(minutes=10))
    # When the sweep runs after the jobs' dispatch grace
    clock.advance(timedelta(minutes=3))
    report = sweep(jobs, clock, sent, queues).run()
    # Then nothing is sent and nothing counted: the jobs are only looked at later
    assert sent.sent_ids == []
    assert report.actions["queued"] == len(plan.jobs) == 2
    after = stored(jobs, job)
    assert after.status is JobStatus.PENDING
    assert after.dispatch_count == 0
    assert after.sweep_at is not None
    assert after.sweep_at > clock.now


def test_a_job_whose_queue_got_past_it_was_lost_and_is_sent_once(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given a pending job sent at its creation, and a queue that has since got past that moment
    job = ingested(files, clock, "application/x-empty").jobs[0]
    clock.advance(timedelta(minutes=3))
    queues = HandMovedQueues(reach=clock.now - timedelta(minutes=1))
    # When the sweep runs twice
    first = sweep(jobs, clock, sent, queues).run()
    second = sweep(jobs, clock, sent, queues).run()
    # Then its message is sent again once, counted, with the time of the send recorded
    assert sent.sent_ids.count(job.id) == 1
    assert first.actions["redispatched"] == 2  # the file's two jobs
    assert second.examined == 0
    after = stored(jobs, job)
    assert after.dispatch_count == 1
    assert after.dispatched_at == clock.now


def test_a_resent_job_is_judged_from_its_last_send_not_its_creation(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    job = ingested(files, clock, "application/x-empty").jobs[0]
    clock.advance(timedelta(minutes=3))
    queues = HandMovedQueues(reach=clock.now)
    sweep(jobs, clock, sent, queues).run()  # lost: sent again now
    resent_at = clock.now
    # When its next check comes while the queue has not reached that second send
    clock.advance(timedelta(minutes=5))
    queues.reach = resent_at - timedelta(seconds=1)
    report = sweep(jobs, clock, sent, queues).run()
    # Then the copy is taken for queued: no third message
    assert report.actions["queued"] == 2
    assert sent.sent_ids.count(job.id) == 1


def test_a_backlog_of_days_never_gives_a_queued_job_up_and_checks_it_ever_less_often(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given a job queued behind a backlog that does not clear for three days
    job = ingested(files, clock, "application/x-empty").jobs[0]
    queues = HandMovedQueues(reach=clock.now - timedelta(seconds=1))
    checks = 0
    end = clock.now + timedelta(days=3)
    while True:
        # The runs (every minute) that find nothing due change nothing: go to the next due one.
        due = stored(jobs, job).sweep_at
        assert due is not None
        if due >= end:
            break
        clock.now = due
        checks += sweep(jobs, clock, sent, queues).run().actions["queued"]
    # Then it was never sent, never counted, never failed; and looked at a few dozen times in
    # 4,320 minutes (each look puts the next off by as long as it has waited, up to the patience)
    after = stored(jobs, job)
    assert sent.sent_ids == []
    assert after.status is JobStatus.PENDING
    assert after.dispatch_count == 0
    assert 5 <= checks <= 2 * (3 * 24 // 6 + 10)  # its own looks, and its sibling's
    # And once the backlog clears, the sweep finds it lost at its next check and sends it
    queues.reach = clock.now
    assert after.sweep_at is not None
    clock.now = after.sweep_at
    assert sweep(jobs, clock, sent, queues).run().actions["redispatched"] >= 1
    assert sent.sent_ids.count(job.id) == 1


def test_a_job_whose_every_copy_reached_a_worker_unclaimed_is_still_given_up(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given a job whose queue keeps getting past every copy (no worker claims them)
    job = ingested(files, clock, "application/x-empty").jobs[0]
    queues = HandMovedQueues(reach=clock.now)
    for _ in range(DISPATCH.max_dispatches + 1):
        due = stored(jobs, job).sweep_at
        assert due is not None
        clock.now = due + timedelta(seconds=1)
        queues.reach = clock.now
        sweep(jobs, clock, sent, queues).run()
    # Then after the budget of sends it fails, saying no worker took it
    after = stored(jobs, job)
    assert after.status is JobStatus.FAILED
    assert "never claimed" in (after.error_message or "")
    assert sent.sent_ids.count(job.id) == DISPATCH.max_dispatches


def test_a_due_retry_whose_delayed_message_may_still_be_queued_is_left_scheduled(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given a job whose attempt failed and was scheduled to retry (its message sent delayed)
    job = ingested(files, clock, "application/x-empty").jobs[0]
    retry_at = clock.now + timedelta(seconds=30)
    assert failed_to_retry_at(jobs, job, clock, retry_at).status is JobStatus.SCHEDULED
    # When the retry is due but its queue is behind the moment the message became visible
    clock.now = retry_at + timedelta(minutes=1)
    queues = HandMovedQueues(reach=retry_at - timedelta(minutes=5))
    report = sweep(jobs, clock, sent, queues).run()
    # Then it is not promoted and no second message is sent
    assert report.actions["queued"] >= 1
    assert job.id not in sent.sent_ids
    assert stored(jobs, job).status is JobStatus.SCHEDULED


def test_a_job_held_by_the_scan_gate_is_never_sent_while_its_scan_is_on(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given an image's thumbnail job, held at ingest, and the file's scan running (a big file)
    plan = ingested(files, clock, "image/png")
    thumbnail = job_of(plan, JobType.THUMBNAIL_GENERATION)
    scan = job_of(plan, JobType.VIRUS_SCAN)
    lease = transitions.claim(now=clock.now, lease=timedelta(hours=2), worker="scanner")
    running = jobs.apply(scan.id, scan.job_type, lease)
    assert isinstance(running, Applied)
    scan_due = running.job.sweep_at
    queues = HandMovedQueues(reach=clock.now + timedelta(days=1))  # every queue drained
    # When the sweep runs every minute for an hour, with no verdict yet
    looks = 0
    end = clock.now + timedelta(hours=1)
    while clock.now < end:
        clock.advance(timedelta(minutes=1))
        looks += (
            sweep(jobs, clock, sent, queues, held=gate(files, jobs, sent, clock))
            .run()
            .actions["held"]
        )
    # Then the parsing job was never sent, and was looked at once: it waits for the scan's
    # own next check (its lease), not for every run
    assert thumbnail.id not in sent.sent_ids
    after = stored(jobs, thumbnail)
    assert after.status is JobStatus.PENDING
    assert after.dispatch_count == 0
    assert looks == 1
    assert after.sweep_at == scan_due


def test_a_held_job_of_a_clean_file_whose_release_was_lost_is_sent(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given an image found clean, whose scan worker died before it sent the waiting jobs
    plan = ingested(files, clock, "image/png")
    thumbnail = job_of(plan, JobType.THUMBNAIL_GENERATION)
    clock.advance(timedelta(minutes=1))
    verdict = ScanRecord(ScanStatus.CLEAN, clock.now, job_of(plan, JobType.VIRUS_SCAN).id)
    files.record_scan(plan.file.id, verdict, by="virus_scan")
    clock.advance(timedelta(minutes=3))
    queues = HandMovedQueues(reach=verdict.scanned_at - timedelta(seconds=1))
    # When the sweep runs while the queue has not reached the verdict's release: left alone
    assert (
        sweep(jobs, clock, sent, queues, held=gate(files, jobs, sent, clock))
        .run()
        .actions["queued"]
        >= 1
    )
    assert thumbnail.id not in sent.sent_ids
    # And once the queue is past it: sent, once
    after = stored(jobs, thumbnail)
    assert after.sweep_at is not None
    clock.now = after.sweep_at
    queues.reach = clock.now
    sweep(jobs, clock, sent, queues, held=gate(files, jobs, sent, clock)).run()
    assert sent.sent_ids.count(thumbnail.id) == 1


def test_a_held_job_whose_scan_ended_without_a_verdict_is_cancelled_by_the_sweep(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given an image whose scan job was cancelled before giving a verdict
    plan = ingested(files, clock, "image/png")
    scan = job_of(plan, JobType.VIRUS_SCAN)
    cancel = transitions.cancel(now=clock.now, by="operator", reason="test", retention=KEEP)
    assert isinstance(jobs.apply(scan.id, scan.job_type, cancel), Applied)
    # When the sweep reaches the waiting thumbnail job
    clock.advance(timedelta(minutes=3))
    queues = HandMovedQueues(reach=clock.now)
    report = sweep(jobs, clock, sent, queues, held=gate(files, jobs, sent, clock)).run()
    # Then it is cancelled, saying why, and never sent
    thumbnail = stored(jobs, job_of(plan, JobType.THUMBNAIL_GENERATION))
    assert report.actions["refused"] >= 1
    assert thumbnail.status is JobStatus.CANCELLED
    assert thumbnail.id not in sent.sent_ids


def test_a_scan_the_sweep_fails_settles_the_jobs_waiting_on_it_in_the_same_run(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given an image whose scan worker crashes on every attempt, the thumbnail held meanwhile
    # (and put off, as the scan ran, until long after: the sweep looks less often the longer a
    # job waits)
    plan = ingested(files, clock, "image/png")
    scan, thumbnail = job_of(plan, JobType.VIRUS_SCAN), job_of(plan, JobType.THUMBNAIL_GENERATION)
    queues = HandMovedQueues(reach=clock.now + timedelta(days=1))  # every queue drained
    clock.advance(timedelta(hours=2))
    report = None
    for _ in range(scan.max_retries + 1):
        lease = transitions.claim(now=clock.now, lease=timedelta(minutes=5), worker="crashes")
        assert isinstance(jobs.apply(scan.id, scan.job_type, lease), Applied)
        clock.advance(timedelta(minutes=6))
        report = sweep(jobs, clock, sent, queues, held=gate(files, jobs, sent, clock)).run()
        clock.advance(RETRY.cap)
    # When the sweep takes back the last attempt's lease, the scan fails for good
    assert report is not None and report.actions["recovered"] == 1
    assert stored(jobs, scan).status is JobStatus.FAILED
    # Then the thumbnail was cancelled in that run, saying why, not at its own next look
    after = stored(jobs, thumbnail)
    assert after.status is JobStatus.CANCELLED
    assert "virus scan" in (after.error_message or after.cancel_reason or "")
    assert thumbnail.id not in sent.sent_ids


def test_a_queue_whose_progress_cannot_be_read_gets_no_copies(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    ingested(files, clock, "application/x-empty", name="a")
    ingested(files, clock, "application/x-empty", name="b")
    queues = HandMovedQueues(reach=clock.now + timedelta(days=1))
    queues.broken = True
    clock.advance(timedelta(minutes=3))
    report = sweep(jobs, clock, sent, queues).run()
    # Then the jobs wait (put off), and each queue was asked once in the run, not once per job
    assert sent.sent_ids == []
    assert report.actions["queued"] == 4
    assert sorted(queues.asked) == sorted(set(queues.asked))
    assert len(queues.asked) == 2  # the scan's queue and the dedup check's


def test_a_run_whose_time_is_up_leaves_the_rest_due_for_the_next(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    one_per_file = [
        ingested(files, clock, "application/x-empty", name=f"f{n}").jobs[0] for n in range(5)
    ]
    clock.advance(timedelta(minutes=3))
    queues = HandMovedQueues(reach=clock.now)
    taken = iter([False, False, True])
    report = sweep(jobs, clock, sent, queues).run(should_stop=lambda: next(taken, True))
    assert report.cut_short
    assert report.examined == 2
    # The next run takes the others
    following = sweep(jobs, clock, sent, queues).run()
    assert not following.cut_short
    assert following.examined == 2 * len(one_per_file) - 2
    assert {j.id for j in one_per_file} <= set(sent.sent_ids)
    assert len(sent.sent_ids) == len(set(sent.sent_ids)) == 2 * len(one_per_file)


def test_a_retry_too_far_off_for_a_delayed_message_is_promoted_when_due_even_in_a_backlog(
    jobs: InMemoryJobStore, files: InMemoryFileStore, clock: FakeClock, sent: RecordingDispatcher
) -> None:
    # Given a job whose attempt failed with its retry an hour away (SQS delays 15 minutes at
    # most, so no message was sent: the sweep owes it one)
    job = ingested(files, clock, "application/x-empty").jobs[0]
    retry_at = clock.now + timedelta(hours=1)
    failed_to_retry_at(jobs, job, clock, retry_at)
    # When it is due while its queue has a backlog of unknown age
    clock.now = retry_at + timedelta(seconds=1)
    queues = HandMovedQueues(reach=clock.now - timedelta(days=4))
    report = sweep(jobs, clock, sent, queues).run()
    # Then it is promoted and sent, as nothing of it can be queued
    assert report.actions["promoted"] == 1
    assert job.id in sent.sent_ids
    assert stored(jobs, job).status is JobStatus.PENDING
