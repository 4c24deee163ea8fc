"""Streams an object and measures it: size and SHA-256 (the multipart ETag is not a hash).

Every job type runs this until its real processor lands: a trivial but real read of the bytes.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested, Work

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

CHUNK = 1024 * 1024


class ObjectDigest:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def __call__(self, work: Work) -> dict[str, Any]:
        location = work.job.input_data or {}
        bucket, key = location.get("bucket"), location.get("key")
        if not isinstance(bucket, str) or not isinstance(key, str):
            raise PermanentError("job input_data names no object (bucket and key)")
        request: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if location.get("version_id"):
            request["VersionId"] = location["version_id"]
        body = self._s3.get_object(**request)["Body"]
        digest, size = hashlib.sha256(), 0
        for chunk in iter(lambda: body.read(CHUNK), b""):
            if work.should_stop():
                raise StopRequested
            digest.update(chunk)
            size += len(chunk)
        return {"size": size, "sha256": digest.hexdigest()}
