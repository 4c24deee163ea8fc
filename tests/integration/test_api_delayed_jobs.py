"""Delayed jobs, a bounded attempt budget and checked options, requested through the status
API's Lambda handler (tests/integration/test_api.py's stack: moto tables and queues built from
template.yaml), then moved on by the real sweep and worker services on the same tables, under a
clock the test moves (or, for SQS's own delay, a real one of two seconds)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from filejobs.adapters.workspace import shared_scratch
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.delays import MAX_DELAY_SECONDS
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import DispatchPolicy, RetryPolicy, TransientError
from filejobs.domain.time import utcnow
from filejobs.processors.base import Processor, Work
from filejobs.services.scan_gate import ScanGate
from filejobs.services.sweep import SweepService
from filejobs.services.worker import Disposition, WorkerService
from tests.conftest import FakeClock
from tests.integration.test_api import (
    ACME,
    Api,
    error_code,
    ingested,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.listing import jobs_of_file

KEEP = timedelta(days=1)
SCAN = JobType.VIRUS_SCAN
THUMBNAIL = JobType.THUMBNAIL_GENERATION


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture, imported to be used here)
    return stack


class Recorder:
    """A dispatcher that keeps what it was asked to send, and when for."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, JobStatus, timedelta]] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent.append((job.id, job.status, delay))

    def of(self, job_id: str) -> list[tuple[JobStatus, timedelta]]:
        """What was sent of one job (the sweep also sends the file's own ingest jobs)."""
        return [(status, delay) for sent, status, delay in self.sent if sent == job_id]


def requested(api: Api, file_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return api.call("POST", f"/files/{file_id}/jobs", who=ACME, body=json.dumps(body))


def stored(job_id: str) -> ProcessingJob:
    found = JobRepository().get(job_id)
    assert found is not None
    return found


def sweep(clock: FakeClock, dispatcher: Recorder, gate: ScanGate | None = None) -> SweepService:
    return SweepService(
        JobRepository(),
        dispatcher,
        held=gate,
        clock=clock,
        dispatch_policy=DispatchPolicy(grace=timedelta(minutes=2)),
        retention=KEEP,
    )


def worker(
    job_type: JobType,
    processor: Processor,
    clock: Any,
    dispatcher: Recorder,
    gate: ScanGate | None = None,
) -> WorkerService:
    return WorkerService(
        JobRepository(),
        dispatcher,
        processor,
        job_type,
        lease=timedelta(minutes=5),
        retention=KEEP,
        worker_id=f"{job_type.value}-worker",
        scratch=shared_scratch(),
        gate=gate,
        retry_policy=RetryPolicy(base=timedelta(seconds=4), cap=timedelta(seconds=30)),
        clock=clock,
    )


def done(work: Work) -> dict[str, Any]:
    return {"ran_at": "now"}


def queued(api: Api, logical_id: str) -> tuple[int, int]:
    """(visible, delayed) messages of one of the stack's queues."""
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=api.queue_urls[logical_id],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesDelayed"]),
    )


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- a delay longer than SQS holds a message: the sweep starts it ----------------------------


def test_a_job_delayed_an_hour_stays_scheduled_until_its_time_then_runs(api: Api) -> None:
    # given a file of acme, and a scan job requested to run in an hour
    plan = ingested("acme", "a.png")
    status, view = requested(api, plan.file.id, {"job_type": SCAN.value, "delay_seconds": 3600})
    # then it is made scheduled, for an hour after it was made, and no message was sent (SQS
    # holds one 15 minutes at most)
    assert (status, view["status"]) == (201, "scheduled"), view
    run_at = _moment(view["scheduled_at"])
    assert run_at - _moment(view["created_at"]) == timedelta(hours=1)
    assert queued(api, "VirusScanQueue") == (0, 0)
    # and the job's own view says when it runs
    assert (
        api.call("GET", f"/jobs/{view['id']}", who=ACME)[1]["scheduled_at"] == view["scheduled_at"]
    )

    clock, sent = FakeClock(_moment(view["created_at"])), Recorder()
    scans = worker(SCAN, done, clock, sent)
    # when a copy of its message comes half an hour before its time (a forged or stray one)
    clock.advance(timedelta(minutes=30))
    early = scans.handle(JobMessage.for_job(stored(view["id"])))
    # then it is not run, and nothing is sent: the sweep is to start it
    assert (early.disposition, early.detail) == (Disposition.SKIPPED, "not_due")
    assert sent.of(view["id"]) == []
    # and the sweep leaves it alone before its time
    clock.advance(timedelta(minutes=29, seconds=59))
    sweep(clock, sent).run()
    job = stored(view["id"])
    assert (job.status, job.attempt, sent.of(view["id"])) == (JobStatus.SCHEDULED, 0, [])

    # when the sweep runs just after its time (its schedule: every minute)
    clock.now = run_at + timedelta(seconds=30)
    report = sweep(clock, sent).run()
    # then it promoted the job and sent it once, at once
    assert report.actions["promoted"] == 1
    assert sent.of(view["id"]) == [(JobStatus.PENDING, timedelta(0))]
    # and the worker runs it then
    ran = scans.handle(JobMessage.for_job(stored(view["id"])))
    assert ran.disposition is Disposition.COMPLETED
    assert stored(view["id"]).started_at == run_at + timedelta(seconds=30)


