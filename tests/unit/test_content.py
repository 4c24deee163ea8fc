"""Specification: a file's content type comes from its bytes, and decides which jobs it gets.

Inputs are real files where the standard library can write them (zip, gzip, bz2, xz, wav, PNG via
zlib) and realistic hand-built headers elsewhere. Pillow, when installed, adds real images.
"""

from __future__ import annotations

import bz2
import gzip
import inspect
import io
import lzma
import random
import struct
import wave
import zipfile
import zlib

import pytest
from PIL import Image

from filejobs.domain.content import (
    ALREADY_COMPRESSED,
    SNIFF_BYTES,
    SNIFFED_TYPES,
    fits,
    job_types_for,
    sniff_content_type,
)
from filejobs.domain.job import JobType
from tests import content_samples as samples

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"

SCAN, DEDUP = JobType.VIRUS_SCAN, JobType.DEDUPLICATION_CHECK
THUMBNAIL, VIDEO_THUMBNAIL = JobType.THUMBNAIL_GENERATION, JobType.VIDEO_THUMBNAIL
PREVIEW, COMPRESSION = JobType.DOCUMENT_PREVIEW, JobType.COMPRESSION


# --- builders: real or realistic file heads -----------------------------------------------------


def png() -> bytes:
    """A complete, valid 1x1 RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte + one red pixel
    signature = b"\x89PNG\r\n\x1a\n"
    return signature + chunk(b"IHDR", ihdr) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def jpeg(app_marker: bytes = b"\xe0") -> bytes:
    """SOI, then a JFIF (APP0) or Exif (APP1) segment, quantisation table start, EOI."""
    if app_marker == b"\xe0":
        payload = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    else:
        payload = b"Exif\x00\x00" + b"II*\x00\x08\x00\x00\x00" + b"\x00" * 8
    segment = b"\xff" + app_marker + struct.pack(">H", len(payload) + 2) + payload
    return b"\xff\xd8" + segment + b"\xff\xdb\x00\x43\x00" + bytes(64) + b"\xff\xd9"


def gif(version: bytes) -> bytes:
    """The classic 1x1 transparent GIF."""
    return (
        b"GIF" + version + b"\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
        b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
    )


def riff(form: bytes, *chunks: tuple[bytes, bytes]) -> bytes:
    body = b"".join(kind + struct.pack("<I", len(data)) + data for kind, data in chunks)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + form + body


def webp() -> bytes:
    """A lossless 1x1 WebP."""
    return riff(b"WEBP", (b"VP8L", b"\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"))


def avi() -> bytes:
    avih = struct.pack("<14I", 33333, 0, 0, 0x10, 1, 0, 1, 0, 64, 48, 0, 0, 0, 0)
    hdrl = b"hdrl" + b"avih" + struct.pack("<I", len(avih)) + avih
    return riff(b"AVI ", (b"LIST", hdrl), (b"LIST", b"movi"))


def wav() -> bytes:
    """A real WAV file written by the standard library."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(1600))
    return buffer.getvalue()


def tiff(byte_order: bytes) -> bytes:
    """A TIFF header and a one-entry IFD (ImageWidth = 1), in either byte order."""
    endian = "<" if byte_order == b"II" else ">"
    header = byte_order + struct.pack(endian + "HI", 42, 8)
    ifd = struct.pack(endian + "H", 1) + struct.pack(endian + "HHII", 256, 4, 1, 1)
    return header + ifd + struct.pack(endian + "I", 0)


def bmp(dib_header_size: int = 40) -> bytes:
    """A 1x1 24-bit BMP with a BITMAPINFOHEADER (40) or an OS/2 BITMAPCOREHEADER (12)."""
    if dib_header_size == 12:
        dib = struct.pack("<IHHHH", 12, 1, 1, 1, 24)
    else:
        dib = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, 4, 2835, 2835, 0, 0)
    pixels = b"\x00\x00\xff\x00"  # one red pixel, padded to 4 bytes
    offset = 14 + len(dib)
    file_header = b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset)
    return file_header + dib + pixels


def pdf() -> bytes:
    return (
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"
        b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
        b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n"
        b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )


def ftyp(major: bytes, *compatible: bytes) -> bytes:
    """An ISO-BMFF `ftyp` box followed by an empty `mdat` box."""
    brands = major + b"\x00\x00\x02\x00" + b"".join(compatible)
    box = struct.pack(">I", 8 + len(brands)) + b"ftyp" + brands
    return box + struct.pack(">I", 8) + b"mdat"


