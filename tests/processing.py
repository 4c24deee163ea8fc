"""Running one processor on real bytes in moto S3, without the worker around it.

def test_x(media: MediaBench) -> None:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "photo.jpg", jpeg_bytes)
    result = ThumbnailProcessor(media.s3)(work)
    thumb = media.output(result["thumbnails"][0]["key"])
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest
from mypy_boto3_s3 import S3Client

from filejobs.adapters.s3 import S3Outputs
from filejobs.domain.attempt_notes import AttemptRecorder
from filejobs.domain.content import sniff_content_type
from filejobs.domain.ingest import IngestPlan, plan_ingest
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.time import utcnow
from filejobs.processors.base import Work
from filejobs_dev.infra.template import create_buckets, create_queues, load_template, queue_arns
from tests.factories import upload_record


@dataclass
class MediaBench:
    s3: S3Client
    uploads: str
    outputs: str
    quarantine: str
    scratch: Path
    stop: list[bool] = field(default_factory=lambda: [False])

    def upload(self, name: str, body: bytes, tenant: str = "acme") -> str:
        key = f"uploads/{tenant}/{name}"
        self.s3.put_object(Bucket=self.uploads, Key=key, Body=body)
        return key

    def job_for(
        self, job_type: JobType, name: str, body: bytes, input_data: dict[str, object] | None = None
    ) -> ProcessingJob:
        """The job ingest would have made for this upload (content type sniffed from `body`)."""
        plan = self.planned(name, body)
        job = next((j for j in plan.jobs if j.job_type is job_type), None)
        if job is None:  # a type ingest would not choose for this content: make it anyway
            job = plan.jobs[0].copy()
            job.job_type = job_type
        job.input_data = {**(job.input_data or {}), **(input_data or {})}
        return job

    def planned(self, name: str, body: bytes) -> IngestPlan:
        """The upload made, and what ingest would record of it: its file and jobs."""
        key = self.upload(name, body)
        version = self.s3.head_object(Bucket=self.uploads, Key=key).get("VersionId")
        record = upload_record(name, bucket=self.uploads, version_id=version, size=len(body))
        return plan_ingest(record, sniff_content_type(body[:4096]), now=utcnow())

    def work_of(self, job: ProcessingJob) -> Work:
        """An attempt of the job, with its own workspace and writer of outputs."""
        workspace = self.scratch / uuid.uuid4().hex
        workspace.mkdir(parents=True)
        writer = S3Outputs(self.s3, self.outputs).for_job(job)
        return Work(job, lambda: self.stop[0], workspace, writer)

    def work_for(
        self,
        job_type: JobType,
        name: str,
        body: bytes,
        input_data: dict[str, object] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Work:
        job = self.job_for(job_type, name, body, input_data)
        workspace = self.scratch / uuid.uuid4().hex
        workspace.mkdir(parents=True)
        writer = S3Outputs(self.s3, self.outputs).for_job(job)
        return Work(job, should_stop or (lambda: self.stop[0]), workspace, writer)

    def output(self, key: str) -> bytes:
        data: bytes = self.s3.get_object(Bucket=self.outputs, Key=key)["Body"].read()
        return data


@pytest.fixture
def media(aws: None, tmp_path: Path) -> MediaBench:
    """The template's buckets on moto (uploads versioned, outputs, quarantine); a scratch dir."""
    suffix = uuid.uuid4().hex[:8]
    names = {
        "UploadsBucket": f"uploads-{suffix}",
        "OutputsBucket": f"outputs-{suffix}",
        "QuarantineBucket": f"quarantine-{suffix}",
    }
    s3 = boto3.client("s3")
    template = load_template()
    # The uploads bucket notifies the ingest and file-removals queues: they must exist (nobody
    # reads them here).
    sqs = boto3.client("sqs")
    notified = ("IngestQueue", "FileRemovalsQueue", "IngestDeadLetterQueue")
    queue = {q: f"{q}-{suffix}" for q in notified}
    create_buckets(s3, names, queue_arns(sqs, create_queues(sqs, queue, template)), template)
    return MediaBench(
        s3, names["UploadsBucket"], names["OutputsBucket"], names["QuarantineBucket"], tmp_path
    )


class ProgressReports(AttemptRecorder):
    """An attempt's notes, keeping every progress report as it came, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[tuple[float, str | None]] = []

    def report_progress(self, fraction: float, message: str | None = None) -> None:
        self.reports.append((fraction, message))
        super().report_progress(fraction, message)


def watched(work: Work) -> tuple[Work, ProgressReports]:
    """The attempt, its progress reports kept (ProgressReports)."""
    reports = ProgressReports()
    return dataclasses.replace(work, notes=reports), reports
