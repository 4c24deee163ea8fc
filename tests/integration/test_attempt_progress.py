"""Progress and attempt logs end to end on moto: a processor reports through its `Work`, the
lease's heartbeats carry it (no write of its own), and GET /jobs/{id} shows it while the job runs
and each attempt's log after it ends, completed or failed."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from filejobs.adapters.workspace import shared_scratch
from filejobs.data.job_repository import JobRepository
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import PermanentError, RetryPolicy
from filejobs.domain.transition_result import TransitionResult
from filejobs.domain.transitions import Transition
from filejobs.processors.base import Processor, Work
from filejobs.services.worker import Disposition, WorkerService, WorkResult
from tests.aws_requests import DYNAMODB_READS, counting_requests
from tests.integration.test_api import ACME, Api, ingested
from tests.integration.test_api import stack as api_stack  # noqa: F401 (the fixture)

LEASE = timedelta(seconds=0.6)  # a heartbeat every 0.2 s


@pytest.fixture
def api(api_stack: Api) -> Api:  # noqa: F811 (test_api's fixture)
    return api_stack


class CountingJobs(JobRepository):
    """The real repository, counting the transitions it is asked to write."""

    def __init__(self) -> None:
        self.written: Counter[str] = Counter()

    def apply(self, job_id: str, job_type: JobType, transition: Transition) -> TransitionResult:
        result = super().apply(job_id, job_type, transition)
        self.written[transition.name] += 1
        return result


def worker(jobs: JobRepository, processor: Processor, job_type: JobType) -> WorkerService:
    return WorkerService(
        jobs,
        _NoDispatch(),
        processor,
        job_type,
        lease=LEASE,
        retention=timedelta(days=1),
        worker_id="test-worker",
        scratch=shared_scratch(),
        retry_policy=RetryPolicy(base=timedelta(seconds=4), cap=timedelta(minutes=1)),
        # looks as seldom as it beats: every wake-up of the lease keeper is a heartbeat
        cancel_look_every=LEASE,
    )


class _NoDispatch:
    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        pass


def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def run_in_background(
    service: WorkerService, job: ProcessingJob
) -> tuple[threading.Thread, list[WorkResult]]:
    results: list[WorkResult] = []
    thread = threading.Thread(
        target=lambda: results.append(service.handle(JobMessage.for_job(job)))
    )
    thread.start()
    return thread, results


def test_the_api_shows_a_running_jobs_progress_from_its_heartbeat_then_the_attempts_log(
    api: Api,
) -> None:
    # Given a slow processor that reports a quarter done, then waits to be let go
    job = ingested("acme", "a.png").jobs[0]
    go_on = threading.Event()

    def slow(work: Work) -> dict[str, Any]:
        work.log("read 3.2 MB image/png, 1920x1080")
        work.report_progress(0.25, "decoded 1 of 4 tiles")
        assert go_on.wait(10)
        work.log(f"wrote thumb-128.webp ({work.workspace}/thumb-128.webp)")
        return {"ok": True}

    thread, results = run_in_background(worker(JobRepository(), slow, job.job_type), job)

    # When the API is asked while it runs
    def shown() -> dict[str, Any] | None:
        status, body = api.call("GET", f"/jobs/{job.id}", who=ACME)
        assert status == 200
        progress: dict[str, Any] | None = body["progress"]
        return progress

    until(lambda: shown() is not None)
    progress = shown()
    go_on.set()
    thread.join(10)

    # Then it showed the progress a heartbeat wrote, with the log so far
    assert progress is not None
    assert progress["attempt"] == 1
    assert (progress["fraction"], progress["percent"]) == (0.25, 25)
    assert progress["message"] == "decoded 1 of 4 tiles"
    assert progress["log"] == ["read 3.2 MB image/png, 1920x1080"]
    # and a listing shows the progress without the log
    status, listing = api.call("GET", f"/files/{job.file_id}/jobs", who=ACME)
    assert status == 200
    assert all("log" not in (j["progress"] or {}) for j in listing["jobs"])

    # and once it completed: no live progress, the attempt's log and its progress whole
    assert results[0].disposition is Disposition.COMPLETED
    status, body = api.call("GET", f"/jobs/{job.id}", who=ACME)
    assert body["progress"] is None
    (attempt,) = body["attempts"]
    assert attempt["fraction"] == 1.0 and attempt["message"] == "decoded 1 of 4 tiles"
    assert attempt["log"] == [
        "read 3.2 MB image/png, 1920x1080",
        "wrote thumb-128.webp (<workspace>/thumb-128.webp)",
    ]
    assert attempt["log_lines_dropped"] == 0


def test_a_failed_attempts_log_is_kept_and_a_chatty_one_is_capped(api: Api) -> None:
    # Given a processor that logs 10,000 lines, then fails for good
    job = ingested("acme", "b.png").jobs[0]

    def chatty(work: Work) -> dict[str, Any]:
        for n in range(10_000):
            work.log(f"line {n}")
            work.report_progress(n / 10_000, f"line {n}")
        raise PermanentError("the decoder gave up")

    result = worker(JobRepository(), chatty, job.job_type).handle(JobMessage.for_job(job))

    # Then the failed job's attempt shows its first and latest lines, and says it truncated
    assert result.disposition is Disposition.FAILED
    status, body = api.call("GET", f"/jobs/{job.id}", who=ACME)
    assert status == 200
    (attempt,) = body["attempts"]
    assert attempt["outcome"] == "failed"
    assert attempt["error"] == "PermanentError: the decoder gave up"
    assert attempt["log"][0] == "line 0" and attempt["log"][-1] == "line 9999"
    assert len(attempt["log"]) == 20
    assert attempt["log_lines_dropped"] == 9_981
    assert "9,981 lines left out" in attempt["log"][8]
    assert attempt["fraction"] == 0.9999
    # and the file's answer lists the job with its progress but without the log
    status, stored = api.call("GET", f"/files/{job.file_id}", who=ACME)
    listed = next(j for j in stored["jobs"] if j["id"] == job.id)
    assert listed["attempts"][0]["fraction"] == 0.9999
    assert "log" not in listed["attempts"][0]


def test_progress_costs_no_write_of_its_own(api: Api) -> None:
    # Given two jobs run by a processor that holds on for three heartbeats, one that reports
    # progress and logs at every chunk, one that says nothing
    plan = ingested("acme", "c.png")
    quiet_job, busy_job = plan.jobs[0], ingested("acme", "d.png").jobs[0]

    def held(jobs: CountingJobs, talk: bool) -> Processor:
        def run(work: Work) -> dict[str, Any]:
            n = 0
            while jobs.written["heartbeat"] < 3:
                n += 1
                if talk:
                    work.report_progress(min(n / 1000, 1), f"chunk {n}")
                    work.log(f"chunk {n}")
                time.sleep(0.005)
            return {"chunks": n}

        return run

    def run(job: ProcessingJob, talk: bool) -> tuple[int, int, int]:
        jobs = CountingJobs()
        service = worker(jobs, held(jobs, talk), job.job_type)
        with counting_requests() as requests:
            outcome = service.handle(JobMessage.for_job(job))
        assert outcome.disposition is Disposition.COMPLETED
        writes = requests.count("dynamodb") - requests.count("dynamodb", DYNAMODB_READS)
        return writes, jobs.written["heartbeat"], requests.count("dynamodb", DYNAMODB_READS)

    # When each runs
    quiet_writes, quiet_beats, quiet_reads = run(quiet_job, talk=False)
    busy_writes, busy_beats, busy_reads = run(busy_job, talk=True)

    # Then each wrote its claim, its heartbeats and its completion, nothing else: the progress
    # rode the heartbeats
    assert quiet_writes == 2 + quiet_beats
    assert busy_writes == 2 + busy_beats
    assert quiet_reads == busy_reads == 0
    _, body = api.call("GET", f"/jobs/{busy_job.id}", who=ACME)
    assert body["attempts"][0]["message"].startswith("chunk ")
    assert len(body["attempts"][0]["log"]) == 20
