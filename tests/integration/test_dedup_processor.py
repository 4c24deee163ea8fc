"""The deduplication check (its processor and its use case) on real bytes in moto S3 and the real
FilesTable (moto DynamoDB)."""

from __future__ import annotations

import hashlib
import random
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from filejobs.adapters.s3 import S3Outputs
from filejobs.data.content_index import ContentIndex, content_id
from filejobs.data.file_repository import FileRepository
from filejobs.data.models import ContentIndexModel
from filejobs.domain.content import sniff_content_type
from filejobs.domain.ingest import plan_ingest
from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.domain.time import utcnow
from filejobs.processors.base import Work
from filejobs.processors.dedup import ContentDigest
from filejobs.services.dedup import DeduplicationCheck
from tests.aws_requests import counting_requests
from tests.factories import upload_record
from tests.processing import MediaBench

MiB = 1024 * 1024
TEXT = b"quarterly report\n" * 200


def _ingested(
    media: MediaBench, name: str, body: bytes, *, tenant: str = "acme", multipart: bool = False
) -> Work:
    """Upload the object, record it as ingest would (file and jobs), and the dedup job's Work."""
    key = f"uploads/{tenant}/{name}"
    if multipart:
        upload = media.s3.create_multipart_upload(Bucket=media.uploads, Key=key)["UploadId"]
        pieces = [body[i : i + 5 * MiB] for i in range(0, len(body), 5 * MiB)]
        parts = [
            {
                "PartNumber": n,
                "ETag": media.s3.upload_part(
                    Bucket=media.uploads, Key=key, UploadId=upload, PartNumber=n, Body=piece
                )["ETag"],
            }
            for n, piece in enumerate(pieces, 1)
        ]
        media.s3.complete_multipart_upload(
            Bucket=media.uploads,
            Key=key,
            UploadId=upload,
            MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
        )
    else:
        media.s3.put_object(Bucket=media.uploads, Key=key, Body=body)
    version = media.s3.head_object(Bucket=media.uploads, Key=key).get("VersionId")
    record = upload_record(
        name, tenant=tenant, bucket=media.uploads, version_id=version, size=len(body)
    )
    plan = plan_ingest(record, sniff_content_type(body[:4096]), now=utcnow())
    FileRepository().record_ingest(plan)
    job = next(j for j in plan.jobs if j.job_type is JobType.DEDUPLICATION_CHECK)
    workspace = media.scratch / uuid.uuid4().hex
    workspace.mkdir(parents=True)
    return Work(job, lambda: False, workspace, S3Outputs(media.s3, media.outputs).for_job(job))


@pytest.fixture
def dedup(tables: dict[str, str], media: MediaBench) -> DeduplicationCheck:
    return DeduplicationCheck(ContentDigest(media.s3), ContentIndex(), FileRepository())


def test_the_first_file_owns_its_content_and_a_later_identical_one_is_its_duplicate(
    media: MediaBench, dedup: DeduplicationCheck
) -> None:
    # Given two uploads of identical content by one tenant
    first = _ingested(media, "report.txt", TEXT)
    second = _ingested(media, "report-copy.txt", TEXT)

    # When each is checked, in upload order
    owned = dedup(first)
    duplicate = dedup(second)

    # Then the first owns the hash and the second is a duplicate of it
    sha = hashlib.sha256(TEXT).hexdigest()
    assert owned == {
        "sha256": sha,
        "size": len(TEXT),
        "duplicate_of": None,
        "owner": first.job.file_id,
    }
    assert duplicate == {
        "sha256": sha,
        "size": len(TEXT),
        "duplicate_of": first.job.file_id,
        "owner": first.job.file_id,
    }
    # And both files record their hash; only the second carries duplicate_of
    files = FileRepository()
    first_file, second_file = files.get(first.job.file_id), files.get(second.job.file_id)
    assert first_file is not None and second_file is not None
    assert (first_file.sha256, first_file.duplicate_of) == (sha, None)
    assert (second_file.sha256, second_file.duplicate_of) == (sha, first.job.file_id)
    assert second_file.metadata.updated_by == "deduplication_check"


def test_a_rerun_gives_the_same_answer(media: MediaBench, dedup: DeduplicationCheck) -> None:
    # Given a file that owns its content and a duplicate of it, both already checked
    first = _ingested(media, "a.txt", TEXT)
    second = _ingested(media, "b.txt", TEXT)
    dedup(first)
    dedup(second)

    # When both jobs run again (a retry after a lost completion)
    again = dedup(first), dedup(second)

    # Then nothing changes: the owner stays the owner
    assert again[0]["duplicate_of"] is None
    assert again[1]["duplicate_of"] == first.job.file_id