def test_a_delayed_job_can_be_cancelled_before_it_runs(api: Api) -> None:
    # given a job delayed a day
    plan = ingested("acme", "a.png")
    day = {"job_type": SCAN.value, "run_at": (utcnow() + timedelta(days=1)).isoformat()}
    _, view = requested(api, plan.file.id, day)
    assert view["status"] == "scheduled"
    # when acme cancels it
    status, cancelled = api.call("POST", f"/jobs/{view['id']}/cancel", who=ACME)
    # then it is cancelled, no longer scheduled, and its time passing runs nothing
    assert (status, cancelled["status"], cancelled["scheduled_at"]) == (200, "cancelled", None)
    clock, sent = FakeClock(utcnow() + timedelta(days=1, minutes=1)), Recorder()
    sweep(clock, sent).run()
    late = worker(SCAN, done, clock, sent).handle(JobMessage.for_job(stored(view["id"])))
    assert late.disposition is Disposition.SKIPPED and sent.of(view["id"]) == []
    assert stored(view["id"]).status is JobStatus.CANCELLED


# --- a delay SQS can hold: a delayed message --------------------------------------------------


def test_a_job_delayed_ten_minutes_gets_a_delayed_message_and_an_early_copy_waits(
    api: Api,
) -> None:
    # given a job requested to run in ten minutes
    plan = ingested("acme", "a.png")
    _, view = requested(api, plan.file.id, {"job_type": SCAN.value, "delay_seconds": 600})
    assert view["status"] == "scheduled"
    # then its message is in the queue, held back by SQS (DelaySeconds), not visible yet
    assert queued(api, "VirusScanQueue") == (0, 1)
    # when a copy arrives five minutes early
    created = _moment(view["created_at"])
    clock, sent = FakeClock(created + timedelta(minutes=5)), Recorder()
    early = worker(SCAN, done, clock, sent).handle(JobMessage.for_job(stored(view["id"])))
    # then the job is not run, and the copy is sent again for the job's time: not lost
    assert early.disposition is Disposition.SKIPPED
    assert sent.of(view["id"]) == [(JobStatus.SCHEDULED, timedelta(minutes=5))]
    assert stored(view["id"]).status is JobStatus.SCHEDULED


def test_a_short_delay_is_held_by_the_queue_and_the_job_runs_when_it_is_due(api: Api) -> None:
    # given a job requested to run in two seconds (real time: SQS's own delay, in moto)
    plan = ingested("acme", "a.png")
    _, view = requested(api, plan.file.id, {"job_type": SCAN.value, "delay_seconds": 2})
    assert view["status"] == "scheduled"
    # then no worker can receive its message before then
    assert api.messages("VirusScanQueue") == []
    # when the delay has passed
    deadline, received = time.monotonic() + 10, list[dict[str, Any]]()
    while not received and time.monotonic() < deadline:
        time.sleep(0.25)
        received = api.messages("VirusScanQueue")
    # then the message is there, and the worker runs the job, not before its time
    assert [m["job_id"] for m in received] == [view["id"]]
    ran = worker(SCAN, done, utcnow, Recorder()).handle(JobMessage.parse(json.dumps(received[0])))
    assert ran.disposition is Disposition.COMPLETED
    job = stored(view["id"])
    assert job.started_at is not None and job.started_at >= _moment(view["scheduled_at"])


# --- the scan gate holds a delayed job ---------------------------------------------------------