def ebml(doctype: bytes) -> bytes:
    """A Matroska/WebM EBML header, then the start of a Segment."""

    def element(element_id: bytes, data: bytes) -> bytes:
        return element_id + bytes([0x80 | len(data)]) + data

    body = b"".join(
        (
            element(b"\x42\x86", b"\x01"),  # EBMLVersion
            element(b"\x42\xf7", b"\x01"),  # EBMLReadVersion
            element(b"\x42\xf2", b"\x04"),  # EBMLMaxIDLength
            element(b"\x42\xf3", b"\x08"),  # EBMLMaxSizeLength
            element(b"\x42\x82", doctype),  # DocType
            element(b"\x42\x87", b"\x04"),  # DocTypeVersion
            element(b"\x42\x85", b"\x02"),  # DocTypeReadVersion
        )
    )
    header = b"\x1a\x45\xdf\xa3" + bytes([0x80 | len(body)]) + body
    return header + b"\x18\x53\x80\x67\x01\xff\xff\xff\xff\xff\xff\xff"


def mpeg_ts(packets: int = 25) -> bytes:
    """PAT packets (sync byte 0x47, PID 0, stuffing), enough to fill more than a head."""
    packet = b"\x47\x40\x00\x10" + b"\x00" + b"\xff" * 183
    return packet * packets


