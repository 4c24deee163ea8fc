"""The sniffer on corrupt containers: mutants of real OOXML, ODF, OLE2, camera RAW, SVG and
audio files never raise, never read past the budget, never hang, and always give a content type
the table of docs/UPLOADS.md lists.

The mutations aim where parsers break: the bytes at and after each structure's signature (ZIP
local and central headers, the end record, OLE2 header and directory entries, ID3 frames, MP4
boxes, FLAC blocks, TIFF entries) get random values; files are also cut anywhere. Seeded, so
every run tries the same examples; no AWS and no worker here (test_corrupt_media.py runs the
jobs on corrupt media).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from filejobs.domain.byte_ranges import MAX_EXTRA_BYTES, MAX_EXTRA_READS, BytesRanges
from filejobs.domain.content import SNIFF_BYTES, SNIFFED_TYPES, sniff
from tests import content_samples as samples

SLOW_S = 1.0  # one sniff takes well under a millisecond; past a second it is looping

FAMILIES: dict[str, Callable[[], bytes]] = {
    "docx-libreoffice": lambda: samples.ooxml(layout="libreoffice", padding=20_000),
    "docx-office": lambda: samples.ooxml(padding=20_000),
    "odt": lambda: samples.odf("application/vnd.oasis.opendocument.text", padding=8_000),
    "doc": lambda: samples.CompoundFile(streams=("S1", "S2", "S3", "S4", "WordDocument")).build(),
    "mp3": lambda: samples.mp3(art=True),
    "m4a": lambda: samples.m4a(art=True, mdat=20_000),
    "flac": lambda: samples.flac(art=True),
    "nef": samples.nef,
    "svg": lambda: b'<?xml version="1.0"?>\n<!-- c -->\n<!DOCTYPE svg [<!ENTITY a "b">]>\n<svg/>',
}
# Where each family's structures start: mutations land at and just after these.
SIGNATURES = (
    b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"\xd0\xcf\x11\xe0", b"W\x00o\x00r\x00d",
    b"ID3", b"APIC", b"USLT", b"ftyp", b"mdat", b"moov", b"udta", b"meta", b"ilst", b"covr",
    b"fLaC", b"II*\x00", b"<!", b"<svg",
)  # fmt: skip


def structure_offsets(data: bytes) -> list[int]:
    offsets = [0]
    for signature in SIGNATURES:
        at = data.find(signature)
        while at >= 0 and len(offsets) < 400:
            offsets.append(at)
            at = data.find(signature, at + 1)
    # OLE2 directory and FAT sectors sit at sector boundaries
    offsets += range(0, min(len(data), 64 * 512), 512) if data.startswith(b"\xd0\xcf") else []
    return offsets


@st.composite
def mutants(draw: st.DrawFn, data: bytes) -> bytes:
    mutant = bytearray(data)
    anchors = structure_offsets(data)
    for _ in range(draw(st.integers(1, 6))):
        at = min(draw(st.sampled_from(anchors)) + draw(st.integers(0, 64)), len(mutant) - 1)
        value = draw(
            st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\xff\xff\xff\x7f"])
            | st.binary(min_size=1, max_size=4)
        )
        mutant[at : at + len(value)] = value
    if draw(st.booleans()):
        del mutant[draw(st.integers(1, len(mutant))) :]
    return bytes(mutant)


SETTINGS = settings(
    deadline=None, database=None, max_examples=150, suppress_health_check=list(HealthCheck)
)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_corrupt_container_is_sniffed_within_budget_without_an_exception(family: str) -> None:
    valid = FAMILIES[family]()

    @SETTINGS
    @seed(zlib.crc32(family.encode()))
    @given(data=mutants(valid))
    def each_mutant(data: bytes) -> None:
        ranges = BytesRanges(data)
        started = time.monotonic()
        result = sniff(data[:SNIFF_BYTES], ranges)
        assert time.monotonic() - started < SLOW_S
        assert result.content_type in SNIFFED_TYPES
        assert len(ranges.reads) <= MAX_EXTRA_READS
        assert sum(length for _, length in ranges.reads) <= MAX_EXTRA_BYTES

    each_mutant()
