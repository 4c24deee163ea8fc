"""Deduplication check: the object's SHA-256, streamed (never the ETag: a multipart ETag is
not a hash of the content), then the tenant's content index says who owns that content.

The first file of a tenant with a hash owns it; later files get `duplicate_of` = the owner.
The file's hash and duplicate_of are written with one UpdateItem.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from filejobs.data.content_index import ContentIndex, record_content
from filejobs.domain.time import utcnow
from filejobs.processors.base import Work
from filejobs.processors.source import ObjectSource

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

WRITER = "deduplication_check"


def sha256_of(chunks: Iterable[bytes]) -> tuple[str, int]:
    """The SHA-256 (hex) and size of the bytes, one chunk in memory at a time."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class DeduplicationCheck:
    def __init__(
        self,
        s3: S3Client,
        index: ContentIndex | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._source = ObjectSource(s3)
        self._index = index or ContentIndex()
        self._clock = clock

    def __call__(self, work: Work) -> dict[str, Any]:
        job = work.job
        sha256, size = sha256_of(self._source.chunks(job, work.should_stop))
        now = self._clock()
        owner = self._index.claim(job.tenant, sha256, job.file_id, at=now)
        duplicate_of = None if owner == job.file_id else owner
        record_content(job.file_id, sha256=sha256, duplicate_of=duplicate_of, at=now, by=WRITER)
        return {"sha256": sha256, "size": size, "duplicate_of": duplicate_of, "owner": owner}
