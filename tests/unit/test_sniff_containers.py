"""Specification: the formats whose kind is not in their head (a ZIP's documents, an OLE2 file's
application, an audio file's cover art) are told apart with a few ranged reads, never more than
the budget, and hostile containers fall back to their coarse type without an exception.

Files are real: OOXML, ODF and EPUB written by `zipfile` the way Office and LibreOffice lay them
out, OLE2 compound files written sector by sector to [MS-CFB] (tests/content_samples.py). The
genuine LibreOffice outputs are in tests/integration/test_sniff_office_files.py.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from filejobs.domain.byte_ranges import (
    MAX_EXTRA_BYTES,
    MAX_EXTRA_READS,
    BoundedReader,
    BytesRanges,
)
from filejobs.domain.containers import OLE2_DOCUMENT_TYPES, ZIP_DOCUMENT_TYPES
from filejobs.domain.content import (
    EPUB,
    ODF_DOCUMENTS,
    OLE2_DOCUMENTS,
    OLE_STORAGE,
    OOXML_DOCUMENTS,
    SNIFF_BYTES,
    Sniffed,
    job_types_for,
    sniff,
    sniff_content_type,
)
from filejobs.domain.job import JobType
from tests import content_samples as samples
from tests.content_samples import DOCX, DOCX_MAIN, OOXML_MAIN_PARTS, CompoundFile

ZIP = "application/zip"
WORD, EXCEL, POWERPOINT = (
    "application/msword",
    "application/vnd.ms-excel",
    "application/vnd.ms-powerpoint",
)
ODT = "application/vnd.oasis.opendocument.text"


def sniffed(data: bytes) -> tuple[Sniffed, BytesRanges]:
    """What ingest sniffs: the head it read, and the object by ranges for the rest."""
    ranges = BytesRanges(data)
    return sniff(data[:SNIFF_BYTES], ranges), ranges


def within_budget(ranges: BytesRanges) -> bool:
    return (
        len(ranges.reads) <= MAX_EXTRA_READS
        and sum(length for _, length in ranges.reads) <= MAX_EXTRA_BYTES
    )


def test_the_container_types_are_the_routing_table_s() -> None:
    assert {*OOXML_DOCUMENTS, *ODF_DOCUMENTS, EPUB} == ZIP_DOCUMENT_TYPES
    assert OLE2_DOCUMENTS == OLE2_DOCUMENT_TYPES


# --- OOXML ------------------------------------------------------------------------------------

MAIN_TYPES = [
    pytest.param(main, expected, id=expected.removeprefix("application/vnd."))
    for main, (_, expected) in OOXML_MAIN_PARTS.items()
]


@pytest.mark.parametrize(("main_type", "expected"), MAIN_TYPES)
def test_an_office_file_is_known_by_its_main_part_without_a_read_beyond_the_head(
    main_type: str, expected: str
) -> None:
    # given a package as Office writes it, [Content_Types].xml first, much larger than the head
    data = samples.ooxml(main_type, layout="office", padding=200_000)
    # when it is sniffed
    result, ranges = sniffed(data)
    # then the main part names the document, read from the head alone
    assert result == Sniffed(expected)
    assert ranges.reads == []


@pytest.mark.parametrize(("main_type", "expected"), MAIN_TYPES)
def test_a_libreoffice_package_is_known_from_its_central_directory_in_one_read(
    main_type: str, expected: str
) -> None:
    # given [Content_Types].xml last, as LibreOffice writes it, far past the head
    data = samples.ooxml(main_type, layout="libreoffice", padding=500_000)
    # when it is sniffed
    result, ranges = sniffed(data)
    # then one read of the last 64 KiB finds the directory and the part
    assert result == Sniffed(expected)
    assert ranges.reads == [(len(data) - 65_557, 65_557)]


def test_a_package_whose_content_types_part_is_far_from_the_end_costs_two_reads() -> None:
    # given [Content_Types].xml written after the parts but before a large trailing picture
    base = samples.ooxml(layout="libreoffice", padding=300_000)
    data = _with_member_after(base, "media/zz.png", samples.filler(300_000))
    result, ranges = sniffed(data)
    assert result == Sniffed(DOCX)
    assert len(ranges.reads) == 2 and within_budget(ranges)


def _with_member_after(package: bytes, name: str, data: bytes) -> bytes:
    import io  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    buffer = io.BytesIO(package)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(name, data, compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def test_the_head_alone_knows_an_office_layout_and_not_a_libreoffice_one() -> None:
    # Processors sniff heads only, and trust the type ingest recorded (content_type_of).
    assert sniff_content_type(samples.ooxml(padding=100_000)[:SNIFF_BYTES]) == DOCX
    libreoffice = samples.ooxml(layout="libreoffice", padding=100_000)
    assert sniff_content_type(libreoffice[:SNIFF_BYTES]) == ZIP
    assert sniff_content_type(samples.ooxml(layout="libreoffice")) == DOCX  # small: all in head


def test_a_zip_with_no_content_types_part_stays_a_zip() -> None:
    data = samples.plain_zip("readme.txt", "word/document.xml") + bytes(0)
    assert sniffed(data)[0] == Sniffed(ZIP)


def test_an_unknown_main_part_stays_a_zip() -> None:
    data = samples.ooxml("application/vnd.ms-visio.drawing.main+xml", padding=10_000)
    assert sniffed(data)[0] == Sniffed(ZIP)


def test_content_types_are_compared_without_case() -> None:
    upper = DOCX_MAIN.upper().replace("APPLICATION/", "application/")
    assert sniffed(samples.ooxml(upper))[0] == Sniffed(DOCX)


# --- ODF and EPUB -------------------------------------------------------------------------------


@pytest.mark.parametrize("mimetype", sorted([*ODF_DOCUMENTS, EPUB]))
def test_odf_and_epub_are_known_by_their_stored_mimetype_member(mimetype: str) -> None:
    result, ranges = sniffed(samples.odf(mimetype, padding=100_000))
    assert result == Sniffed(mimetype)
    assert ranges.reads == []


def test_a_mimetype_member_that_is_compressed_or_unknown_leaves_a_zip() -> None:
    import io  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", ODT)  # deflated: no ODF writer does that
    assert sniffed(buffer.getvalue())[0] == Sniffed(ZIP)
    template = samples.odf("application/vnd.oasis.opendocument.text-template")
    assert sniffed(template)[0] == Sniffed(ZIP)


# --- hostile ZIPs -------------------------------------------------------------------------------


def _end_record_at(data: bytes) -> int:
    return data.rindex(b"PK\x05\x06")


def _large_libreoffice_docx() -> bytes:
    return samples.ooxml(layout="libreoffice", padding=100_000)


def _hostile_zips() -> list[object]:
    data = _large_libreoffice_docx()
    end = _end_record_at(data)
    directory_offset = struct.unpack_from("<I", data, end + 16)[0]

    def patched(at: int, fmt: str, *values: int) -> bytes:
        copy = bytearray(data)
        struct.pack_into(fmt, copy, at, *values)
        return bytes(copy)

    content_types_entry = data.index(b"[Content_Types].xml", directory_offset) - 46
    return [
        pytest.param(data[: end + 10], id="end-record-cut-short"),
        pytest.param(data[:end], id="no-end-record"),
        pytest.param(patched(end + 16, "<I", len(data) + 1000), id="directory-past-the-end"),
        pytest.param(patched(end + 12, "<I", 0xFFFFFFFF), id="directory-size-absurd"),
        pytest.param(patched(end + 16, "<I", 0xFFFFFFFF), id="zip64-marker"),
        pytest.param(patched(end + 20, "<H", 500), id="comment-length-lies"),
        pytest.param(
            patched(content_types_entry + 20, "<I", 10_000_000), id="part-size-past-the-end"
        ),
        pytest.param(
            patched(content_types_entry + 42, "<I", len(data) * 2), id="part-offset-past-the-end"
        ),
        pytest.param(patched(content_types_entry + 10, "<H", 12), id="part-method-bzip2"),
        pytest.param(patched(directory_offset, "<I", 0), id="directory-signature-broken"),
        pytest.param(data[:SNIFF_BYTES] + bytes(200_000), id="zeros-after-the-head"),
        pytest.param(data + b"PK\x05\x06" + bytes(18), id="a-second-end-record-with-no-directory"),
    ]


@pytest.mark.parametrize("data", _hostile_zips())
def test_a_malformed_zip_stays_a_zip_within_budget(data: bytes) -> None:
    result, ranges = sniffed(data)
    assert result == Sniffed(ZIP)
    assert within_budget(ranges)


def test_a_member_count_that_lies_does_not_matter_the_walk_follows_the_signatures() -> None:
    data = bytearray(_large_libreoffice_docx())
    struct.pack_into("<HH", data, _end_record_at(bytes(data)) + 8, 0xFFFF, 0xFFFF)
    assert sniffed(bytes(data))[0] == Sniffed(DOCX)


def _content_types_bomb(main_type_after: int) -> bytes:
    """An Office-layout package whose [Content_Types].xml inflates to `main_type_after` bytes
    of white space before the main part's attribute: 50 MB from a few KiB."""
    import io  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    xml = b" " * main_type_after + samples.content_types_xml("word/document.xml", DOCX_MAIN)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", xml, compresslevel=9)
        archive.writestr("word/document.xml", b"<document/>")
    return buffer.getvalue()


