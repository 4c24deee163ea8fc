"""Real container files for the sniffer's tests, laid out the way their writers lay them out.

OOXML, ODF and EPUB are written with `zipfile` (Office puts `[Content_Types].xml` first, deflated;
LibreOffice puts it last, so only the central directory finds it). OLE2 compound files are written
here sector by sector, to the specification ([MS-CFB]), with the layouts hostile files use too.
Camera RAW heads are byte-accurate TIFF headers; the audio files carry real tags and boxes.
`genuine_office_files` asks LibreOffice itself, when it is installed.
"""

from __future__ import annotations

import io
import shutil
import struct
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from samples import office_document

# --- ZIP documents ---------------------------------------------------------------------------

OPENXML = "application/vnd.openxmlformats-officedocument"
# Main part content type -> (main part name, the document's content type)
OOXML_MAIN_PARTS = {
    f"{OPENXML}.wordprocessingml.document.main+xml": (
        "word/document.xml",
        f"{OPENXML}.wordprocessingml.document",
    ),
    f"{OPENXML}.wordprocessingml.template.main+xml": (
        "word/document.xml",
        f"{OPENXML}.wordprocessingml.template",
    ),
    "application/vnd.ms-word.document.macroEnabled.main+xml": (
        "word/document.xml",
        "application/vnd.ms-word.document.macroEnabled.12",
    ),
    f"{OPENXML}.spreadsheetml.sheet.main+xml": (
        "xl/workbook.xml",
        f"{OPENXML}.spreadsheetml.sheet",
    ),
    f"{OPENXML}.spreadsheetml.template.main+xml": (
        "xl/workbook.xml",
        f"{OPENXML}.spreadsheetml.template",
    ),
    "application/vnd.ms-excel.sheet.macroEnabled.main+xml": (
        "xl/workbook.xml",
        "application/vnd.ms-excel.sheet.macroEnabled.12",
    ),
    f"{OPENXML}.presentationml.presentation.main+xml": (
        "ppt/presentation.xml",
        f"{OPENXML}.presentationml.presentation",
    ),
    f"{OPENXML}.presentationml.slideshow.main+xml": (
        "ppt/presentation.xml",
        f"{OPENXML}.presentationml.slideshow",
    ),
    f"{OPENXML}.presentationml.template.main+xml": (
        "ppt/presentation.xml",
        f"{OPENXML}.presentationml.template",
    ),
    "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml": (
        "ppt/presentation.xml",
        "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
    ),
}
DOCX_MAIN = f"{OPENXML}.wordprocessingml.document.main+xml"
DOCX = f"{OPENXML}.wordprocessingml.document"


def content_types_xml(main_part: str, main_type: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Default Extension="png" ContentType="image/png"/>'
        f'<Override PartName="/{main_part}" ContentType="{main_type}"/>'
        '<Override PartName="/docProps/core.xml" '
        'ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
        '<Override PartName="/docProps/app.xml" '
        f'ContentType="{OPENXML}.extended-properties+xml"/>'
        "</Types>"
    ).encode()


def filler(size: int, seed: int = 1) -> bytes:
    """Bytes that deflate poorly (an embedded picture, say), so a file can be made big."""
    state, out = seed, bytearray()
    while len(out) < size:
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        out += state.to_bytes(4, "little")
    return bytes(out[:size])


def ooxml(main_type: str = DOCX_MAIN, *, layout: str = "office", padding: int = 0) -> bytes:
    """An OOXML package. `office`: `[Content_Types].xml` first, as Word, Excel and PowerPoint
    write it; `libreoffice`: last, after the parts. `padding`: a stored picture that makes
    the file larger than the head."""
    main_part, _ = OOXML_MAIN_PARTS.get(main_type, ("word/document.xml", ""))
    types = ("[Content_Types].xml", content_types_xml(main_part, main_type))
    parts = [
        ("_rels/.rels", b'<?xml version="1.0"?><Relationships/>'),
        ("docProps/core.xml", b'<?xml version="1.0"?><cp:coreProperties/>'),
        ("docProps/app.xml", b'<?xml version="1.0"?><Properties/>'),
        (main_part, b'<?xml version="1.0"?><document>' + b"<p>Hello</p>" * 40 + b"</document>"),
    ]
    if padding:
        parts.append(("media/image1.png", filler(padding)))
    members = [types, *parts] if layout == "office" else [*parts, types]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            method = zipfile.ZIP_STORED if name.startswith("media/") else zipfile.ZIP_DEFLATED
            archive.writestr(name, data, compress_type=method)
    return buffer.getvalue()


