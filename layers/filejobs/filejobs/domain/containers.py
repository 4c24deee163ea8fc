"""Which document a ZIP or an OLE2 compound file holds, from its structure.

Byte classification, not decoding: no XML parser, no `zipfile` or `olefile` on untrusted bytes.
Every offset is range-checked, every loop bounded, every read goes through `BoundedReader`. A
container that is malformed, or that would cost more than the reader's budget, is not
classified (None): the caller keeps its coarse type (`application/zip`, OLE2 storage).
"""

from __future__ import annotations

import re
import struct
import zlib

from filejobs.domain.byte_ranges import BoundedReader

# --- ZIP: ODF and EPUB by their `mimetype` member, OOXML by `[Content_Types].xml` ---------------

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes: signature ... name and extra lengths
_CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")  # 46 bytes
_END_OF_CENTRAL_DIRECTORY = struct.Struct("<4sHHHHIIH")  # 22 bytes
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_EOCD_SIGNATURE = b"PK\x05\x06"
_EOCD_SEARCH = _END_OF_CENTRAL_DIRECTORY.size + 0xFFFF  # the record and its longest comment
_STORED, _DEFLATED = 0, 8
_HAS_DATA_DESCRIPTOR = 0x08  # sizes in the local header are zero: only the central ones count
_MAX_CENTRAL_DIRECTORY = 128 * 1024  # thousands of members: larger is not worth the reads
_MAX_CONTENT_TYPES = 64 * 1024  # compressed and inflated: Office writes 1-3 KiB
_MAX_MEMBERS = 4096
_LOCAL_HEADER_SLACK = 512  # room for a local extra field longer than the central one

CONTENT_TYPES_PART = b"[Content_Types].xml"

# The `mimetype` member ODF and EPUB store first, uncompressed, so that `file` can read it.
_MIMETYPE_MEMBERS = {
    b"application/vnd.oasis.opendocument.text": "application/vnd.oasis.opendocument.text",
    b"application/vnd.oasis.opendocument.spreadsheet": (
        "application/vnd.oasis.opendocument.spreadsheet"
    ),
    b"application/vnd.oasis.opendocument.presentation": (
        "application/vnd.oasis.opendocument.presentation"
    ),
    b"application/vnd.oasis.opendocument.graphics": "application/vnd.oasis.opendocument.graphics",
    b"application/epub+zip": "application/epub+zip",
}

_OPENXML = "application/vnd.openxmlformats-officedocument"
# The content type of a package's main part (in `[Content_Types].xml`) -> the document's type.
_MAIN_PARTS = {
    f"{_OPENXML}.wordprocessingml.document.main+xml": f"{_OPENXML}.wordprocessingml.document",
    f"{_OPENXML}.wordprocessingml.template.main+xml": f"{_OPENXML}.wordprocessingml.template",
    "application/vnd.ms-word.document.macroenabled.main+xml": (
        "application/vnd.ms-word.document.macroEnabled.12"
    ),
    f"{_OPENXML}.spreadsheetml.sheet.main+xml": f"{_OPENXML}.spreadsheetml.sheet",
    f"{_OPENXML}.spreadsheetml.template.main+xml": f"{_OPENXML}.spreadsheetml.template",
    "application/vnd.ms-excel.sheet.macroenabled.main+xml": (
        "application/vnd.ms-excel.sheet.macroEnabled.12"
    ),
    f"{_OPENXML}.presentationml.presentation.main+xml": f"{_OPENXML}.presentationml.presentation",
    f"{_OPENXML}.presentationml.slideshow.main+xml": f"{_OPENXML}.presentationml.slideshow",
    f"{_OPENXML}.presentationml.template.main+xml": f"{_OPENXML}.presentationml.template",
    "application/vnd.ms-powerpoint.presentation.macroenabled.main+xml": (
        "application/vnd.ms-powerpoint.presentation.macroEnabled.12"
    ),
}
# Every ContentType="..." attribute: the main part is among the Overrides.
_CONTENT_TYPE_ATTRIBUTE = re.compile(rb"""ContentType\s*=\s*["']([^"'<>]{1,200})["']""")

ZIP_DOCUMENT_TYPES = frozenset({*_MIMETYPE_MEMBERS.values(), *_MAIN_PARTS.values()})


def _u16(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 2], "little")


def _u32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 4], "little")


def zip_document_type(reader: BoundedReader) -> str | None:
    """The document a ZIP is (ODF, EPUB, OOXML), or None for any other or a malformed ZIP.

    The first member decides when it can: ODF and EPUB store `mimetype` there, and Office writes
    `[Content_Types].xml` first (then a small document costs no read beyond the head).
    LibreOffice and others write it last: the central directory, found from the end, says where.
    """
    first = _first_member(reader.head)
    if first is not None:
        name, method, data = first
        if name == b"mimetype" and method == _STORED:
            return _MIMETYPE_MEMBERS.get(data.strip())
        if name == CONTENT_TYPES_PART:
            inflated = _inflate(method, data)
            if inflated is not None:
                return _ooxml_type(inflated)
    located = _content_types_in_central_directory(reader)
    if located is None:
        return None
    content_types = _member_data(reader, *located)
    return _ooxml_type(content_types) if content_types is not None else None


