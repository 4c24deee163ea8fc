"""Specification: an infected version leaves the uploads bucket whatever its key, however large,
whatever crashed before (adapters/quarantine.py), and nothing derived from it stays behind.

On moto S3 with the template's buckets (uploads versioned, quarantine versioned). "No version
remains" is checked the only way that means it: listing the key's versions and delete markers.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from filejobs.adapters.quarantine import S3VerdictStore
from filejobs.domain import keys
from filejobs.domain.objects import ObjectLocation
from tests.processing import MediaBench

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
MiB = 1024 * 1024
FILE_ID = "0b1f3c5e-7a9d-4f21-8c34-5e6f7a8b9c0d"


def _long_key() -> str:
    """A key of exactly 1,024 bytes of UTF-8 (S3's longest), most of them two-byte letters."""
    head = "uploads/acme/"
    name = "é" * ((1024 - len(head) - 4) // 2)
    key = head + name + "x" * (1024 - len(head) - 2 * len(name) - 4) + ".exe"
    assert len(key.encode()) == 1024
    return key


KEYS = [
    "uploads/acme/Счёт №7 (копия).pdf",
    "uploads/acme/a b+c%20d & e.txt",
    "uploads/acme/日本語/ファイル名.docx",
    _long_key(),
]


def versions_of(media: MediaBench, bucket: str, key: str) -> dict[str, list[Any]]:
    listing = media.s3.list_object_versions(Bucket=bucket, Prefix=key)
    return {
        "versions": [v for v in listing.get("Versions", []) if v["Key"] == key],
        "markers": [m for m in listing.get("DeleteMarkers", []) if m["Key"] == key],
    }


def copy_tags(media: MediaBench, key: str) -> dict[str, str]:
    found = media.s3.get_object_tagging(Bucket=media.quarantine, Key=key)["TagSet"]
    return {t["Key"]: t["Value"] for t in found}


def uploaded(media: MediaBench, key: str, body: bytes) -> tuple[ObjectLocation, str]:
    put = media.s3.put_object(Bucket=media.uploads, Key=key, Body=body)
    return ObjectLocation(media.uploads, key, put["VersionId"]), put["ETag"]


def store(media: MediaBench, **options: Any) -> S3VerdictStore:
    return S3VerdictStore(media.s3, media.quarantine, media.outputs, **options)


@pytest.mark.parametrize("key", KEYS, ids=["cyrillic", "spaces-plus-percent", "cjk", "1024-bytes"])
def test_an_infected_version_is_quarantined_whatever_its_key(media: MediaBench, key: str) -> None:
    # Given an infected upload under a key botocore cannot put in metadata
    location, etag = uploaded(media, key, EICAR)
    # When it is quarantined
    moved = store(media).quarantine(
        location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(EICAR)
    )
    # Then its bytes are in the quarantine bucket, under a key S3 accepted, tagged INFECTED
    assert moved.key == keys.quarantine_key("acme", FILE_ID, key)
    assert len(moved.key.encode()) <= 1024
    copy = media.s3.get_object(Bucket=media.quarantine, Key=moved.key)
    assert copy["Body"].read() == EICAR
    assert copy["ContentType"] == "application/octet-stream"
    # and its tags (set afresh) and metadata tie it to the file in ASCII, the key by its digest
    assert copy_tags(media, moved.key) == {
        "scan-status": "INFECTED",
        "file-id": FILE_ID,
        "source-version": location.version_id,
    }
    assert copy["Metadata"] == {
        "file-id": FILE_ID,
        "source-bucket": media.uploads,
        "source-version": location.version_id,
        "source-key-sha256": hashlib.sha256(key.encode()).hexdigest(),
    }
    # And no version of it is left in the uploads bucket: no version, no delete marker over one
    assert versions_of(media, media.uploads, key) == {"versions": [], "markers": []}
    assert moved.copied and moved.deleted_versions == (location.version_id,)


def test_a_quarantine_that_died_before_its_delete_is_finished_without_a_second_copy(
    media: MediaBench,
) -> None:
    location, etag = uploaded(media, "uploads/acme/invoice.pdf.exe", EICAR)
    marks = store(media)
    real_delete = media.s3.delete_object

    def crash(**_: Any) -> None:
        raise ConnectionResetError("the worker died between copy and delete")

    # Given an attempt that copied the version, then died before deleting it
    media.s3.delete_object = crash  # type: ignore[method-assign,assignment]
    with pytest.raises(ConnectionResetError):
        marks.quarantine(location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(EICAR))
    media.s3.delete_object = real_delete  # type: ignore[method-assign]
    assert len(versions_of(media, media.uploads, location.key)["versions"]) == 1
    # When the next attempt quarantines it again
    again = marks.quarantine(location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(EICAR))
    # Then it keeps the first copy (one version in the versioned quarantine bucket) and deletes
    target = keys.quarantine_key("acme", FILE_ID, location.key)
    assert not again.copied
    assert len(versions_of(media, media.quarantine, target)["versions"]) == 1
    assert versions_of(media, media.uploads, location.key) == {"versions": [], "markers": []}
    # And a third run (a redelivered message) changes nothing and does not fail
    third = marks.quarantine(location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(EICAR))
    assert not third.copied
    assert len(versions_of(media, media.quarantine, target)["versions"]) == 1


def test_an_object_over_the_copy_limit_is_copied_in_parts(media: MediaBench) -> None:
    # Given a limit of 5 MiB for one CopyObject (S3's is 5 GiB; the same code path)
    body = EICAR + bytes(range(256)) * (11 * MiB // 256)
    location, etag = uploaded(media, "uploads/acme/big image.iso", body)
    marks = store(media, copy_object_limit=5 * MiB, copy_part_size=5 * MiB)
    # When quarantined
    moved = marks.quarantine(location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(body))
    # Then the copy is whole, made of three parts (5 + 5 + the rest), and the source is gone
    copy = media.s3.get_object(Bucket=media.quarantine, Key=moved.key)
    assert copy["Body"].read() == body
    assert copy["ETag"].strip('"').endswith("-3")
    assert copy["Metadata"]["file-id"] == FILE_ID
    assert copy_tags(media, moved.key)["scan-status"] == "INFECTED"
    assert versions_of(media, media.uploads, location.key) == {"versions": [], "markers": []}
    assert media.s3.list_multipart_uploads(Bucket=media.quarantine).get("Uploads", []) == []


def test_a_failed_multipart_copy_is_aborted(media: MediaBench) -> None:
    body = bytes(12 * MiB)
    location, etag = uploaded(media, "uploads/acme/big.bin", body)
    marks = store(media, copy_object_limit=5 * MiB, copy_part_size=5 * MiB)
    real = media.s3.upload_part_copy
    calls = []

    def fail_second(**request: Any) -> Any:
        calls.append(request["PartNumber"])
        if request["PartNumber"] == 2:
            raise ConnectionResetError("lost mid-copy")
        return real(**request)

    media.s3.upload_part_copy = fail_second  # type: ignore[method-assign]
    with pytest.raises(ConnectionResetError):
        marks.quarantine(location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(body))
    assert calls == [1, 2]
    assert media.s3.list_multipart_uploads(Bucket=media.quarantine).get("Uploads", []) == []
    # and the infected version is still where it was, for the retry
    assert len(versions_of(media, media.uploads, location.key)["versions"]) == 1


def test_a_version_recorded_without_an_id_is_found_by_its_etag(media: MediaBench) -> None:
    # Given a bucket whose object was written before versioning was on (S3's "null" version),
    # then overwritten with clean bytes once it was on
    bucket = f"legacy-{uuid.uuid4().hex[:8]}"
    media.s3.create_bucket(Bucket=bucket)
    key = "uploads/acme/old report.doc"
    infected = media.s3.put_object(Bucket=bucket, Key=key, Body=EICAR)
    media.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    clean = media.s3.put_object(Bucket=bucket, Key=key, Body=b"clean now")
    # When the infected one, known only by key and ETag, is quarantined
    location = ObjectLocation(bucket, key, None)
    moved = store(media).quarantine(
        location, tenant="acme", file_id=FILE_ID, etag=infected["ETag"], size=len(EICAR)
    )
    # Then exactly that version is deleted (by id, no delete marker), the clean one stays
    assert moved.deleted_versions == ("null",)
    left = versions_of(media, bucket, key)
    assert [v["VersionId"] for v in left["versions"]] == [clean["VersionId"]]
    assert left["markers"] == []
    copy = media.s3.get_object(Bucket=media.quarantine, Key=moved.key)
    assert copy["Body"].read() == EICAR


def tags_of(media: MediaBench, location: ObjectLocation) -> dict[str, str]:
    found = media.s3.get_object_tagging(**location.request())["TagSet"]
    return {t["Key"]: t["Value"] for t in found}


def uploaded_with_ten_tags(media: MediaBench, key: str, body: bytes) -> tuple[ObjectLocation, str]:
    """An upload carrying S3's most tags (10), none of them the verdict's."""
    tagging = "&".join(f"label-{n:02d}=v{n}" for n in range(10))
    put = media.s3.put_object(Bucket=media.uploads, Key=key, Body=body, Tagging=tagging)
    location = ObjectLocation(media.uploads, key, put["VersionId"])
    assert len(tags_of(media, location)) == 10
    return location, put["ETag"]


def never_displaces(tags: dict[str, str]) -> None:
    raise AssertionError(f"nothing should have been displaced, yet {tags} was")


def test_tagging_keeps_other_tags_and_reports_a_version_gone(media: MediaBench) -> None:
    location, _ = uploaded(media, "uploads/acme/n.txt", b"plain")
    media.s3.put_object_tagging(
        **location.request(), Tagging={"TagSet": [{"Key": "team", "Value": "sales"}]}
    )
    marks = store(media)
    assert marks.tag(location, "CLEAN", keep_displaced=never_displaces)
    assert tags_of(media, location) == {"team": "sales", "scan-status": "CLEAN"}
    media.s3.delete_object(**location.request())
    assert marks.tag(location, "CLEAN", keep_displaced=never_displaces) is False


def test_a_verdict_on_a_version_at_s3s_ten_tags_keeps_the_tag_it_displaces(
    media: MediaBench,
) -> None:
    # Given an upload that came with 10 tags: S3 refuses an eleventh
    location, _ = uploaded_with_ten_tags(media, "uploads/acme/tagged.txt", b"plain")
    eleven = media.s3.get_object_tagging(**location.request())["TagSet"]
    eleven.append({"Key": "x", "Value": "y"})
    with pytest.raises(ClientError):
        media.s3.put_object_tagging(**location.request(), Tagging={"TagSet": eleven})
    kept: list[dict[str, str]] = []
    # When the scan tags it CLEAN
    assert store(media).tag(location, "CLEAN", keep_displaced=kept.append)
    # Then the verdict is on the version, beside nine of the uploader's tags, and the tenth
    # (the last by key) was handed over to be kept before it left the object
    after = tags_of(media, location)
    assert after["scan-status"] == "CLEAN" and len(after) == 10
    assert kept == [{"label-09": "v9"}]
    assert {k: v for k, v in after.items() if k != "scan-status"} | kept[0] == {
        f"label-{n:02d}": f"v{n}" for n in range(10)
    }
    # And a later verdict (a rescan) replaces its own tag, displacing nothing more
    assert store(media).tag(location, "UNSCANNABLE", keep_displaced=never_displaces)
    assert tags_of(media, location)["scan-status"] == "UNSCANNABLE"


def test_a_version_at_s3s_ten_tags_is_quarantined_its_copy_tagged_afresh(
    media: MediaBench,
) -> None:
    # Given an infected upload that came with 10 tags (no eleventh, INFECTED, can be added)
    location, etag = uploaded_with_ten_tags(media, "uploads/acme/tagged.exe", EICAR)
    # When it is quarantined
    moved = store(media).quarantine(
        location, tenant="acme", file_id=FILE_ID, etag=etag, size=len(EICAR)
    )
    # Then it is moved: no version of it is left, and its copy carries none of the upload's tags
    assert versions_of(media, media.uploads, location.key) == {"versions": [], "markers": []}
    assert copy_tags(media, moved.key) == {
        "scan-status": "INFECTED",
        "file-id": FILE_ID,
        "source-version": location.version_id,
    }
    assert media.s3.get_object(Bucket=media.quarantine, Key=moved.key)["Body"].read() == EICAR


def test_withdrawing_outputs_deletes_the_files_derived_files_only(media: MediaBench) -> None:
    other = str(uuid.uuid4())
    mine = [f"{keys.derived_prefix('acme', FILE_ID)}thumbnail_generation/{n}.webp" for n in (1, 2)]
    theirs = f"{keys.derived_prefix('acme', other)}thumbnail_generation/1.webp"
    for key in [*mine, theirs]:
        media.s3.put_object(Bucket=media.outputs, Key=key, Body=b"thumb")
    assert store(media).withdraw_outputs("acme", FILE_ID) == 2
    left = [o["Key"] for o in media.s3.list_objects_v2(Bucket=media.outputs).get("Contents", [])]
    assert left == [theirs]
    with pytest.raises(ClientError):
        media.s3.head_object(Bucket=media.outputs, Key=mine[0])
