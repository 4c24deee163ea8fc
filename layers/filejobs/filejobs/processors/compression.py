"""Compression: the object, streamed from the uploads bucket through a zstd (or gzip) stream
compressor into a multipart upload to the outputs bucket. Memory stays flat: one source chunk,
the compressor's window and one upload part, whatever the object's size.

Already-compressed formats (by the sniffed content type) are skipped with the reason recorded.
PDF is compressed: its page content streams are usually Deflate-compressed, but generated PDFs
often carry uncompressed content streams, xref tables, metadata and embedded fonts, and ingest
plans a compression job for PDFs (domain.content.ALREADY_COMPRESSED leaves them out); the
recorded ratio shows what it was worth.

An object larger than LIMITS.max_bytes fails the job at once (its recorded size says so before
a byte is read); a read that is still going after LIMITS.max_seconds fails it for good, well
inside the function's 300 s timeout, with a message saying so instead of a timeout's retries.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import zstandard

from filejobs.domain.content import ALREADY_COMPRESSED, SNIFF_BYTES, sniff_content_type
from filejobs.domain.job_options import COMPRESSION_LEVELS, OPTIONS, OptionError
from filejobs.domain.job_values import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import Work
from filejobs.processors.source import (
    ObjectSource,
    ReadLimits,
    declared_size,
    human_size,
    reading_progress,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


GiB = 1024**3
# Zstd at level 3 streams about 300 MB/s on one Lambda vCPU and S3 reads as fast: 5 GiB fits
# the time limit with room to finish the upload and record the job.
LIMITS = ReadLimits(max_bytes=5 * GiB, max_seconds=240)


class _StreamCompressor(Protocol):
    def compress(self, data: bytes, /) -> bytes: ...

    def flush(self) -> bytes: ...


@dataclass(frozen=True)
class Algorithm:
    name: str
    levels: range
    default_level: int
    output_name: str
    content_type: str


def _algorithm(name: str, output_name: str, content_type: str) -> Algorithm:
    """An algorithm with its levels as the job options define them (domain/job_options.py)."""
    levels = COMPRESSION_LEVELS[name]
    return Algorithm(
        name, range(levels.minimum, levels.maximum + 1), levels.default, output_name, content_type
    )


ZSTD = _algorithm("zstd", "compressed.zst", "application/zstd")
GZIP = _algorithm("gzip", "compressed.gz", "application/gzip")
ALGORITHMS = {a.name: a for a in (ZSTD, GZIP)}


@dataclass(frozen=True)
class Settings:
    algorithm: Algorithm
    level: int

    @classmethod
    def of(cls, input_data: dict[str, Any] | None) -> Settings:
        """From the job's input_data ("algorithm": zstd|gzip, "level"), read by the definition
        the API checks requests with (domain/job_options.py); PermanentError saying which
        option is wrong and why."""
        try:
            options = OPTIONS[JobType.COMPRESSION].read(input_data)
        except OptionError as error:
            raise PermanentError(f"bad option {error}") from None
        return cls(ALGORITHMS[options["algorithm"]], options["level"])

    def compressor(self) -> _StreamCompressor:
        if self.algorithm is GZIP:
            return _Gzip(self.level)
        return _Zstd(self.level)


class _Zstd:
    def __init__(self, level: int) -> None:
        self._stream = zstandard.ZstdCompressor(level=level).compressobj()

    def compress(self, data: bytes, /) -> bytes:
        return self._stream.compress(data)

    def flush(self) -> bytes:
        return self._stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)


class _Gzip:
    def __init__(self, level: int) -> None:
        self._stream = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip wrapper

    def compress(self, data: bytes, /) -> bytes:
        return self._stream.compress(data)

    def flush(self) -> bytes:
        return self._stream.flush()


@dataclass
class CompressionPass:
    """One pass over the bytes: compressed output, and the original's size and SHA-256."""

    settings: Settings
    original_bytes: int = 0
    compressed_bytes: int = 0
    _sha256: Any = field(default_factory=hashlib.sha256)

    def run(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        compressor = self.settings.compressor()
        for chunk in chunks:
            self._sha256.update(chunk)
            self.original_bytes += len(chunk)
            out = compressor.compress(chunk)
            if out:
                self.compressed_bytes += len(out)
                yield out
        tail = compressor.flush()
        self.compressed_bytes += len(tail)
        yield tail

    @property
    def sha256(self) -> str:
        return str(self._sha256.hexdigest())


def skip_reason(content_type: str) -> str | None:
    """Why a file of this sniffed type is not worth compressing, or None."""
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in ALREADY_COMPRESSED or mime.startswith("video/"):
        return f"already compressed ({mime})"
    return None


class CompressionProcessor:
    def __init__(self, s3: S3Client, limits: ReadLimits = LIMITS) -> None:
        self._source = ObjectSource(s3)
        self._limits = limits

    def __call__(self, work: Work) -> dict[str, Any]:
        settings = Settings.of(work.job.input_data)
        self._limits.refuse_declared(work.job)
        content_type = sniff_content_type(self._source.head(work.job, SNIFF_BYTES))
        size = declared_size(work)
        work.log(
            f"read {content_type}"
            + ("" if size is None else f", {human_size(size)}")
            + f": {settings.algorithm.name} level {settings.level}"
        )
        reason = skip_reason(content_type)
        if reason is not None:
            work.log(f"skipped: {reason}")
            return {"skipped": True, "reason": reason, "content_type": content_type}
        compression = CompressionPass(settings)
        # Progress is the bytes read of the object's size: the compressor and the upload keep
        # pace with the read (one chunk, one part in memory).
        chunks = self._source.chunks(
            work.job,
            work.should_stop,
            limits=self._limits,
            progress=reading_progress(work, verb="compressed", end=0.99),
        )
        key = work.outputs.put_stream(
            settings.algorithm.output_name, compression.run(chunks), settings.algorithm.content_type
        )
        original, compressed = compression.original_bytes, compression.compressed_bytes
        ratio = f" (ratio {compressed / original:.3f})" if original else ""
        work.log(f"wrote {key}: {human_size(original)} -> {human_size(compressed)}{ratio}")
        return {
            "algorithm": settings.algorithm.name,
            "level": settings.level,
            "original_bytes": original,
            "compressed_bytes": compressed,
            "ratio": round(compressed / original, 6) if original else None,
            "key": key,
            "sha256": compression.sha256,
            "content_type": content_type,
        }