def zip_archive(*, empty: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if not empty:
            archive.writestr("notes.txt", "hello " * 100)
    return buffer.getvalue()


def zstd() -> bytes:
    """A complete zstd frame holding nothing: magic, header, one empty last raw block."""
    return b"\x28\xb5\x2f\xfd" + b"\x20\x00" + b"\x01\x00\x00"


def seven_zip() -> bytes:
    next_header = struct.pack("<QQI", 0, 0, 0)
    return b"7z\xbc\xaf\x27\x1c\x00\x04" + struct.pack("<I", zlib.crc32(next_header)) + next_header


def rar(version: int) -> bytes:
    if version == 5:
        return b"Rar!\x1a\x07\x01\x00" + b"\x33\x92\xb5\xe5\x0a\x01\x05\x06\x00\x05\x01\x01\x80\x80"
    return b"Rar!\x1a\x07\x00" + b"\xcf\x90\x73\x00\x00\x0d\x00\x00\x00\x00\x00\x00\x00"


def id3_mp3() -> bytes:
    """An ID3v2.4 tag with a title frame, then an MPEG-1 layer III frame."""
    title = b"\x03" + b"A song"
    frame = b"TIT2" + struct.pack(">I", len(title)) + b"\x00\x00" + title
    tag = b"ID3\x04\x00\x00" + bytes([0, 0, 0, len(frame)]) + frame
    return tag + mp3_frame()


def mp3_frame() -> bytes:
    """A bare MPEG-1 layer III frame: 128 kbit/s, 44.1 kHz, 417 bytes."""
    return b"\xff\xfb\x90\x64" + bytes(413)


def ogg(first_packet: bytes) -> bytes:
    header = b"OggS\x00\x02" + bytes(8) + b"\x01\x00\x00\x00" + bytes(8)
    return header + bytes([1, len(first_packet)]) + first_packet


def flac() -> bytes:
    streaminfo = struct.pack(">HH", 4096, 4096) + bytes(6) + b"\x0a\xc4\x42\xf0" + bytes(20)
    return b"fLaC" + b"\x80" + len(streaminfo).to_bytes(3, "big") + streaminfo


def elf() -> bytes:
    ident = b"\x7fELF\x02\x01\x01\x00" + bytes(8)
    return ident + struct.pack("<HHIQQQIHHHHHH", 2, 0x3E, 1, 0x401000, 64, 0, 0, 64, 56, 1, 0, 0, 0)


def portable_executable() -> bytes:
    """A DOS stub whose e_lfanew points at a PE signature and a COFF header (x86-64)."""
    dos_header = b"MZ" + bytes(0x3A) + struct.pack("<I", 0x80)
    stub = b"This program cannot be run in DOS mode.\r\r\n$".ljust(0x80 - 0x40, b"\x00")
    coff = struct.pack("<HHIIIHH", 0x8664, 1, 0, 0, 0, 0xF0, 0x22)
    return dos_header + stub + b"PE\x00\x00" + coff


def garbage(size: int = 2048) -> bytes:
    """Deterministic random bytes (a seeded generator), which match no signature."""
    return random.Random(20240601).randbytes(size)


# --- sniffing: binary formats ---------------------------------------------------------------

BINARY_FORMATS = [
    pytest.param(jpeg(), "image/jpeg", id="jpeg-jfif"),
    pytest.param(jpeg(app_marker=b"\xe1"), "image/jpeg", id="jpeg-exif"),
    pytest.param(png(), "image/png", id="png"),
    pytest.param(gif(b"87a"), "image/gif", id="gif87a"),
    pytest.param(gif(b"89a"), "image/gif", id="gif89a"),
    pytest.param(webp(), "image/webp", id="webp"),
    pytest.param(tiff(b"II"), "image/tiff", id="tiff-little-endian"),
    pytest.param(tiff(b"MM"), "image/tiff", id="tiff-big-endian"),
    pytest.param(bmp(40), "image/bmp", id="bmp-infoheader"),
    pytest.param(bmp(12), "image/bmp", id="bmp-os2-coreheader"),
    pytest.param(ftyp(b"heic", b"mif1", b"heic"), "image/heic", id="heic"),
    pytest.param(ftyp(b"heix", b"mif1", b"heix"), "image/heic", id="heic-10bit"),
    pytest.param(ftyp(b"mif1", b"mif1", b"heic"), "image/heic", id="heic-under-generic-major"),
    pytest.param(ftyp(b"mif1", b"mif1", b"miaf"), "image/heif", id="heif-mif1"),
    pytest.param(ftyp(b"heif", b"mif1"), "image/heif", id="heif"),
    pytest.param(ftyp(b"avif", b"avif", b"mif1", b"miaf", b"MA1A"), "image/avif", id="avif"),
    pytest.param(ftyp(b"mif1", b"avif", b"mif1", b"miaf"), "image/avif", id="avif-under-mif1"),
    pytest.param(ftyp(b"avis", b"avis", b"msf1", b"iso8", b"mif1"), "image/avif", id="avifs"),
    pytest.param(ftyp(b"isom", b"isom", b"iso2", b"avc1", b"mp41"), "video/mp4", id="mp4-isom"),
    pytest.param(ftyp(b"mp42", b"mp42", b"isom"), "video/mp4", id="mp4-mp42"),
    pytest.param(ftyp(b"iso2", b"iso2", b"mp41"), "video/mp4", id="mp4-iso2"),
    pytest.param(ftyp(b"M4V ", b"M4V ", b"M4A ", b"mp42", b"isom"), "video/mp4", id="m4v"),
    pytest.param(ftyp(b"dash", b"iso6", b"mp41"), "video/mp4", id="mp4-dash"),
    pytest.param(ftyp(b"qt  ", b"qt  "), "video/quicktime", id="mov"),
    pytest.param(ftyp(b"3gp4", b"isom", b"3gp4"), "video/3gpp", id="3gp"),
    pytest.param(ftyp(b"M4A ", b"M4A ", b"mp42", b"isom"), "audio/mp4", id="m4a"),
    pytest.param(ebml(b"webm"), "video/webm", id="webm"),
    pytest.param(ebml(b"matroska"), "video/x-matroska", id="mkv"),
    pytest.param(avi(), "video/x-msvideo", id="avi"),
    pytest.param(mpeg_ts(), "video/mp2t", id="mpeg-ts"),
    pytest.param(pdf(), "application/pdf", id="pdf"),
    pytest.param(b"\r\n<junk>\r\n" + pdf(), "application/pdf", id="pdf-after-junk"),
    pytest.param(zip_archive(), "application/zip", id="zip"),
    pytest.param(zip_archive(empty=True), "application/zip", id="zip-empty"),
    pytest.param(gzip.compress(b"hello " * 100), "application/gzip", id="gzip"),
    pytest.param(zstd(), "application/zstd", id="zstd"),
    pytest.param(bz2.compress(b"hello " * 100), "application/x-bzip2", id="bzip2"),
    pytest.param(bz2.compress(b""), "application/x-bzip2", id="bzip2-empty-stream"),
    pytest.param(lzma.compress(b"hello " * 100), "application/x-xz", id="xz"),
    pytest.param(seven_zip(), "application/x-7z-compressed", id="7z"),
    pytest.param(rar(4), "application/vnd.rar", id="rar4"),
    pytest.param(rar(5), "application/vnd.rar", id="rar5"),
    pytest.param(id3_mp3(), "audio/mpeg", id="mp3-id3"),
    pytest.param(mp3_frame(), "audio/mpeg", id="mp3-bare-frame"),
    pytest.param(ogg(b"\x01vorbis" + bytes(23)), "audio/ogg", id="ogg-vorbis"),
    pytest.param(ogg(b"\x80theora" + bytes(35)), "video/ogg", id="ogg-theora"),
    pytest.param(wav(), "audio/wav", id="wav"),
    pytest.param(flac(), "audio/flac", id="flac"),
    pytest.param(elf(), "application/x-executable", id="elf"),
    pytest.param(portable_executable(), "application/vnd.microsoft.portable-executable", id="pe"),
    # Formats whose head says all (the containers that need more: test_sniff_containers.py)
    pytest.param(b"8BPS\x00\x01" + bytes(20), "image/vnd.adobe.photoshop", id="psd"),
    pytest.param(b"8BPS\x00\x02" + bytes(20), "image/vnd.adobe.photoshop", id="psb"),
    pytest.param(b"\xff\x0a\xfa\x7f\x01\x90\x08", "image/jxl", id="jpeg-xl-codestream"),
    pytest.param(
        b"\x00\x00\x00\x0cJXL \r\n\x87\n\x00\x00\x00\x14ftypjxl \x00\x00\x00\x00jxl ",
        "image/jxl",
        id="jpeg-xl-container",
    ),
    pytest.param(samples.cr2(), "image/x-canon-cr2", id="cr2"),
    pytest.param(samples.cr3(), "image/x-canon-cr3", id="cr3"),
    pytest.param(samples.nef(), "image/x-nikon-nef", id="nef"),
    pytest.param(samples.arw(), "image/x-sony-arw", id="arw"),
    pytest.param(samples.dng_from_nikon(), "image/x-adobe-dng", id="dng-keeps-nikon-make"),
    pytest.param(
        samples.tiff_with([(samples.MAKE, samples.ASCII, b"SONY\x00")], big_endian=True),
        "image/x-sony-arw",
        id="arw-big-endian-short-make-in-the-entry",
    ),
    pytest.param(b"FUJIFILMCCD-RAW 0201FF383501" + bytes(64), "image/x-fuji-raf", id="raf"),
    pytest.param(b"IIRO\x08\x00\x00\x00" + bytes(64), "image/x-olympus-orf", id="orf-iiro"),
    pytest.param(b"IIRS\x08\x00\x00\x00" + bytes(64), "image/x-olympus-orf", id="orf-iirs"),
    pytest.param(b"MMOR\x00\x00\x00\x08" + bytes(64), "image/x-olympus-orf", id="orf-mmor"),
    pytest.param(b"IIU\x00\x08\x00\x00\x00" + bytes(64), "image/x-panasonic-rw2", id="rw2"),
    pytest.param(samples.plain_tiff_by(b"Canon\x00"), "image/tiff", id="tiff-by-another-maker"),
    pytest.param(samples.ooxml(), samples.DOCX, id="docx-as-word-writes-it"),
    pytest.param(
        samples.odf("application/vnd.oasis.opendocument.text"),
        "application/vnd.oasis.opendocument.text",
        id="odt",
    ),
    pytest.param(samples.odf("application/epub+zip"), "application/epub+zip", id="epub"),
    pytest.param(
        samples.CompoundFile(directory_after_data=False).build(),
        "application/msword",
        id="doc-with-its-directory-in-the-head",
    ),
    pytest.param(b"{\\rtf1\\ansi\\deff0 {\\fonttbl}Hello}", "application/rtf", id="rtf"),
]


@pytest.mark.parametrize(("head", "expected"), BINARY_FORMATS)
def test_each_binary_format_is_sniffed_from_its_magic_bytes(head: bytes, expected: str) -> None:
    assert sniff_content_type(head) == expected


@pytest.mark.parametrize(("head", "expected"), BINARY_FORMATS)
def test_a_head_of_sniff_bytes_is_enough_whatever_follows(head: bytes, expected: str) -> None:
    # given the file goes on well past the head
    whole_file = head + garbage(3 * SNIFF_BYTES)
    # when only the head a caller would read is sniffed
    sniffed = sniff_content_type(whole_file[:SNIFF_BYTES])
    # then the type is the same, and passing the whole file changes nothing
    assert sniffed == expected
    assert sniff_content_type(whole_file) == expected


def test_a_png_is_sniffed_as_image_png_whatever_its_name() -> None:
    # The sniffer takes bytes and nothing else: a name or a declared type cannot reach it.
    assert list(inspect.signature(sniff_content_type).parameters) == ["head"]
    assert sniff_content_type(png()) == "image/png"


@pytest.mark.parametrize(
    ("pillow_format", "mime"),
    [
        ("JPEG", "image/jpeg"),
        ("PNG", "image/png"),
        ("GIF", "image/gif"),
        ("TIFF", "image/tiff"),
        ("BMP", "image/bmp"),
        ("WEBP", "image/webp"),
    ],
)
def test_a_real_image_written_by_pillow_is_sniffed(pillow_format: str, mime: str) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format=pillow_format)
    assert sniff_content_type(buffer.getvalue()[:SNIFF_BYTES]) == mime


