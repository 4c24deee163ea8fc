"""Corrupt media, mutated from valid samples, through the real worker on moto.

Each family starts from a valid file made here (a JPEG and a PNG from Pillow, an H.264 MP4 from
PyAV, a PDF, JSON, CSV and plain text, zip, gzip and tar.gz archives, MP3, FLAC, WAV, Ogg Opus
and M4A audio from FFmpeg) and derives corrupt variants
with seeded mutations drawn by Hypothesis: truncation, bit flips, zeroed byte runs, duplicated
or shuffled chunks, the header kept over a garbage body. Each variant is uploaded to moto S3, its
file and jobs are recorded as ingest records them (conditional writes), and each job runs through
WorkerService: claim, processor, complete or fail. The job type that parses the family runs on
each of its mutants; compression, the deduplication hash and the virus scan on mutants of all.

The spec, for every job:

- it ends terminal, completed or failed: never left pending, running or scheduled;
- compression and the deduplication hash complete on any bytes; so does the virus scan, unless
  it refuses an archive at one of its limits (then for good);
- a failure is permanent (failed on its first attempt, no retry sent) and says why in a message
  a person can read: the processor's own words, no traceback, no Python repr, bounded;
- no exception escapes the worker, and no job runs longer than HANG_LIMIT_S;
- a header that declares a huge size (a memory bomb) is refused, never decoded.

A name or declared content type that lies about the content is covered too. Outcomes are
tallied per job type and printed (`pytest -s`), to be quoted in docs. Each bug a mutation found
is kept at the end as a deterministic regression test.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import sys
import tarfile
import time
import uuid
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from PIL import Image

from filejobs.adapters.s3 import S3Outputs
from filejobs.adapters.workspace import Scratch
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.content import SNIFF_BYTES, sniff_content_type
from filejobs.domain.ingest import DEFAULT_DISPATCH, IngestPlan, new_job, plan_ingest
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.time import utcnow
from filejobs.processors.base import Processor
from filejobs.processors.registry import processor_for
from filejobs.processors.scan.engines import YaraScanner
from filejobs.processors.scan.processor import VirusScanProcessor
from filejobs.services.worker import Disposition, WorkerService
from tests.factories import upload_record
from tests.integration.test_audio_waveform import tone
from tests.integration.test_document_processor import BLUE, RED, pdf_of_pages
from tests.integration.test_thumbnail_processor import encoded, png_declaring
from tests.integration.test_virus_scan_processor import zipped
from tests.integration.test_worker_service import Recorder
from tests.processing import MediaBench

# tools/ is a folder of scripts, not a package: its modules import (and mypy checks them) by name.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from samples import photo, video

KEEP = timedelta(days=1)
LEASE = timedelta(minutes=5)
# Far above any job here (the slowest takes well under a second): past it, call it a hang.
HANG_LIMIT_S = 20.0
# A failure message longer than this is not read by a person; ERROR_MESSAGE_LIMIT is 2000.
READABLE_LENGTH = 500
PYTHON_NOISE = ("Traceback", 'File "', "<class ", " object at 0x")
SCAN_VERDICTS = ("CLEAN", "INFECTED", "UNSCANNABLE")
MiB = 1024 * 1024

# Job types that read any file without parsing it (the scan parses archives, see ARCHIVE):
# compression and the hash complete on any bytes; the scan too, unless it refuses at a limit.
BYTE_JOBS = (JobType.COMPRESSION, JobType.DEDUPLICATION_CHECK, JobType.VIRUS_SCAN)
ANY_BYTES_COMPLETE = frozenset({JobType.COMPRESSION, JobType.DEDUPLICATION_CHECK})
BYTE_EXAMPLES = 30


# --- valid samples ----------------------------------------------------------------------------


THUMBNAIL = JobType.THUMBNAIL_GENERATION
DOCUMENT = JobType.DOCUMENT_PREVIEW
ARCHIVE = JobType.VIRUS_SCAN  # the job that opens archives: zip, gzip, tar, nested
WAVEFORM = JobType.VIDEO_THUMBNAIL  # on audio: the waveform


def csv_table(rows: int = 120, rng_seed: int = 7) -> bytes:
    rng = random.Random(rng_seed)
    lines = ["invoice,customer,amount,currency,paid"]
    for number in range(rows):
        customer = rng.choice(["acme", "globex", "initech", "umbrella", "hooli"])
        amount = f"{rng.uniform(1, 9999):.2f}"
        paid = rng.choice(["yes", "no"])
        lines.append(f"INV-{number:05d},{customer},{amount},{rng.choice(['EUR', 'USD'])},{paid}")
    return ("\n".join(lines) + "\n").encode()


def json_document() -> bytes:
    items = [{"id": n, "name": f"item {n}", "tags": ["a", "b"][: n % 3]} for n in range(40)]
    return json.dumps({"version": 2, "items": items, "note": "ünïcödé"}, indent=1).encode()


def notes() -> bytes:
    return (
        "Meeting notes\n\n- ship the local stack\n- measure it\n\tthen write it up: ✓\n".encode()
        * 12
    )


# Samples are the same bytes on every run (no clock in them), so the seeded mutations are too.


def zip_of(name: str, data: bytes) -> bytes:
    """Like test_virus_scan_processor's zipped(), with a fixed timestamp."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        member = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
        archive.writestr(member, data, compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def tar_gz(name: str, data: bytes) -> bytes:
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        info = tarfile.TarInfo(name)  # mtime 0
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return gzip.compress(tar.getvalue(), mtime=0)


def png_sample() -> bytes:
    """The photo's gradient, bands and text as a PNG: every scanline filter has work to do."""
    return encoded(Image.open(io.BytesIO(photo(96, 64))), "PNG")


def pdf_sample() -> bytes:
    """pdf_of_pages() with its creation and modification dates pinned (same length: the
    cross-reference offsets still hold)."""
    made = pdf_of_pages(((200, 100), RED), ((100, 200), BLUE))  # landscape red, portrait blue
    return re.sub(rb"\(D:\d{14}Z\)", b"(D:20260101000000Z)", made)


@dataclass(frozen=True)
class Family:
    """A kind of valid file, the job type that parses it, and how many mutants it gets."""

    name: str
    filename: str
    make: Callable[[], bytes]
    parser: JobType
    examples: int

    def sample(self) -> bytes:
        return _sample(self.name)


FAMILIES = (
    Family("jpeg", "photo.jpg", lambda: photo(160, 120), THUMBNAIL, 25),
    Family("png", "chart.png", png_sample, THUMBNAIL, 25),
    # Video decoding is the slowest: one second at 5 fps, and few mutants.
    Family("mp4", "clip.mp4", lambda: video(seconds=1, fps=5), JobType.VIDEO_THUMBNAIL, 10),
    Family("pdf", "report.pdf", pdf_sample, DOCUMENT, 25),
    Family("json", "items.json", json_document, DOCUMENT, 10),
    Family("csv", "invoices.csv", csv_table, DOCUMENT, 10),
    Family("text", "notes.txt", notes, DOCUMENT, 6),
    Family("zip", "invoices.zip", lambda: zip_of("invoices.csv", csv_table()), ARCHIVE, 20),
    Family("gzip", "invoices.csv.gz", lambda: gzip.compress(csv_table(), mtime=0), ARCHIVE, 10),
    Family("tar.gz", "invoices.tar.gz", lambda: tar_gz("invoices.csv", csv_table()), ARCHIVE, 10),
    # Audio: video_thumbnail's waveform (FFmpeg's demuxers and decoders, then showwavespic); a
    # second or less each: decoding is quick, but each mutant is a sandboxed job.
    Family("mp3", "song.mp3", lambda: tone("libmp3lame", "mp3", seconds=1), WAVEFORM, 8),
    Family("flac", "song.flac", lambda: tone("flac", "flac", seconds=1), WAVEFORM, 8),
    Family("wav", "song.wav", lambda: tone("pcm_s16le", "wav", 0.5, rate=8000), WAVEFORM, 6),
    Family("ogg", "song.ogg", lambda: tone("libopus", "ogg", 1, rate=48000), WAVEFORM, 6),
    Family("m4a", "song.m4a", lambda: tone("aac", "ipod", seconds=1), WAVEFORM, 8),
)


@cache
def _sample(name: str) -> bytes:
    return next(f for f in FAMILIES if f.name == name).make()


# --- mutations --------------------------------------------------------------------------------
# Each is a pure function of its parameters: a failing example Hypothesis prints replays exactly.


@dataclass(frozen=True)
class Truncate:
    at: int

    def apply(self, data: bytes) -> bytes:
        return data[: self.at]


@dataclass(frozen=True)
class FlipBits:
    bits: tuple[int, ...]  # bit offsets from the start of the file

    def apply(self, data: bytes) -> bytes:
        out = bytearray(data)
        for bit in self.bits:
            out[bit // 8] ^= 1 << bit % 8
        return bytes(out)


@dataclass(frozen=True)
class ZeroRun:
    start: int
    length: int

    def apply(self, data: bytes) -> bytes:
        end = min(self.start + self.length, len(data))
        return data[: self.start] + bytes(end - self.start) + data[end:]


@dataclass(frozen=True)
class DuplicateChunk:
    start: int
    length: int
    copies: int

    def apply(self, data: bytes) -> bytes:
        chunk = data[self.start : self.start + self.length]
        return data[: self.start] + chunk * self.copies + data[self.start + len(chunk) :]


@dataclass(frozen=True)
class ShuffleChunks:
    cuts: tuple[int, ...]  # ascending; the piece before the first cut (the header) stays first
    order: tuple[int, ...]  # the new order of the pieces after it

    def apply(self, data: bytes) -> bytes:
        bounds = zip((0, *self.cuts), (*self.cuts, len(data)), strict=True)
        head, *rest = [data[start:end] for start, end in bounds]
        return head + b"".join(rest[index] for index in self.order)


@dataclass(frozen=True)
class GarbageBody:
    keep: int  # leading bytes kept: the header still says what the file is
    seed: int

    def apply(self, data: bytes) -> bytes:
        garbage = random.Random(self.seed).randbytes(max(len(data) - self.keep, 0))
        return data[: self.keep] + garbage


type Mutation = Truncate | FlipBits | ZeroRun | DuplicateChunk | ShuffleChunks | GarbageBody


@st.composite
def shuffles(draw: st.DrawFn, size: int) -> ShuffleChunks:
    cuts = draw(st.lists(st.integers(1, size - 1), min_size=2, max_size=6, unique=True))
    order = draw(st.permutations(range(len(cuts))))
    return ShuffleChunks(tuple(sorted(cuts)), tuple(order))


def mutations(size: int) -> st.SearchStrategy[Mutation]:
    """Corruptions of a file of `size` bytes, every offset inside the file."""
    offset = st.integers(0, size - 1)
    return st.one_of(
        st.builds(Truncate, offset),
        st.builds(
            FlipBits, st.lists(st.integers(0, size * 8 - 1), min_size=1, max_size=16).map(tuple)
        ),
        st.builds(ZeroRun, offset, st.integers(1, 512)),
        st.builds(DuplicateChunk, offset, st.integers(1, 1024), st.integers(2, 8)),
        shuffles(size),
        st.builds(GarbageBody, st.integers(4, min(64, size)), st.integers(0, 2**32 - 1)),
    )


# --- the bench: ingest, then the real worker of each job type --------------------------------


@dataclass
class CorruptBench:
    media: MediaBench
    processors: dict[JobType, Processor]
    scratch: Scratch
    tally: Counter[tuple[str, str]] = field(default_factory=Counter)

    def ingest(
        self, name: str, body: bytes, job_types: tuple[JobType, ...], declared: str | None = None
    ) -> list[ProcessingJob]:
        """Uploads `body` under a fresh key and records the file and one job of each type, as
        ingest does (content type sniffed from the bytes, unless `declared` overrides it)."""
        unique = f"{uuid.uuid4().hex[:12]}-{name}"
        key = self.media.upload(unique, body)
        version = self.media.s3.head_object(Bucket=self.media.uploads, Key=key).get("VersionId")
        record = upload_record(
            unique, bucket=self.media.uploads, version_id=version, size=len(body)
        )
        now = utcnow()
        stored = plan_ingest(record, sniff_content_type(body[:SNIFF_BYTES]), now=now).file
        extra: dict[str, object] = {} if declared is None else {"content_type": declared}
        jobs = tuple(
            new_job(
                stored,
                job_type,
                now=now,
                created_by="ingest",
                dispatch=DEFAULT_DISPATCH,
                input_data=extra,
            )
            for job_type in job_types
        )
        FileRepository().record_ingest(IngestPlan(stored, jobs))
        return list(jobs)

    def run(self, job: ProcessingJob) -> ProcessingJob:
        """The job's message through its type's worker; the job as stored after, held to the
        spec (terminal; a failure permanent and readable; no hang)."""
        dispatcher = Recorder()
        worker = WorkerService(
            JobRepository(),
            dispatcher,
            self.processors[job.job_type],
            job.job_type,
            lease=LEASE,
            retention=KEEP,
            worker_id="fuzz-worker",
            outputs=S3Outputs(self.media.s3, self.media.outputs).for_job,
            scratch=self.scratch,
        )
        started = time.monotonic()
        result = worker.handle(JobMessage.for_job(job))  # raises only if the worker lets it
        elapsed = time.monotonic() - started
        stored = JobRepository().get(job.id)
        assert stored is not None
        assert elapsed < HANG_LIMIT_S, f"{job.job_type} took {elapsed:.1f} s"
        assert_ended_for_good(stored, result.disposition, dispatcher)
        self.tally[job.job_type.value, stored.status.value] += 1
        return stored

    def only(
        self, name: str, body: bytes, job_type: JobType, declared: str | None = None
    ) -> ProcessingJob:
        """One job of `job_type` on the upload, run; the job as stored after."""
        (job,) = self.ingest(name, body, (job_type,), declared)
        return self.run(job)

    def report(self, label: str) -> None:
        """One line per job type: the tally to quote (visible with `pytest -s`)."""
        for job_type in sorted({job_type for job_type, _ in self.tally}):
            done = self.tally[job_type, JobStatus.COMPLETED.value]
            failed = self.tally[job_type, JobStatus.FAILED.value]
            print(
                f"[corrupt media] {label:<6} {job_type:<21} {done:3} completed, {failed:3} failed"
            )


@pytest.fixture(scope="module")
def yara_engine() -> YaraScanner:
    return YaraScanner.with_rules_in()


@pytest.fixture
def bench(
    tables: dict[str, str], media: MediaBench, yara_engine: YaraScanner, tmp_path: Path
) -> CorruptBench:
    """Moto tables and buckets; each job type's processor as its worker builds it (the scan with
    YARA only: ClamAV is a subprocess that reports, it does not parse in-process)."""
    processors: dict[JobType, Processor] = {
        job_type: processor_for(job_type, media.s3, None)
        for job_type in JobType
        if job_type is not JobType.VIRUS_SCAN
    }
    processors[JobType.VIRUS_SCAN] = VirusScanProcessor(media.s3, [yara_engine])
    return CorruptBench(media, processors, Scratch(tmp_path / "scratch"))


# --- the spec ---------------------------------------------------------------------------------


def assert_ended_for_good(job: ProcessingJob, outcome: Disposition, dispatcher: Recorder) -> None:
    assert job.status in (JobStatus.COMPLETED, JobStatus.FAILED), (
        f"{job.job_type} left {job.status}: {job.error_message}"
    )
    if job.status is JobStatus.COMPLETED:
        assert outcome is Disposition.COMPLETED
        assert job.result_data is not None and job.error_message is None
    else:
        assert outcome is Disposition.FAILED
        # Permanent: failed on its first attempt with retries to spare, and no retry was sent.
        assert (job.attempt, job.retry_count, job.can_retry()) == (1, 0, True)
        assert dispatcher.sent == []
        assert_readable(job.error_message)
    if job.job_type in ANY_BYTES_COMPLETE:
        assert job.status is JobStatus.COMPLETED, f"{job.job_type}: {job.error_message}"
    if job.job_type is JobType.VIRUS_SCAN:
        # Any bytes get a verdict: what the scan cannot read in full is UNSCANNABLE, not a failure.
        assert job.status is JobStatus.COMPLETED, job.error_message
        assert (job.result_data or {}).get("verdict") in SCAN_VERDICTS


def assert_readable(message: str | None) -> None:
    assert message, "a failed job says why"
    # The processor's own words (a PermanentError), not a stray exception's.
    assert message.startswith("PermanentError: "), message
    assert len(message) <= READABLE_LENGTH, f"{len(message)} characters: {message[:120]}"
    assert not [noise for noise in PYTHON_NOISE if noise in message], message


# --- mutated samples --------------------------------------------------------------------------


SETTINGS = settings(
    deadline=None,  # HANG_LIMIT_S bounds each job instead
    database=None,  # the seed alone decides the examples: every run tries the same ones
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_a_corrupted_sample_is_parsed_to_completion_or_failed_for_good(
    bench: CorruptBench, family: Family
) -> None:
    # Given a valid sample, which the job type that parses it completes
    valid = family.sample()
    (job,) = bench.ingest(family.filename, valid, (family.parser,))
    assert bench.run(job).status is JobStatus.COMPLETED
    bench.tally.clear()

    # When seeded mutations of it are uploaded, and that job type runs on each
    @settings(SETTINGS, max_examples=family.examples)
    @seed(zlib.crc32(family.name.encode()))
    @given(mutation=mutations(len(valid)))
    def each_mutant(mutation: Mutation) -> None:
        (job,) = bench.ingest(family.filename, mutation.apply(valid), (family.parser,))
        # Then the job ends completed or failed for good, as the spec says (bench.run)
        bench.run(job)

    each_mutant()
    bench.report(family.name)
    assert bench.tally.total() == family.examples, "every drawn mutant ran"


@st.composite
def mutants(draw: st.DrawFn) -> tuple[Family, Mutation]:
    family = draw(st.sampled_from(FAMILIES))
    return family, draw(mutations(len(family.sample())))


def test_compression_hashing_and_scanning_complete_on_any_corrupted_sample(
    bench: CorruptBench,
) -> None:
    # Given a mutant of any family's sample
    @settings(SETTINGS, max_examples=BYTE_EXAMPLES)
    @seed(zlib.crc32(b"bytes"))
    @given(mutant=mutants())
    def each_mutant(mutant: tuple[Family, Mutation]) -> None:
        family, mutation = mutant
        # When compression, the deduplication hash and the virus scan run on it
        for job in bench.ingest(family.filename, mutation.apply(family.sample()), BYTE_JOBS):
            # Then compression and the hash complete; the scan completes or refuses for good
            bench.run(job)

    each_mutant()
    bench.report("any")
    assert bench.tally.total() == BYTE_EXAMPLES * len(BYTE_JOBS)


# --- names and declared types that lie -------------------------------------------------------


@dataclass(frozen=True)
class Lie:
    case: str
    name: str
    make: Callable[[], bytes]
    job_type: JobType
    declared: str | None  # the job's content type, when it is not the sniffed one
    status: JobStatus
    says: str = ""


FAILED, COMPLETED = JobStatus.FAILED, JobStatus.COMPLETED
LIES = (
    # Processors go by the bytes, never by the name.
    Lie("jpeg-named-pdf", "report.pdf", lambda: photo(64, 48), DOCUMENT, None, FAILED,
        "does not support image/jpeg files"),
    Lie("pdf-named-jpg", "photo.jpg", lambda: _sample("pdf"), THUMBNAIL, None, FAILED,
        "thumbnail_generation does not decode application/pdf files"),
    Lie("jpeg-named-png", "photo.png", lambda: photo(64, 48), THUMBNAIL, None, COMPLETED),
    # A decoder is picked by the sniffed type, never probed: FFmpeg left to probe took a PNG for
    # a one-frame video, and a PDF too (it found the JPEG the page is drawn from).
    Lie("png-named-mp4", "clip.mp4", lambda: _sample("png"), JobType.VIDEO_THUMBNAIL, None,
        FAILED, "video_thumbnail does not decode image/png files"),
    Lie("pdf-named-mp4", "clip.mp4", lambda: _sample("pdf"), JobType.VIDEO_THUMBNAIL, None,
        FAILED, "video_thumbnail does not decode application/pdf files"),
    # A job's declared content type is believed: a wrong one fails the job, or the bytes are
    # previewed as what it declared (binary typeset as text, replacement characters and all).
    Lie("text-declared-pdf", "notes.txt", notes, DOCUMENT, "application/pdf", FAILED,
        "not a readable PDF"),
    Lie("pdf-declared-text", "report.pdf", lambda: _sample("pdf"), DOCUMENT, "text/plain",
        COMPLETED),
    Lie("jpeg-declared-csv", "table.csv", lambda: photo(64, 48), DOCUMENT, "text/csv",
        COMPLETED),
    Lie("png-declared-json", "items.json", lambda: _sample("png"), DOCUMENT, "application/json",
        COMPLETED),
)  # fmt: skip


def test_a_name_or_declared_type_that_lies_about_the_content_ends_the_job_for_good(
    bench: CorruptBench, subtests: pytest.Subtests
) -> None:
    for lie in LIES:
        with subtests.test(lie.case):
            # Given an upload whose name or declared content type is not what its bytes are
            # When the job that reads it runs
            job = bench.only(lie.name, lie.make(), lie.job_type, lie.declared)

            # Then it ends as its content (or its declared type) allows, for good
            assert job.status is lie.status, job.error_message
            assert lie.says in (job.error_message or "")
    bench.report("lies")


# --- memory bombs -----------------------------------------------------------------------------


def jpeg_declaring(width: int, height: int) -> bytes:
    """A small valid JPEG whose frame header (SOF0) is patched to declare width x height."""
    data = bytearray(photo(64, 48))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


def test_an_image_whose_header_declares_a_huge_size_is_refused_before_decoding(
    bench: CorruptBench, subtests: pytest.Subtests
) -> None:
    bombs = {
        "huge.png": png_declaring(30_000, 30_000),  # 900 MP
        "huge.jpg": jpeg_declaring(65_000, 65_000),  # 4.2 GP
    }
    for name, body in bombs.items():
        with subtests.test(name):
            # Given a file of a few hundred bytes that declares a gigantic image
            assert len(body) < 10_000

            # When its thumbnail job runs
            started = time.monotonic()
            job = bench.only(name, body, THUMBNAIL)

            # Then it is refused for good at once, saying so, without a pixel decoded
            assert time.monotonic() - started < 5
            assert job.status is JobStatus.FAILED
            message = job.error_message or ""
            assert "thumbnail_generation decodes at most 50 MP" in message, message
    bench.report("bombs")


def test_an_archive_that_expands_a_thousandfold_is_unscannable_and_hashed_as_it_is(
    bench: CorruptBench, subtests: pytest.Subtests
) -> None:
    bombs = {
        "zeros.zip": zipped("zeros.bin", bytes(8 * MiB)),
        "zeros.bin.gz": gzip.compress(bytes(8 * MiB), mtime=0),
    }
    for name, body in bombs.items():
        with subtests.test(name):
            # Given an archive of 8 MiB of zeros, a few kilobytes compressed
            assert len(body) < 64 * 1024

            # When compression, the hash and the scan run on it
            jobs = {job.job_type: bench.run(job) for job in bench.ingest(name, body, BYTE_JOBS)}

            # Then the scan cannot vouch for it, a likely bomb; compression and hash complete
            scan = jobs[JobType.VIRUS_SCAN]
            assert scan.status is JobStatus.COMPLETED
            assert scan.result_data is not None
            assert scan.result_data["verdict"] == "UNSCANNABLE"
            assert "a likely zip bomb" in (scan.result_data["unscannable_reason"] or "")
            assert jobs[JobType.COMPRESSION].status is JobStatus.COMPLETED
            assert jobs[JobType.DEDUPLICATION_CHECK].status is JobStatus.COMPLETED
    bench.report("bombs")


# --- regressions: bugs these mutations found -------------------------------------------------


def test_a_pdf_whose_page_tree_names_a_missing_page_fails_for_good(bench: CorruptBench) -> None:
    # Given a PDF that opens (one page counted) but whose page tree names an object not there;
    # PDFium's "Failed to load page." escaped as a PdfiumError and was retried as transient
    body = _sample("pdf").replace(b"/Kids [ 1 0 R", b"/Kids [ 99 0 R", 1)
    assert body != _sample("pdf")

    # When its preview job runs
    job = bench.only("report.pdf", body, JobType.DOCUMENT_PREVIEW)

    # Then it fails for good, saying the page cannot be loaded
    assert job.status is JobStatus.FAILED
    assert "the PDF's first page cannot be loaded" in (job.error_message or "")


def test_json_nested_deeper_than_the_parser_goes_is_previewed_as_it_is(
    bench: CorruptBench,
) -> None:
    # Given valid JSON nested 30000 deep (a duplicated "[" chunk makes such a file); json.loads
    # raised RecursionError, which escaped and was retried as transient
    body = b"[" * 30_000 + b"]" * 30_000

    # When its preview job runs
    job = bench.only("deep.json", body, JobType.DOCUMENT_PREVIEW)

    # Then the page shows the text as it is, not pretty-printed
    assert job.status is JobStatus.COMPLETED
    assert job.result_data is not None
    assert (job.result_data["content_type"], job.result_data["valid_json"]) == (
        "application/json",
        False,
    )


def test_a_zip_whose_central_directory_points_before_the_file_is_unscannable(
    bench: CorruptBench,
) -> None:
    # Given a zip whose end record puts its central directory 1000 bytes further than it is,
    # so every member's header offset comes out negative; zipfile's seek raised OSError
    # (EINVAL), which the walk does not treat as "unreadable", and the job was retried
    body = bytearray(zipped("invoices.csv", csv_table()))
    end = body.rindex(b"PK\x05\x06")
    directory_at = int.from_bytes(body[end + 16 : end + 20], "little")
    body[end + 16 : end + 20] = (directory_at + 1000).to_bytes(4, "little")

    # When it is scanned
    job = bench.only("invoices.zip", bytes(body), JobType.VIRUS_SCAN)

    # Then the scan completes, not retried; what the archive holds was not seen, so it cannot
    # pass as CLEAN: UNSCANNABLE, saying why
    assert job.status is JobStatus.COMPLETED
    assert job.result_data is not None and job.result_data["verdict"] == "UNSCANNABLE"
    assert "its header lies before the archive's start" in job.result_data["unscannable_reason"]


def _box_payload(data: bytes, kind: bytes) -> int:
    """Offset of the first `kind` box's payload (just past its size and type) in an MP4."""
    return data.index(kind) + 4


def _unknown_codec(mp4: bytes) -> bytes:
    # The sample description's first entry, 'avc1', renamed to a codec nobody knows.
    entry = _box_payload(mp4, b"stsd") + 8
    return mp4[:entry] + mp4[entry:].replace(b"avc1", b"zzzz", 1)


def _empty_time_table(mp4: bytes) -> bytes:
    # The decoding-time table (stts) with no entries: no index to seek by.
    stts = _box_payload(mp4, b"stts")
    return mp4[:stts] + bytes(16) + mp4[stts + 16 :]


def _oversized_sample_entry(mp4: bytes) -> bytes:
    # The sample description's first entry declaring 256 bytes more than its box holds.
    entry = _box_payload(mp4, b"stsd") + 8
    size = int.from_bytes(mp4[entry : entry + 4], "big") | 0x100
    return mp4[:entry] + size.to_bytes(4, "big") + mp4[entry + 4 :]


def test_a_video_with_a_corrupt_sample_table_fails_for_good(
    bench: CorruptBench, subtests: pytest.Subtests
) -> None:
    corruptions = {
        # AttributeError: the stream had no codec context to set skip_frame on.
        "unknown-codec": (_unknown_codec, "the video stream's codec is unknown"),
        # av.error.PermissionError (EPERM) from the seek to the poster's time.
        "empty-time-table": (_empty_time_table, "the video stream has no decodable frame"),
        # av.error.MemoryError (ENOMEM): a box declaring more than FFmpeg will allocate.
        "oversized-sample-entry": (
            _oversized_sample_entry,
            "the video declares more memory than it may use",
        ),
    }
    valid = _sample("mp4")
    for case, (corrupt, says) in corruptions.items():
        with subtests.test(case):
            # Given the valid MP4 with one box of its sample table corrupted; each raised an
            # error the worker took for transient, retried until its retries ran out
            body = corrupt(valid)
            assert len(body) == len(valid) and body != valid

            # When its poster job runs
            job = bench.only("clip.mp4", body, JobType.VIDEO_THUMBNAIL)

            # Then it fails for good, saying why
            assert job.status is JobStatus.FAILED
            assert says in (job.error_message or ""), job.error_message
