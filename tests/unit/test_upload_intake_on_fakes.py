"""The upload intake on the in-memory stores: an upload record becomes a file, its jobs and the
messages that start them, however often the record is delivered.

(tests/integration/test_ingest.py runs the ingest on DynamoDB and S3.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.ingest import InvalidUploadError, ObjectCreated
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.transition_result import Applied
from filejobs.services.ingest import IngestService, UploadIntake
from tests import content_samples as samples
from tests.conftest import FakeClock
from tests.factories import upload_record
from tests.fakes import InMemoryFileStore, InMemoryJobStore, InMemoryObjects, RecordingDispatcher

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60
RECORD = upload_record("photo.jpg")


@pytest.fixture
def objects() -> InMemoryObjects:
    return InMemoryObjects({(RECORD.bucket, RECORD.key): JPEG})


@pytest.fixture
def intake(
    jobs: InMemoryJobStore,
    files: InMemoryFileStore,
    objects: InMemoryObjects,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> UploadIntake:
    return UploadIntake(IngestService(files, objects, clock), jobs, sent)


def of_type(jobs: list[ProcessingJob], job_type: JobType) -> ProcessingJob:
    return next(job for job in jobs if job.job_type is job_type)


def test_the_first_delivery_records_the_file_and_its_jobs_and_starts_the_ungated_ones(
    intake: UploadIntake,
    jobs: InMemoryJobStore,
    files: InMemoryFileStore,
    sent: RecordingDispatcher,
) -> None:
    received = intake.receive(RECORD)

    stored = files.get(received.file_id)
    assert received.first and received.content_type == "image/jpeg"
    assert stored is not None
    assert (stored.tenant, stored.key, stored.content_type) == ("acme", RECORD.key, "image/jpeg")
    assert [j.job_type for j in received.jobs] == [
        JobType.VIRUS_SCAN,
        JobType.DEDUPLICATION_CHECK,
        JobType.THUMBNAIL_GENERATION,
    ]
    assert {j.id: j for j in jobs.jobs_of_file(received.file_id)} == {
        j.id: j for j in received.jobs
    }
    assert {j.status for j in jobs.all()} == {JobStatus.PENDING}
    # The thumbnail waits for the virus scan's verdict: its message is not sent yet.
    assert [j.job_type for j in received.sent] == [
        JobType.VIRUS_SCAN,
        JobType.DEDUPLICATION_CHECK,
    ]
    assert sent.sent == [(j.id, timedelta(0)) for j in received.sent]


def test_a_redelivery_records_nothing_and_sends_again_what_the_first_would_have_sent(
    intake: UploadIntake, jobs: InMemoryJobStore, sent: RecordingDispatcher, clock: FakeClock
) -> None:
    # The first delivery may have died between recording the jobs and sending their messages.
    first = intake.receive(RECORD)
    before = jobs.all()
    sent.sent.clear()
    clock.advance(timedelta(seconds=10))

    again = intake.receive(RECORD)

    assert (again.first, again.file_id, again.jobs) == (False, first.file_id, ())
    assert again.content_type is None
    assert jobs.all() == before
    assert again.sent == first.sent  # the scan and the hash; the thumbnail still held back
    assert sent.sent == [(j.id, timedelta(0)) for j in first.sent]


def test_a_redelivery_sends_again_only_the_jobs_still_pending(
    intake: UploadIntake, jobs: InMemoryJobStore, sent: RecordingDispatcher, clock: FakeClock
) -> None:
    first = intake.receive(RECORD)
    scan = of_type(list(first.jobs), JobType.VIRUS_SCAN)
    claim = transitions.claim(now=clock.now, lease=timedelta(minutes=5), worker="w1")
    assert isinstance(jobs.apply(scan.id, scan.job_type, claim), Applied)
    sent.sent.clear()

    again = intake.receive(RECORD)

    # With no scan among the pending jobs, services/ingest.py sends the parsing ones too (as for
    # a file whose scan is done: nothing else would release them); while the scan runs, the
    # worker's gate leaves such a message's job pending.
    still_pending = [
        of_type(list(first.jobs), JobType.DEDUPLICATION_CHECK),
        of_type(list(first.jobs), JobType.THUMBNAIL_GENERATION),
    ]
    assert {j.id for j in again.sent} == {j.id for j in still_pending}
    assert sorted(sent.sent_ids) == sorted(j.id for j in still_pending)


def test_a_redelivery_after_every_job_started_sends_nothing(
    intake: UploadIntake, jobs: InMemoryJobStore, sent: RecordingDispatcher, clock: FakeClock
) -> None:
    first = intake.receive(RECORD)
    claim = transitions.claim(now=clock.now, lease=timedelta(minutes=5), worker="w1")
    for job in first.jobs:
        assert isinstance(jobs.apply(job.id, job.job_type, claim), Applied)
    sent.sent.clear()

    again = intake.receive(RECORD)

    assert again.sent == [] and sent.sent == []


def test_an_upload_deleted_before_its_first_delivery_is_refused_and_starts_nothing(
    intake: UploadIntake, jobs: InMemoryJobStore, sent: RecordingDispatcher
) -> None:
    gone = ObjectCreated(
        bucket=RECORD.bucket, key="uploads/acme/gone.jpg", size=1, etag="e", sequencer="01"
    )

    with pytest.raises(InvalidUploadError, match="deleted before it could be ingested"):
        intake.receive(gone)

    assert jobs.all() == [] and sent.sent == []


def test_a_late_redelivery_of_a_quarantined_upload_sends_nothing(
    intake: UploadIntake,
    jobs: InMemoryJobStore,
    objects: InMemoryObjects,
    sent: RecordingDispatcher,
    clock: FakeClock,
) -> None:
    first = intake.receive(RECORD)
    cancel = transitions.cancel(now=clock.now, by="scan", reason="infected", retention=timedelta(1))
    for job in first.jobs:
        assert isinstance(jobs.apply(job.id, job.job_type, cancel), Applied)
    del objects.objects[(RECORD.bucket, RECORD.key)]  # moved to quarantine
    sent.sent.clear()

    again = intake.receive(RECORD)

    assert (again.first, again.file_id, again.sent) == (False, first.file_id, [])
    assert sent.sent == []


def test_a_key_outside_the_uploads_prefix_is_refused_before_any_read(
    intake: UploadIntake, files: InMemoryFileStore, sent: RecordingDispatcher
) -> None:
    stray = ObjectCreated(bucket=RECORD.bucket, key="outputs/acme/x.jpg", size=1, etag="e")

    with pytest.raises(InvalidUploadError):
        intake.receive(stray)

    assert sent.sent == []


# --- what the sniffer reads beyond the head -----------------------------------------------------


def upload_of(objects: InMemoryObjects, name: str, body: bytes) -> ObjectCreated:
    record = upload_record(name, size=len(body))
    objects.objects[(record.bucket, record.key)] = body
    return record


def test_a_libreoffice_document_is_recorded_as_what_it_is_and_previewed(
    intake: UploadIntake, objects: InMemoryObjects
) -> None:
    # given a .docx whose [Content_Types].xml is past the head (LibreOffice writes it last)
    record = upload_of(objects, "report.docx", samples.ooxml(layout="libreoffice", padding=200_000))
    # when it is received
    received = intake.receive(record)
    # then it is recorded a Word document, with a preview, for one ranged read of its end
    assert received.content_type == samples.DOCX
    assert JobType.DOCUMENT_PREVIEW in [job.job_type for job in received.jobs]
    assert [(key, length) for key, _, length in objects.ranged_reads] == [(record.key, 65_557)]


@pytest.mark.parametrize(("art", "thumbnail"), [(True, True), (False, False)])
def test_audio_gets_a_thumbnail_job_only_when_it_carries_cover_art(
    intake: UploadIntake, objects: InMemoryObjects, art: bool, thumbnail: bool
) -> None:
    record = upload_of(objects, "song.mp3", samples.mp3(art=art))
    received = intake.receive(record)
    assert received.content_type == "audio/mpeg"
    job_types = [job.job_type for job in received.jobs]
    assert (JobType.THUMBNAIL_GENERATION in job_types) is thumbnail
    assert len(objects.ranged_reads) == 1


def test_an_image_costs_no_read_beyond_its_head(
    intake: UploadIntake, objects: InMemoryObjects
) -> None:
    intake.receive(upload_of(objects, "photo.nef", samples.nef() + bytes(200_000)))
    assert objects.ranged_reads == []
