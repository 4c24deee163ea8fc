"""Specification: the virus scan end to end, as the virus scan's worker runs it.

Everything real but the clock: moto S3 (the template's buckets) and tables, a definitions set
published as the updater publishes it, warm clamd and YARA (processors/scan/current.py), the
use case (services/virus_scan.py), the worker's claim and completion. It shows the verdict
recorded on the file before anything is done about it, the quarantine leaving no version of the
upload behind whatever its key, the fail-closed refusal, and a rescan with new definitions
quarantining a file the first scan passed, withdrawing what was derived from it.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from filejobs.adapters.definitions import DefinitionsStore
from filejobs.adapters.quarantine import S3VerdictStore
from filejobs.adapters.s3 import S3Outputs
from filejobs.adapters.workspace import shared_scratch
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import FileModel
from filejobs.domain import keys, outcome_events
from filejobs.domain.content import sniff_content_type
from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.ingest import IngestPlan, ObjectCreated, plan_ingest
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.scanning import GATED_JOB_TYPES
from filejobs.domain.time import utcnow
from filejobs.processors.scan.clamd import shared_daemon
from filejobs.processors.scan.current import CurrentEngines, EngineSettings
from filejobs.processors.scan.processor import VirusScanProcessor
from filejobs.services.rescans import Rescans
from filejobs.services.scan_gate import ScanGate
from filejobs.services.virus_scan import VirusScan
from filejobs.services.worker import Disposition, WorkerService
from tests.definitions import publish_set
from tests.processing import MediaBench

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
CLAMD = shutil.which("clamd") or "/usr/sbin/clamd"
pytestmark = pytest.mark.skipif(not Path(CLAMD).exists(), reason="clamd is not installed")


class Clock:
    """The worker's clock: the real time, plus what a test moves it on by (a retry's delay)."""

    def __init__(self) -> None:
        self.ahead = timedelta(0)

    def __call__(self) -> datetime:
        return utcnow() + self.ahead


class Sent:
    def __init__(self) -> None:
        self.jobs: list[str] = []

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.jobs.append(job.id)


@dataclass
class Scanning:
    media: MediaBench
    sent: Sent
    worker: WorkerService
    folder: Path
    clock: Clock

    def upload(self, key: str, body: bytes, tagging: str = "") -> IngestPlan:
        """An upload (with the uploader's `tagging`), recorded as the ingest records it (the
        file and its jobs)."""
        put = self.media.s3.put_object(
            Bucket=self.media.uploads, Key=key, Body=body, Tagging=tagging
        )
        record = ObjectCreated(
            self.media.uploads, key, len(body), put["ETag"].strip('"'), put["VersionId"]
        )
        plan = plan_ingest(record, sniff_content_type(body[:4096]), now=utcnow())
        FileRepository().record_ingest(plan)
        return plan

    def publish(self, set_id: str, signatures: dict[str, bytes]) -> None:
        """A definitions set whose ClamAV database knows each body by its MD5."""
        publish_set(self.media.s3, self.media.outputs, self.folder, set_id, signatures)

    def run(self, job: ProcessingJob) -> Disposition:
        return self.worker.handle(JobMessage.for_job(job)).disposition


@pytest.fixture
def scanning(tables: dict[str, str], media: MediaBench, tmp_path: Path) -> Iterator[Scanning]:
    definitions = DefinitionsStore(media.s3, media.outputs, "signatures/")
    # The default refresh (5 minutes): a rescan still sees a set published a moment before.
    settings = EngineSettings(use_clamav=True, clamd=CLAMD)
    engines = CurrentEngines(definitions, tmp_path / "cache", settings)
    sent, clock = Sent(), Clock()
    gate = ScanGate(FileRepository(), JobRepository(), sent, retention=timedelta(days=1))
    marks = S3VerdictStore(media.s3, media.quarantine, media.outputs)
    use_case = VirusScan(VirusScanProcessor(media.s3, engines), FileRepository(), marks, gate)
    worker = WorkerService(
        JobRepository(),
        sent,
        use_case,
        JobType.VIRUS_SCAN,
        lease=timedelta(minutes=5),
        retention=timedelta(days=1),
        worker_id="virus-scan",
        outputs=S3Outputs(media.s3, media.outputs).for_job,
        scratch=shared_scratch(),
        gate=gate,
        clock=clock,
    )
    yield Scanning(media, sent, worker, tmp_path / "sets", clock)
    daemon = shared_daemon()
    if daemon is not None:
        daemon.stop()


def scan_job(plan: IngestPlan) -> ProcessingJob:
    return next(j for j in plan.jobs if j.job_type is JobType.VIRUS_SCAN)


def stored_file(plan: IngestPlan) -> StoredFile:
    found = FileRepository().get(plan.file.id)
    assert found is not None
    return found


def stored_job(job_id: str) -> ProcessingJob:
    found = JobRepository().get(job_id)
    assert found is not None
    return found


def versions_left(media: MediaBench, key: str) -> list[Any]:
    listing = media.s3.list_object_versions(Bucket=media.uploads, Prefix=key)
    kept = listing.get("Versions", []) + listing.get("DeleteMarkers", [])
    return [v for v in kept if v["Key"] == key]


def test_an_infected_upload_under_any_key_is_quarantined_leaving_no_version_behind(
    scanning: Scanning,
) -> None:
    scanning.publish("20261201T100000Z", {"Test.EICAR": EICAR})
    # Given EICAR uploaded under a key S3 metadata could never hold
    key = "uploads/acme/Счёт за декабрь + акт №7.pdf.exe"
    plan = scanning.upload(key, EICAR)
    # When its scan job runs
    assert scanning.run(scan_job(plan)) is Disposition.COMPLETED
    # Then the file is quarantined, with the verdict's evidence on its record
    stored = stored_file(plan)
    assert (stored.status, stored.scan_status) == (FileStatus.QUARANTINED, ScanStatus.INFECTED)
    assert stored.scan is not None
    assert stored.scan.definitions_version == "20261201T100000Z"
    assert set(stored.scan.engines) == {"yara", "clamav"}
    assert stored.scan.signatures == ("EICAR_Test_File", "Test.EICAR.UNOFFICIAL")
    # And no version of the upload is left, current or noncurrent; the copy is quarantined
    assert versions_left(scanning.media, key) == []
    target = keys.quarantine_key("acme", plan.file.id, key)
    copy = scanning.media.s3.get_object(Bucket=scanning.media.quarantine, Key=target)
    assert copy["Body"].read() == EICAR
    # And the job says so; the file's parsing jobs were cancelled
    result = stored_job(scan_job(plan).id).result_data or {}
    assert result["quarantine_key"] == target
    assert result["definitions"]["set_id"] == "20261201T100000Z"
    for job in plan.jobs:
        if job.job_type in GATED_JOB_TYPES:
            assert stored_job(job.id).status is JobStatus.CANCELLED


def test_an_attempt_that_died_after_moving_the_version_is_finished_by_the_next(
    scanning: Scanning, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanning.publish("20261201T100000Z", {"Test.EICAR": EICAR})
    plan = scanning.upload("uploads/acme/virus.exe", EICAR)
    # Given an attempt that recorded the infection, marked the file quarantined, copied and
    # deleted the version, then died before it could say so
    real = S3VerdictStore.quarantine

    def moves_then_dies(self: S3VerdictStore, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        raise ConnectionResetError("the worker died right after the move")

    monkeypatch.setattr(S3VerdictStore, "quarantine", moves_then_dies)
    assert scanning.run(scan_job(plan)) is Disposition.RETRYING
    assert versions_left(scanning.media, plan.file.key) == []
    stored = stored_file(plan)
    assert (stored.status, stored.scan_status) == (FileStatus.QUARANTINED, ScanStatus.INFECTED)
    # When the next attempt (once its retry is due) finds the version gone
    monkeypatch.setattr(S3VerdictStore, "quarantine", real)
    scanning.clock.ahead = timedelta(hours=1)
    assert scanning.run(scan_job(plan)) is Disposition.COMPLETED
    # Then it finished the quarantine (no second copy), reporting the recorded verdict
    stored = stored_file(plan)
    assert stored.status is FileStatus.QUARANTINED
    result = stored_job(scan_job(plan).id).result_data or {}
    assert result["quarantine"]["resumed"] is True and result["quarantine"]["copied"] is False
    assert result["signatures"] == ["EICAR_Test_File", "Test.EICAR.UNOFFICIAL"]
    target = keys.quarantine_key("acme", plan.file.id, plan.file.key)
    listing = scanning.media.s3.list_object_versions(
        Bucket=scanning.media.quarantine, Prefix=target
    )
    assert len(listing.get("Versions", [])) == 1


def test_a_clean_upload_is_tagged_and_its_waiting_jobs_are_sent(scanning: Scanning) -> None:
    scanning.publish("20261201T100000Z", {"Test.EICAR": EICAR})
    plan = scanning.upload("uploads/acme/notes for Q4.txt", b"Quarterly notes\n" * 40)
    assert scanning.run(scan_job(plan)) is Disposition.COMPLETED
    stored = stored_file(plan)
    assert (stored.status, stored.scan_status) == (FileStatus.ACTIVE, ScanStatus.CLEAN)
    assert plan.file.version_id is not None
    tagging = scanning.media.s3.get_object_tagging(
        Bucket=scanning.media.uploads, Key=plan.file.key, VersionId=plan.file.version_id
    )
    assert tagging["TagSet"] == [{"Key": "scan-status", "Value": "CLEAN"}]
    gated = {j.id for j in plan.jobs if j.job_type in GATED_JOB_TYPES}
    assert gated and gated <= set(scanning.sent.jobs)


def test_without_definitions_the_scan_retries_and_decides_nothing(scanning: Scanning) -> None:
    plan = scanning.upload("uploads/acme/early.txt", b"uploaded before any definitions\n")
    # When the scan runs on a stack whose updater has not published yet
    assert scanning.run(scan_job(plan)) is Disposition.RETRYING
    job = stored_job(scan_job(plan).id)
    assert "no ClamAV definitions have been published" in (job.error_message or "")
    # then it is scheduled minutes later, not seconds, and the file has no verdict
    assert job.scheduled_at is not None and job.scheduled_at - utcnow() > timedelta(minutes=4)
    assert stored_file(plan).scan_status is None


def test_a_rescan_with_new_definitions_quarantines_a_file_the_first_scan_passed(
    scanning: Scanning,
) -> None:
    # Given a file scanned clean, whose thumbnails were made
    scanning.publish("20261201T100000Z", {"Test.EICAR": EICAR})
    threat = b"%PDF-1.4\n% a document exploit nobody had a signature for on Monday\n" * 8
    plan = scanning.upload("uploads/acme/contracts/offer.pdf", threat)
    assert scanning.run(scan_job(plan)) is Disposition.COMPLETED
    before = stored_file(plan)
    assert before.scan_status is ScanStatus.CLEAN
    derived = f"{keys.derived_prefix('acme', plan.file.id)}document_preview/page-1.webp"
    scanning.media.s3.put_object(Bucket=scanning.media.outputs, Key=derived, Body=b"webp")
    # When a new set knows it, and the file is rescanned
    scanning.publish("20261202T100000Z", {"Test.EICAR": EICAR, "Test.Offer.Exploit": threat})
    rescans = Rescans(JobRepository(), FileRepository(), scanning.sent)
    rescan = rescans.rescan(before, key=str(uuid.uuid4()), by="operator", reason="new sigs")
    assert rescan.created
    assert scanning.run(rescan.job) is Disposition.COMPLETED
    # Then the file is quarantined with the new set's verdict, and no version of it is left
    after = stored_file(plan)
    assert (after.status, after.scan_status) == (FileStatus.QUARANTINED, ScanStatus.INFECTED)
    assert after.scan is not None and after.scan.definitions_version == "20261202T100000Z"
    assert "Test.Offer.Exploit.UNOFFICIAL" in after.scan.signatures
    assert versions_left(scanning.media, plan.file.key) == []
    # And what was derived from it is gone too
    listing = scanning.media.s3.list_objects_v2(Bucket=scanning.media.outputs, Prefix="derived/")
    assert listing.get("KeyCount", 0) == 0
    result = stored_job(rescan.job.id).result_data or {}
    assert result["rescan"] is True and result["quarantine"]["outputs_withdrawn"] == 1
    # And the write that quarantined it is one the events function announces
    assert outcome_events.file_outcome(before, after) is outcome_events.DetailType.FILE_QUARANTINED
    # And the first scan's job still says what it saw then
    first = stored_job(scan_job(plan).id).result_data or {}
    assert first["verdict"] == "CLEAN" and first["definitions_version"] == "20261201T100000Z"


TEN_TAGS = "&".join(f"label-{n:02d}=v{n}" for n in range(10))  # S3's most


def test_a_clean_upload_at_s3s_ten_tags_is_tagged_and_keeps_the_tag_it_displaced(
    scanning: Scanning,
) -> None:
    scanning.publish("20261201T100000Z", {"Test.EICAR": EICAR})
    # Given an upload that came with 10 tags of its uploader's
    plan = scanning.upload("uploads/acme/labelled.txt", b"labelled notes\n" * 40, TEN_TAGS)
    # When it is scanned clean
    assert scanning.run(scan_job(plan)) is Disposition.COMPLETED
    # Then its version carries the verdict (its jobs can read it) and nine of the tags
    tagging = scanning.media.s3.get_object_tagging(
        Bucket=scanning.media.uploads, Key=plan.file.key, VersionId=plan.file.version_id or ""
    )
    on_object = {t["Key"]: t["Value"] for t in tagging["TagSet"]}
    assert on_object.pop("scan-status") == "CLEAN" and len(on_object) == 9
    # and the tenth is kept on the file's record: none of the uploader's tags is lost
    displaced = FileModel.get(plan.file.id).displaced_tags
    assert displaced is not None
    kept = {key: displaced[key] for key in displaced}
    assert on_object | kept == {f"label-{n:02d}": f"v{n}" for n in range(10)}
    assert {j.id for j in plan.jobs if j.job_type in GATED_JOB_TYPES} <= set(scanning.sent.jobs)


def test_an_infected_file_is_marked_and_its_outputs_withdrawn_before_a_byte_moves(
    scanning: Scanning, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file at S3's 10 tags, scanned clean, whose preview was made
    scanning.publish("20261201T100000Z", {"Test.EICAR": EICAR})
    threat = b"%PDF-1.4\n% an exploit Monday's definitions did not know\n" * 8
    plan = scanning.upload("uploads/acme/offer.pdf", threat, TEN_TAGS)
    assert scanning.run(scan_job(plan)) is Disposition.COMPLETED
    derived = f"{keys.derived_prefix('acme', plan.file.id)}document_preview/page-1.webp"
    scanning.media.s3.put_object(Bucket=scanning.media.outputs, Key=derived, Body=b"webp")
    # When a rescan finds it infected, and S3 refuses every copy to the quarantine bucket
    scanning.publish("20261202T100000Z", {"Test.EICAR": EICAR, "Test.Offer": threat})

    def copy_refused(**_: Any) -> None:
        raise ConnectionResetError("S3 refused the copy")

    monkeypatch.setattr(scanning.media.s3, "copy_object", copy_refused)
    rescan = Rescans(JobRepository(), FileRepository(), scanning.sent).rescan(
        stored_file(plan), key=str(uuid.uuid4()), by="operator", reason="new sigs"
    )
    assert scanning.run(rescan.job) is Disposition.RETRYING
    # Then, though not a byte moved, the file is marked quarantined and nothing made from it
    # is left to serve
    assert len(versions_left(scanning.media, plan.file.key)) == 1
    after = stored_file(plan)
    assert (after.status, after.scan_status) == (FileStatus.QUARANTINED, ScanStatus.INFECTED)
    listing = scanning.media.s3.list_objects_v2(Bucket=scanning.media.outputs, Prefix="derived/")
    assert listing.get("KeyCount", 0) == 0
    # And the next attempt moves it, whatever tags it carried
    monkeypatch.undo()
    scanning.clock.ahead = timedelta(hours=1)
    assert scanning.run(rescan.job) is Disposition.COMPLETED
    assert versions_left(scanning.media, plan.file.key) == []
