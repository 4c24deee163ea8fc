"""The S3 side of a file's life after its upload: a key's versions in the uploads bucket, and a
file's derived outputs (domain/file_lifecycle.py)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.domain import keys
from filejobs.domain.file_lifecycle import KeyVersions, ObjectRemoved, OutputsPurge, RemovalKind
from filejobs.domain.keys import is_tenant

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef
    from mypy_boto3_sqs import SQSClient

# DeleteObjects takes at most 1,000 keys per request.
DELETE_BATCH = 1000


class S3UploadVersions:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def versions(self, bucket: str, key: str) -> KeyVersions:
        """ListObjectVersions lists a key's versions newest first, and its delete markers apart:
        the entry marked IsLatest says whether a marker is on top."""
        real: list[str] = []
        marker_on_top = False
        for page in self._pages(bucket, key):
            real += [str(v["VersionId"]) for v in page.get("Versions", []) if v["Key"] == key]
            marker_on_top |= any(
                m["Key"] == key and m.get("IsLatest") for m in page.get("DeleteMarkers", [])
            )
        return KeyVersions(tuple(real), marker_on_top)

    def delete_all(self, bucket: str, key: str) -> int:
        """Every version and delete marker of exactly this key, by version id (a delete without
        one would only add a marker)."""
        found: list[ObjectIdentifierTypeDef] = [
            {"Key": key, "VersionId": str(entry["VersionId"])}
            for page in self._pages(bucket, key)
            for entry in (*page.get("Versions", []), *page.get("DeleteMarkers", []))
            if entry["Key"] == key
        ]
        _delete(self._s3, bucket, found)
        return len(found)

    def delete_version(self, bucket: str, key: str, version_id: str) -> None:
        # Deleting a version that is not there succeeds: the step can run twice.
        self._s3.delete_object(Bucket=bucket, Key=key, VersionId=version_id)

    def _pages(self, bucket: str, key: str) -> Iterator[dict[str, list[dict[str, object]]]]:
        # The prefix is the key itself: longer keys it prefixes are listed too, and left out.
        paginator = self._s3.get_paginator("list_object_versions")
        try:
            yield from paginator.paginate(Bucket=bucket, Prefix=key)  # type: ignore[misc]
        except ClientError as error:
            # A file recorded in a bucket since deleted (a stack torn down and made again
            # under its name): it has no version left, which is what its lifecycle reads.
            if error.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise


class S3DerivedOutputs:
    """The outputs bucket's derived files: all of a file's, or some named ones."""

    def __init__(self, s3: S3Client, bucket: str | None) -> None:
        self._s3 = s3
        self._bucket = bucket

    def delete_all(self, tenant: str, file_id: str) -> int:
        if self._bucket is None:
            return 0
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=keys.derived_prefix(tenant, file_id)
        )
        return self.delete_keys(item["Key"] for page in pages for item in page.get("Contents", []))

    def delete_keys(self, found: Iterable[str]) -> int:
        if self._bucket is None:
            return 0
        objects: list[ObjectIdentifierTypeDef] = [{"Key": key} for key in found]
        _delete(self._s3, self._bucket, objects)
        return len(objects)


def _versions_under(s3: S3Client, bucket: str, prefix: str) -> Iterator[ObjectIdentifierTypeDef]:
    """Every version and delete marker under `prefix`, as DeleteObjects names them (by id:
    in a versioned bucket a delete without one only adds a marker), read as they are needed."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for entry in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
            yield {"Key": entry["Key"], "VersionId": entry["VersionId"]}


def _delete(s3: S3Client, bucket: str, objects: list[ObjectIdentifierTypeDef]) -> None:
    for batch in itertools.batched(objects, DELETE_BATCH, strict=False):
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": list(batch), "Quiet": True})
        if answer.get("Errors"):
            # Quiet mode answers only the failures: one left behind is not deleted, so say so.
            first = answer["Errors"][0]
            raise RuntimeError(
                f"S3 kept {len(answer['Errors'])} of {len(batch)} objects in {bucket}: "
                f"{first.get('Code')}: {first.get('Message')}"
            )


