"""The demo's sample set, generated on the spot (real media; no binaries or EICAR in the repo).

Each sample says what its jobs must end as: every job of a sample is expected `completed`
unless `expected` names another status for its type.
"""

from __future__ import annotations

import io
import subprocess
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import tifffile
from mutagen.id3 import APIC, ID3
from PIL import Image, ImageDraw
from psd_tools import PSDImage

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
ORIENTATION = 0x0112  # EXIF tag
# The jobs of an image (or of audio with cover art) nobody compresses again.
THUMBED = ("deduplication_check", "thumbnail_generation", "virus_scan")
# The jobs of an office document (a ZIP package already: nobody compresses it again).
OFFICE = ("deduplication_check", "document_preview", "virus_scan")
PARSING_JOBS = ("thumbnail_generation", "video_thumbnail", "document_preview", "compression")


@dataclass(frozen=True)
class Sample:
    name: str
    body: bytes
    what: str
    # job type -> the status its job must end in, or the statuses it may end in
    expected: dict[str, str | tuple[str, ...]] = field(default_factory=dict)
    quarantined: bool = False
    # Clean on the first scan; a signature published later (the demo's rescan) knows it.
    rescan_finds: str | None = None
    # Uploaded under this folder of the tenant's uploads (where a preset may be bound).
    folder: str = ""
    # The job types the file must have, exactly (a preset's); None: whatever its type gets.
    jobs: tuple[str, ...] | None = None

    def expected_statuses(self, job_type: str) -> tuple[str, ...]:
        wanted = self.expected.get(job_type, "completed")
        return (wanted,) if isinstance(wanted, str) else wanted


