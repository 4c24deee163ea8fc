"""The pure rules behind the API's job requests, deletes and output URLs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.job import JobError, JobStatus, JobType
from filejobs.domain.outputs import derived_files
from filejobs.domain.time import utcnow
from filejobs.views import job_view
from tests.factories import pending_job


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED])
def test_a_finished_job_is_soft_deleted_in_its_metadata(status: JobStatus) -> None:
    # given a finished job
    job = pending_job(utcnow())
    job.status = status
    job.sweep_at = None
    # when deleted
    now = utcnow()
    job.apply(transitions.delete(now=now, by="api:tenant:acme"))
    # then its metadata says when and by whom, and nothing else changed
    assert (job.metadata.deleted_at, job.metadata.deleted_by) == (now, "api:tenant:acme")
    assert job.status is status
    # and a second delete is refused as deleted
    with pytest.raises(JobError) as refused:
        job.apply(transitions.delete(now=now, by="x"))
    assert refused.value.reason == transitions.Conflict.DELETED


@pytest.mark.parametrize("status", [JobStatus.PENDING, JobStatus.RUNNING, JobStatus.SCHEDULED])
def test_an_active_job_cannot_be_deleted(status: JobStatus) -> None:
    job = pending_job(utcnow())
    job.status = status
    with pytest.raises(JobError) as refused:
        job.apply(transitions.delete(now=utcnow(), by="x"))
    assert refused.value.reason == transitions.Conflict.ACTIVE


def test_output_keys_are_the_jobs_own_derived_files_only() -> None:
    # given a completed thumbnail job whose result names keys in and out of its folder
    job = pending_job(utcnow(), JobType.THUMBNAIL_GENERATION)
    folder = f"derived/{job.tenant}/{job.file_id}/{job.job_type.value}/"
    job.status = JobStatus.COMPLETED
    job.result_data = {
        "thumbnails": [{"key": folder + "a.webp"}, {"key": folder + "b.webp"}],
        "again": {"key": folder + "a.webp"},
        "source": {"key": f"uploads/{job.tenant}/photo.jpg"},
        "other_type": {"key": f"derived/{job.tenant}/{job.file_id}/compression/x.zst"},
        "escape": {"key": folder + "../../x"},
        "folder": {"key": folder},
        "not_a_string": {"key": 3},
    }
    # then only its own outputs, each once, in order
    assert [file.key for file in derived_files(job)] == [folder + "a.webp", folder + "b.webp"]
    # and a job that did not complete has none
    job.status = JobStatus.FAILED
    assert derived_files(job) == []


def test_outputs_appear_in_a_view_only_when_given() -> None:
    job = pending_job(utcnow())
    assert "outputs" not in job_view(job)
    assert job_view(job, outputs=[])["outputs"] == []


def test_delete_records_who_and_when_and_nothing_of_the_storage() -> None:
    # taking the job out of the listing indexes is the repository's business, not the domain's
    change = transitions.delete(now=utcnow(), by="x").changes
    assert change.remove == frozenset()
    assert set(change.set) == {"deleted_at", "deleted_by"}
    assert change.updated_at - utcnow() < timedelta(seconds=5)