class SqsOutputsPurges:
    """Work the file-removals function sends itself, later, on its own queue: a file's outputs
    deleted once more, delayed past the end of any attempt that could still be writing them (a
    worker that was running when the file was deleted uploads before its completion write
    loses); a removal read again that came before its upload's ingest."""

    def __init__(self, client: SQSClient, queue_url: str, delay: timedelta) -> None:
        self._client, self._url, self._delay = client, queue_url, delay

    def purge_later(self, purge: OutputsPurge) -> None:
        self._send({"purge_outputs": purge.to_dict()}, self._delay)

    def follow_later(self, removed: ObjectRemoved, delay: timedelta) -> None:
        self._send({"follow_again": removed.to_dict()}, delay)

    def _send(self, body: dict[str, object], delay: timedelta) -> None:
        self._client.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps(body),
            # SQS delays a message 15 minutes at most.
            DelaySeconds=min(900, max(0, int(delay.total_seconds()))),
        )


def _asked(body: str, what: str) -> dict[str, Any] | None:
    """The object a message of the function's own holds under `what`; None for any other body
    (an S3 notification, another kind of message, or no JSON at all)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    raw = parsed.get(what) if isinstance(parsed, dict) else None
    return raw if isinstance(raw, dict) else None


def removal_again_of(body: str) -> ObjectRemoved | None:
    """The removal a message asks to read again; None for any other body."""
    raw = _asked(body, "follow_again")
    if raw is None:
        return None
    try:
        return ObjectRemoved(
            bucket=str(raw["bucket"]),
            key=str(raw["key"]),
            kind=RemovalKind(raw["kind"]),
            version_id=_optional_text(raw.get("version_id")),
            sequencer=_optional_text(raw.get("sequencer")),
            attempt=int(raw["attempt"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


def outputs_purge_of(body: str) -> OutputsPurge | None:
    """The purge a message asks for; None for any other body (an S3 notification)."""
    raw = _asked(body, "purge_outputs")
    if raw is None:
        return None
    tenant, file_id = raw.get("tenant"), raw.get("file_id")
    if not isinstance(tenant, str) or not is_tenant(tenant) or not isinstance(file_id, str):
        return None
    return OutputsPurge(tenant, file_id)


class S3QuarantinedCopies:
    """The quarantine bucket's copy of one file (`quarantine/{tenant}/{file_id}/...`), every
    version of it: the bucket is versioned, so a delete by key alone would keep the bytes."""

    def __init__(self, s3: S3Client, bucket: str | None) -> None:
        self._s3, self._bucket = s3, bucket

    def delete_all(self, tenant: str, file_id: str) -> int:
        if self._bucket is None:
            return 0
        prefix = keys.quarantine_prefix(tenant, file_id)
        found = list(_versions_under(self._s3, self._bucket, prefix))
        _delete(self._s3, self._bucket, found)
        return len(found)


class S3TenantObjects:
    """A tenant erasure's remains (ports.TenantObjects): every version and delete marker under
    the tenant's prefix of each bucket, `most` at a time, deleted by version id."""

    def __init__(
        self, s3: S3Client, *, uploads: str | None, outputs: str | None, quarantine: str | None
    ) -> None:
        self._s3 = s3
        self._uploads, self._outputs, self._quarantine = uploads, outputs, quarantine

    def delete_uploads(self, tenant: str, *, most: int) -> int:
        return self._delete_under(self._uploads, f"uploads/{tenant}/", most)

    def delete_outputs(self, tenant: str, *, most: int) -> int:
        return self._delete_under(self._outputs, f"{keys.DERIVED_PREFIX}/{tenant}/", most)

    def delete_quarantined(self, tenant: str, *, most: int) -> int:
        return self._delete_under(self._quarantine, f"{keys.QUARANTINE_PREFIX}/{tenant}/", most)

    def _delete_under(self, bucket: str | None, prefix: str, most: int) -> int:
        if bucket is None or not is_tenant(prefix.split("/")[1]):
            return 0
        found = list(itertools.islice(_versions_under(self._s3, bucket, prefix), most))
        _delete(self._s3, bucket, found)
        return len(found)
