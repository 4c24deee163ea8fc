"""Whether an audio file carries cover art: the picture its thumbnail is made of.

Each format keeps its art in a structure walked here header by header, never decoded: an ID3v2
tag's APIC (PIC in ID3v2.2) frame, a FLAC PICTURE metadata block, an MP4's
`moov/udta/meta/ilst/covr` (the `moov` often after the `mdat`, at the end of the file). The
walks are bounded in steps and every size is checked against its container, so a tag whose
sizes lie is simply found to have no art.
"""

from __future__ import annotations

from filejobs.domain.byte_ranges import BoundedReader

_WINDOW = 16 * 1024  # read ahead at each jump: the next headers are usually near
_MAX_STEPS = 512  # frames, blocks or boxes walked, in all

# --- ID3v2 ------------------------------------------------------------------------------------

_ID3_HEADER = 10
_ID3_EXTENDED_HEADER = 0x40
_ID3_PICTURE_FRAMES = {2: b"PIC", 3: b"APIC", 4: b"APIC"}


def _syncsafe(data: bytes) -> int:
    """ID3's 28-bit integers: 7 bits a byte, so that no size looks like an MPEG sync."""
    value = 0
    for byte in data:
        value = (value << 7) | (byte & 0x7F)
    return value


def id3_has_picture(reader: BoundedReader) -> bool:
    head = reader.head
    if len(head) < _ID3_HEADER or not head.startswith(b"ID3"):
        return False
    version, flags = head[3], head[5]
    picture = _ID3_PICTURE_FRAMES.get(version)
    if picture is None:
        return False
    tag_end = _ID3_HEADER + _syncsafe(head[6:10])
    position = _ID3_HEADER
    if flags & _ID3_EXTENDED_HEADER and version >= 3:
        extended = reader.read(position, 4, window=_WINDOW)
        size = _syncsafe(extended) if version == 4 else int.from_bytes(extended, "big") + 4
        position += size
    id_length, header_length = (3, 6) if version == 2 else (4, 10)
    for _ in range(_MAX_STEPS):
        if position + header_length > tag_end:
            return False
        frame = reader.read(position, header_length, window=_WINDOW)
        if len(frame) < header_length or frame[0] == 0:  # cut short, or the padding begins
            return False
        if frame[:id_length] == picture:
            return True
        size_bytes = frame[id_length : id_length + (3 if version == 2 else 4)]
        size = _syncsafe(size_bytes) if version == 4 else int.from_bytes(size_bytes, "big")
        position += header_length + size
    return False


# --- FLAC ---------------------------------------------------------------------------------------

_FLAC_PICTURE = 6
_FLAC_LAST_BLOCK = 0x80


def flac_has_picture(reader: BoundedReader) -> bool:
    if not reader.head.startswith(b"fLaC"):
        return False
    position = 4
    for _ in range(_MAX_STEPS):
        block = reader.read(position, 4, window=_WINDOW)
        if len(block) < 4:
            return False
        if block[0] & 0x7F == _FLAC_PICTURE:
            return True
        if block[0] & _FLAC_LAST_BLOCK:
            return False
        position += 4 + int.from_bytes(block[1:4], "big")
    return False


# --- MP4 (ISO-BMFF) -----------------------------------------------------------------------------

_COVER_PATH = (b"moov", b"udta", b"meta", b"ilst", b"covr")
_FULL_BOX_HEADER = 4  # version and flags, in `meta` as ISO writes it (QuickTime's has none)


def _box_header(reader: BoundedReader, position: int, end: int) -> tuple[bytes, int, int] | None:
    """A box's type, where its body starts and where it ends, if it fits in its container."""
    header = reader.read(position, 16, window=_WINDOW)
    if len(header) < 8:
        return None
    size, kind = int.from_bytes(header[:4], "big"), header[4:8]
    body = position + 8
    if size == 1:  # a 64-bit size follows the type
        if len(header) < 16:
            return None
        size, body = int.from_bytes(header[8:16], "big"), position + 16
    elif size == 0:  # the box runs to the end of its container
        size = end - position
    if size < body - position or position + size > end:
        return None
    return kind, body, position + size


def _child(reader: BoundedReader, kind: bytes, start: int, end: int) -> tuple[int, int] | None:
    position = start
    for _ in range(_MAX_STEPS):
        if position >= end:
            return None
        box = _box_header(reader, position, end)
        if box is None:
            return None
        found, body, box_end = box
        if found == kind:
            return body, box_end
        position = box_end
    return None


def mp4_has_cover(reader: BoundedReader) -> bool:
    # Only the head without ranges: a `moov` past it cannot be found.
    end = len(reader.head) if reader.size is None else reader.size
    start = 0
    for kind in _COVER_PATH:
        found = _child(reader, kind, start, end)
        if found is None:
            return False
        start, end = found
        if kind == b"meta" and reader.read(start + 4, 4, window=_WINDOW) != b"hdlr":
            start += _FULL_BOX_HEADER
    return True


_BY_TYPE = {
    "audio/mpeg": id3_has_picture,
    "audio/flac": flac_has_picture,
    "audio/mp4": mp4_has_cover,
}


def has_cover_art(content_type: str, reader: BoundedReader) -> bool:
    """Whether audio of this (sniffed) type carries a picture; False for any other type."""
    finds = _BY_TYPE.get(content_type)
    return finds is not None and finds(reader)