def test_empty_input_is_application_x_empty() -> None:
    assert sniff_content_type(b"") == "application/x-empty"


def test_binary_garbage_is_application_octet_stream() -> None:
    assert sniff_content_type(garbage()) == "application/octet-stream"


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"\x00\x01\x02\x03", id="nul-bytes"),
        pytest.param(b"RIFF\x10\x00\x00\x00XXXX", id="riff-unknown-form"),
        pytest.param(ftyp(b"qoi ", b"qoi "), id="ftyp-unknown-brand"),  # crx is CR3 now
        pytest.param(b"BM" + bytes(60), id="bm-without-plausible-header"),
        pytest.param(b"MZ" + bytes(200), id="mz-without-pe-signature"),
        pytest.param(b"\xff\xfb\xf0\x00" + bytes(100), id="mp3-sync-with-bad-bitrate"),
        pytest.param(mpeg_ts(packets=2)[:300], id="too-few-ts-packets"),
    ],
)
def test_a_near_miss_is_not_mistaken_for_the_format(head: bytes) -> None:
    assert sniff_content_type(head) == "application/octet-stream"


def test_pdf_marker_beyond_the_first_1024_bytes_does_not_make_a_pdf() -> None:
    # given a plain text file that quotes a PDF header far down
    head = b"notes\n" * 200 + b"A PDF starts with %PDF-1.7 and ends with %%EOF.\n"
    # then it is text, not a PDF
    assert sniff_content_type(head) == "text/plain"