def _first_member(head: bytes) -> tuple[bytes, int, bytes] | None:
    """The first local member's name, method and data, when all of it is in the head."""
    if len(head) < _LOCAL_HEADER.size or not head.startswith(_LOCAL_SIGNATURE):
        return None
    fields = _LOCAL_HEADER.unpack_from(head)
    flags, method, compressed = fields[2], fields[3], fields[7]
    name_length, extra_length = fields[9], fields[10]
    name_at = _LOCAL_HEADER.size
    data_at = name_at + name_length + extra_length
    name = head[name_at : name_at + name_length]
    if flags & _HAS_DATA_DESCRIPTOR or data_at + compressed > len(head):
        return (name, method, b"") if name == b"mimetype" else None
    return name, method, head[data_at : data_at + compressed]


def _inflate(method: int, data: bytes) -> bytes | None:
    """A member's bytes, at most `_MAX_CONTENT_TYPES` of them (a bomb stops there)."""
    if method == _STORED:
        return data[:_MAX_CONTENT_TYPES]
    if method != _DEFLATED:
        return None
    try:
        return zlib.decompressobj(-15).decompress(data, _MAX_CONTENT_TYPES)
    except zlib.error:
        return None


def _ooxml_type(content_types: bytes) -> str | None:
    for match in _CONTENT_TYPE_ATTRIBUTE.finditer(content_types):
        found = _MAIN_PARTS.get(match.group(1).decode("ascii", "replace").strip().lower())
        if found is not None:
            return found
    return None


def _content_types_in_central_directory(
    reader: BoundedReader,
) -> tuple[int, int, int] | None:
    """Where `[Content_Types].xml` is: its local header's offset, its method, its compressed
    size (from the central directory, which is right even when the local header defers its
    sizes to a data descriptor)."""
    directory = _central_directory(reader)
    if directory is None:
        return None
    position = 0
    for _ in range(_MAX_MEMBERS):
        if directory[position : position + 4] != _CENTRAL_SIGNATURE:
            return None
        if position + _CENTRAL_HEADER.size > len(directory):
            return None
        fields = _CENTRAL_HEADER.unpack_from(directory, position)
        method, compressed = fields[4], fields[8]
        name_length, extra_length, comment_length = fields[10], fields[11], fields[12]
        local_offset = fields[16]
        name_at = position + _CENTRAL_HEADER.size
        if directory[name_at : name_at + name_length] == CONTENT_TYPES_PART:
            return local_offset, method, compressed
        position = name_at + name_length + extra_length + comment_length
    return None


def _central_directory(reader: BoundedReader) -> bytes | None:
    """The central directory's bytes, located by the end-of-central-directory record."""
    if reader.size is None:
        return None
    tail_at = max(0, reader.size - _EOCD_SEARCH)
    tail = reader.read(tail_at, reader.size - tail_at)
    record_at = _end_record_in(tail)
    if record_at is None:
        return None
    fields = _END_OF_CENTRAL_DIRECTORY.unpack_from(tail, record_at)
    directory_size, directory_offset = fields[5], fields[6]
    # The directory lies before its end record (ZIP64's 0xFFFFFFFF markers fail this too).
    ends_in_file = directory_offset + directory_size <= tail_at + record_at
    if not ends_in_file or directory_size > _MAX_CENTRAL_DIRECTORY:
        return None
    directory = reader.read(directory_offset, directory_size)
    return directory if len(directory) == directory_size else None


def _end_record_in(tail: bytes) -> int | None:
    """The last end-of-central-directory record whose comment runs exactly to the end."""
    position = len(tail)
    for _ in range(64):  # a comment may contain the signature; look back a few times at most
        position = tail.rfind(_EOCD_SIGNATURE, 0, position)
        if position < 0:
            return None
        record_end = position + _END_OF_CENTRAL_DIRECTORY.size
        if record_end <= len(tail) and record_end + _u16(tail, position + 20) == len(tail):
            return position
    return None


def _member_data(reader: BoundedReader, offset: int, method: int, compressed: int) -> bytes | None:
    if compressed > _MAX_CONTENT_TYPES:
        return None
    guess = _LOCAL_HEADER.size + len(CONTENT_TYPES_PART) + _LOCAL_HEADER_SLACK + compressed
    local = reader.read(offset, _LOCAL_HEADER.size, window=guess)
    if len(local) < _LOCAL_HEADER.size or not local.startswith(_LOCAL_SIGNATURE):
        return None
    data_at = offset + _LOCAL_HEADER.size + _u16(local, 26) + _u16(local, 28)
    data = reader.read(data_at, compressed)
    return _inflate(method, data) if len(data) == compressed else None


