"""Idempotent ingest: an S3 object-created record becomes exactly one file and one set of jobs."""

from __future__ import annotations

import io
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from mypy_boto3_s3 import S3Client

from filejobs.adapters.s3 import S3HeadReader
from filejobs.data.file_repository import FileRepository
from filejobs.domain.ingest import InvalidUploadError, ObjectCreated
from filejobs.domain.job import JobStatus, JobType
from filejobs.ports import AlreadyIngested, Ingested
from filejobs.services.ingest import IngestService
from tests import content_samples as samples
from tests.aws_requests import counting_requests
from tests.conftest import FakeClock
from tests.listing import jobs_of_file

BUCKET = "filejobs-uploads-test"


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    """A real, decodable RGB PNG built from its chunks."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def s3(tables: dict[str, str]) -> S3Client:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return client


@pytest.fixture
def service(s3: S3Client, clock: FakeClock) -> IngestService:
    return IngestService(FileRepository(), S3HeadReader(s3), clock)


def upload(s3: S3Client, key: str, body: bytes) -> ObjectCreated:
    """Put the object and build the record S3 would deliver for it."""
    put = s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="text/plain")
    return ObjectCreated(
        bucket=BUCKET,
        key=key,
        size=len(body),
        etag=put["ETag"].strip('"'),
        version_id=put.get("VersionId"),
        sequencer="0062E99A88DC407460",
    )


def test_an_upload_becomes_a_file_with_jobs_chosen_by_its_bytes(
    service: IngestService, s3: S3Client
) -> None:
    # Given a PNG uploaded under a misleading name and Content-Type
    record = upload(s3, "uploads/acme/report.txt", png_bytes())

    # When it is ingested
    result = service.ingest(record)

    # Then the file is recorded as an image, with scan, dedupe and thumbnail jobs pending
    assert isinstance(result, Ingested)
    stored = FileRepository().get(result.plan.file.id)
    assert stored is not None
    assert (stored.tenant, stored.content_type, stored.size) == ("acme", "image/png", record.size)
    assert stored.version_id == record.version_id
    jobs = jobs_of_file(stored.id)
    assert sorted(j.job_type for j in jobs) == sorted(
        [JobType.VIRUS_SCAN, JobType.DEDUPLICATION_CHECK, JobType.THUMBNAIL_GENERATION]
    )
    assert {j.status for j in jobs} == {JobStatus.PENDING}


def test_the_same_record_delivered_again_changes_nothing(
    service: IngestService, s3: S3Client, tables: dict[str, str]
) -> None:
    record = upload(s3, "uploads/acme/notes.txt", b"hello, world\n" * 10)
    first = service.ingest(record)
    assert isinstance(first, Ingested)
    before = boto3.client("dynamodb").scan(TableName=tables["JobsTable"])["Items"]

    again = [service.ingest(record) for _ in range(3)]

    assert again == [AlreadyIngested(first.plan.file.id)] * 3
    after = boto3.client("dynamodb").scan(TableName=tables["JobsTable"])["Items"]
    assert after == before


def test_ten_concurrent_deliveries_yield_one_file_and_one_set_of_jobs(
    service: IngestService, s3: S3Client, tables: dict[str, str]
) -> None:
    record = upload(s3, "uploads/acme/data.csv", b"a,b,c\n1,2,3\n4,5,6\n")

    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda _: service.ingest(record), range(10)))

    assert sum(isinstance(r, Ingested) for r in results) == 1
    assert sum(isinstance(r, AlreadyIngested) for r in results) == 9
    dynamodb = boto3.client("dynamodb")
    assert dynamodb.scan(TableName=tables["FilesTable"], Select="COUNT")["Count"] == 1
    jobs = dynamodb.scan(TableName=tables["JobsTable"])["Items"]
    assert sorted(j["job_type"]["S"] for j in jobs) == sorted(
        ["virus_scan", "deduplication_check", "document_preview", "compression"]
    )


def test_a_new_version_of_the_same_key_is_a_new_file(service: IngestService, s3: S3Client) -> None:
    first = service.ingest(upload(s3, "uploads/acme/a.txt", b"version one"))
    second = service.ingest(upload(s3, "uploads/acme/a.txt", b"version two"))

    assert isinstance(first, Ingested) and isinstance(second, Ingested)
    assert first.plan.file.id != second.plan.file.id
    versions = FileRepository().versions_of(BUCKET, "uploads/acme/a.txt")
    assert {v.id for v in versions} == {first.plan.file.id, second.plan.file.id}


def test_an_empty_upload_is_scanned_and_checked_but_not_parsed(
    service: IngestService, s3: S3Client
) -> None:
    result = service.ingest(upload(s3, "uploads/acme/empty.bin", b""))

    assert isinstance(result, Ingested)
    assert result.plan.file.content_type == "application/x-empty"
    assert [j.job_type for j in result.plan.jobs] == [
        JobType.VIRUS_SCAN,
        JobType.DEDUPLICATION_CHECK,
    ]


def test_keys_with_spaces_and_unicode_are_ingested_as_they_are(
    service: IngestService, s3: S3Client
) -> None:
    key = "uploads/acme/Quarterly report \u2013 2026 (final)+v2.pdf"
    result = service.ingest(upload(s3, key, b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"))

    assert isinstance(result, Ingested)
    assert result.plan.file.key == key
    assert result.plan.file.content_type == "application/pdf"


def test_an_upload_outside_a_tenant_folder_is_refused_before_any_io(
    service: IngestService, s3: S3Client
) -> None:
    record = ObjectCreated(bucket=BUCKET, key="stray.txt", size=1, etag="e", sequencer="1")
    with counting_requests(s3) as requests, pytest.raises(InvalidUploadError, match="uploads/"):
        service.ingest(record)
    assert sum(requests.calls.values()) == 0


def test_the_head_reader_reads_only_the_first_bytes(s3: S3Client) -> None:
    body = io.BytesIO(b"x" * 100_000)
    s3.put_object(Bucket=BUCKET, Key="uploads/acme/big.txt", Body=body)
    head = S3HeadReader(s3).read_head(BUCKET, "uploads/acme/big.txt", None, 4096)
    assert head == b"x" * 4096


def test_a_late_duplicate_of_an_upload_since_quarantined_is_a_duplicate(
    service: IngestService, s3: S3Client
) -> None:
    # Given an upload recorded, then moved out of the bucket (the scan quarantined it)
    record = upload(s3, "uploads/acme/eicar.com", b"infected, say\n")
    first = service.ingest(record)
    assert isinstance(first, Ingested)
    s3.delete_object(Bucket=BUCKET, Key=record.key, VersionId=record.version_id or "")
    # When S3's duplicate notification of that upload arrives late
    again = service.ingest(record)
    # Then it is acknowledged as the duplicate it is, not failed on every delivery
    assert again == AlreadyIngested(first.plan.file.id)


def test_an_upload_deleted_before_its_ingest_is_refused_saying_so(
    service: IngestService, s3: S3Client
) -> None:
    record = upload(s3, "uploads/acme/withdrawn.txt", b"gone before we looked\n")
    s3.delete_object(Bucket=BUCKET, Key=record.key, VersionId=record.version_id or "")
    with pytest.raises(InvalidUploadError, match="deleted before it could be ingested"):
        service.ingest(record)
    assert FileRepository().versions_of(BUCKET, record.key) == []


def test_an_upload_s_container_is_read_by_ranges_of_its_own_version(
    service: IngestService, s3: S3Client
) -> None:
    # given a LibreOffice-laid-out .docx, then another version of the key over it
    docx = samples.ooxml(layout="libreoffice", padding=300_000)
    record = upload(s3, "uploads/acme/report.docx", docx)
    upload(s3, "uploads/acme/report.docx", b"a later version, plain text\n")
    # when the first version's record is ingested
    with counting_requests(s3) as requests:
        result = service.ingest(record)
    # then its own bytes were sniffed: the head and one ranged read of its end
    assert isinstance(result, Ingested)
    assert result.plan.file.content_type == samples.DOCX
    assert requests.calls["s3:GetObject"] == 2


def test_a_range_past_the_end_of_the_object_reads_nothing(s3: S3Client) -> None:
    s3.put_object(Bucket=BUCKET, Key="uploads/acme/small.bin", Body=b"0123456789")
    ranges = S3HeadReader(s3).byte_ranges(BUCKET, "uploads/acme/small.bin", None, 10)
    assert ranges.read(4, 100) == b"456789"
    assert ranges.read(50, 10) == b""
    assert ranges.reads == 2
