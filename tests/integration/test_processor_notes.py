"""What each processor says about an attempt, on real bytes in moto S3: video and compression
report real progress (bytes of the object), and every processor logs its key lines (what it
read, decided and wrote) with object keys, never the scratch directory's path."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from filejobs.domain.job import JobType
from filejobs.processors.base import Work
from filejobs.processors.compression import CompressionProcessor
from filejobs.processors.dedup import ContentDigest
from filejobs.processors.document import DocumentPreviewProcessor
from filejobs.processors.scan.engines import YaraScanner
from filejobs.processors.scan.processor import VirusScanProcessor
from filejobs.processors.thumbnail import ThumbnailProcessor
from filejobs.processors.video import VideoPosterProcessor
from tests.integration.test_compression_processor import _csv
from tests.integration.test_video_processor import h264_video
from tests.processing import MediaBench, watched


def lines_of(work: Work) -> list[str]:
    lines = list(work.notes.snapshot().lines)
    assert all(str(work.workspace) not in line for line in lines)
    return lines


def test_compression_reports_the_bytes_read_of_the_objects_size(media: MediaBench) -> None:
    # Given a 3.5 MB CSV (four 1 MiB reads)
    body = _csv(110_000)
    assert len(body) > 3 * 1024 * 1024
    work, reports = watched(media.work_for(JobType.COMPRESSION, "sales.csv", body))

    # When it is compressed
    result = CompressionProcessor(media.s3)(work)

    # Then each chunk read was reported, rising, against the object's size
    fractions = [f for f, _ in reports.reports]
    assert len(fractions) == 4
    assert fractions == sorted(fractions) and fractions[-1] == 0.99
    total = f"{len(body) / 1e6:.1f} MB"
    assert reports.reports[0][1] == f"compressed 1.0 MB of {total}"
    # and it logged what it read, decided and wrote
    read, wrote = lines_of(work)
    assert read == f"read text/csv, {total}: zstd level 3"
    assert wrote.startswith(f"wrote {result['key']}: {total} -> ")
    assert f"(ratio {result['ratio']:.3f})" in wrote


def test_compression_says_why_it_skipped(media: MediaBench) -> None:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), "red").save(out, "PNG")
    work = media.work_for(JobType.COMPRESSION, "a.png", out.getvalue())

    CompressionProcessor(media.s3)(work)

    assert lines_of(work)[-1] == "skipped: already compressed (image/png)"


def test_the_video_poster_reports_its_download_then_its_steps(media: MediaBench) -> None:
    # Given a 3-second 320x240 H.264 video
    work, reports = watched(media.work_for(JobType.VIDEO_THUMBNAIL, "clip.mp4", h264_video(3)))

    # When its poster is taken
    result = VideoPosterProcessor(media.s3)(work)

    # Then its progress rose from the download (bytes of the object) to the decode and upload
    fractions = [f for f, _ in reports.reports]
    assert fractions == sorted(fractions)
    messages = [m for _, m in reports.reports]
    assert messages[0] is not None and messages[0].startswith("downloaded ")
    assert messages[-2:] == ["decoding the poster frame", "writing the poster"]
    assert work.notes.snapshot().fraction == 0.9
    # and it logged what it read, what the decoder found and chose, and what it wrote
    read, found, wrote = lines_of(work)
    assert read.startswith("read ") and read.endswith("video/mp4 (demuxer mov)")
    assert found == "320x240 h264, 3.0 s at 10 fps; poster frame at 0.30 s"
    key = result["poster"]["key"]
    assert wrote.startswith(f"wrote {key}: 320x240 WebP, ")


def test_thumbnails_log_the_image_decoded_and_each_thumbnail_written(media: MediaBench) -> None:
    out = io.BytesIO()
    Image.new("RGB", (640, 480), "blue").save(out, "JPEG")
    work = media.work_for(
        JobType.THUMBNAIL_GENERATION, "p.jpg", out.getvalue(), {"sizes": [128, 256]}
    )

    result = ThumbnailProcessor(media.s3)(work)

    lines = lines_of(work)
    assert lines[0].startswith("read ") and lines[0].endswith("image/jpeg; sizes 256, 128 as webp")
    assert lines[1] == "decoded 640x480 JPEG (RGB)"
    keys = [t["key"] for t in result["thumbnails"]]
    assert [line.split(":")[0] for line in lines[2:]] == [f"wrote {k}" for k in keys]
    assert work.notes.snapshot().fraction is not None


def test_a_document_preview_logs_its_pages_and_the_preview(media: MediaBench) -> None:
    pages = [Image.new("RGB", (200, 300), c) for c in ("white", "grey")]
    out = io.BytesIO()
    pages[0].save(out, "PDF", save_all=True, append_images=pages[1:])
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "d.pdf", out.getvalue())

    result = DocumentPreviewProcessor(media.s3)(work)

    read, pages_line, wrote = lines_of(work)
    assert read.startswith("read ") and read.endswith("application/pdf")
    assert pages_line == "the document has 2 pages"
    assert wrote.startswith(f"wrote {result['preview']['key']}: ")


def test_the_digest_logs_its_hash_and_a_scan_its_engines_and_verdict(media: MediaBench) -> None:
    body = b"hello filejobs\n" * 1000
    digest = media.work_for(JobType.DEDUPLICATION_CHECK, "h.txt", body)
    found: dict[str, Any] = ContentDigest(media.s3)(digest)
    assert lines_of(digest) == [f"read 15.0 KB: sha256 {found['sha256']}"]

    scan = media.work_for(JobType.VIRUS_SCAN, "h.txt", body)
    VirusScanProcessor(media.s3, [YaraScanner.with_rules_in()])(scan)
    lines = lines_of(scan)
    assert lines[0].startswith("definitions shipped with the code; engines yara")
    assert lines[1:] == ["read 15.0 KB", "yara: CLEAN, 1 file scanned", "verdict CLEAN"]
