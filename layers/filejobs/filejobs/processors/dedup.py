"""The deduplication check's processor: the object's SHA-256 and size, streamed (never the
ETag: a multipart ETag is not a hash of the content). Who owns that content, and recording it
on the file, is the use case's (services/dedup.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from filejobs.processors.base import Work
from filejobs.processors.source import ObjectSource

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def sha256_of(chunks: Iterable[bytes]) -> tuple[str, int]:
    """The SHA-256 (hex) and size of the bytes, one chunk in memory at a time."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class ContentDigest:
    def __init__(self, s3: S3Client) -> None:
        self._source = ObjectSource(s3)

    def __call__(self, work: Work) -> dict[str, Any]:
        sha256, size = sha256_of(self._source.chunks(work.job, work.should_stop))
        return {"sha256": sha256, "size": size}