# --- sniffing: text -----------------------------------------------------------------------------

CSV_TEXT = b"id,name,email\n1,Ada,ada@example.com\n2,Linus,linus@example.com\n"
TEXT_FORMATS = [
    pytest.param(b'{"name": "Ada", "tags": ["x"]}\n', "application/json", id="json-object"),
    pytest.param(b'  \n[{"id": 1}, {"id": 2}]', "application/json", id="json-array"),
    pytest.param(b"[1, 2, 3]", "application/json", id="json-number-array"),
    pytest.param(b'{"a": 1}\n{"a": 2}\n', "application/json", id="json-lines"),
    pytest.param(CSV_TEXT, "text/csv", id="csv"),
    pytest.param(b'name,quote\n"Doe, Jane","hi, there"\nBob,yo\n', "text/csv", id="csv-quoted"),
    pytest.param(b"a,b\r\n1,2", "text/csv", id="csv-crlf-no-final-newline"),
    pytest.param(b"id\tname\n1\tAda\n2\tLinus\n", "text/tab-separated-values", id="tsv"),
    pytest.param(b"# Title\n\nSome prose.\n", "text/markdown", id="markdown-heading"),
    pytest.param(b"Intro\n\n## Usage\n\nRun it.\n", "text/markdown", id="markdown-subheading"),
    pytest.param(b"Example:\n\n```python\nprint(1)\n```\n", "text/markdown", id="markdown-fence"),
    pytest.param(
        b"Links:\n- [docs](https://example.com/docs)\n- [api](https://example.com/api)\n"
        b"- see [faq](faq.md)\n",
        "text/markdown",
        id="markdown-list-and-links",
    ),
    pytest.param(b"Title\n=====\n\nProse.\n", "text/markdown", id="markdown-setext-heading"),
    pytest.param(b"Hello world.\nThis is just text.\n", "text/plain", id="plain"),
    pytest.param(
        b"Steps:\n\t- one\n\t- two\n\t- three\n", "text/plain", id="tab-indented-list-is-plain"
    ),
    pytest.param(b"[section]\nkey = value\n", "text/plain", id="ini-is-not-json"),
    pytest.param(b"#!/bin/sh\n# comment\necho hi\n", "text/plain", id="shell-script"),
    pytest.param(b"MZ is a postal code prefix.\n", "text/plain", id="text-starting-with-mz"),
    pytest.param(b"ID3 tags hold titles.\n", "text/plain", id="text-starting-with-id3"),
    pytest.param("Grüße, 日本語\n".encode(), "text/plain", id="plain-utf8-multibyte"),
    pytest.param(b"   \n\n", "text/plain", id="whitespace-only"),
    pytest.param(b"\x1b[32mOK\x1b[0m all tests passed in the ANSI log\n", "text/plain", id="ansi"),
    # SVG: an XML document whose root element is svg, whatever prolog comes first
    pytest.param(
        b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect/></svg>',
        "image/svg+xml",
        id="svg-bare",
    ),
    pytest.param(
        b'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        b"<!-- Created with Inkscape (http://www.inkscape.org/) -->\n"
        b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
        b'"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd" [\n'
        b'  <!ENTITY ns_svg "http://www.w3.org/2000/svg">\n]>\n'
        b'<?xml-stylesheet href="style.css" type="text/css"?>\n'
        b'<svg\n   xmlns="http://www.w3.org/2000/svg"\n   version="1.1">\n<g/></svg>\n',
        "image/svg+xml",
        id="svg-after-declaration-comment-doctype-and-stylesheet",
    ),
    pytest.param(
        b'<?xml version="1.0"?><svg:svg xmlns:svg="http://www.w3.org/2000/svg"/>',
        "image/svg+xml",
        id="svg-namespaced",
    ),
    pytest.param(
        b'<?xml version="1.0"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        b'<body><svg xmlns="http://www.w3.org/2000/svg"/></body></html>\n',
        "text/plain",
        id="xhtml-with-inline-svg-is-not-svg",
    ),
    pytest.param(
        b'<?xml version="1.0"?>\n<!-- <svg> drawings go elsewhere -->\n<note><to>Ada</to></note>\n',
        "text/plain",
        id="other-xml-is-not-svg",
    ),
    pytest.param(b"<svgfont/>\n", "text/plain", id="an-element-named-svg-something-is-not-svg"),
]


