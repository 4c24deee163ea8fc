"""The compression processor on real bytes in moto S3: streamed in, compressed, streamed out."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import random
import zipfile
from collections.abc import Callable
from typing import Any

import pytest
import zstandard
from PIL import Image

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested
from filejobs.processors.compression import CompressionProcessor
from filejobs.processors.source import ReadLimits
from tests.processing import MediaBench

MiB = 1024 * 1024


def _csv(rows: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "city", "product", "quantity", "price", "note"])
    cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Quebec"]
    products = ["widget", "gadget", "sprocket", "flange"]
    for n in range(rows):
        writer.writerow(
            [
                n,
                rng.choice(cities),
                rng.choice(products),
                rng.randint(1, 500),
                f"{rng.uniform(1, 999):.2f}",
                "restocked" if rng.random() < 0.1 else "",
            ]
        )
    return out.getvalue().encode()


def _random_and_repetitive(size: int, seed: int = 11) -> bytes:
    """Half-compressible: blocks of random bytes, each followed by a run of text."""
    rng = random.Random(seed)
    pieces, total = [], 0
    while total < size:
        block = rng.randbytes(256 * 1024) + b"filejobs compression test line\n" * 8192
        pieces.append(block)
        total += len(block)
    return b"".join(pieces)[:size]


def _unzstd(blob: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(blob)


def _record_calls(media: MediaBench) -> list[str]:
    """The S3 operations the client makes from now on, in order (botocore's own event hook)."""
    calls: list[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    media.s3.meta.events.register("before-call.s3", record)
    return calls


def _stop_after(reads: int) -> Callable[[], bool]:
    asked = [0]

    def should_stop() -> bool:
        asked[0] += 1
        return asked[0] > reads

    return should_stop


def test_a_csv_is_compressed_with_zstd_and_round_trips(media: MediaBench) -> None:
    # Given a real CSV upload of about 1.3 MB
    data = _csv(30_000)
    work = media.work_for(JobType.COMPRESSION, "sales.csv", data)

    # When it is compressed with the defaults
    result = CompressionProcessor(media.s3)(work)

    # Then the output is a zstd stream of exactly those bytes, much smaller, at level 3
    blob = media.output(result["key"])
    assert _unzstd(blob) == data
    assert hashlib.sha256(_unzstd(blob)).hexdigest() == result["sha256"]
    assert result["sha256"] == hashlib.sha256(data).hexdigest()
    assert result["algorithm"] == "zstd" and result["level"] == 3
    assert result["original_bytes"] == len(data)
    assert result["compressed_bytes"] == len(blob) < len(data) // 3
    assert result["ratio"] == pytest.approx(len(blob) / len(data), abs=1e-6)
    assert result["key"].endswith("/compression/compressed.zst")
    head = media.s3.head_object(Bucket=media.outputs, Key=result["key"])
    assert head["ContentType"] == "application/zstd"
    assert "-" not in head["ETag"]  # one PUT: the output is smaller than a part


def test_an_output_larger_than_a_part_is_uploaded_in_parts_and_round_trips(
    media: MediaBench,
) -> None:
    # Given a 24 MiB upload that compresses to more than one 5 MiB part
    data = _random_and_repetitive(24 * MiB)
    work = media.work_for(JobType.COMPRESSION, "mixed.bin", data, input_data={"level": 1})
    calls = _record_calls(media)

    # When it is compressed
    result = CompressionProcessor(media.s3)(work)

    # Then it went up as a multipart upload whose parts reassemble the compressed stream
    blob = media.output(result["key"])
    parts = calls.count("UploadPart")
    assert result["compressed_bytes"] == len(blob) > 5 * MiB
    assert parts == -(-len(blob) // (5 * MiB)) >= 2
    assert calls.count("CompleteMultipartUpload") == 1 and "PutObject" not in calls
    etag = media.s3.head_object(Bucket=media.outputs, Key=result["key"])["ETag"]
    assert etag.strip('"').endswith(f"-{parts}")
    assert _unzstd(blob) == data
    assert result["sha256"] == hashlib.sha256(data).hexdigest()
    assert result["level"] == 1


def test_gzip_is_an_option(media: MediaBench) -> None:
    # Given a text upload and a job asking for gzip at level 9
    data = _csv(5_000)
    work = media.work_for(
        JobType.COMPRESSION, "log.csv", data, input_data={"algorithm": "gzip", "level": 9}
    )

    # When it is compressed
    result = CompressionProcessor(media.s3)(work)

    # Then the output is a gzip file of the same bytes
    blob = media.output(result["key"])
    assert result["key"].endswith("/compressed.gz")
    assert result["algorithm"] == "gzip" and result["level"] == 9
    assert gzip.decompress(blob) == data
    assert result["compressed_bytes"] == len(blob)


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.effect_noise((64, 64), 40).convert("RGB").save(out, "JPEG")
    return out.getvalue()


def _png() -> bytes:
    out = io.BytesIO()
    Image.linear_gradient("L").save(out, "PNG")
    return out.getvalue()


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data.csv", _csv(100))
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "make", "mime"),
    [
        ("photo.jpg", _jpeg, "image/jpeg"),
        ("chart.png", _png, "image/png"),
        ("bundle.zip", _zip, "application/zip"),
        ("again.gz", lambda: gzip.compress(b"x" * 1000), "application/gzip"),
    ],
)
def test_already_compressed_formats_are_skipped_with_the_reason(
    media: MediaBench, name: str, make: Callable[[], bytes], mime: str
) -> None:
    # Given an upload whose content is already compressed (named misleadingly or not)
    work = media.work_for(JobType.COMPRESSION, name, make())
    calls = _record_calls(media)

    # When the compression job runs
    result = CompressionProcessor(media.s3)(work)

    # Then nothing is written and the result says why
    assert result == {
        "skipped": True,
        "reason": f"already compressed ({mime})",
        "content_type": mime,
    }
    assert not {"PutObject", "CreateMultipartUpload"} & set(calls)
    assert "Contents" not in media.s3.list_objects_v2(Bucket=media.outputs)


def test_a_zero_byte_file_compresses_to_an_empty_stream(media: MediaBench) -> None:
    # Given an empty upload
    work = media.work_for(JobType.COMPRESSION, "empty.txt", b"")

    # When it is compressed
    result = CompressionProcessor(media.s3)(work)

    # Then the output is a valid zstd stream of nothing
    blob = media.output(result["key"])
    assert _unzstd(blob) == b""
    assert result["original_bytes"] == 0 and result["compressed_bytes"] == len(blob) > 0
    assert result["ratio"] is None
    assert result["sha256"] == hashlib.sha256(b"").hexdigest()


def test_a_stop_mid_stream_aborts_the_multipart_upload(media: MediaBench) -> None:
    # Given a 16 MiB incompressible upload, and a job told to stop after 8 MiB were read
    data = random.Random(3).randbytes(16 * MiB)
    work = media.work_for(JobType.COMPRESSION, "noise.bin", data, should_stop=_stop_after(8))
    calls = _record_calls(media)

    # When it is compressed
    with pytest.raises(StopRequested):
        CompressionProcessor(media.s3)(work)

    # Then the multipart upload had begun, and was aborted: no parts, no object
    assert calls.count("UploadPart") >= 1
    assert calls[-1] == "AbortMultipartUpload"
    assert "Uploads" not in media.s3.list_multipart_uploads(Bucket=media.outputs)
    assert "Contents" not in media.s3.list_objects_v2(Bucket=media.outputs)


@pytest.mark.parametrize(
    "input_data",
    [
        {"level": 0},
        {"level": 20},
        {"level": "3"},
        {"level": True},
        {"algorithm": "gzip", "level": 10},
        {"algorithm": "brotli"},
    ],
)
def test_a_bad_algorithm_or_level_is_a_permanent_error(
    media: MediaBench, input_data: dict[str, object]
) -> None:
    # Given a job with settings the processor does not accept
    work = media.work_for(JobType.COMPRESSION, "a.csv", _csv(10), input_data=input_data)

    # When / Then it fails permanently, before reading anything
    with pytest.raises(PermanentError):
        CompressionProcessor(media.s3)(work)


def test_a_file_over_the_size_limit_fails_for_good_before_a_byte_is_read(
    media: MediaBench,
) -> None:
    # Given a job whose file ingest recorded at 5,000 bytes, and a 1,000-byte limit
    work = media.work_for(JobType.COMPRESSION, "big.csv", _csv(200))
    work.job.input_data = {**(work.job.input_data or {}), "size": 5000}
    calls = _record_calls(media)

    # When / Then it fails permanently, saying why, and reads nothing
    with pytest.raises(PermanentError, match=r"the object is 4\.9 KiB, larger than the 1000 b"):
        CompressionProcessor(media.s3, ReadLimits(max_bytes=1000))(work)
    assert calls == []