def test_a_content_types_part_that_inflates_to_a_bomb_is_read_no_further_than_64_kib() -> None:
    # given a part that inflates to 50 MB, its main type at the end
    data = _content_types_bomb(50_000_000)
    assert len(data) < 200_000
    # then only the first 64 KiB are inflated: the document is not recognised, and no memory
    # or time is spent on the rest
    result, ranges = sniffed(data)
    assert result == Sniffed(ZIP)
    assert within_budget(ranges)


def test_a_large_content_types_part_is_still_read_within_its_first_64_kib() -> None:
    assert sniffed(_content_types_bomb(30_000))[0] == Sniffed(DOCX)


def test_a_corrupt_deflate_stream_stays_a_zip() -> None:
    data = bytearray(samples.ooxml())
    data_at = 30 + len(b"[Content_Types].xml")
    data[data_at : data_at + 40] = b"\xff" * 40
    assert sniffed(bytes(data))[0] == Sniffed(ZIP)


# --- OLE2 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("streams", "expected"),
    [
        (("WordDocument", "1Table", "\x05SummaryInformation"), WORD),
        (("Workbook", "\x05SummaryInformation"), EXCEL),
        (("Book",), EXCEL),  # Excel 5 and 95
        (("PowerPoint Document", "Current User", "Pictures"), POWERPOINT),
        (("\x05SummaryInformation", "\u4840\u3f3f\u4577\u41e4"), OLE_STORAGE),  # an MSI
        (("__substg1.0_0037001F", "__properties_version1.0"), OLE_STORAGE),  # an Outlook .msg
    ],
)
def test_an_ole2_file_is_known_by_the_streams_in_its_root(
    streams: tuple[str, ...], expected: str
) -> None:
    # given a compound file whose directory lies past the head, after the streams' data
    data = CompoundFile(streams=streams).build()
    result, ranges = sniffed(data)
    assert result == Sniffed(expected)
    assert 1 <= len(ranges.reads) <= 2 and within_budget(ranges)


