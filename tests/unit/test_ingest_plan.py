"""Ingest, the pure part: tenants from keys, deterministic ids, the job set per content type."""

from __future__ import annotations

import pytest

from filejobs.domain.ingest import InvalidUploadError, ObjectCreated, plan_ingest, tenant_of
from filejobs.domain.job import JobStatus, JobType
from tests.conftest import FakeClock
from tests.factories import upload_record


@pytest.mark.parametrize(
    ("key", "tenant"),
    [
        ("uploads/acme/photo.jpg", "acme"),
        ("uploads/acme-eu_2/a/b/c.pdf", "acme-eu_2"),
        ("uploads/t/name with spaces+plus.txt", "t"),
    ],
)
def test_the_tenant_is_the_first_segment_under_uploads(key: str, tenant: str) -> None:
    assert tenant_of(key) == tenant


@pytest.mark.parametrize(
    "key",
    [
        "photo.jpg",
        "outputs/acme/photo.webp",
        "uploads/photo.jpg",
        "uploads//photo.jpg",
        "uploads/acme/",
        "uploads/acme/folder/",
        "uploads/../etc/passwd",
        "uploads/" + "t" * 64 + "/x",
    ],
)
def test_keys_outside_uploads_tenant_are_refused_with_a_reason(key: str) -> None:
    with pytest.raises(InvalidUploadError, match="key"):
        tenant_of(key)


def test_the_same_record_always_plans_the_same_ids(clock: FakeClock) -> None:
    first = plan_ingest(upload_record(), "image/jpeg", now=clock.now)
    again = plan_ingest(upload_record(), "image/jpeg", now=clock.now)
    assert first.file.id == again.file.id
    assert [j.id for j in first.jobs] == [j.id for j in again.jobs]


def test_a_new_version_of_the_same_key_is_a_new_file(clock: FakeClock) -> None:
    v1 = plan_ingest(upload_record(version_id="v1"), "image/jpeg", now=clock.now)
    v2 = plan_ingest(upload_record(version_id="v2"), "image/jpeg", now=clock.now)
    assert v1.file.id != v2.file.id
    assert not {j.id for j in v1.jobs} & {j.id for j in v2.jobs}


def test_without_versioning_the_sequencer_tells_writes_apart(clock: FakeClock) -> None:
    first = plan_ingest(upload_record(sequencer="0055AED6DCD90281E5"), "text/plain", now=clock.now)
    second = plan_ingest(upload_record(sequencer="0055AED6DCD90281E6"), "text/plain", now=clock.now)
    assert first.file.id != second.file.id


def test_a_jpeg_gets_scan_dedupe_and_thumbnail_jobs(clock: FakeClock) -> None:
    plan = plan_ingest(upload_record(), "image/jpeg", now=clock.now)

    assert [j.job_type for j in plan.jobs] == [
        JobType.VIRUS_SCAN,
        JobType.DEDUPLICATION_CHECK,
        JobType.THUMBNAIL_GENERATION,
    ]
    assert len({j.id for j in plan.jobs}) == 3
    for job in plan.jobs:
        assert job.status is JobStatus.PENDING
        assert (job.file_id, job.tenant) == (plan.file.id, "acme")
        assert job.sweep_at is not None and job.sweep_at > clock.now
        assert job.input_data == {
            "bucket": "uploads-bucket",
            "key": "uploads/acme/photo.jpg",
            "size": 1024,
            "content_type": "image/jpeg",
        }
        assert job.invariant_violations() == []


def test_the_stored_file_records_the_object_version(clock: FakeClock) -> None:
    plan = plan_ingest(upload_record(version_id="v7", size=99), "application/pdf", now=clock.now)
    stored = plan.file
    assert (stored.bucket, stored.key, stored.version_id, stored.size) == (
        "uploads-bucket",
        "uploads/acme/photo.jpg",
        "v7",
        99,
    )
    assert stored.content_type == "application/pdf"
    assert plan.jobs[0].input_data is not None and plan.jobs[0].input_data["version_id"] == "v7"


def test_a_record_with_no_version_marker_is_refused(clock: FakeClock) -> None:
    record = ObjectCreated(bucket="b", key="uploads/acme/x", size=1, etag="", sequencer=None)
    with pytest.raises(InvalidUploadError, match="no version id"):
        plan_ingest(record, "text/plain", now=clock.now)