@pytest.mark.parametrize(("head", "expected"), TEXT_FORMATS)
def test_utf8_text_is_classified_by_its_shape(head: bytes, expected: str) -> None:
    assert sniff_content_type(head) == expected


@pytest.mark.parametrize(("head", "expected"), TEXT_FORMATS)
def test_a_utf8_byte_order_mark_does_not_change_the_type(head: bytes, expected: str) -> None:
    assert sniff_content_type(b"\xef\xbb\xbf" + head) == expected


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_text_with_a_byte_order_mark_is_text_plain(encoding: str) -> None:
    bom = "\ufeff".encode(encoding)
    assert sniff_content_type(bom + "Hello, wörld\n".encode(encoding)) == "text/plain"


def test_utf16_text_cut_in_the_middle_of_a_code_unit_is_still_text() -> None:
    head = ("\ufeff" + "text line\n" * 500).encode("utf-16-le")[: SNIFF_BYTES - 1]
    assert sniff_content_type(head) == "text/plain"


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_multibyte_character_cut_at_the_end_of_the_head_still_sniffs_as_text(cut: int) -> None:
    # given a UTF-8 text file whose 4-byte emoji straddles the SNIFF_BYTES boundary
    emoji = "😀".encode()
    prefix = b"a" * (SNIFF_BYTES - cut)
    whole_file = prefix + emoji + b" and more text\n"
    # when only the head is read
    head = whole_file[:SNIFF_BYTES]
    # then the cut character is forgiven
    assert head.endswith(emoji[:cut])
    assert sniff_content_type(head) == "text/plain"


def test_a_broken_utf8_sequence_inside_the_head_is_not_text() -> None:
    head = b"abc\xe2\x28\xa1def" * 10  # an invalid continuation byte, not a cut at the end
    assert sniff_content_type(head) == "application/octet-stream"


