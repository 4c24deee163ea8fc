"""Streams an object and measures it: size and SHA-256 (the multipart ETag is not a hash).

Every job type runs this until its real processor lands: a trivial but real read of the bytes.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from filejobs.processors.base import Work
from filejobs.processors.source import ObjectSource

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class ObjectDigest:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def __call__(self, work: Work) -> dict[str, Any]:
        digest, size = hashlib.sha256(), 0
        for chunk in ObjectSource(self._s3).chunks(work.job, work.should_stop):
            digest.update(chunk)
            size += len(chunk)
        return {"size": size, "sha256": digest.hexdigest()}
