"""Specification: what `filejobs backfill` reads (a listing, an S3 Inventory report) and what it
announces (records the ingest parses as it parses S3's own), on moto S3. The whole command runs
on the local stack in tests/integration/test_cli.py."""

from __future__ import annotations

import csv
import gzip
import io
import json
import uuid
from urllib.parse import quote_plus

import boto3
import pytest

from filejobs.adapters.s3_notifications import object_created_records
from filejobs_cli.client import CliError
from filejobs_cli.scanning import (
    CopyIn,
    ExistingObject,
    _inventory,
    _listing,
    _notification,
)

KEYS = ["uploads/acme/Счёт №7.pdf", "uploads/acme/a b+c.txt", "uploads/acme/plain.txt"]


@pytest.fixture
def bucket(aws: None) -> str:
    name = f"legacy-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def test_a_listing_gives_each_objects_current_version_only(bucket: str) -> None:
    s3 = boto3.client("s3")
    for key in KEYS:
        s3.put_object(Bucket=bucket, Key=key, Body=b"old")
        s3.put_object(Bucket=bucket, Key=key, Body=b"current")
    s3.put_object(Bucket=bucket, Key="elsewhere/x.txt", Body=b"x")
    found = list(_listing(s3, bucket, "uploads/"))
    assert sorted(o.key for o in found) == sorted(KEYS)
    assert all(o.size == len(b"current") and o.version_id for o in found)


def test_an_inventory_report_gives_its_current_objects_under_the_prefix(bucket: str) -> None:
    # Given an S3 Inventory report (manifest.json and a gzipped CSV, keys URL-encoded)
    s3 = boto3.client("s3")
    rows = [
        [bucket, quote_plus(KEYS[0]), "v1", "true", "false", "11", "etag1"],
        [bucket, quote_plus(KEYS[1]), "v2", "true", "false", "12", "etag2"],
        [bucket, quote_plus(KEYS[2]), "v0", "false", "false", "13", "etag0"],  # noncurrent
        [bucket, quote_plus(KEYS[2]), "v3", "true", "true", "0", ""],  # a delete marker
        [bucket, quote_plus("other/x.txt"), "v4", "true", "false", "1", "etag4"],
    ]
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    s3.put_object(
        Bucket=bucket, Key="inventory/data/1.csv.gz", Body=gzip.compress(text.getvalue().encode())
    )
    manifest = {
        "sourceBucket": bucket,
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, ETag",
        "files": [{"key": "inventory/data/1.csv.gz", "size": 1}],
    }
    s3.put_object(Bucket=bucket, Key="inventory/manifest.json", Body=json.dumps(manifest).encode())
    # When it is read for the uploads/ prefix
    found = list(_inventory(s3, f"s3://{bucket}/inventory/manifest.json", bucket, "uploads/"))
    # Then the current, existing objects under the prefix are given, keys decoded
    assert found == [
        ExistingObject(KEYS[0], "v1", 11, "etag1"),
        ExistingObject(KEYS[1], "v2", 12, "etag2"),
    ]
    # and a report of another bucket, or not CSV, is refused readably
    with pytest.raises(CliError, match="lists bucket"):
        list(_inventory(s3, f"s3://{bucket}/inventory/manifest.json", "another", ""))


@pytest.mark.parametrize("key", KEYS)
def test_an_announced_object_is_read_by_the_ingest_as_s3s_own_record(key: str) -> None:
    announced = _notification("uploads-bucket", ExistingObject(key, "v-1", 42, "abc"))
    [record] = object_created_records(json.dumps(announced))
    assert (record.bucket, record.key, record.version_id) == ("uploads-bucket", key, "v-1")
    assert (record.size, record.etag) == (42, "abc")
    assert record.version_marker == "v-1"


def test_a_copy_in_keeps_the_path_under_the_prefix_in_the_tenants_uploads() -> None:
    plan = CopyIn("legacy", "archive/", "uploads-bucket", "acme")
    assert plan.destination("archive/2019/report.pdf") == "uploads/acme/2019/report.pdf"
    # an object named by the prefix itself keeps its own name
    assert plan.destination("archive/q.pdf") == "uploads/acme/q.pdf"
    assert CopyIn("legacy", "archive/q.pdf", "u", "acme").destination("archive/q.pdf") == (
        "uploads/acme/q.pdf"
    )
