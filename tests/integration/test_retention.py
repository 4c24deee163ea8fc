"""Keep-last-N retention end to end on moto: jobs finish, the events function reads the jobs
table's stream, and the older finished jobs of a type on a file beyond N leave every view, each
by one conditional write its role allows."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.ingest import new_job
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import epoch_seconds, utcnow
from filejobs.domain.transition_result import Applied
from functions.events import app as events
from tests.factories import ingest_plan
from tests.iam import Call, recording_calls
from tests.integration.test_iam_sufficiency import CONTEXT, Stack
from tests.integration.test_iam_sufficiency import stack as iam_stack  # noqa: F401 (fixture)
from tests.listing import jobs_of_file
from tests.streams import StreamTap

LEASE = timedelta(minutes=5)
THUMBS = JobType.THUMBNAIL_GENERATION


def job_writes(stack: Stack, calls: list[Call]) -> list[Call]:
    """The writes of the jobs table among `calls` (retirements: nothing else writes a job)."""
    table = stack.refs["JobsTable"]
    return [c for c in calls if c.operation == "UpdateItem" and c.params["TableName"] == table]


def made(jobs: JobRepository, plan_file: object, job_type: JobType, n: int) -> ProcessingJob:
    job = new_job(
        plan_file,  # type: ignore[arg-type]
        job_type,
        now=utcnow(),
        created_by="api",
        dispatch=DispatchPolicy(),
        idempotency_key=f"request-{job_type.value}-{n}",
    )
    assert FileRepository().add_job(job)  # as the API adds one: named by its file
    return job


def run(jobs: JobRepository, job: ProcessingJob) -> ProcessingJob:
    claimed = jobs.apply(
        job.id, job.job_type, transitions.claim(now=utcnow(), lease=LEASE, worker="w")
    )
    assert isinstance(claimed, Applied)
    return claimed.job


def finish(jobs: JobRepository, job: ProcessingJob, *, failed: bool = False) -> ProcessingJob:
    running = run(jobs, job)
    end = (
        transitions.fail(running, error="bad", now=utcnow(), retry_at=None, retention=LEASE)
        if failed
        else transitions.complete(running, result={}, now=utcnow(), retention=LEASE)
    )
    done = jobs.apply(job.id, job.job_type, end)
    assert isinstance(done, Applied)
    return done.job


@pytest.fixture
def stack(iam_stack: Stack) -> Stack:  # noqa: F811 (test_iam_sufficiency's fixture)
    return iam_stack


def test_the_events_function_keeps_the_last_n_finished_jobs_of_a_type_per_file(
    stack: Stack,
) -> None:
    # Given the events function with thumbnails keeping their last 2 finished jobs per file
    stack.become("EventsFunction")
    stack.monkeypatch.setenv("KEEP_LAST_FINISHED_JOBS", "thumbnail_generation=2")
    runtime.reset()
    runtime.tables()
    plan = ingest_plan(utcnow(), "image/png")
    FileRepository().record_ingest(plan)
    jobs = JobRepository()
    tap = StreamTap.of_table(boto3.client("dynamodb"), stack.refs["JobsTable"])
    # and on one file: N+2 = 4 thumbnail jobs that finish (one fails), one that is running,
    # and the ingest's jobs of other types, one of them finished
    thumbs = [made(jobs, plan.file, THUMBS, n) for n in range(5)]
    finished = [finish(jobs, t, failed=(n == 1)) for n, t in enumerate(thumbs[:4])]
    running = run(jobs, thumbs[4])
    other = next(j for j in plan.jobs if j.job_type is not THUMBS)
    other_done = finish(jobs, other)

    # When the events function handles the stream
    records = tap.read()
    with recording_calls() as recorder:
        response = events.handler({"Records": records}, CONTEXT)

    # Then the two oldest finished thumbnail jobs are gone from the file's jobs, expiring now
    assert response["batchItemFailures"] == []
    listed = {j.id: j for j in jobs_of_file(plan.file.id)}
    assert finished[0].id not in listed and finished[1].id not in listed
    assert finished[2].id in listed and finished[3].id in listed
    for job in finished[:2]:
        gone = jobs.get(job.id)
        assert gone is not None and gone.metadata.deleted_by == "retention"
        assert gone.expires_at is not None and gone.expires_at <= epoch_seconds(utcnow())
    # and the running one and the other type's finished one are untouched
    assert listed[running.id].status is JobStatus.RUNNING
    assert listed[other_done.id].metadata.deleted_at is None
    # and every call was one its role grants: a Query of the file's jobs per finish, one
    # conditional write per job retired (the file's completion writes the files table)
    assert stack.refused("EventsFunction", recorder.calls) == []
    assert len(job_writes(stack, recorder.calls)) == 2

    # When the retirements come back on the stream
    records = tap.read()
    with recording_calls() as again:
        response = events.handler({"Records": records}, CONTEXT)

    # Then they announce nothing and retire nothing more
    assert response["batchItemFailures"] == []
    assert job_writes(stack, again.calls) == []
    assert "PutEvents" not in {c.operation for c in again.calls}


def test_without_the_setting_a_finish_retires_nothing(stack: Stack) -> None:
    stack.become("EventsFunction")
    runtime.tables()
    plan = ingest_plan(utcnow(), "image/png")
    FileRepository().record_ingest(plan)
    jobs = JobRepository()
    tap = StreamTap.of_table(boto3.client("dynamodb"), stack.refs["JobsTable"])
    for n in range(3):
        finish(jobs, made(jobs, plan.file, THUMBS, n))

    records = tap.read()
    with recording_calls() as recorder:
        response = events.handler({"Records": records}, CONTEXT)

    assert response["batchItemFailures"] == []
    assert job_writes(stack, recorder.calls) == []
    assert len(jobs_of_file(plan.file.id)) == len(plan.jobs) + 3