def test_text_with_many_control_characters_is_not_text() -> None:
    head = b"abc\x01\x02\x03def\x04\x05" * 50
    assert sniff_content_type(head) == "application/octet-stream"


def test_a_csv_whose_last_line_is_cut_by_the_head_is_still_csv() -> None:
    # given a long CSV read up to SNIFF_BYTES, so its last line is cut mid-row
    rows = b"".join(b"%d,name %d,x@example.com\n" % (i, i) for i in range(1000))
    head = (b"id,name,email\n" + rows)[:SNIFF_BYTES]
    assert not head.endswith(b"\n")
    assert sniff_content_type(head) == "text/csv"


def test_a_single_line_with_commas_is_not_csv() -> None:
    assert sniff_content_type(b"one, two, three\n") == "text/plain"


def test_lines_with_different_comma_counts_are_not_csv() -> None:
    assert sniff_content_type(b"a,b\n1,2,3\n4\n") == "text/plain"


def test_the_eicar_test_string_sniffs_as_text_plain() -> None:
    # The scanner, not the sniffer, must catch it: to the sniffer it is just ASCII.
    assert sniff_content_type(EICAR) == "text/plain"


# --- the rule table -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("image/jpeg", (SCAN, DEDUP, THUMBNAIL)),
        ("image/png", (SCAN, DEDUP, THUMBNAIL)),
        ("image/gif", (SCAN, DEDUP, THUMBNAIL)),
        ("image/webp", (SCAN, DEDUP, THUMBNAIL)),
        ("image/heic", (SCAN, DEDUP, THUMBNAIL)),
        ("image/heif", (SCAN, DEDUP, THUMBNAIL)),
        ("image/avif", (SCAN, DEDUP, THUMBNAIL)),
        ("image/tiff", (SCAN, DEDUP, THUMBNAIL, COMPRESSION)),
        ("image/bmp", (SCAN, DEDUP, THUMBNAIL, COMPRESSION)),
        ("video/mp4", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("video/quicktime", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("video/webm", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("video/x-msvideo", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        # A video type no demuxer is allowed for gets no poster job (that job could only fail).
        ("video/some-future-codec", (SCAN, DEDUP)),
        ("application/pdf", (SCAN, DEDUP, PREVIEW, COMPRESSION)),
        ("text/plain", (SCAN, DEDUP, PREVIEW, COMPRESSION)),
        ("text/markdown", (SCAN, DEDUP, PREVIEW, COMPRESSION)),
        ("text/csv", (SCAN, DEDUP, PREVIEW, COMPRESSION)),
        ("text/tab-separated-values", (SCAN, DEDUP, PREVIEW, COMPRESSION)),
        ("application/json", (SCAN, DEDUP, PREVIEW, COMPRESSION)),
        # Audio gets video_thumbnail: its waveform and duration (processors/audio_waveform.py).
        ("audio/wav", (SCAN, DEDUP, VIDEO_THUMBNAIL, COMPRESSION)),
        ("audio/mpeg", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("audio/flac", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("audio/ogg", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("audio/mp4", (SCAN, DEDUP, VIDEO_THUMBNAIL)),
        ("application/zip", (SCAN, DEDUP)),
        ("application/zstd", (SCAN, DEDUP)),
        ("application/x-executable", (SCAN, DEDUP, COMPRESSION)),
        ("application/vnd.microsoft.portable-executable", (SCAN, DEDUP, COMPRESSION)),
        ("application/octet-stream", (SCAN, DEDUP, COMPRESSION)),
        ("application/x-empty", (SCAN, DEDUP)),
    ],
)
def test_the_rule_table(content_type: str, expected: tuple[JobType, ...]) -> None:
    assert job_types_for(content_type) == expected


@pytest.mark.parametrize(
    "content_type",
    [
        "application/vnd.ms-word.document.macroEnabled.12",
        "application/vnd.ms-excel.sheet.macroenabled.12",
        "APPLICATION/VND.MS-POWERPOINT.PRESENTATION.MACROENABLED.12",
    ],
)
def test_a_type_registered_in_mixed_case_is_routed_whatever_its_case(content_type: str) -> None:
    # `media_type` lowers the type; the sets spell it as IANA does
    assert job_types_for(content_type) == (SCAN, DEDUP, PREVIEW)
    assert content_type.lower() in ALREADY_COMPRESSED


def test_a_jpeg_gets_a_thumbnail_and_no_compression() -> None:
    assert job_types_for(sniff_content_type(jpeg())) == (SCAN, DEDUP, THUMBNAIL)


def test_a_tiff_gets_a_thumbnail_and_compression() -> None:
    jobs = job_types_for(sniff_content_type(tiff(b"II")))
    assert jobs == (SCAN, DEDUP, THUMBNAIL, COMPRESSION)


def test_an_mp4_gets_a_video_thumbnail_and_no_compression() -> None:
    jobs = job_types_for(sniff_content_type(ftyp(b"isom", b"isom", b"mp41")))
    assert jobs == (SCAN, DEDUP, VIDEO_THUMBNAIL)


def test_a_pdf_gets_a_document_preview_and_compression() -> None:
    assert job_types_for(sniff_content_type(pdf())) == (SCAN, DEDUP, PREVIEW, COMPRESSION)


def test_an_empty_file_gets_only_the_scan_and_the_dedup_check() -> None:
    assert job_types_for(sniff_content_type(b"")) == (SCAN, DEDUP)


def test_the_eicar_file_is_scanned_before_anything_parses_it() -> None:
    assert job_types_for(sniff_content_type(EICAR))[0] is SCAN


def test_parameters_and_case_in_the_content_type_are_ignored() -> None:
    assert job_types_for("Text/CSV; charset=utf-8") == job_types_for("text/csv")


@pytest.mark.parametrize(("head", "_expected"), BINARY_FORMATS + TEXT_FORMATS)
def test_every_sniffed_file_starts_with_virus_scan_then_dedup(head: bytes, _expected: str) -> None:
    jobs = job_types_for(sniff_content_type(head))
    # then the scan runs before any parser, the dedup check next, and no job is listed twice
    assert jobs[:2] == (SCAN, DEDUP)
    assert len(set(jobs)) == len(jobs)


@pytest.mark.parametrize(("head", "_expected"), BINARY_FORMATS + TEXT_FORMATS)
def test_type_specific_jobs_follow_the_enum_order(head: bytes, _expected: str) -> None:
    specific = job_types_for(sniff_content_type(head))[2:]
    order = list(JobType)
    assert list(specific) == sorted(specific, key=order.index)


def test_every_sniffed_video_type_counts_as_already_compressed() -> None:
    expected_types = {str(param.values[1]) for param in BINARY_FORMATS}
    videos = {mime for mime in expected_types if mime.startswith("video/")}
    assert videos
    assert videos <= ALREADY_COMPRESSED


@pytest.mark.parametrize(("head", "_expected"), BINARY_FORMATS + TEXT_FORMATS)
def test_every_job_ingest_gives_a_file_fits_its_content(head: bytes, _expected: str) -> None:
    content_type = sniff_content_type(head)
    assert all(fits(job, content_type) for job in job_types_for(content_type))


@pytest.mark.parametrize(
    ("job", "content_type"),
    [
        (THUMBNAIL, "application/pdf"),
        (THUMBNAIL, "application/postscript"),  # EPS: Pillow hands it to Ghostscript
        (THUMBNAIL, "video/mp4"),
        (VIDEO_THUMBNAIL, "application/vnd.apple.mpegurl"),  # an HLS playlist: URLs to fetch
        (VIDEO_THUMBNAIL, "application/octet-stream"),
        (VIDEO_THUMBNAIL, "image/gif"),
        (PREVIEW, "image/png"),
        (PREVIEW, "application/zip"),
    ],
)
def test_a_decoding_job_does_not_fit_content_its_decoder_is_not_for(
    job: JobType, content_type: str
) -> None:
    assert not fits(job, content_type)


@pytest.mark.parametrize("job", [SCAN, DEDUP, COMPRESSION])
def test_a_job_that_reads_bytes_as_bytes_fits_any_content(job: JobType) -> None:
    for content_type in ("application/octet-stream", "image/jpeg", "video/mp4", "text/plain"):
        assert fits(job, content_type)


def test_fitting_ignores_parameters_and_case() -> None:
    assert fits(PREVIEW, "Text/CSV; charset=utf-8")
    assert not fits(THUMBNAIL, "Application/PDF; version=1.7")


@pytest.mark.parametrize(("head", "expected"), BINARY_FORMATS + TEXT_FORMATS)
def test_every_type_sniffed_is_one_the_readme_table_lists(head: bytes, expected: str) -> None:
    assert expected in SNIFFED_TYPES
