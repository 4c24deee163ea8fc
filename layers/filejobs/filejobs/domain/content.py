"""Content type from magic bytes only, and the jobs each content type gets.

The MIME type is read from the file's first bytes, never from its name or a declared
Content-Type: both are chosen by the uploader and prove nothing. Pure Python, no I/O of its own:
the few formats that say what they are away from their head (a ZIP's members, an OLE2 file's
streams, an audio file's cover art) are read through a `ByteRanges` port on a strict budget
(domain/byte_ranges.py), by `sniff`.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from filejobs.domain.byte_ranges import BoundedReader, ByteRanges, BytesRanges
from filejobs.domain.camera_raw import CR3, camera_raw_type
from filejobs.domain.containers import (
    OLE2_DOCUMENT_TYPES,
    OLE2_SIGNATURE,
    ZIP_DOCUMENT_TYPES,
    ole2_document_type,
    zip_document_type,
)
from filejobs.domain.cover_art import has_cover_art
from filejobs.domain.job import JobType

SNIFF_BYTES = 4096  # how many leading bytes callers should read

EMPTY = "application/x-empty"
OCTET_STREAM = "application/octet-stream"
ZIP = "application/zip"
# An OLE2 compound file that is no Word, Excel or PowerPoint document (an MSI installer, an
# Outlook message, Thumbs.db), or one too malformed to tell: named like a ZIP that is no
# document is `application/zip`, rather than lost among unknown bytes.
OLE_STORAGE = "application/x-ole-storage"

# --- binary formats -------------------------------------------------------------------------

# Fixed signatures at offset 0. Checked before anything else.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"II+\x00", "image/tiff"),  # BigTIFF
    (b"MM\x00+", "image/tiff"),  # BigTIFF
    (b"PK\x03\x04", ZIP),
    (b"PK\x05\x06", "application/zip"),  # empty archive: end-of-central-directory only
    (b"PK\x07\x08", "application/zip"),  # spanned archive
    (b"\x1f\x8b\x08", "application/gzip"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07\x00", "application/vnd.rar"),  # RAR 1.5 - 4.x
    (b"Rar!\x1a\x07\x01\x00", "application/vnd.rar"),  # RAR 5
    (b"fLaC", "audio/flac"),
    (b"\x7fELF", "application/x-executable"),
    (b"8BPS\x00\x01", "image/vnd.adobe.photoshop"),  # PSD
    (b"8BPS\x00\x02", "image/vnd.adobe.photoshop"),  # PSB, the large-document format
    (b"\xff\x0a", "image/jxl"),  # a bare JPEG XL codestream
    (b"\x00\x00\x00\x0cJXL \r\n\x87\n", "image/jxl"),  # JPEG XL in its ISO-BMFF container
    (OLE2_SIGNATURE, OLE_STORAGE),  # which document it holds: containers.py, with ranges
)

_RIFF_FORMS = {b"WEBP": "image/webp", b"AVI ": "video/x-msvideo", b"WAVE": "audio/wav"}

# ISO-BMFF (`ftyp` box) brands. Image brands win over any video brand listed beside them.
_IMAGE_BRANDS = {
    b"avif": "image/avif",
    b"avis": "image/avif",
    b"heic": "image/heic",
    b"heix": "image/heic",
    b"heim": "image/heic",
    b"heis": "image/heic",
    b"mif1": "image/heif",
    b"msf1": "image/heif",
    b"heif": "image/heif",
}
_IMAGE_PRIORITY = ("image/avif", "image/heic", "image/heif")
_AV_BRANDS = {
    b"qt  ": "video/quicktime",
    b"M4A ": "audio/mp4",
    b"M4B ": "audio/mp4",
    **dict.fromkeys(
        (b"isom", b"iso2", b"iso4", b"iso5", b"iso6", b"mp41", b"mp42", b"avc1", b"dash"),
        "video/mp4",
    ),
    **dict.fromkeys((b"M4V ", b"M4VH", b"M4VP", b"mmp4", b"f4v "), "video/mp4"),
}

_BMP_DIB_HEADER_SIZES = frozenset({12, 16, 40, 52, 56, 64, 108, 124})
_BZIP2_FIRST_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")  # a compressed block, or end of stream
_MP3_SECOND_BYTES = frozenset({0xFB, 0xFA, 0xF3, 0xF2, 0xE3, 0xE2})  # MPEG 1/2/2.5 layer III
_TS_PACKET = 188
_TS_MIN_PACKETS = 3
_PDF_WINDOW = 1024  # readers accept junk before the header


def _u32le(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 4], "little")


def _by_signature(head: bytes) -> str | None:
    return next((mime for magic, mime in _SIGNATURES if head.startswith(magic)), None)


def _riff(head: bytes) -> str | None:
    if not head.startswith(b"RIFF"):
        return None
    return _RIFF_FORMS.get(head[8:12])


def _ftyp_brands(head: bytes) -> list[bytes]:
    if head[4:8] != b"ftyp" or len(head) < 12:
        return []
    box_size = int.from_bytes(head[:4], "big") or len(head)  # 0: the box runs to the end
    end = min(box_size, len(head))
    compatible = [head[i : i + 4] for i in range(16, end - 3, 4)]
    return [head[8:12], *compatible]  # the major brand first


def _brand_type(brand: bytes) -> str | None:
    if brand.startswith(b"3gp"):
        return "video/3gpp"
    if brand.startswith(b"3g2"):
        return "video/3gpp2"
    return _IMAGE_BRANDS.get(brand) or _AV_BRANDS.get(brand)


def _iso_bmff(head: bytes) -> str | None:
    if head[4:12] == b"ftypcrx ":  # Canon's CR3 is ISO-BMFF too; its major brand says which
        return CR3
    types = [_brand_type(brand) for brand in _ftyp_brands(head)]
    image = next((mime for mime in _IMAGE_PRIORITY if mime in types), None)
    return image or next((mime for mime in types if mime), None)


def _matroska(head: bytes) -> str | None:
    if not head.startswith(b"\x1a\x45\xdf\xa3"):
        return None
    doctype_at = head.find(b"\x42\x82")  # the EBML DocType element: an id, a size, the name
    is_webm = doctype_at >= 0 and b"webm" in head[doctype_at + 2 : doctype_at + 12]
    return "video/webm" if is_webm else "video/x-matroska"


def _bmp(head: bytes) -> str | None:
    if not head.startswith(b"BM") or len(head) < 18:
        return None
    dib_size = _u32le(head, 14)
    plausible = dib_size in _BMP_DIB_HEADER_SIZES and _u32le(head, 10) >= 14 + dib_size
    return "image/bmp" if plausible else None


def _bzip2(head: bytes) -> str | None:
    valid = re.match(rb"BZh[1-9]", head) and head[4:10] in _BZIP2_FIRST_BLOCKS
    return "application/x-bzip2" if valid else None


def _ogg(head: bytes) -> str | None:
    if not head.startswith(b"OggS"):
        return None
    return "video/ogg" if b"\x80theora" in head[:128] else "audio/ogg"


def _portable_executable(head: bytes) -> str | None:
    if not head.startswith(b"MZ") or len(head) < 0x40:
        return None
    pe_at = _u32le(head, 0x3C)  # e_lfanew: where the PE header starts
    is_pe = head[pe_at : pe_at + 4] == b"PE\x00\x00"
    return "application/vnd.microsoft.portable-executable" if is_pe else None


def _mpeg_ts(head: bytes) -> str | None:
    starts = range(0, min(len(head), _TS_PACKET * 8), _TS_PACKET)
    synced = len(starts) >= _TS_MIN_PACKETS and all(head[i] == 0x47 for i in starts)
    return "video/mp2t" if synced else None


def _id3(head: bytes) -> str | None:
    """An ID3v2 tag: "ID3", version 2-4, flags, then a 28-bit "syncsafe" size."""
    valid = re.match(rb"ID3[\x02-\x04][\x00-\xfe][\x00-\xff][\x00-\x7f]{4}", head)
    return "audio/mpeg" if valid else None


def _mp3_frame(head: bytes) -> str | None:
    if len(head) < 4 or head[0] != 0xFF or head[1] not in _MP3_SECOND_BYTES:
        return None
    bitrate, sample_rate = head[2] >> 4, (head[2] >> 2) & 0b11
    return "audio/mpeg" if bitrate not in (0, 15) and sample_rate != 3 else None


def _pdf(head: bytes) -> str | None:
    return "application/pdf" if b"%PDF-" in head[:_PDF_WINDOW] else None


# --- text -------------------------------------------------------------------------------------

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b")  # layout, and ESC for ANSI-coloured logs
_MAX_CONTROL_RATIO = 0.01
_TABLE_SAMPLE_LINES = 20
_MARKDOWN_MIN_MARKED_LINES = 3

_JSON_START = re.compile(
    r"\A\s*(?:\{\s*(?:\"|\}|\Z)|\[\s*(?:[\[{\"\]\-0-9]|true\b|false\b|null\b|\Z))"
)
# A heading ("# Title", or a line underlined with === / ---), or a fenced code block.
_MARKDOWN_BLOCK = re.compile(r"^(?:#{1,6} +\S|```|~~~)|^\w.*\n(?:={3,}|-{3,}) *$", re.MULTILINE)
_MARKDOWN_LIST = re.compile(r"^ {0,3}(?:[-*+]|\d{1,3}[.)]) +\S")  # deeper indents: code
_MARKDOWN_LINK = re.compile(r"\[[^\]\n]+\]\([^)\s]+\)")


def _decode(data: bytes, encoding: str) -> str | None:
    """Decode, tolerating only a multi-byte character cut off by the end of the head."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        cut_at_end = error.reason == "unexpected end of data" and error.end == len(data)
        return data[: error.start].decode(encoding) if cut_at_end else None