def test_identical_content_in_another_tenant_is_not_a_duplicate(
    media: MediaBench, dedup: DeduplicationCheck
) -> None:
    # Given the same bytes uploaded by two tenants
    acme = _ingested(media, "report.txt", TEXT, tenant="acme")
    globex = _ingested(media, "report.txt", TEXT, tenant="globex")

    # When both are checked
    results = dedup(acme), dedup(globex)

    # Then each tenant's file owns its own copy
    assert [r["duplicate_of"] for r in results] == [None, None]
    assert [r["owner"] for r in results] == [acme.job.file_id, globex.job.file_id]
    index = ContentIndex()
    sha = hashlib.sha256(TEXT).hexdigest()
    assert index.owner("acme", sha) == acme.job.file_id
    assert index.owner("globex", sha) == globex.job.file_id
    assert index.owner("initech", sha) is None


def test_concurrent_claims_of_one_hash_agree_on_one_owner(tables: dict[str, str]) -> None:
    # Given 16 files with the same content, claimed at the same moment from 16 threads
    sha = hashlib.sha256(b"same bytes").hexdigest()
    file_ids = [str(uuid.uuid4()) for _ in range(16)]
    start = threading.Barrier(len(file_ids))
    answers: dict[str, str] = {}

    def claim(file_id: str) -> None:
        start.wait()
        answers[file_id] = ContentIndex().claim("acme", sha, file_id, at=utcnow())

    threads = [threading.Thread(target=claim, args=(f,)) for f in file_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every claimant got the same owner, one of them, and the index holds exactly that
    owners = set(answers.values())
    assert len(answers) == len(file_ids) and len(owners) == 1
    (owner,) = owners
    assert owner in file_ids
    assert ContentIndexModel.get(content_id("acme", sha), consistent_read=True).file_id == owner


def test_concurrent_checks_of_identical_uploads_leave_exactly_one_owner(
    media: MediaBench, dedup: DeduplicationCheck
) -> None:
    # Given 6 identical uploads of one tenant, checked concurrently
    works = [_ingested(media, f"copy-{n}.txt", TEXT) for n in range(6)]
    results: list[dict[str, Any]] = []
    start = threading.Barrier(len(works))

    def check(work: Work) -> None:
        start.wait()
        results.append(dedup(work))

    threads = [threading.Thread(target=check, args=(w,)) for w in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then one owns the content and the five others are its duplicates, in the table too
    owners = {r["owner"] for r in results}
    assert len(results) == 6 and len(owners) == 1
    (owner,) = owners
    stored = [FileRepository().get(w.job.file_id) for w in works]
    assert sorted(str(f.duplicate_of) for f in stored if f) == sorted([*[owner] * 5, "None"])


def test_the_hash_is_the_contents_sha256_not_the_multipart_etag(
    media: MediaBench, dedup: DeduplicationCheck, tmp_path: Path
) -> None:
    # Given a 12 MiB object uploaded in three parts (its ETag is a hash of part hashes)
    body = random.Random(5).randbytes(12 * MiB)
    work = _ingested(media, "big.bin", body, multipart=True)
    etag = media.s3.head_object(Bucket=media.uploads, Key="uploads/acme/big.bin")["ETag"]

    # When it is checked
    result = dedup(work)

    # Then the recorded hash is the SHA-256 of the bytes, unrelated to the ETag
    assert etag.strip('"').endswith("-3")
    assert result["sha256"] == hashlib.sha256(body).hexdigest()
    assert result["size"] == len(body)
    assert result["sha256"] not in etag and hashlib.md5(body).hexdigest() not in etag


def test_a_job_whose_file_is_not_recorded_fails_permanently(
    media: MediaBench, dedup: DeduplicationCheck
) -> None:
    # Given a dedup job for an upload that ingest never recorded as a file
    work = media.work_for(JobType.DEDUPLICATION_CHECK, "ghost.txt", TEXT)

    # When / Then the check refuses it permanently (a retry would not make the file appear)
    with pytest.raises(PermanentError):
        dedup(work)


def test_a_claim_is_one_request_for_the_owner_and_for_a_duplicate(tables: dict[str, str]) -> None:
    sha = hashlib.sha256(b"twice").hexdigest()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())

    index_client = ContentIndexModel._get_connection().connection.client
    with counting_requests(index_client) as requests:
        owners = [ContentIndex().claim("acme", sha, f, at=utcnow()) for f in (first, second)]

    # the duplicate learns the owner from its own update: no refused put, no read after it
    assert owners == [first, first]
    assert requests.calls == {"dynamodb:UpdateItem": 2}
