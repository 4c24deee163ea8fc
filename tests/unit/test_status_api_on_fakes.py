"""The status API's job use cases on the in-memory stores: who sees a job, and what a cancel does.

(tests/integration/test_api.py runs the whole API, handler included, on DynamoDB.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from filejobs.access import Caller
from filejobs.domain import transitions
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import EXPLICIT_RETRIES_LIMIT, JobStatus, JobType, ProcessingJob
from filejobs.domain.transition_result import Applied
from filejobs.services.api import CancelJob, RequestJob, StatusApi
from filejobs.services.errors import ConflictError, InvalidRequestError, NotFoundError
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher, stored

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
KEEP = timedelta(days=30)
ACME = Caller(tenant="acme", operator=False)
GLOBEX = Caller(tenant="globex", operator=False)
OPERATOR = Caller(tenant=None, operator=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + timedelta(minutes=1))


@pytest.fixture
def api(
    jobs: InMemoryJobStore, files: InMemoryFileStore, sent: RecordingDispatcher, clock: FakeClock
) -> StatusApi:
    return StatusApi(jobs=jobs, files=files, dispatcher=lambda: sent, retention=KEEP, clock=clock)


@pytest.fixture
def upload(files: InMemoryFileStore) -> IngestPlan:
    """An acme upload recorded with its jobs, all pending."""
    plan = ingest_plan(T0)
    files.record_ingest(plan)
    return plan


@pytest.fixture
def scan(upload: IngestPlan) -> ProcessingJob:
    return next(j for j in upload.jobs if j.job_type is JobType.VIRUS_SCAN)


def completed(jobs: InMemoryJobStore, job: ProcessingJob) -> ProcessingJob:
    claim = jobs.apply(
        job.id, job.job_type, transitions.claim(now=T0, lease=timedelta(minutes=5), worker="w")
    )
    assert isinstance(claim, Applied)
    done = transitions.complete(claim.job, result={"verdict": "clean"}, now=T0, retention=KEEP)
    result = jobs.apply(job.id, job.job_type, done)
    assert isinstance(result, Applied)
    return result.job


def test_a_tenant_sees_its_own_job(api: StatusApi, scan: ProcessingJob) -> None:
    shown = api.job(ACME, scan.id)

    assert shown.job == scan
    assert shown.outputs == []


def test_an_operator_sees_any_tenants_job(api: StatusApi, scan: ProcessingJob) -> None:
    assert api.job(OPERATOR, scan.id).job == scan


def test_another_tenants_job_is_not_found_exactly_as_a_job_that_does_not_exist(
    api: StatusApi, scan: ProcessingJob
) -> None:
    with pytest.raises(NotFoundError) as theirs:
        api.job(GLOBEX, scan.id)
    with pytest.raises(NotFoundError) as nobodys:
        api.job(GLOBEX, "00000000-0000-4000-8000-000000000000")

    assert theirs.value.message == f"no job {scan.id}"
    assert nobodys.value.message == "no job 00000000-0000-4000-8000-000000000000"


def test_cancelling_a_pending_job_cancels_it_with_the_caller_and_reason_recorded(
    api: StatusApi, jobs: InMemoryJobStore, clock: FakeClock, scan: ProcessingJob
) -> None:
    cancelled = api.cancel(ACME, CancelJob(scan.id, reason="uploaded by mistake"))

    assert cancelled.status is JobStatus.CANCELLED
    assert (cancelled.cancelled_by, cancelled.cancel_reason) == (
        "api:tenant:acme",
        "uploaded by mistake",
    )
    assert cancelled.completed_at == clock.now and cancelled.sweep_at is None
    assert stored(jobs, scan) == cancelled


def test_cancelling_a_finished_job_is_a_conflict_and_changes_nothing(
    api: StatusApi, jobs: InMemoryJobStore, scan: ProcessingJob
) -> None:
    done = completed(jobs, scan)

    with pytest.raises(ConflictError) as refused:
        api.cancel(ACME, CancelJob(scan.id))

    assert refused.value.message == f"job {scan.id} cannot cancel: it is completed (finished)"
    assert stored(jobs, scan) == done


def test_cancelling_a_cancelled_job_again_is_a_conflict(
    api: StatusApi, scan: ProcessingJob
) -> None:
    api.cancel(ACME, CancelJob(scan.id))

    with pytest.raises(ConflictError) as refused:
        api.cancel(ACME, CancelJob(scan.id))

    assert refused.value.message == f"job {scan.id} cannot cancel: it is cancelled (cancelled)"


def test_another_tenant_cannot_cancel_a_job_it_cannot_see(
    api: StatusApi, jobs: InMemoryJobStore, scan: ProcessingJob
) -> None:
    with pytest.raises(NotFoundError):
        api.cancel(GLOBEX, CancelJob(scan.id))

    assert stored(jobs, scan) == scan


def test_a_deleted_job_is_not_found_even_by_its_tenant(
    api: StatusApi, jobs: InMemoryJobStore, upload: IngestPlan, scan: ProcessingJob
) -> None:
    completed(jobs, scan)
    api.delete(ACME, scan.id)

    with pytest.raises(NotFoundError):
        api.job(ACME, scan.id)
    with pytest.raises(NotFoundError):
        api.cancel(ACME, CancelJob(scan.id))
    listed = api.file(ACME, upload.file.id).jobs
    assert scan.id not in {shown.job.id for shown in listed}
    assert len(listed) == len(upload.jobs) - 1


@pytest.mark.parametrize(
    ("content_type", "job_type"),
    [
        ("application/pdf", JobType.THUMBNAIL_GENERATION),
        ("image/png", JobType.VIDEO_THUMBNAIL),
        ("video/mp4", JobType.DOCUMENT_PREVIEW),
        ("application/octet-stream", JobType.VIDEO_THUMBNAIL),
    ],
)
def test_a_decoding_job_for_content_it_does_not_decode_is_refused_and_nothing_is_made(
    api: StatusApi,
    jobs: InMemoryJobStore,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
    content_type: str,
    job_type: JobType,
) -> None:
    # Given a file of one content type
    plan = ingest_plan(T0, content_type, name="mismatch")
    files.record_ingest(plan)
    before = {job.id for job in jobs.all()}
    # When a tenant asks for a job that decodes another kind of content
    request = RequestJob(plan.file.id, job_type, idempotency_key="k1")
    with pytest.raises(InvalidRequestError) as refused:
        api.request_job(ACME, request)
    # Then it is refused saying what the file holds, and no job is made or sent
    assert job_type.value in refused.value.message
    assert content_type in refused.value.message
    assert {job.id for job in jobs.all()} == before
    assert sent.sent == []


@pytest.mark.parametrize(
    ("content_type", "job_type"),
    [
        ("image/tiff", JobType.THUMBNAIL_GENERATION),
        ("video/webm", JobType.VIDEO_THUMBNAIL),
        ("text/csv", JobType.DOCUMENT_PREVIEW),
        ("image/jpeg", JobType.COMPRESSION),  # bytes as bytes: any file
        ("application/octet-stream", JobType.VIRUS_SCAN),
    ],
)
def test_a_job_that_fits_the_content_is_made(
    api: StatusApi, files: InMemoryFileStore, content_type: str, job_type: JobType
) -> None:
    plan = ingest_plan(T0, content_type, name="fits")
    files.record_ingest(plan)
    made = api.request_job(ACME, RequestJob(plan.file.id, job_type, idempotency_key="k1"))
    assert made.job.job.job_type is job_type
    assert not made.replayed


def failed_for_good(jobs: InMemoryJobStore, job: ProcessingJob, at: datetime) -> ProcessingJob:
    claim = jobs.apply(
        job.id, job.job_type, transitions.claim(now=at, lease=timedelta(minutes=5), worker="w")
    )
    assert isinstance(claim, Applied)
    failing = transitions.fail(claim.job, error="corrupt", now=at, retry_at=None, retention=KEEP)
    result = jobs.apply(job.id, job.job_type, failing)
    assert isinstance(result, Applied)
    return result.job


def test_explicit_retries_stop_once_the_job_has_run_every_attempt_it_may(
    api: StatusApi, jobs: InMemoryJobStore, scan: ProcessingJob, clock: FakeClock
) -> None:
    # Given a job retried by hand after each failure, until it has run all its attempts
    allowed = scan.attempts_allowed()
    assert allowed == (scan.max_retries + 1) * (EXPLICIT_RETRIES_LIMIT + 1)
    job = scan
    retries = 0
    while True:
        job = failed_for_good(jobs, job, clock.now)
        if job.attempt >= allowed:
            break
        job = api.retry(ACME, job.id)
        retries += 1
    # When it is retried once more, then it is refused, saying what to do instead
    with pytest.raises(ConflictError, match="request a new job"):
        api.retry(ACME, job.id)
    assert stored(jobs, job).status is JobStatus.FAILED
    assert retries == allowed - 1  # one attempt per failure: a retry for each but the last