def _is_texty(text: str) -> bool:
    controls = sum(
        1 for char in text if unicodedata.category(char) == "Cc" and char not in _ALLOWED_CONTROLS
    )
    return "\x00" not in text and controls <= len(text) * _MAX_CONTROL_RATIO


def _table_delimiter(text: str, truncated: bool) -> str | None:
    lines = text.splitlines()
    if truncated and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # the last line was cut by the end of the head
    sample = lines[:_TABLE_SAMPLE_LINES]
    while sample and not sample[-1].strip():
        sample.pop()
    for delimiter in ("\t", ","):
        try:
            widths = [len(row) for row in csv.reader(sample, delimiter=delimiter)]
        except csv.Error:
            continue
        if len(widths) >= 2 and len(set(widths)) == 1 and widths[0] > 1:
            return delimiter
    return None


def _looks_like_markdown(text: str) -> bool:
    if text.startswith("#!"):  # a script's shebang, not a heading
        return False
    if _MARKDOWN_BLOCK.search(text):
        return True
    marked = (
        line
        for line in text.splitlines()
        if _MARKDOWN_LIST.match(line) or _MARKDOWN_LINK.search(line)
    )
    return sum(1 for _ in marked) >= _MARKDOWN_MIN_MARKED_LINES


def _classify_text(text: str, truncated: bool) -> str:
    if _JSON_START.match(text):
        return "application/json"
    delimiter = _table_delimiter(text, truncated)
    if delimiter is not None:
        return "text/tab-separated-values" if delimiter == "\t" else "text/csv"
    return "text/markdown" if _looks_like_markdown(text) else "text/plain"


