"""Where a processor reads its object from: the uploads bucket version named by the job.

The object's bucket, key and version come from the job's input_data, written at ingest from the
S3 record (never from the queue message). Reads stream in chunks and check the stop signal
between them, so a cancelled job stops reading within one chunk.

A job type that streams the whole object (compression, the deduplication check) reads it
within `ReadLimits`: past its size or its time, the job fails for good with a message that
says which, instead of running into the function's timeout and retrying the same read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from filejobs.adapters.aws_errors import error_code, is_missing_object
from filejobs.domain.content import EMPTY, SNIFF_BYTES, media_type, sniff_content_type
from filejobs.domain.job import ProcessingJob
from filejobs.domain.objects import ObjectLocation
from filejobs.domain.retry import ObjectGoneError, PermanentError
from filejobs.processors.base import StopRequested, Work

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

CHUNK = 1024 * 1024


class ObjectTooLargeError(PermanentError):
    """The object is larger than the job type accepts (found while reading it)."""


class ReadTooLongError(PermanentError):
    """Reading the object took longer than the job type allows."""


@dataclass(frozen=True)
class ReadLimits:
    """How much of its object a job may read, and for how long (None: no limit)."""

    max_bytes: int | None = None
    max_seconds: float | None = None

    def refuse_declared(self, job: ProcessingJob) -> None:
        """Fails at once a job whose object ingest recorded as larger than `max_bytes`."""
        declared = (job.input_data or {}).get("size")
        if isinstance(declared, int) and self.max_bytes is not None and declared > self.max_bytes:
            raise ObjectTooLargeError(_too_large(declared, self.max_bytes))


def _too_large(size: int, limit: int) -> str:
    return f"the object is {_human(size)}, larger than the {_human(limit)} this job type reads"


def human_size(size: int) -> str:
    """`3.2 MB`-style sizes for log lines and progress messages (decimal units, as S3 shows)."""
    for unit, scale in (("GB", 1000**3), ("MB", 1000**2), ("KB", 1000)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def declared_size(work: Work) -> int | None:
    """The object's size as ingest recorded it (the job's input), if it did."""
    size = (work.job.input_data or {}).get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None


def reading_progress(
    work: Work, *, verb: str = "read", start: float = 0.0, end: float = 1.0
) -> Callable[[int], None]:
    """A callback for bytes read so far that reports them as the attempt's progress, from
    `start` to `end` of the whole, against the object's recorded size ("read 3.2 MB of 10.0 MB").
    Without a recorded size it reports the bytes alone, the fraction at `start`."""
    total = declared_size(work)

    def report(done: int) -> None:
        if total:
            fraction = start + (end - start) * min(done / total, 1.0)
            work.report_progress(fraction, f"{verb} {human_size(done)} of {human_size(total)}")
        else:
            work.report_progress(start, f"{verb} {human_size(done)}")

    return report


def downloaded(
    work: Work, source: ObjectSource, name: str, *, max_bytes: int, until: float
) -> Path:
    """The job's object streamed into its workspace as `name`, refused past `max_bytes`; the
    download reported as the attempt's progress, up to `until` of the whole."""
    return source.download(
        work.job,
        work.workspace / name,
        work.should_stop,
        max_bytes=max_bytes,
        progress=reading_progress(work, verb="downloaded", end=until),
    )


def _human(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


@contextmanager
def _gone_as_domain_error(location: ObjectLocation) -> Iterator[None]:
    """S3's "no such key or version" as the domain's ObjectGoneError, which the services act on
    (a file quarantined while its job ran is cancelled, not failed)."""
    try:
        yield
    except Exception as error:
        if is_missing_object(error):
            raise ObjectGoneError(f"{location} is gone ({error_code(error)})") from error
        raise


class ObjectSource:
    def __init__(self, s3: S3Client) -> None:
        self._s3 = s3

    def size(self, job: ProcessingJob) -> int:
        location = ObjectLocation.of(job)
        with _gone_as_domain_error(location):
            return int(self._s3.head_object(**location.request())["ContentLength"])

    def chunks(
        self,
        job: ProcessingJob,
        should_stop: Callable[[], bool],
        chunk: int = CHUNK,
        *,
        limits: ReadLimits = ReadLimits(),
        clock: Callable[[], float] = time.monotonic,
        progress: Callable[[int], None] | None = None,
    ) -> Iterator[bytes]:
        """The object's bytes in order, `chunk` at a time; StopRequested once told to stop;
        ObjectTooLargeError or ReadTooLongError past `limits`. `progress`, if given, hears the
        bytes read so far after each chunk (reading_progress)."""
        limits.refuse_declared(job)
        location = ObjectLocation.of(job)
        started, read = clock(), 0
        with _gone_as_domain_error(location):
            body = self._s3.get_object(**location.request())["Body"]
        try:
            for piece in iter(lambda: body.read(chunk), b""):
                if should_stop():
                    raise StopRequested
                read += len(piece)
                _check(limits, read, clock() - started)
                if progress is not None:
                    progress(read)
                yield piece
        finally:
            body.close()

    def head(self, job: ProcessingJob, length: int) -> bytes:
        """At most `length` leading bytes (a ranged GET)."""
        location = ObjectLocation.of(job)
        request = {**location.request(), "Range": f"bytes=0-{max(length, 1) - 1}"}
        try:
            with _gone_as_domain_error(location):
                data: bytes = self._s3.get_object(**request)["Body"].read()
        except self._s3.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") == "InvalidRange":
                return b""  # an empty object has no byte 0
            raise
        return data

    def download(
        self,
        job: ProcessingJob,
        into: Path,
        should_stop: Callable[[], bool],
        *,
        max_bytes: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Path:
        """Copies the object to `into` (in the job's workspace), streaming; returns `into`.

        Refuses (PermanentError) an object larger than `max_bytes` before filling the disk.
        """
        limits = ReadLimits(max_bytes=max_bytes)
        with into.open("wb") as out:
            for piece in self.chunks(job, should_stop, limits=limits, progress=progress):
                out.write(piece)
        return into


def _check(limits: ReadLimits, read: int, seconds: float) -> None:
    if limits.max_bytes is not None and read > limits.max_bytes:
        raise ObjectTooLargeError(
            f"the object is larger than the {_human(limits.max_bytes)} this job type reads"
        )
    if limits.max_seconds is not None and seconds > limits.max_seconds:
        raise ReadTooLongError(
            f"reading the object took longer than the {limits.max_seconds:g} s this job type "
            f"allows ({_human(read)} read)"
        )


def content_type_of(job: ProcessingJob, source: ObjectSource) -> str:
    """The object's content type as ingest sniffed it (the job's input: no caller may set it),
    else sniffed here from its first bytes; `type/subtype`, lower case."""
    declared = (job.input_data or {}).get("content_type")
    if isinstance(declared, str) and declared.strip():
        return media_type(declared)
    return sniff_content_type(source.head(job, SNIFF_BYTES))


def decoder_for[D](content_type: str, decoders: Mapping[str, D], *, job_type: str, empty: str) -> D:
    """The decoder the job type has for the content type (its allow-list, `decoders`);
    PermanentError saying `empty` for an empty file, or which types the job type decodes."""
    if content_type == EMPTY:
        raise PermanentError(empty)
    decoder = decoders.get(content_type)
    if decoder is None:
        raise PermanentError(
            f"{job_type} does not decode {content_type} files "
            f"(it decodes {', '.join(sorted(decoders))})"
        )
    return decoder
