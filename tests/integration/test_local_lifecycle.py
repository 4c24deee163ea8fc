"""Specification: on the local stack, a file's life follows its object in S3, and an upload can be
erased for good (services/file_lifecycle.py).

Driven as a user drives it: plain S3 calls on the uploads bucket (a DeleteObject, a delete of a
version or of a delete marker) and the HTTP API; the stack's notifications reach the
file-removals function as S3 sends them (moto_fixes.py). Each test prints how long the stack
took, the figures the closing note of this work quotes.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PIL import Image

from tests.localstack import TERMINAL, RunningStack, running_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


def png(shade: int = 120) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), (20, shade, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def outputs_of(stack: RunningStack, stored: dict[str, Any]) -> list[str]:
    listing = stack.client("s3").list_objects_v2(
        Bucket=stack.config["outputs_bucket"], Prefix=f"derived/{stored['tenant']}/{stored['id']}/"
    )
    return sorted(item["Key"] for item in listing.get("Contents", []))


def waited[T](what: str, check: Callable[[], T | None], seconds: float = 60) -> tuple[T, float]:
    """`check`'s first truthy answer, and how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        found = check()
        if found:
            return found, time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not after {seconds} s")


def file_view(stack: RunningStack, file_id: str) -> dict[str, Any]:
    status, body = stack.api(f"/files/{file_id}")
    assert status == 200, body
    return dict(body)


def uploaded(stack: RunningStack, key: str, body: bytes) -> tuple[dict[str, Any], str]:
    """The file of this very version, once its jobs are all done (a key's newest recorded file
    may still be the version before)."""
    bucket = stack.config["uploads_bucket"]
    version = stack.client("s3").put_object(Bucket=bucket, Key=key, Body=body)["VersionId"]

    def settled() -> dict[str, Any] | None:
        status, found = stack.api(f"/files?key={key}&bucket={bucket}")
        ids = [f["id"] for f in found.get("files", []) if f["version_id"] == version]
        if status != 200 or not ids:
            return None
        view = file_view(stack, ids[0])
        done = view["jobs"] and all(j["status"] in TERMINAL for j in view["jobs"])
        return view if done else None

    stored, _ = waited(f"{key} {version} processed", settled)
    assert outputs_of(stack, stored), "the upload made its thumbnails"
    return stored, version


def test_a_delete_marker_deletes_the_file_and_its_outputs_and_removing_it_restores_both(
    stack: RunningStack,
) -> None:
    key = "uploads/acme/lifecycle/marker.png"
    stored, _ = uploaded(stack, key, png())
    before = outputs_of(stack, stored)
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]

    # when the object is deleted as any S3 client deletes it (a delete marker)
    marker = s3.delete_object(Bucket=bucket, Key=key)["VersionId"]

    # then its file is deleted, with why, and its thumbnails are no longer downloadable
    def deleted() -> dict[str, Any] | None:
        view = file_view(stack, stored["id"])
        return view if view["status"] == "deleted" and not outputs_of(stack, stored) else None

    view, took = waited("the file deleted", deleted)
    print(f"delete marker -> file deleted, outputs gone: {took:.1f} s")
    assert "delete marker" in view["status_reason"]
    assert all(job["status"] in ("completed", "cancelled") for job in view["jobs"])

    # when the delete marker is deleted (S3's undelete)
    s3.delete_object(Bucket=bucket, Key=key, VersionId=marker)

    # then the file is active again and its thumbnails are made again
    def restored() -> dict[str, Any] | None:
        view = file_view(stack, stored["id"])
        settled = all(job["status"] in ("completed", "failed", "cancelled") for job in view["jobs"])
        back = view["status"] == "active" and settled and outputs_of(stack, stored) == before
        return view if back else None

    view, took = waited("the file restored", restored)
    print(f"marker deleted -> file active, outputs made again: {took:.1f} s")
    # the restore ran its jobs again: the file has them beside those the deletion ended
    assert len(view["jobs"]) > len(stored["jobs"])


def test_deleting_one_version_deletes_that_file_alone(stack: RunningStack) -> None:
    key = "uploads/acme/lifecycle/versions.png"
    first, first_version = uploaded(stack, key, png(10))
    second, _ = uploaded(stack, key, png(200))
    stack.client("s3").delete_object(
        Bucket=stack.config["uploads_bucket"], Key=key, VersionId=first_version
    )

    def first_deleted() -> bool:
        return file_view(stack, first["id"])["status"] == "deleted" and not outputs_of(stack, first)

    waited("the first version's file deleted", first_deleted)
    assert "deleted from the uploads bucket" in file_view(stack, first["id"])["status_reason"]
    assert file_view(stack, second["id"])["status"] == "active"
    assert outputs_of(stack, second)


def test_erasing_an_upload_leaves_no_version_output_job_or_record(stack: RunningStack) -> None:
    key = "uploads/acme/lifecycle/erase-me.png"
    first, _ = uploaded(stack, key, png(30))
    second, _ = uploaded(stack, key, png(60))
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
    outputs = len(outputs_of(stack, first)) + len(outputs_of(stack, second))

    started = time.monotonic()
    status, erasure = stack.api(f"/files/{second['id']}", method="DELETE")
    print(f"DELETE /files/{{id}} (2 versions): {time.monotonic() - started:.2f} s")

    assert status == 200, erasure
    assert sorted(erasure["file_ids"]) == sorted([first["id"], second["id"]])
    assert erasure["versions_deleted"] == 2
    assert erasure["outputs_deleted"] == outputs
    assert erasure["jobs_erased"] == len(first["jobs"]) + len(second["jobs"])
    assert key not in str(erasure)
    listed = s3.list_object_versions(Bucket=bucket, Prefix=key)
    assert listed.get("Versions", []) == [] and listed.get("DeleteMarkers", []) == []
    for stored in (first, second):
        assert outputs_of(stack, stored) == []
        assert stack.api(f"/files/{stored['id']}")[0] == 404
        assert stack.api(f"/jobs/{stored['jobs'][0]['id']}")[0] == 404
    # and the notifications of the erased versions change nothing more
    time.sleep(2)
    assert stack.api(f"/files/{second['id']}")[0] == 404


def test_an_upload_deleted_before_its_ingest_ends_deleted_with_no_output(
    stack: RunningStack,
) -> None:
    # given uploads deleted the moment they are put (their delete markers' notifications are
    # read before the ingest records the files)
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
    keys = [f"uploads/acme/lifecycle/fleeting-{n}.png" for n in range(3)]
    for n, key in enumerate(keys):
        s3.put_object(Bucket=bucket, Key=key, Body=png(90 + n))
        s3.delete_object(Bucket=bucket, Key=key)

    # then each file, once recorded, is deleted and keeps no output: the removal is read again
    def all_deleted() -> list[dict[str, Any]] | None:
        views = []
        for key in keys:
            status, found = stack.api(f"/files?key={key}&bucket={bucket}")
            if status != 200:
                return None
            view = file_view(stack, found["files"][0]["id"])
            if view["status"] != "deleted" or outputs_of(stack, view):
                return None
            views.append(view)
        return views

    views, took = waited("the fleeting uploads deleted", all_deleted, seconds=120)
    print(f"uploads deleted before their ingest -> deleted, no output: {took:.1f} s")
    assert all("delete marker" in view["status_reason"] for view in views)
