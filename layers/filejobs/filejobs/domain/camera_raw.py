"""Camera RAW files by their own markers, not as the TIFF most of them are built on.

CR2, ORF, RW2 and RAF say so in their first bytes. NEF, ARW and DNG are plain TIFF headers: their
first image directory (IFD0) tells them apart, by a DNGVersion tag or by the camera's Make. The
directory is read entry by entry within the head, each offset checked; nothing is decoded.
"""

from __future__ import annotations

from typing import Literal

CR2 = "image/x-canon-cr2"
CR3 = "image/x-canon-cr3"
NEF = "image/x-nikon-nef"
ARW = "image/x-sony-arw"
RAF = "image/x-fuji-raf"
ORF = "image/x-olympus-orf"
RW2 = "image/x-panasonic-rw2"
DNG = "image/x-adobe-dng"

_PREFIXES = (
    (b"FUJIFILMCCD-RAW", RAF),
    (b"IIRO", ORF),
    (b"IIRS", ORF),
    (b"MMOR", ORF),
    (b"IIU\x00", RW2),
)
_TIFF_BYTE_ORDERS: dict[bytes, Literal["little", "big"]] = {b"II*\x00": "little", b"MM\x00*": "big"}
_CR2_MARKER = b"CR\x02\x00"  # at offset 8, after the TIFF header

_MAKE = 0x010F
_DNG_VERSION = 0xC612
_ASCII = 2
_ENTRY = 12
_MAX_ENTRIES = 512
_MAKERS = ((b"NIKON", NEF), (b"SONY", ARW))  # Make is "NIKON CORPORATION", "SONY"


def camera_raw_type(head: bytes) -> str | None:
    found = next((mime for prefix, mime in _PREFIXES if head.startswith(prefix)), None)
    if found is not None:
        return found
    if head[:4] not in _TIFF_BYTE_ORDERS:
        return None
    if head[8:12] == _CR2_MARKER:
        return CR2
    return _by_first_directory(head)


def _by_first_directory(head: bytes) -> str | None:
    """DNG by its DNGVersion tag (a DNG converted from a Nikon keeps Make NIKON), else the maker
    whose RAW format this TIFF is."""
    order = _TIFF_BYTE_ORDERS[head[:4]]

    def number(offset: int, length: int) -> int:
        return int.from_bytes(head[offset : offset + length], order)

    directory = number(4, 4)
    if directory < 8 or directory + 2 > len(head):
        return None
    entries = min(number(directory, 2), (len(head) - directory - 2) // _ENTRY, _MAX_ENTRIES)
    make = b""
    for index in range(entries):
        entry = directory + 2 + index * _ENTRY
        tag, kind, count = number(entry, 2), number(entry + 2, 2), number(entry + 4, 4)
        if tag == _DNG_VERSION:
            return DNG
        if tag == _MAKE and kind == _ASCII:
            # Up to four bytes sit in the entry itself; longer values at the offset it gives.
            value_at = entry + 8 if count <= 4 else number(entry + 8, 4)
            make = head[value_at : value_at + min(count, 64)] if value_at < len(head) else b""
    return next((mime for maker, mime in _MAKERS if make.upper().startswith(maker)), None)
