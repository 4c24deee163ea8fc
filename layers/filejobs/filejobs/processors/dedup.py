"""The deduplication check's processor: the object's SHA-256 and size, streamed (never the
ETag: a multipart ETag is not a hash of the content). Who owns that content, and recording it
on the file, is the use case's (services/dedup.py).

The read has limits (LIMITS): an object past its size, or a read past its time, fails the job
for good with a message saying which, inside the function's 300 s timeout."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from filejobs.processors.base import Work
from filejobs.processors.source import ObjectSource, ReadLimits, human_size, reading_progress

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


# SHA-256 runs at about 1.5 GB/s; S3 reads about 100 MB/s or more: 20 GiB in 240 s leaves
# room to record the owner and the job.
LIMITS = ReadLimits(max_bytes=20 * 1024**3, max_seconds=240)


def sha256_of(chunks: Iterable[bytes]) -> tuple[str, int]:
    """The SHA-256 (hex) and size of the bytes, one chunk in memory at a time."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class ContentDigest:
    def __init__(self, s3: S3Client, limits: ReadLimits = LIMITS) -> None:
        self._source = ObjectSource(s3)
        self._limits = limits

    def __call__(self, work: Work) -> dict[str, Any]:
        chunks = self._source.chunks(
            work.job,
            work.should_stop,
            limits=self._limits,
            progress=reading_progress(work, verb="hashed", end=0.95),
        )
        sha256, size = sha256_of(chunks)
        work.log(f"read {human_size(size)}: sha256 {sha256}")
        return {"sha256": sha256, "size": size}