# --- OLE2 compound files: Word, Excel and PowerPoint 97-2003 by their streams ------------------

OLE2_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_OLE2_HEADER_SIZE = 512
_SECTOR_SHIFTS = {3: 9, 4: 12}  # major version -> sector size 512 or 4096
_DIFAT_IN_HEADER = 109
_DIRECTORY_ENTRY = 128
_MAX_DIRECTORY_SECTORS = 8
_MAX_SECTOR = 0xFFFFFFFA  # MAXREGSECT: above it, end of chain, free and special markers
_NO_STREAM = 0xFFFFFFFF
_STREAM = 2
_READ_AHEAD_SECTORS = 8  # a sector read fetches its neighbours too: chains tend to run forward

# The stream in the root storage that makes each application's document, in that order: a Word
# document holding an embedded workbook is still a Word document.
_OLE2_MAIN_STREAMS = (
    ("WordDocument", "application/msword"),
    ("PowerPoint Document", "application/vnd.ms-powerpoint"),
    ("Workbook", "application/vnd.ms-excel"),
    ("Book", "application/vnd.ms-excel"),  # Excel 5 and 95
)
OLE2_DOCUMENT_TYPES = frozenset(mime for _, mime in _OLE2_MAIN_STREAMS)


def ole2_document_type(reader: BoundedReader) -> str | None:
    """Word, Excel or PowerPoint by the streams in the root storage; None for any other
    compound file (an MSI, an Outlook message...) or a malformed one."""
    header = reader.head[:_OLE2_HEADER_SIZE]
    if len(header) < _OLE2_HEADER_SIZE or not header.startswith(OLE2_SIGNATURE):
        return None
    shift = _SECTOR_SHIFTS.get(_u16(header, 0x1A))
    if shift is None or _u16(header, 0x1E) != shift:
        return None
    entries = _directory_entries(reader, header, 1 << shift)
    names = _root_stream_names(entries)
    return next((mime for name, mime in _OLE2_MAIN_STREAMS if name in names), None)


def _sector(reader: BoundedReader, number: int, sector_size: int) -> bytes:
    offset = (number + 1) * sector_size  # sector 0 follows the header, which fills one sector
    data = reader.read(offset, sector_size, window=sector_size * _READ_AHEAD_SECTORS)
    return data if len(data) == sector_size else b""


def _next_sector(reader: BoundedReader, header: bytes, sector_size: int, current: int) -> int:
    """The FAT's entry for `current`, from the FAT sectors the header lists (the first 109;
    a directory past them is in a file of gigabytes, and not classified)."""
    per_fat_sector = sector_size // 4
    fat_index = current // per_fat_sector
    if fat_index >= _DIFAT_IN_HEADER:
        return _NO_STREAM
    fat_sector = _u32(header, 0x4C + 4 * fat_index)
    if fat_sector > _MAX_SECTOR:
        return _NO_STREAM
    fat = _sector(reader, fat_sector, sector_size)
    if not fat:
        return _NO_STREAM
    return _u32(fat, 4 * (current % per_fat_sector))


def _directory_entries(reader: BoundedReader, header: bytes, sector_size: int) -> list[bytes]:
    """The directory's entries along its chain, as far as the budget and a sane length go."""
    entries: list[bytes] = []
    current = _u32(header, 0x30)
    seen: set[int] = set()
    while current <= _MAX_SECTOR and current not in seen and len(seen) < _MAX_DIRECTORY_SECTORS:
        seen.add(current)  # a FAT chain that loops back ends here
        sector = _sector(reader, current, sector_size)
        if not sector:
            break
        entries += [
            sector[at : at + _DIRECTORY_ENTRY] for at in range(0, sector_size, _DIRECTORY_ENTRY)
        ]
        current = _next_sector(reader, header, sector_size, current)
    return entries


def _entry_name(entry: bytes) -> str:
    length = min(_u16(entry, 0x40), 64)
    return entry[: max(0, length - 2)].decode("utf-16-le", "replace")


def _root_stream_names(entries: list[bytes]) -> set[str]:
    """The names of the streams directly in the root storage: the red-black tree of the root
    entry's children, walked with a stack (a tree whose links loop ends where it repeats)."""
    if not entries:
        return set()
    names: set[str] = set()
    pending = [_u32(entries[0], 0x4C)]  # the root entry's child
    seen: set[int] = set()
    while pending:
        number = pending.pop()
        if number >= len(entries) or number in seen:
            continue
        seen.add(number)
        entry = entries[number]
        if entry[0x42] == _STREAM:
            names.add(_entry_name(entry))
        pending += [_u32(entry, 0x44), _u32(entry, 0x48)]  # left and right siblings
    return names
