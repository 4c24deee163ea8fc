"""The virus scan's S3 side: the verdict as a tag on the version, the quarantine of an infected
version, and the withdrawal of a quarantined file's derived outputs.

The file is marked quarantined and its outputs withdrawn (services/virus_scan.py) before this
moves a byte. A quarantine is then a resumable sequence of idempotent steps, so an attempt that
dies anywhere is finished by the next one without a second copy:

1. tag the infected version `scan-status=INFECTED`, replacing its whole tag set (a reader that
   honours tags stops at once; one tag always fits, whatever tags the upload came with, where
   adding one to an object at S3's limit of 10 fails);
2. copy it to the quarantine bucket (one CopyObject up to 5 GiB, a multipart copy above), its
   tags set afresh (TaggingDirective REPLACE: none of the upload's own), unless a copy of this
   very version is there already. The copy's tags name the file and the source version, so
   that is found from its tags (s3:GetObjectTagging): reading a quarantined copy is for the
   incident-response role alone (the bucket's policy), not the scan;
3. delete the infected version from the uploads bucket by its version id, so no version of it,
   current or noncurrent, is left. A version recorded without an id (an object written before
   the bucket was versioned, S3's "null" version) is found by its ETag.

A verdict tag on a version that already carries 10 tags of its uploader's displaces one of them
(S3 allows no eleventh): the displaced tags are handed to the caller to keep (on the file's
record) before they leave the object, so nothing the uploader set is lost.

Nothing taken from the upload's key goes into object metadata: S3 metadata is ASCII and at most
2 KB, and a key is any UTF-8 up to 1,024 bytes (a name in Cyrillic, a space, a '+'). The copy's
metadata holds ids and a digest of the source key; the key itself is on the file's record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from botocore.exceptions import ClientError

from filejobs.adapters.aws_errors import is_missing_object
from filejobs.adapters.s3_lifecycle import S3DerivedOutputs
from filejobs.domain import keys
from filejobs.domain.objects import ObjectLocation
from filejobs.ports import Quarantined

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef, TagTypeDef

SCAN_STATUS_TAG = "scan-status"
# S3's most tags on one object version.
MAX_TAGS = 10
GiB = 1024**3
# CopyObject copies at most 5 GiB; a larger object is copied in parts (UploadPartCopy).
COPY_OBJECT_LIMIT = 5 * GiB
# Parts of a multipart copy: S3 allows 10,000, each 5 MiB to 5 GiB.
COPY_PART_SIZE = 512 * 1024 * 1024
MAX_PARTS = 10_000


class S3VerdictStore:
    """The verdict's marks in S3: tags, the quarantine copy, derived outputs withdrawn."""

    def __init__(
        self,
        s3: S3Client,
        quarantine_bucket: str,
        outputs_bucket: str | None = None,
        *,
        copy_object_limit: int = COPY_OBJECT_LIMIT,
        copy_part_size: int = COPY_PART_SIZE,
    ) -> None:
        self._s3 = s3
        self._quarantine = quarantine_bucket
        self._outputs = outputs_bucket
        self._copy_object_limit = copy_object_limit
        self._copy_part_size = copy_part_size

    # --- tags ---------------------------------------------------------------------------------

    def tag(
        self,
        location: ObjectLocation,
        verdict: str,
        *,
        keep_displaced: Callable[[dict[str, str]], None],
    ) -> bool:
        """Sets scan-status on exactly this version, keeping its other tags; should they leave
        no room (S3's 10), the last of them by key are handed to `keep_displaced` first, then
        make room. False when the version is gone (quarantined or deleted meanwhile)."""
        try:
            current = self._s3.get_object_tagging(**location.request())["TagSet"]
            kept, displaced = _room_for_verdict([t for t in current if t["Key"] != SCAN_STATUS_TAG])
            if displaced:
                keep_displaced(displaced)
            tags: list[TagTypeDef] = [*kept, {"Key": SCAN_STATUS_TAG, "Value": verdict}]
            self._s3.put_object_tagging(**location.request(), Tagging={"TagSet": tags})
        except ClientError as error:
            if is_missing_object(error):
                return False
            raise
        return True

    def _mark_infected(self, location: ObjectLocation) -> None:
        """The version's tags replaced by scan-status=INFECTED alone: it fits whatever the
        upload carried, and the version is about to leave the bucket."""
        infected: list[TagTypeDef] = [{"Key": SCAN_STATUS_TAG, "Value": "INFECTED"}]
        try:
            self._s3.put_object_tagging(**location.request(), Tagging={"TagSet": infected})
        except ClientError as error:
            if not is_missing_object(error):
                raise

    # --- quarantine ---------------------------------------------------------------------------

    def quarantine(
        self, location: ObjectLocation, *, tenant: str, file_id: str, etag: str, size: int
    ) -> Quarantined:
        """Moves the infected version to the quarantine bucket (steps 1-3 above)."""
        target = keys.quarantine_key(tenant, file_id, location.key)
        versions = self._infected_versions(location, etag)
        copied = False
        for number, version in enumerate(versions):
            exact = ObjectLocation(location.bucket, location.key, version)
            self._mark_infected(exact)
            if number == 0 and not self._has_copy(target, file_id, location):
                # The copy names the version as the file's record has it (None: none recorded).
                copied = self._copy(exact, target, file_id=file_id, size=size, recorded=location)
        for version in versions:
            # Deleting a version that is not there (any more) succeeds: the step is idempotent.
            self._s3.delete_object(Bucket=location.bucket, Key=location.key, VersionId=version)
        return Quarantined(target, copied, tuple(versions))

    def _infected_versions(self, location: ObjectLocation, etag: str) -> list[str]:
        """The version ids to move: the recorded one, or for a file recorded with no version
        id (an object from before versioning) those of the key's versions with its content;
        copying or deleting without an id would act on whatever version is current."""
        if location.version_id:
            return [location.version_id]
        return self._versions_of(location, etag)

    def _has_copy(self, target: str, file_id: str, location: ObjectLocation) -> bool:
        try:
            found = self._s3.get_object_tagging(Bucket=self._quarantine, Key=target)["TagSet"]
        except ClientError as error:
            if is_missing_object(error):
                return False
            raise
        return {t["Key"]: t["Value"] for t in found} == _copy_tags(file_id, location)

    def _copy(
        self,
        location: ObjectLocation,
        target: str,
        *,
        file_id: str,
        size: int,
        recorded: ObjectLocation,
    ) -> bool:
        """Copies the version; False when it is already gone (an earlier attempt deleted it
        after its copy, which `_has_copy` did not recognise: nothing is left to copy)."""
        request: dict[str, Any] = {
            "Bucket": self._quarantine,
            "Key": target,
            "Metadata": self._metadata(recorded, file_id),
            "ContentType": "application/octet-stream",  # never served as what it claims to be
            "Tagging": urlencode(_copy_tags(file_id, recorded)),
        }
        # botocore URL-encodes a dict CopySource itself: any key S3 accepts is copied as it is.
        source = location.request()
        try:
            if size <= self._copy_object_limit:
                self._s3.copy_object(
                    **request,
                    CopySource=source,  # type: ignore[arg-type]  # the stubs' CopySourceTypeDef
                    MetadataDirective="REPLACE",
                    TaggingDirective="REPLACE",
                )
            else:
                self._copy_in_parts(request, source, size)
        except ClientError as error:
            if is_missing_object(error):
                return False
            raise
        return True

    def _copy_in_parts(self, request: dict[str, Any], source: dict[str, Any], size: int) -> None:
        upload_id = self._s3.create_multipart_upload(**request)["UploadId"]
        target = {"Bucket": request["Bucket"], "Key": request["Key"], "UploadId": upload_id}
        try:
            parts: list[CompletedPartTypeDef] = []
            for number, first, last in _part_ranges(size, self._copy_part_size):
                copied = self._s3.upload_part_copy(
                    **target,
                    PartNumber=number,
                    CopySource=source,  # type: ignore[arg-type]
                    CopySourceRange=f"bytes={first}-{last}",
                )
                parts.append({"ETag": copied["CopyPartResult"]["ETag"], "PartNumber": number})
            self._s3.complete_multipart_upload(**target, MultipartUpload={"Parts": parts})
        except BaseException as error:
            try:
                self._s3.abort_multipart_upload(**target)
            except Exception as abort_error:  # the original failure is what matters
                error.add_note(f"aborting multipart copy {upload_id} failed: {abort_error}")
            raise

    def _versions_of(self, location: ObjectLocation, etag: str) -> list[str]:
        """The ids of the key's versions with this content: for a file recorded with no version
        id, deleting without one would only add a delete marker over the infected bytes."""
        wanted = etag.strip('"')
        pages = self._s3.get_paginator("list_object_versions").paginate(
            Bucket=location.bucket, Prefix=location.key
        )
        return [
            str(version["VersionId"])
            for page in pages
            for version in page.get("Versions", [])
            if version["Key"] == location.key and version["ETag"].strip('"') == wanted
        ]

    @staticmethod
    def _metadata(location: ObjectLocation, file_id: str) -> dict[str, str]:
        return {
            "file-id": file_id,
            "source-bucket": location.bucket,
            "source-version": location.version_id or "",
            # The key is on the file's record; its digest ties the copy to it (ASCII, 64 bytes).
            "source-key-sha256": hashlib.sha256(location.key.encode()).hexdigest(),
        }

    # --- derived outputs ----------------------------------------------------------------------

    def withdraw_outputs(self, tenant: str, file_id: str) -> int:
        """Deletes every derived file of the file (thumbnails, previews, compressed copies):
        nothing made from infected bytes stays downloadable. Returns how many were deleted."""
        return S3DerivedOutputs(self._s3, self._outputs).delete_all(tenant, file_id)


def _copy_tags(file_id: str, recorded: ObjectLocation) -> dict[str, str]:
    """A quarantined copy's tags: the verdict, and which file's which version it is (ids only:
    tag values are short and of a few characters, a version id and a UUID fit)."""
    return {
        SCAN_STATUS_TAG: "INFECTED",
        "file-id": file_id,
        "source-version": recorded.version_id or "",
    }


def _room_for_verdict(others: list[TagTypeDef]) -> tuple[list[TagTypeDef], dict[str, str]]:
    """The uploader's tags split into those that stay beside the verdict tag and those it
    displaces (the last by key, as many as S3's limit requires: at most one)."""
    if len(others) < MAX_TAGS:
        return others, {}
    ordered = sorted(others, key=lambda t: t["Key"])
    stay = MAX_TAGS - 1
    return ordered[:stay], {t["Key"]: t["Value"] for t in ordered[stay:]}


def _part_ranges(size: int, part_size: int) -> Iterator[tuple[int, int, int]]:
    """(part number, first byte, last byte) of each part, enlarged to stay within 10,000 parts."""
    part = max(part_size, -(-size // MAX_PARTS))
    for number, first in enumerate(range(0, size, part), start=1):
        yield number, first, min(first + part, size) - 1