def _utf16_text(head: bytes) -> str | None:
    encoding = _UTF16_BOMS.get(head[:2])
    if encoding is None:
        return None
    body = head[2:]
    text = _decode(body[: len(body) - len(body) % 2], encoding)
    return "text/plain" if text is not None and _is_texty(text) else None


def _utf8_text(head: bytes) -> str | None:
    body = head.removeprefix(_UTF8_BOM)
    text = None if b"\x00" in body else _decode(body, "utf-8")
    if text is None or not _is_texty(text):
        return None
    return _classify_text(text, truncated=len(head) >= SNIFF_BYTES)


def _rtf(head: bytes) -> str | None:
    return "application/rtf" if head.startswith(b"{\\rtf") else None


# What may precede an XML document's root element: white space, the XML declaration and other
# processing instructions, comments, a DOCTYPE (with its internal subset).
_XML_PROLOG_ITEM = re.compile(
    rb"\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[[^\]]*\])?\s*>", re.DOTALL
)
_SVG_ROOT = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?svg[\s/>]")  # `svg` or a prefixed `svg:svg`
_MAX_PROLOG_ITEMS = 64


def _svg(head: bytes) -> str | None:
    """An XML document whose root element is `svg` (an XHTML page with inline SVG is not)."""
    body = head.removeprefix(_UTF8_BOM)
    position = 0
    for _ in range(_MAX_PROLOG_ITEMS):
        item = _XML_PROLOG_ITEM.match(body, position)
        if item is None:
            break
        position = item.end()
    return "image/svg+xml" if _SVG_ROOT.match(body, position) else None