def test_a_delayed_parsing_job_never_runs_on_an_unscanned_file(api: Api) -> None:
    # given a thumbnail job delayed a minute on a file not scanned yet
    plan = ingested("acme", "a.png")
    _, view = requested(api, plan.file.id, {"job_type": THUMBNAIL.value, "delay_seconds": 60})
    files, clock, sent = FileRepository(), FakeClock(utcnow() + timedelta(minutes=2)), Recorder()
    gate = ScanGate(files, JobRepository(), sent, retention=KEEP, clock=clock)
    thumbnails = worker(THUMBNAIL, done, clock, sent, gate)
    # when its message comes at its time, the scan still running
    waiting = thumbnails.handle(JobMessage.for_job(stored(view["id"])))
    # then it is not run: the gate holds it
    assert waiting.disposition is Disposition.SKIPPED
    assert stored(view["id"]).status is JobStatus.SCHEDULED
    # when the scan's clean verdict settles the file's waiting jobs
    clean = ScanRecord(ScanStatus.CLEAN, clock.now, "scan-job")
    gate.settle(plan.file.id, files.record_scan(plan.file.id, clean, by="virus_scan"))
    # then the due job is sent at once, and runs
    assert sent.of(view["id"]) == [(JobStatus.SCHEDULED, timedelta(0))]
    assert thumbnails.handle(JobMessage.for_job(stored(view["id"]))).disposition is (
        Disposition.COMPLETED
    )


# --- the attempt budget -------------------------------------------------------------------------


def test_a_job_with_max_retries_1_fails_for_good_after_two_attempts(api: Api) -> None:
    # given a scan job requested with one retry, whose every attempt fails transiently
    plan = ingested("acme", "a.png")
    status, view = requested(api, plan.file.id, {"job_type": SCAN.value, "max_retries": 1})
    assert (status, view["max_retries"]) == (201, 1)

    def flaky(work: Work) -> dict[str, Any]:
        raise TransientError("the engine timed out")

    clock, sent = FakeClock(utcnow()), Recorder()
    scans = worker(SCAN, flaky, clock, sent)
    # when it runs, and runs again once its retry is due
    first = scans.handle(JobMessage.for_job(stored(view["id"])))
    assert first.disposition is Disposition.RETRYING
    clock.now = max(clock.now, stored(view["id"]).scheduled_at or clock.now) + timedelta(seconds=1)
    second = scans.handle(JobMessage.for_job(stored(view["id"])))
    # then the second failure is final: two attempts, one retry, failed with the reason
    assert second.disposition is Disposition.FAILED
    job = stored(view["id"])
    assert (job.status, job.attempt, job.retry_count) == (JobStatus.FAILED, 2, 1)
    assert sorted(job.attempts) == [1, 2]
    assert "the engine timed out" in (job.error_message or "")
    # and a third message runs nothing
    clock.advance(timedelta(minutes=1))
    assert scans.handle(JobMessage.for_job(job)).disposition is Disposition.SKIPPED


# --- checked options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"job_type": THUMBNAIL.value, "input_data": {"sizes": [128, 8000]}},
            "input_data.sizes[1]",
        ),
        ({"job_type": "compression", "input_data": {"level": 22}}, "input_data.level"),
        (
            {"job_type": "compression", "input_data": {"algorithm": "gzip", "level": 12}},
            "input_data.level",
        ),
        ({"job_type": SCAN.value, "delay_seconds": MAX_DELAY_SECONDS + 1}, "delay_seconds"),
        ({"job_type": SCAN.value, "delay_seconds": 60, "run_at": "2030-01-01T00:00:00Z"}, "run_at"),
        ({"job_type": SCAN.value, "run_at": "2020-01-01T00:00:00Z"}, "run_at"),
        ({"job_type": SCAN.value, "max_retries": 26}, "max_retries"),
    ],
)
def test_a_bad_option_time_or_budget_is_422_and_makes_no_job(
    api: Api, body: dict[str, Any], field: str
) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    before = len(jobs_of_file(plan.file.id))
    # when a job is requested with a value the contract refuses
    status, answer = requested(api, plan.file.id, body)
    # then 422, the message naming the field, and no job was made or sent
    assert (status, error_code(answer)) == (422, "unprocessable"), answer
    assert answer["error"]["message"].startswith(field), answer
    assert len(jobs_of_file(plan.file.id)) == before
    for queue in ("ThumbnailGenerationQueue", "CompressionQueue", "VirusScanQueue"):
        assert queued(api, queue) == (0, 0)


def test_good_options_are_stored_and_shown(api: Api) -> None:
    plan = ingested("acme", "a.png")
    body = {"job_type": THUMBNAIL.value, "input_data": {"sizes": [64, 1024], "format": "jpeg"}}
    status, view = requested(api, plan.file.id, body)
    assert (status, view["options"]) == (201, {"sizes": [64, 1024], "format": "jpeg"})
    job = stored(view["id"])
    assert job.input_data is not None and job.input_data["sizes"] == [64, 1024]
    assert job.input_data["key"] == plan.file.key