def photo(width: int = 1600, height: int = 1200, orientation: int | None = None) -> bytes:
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(0, height, 8):  # a gradient, so the JPEG has real content to decode
        draw.rectangle(
            (0, y, width, y + 8), fill=(40 + y * 180 // height, 90, 200 - y * 150 // height)
        )
    draw.rectangle((width // 10, height // 10, width // 3, height // 3), fill=(250, 210, 40))
    draw.text((width // 10, height // 2), "filejobs", fill=(255, 255, 255))
    exif = Image.Exif()
    if orientation is not None:
        exif[ORIENTATION] = orientation
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=88, exif=exif.tobytes())
    return buffer.getvalue()


def video(seconds: int = 2, fps: int = 10) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        stream.time_base = Fraction(1, fps)
        for number in range(seconds * fps):
            shade = 30 + number * 200 // (seconds * fps)
            picture = Image.new("RGB", (320, 240), (shade, 80, 160))
            frame = av.VideoFrame.from_image(picture)  # type: ignore[no-untyped-call]
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def pdf(pages: int = 2, title: str = "filejobs demo report") -> bytes:
    sheets = []
    for number in range(pages):
        sheet = Image.new("RGB", (850, 1100), "white")
        ImageDraw.Draw(sheet).text((80, 80), f"{title}, page {number + 1}", fill="black")
        sheets.append(sheet)
    buffer = io.BytesIO()
    sheets[0].save(buffer, "PDF", save_all=True, append_images=sheets[1:])
    return buffer.getvalue()


def svg(width: int = 640, height: int = 400) -> bytes:
    """A vector drawing: a gradient sky, a sun and hills, drawn at whatever size is asked."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><defs><linearGradient id="sky" x1="0" y1="0" x2="0" '
        'y2="1"><stop offset="0" stop-color="#2b6cb0"/><stop offset="1" stop-color="#bee3f8"/>'
        '</linearGradient></defs><rect width="100%" height="100%" fill="url(#sky)"/>'
        f'<circle cx="{width * 3 // 4}" cy="{height // 4}" r="{height // 8}" fill="#f6e05e"/>'
        f'<path d="M0 {height} L{width // 3} {height // 2} L{width * 2 // 3} {height} Z" '
        f'fill="#2f855a"/></svg>'
    ).encode()


def photoshop(width: int = 800, height: int = 600) -> bytes:
    """A PSD with its merged composite (as Photoshop writes it with "Maximize compatibility")."""
    out = io.BytesIO()
    PSDImage.frompil(Image.open(io.BytesIO(photo(width, height)))).save(out)
    return out.getvalue()


def mp3_with_cover(seconds: int = 1) -> bytes:
    """An MP3 of a tone whose ID3v2 tag carries a front cover (APIC) JPEG."""
    out = io.BytesIO()
    rate = 44100
    with av.open(out, "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=rate)
        for number in range(seconds * rate // 1152):
            frame = av.AudioFrame(format="s16p", layout="mono", samples=1152)
            tone = bytes((number * 7 + i) % 64 for i in range(frame.planes[0].buffer_size))
            frame.planes[0].update(tone)
            frame.sample_rate, frame.pts = rate, number * 1152
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    # mutagen's tag classes carry no annotations
    cover = APIC(encoding=3, mime="image/jpeg", type=3, desc="Cover", data=photo(500, 500))  # type: ignore[no-untyped-call]
    tags = ID3()  # type: ignore[no-untyped-call]
    tags.add(cover)  # type: ignore[no-untyped-call]
    tags.save(out)
    return out.getvalue()


DNG_WHITE = 4095  # 12-bit samples


def dng(image: Image.Image, *, orientation: int = 1, preview: bool = False) -> bytes:
    """`image` as a camera would record it in a DNG: a 12-bit RGGB Bayer mosaic with the tags
    LibRaw needs (DNG version, CFA pattern, a colour matrix of linear sRGB, white level,
    orientation), and optionally a full-size RGB preview in IFD 0 (the raw then in a SubIFD,
    as cameras write it). Written with tifffile: no camera's file is shipped in the repo."""
    # The sensor's values are linear light: the picture's sRGB values, their gamma undone.
    rgb = (np.asarray(image.convert("RGB"), dtype=np.float32) / 255) ** 2.2 * 0.9 + 0.02
    mosaic = np.empty(rgb.shape[:2], dtype=np.uint16)
    for row, col, channel in ((0, 0, 0), (0, 1, 1), (1, 0, 1), (1, 1, 2)):  # R G / G B
        mosaic[row::2, col::2] = rgb[row::2, col::2, channel] * DNG_WHITE
    # ColorMatrix1 maps XYZ (D65) to the camera's RGB: a camera whose RGB is linear sRGB.
    xyz_to_srgb = (3.2406, -1.5372, -0.4986, -0.9689, 1.8758, 0.0415, 0.0557, -0.2040, 1.0570)
    to_camera = tuple(part for value in xyz_to_srgb for part in (round(value * 10000), 10000))
    main = [
        (50706, "B", 4, (1, 4, 0, 0), True),  # DNGVersion
        (50707, "B", 4, (1, 1, 0, 0), True),  # DNGBackwardVersion
        (50708, "s", 0, "filejobs demo camera", True),  # UniqueCameraModel
        (50721, "2i", 9, to_camera, True),  # ColorMatrix1
        (50778, "H", 1, 21, True),  # CalibrationIlluminant1: D65
        (50728, "2I", 3, (1, 1, 1, 1, 1, 1), True),  # AsShotNeutral
        (274, "H", 1, orientation, True),
        (271, "s", 0, "filejobs", True),
        (272, "s", 0, "demo camera", True),
    ]
    raw = [
        (33421, "H", 2, (2, 2), True),  # CFARepeatPatternDim
        (33422, "B", 4, (0, 1, 1, 2), True),  # CFAPattern: RGGB
        (50710, "B", 3, (0, 1, 2), True),  # CFAPlaneColor
        (50717, "I", 1, DNG_WHITE, True),  # WhiteLevel
    ]
    out = io.BytesIO()
    with tifffile.TiffWriter(out) as writer:
        if preview:
            picture = np.asarray(image.convert("RGB"), dtype=np.uint8)
            writer.write(picture, photometric="rgb", subfiletype=1, subifds=1, extratags=main)
            writer.write(mosaic, photometric=32803, subfiletype=0, extratags=raw)
        else:
            writer.write(mosaic, photometric=32803, extratags=main + raw)
    return out.getvalue()


# --- office documents, written by LibreOffice from flat OpenDocument ------------------------

_ODF = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2"'
)
_LOREM = (
    "Each page of this report is its own section. The preview shows the first; the page count "
    "says how many there are. "
)


def flat_text(pages: int) -> str:
    """A flat ODT of `pages` pages, each opening with its heading on a new page."""
    body = "".join(
        f'<text:h text:style-name="{"Break" if n else "Title"}" text:outline-level="1">'
        f"Section {n + 1}</text:h>" + f"<text:p>{_LOREM * 6}</text:p>" * 3
        for n in range(pages)
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {_ODF} '
        'office:mimetype="application/vnd.oasis.opendocument.text"><office:automatic-styles>'
        '<style:style style:name="Title" style:family="paragraph"><style:text-properties '
        'fo:font-size="20pt" fo:font-weight="bold" fo:color="#1f4e79"/></style:style>'
        '<style:style style:name="Break" style:family="paragraph"><style:paragraph-properties '
        'fo:break-before="page"/><style:text-properties fo:font-size="20pt" '
        'fo:font-weight="bold" fo:color="#1f4e79"/></style:style></office:automatic-styles>'
        f"<office:body><office:text>{body}</office:text></office:body></office:document>"
    )


def flat_spreadsheet(sheets: int) -> str:
    """A flat ODS of `sheets` sheets, each a small table of figures."""

    def row(*cells: str) -> str:
        cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'
        return "<table:table-row>" + "".join(cell.format(c) for c in cells) + "</table:table-row>"

    tables = "".join(
        f'<table:table table:name="Quarter {n + 1}">'
        + row("region", "orders", "revenue")
        + "".join(row(region, str(10 * (n + 1) + i), f"{(n + 1) * (i + 3) * 1000}")
                  for i, region in enumerate(("north", "south", "east", "west")))
        + "</table:table>"
        for n in range(sheets)
    )  # fmt: skip
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {_ODF} '
        'office:mimetype="application/vnd.oasis.opendocument.spreadsheet">'
        f"<office:body><office:spreadsheet>{tables}</office:spreadsheet></office:body>"
        "</office:document>"
    )


def flat_presentation(slides: int) -> str:
    """A flat ODP of `slides` slides, each a title."""
    pages = "".join(
        f'<draw:page draw:name="slide{n + 1}"><draw:frame svg:x="2cm" svg:y="3cm" '
        'svg:width="20cm" svg:height="4cm"><draw:text-box>'
        f"<text:p>Slide {n + 1}: what filejobs does with your files</text:p>"
        "</draw:text-box></draw:frame></draw:page>"
        for n in range(slides)
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {_ODF} '
        'office:mimetype="application/vnd.oasis.opendocument.presentation">'
        f"<office:body><office:presentation>{pages}</office:presentation></office:body>"
        "</office:document>"
    )


FLAT_SOURCES = {".fodt": flat_text, ".fods": flat_spreadsheet, ".fodp": flat_presentation}


def office_document(target: str, parts: int = 3, *, soffice: str = "soffice") -> bytes:
    """A real `target` document (docx, xlsx, pptx, odt, doc, rtf, epub...) of `parts` pages,
    sheets or slides, as LibreOffice writes it from flat OpenDocument (LibreOffice must be
    installed: make system-deps)."""
    suffix = {"xlsx": ".fods", "xls": ".fods", "ods": ".fods", "pptx": ".fodp", "ppt": ".fodp",
              "odp": ".fodp"}.get(target, ".fodt")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="office-sample-") as scratch:
        folder = Path(scratch)
        source = folder / f"document{suffix}"
        source.write_text(FLAT_SOURCES[suffix](parts))
        subprocess.run(  # noqa: S603 (soffice and our own files)
            [
                soffice,
                f"-env:UserInstallation={(folder / 'profile').as_uri()}",
                "--headless",
                "--convert-to",
                target,
                "--outdir",
                str(folder),
                str(source),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
        return (folder / f"document.{target}").read_bytes()


def sample_set() -> list[Sample]:
    original = photo()
    infected = {job: "cancelled" for job in PARSING_JOBS}
    return [
        Sample("photo.jpg", original, "a 1600x1200 photo"),
        Sample("rotated.jpg", photo(1200, 800, orientation=6), "a photo with EXIF orientation 6"),
        Sample("clip.mp4", video(), "a 2-second H.264 video"),
        Sample("report.pdf", pdf(), "a 2-page PDF"),
        Sample(
            "notes.txt", b"Meeting notes\n\n- ship the local stack\n- measure it\n" * 20, "text"
        ),
        Sample(
            "eicar.com",
            EICAR,
            "the EICAR test virus",
            # Hashing never waits for the scan: it completes, or, when the quarantine moves the
            # object first, it is cancelled with the quarantine's reason.
            expected={**infected, "deduplication_check": ("completed", "cancelled")},
            quarantined=True,
        ),
        Sample("photo-copy.jpg", original, "the same photo again (a duplicate)"),
        Sample(
            "offer.pdf",
            pdf(1, "an offer carrying an exploit nobody has a signature for yet"),
            "a PDF today's definitions pass, tomorrow's know",
            rescan_finds="Demo.Offer.Exploit",
        ),
        # Thumbnailed by processors/image_sources.py: each must have its thumbnail job.
        Sample(
            "drawing.svg",
            svg(),
            "an SVG drawing (rendered by resvg)",
            jobs=(*THUMBED, "compression"),
        ),
        Sample(
            "poster.psd",
            photoshop(),
            "a Photoshop document with its merged composite",
            jobs=(*THUMBED, "compression"),
        ),
        Sample(
            "camera.dng",
            dng(Image.open(io.BytesIO(photo(640, 480))), orientation=6),
            "a camera RAW (DNG) taken with the camera held sideways",
            jobs=THUMBED,
        ),
        Sample(
            "song.mp3",
            mp3_with_cover(),
            "an MP3 whose ID3 tag carries cover art",
            jobs=(*THUMBED, "video_thumbnail"),  # its art, and its waveform and duration
        ),
        # Converted to PDF by LibreOffice (processors/office.py), then previewed.
        Sample("report.docx", office_document("docx", 10), "a 10-page Word document", jobs=OFFICE),
        Sample("budget.xlsx", office_document("xlsx", 3), "a 3-sheet Excel workbook", jobs=OFFICE),
        Sample("deck.pptx", office_document("pptx", 4), "a 4-slide PowerPoint deck", jobs=OFFICE),
        Sample(
            "avatar.jpg",
            photo(900, 900),
            "a profile picture under avatars/, where the demo's preset is bound",
            folder="avatars/",
            jobs=("thumbnail_generation", "virus_scan"),
        ),
        Sample(
            "corrupt.jpg",
            original[:600],
            "a JPEG cut off after 600 bytes",
            expected={"thumbnail_generation": "failed"},
        ),
    ]


def write_samples(folder: Path) -> list[tuple[Sample, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for sample in sample_set():
        path = folder / sample.name
        path.write_bytes(sample.body)
        written.append((sample, path))
    return written