# Most specific first; text last, since almost any short binary header could pass for text.
_DETECTORS: tuple[Callable[[bytes], str | None], ...] = (
    camera_raw_type,  # before the TIFF signature most RAW formats start with
    _by_signature,
    _riff,
    _iso_bmff,
    _matroska,
    _bmp,
    _bzip2,
    _ogg,
    _portable_executable,
    _mpeg_ts,
    _id3,
    _mp3_frame,
    _rtf,
    _svg,  # before the PDF marker, which a drawing's text could contain
    _pdf,
    _utf16_text,
    _utf8_text,
)


def _coarse_type(head: bytes) -> str:
    if not head:
        return EMPTY
    found = (detect(head) for detect in _DETECTORS)
    return next((mime for mime in found if mime), OCTET_STREAM)


@dataclass(frozen=True)
class Sniffed:
    """What the bytes say a file is: its content type, and for audio whether it carries art."""

    content_type: str
    cover_art: bool = False


def sniff(head: bytes, ranges: ByteRanges | None = None) -> Sniffed:
    """The content type of a file from its first `SNIFF_BYTES` bytes and, for ZIP, OLE2 and
    audio files only, a few ranged reads of the rest (`ranges`, at most `MAX_EXTRA_READS` reads
    of `MAX_EXTRA_BYTES` in all). Without ranges, what the head alone shows."""
    head = head[:SNIFF_BYTES]
    coarse = _coarse_type(head)
    if ranges is None and len(head) < SNIFF_BYTES:
        ranges = BytesRanges(head)  # a head shorter than asked for is the whole file
    reader = BoundedReader(head, ranges)
    if coarse == ZIP:
        return Sniffed(zip_document_type(reader) or ZIP)
    if coarse == OLE_STORAGE:
        return Sniffed(ole2_document_type(reader) or OLE_STORAGE)
    if coarse in AUDIO_WITH_ART:
        return Sniffed(coarse, cover_art=has_cover_art(coarse, reader))
    return Sniffed(coarse)


def sniff_content_type(head: bytes) -> str:
    """The MIME type of a file, from its first bytes (read `SNIFF_BYTES` of them) alone."""
    return sniff(head).content_type


# --- which jobs a content type gets ------------------------------------------------------------

SVG = "image/svg+xml"
PHOTOSHOP = "image/vnd.adobe.photoshop"  # PSD and PSB (its large-document version)
JPEG_XL = "image/jxl"