def odf(mimetype: str, *, padding: int = 0) -> bytes:
    """An ODF package (or an EPUB) as LibreOffice writes it: `mimetype` first and stored."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", mimetype, compress_type=zipfile.ZIP_STORED)
        archive.writestr("content.xml", b'<?xml version="1.0"?><office:document-content/>')
        archive.writestr("META-INF/manifest.xml", b'<?xml version="1.0"?><manifest:manifest/>')
        if padding:
            archive.writestr("Pictures/1.png", filler(padding), compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def plain_zip(*names: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names or ("readme.txt",):
            archive.writestr(name, b"just a file\n" * 20)
    return buffer.getvalue()


# --- OLE2 compound files ([MS-CFB], version 3: 512-byte sectors) -------------------------------

SECTOR = 512
FREE, END_OF_CHAIN, FAT_SECTOR = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
NO_STREAM = 0xFFFFFFFF


def _directory_entry(
    name: str, kind: int, *, child: int, right: int, start: int, size: int
) -> bytes:
    encoded = name.encode("utf-16-le") + b"\x00\x00"
    return (
        encoded.ljust(64, b"\x00")
        + struct.pack("<HBB", len(encoded), kind, 1)  # name length, type, colour (black)
        + struct.pack("<III", NO_STREAM, right, child)  # left sibling, right sibling, child
        + bytes(16 + 4 + 16)  # CLSID, state bits, creation and modification times
        + struct.pack("<IQ", start, size)
    )


@dataclass
class CompoundFile:
    """An OLE2 file with these streams in its root storage (and `nested` in a sub-storage).

    `directory_first_sector`: where the directory goes, after the streams' data by default (as
    Word leaves it, beyond a 4 KiB head) or at sector 1. `loop_directory_chain`: the FAT sends
    the directory's last sector back to its first, as a hostile file would."""

    streams: tuple[str, ...] = ("WordDocument", "1Table", "\x05SummaryInformation")
    nested: tuple[str, ...] = ()
    stream_size: int = 4096
    directory_after_data: bool = True
    loop_directory_chain: bool = False
    entries: list[bytes] = field(default_factory=list)

    def build(self) -> bytes:
        names = [(name, 2) for name in self.streams]
        if self.nested:
            names.append(("ObjectPool", 1))
        total = 1 + len(names) + len(self.nested)
        directory_sectors = -(-total * 128 // SECTOR)
        data_sectors = self.stream_size // SECTOR
        stream_count = len(self.streams) + len(self.nested)
        # Layout: sector 0 the FAT, then either the directory then data, or data then directory.
        data_start = 1 if self.directory_after_data else 1 + directory_sectors
        directory_start = 1 + stream_count * data_sectors if self.directory_after_data else 1
        sector_count = 1 + directory_sectors + stream_count * data_sectors
        if sector_count > SECTOR // 4:
            raise ValueError("this writer keeps the FAT in one sector")

        fat = [FREE] * (SECTOR // 4)
        fat[0] = FAT_SECTOR
        starts = []
        for index in range(stream_count):
            first = data_start + index * data_sectors
            starts.append(first)
            for sector in range(first, first + data_sectors):
                fat[sector] = sector + 1
            fat[first + data_sectors - 1] = END_OF_CHAIN
        for sector in range(directory_start, directory_start + directory_sectors):
            fat[sector] = sector + 1
        last = directory_start + directory_sectors - 1
        fat[last] = directory_start if self.loop_directory_chain else END_OF_CHAIN

        entries = self._entries(names, starts)
        directory = b"".join(entries).ljust(directory_sectors * SECTOR, b"\x00")
        data = b"".join(
            bytes([65 + index]) * (data_sectors * SECTOR) for index in range(stream_count)
        )
        body = directory + data if not self.directory_after_data else data + directory
        return self._header(directory_start) + struct.pack(f"<{len(fat)}I", *fat) + body

    def _entries(self, names: list[tuple[str, int]], starts: list[int]) -> list[bytes]:
        # The root's children chained by right siblings (a valid, if unbalanced, tree), then the
        # nested storage's own children likewise.
        count = len(names)
        entries = [
            _directory_entry("Root Entry", 5, child=1, right=NO_STREAM, start=END_OF_CHAIN, size=0)
        ]
        stream_index = 0
        for position, (name, kind) in enumerate(names, start=1):
            right = position + 1 if position < count else NO_STREAM
            if kind == 2:
                start, stream_index = starts[stream_index], stream_index + 1
                entries.append(
                    _directory_entry(
                        name, 2, child=NO_STREAM, right=right, start=start, size=self.stream_size
                    )
                )
            else:
                entries.append(
                    _directory_entry(name, 1, child=count + 1, right=right, start=0, size=0)
                )
        for position, name in enumerate(self.nested, start=count + 1):
            right = position + 1 if position < count + len(self.nested) else NO_STREAM
            start, stream_index = starts[stream_index], stream_index + 1
            entries.append(
                _directory_entry(
                    name, 2, child=NO_STREAM, right=right, start=start, size=self.stream_size
                )
            )
        return entries

    @staticmethod
    def _header(directory_start: int) -> bytes:
        header = (
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
            + bytes(16)  # CLSID
            + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)  # versions, byte order, shifts
            + bytes(6)
            + struct.pack("<II", 0, 1)  # directory sectors (0 in version 3), FAT sectors
            + struct.pack("<II", directory_start, 0)  # first directory sector, transactions
            + struct.pack("<IIIII", 4096, END_OF_CHAIN, 0, END_OF_CHAIN, 0)  # mini FAT, DIFAT
        )
        difat = struct.pack("<I", 0) + struct.pack("<I", FREE) * 108  # the FAT is sector 0
        return header + difat


def ole2(*streams: str) -> bytes:
    return CompoundFile(streams=streams).build()


# --- camera RAW heads ----------------------------------------------------------------------------


def tiff_with(entries: list[tuple[int, int, bytes]], *, big_endian: bool = False) -> bytes:
    """A TIFF header and IFD0 with these (tag, type, value) entries: values of more than four
    bytes stored after the directory, as cameras write them. Padded to a 4 KiB head."""
    order = ">" if big_endian else "<"
    start = b"MM\x00*" if big_endian else b"II*\x00"
    directory_at = 8
    values_at = directory_at + 2 + 12 * len(entries) + 4
    directory, values = struct.pack(f"{order}H", len(entries)), b""
    for tag, kind, value in sorted(entries):
        count = len(value) if kind == 2 else max(1, len(value) // 4)
        if len(value) <= 4:
            field_value = value.ljust(4, b"\x00")
        else:
            field_value = struct.pack(f"{order}I", values_at + len(values))
            values += value + b"\x00" * (len(value) % 2)
        directory += struct.pack(f"{order}HHI", tag, kind, count) + field_value
    directory += b"\x00\x00\x00\x00"  # no next IFD
    head = start + struct.pack(f"{order}I", directory_at) + directory + values
    return head.ljust(4096, b"\x00")


MAKE, MODEL, DNG_VERSION, IMAGE_WIDTH = 0x010F, 0x0110, 0xC612, 0x0100
ASCII, BYTE, LONG = 2, 1, 4


def nef() -> bytes:
    return tiff_with(
        [
            (IMAGE_WIDTH, LONG, struct.pack("<I", 160)),
            (MAKE, ASCII, b"NIKON CORPORATION\x00"),
            (MODEL, ASCII, b"NIKON D850\x00"),
        ]
    )


def arw() -> bytes:
    return tiff_with([(MAKE, ASCII, b"SONY\x00"), (MODEL, ASCII, b"ILCE-7M3\x00")])


def dng_from_nikon() -> bytes:
    """A DNG converted from a NEF keeps the camera's Make: the DNGVersion tag decides."""
    return tiff_with(
        [(MAKE, ASCII, b"NIKON CORPORATION\x00"), (DNG_VERSION, BYTE, b"\x01\x04\x00\x00")]
    )


def plain_tiff_by(make: bytes) -> bytes:
    return tiff_with([(IMAGE_WIDTH, LONG, struct.pack("<I", 1)), (MAKE, ASCII, make)])


def cr2() -> bytes:
    """A Canon CR2: TIFF header, then "CR", major version 2, minor 0, and the RAW IFD's offset."""
    return (b"II*\x00\x10\x00\x00\x00CR\x02\x00" + struct.pack("<I", 0x3000)).ljust(4096, b"\x00")


def cr3() -> bytes:
    brands = b"crx \x00\x00\x00\x01crx isom"
    return struct.pack(">I", 8 + len(brands)) + b"ftyp" + brands + b"\x00\x00\x00\x08moov"


# --- audio with cover art ----------------------------------------------------------------------


def syncsafe(value: int) -> bytes:
    return bytes((value >> shift) & 0x7F for shift in (21, 14, 7, 0))


def id3_frame(kind: bytes, data: bytes, version: int = 3) -> bytes:
    if version == 2:
        return kind + len(data).to_bytes(3, "big") + data
    size = syncsafe(len(data)) if version == 4 else struct.pack(">I", len(data))
    return kind + size + b"\x00\x00" + data


def id3_tag(frames: list[bytes], version: int = 3, padding: int = 256) -> bytes:
    body = b"".join(frames) + bytes(padding)
    return b"ID3" + bytes([version, 0, 0]) + syncsafe(len(body)) + body


def picture_frame(version: int = 3) -> bytes:
    if version == 2:
        return id3_frame(b"PIC", b"\x00JPG\x03\x00" + JPEG, version)
    return id3_frame(b"APIC", b"\x00image/jpeg\x00\x03\x00" + JPEG, version)


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
MP3_FRAME = b"\xff\xfb\x90\x64" + bytes(413)


def mp3(*, art: bool, version: int = 3, lyrics: int = 6000) -> bytes:
    """An MP3 whose tag carries text and lyrics frames first (more than a head's worth), then
    the picture, as taggers that append frames leave it."""
    text_kind, lyrics_kind = (b"TT2", b"ULT") if version == 2 else (b"TIT2", b"USLT")
    frames = [
        id3_frame(text_kind, b"\x03A song", version),
        id3_frame(lyrics_kind, b"\x03eng\x00" + b"la " * (lyrics // 3), version),
    ]
    if art:
        frames.append(picture_frame(version))
    return id3_tag(frames, version) + MP3_FRAME * 8


def box(kind: bytes, *children: bytes) -> bytes:
    body = b"".join(children)
    return struct.pack(">I", 8 + len(body)) + kind + body


def m4a(*, art: bool, mdat: int = 64 * 1024) -> bytes:
    """An iTunes M4A with its `moov` after the `mdat` (not "fast start"), the art in
    moov/udta/meta/ilst/covr."""
    ftyp = box(b"ftyp", b"M4A \x00\x00\x00\x00M4A mp42isom\x00\x00\x00\x00")
    items = [box(b"\xa9nam", box(b"data", b"\x00\x00\x00\x01\x00\x00\x00\x00A song"))]
    if art:
        items.append(box(b"covr", box(b"data", b"\x00\x00\x00\x0d\x00\x00\x00\x00" + JPEG)))
    hdlr = box(b"hdlr", bytes(8) + b"mdirappl" + bytes(9))
    meta = box(b"meta", b"\x00\x00\x00\x00", hdlr, box(b"ilst", *items))
    trak = box(b"trak", box(b"tkhd", bytes(84)), box(b"mdia", bytes(2000)))
    moov = box(b"moov", box(b"mvhd", bytes(100)), trak, box(b"udta", meta))
    return ftyp + box(b"mdat", filler(mdat)) + moov


def flac(*, art: bool, padding: int = 8192) -> bytes:
    """STREAMINFO, a VORBIS_COMMENT, a PADDING block, then the PICTURE (as metaflac appends
    it), then an audio frame."""

    def block(kind: int, data: bytes, last: bool = False) -> bytes:
        return bytes([kind | (0x80 if last else 0)]) + len(data).to_bytes(3, "big") + data

    picture = struct.pack(">II", 3, 10) + b"image/jpeg" + struct.pack(">I", 0)
    picture += struct.pack(">IIIII", 1, 1, 24, 0, len(JPEG)) + JPEG
    blocks = [block(0, bytes(34)), block(4, b"\x05\x00\x00\x00flac!\x00\x00\x00\x00")]
    blocks.append(block(1, bytes(padding), last=not art))
    if art:
        blocks.append(block(6, picture, last=True))
    return b"fLaC" + b"".join(blocks) + b"\xff\xf8" + bytes(64)


# --- genuine files from LibreOffice -------------------------------------------------------------

# Every format LibreOffice writes that the sniffer must know (tools/samples.py `office_document`
# writes each from flat OpenDocument text, spreadsheet or presentation).
GENUINE_FORMATS = ("doc", "docx", "odt", "epub", "rtf", "xls", "xlsx", "ods", "ppt", "pptx", "odp")


def soffice() -> str | None:
    return shutil.which("soffice")


def genuine_office_file(directory: Path, target: str) -> Path:
    """`target` (doc, xlsx...) as LibreOffice writes it, kept in `directory` for the session."""
    out = directory / f"document.{target}"
    if not out.exists():
        out.write_bytes(office_document(target, 2))
    return out