def test_a_workbook_embedding_a_word_document_is_a_workbook() -> None:
    data = CompoundFile(streams=("Workbook",), nested=("WordDocument", "1Table")).build()
    assert sniffed(data)[0] == Sniffed(EXCEL)


def test_a_directory_in_the_head_costs_no_read() -> None:
    result, ranges = sniffed(CompoundFile(directory_after_data=False).build())
    assert result == Sniffed(WORD)
    assert ranges.reads == []


def test_a_directory_chain_that_loops_ends_where_it_repeats() -> None:
    # given eleven streams (three directory sectors), the FAT sending the last sector back to
    # the first: the walk reads each sector once and stops
    streams = (*(f"Stream{n}" for n in range(10)), "WordDocument")
    data = CompoundFile(streams=streams, loop_directory_chain=True, stream_size=512).build()
    result, ranges = sniffed(data)
    assert result == Sniffed(WORD)
    assert within_budget(ranges)


def test_a_directory_sector_that_is_its_own_successor_is_read_once() -> None:
    data = bytearray(CompoundFile(streams=("Workbook",)).build())
    directory_start = struct.unpack_from("<I", data, 0x30)[0]
    struct.pack_into("<I", data, 512 + 4 * directory_start, directory_start)  # FAT: a self-loop
    result, ranges = sniffed(bytes(data))
    assert result == Sniffed(EXCEL)
    assert len(ranges.reads) == 1


