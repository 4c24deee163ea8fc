"""Builders for domain objects in tests."""

from __future__ import annotations

from datetime import datetime

from filejobs.domain.ingest import IngestPlan, ObjectCreated, plan_ingest
from filejobs.domain.job import JobType, ProcessingJob


def upload_record(
    name: str = "photo.jpg",
    *,
    tenant: str = "acme",
    bucket: str = "uploads-bucket",
    version_id: str | None = None,
    sequencer: str = "0062E99A88DC407460",
    size: int = 1024,
) -> ObjectCreated:
    return ObjectCreated(
        bucket=bucket,
        key=f"uploads/{tenant}/{name}",
        size=size,
        etag="9b2cf535f27731c974343645a3985328",
        version_id=version_id,
        sequencer=sequencer,
    )


def ingest_plan(now: datetime, content_type: str = "image/tiff", **record: object) -> IngestPlan:
    return plan_ingest(upload_record(**record), content_type, now=now)  # type: ignore[arg-type]


def pending_job(now: datetime, job_type: JobType = JobType.VIRUS_SCAN) -> ProcessingJob:
    plan = ingest_plan(now)
    return next(job for job in plan.jobs if job.job_type is job_type)
