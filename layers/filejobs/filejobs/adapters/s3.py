"""S3 access the core needs: the first bytes of an object version, for content sniffing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class S3HeadReader:
    def __init__(self, client: S3Client) -> None:
        self._client = client

    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes:
        """At most `length` leading bytes of the object (a ranged GET: no full download)."""
        request: dict[str, Any] = {"Bucket": bucket, "Key": key, "Range": f"bytes=0-{length - 1}"}
        if version_id:
            request["VersionId"] = version_id
        try:
            response = self._client.get_object(**request)
        except self._client.exceptions.ClientError as error:
            # An empty object has no byte 0: S3 answers 416 InvalidRange.
            if error.response.get("Error", {}).get("Code") == "InvalidRange":
                return b""
            raise
        body: bytes = response["Body"].read(length)
        return body