def _ole2_hostile() -> list[object]:
    good = CompoundFile().build()

    def patched(at: int, fmt: str, *values: int) -> bytes:
        copy = bytearray(good)
        struct.pack_into(fmt, copy, at, *values)
        return bytes(copy)

    return [
        pytest.param(good[:SNIFF_BYTES], id="cut-after-the-head"),
        pytest.param(good[:300], id="cut-inside-the-header"),
        pytest.param(patched(0x30, "<I", 0x7FFFFFF0), id="directory-far-past-the-end"),
        pytest.param(patched(0x1E, "<H", 20), id="sector-shift-absurd"),
        pytest.param(patched(0x1A, "<H", 9), id="unknown-major-version"),
        pytest.param(patched(0x4C, "<I", 0xFFFFFFFF), id="no-fat-sector"),
        pytest.param(patched(0x4C, "<I", 0x00FFFFFF), id="fat-sector-past-the-end"),
    ]


@pytest.mark.parametrize("data", _ole2_hostile())
def test_a_malformed_ole2_file_is_an_ole_storage_within_budget(data: bytes) -> None:
    result, ranges = sniffed(data)
    assert result.content_type in {OLE_STORAGE, WORD}  # a cut file may still show its root
    assert within_budget(ranges)


def test_a_directory_scattered_over_the_file_is_read_within_budget() -> None:
    # given root children linked through many directory sectors spread far apart: the reads
    # stop at the budget, whatever the chain says
    streams = tuple(f"S{n}" for n in range(20))
    data = bytearray(CompoundFile(streams=streams, stream_size=512).build())
    data += bytes(4_000_000)
    fat_at = 512
    first = struct.unpack_from("<I", data, 0x30)[0]
    far_sectors = [1000 * n for n in range(1, 30)]
    struct.pack_into("<I", data, fat_at + 4 * first, far_sectors[0])
    # the far sectors' FAT entries are past the one FAT sector: the chain ends there
    result, ranges = sniffed(bytes(data))
    assert result.content_type == OLE_STORAGE
    assert within_budget(ranges)


# --- cover art ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 4])
def test_an_mp3_whose_picture_follows_more_than_a_head_of_frames_has_cover_art(
    version: int,
) -> None:
    result, ranges = sniffed(samples.mp3(art=True, version=version))
    assert result == Sniffed("audio/mpeg", cover_art=True)
    assert len(ranges.reads) == 1


@pytest.mark.parametrize("version", [2, 3, 4])
def test_an_mp3_without_a_picture_has_no_cover_art(version: int) -> None:
    assert sniffed(samples.mp3(art=False, version=version))[0] == Sniffed("audio/mpeg")


def test_a_picture_frame_in_the_head_costs_no_read() -> None:
    result, ranges = sniffed(samples.mp3(art=True, lyrics=30))
    assert result.cover_art and ranges.reads == []


def test_an_id3_extended_header_is_skipped() -> None:
    frames = [samples.id3_frame(b"TIT2", b"\x03A song"), samples.picture_frame()]
    body = struct.pack(">IHI", 6, 0, 0) + b"".join(frames) + bytes(64)
    tag = b"ID3\x03\x00\x40" + bytes(samples.syncsafe(len(body))) + body
    assert sniffed(tag + samples.MP3_FRAME)[0] == Sniffed("audio/mpeg", cover_art=True)


def test_an_id3_frame_whose_size_lies_ends_the_walk() -> None:
    frames = [samples.id3_frame(b"TIT2", b"\x03A song"), samples.picture_frame()]
    data = bytearray(samples.id3_tag(frames) + samples.MP3_FRAME)
    struct.pack_into(">I", data, 10 + 4, 0x7FFFFFFF)  # TIT2 claims 2 GB
    result, ranges = sniffed(bytes(data))
    assert result == Sniffed("audio/mpeg")
    assert ranges.reads == []


def test_an_id3_tag_whose_size_lies_is_walked_within_budget() -> None:
    # a tag claiming 256 MB of frames, each a 20 KiB text frame: each jump is a read, until
    # the budget ends the walk
    frames = [samples.id3_frame(b"TXXX", bytes(20_000)) for _ in range(12)]
    data = bytearray(samples.id3_tag(frames, padding=0) + samples.MP3_FRAME)
    data[6:10] = bytes([0x7F, 0x7F, 0x7F, 0x7F])
    result, ranges = sniffed(bytes(data))
    assert result == Sniffed("audio/mpeg")
    assert len(ranges.reads) == MAX_EXTRA_READS and within_budget(ranges)


def test_an_m4a_with_its_art_after_the_media_data_has_cover_art_in_one_read() -> None:
    result, ranges = sniffed(samples.m4a(art=True, mdat=5_000_000))
    assert result == Sniffed("audio/mp4", cover_art=True)
    assert len(ranges.reads) == 1


