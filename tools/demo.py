"""`make demo`: the job core at work, in one process, on moto (no AWS account, no Docker).

Uploads a few real files to an emulated S3 bucket, ingests each S3 record (one of them
delivered twice), then lets workers run the jobs while things go wrong the way they do in
production: a transient failure that is retried with backoff, a worker that dies mid-job and
is recovered by the sweep, a user who cancels a job. Each worker does a real read of the object
(size and SHA-256). The local stack (issue 5) replaces this with the real Lambda handlers.

Exits 0 only when every job ends in the state this script expects.
"""

from __future__ import annotations

import os
import sys
import zlib
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
for _name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
    os.environ.setdefault(_name, "demo")

from filejobs.adapters.s3 import S3HeadReader  # noqa: E402
from filejobs.data.file_repository import FileRepository, Ingested  # noqa: E402
from filejobs.data.job_repository import JobRepository  # noqa: E402
from filejobs.data.models import bind_tables  # noqa: E402
from filejobs.domain import transitions  # noqa: E402
from filejobs.domain.ingest import ObjectCreated  # noqa: E402
from filejobs.domain.job import JobStatus, ProcessingJob  # noqa: E402
from filejobs.domain.messages import JobMessage  # noqa: E402
from filejobs.domain.retry import RetryPolicy, TransientError  # noqa: E402
from filejobs.infra.template import create_tables  # noqa: E402
from filejobs.processors.base import Work  # noqa: E402
from filejobs.processors.digest import ObjectDigest  # noqa: E402
from filejobs.services.ingest import IngestService  # noqa: E402
from filejobs.services.sweep import SweepService  # noqa: E402
from filejobs.services.worker import Outcome, WorkerService  # noqa: E402

BUCKET = "filejobs-demo-uploads"
LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)
RETRY = RetryPolicy(base=timedelta(seconds=2), cap=timedelta(minutes=1))


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


class Queue:
    """Stands in for the job queues: the sweep's dispatches land here."""

    def __init__(self) -> None:
        self.messages: list[ProcessingJob] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.messages.append(job)


def sample_files() -> dict[str, bytes]:
    rows = b"".join(b"\x00" + b"\x20\x80\xc0" * 16 for _ in range(16))
    ihdr = (16).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data).to_bytes(4, "big")
        return len(data).to_bytes(4, "big") + kind + data + crc

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return {
        "uploads/acme/photo.png": png,
        "uploads/acme/minutes.txt": b"Minutes of the board meeting\n" * 40,
        "uploads/acme/report.pdf": b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n",
        "uploads/globex/data.csv": b"id,name,amount\n1,alpha,10\n2,beta,20\n3,gamma,30\n",
        "uploads/globex/empty.bin": b"",
    }


def upload_all(s3: S3Client, files: dict[str, bytes]) -> list[ObjectCreated]:
    records = []
    for n, (key, body) in enumerate(files.items()):
        put = s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        records.append(
            ObjectCreated(
                bucket=BUCKET,
                key=key,
                size=len(body),
                etag=put["ETag"].strip('"'),
                version_id=put.get("VersionId"),
                sequencer=f"{n:018X}",
            )
        )
    return records


_SAYS = {
    Outcome.COMPLETED: "completed",
    Outcome.RETRYING: "failed: {detail} (retry scheduled)",
    Outcome.FAILED: "failed: {detail}",
    Outcome.SKIPPED: "skipped ({detail})",
    Outcome.ABANDONED: "result discarded ({detail})",
}