# Camera RAW, each by its own markers (not as the TIFF or ISO-BMFF it is built on).
RAW_IMAGES = frozenset(
    {
        "image/x-canon-cr2",
        "image/x-canon-cr3",
        "image/x-nikon-nef",
        "image/x-sony-arw",
        "image/x-fuji-raf",
        "image/x-olympus-orf",
        "image/x-panasonic-rw2",
        "image/x-adobe-dng",
    }
)

# Audio that may carry cover art (ID3 APIC, MP4 `covr`, FLAC PICTURE): its thumbnail is the art.
AUDIO_WITH_ART = frozenset({"audio/mpeg", "audio/mp4", "audio/flac"})
# Every audio type the sniffer gives, each with an FFmpeg demuxer: video_thumbnail draws its
# waveform (processors/video.py's AUDIO_DEMUXERS).
AUDIO_TYPES = frozenset({*AUDIO_WITH_ART, "audio/ogg", "audio/wav"})

# Office documents: converted to PDF by LibreOffice, then previewed as a PDF.
OOXML_DOCUMENTS = frozenset(
    {
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
        "application/vnd.ms-word.document.macroEnabled.12",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.template",
        "application/vnd.ms-excel.sheet.macroEnabled.12",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
        "application/vnd.openxmlformats-officedocument.presentationml.template",
        "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
    }
)
ODF_DOCUMENTS = frozenset(
    {
        "application/vnd.oasis.opendocument.text",
        "application/vnd.oasis.opendocument.spreadsheet",
        "application/vnd.oasis.opendocument.presentation",
        "application/vnd.oasis.opendocument.graphics",
    }
)
EPUB = "application/epub+zip"
OLE2_DOCUMENTS = frozenset(
    {"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint"}
)
RTF = "application/rtf"
OFFICE_DOCUMENTS = frozenset({*OOXML_DOCUMENTS, *ODF_DOCUMENTS, EPUB, *OLE2_DOCUMENTS, RTF})

VIDEO_TYPES = frozenset(
    {
        "video/mp4",
        "video/quicktime",
        "video/3gpp",
        "video/3gpp2",
        "video/webm",
        "video/x-matroska",
        "video/x-msvideo",
        "video/mp2t",
        "video/ogg",
    }
)


def _any_case(types: set[str]) -> frozenset[str]:
    """The types as IANA spells them and in lower case: `media_type` lowers a recorded type, and
    a few are registered in mixed case (`...macroEnabled.12`), which membership would miss."""
    return frozenset({*types, *(mime.lower() for mime in types)})


ALREADY_COMPRESSED: frozenset[str] = _any_case(
    {
        "image/jpeg",
        "image/png",
        "image/gif",
        "image/webp",
        "image/heic",
        "image/heif",
        "image/avif",
        "audio/mpeg",
        "audio/mp4",
        "audio/ogg",
        "audio/flac",
        "application/zip",
        "application/gzip",
        "application/zstd",
        "application/x-bzip2",
        "application/x-xz",
        "application/x-7z-compressed",
        "application/vnd.rar",
        JPEG_XL,
        *RAW_IMAGES,  # losslessly compressed by most cameras already
        *OOXML_DOCUMENTS,
        *ODF_DOCUMENTS,
        EPUB,
        *VIDEO_TYPES,
    }
)

THUMBNAILABLE_IMAGES = frozenset(
    {
        "image/jpeg",
        "image/png",
        "image/gif",
        "image/webp",
        "image/tiff",
        "image/bmp",
        "image/heic",
        "image/heif",
        "image/avif",
        SVG,
        PHOTOSHOP,
        JPEG_XL,
        *RAW_IMAGES,
    }
)

_PREVIEWABLE_DOCUMENTS = _any_case(
    {
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/csv",
        "text/tab-separated-values",
        "application/json",
        *OFFICE_DOCUMENTS,
    }
)