def test_an_m4a_without_covr_has_no_cover_art() -> None:
    assert sniffed(samples.m4a(art=False))[0] == Sniffed("audio/mp4")


def test_an_m4a_with_its_movie_box_first_costs_no_read() -> None:
    data = samples.m4a(art=True, mdat=100)
    ftyp_end = 8 + 24
    moov_at = data.index(b"moov") - 4
    fast_start = data[:ftyp_end] + data[moov_at:] + data[ftyp_end:moov_at]
    result, ranges = sniffed(fast_start)
    assert result.cover_art and ranges.reads == []


@pytest.mark.parametrize(
    ("at", "size"),
    [(32, 0x7FFFFFFF), (32, 3), (32, 1)],
    ids=["mdat-past-the-end", "box-smaller-than-its-header", "largesize-past-the-end"],
)
def test_an_m4a_whose_box_sizes_lie_has_no_cover_art(at: int, size: int) -> None:
    data = bytearray(samples.m4a(art=True))
    struct.pack_into(">I", data, at, size)
    result, ranges = sniffed(bytes(data))
    assert result == Sniffed("audio/mp4")
    assert within_budget(ranges)


def test_a_flac_whose_picture_follows_its_padding_has_cover_art() -> None:
    result, ranges = sniffed(samples.flac(art=True, padding=100_000))
    assert result == Sniffed("audio/flac", cover_art=True)
    assert len(ranges.reads) == 1


def test_a_flac_without_a_picture_has_no_cover_art() -> None:
    assert sniffed(samples.flac(art=False))[0] == Sniffed("audio/flac")


def test_a_flac_whose_blocks_never_end_is_walked_within_budget() -> None:
    block = b"\x01" + (40_000).to_bytes(3, "big") + bytes(40_000)  # PADDING, never the last
    result, ranges = sniffed(b"fLaC" + block * 10)
    assert result == Sniffed("audio/flac")
    assert len(ranges.reads) == MAX_EXTRA_READS and within_budget(ranges)


def test_cover_art_decides_whether_audio_gets_a_thumbnail() -> None:
    with_art, _ = sniffed(samples.flac(art=True))
    without, _ = sniffed(samples.flac(art=False))
    thumbnail = JobType.THUMBNAIL_GENERATION
    assert thumbnail in job_types_for(with_art.content_type, cover_art=with_art.cover_art)
    assert thumbnail not in job_types_for(without.content_type, cover_art=without.cover_art)


# --- only the containers cost reads ---------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        samples.nef() + bytes(100_000),
        b"%PDF-1.7\n" + bytes(100_000),
        b"\x89PNG\r\n\x1a\n" + bytes(100_000),
        b"hello\n" * 20_000,
        zlib.compress(b"x") + bytes(100_000),
    ],
    ids=["raw", "pdf", "png", "text", "unknown"],
)
def test_a_file_that_is_no_zip_ole2_or_audio_costs_no_read(data: bytes) -> None:
    assert sniffed(data)[1].reads == []


# --- the reader's budget ------------------------------------------------------------------------


def test_the_reader_serves_the_head_and_what_it_fetched_without_reading_again() -> None:
    data = bytes(range(256)) * 1000
    ranges = BytesRanges(data)
    reader = BoundedReader(data[:100], ranges)
    assert reader.read(10, 20) == data[10:30]
    assert reader.read(5000, 10, window=1000) == data[5000:5010]
    assert reader.read(5500, 100) == data[5500:5600]
    assert ranges.reads == [(5000, 1000)]


def test_the_reader_stops_at_its_read_and_byte_budgets_and_at_the_end() -> None:
    data = bytes(1_000_000)
    ranges = BytesRanges(data)
    reader = BoundedReader(b"", ranges, max_reads=2, max_bytes=1000)
    assert len(reader.read(0, 600)) == 600
    assert reader.read(10_000, 600) == b""  # more than the bytes left: not read at all
    assert len(reader.read(20_000, 400)) == 400
    assert reader.read(30_000, 1) == b""  # no reads left
    assert reader.read(len(data) - 1, 10) == b""  # nothing the budget could pay for
    assert reader.read(-5, 10) == b"" and reader.read(len(data) + 10, 10) == b""
    assert len(ranges.reads) == 2


def test_without_ranges_the_reader_has_only_the_head() -> None:
    reader = BoundedReader(b"abcdef", None)
    assert reader.read(2, 2) == b"cd"
    assert reader.read(4, 10) == b""
