"""The uploads bucket's object versions, listed (ListObjectVersions), for the reconciler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from filejobs.domain.reconciliation import ListedVersion

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class S3UploadListing:
    def __init__(self, client: S3Client, bucket: str) -> None:
        self._client, self._bucket = client, bucket

    def versions(self, prefix: str) -> Iterator[ListedVersion]:
        """Every version under `prefix`, 1,000 a request; delete markers (listed apart by S3)
        are no upload and are left out."""
        pages = self._client.get_paginator("list_object_versions").paginate(
            Bucket=self._bucket, Prefix=prefix
        )
        for page in pages:
            for version in page.get("Versions", []):
                yield ListedVersion(
                    key=version["Key"],
                    version_id=version.get("VersionId"),
                    last_modified=version["LastModified"],
                    size=version.get("Size", 0),
                    etag=version.get("ETag", ""),
                    is_latest=bool(version.get("IsLatest")),
                )