# Every content type `sniff` can give, for docs/UPLOADS.md's table (tools/content_table.py) and the
# tests that hold each detector to it.
SNIFFED_TYPES: frozenset[str] = frozenset(
    {
        EMPTY,
        OCTET_STREAM,
        *(mime for _, mime in _SIGNATURES),
        *_RIFF_FORMS.values(),
        *_IMAGE_BRANDS.values(),
        *_AV_BRANDS.values(),
        "video/3gpp",
        "video/3gpp2",
        "video/webm",
        "video/x-matroska",
        "image/bmp",
        "application/x-bzip2",
        "audio/ogg",
        "video/ogg",
        "application/vnd.microsoft.portable-executable",
        "video/mp2t",
        "audio/mpeg",
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/csv",
        "text/tab-separated-values",
        "application/json",
        RTF,
        SVG,
        *RAW_IMAGES,
        *ZIP_DOCUMENT_TYPES,
        *OLE2_DOCUMENT_TYPES,
    }
)


def _is_video(content_type: str) -> bool:
    return content_type.startswith("video/")


def _worth_compressing(content_type: str) -> bool:
    already = content_type in ALREADY_COMPRESSED or _is_video(content_type)
    return content_type != EMPTY and not already


# Scan before parse: no thumbnailer, previewer or compressor touches a file the scanner has not.
_EVERY_FILE = (JobType.VIRUS_SCAN, JobType.DEDUPLICATION_CHECK)

# The jobs that decode a file's content, each on the types its decoder is for. The others (the
# scan, the dedup check, compression) read any file's bytes as bytes.
_PARSERS: dict[JobType, Callable[[str], bool]] = {
    JobType.THUMBNAIL_GENERATION: lambda mime: (
        mime in THUMBNAILABLE_IMAGES or mime in AUDIO_WITH_ART
    ),
    JobType.VIDEO_THUMBNAIL: lambda mime: mime in VIDEO_TYPES or mime in AUDIO_TYPES,
    JobType.DOCUMENT_PREVIEW: _PREVIEWABLE_DOCUMENTS.__contains__,
}

# The type-specific jobs, and which content types get each: every decoder on the types it is
# for, and compression on what is worth compressing.
_RULES: tuple[tuple[JobType, Callable[[str], bool]], ...] = (
    *_PARSERS.items(),
    (JobType.COMPRESSION, _worth_compressing),
)


def media_type(content_type: str) -> str:
    """`type/subtype` of a content type, lower case, without its parameters."""
    return content_type.split(";", 1)[0].strip().lower()


def job_types_for(content_type: str, *, cover_art: bool = False) -> tuple[JobType, ...]:
    """The jobs a file of this (sniffed) content type gets by default, in a stable order.

    Audio gets a thumbnail (of its art) only when the sniffer found cover art in it."""
    mime = media_type(content_type)
    applicable = {job for job, applies in _RULES if applies(mime)}
    if mime in AUDIO_WITH_ART and not cover_art:
        applicable.discard(JobType.THUMBNAIL_GENERATION)
    return _EVERY_FILE + tuple(job for job in JobType if job in applicable)


# Types a decoding job reads when a request or a preset asks for it, beyond those ingest gives
# it by default: a TIFF gets a thumbnail by default, and its pages (a multi-page scan) on request.
_ON_REQUEST: dict[JobType, frozenset[str]] = {JobType.DOCUMENT_PREVIEW: frozenset({"image/tiff"})}


def fits(job_type: JobType, content_type: str) -> bool:
    """Whether a job of this type may run on a file of this (sniffed) content type: a job that
    decodes the content only on the types its decoder is for, so no request can hand a
    thumbnailer a PDF or a video demuxer a playlist."""
    decodes = _PARSERS.get(job_type)
    mime = media_type(content_type)
    return decodes is None or decodes(mime) or mime in _ON_REQUEST.get(job_type, frozenset())