class Demo:
    def __init__(self, s3: S3Client) -> None:
        self.s3 = s3
        self.clock, self.queue = Clock(), Queue()
        self.jobs, files = JobRepository(), FileRepository()
        self.ingest = IngestService(files, S3HeadReader(s3), self.clock)
        self.sweep = SweepService(
            self.jobs, self.queue, clock=self.clock, retry_policy=RETRY, retention=KEEP
        )
        self.records: list[ObjectCreated] = []
        self.planned: list[ProcessingJob] = []
        self.expected: dict[str, JobStatus] = {}
        self.failures: dict[str, int] = {}

    def act_1_ingest(self) -> None:
        print("1. Uploads are ingested (the CSV's S3 event is delivered twice):")
        self.records = upload_all(self.s3, sample_files())
        for record in [*self.records, self.records[3]]:
            outcome = self.ingest.ingest(record)
            if isinstance(outcome, Ingested):
                self.planned.extend(outcome.plan.jobs)
                kinds = ", ".join(j.job_type.value for j in outcome.plan.jobs)
                print(f"   {record.key:<26} {outcome.plan.file.content_type:<19} -> {kinds}")
            else:
                print(f"   {record.key:<26} duplicate delivery: already ingested, nothing written")
        self.expected = {j.id: JobStatus.COMPLETED for j in self.planned}

    def act_2_work(self) -> None:
        print("\n2. A user cancels a document preview; workers run everything else:")
        flaky = self._first("compression")
        crashed = self._first("thumbnail_generation")
        cancelled = self._first("document_preview")
        self.expected[cancelled.id] = JobStatus.CANCELLED
        self.failures[flaky.id] = 1
        cancel = transitions.cancel(
            now=self.clock.now, by="alice", reason="not needed", retention=KEEP
        )
        self.jobs.apply(cancelled.id, cancelled.job_type, cancel)
        for job in self.planned:
            if job.id == crashed.id:
                claim = transitions.claim(now=self.clock.now, lease=LEASE, worker="doomed")
                self.jobs.apply(job.id, job.job_type, claim)
                print(f"   {job.job_type.value:<22} worker died mid-job (no outcome written)")
                continue
            print(f"   {job.job_type.value:<22} {self._run_worker(job)}")

    def act_3_sweep(self) -> None:
        print("\n3. Six minutes later the sweep runs: due retries and lost leases move on:")
        for minutes in (6, 2):
            self.clock.now += timedelta(minutes=minutes)
            report = self.sweep.run()
            print(f"   sweep examined {report.examined} job(s): {dict(report.actions)}")
        for job in self.queue.messages:
            outcome = self._run_worker(job)
            print(f"   redelivered {job.job_type.value:<22} {outcome}")

    def act_4_report(self) -> bool:
        print("\n4. Final state:")
        names = {r.key: r.key.removeprefix("uploads/") for r in self.records}
        ok = True
        for job in self.planned:
            stored = self.jobs.get(job.id)
            assert stored is not None
            hit = stored.status is self.expected[job.id]
            ok &= hit
            detail = (stored.result_data or {}).get("sha256", stored.cancel_reason or "")
            attempts = f"{stored.attempt} attempt(s)"
            name = names[str((stored.input_data or {}).get("key"))]
            print(
                f"   {'ok ' if hit else 'BAD'} {name:<18} {stored.job_type.value:<21} "
                f"{stored.status.value:<10} {attempts:<13} {str(detail)[:16]}"
            )
        print("\nevery job reached its expected state" if ok else "\nSOME JOBS DID NOT")
        return ok

    def _first(self, job_type: str) -> ProcessingJob:
        return next(j for j in self.planned if j.job_type.value == job_type)

    def _run_worker(self, job: ProcessingJob) -> str:
        """What a worker Lambda does with the job's message: the real worker service."""
        service = WorkerService(
            self.jobs,
            self.queue,
            self._work,
            job.job_type,
            lease=LEASE,
            retention=KEEP,
            worker_id="demo",
            retry_policy=RETRY,
            clock=self.clock,
        )
        result = service.handle(JobMessage.for_job(job))
        return _SAYS[result.outcome].format(detail=result.detail)

    def _work(self, work: Work) -> dict[str, Any]:
        job = work.job
        if self.failures.get(job.id, 0) > 0:
            self.failures[job.id] -= 1
            raise TransientError("S3 answered 503 SlowDown")
        return ObjectDigest(self.s3)(work)


def main() -> int:
    with mock_aws():
        dynamodb, s3 = boto3.client("dynamodb"), boto3.client("s3")
        create_tables(dynamodb, {"JobsTable": "demo-jobs", "FilesTable": "demo-files"})
        bind_tables(jobs_table="demo-jobs", files_table="demo-files")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        demo = Demo(s3)
        demo.act_1_ingest()
        demo.act_2_work()
        demo.act_3_sweep()
        return 0 if demo.act_4_report() else 1


if __name__ == "__main__":
    sys.exit(main())
