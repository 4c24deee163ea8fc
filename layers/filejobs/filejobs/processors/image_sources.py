"""The images people have that Pillow alone does not open: each made into a Pillow image to
thumbnail, in the decoder sandbox, by the least powerful reader that does the job.

`DECODERS` adds to thumbnail.py's allow-list one source for each content type (domain/content.py
sniffs them); `open_image` is thumbnail.py's one hook: the source's image, or Pillow's own
decoder for every other type.

SVG: resvg (`resvg-py`), not CairoSVG. resvg is Rust: no scripts, no network client at all, no
libcairo to ship to Lambda, and its XML parser (roxmltree) expands no external entities and
stops entity loops (the billion laughs) itself. CairoSVG parses XML in Python (lxml or
ElementTree), fetches `http(s):` and `file:` URLs through urllib and has had SSRF and XXE
advisories. resvg does read local files, though: an `<image href="/etc/...">` (or `file:`, or
a path relative to its resources dir) is loaded and drawn into the thumbnail. So before it runs,
a bounded scan of the text refuses every `href` and CSS `url()` that is not `#fragment` or
`data:`, and entity declarations that could spell one; the resources dir is an empty dir. The
SVG is rendered at the thumbnail's size, never its declared one (a declared 2,000,000 x
1,000,000 canvas would be 8 TB of pixels), and absurd declared sizes are refused outright.

Photoshop: a PSD's or PSB's merged composite (the flattened image Photoshop writes when
"Maximize compatibility" is on), never its layers, by the reader its header calls for. An 8-bit
PSD of just its mode's colour channels (RGB, CMYK, grayscale, indexed; bitmap at 1 bit) by
Pillow's PsdImagePlugin, already in the layer, in C, with no numpy to import (about 0.6 s of a
job); every other one by `psd-tools` (16 and 32 bits a channel and PSB, which Pillow does not
read; transparency and spot channels, which it misreads), whose only heavy dependency is
numpy, which rawpy needs anyway. The header's size, depth, mode and channels are checked
against the specification and the declared pixels against the budget before either reads
further. A file whose version-info resource says it has no real merged data fails
permanently, saying how to save it.

Camera RAW: LibRaw (`rawpy`). The camera's own embedded full-size JPEG preview where there is
one large enough (LibRaw only locates it; Pillow's JPEG decoder decodes it), turned the way
LibRaw says the camera was held; else a half-size demosaic (a quarter of the sensor's pixels)
within the pixel budget.

JPEG XL: `pillow-jxl-plugin` (libjxl through Rust; manylinux aarch64 wheels for CPython 3.13),
registered only when a JXL is opened, and then the only decoder tried.

Audio cover art: `mutagen` (pure Python) finds an MP3's ID3 APIC, an M4A's `covr` or a FLAC's
PICTURE; the art's own bytes are sniffed and decoded by the one Pillow decoder that type names
(JPEG or PNG), never by "any decoder". No art: a permanent failure.

numpy (rawpy, psd-tools) is imported in the job's child, never in the sandbox's zygote:
OpenBLAS starts threads on import, and the zygote must stay single-threaded to fork safely.
"""

from __future__ import annotations

import array
import io
import re
import struct
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from PIL import Image, UnidentifiedImageError

from filejobs.domain.content import (
    JPEG_XL,
    PHOTOSHOP,
    RAW_IMAGES,
    SVG,
    sniff_content_type,
)
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import short_error

# Source names: strings, since the decoders' names travel to the sandbox in the task's options.
SVG_RENDERER: Final = "SVG-RESVG"
PHOTOSHOP_COMPOSITE: Final = "PHOTOSHOP-COMPOSITE"
CAMERA_RAW: Final = "CAMERA-RAW-LIBRAW"
ID3_COVER_ART: Final = "ID3-COVER-ART"
MP4_COVER_ART: Final = "MP4-COVER-ART"
FLAC_COVER_ART: Final = "FLAC-COVER-ART"
JXL: Final = "JXL"  # pillow-jxl-plugin's Pillow format

DECODERS: Final[Mapping[str, tuple[str, ...]]] = {
    SVG: (SVG_RENDERER,),
    PHOTOSHOP: (PHOTOSHOP_COMPOSITE,),
    JPEG_XL: (JXL,),
    **{raw: (CAMERA_RAW,) for raw in sorted(RAW_IMAGES)},
    "audio/mpeg": (ID3_COVER_ART,),
    "audio/mp4": (MP4_COVER_ART,),
    "audio/flac": (FLAC_COVER_ART,),
}

# Cover art is decoded by its own sniffed type's one decoder: the types the tag formats name.
ART_DECODERS: Final[Mapping[str, str]] = {"image/jpeg": "JPEG", "image/png": "PNG"}

SVG_MAX_BYTES: Final = 8 * 1024 * 1024
# Declared sizes above this (in CSS pixels) are refused: no real drawing is a kilometre wide.
SVG_MAX_DECLARED: Final = 1_000_000
_SVG_ROOT_WINDOW: Final = 64 * 1024  # the root <svg> tag is within the first 64 KB
_SVG_DEFAULT_SIZE: Final = 100.0  # what resvg assumes when the SVG declares no size
_CSS_UNITS: Final[Mapping[str, float]] = {
    "": 1.0,
    "px": 1.0,
    "pt": 4 / 3,
    "pc": 16.0,
    "mm": 96 / 25.4,
    "cm": 96 / 2.54,
    "in": 96.0,
    "em": 16.0,
    "ex": 8.0,
}
_HREF: Final = re.compile(r"""(?<![\w.-])(?:[\w.-]+:)?href\s*=\s*(["'])(.*?)\1""", re.S | re.I)
_CSS_URL: Final = re.compile(r"""(?:url\(|@import)\s*(["']?)(.*?)\1\s*[);]""", re.S | re.I)
_ENTITY: Final = re.compile(r"<!ENTITY\s+(%?)\s*[\w.:-]*\s+(.*?)>", re.S)
_LOCAL_REFERENCE: Final = re.compile(r"\s*(#|data:)", re.I)
_SVG_ROOT: Final = re.compile(r"<svg\b([^>]*)>", re.S)
_ATTRIBUTE: Final = re.compile(r"""(?<![\w:-])(width|height|viewBox)\s*=\s*(["'])(.*?)\2""", re.S)
_LENGTH: Final = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z%]*)\s*")

_PSD_SIGNATURE: Final = b"8BPS"
_PSD_HEADER: Final = struct.Struct(">4sH6xHIIHH")  # signature, version, channels, h, w, depth, mode
# The specification's bounds: a PSD's side is at most 30,000 pixels, a PSB's 300,000; 1 to 56
# channels. Colour modes by Adobe's number: bitmap, grayscale, indexed, RGB, CMYK,
# multichannel, duotone, Lab; each one's colour channels and the depths it is written at.
_PSD_MAX_SIDE: Final = 30_000
_PSB_MAX_SIDE: Final = 300_000
_PSD_MAX_CHANNELS: Final = 56
_COLOUR_CHANNELS: Final[Mapping[int, int]] = {0: 1, 1: 1, 2: 1, 3: 3, 4: 4, 7: 1, 8: 1, 9: 3}
_DEPTHS: Final[Mapping[int, frozenset[int]]] = {
    0: frozenset({1}),
    2: frozenset({8}),
    8: frozenset({8}),
    **{mode: frozenset({8, 16, 32}) for mode in (1, 3, 4, 7, 9)},
}
# What Pillow's PsdImagePlugin decodes right, as (mode, depth): its MODES, less the rare
# multichannel, duotone and Lab, which go to psd-tools with the rest.
_PILLOW_MODES: Final = frozenset({(0, 1), (1, 8), (2, 8), (3, 8), (4, 8)})
# psd-tools' own ceiling on what one decode allocates (its estimate, checked before it does):
# below the sandbox's 2 GiB of address space (thumbnail.LIMITS), which numpy and the libraries
# share, so an over-large composite fails saying so rather than by running out of memory. At
# the pixel budget's 50 MP, 16 bits a channel: RGB estimates at 0.84 GiB (1.1 GiB if ZIP with
# prediction), CMYK or RGB with alpha 1.1 (1.5) GiB; CMYK with alpha is refused.
PSD_TOOLS_MAX_ALLOC: Final = 1536 * 1024 * 1024
# How Pillow's and psd-tools' parsers say the bytes are broken (a decompressor, a short read,
# a length or an index that the data does not back, a record of an unknown kind).
_PILLOW_ERRORS: Final = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    IndexError,
    KeyError,
    struct.error,
)
_PSD_TOOLS_ERRORS: Final = (
    *_PILLOW_ERRORS,
    TypeError,
    AssertionError,
    AttributeError,
    NotImplementedError,
    zlib.error,
)
# The composite's compression: raw, RLE (PackBits rows), ZIP without and with prediction.
_RAW: Final = 0
_RLE: Final = 1
_ZIP: Final = frozenset({2, 3})
_VERSION_INFO: Final = 1057  # image resource: version info, whose 5th byte is hasRealMergedData
_MAX_RESOURCES: Final = 16 * 1024 * 1024
NO_COMPOSITE: Final = (
    "the Photoshop file has no merged composite image (it was saved without "
    '"Maximize compatibility"): save it again with that option on to get a thumbnail'
)
NO_COVER_ART: Final = "no embedded cover art: the audio file carries no picture to thumbnail"

# LibRaw's flip (how the camera was held) -> the turn that makes the preview upright.
_FLIPS: Final[Mapping[int, Image.Transpose]] = {
    3: Image.Transpose.ROTATE_180,
    5: Image.Transpose.ROTATE_90,  # 90 degrees counter-clockwise
    6: Image.Transpose.ROTATE_270,  # 90 degrees clockwise
}

Source = Callable[[BinaryIO, int, int], Image.Image]


def open_image(
    path: Path | BinaryIO, decoders: tuple[str, ...], largest: int, max_pixels: int
) -> Image.Image:
    """The image to thumbnail: from the one source `decoders` names, else from Pillow's own
    decoders among `decoders` (only those)."""
    source = _SOURCES.get(decoders[0]) if len(decoders) == 1 else None
    if source is None:
        if JXL in decoders:
            import pillow_jxl  # noqa: F401, PLC0415 - registers JXL
        return Image.open(path, formats=decoders)
    if isinstance(path, Path):
        with path.open("rb") as file:
            return source(file, largest, max_pixels)
    return source(path, largest, max_pixels)


# --- SVG ---------------------------------------------------------------------------------------


def render_svg(source: BinaryIO, largest: int, _max_pixels: int) -> Image.Image:
    """The SVG rendered by resvg with its long edge at `largest` pixels, external references
    refused first."""
    import resvg_py  # noqa: PLC0415

    text = _svg_text(source)
    refuse_external_references(text)
    width, height = declared_svg_size(text)
    landscape = width >= height  # the long edge is the one given: resvg scales the other
    with tempfile.TemporaryDirectory(prefix="svg-resources-") as empty:
        try:
            png = resvg_py.svg_to_bytes(
                svg_string=text,
                resources_dir=empty,
                width=largest if landscape else None,
                height=None if landscape else largest,
            )
        except ValueError as error:
            raise PermanentError(f"the SVG could not be rendered: {short_error(error)}") from None
    image = _named(Image.open(io.BytesIO(bytes(png)), formats=("PNG",)), "SVG")
    image.load()
    if max(image.size) > largest + 1:  # resvg sized it otherwise than the declared size says
        raise PermanentError(f"the SVG rendered at {image.size}, not within {largest} pixels")
    return image


def _svg_text(source: BinaryIO) -> str:
    data = source.read(SVG_MAX_BYTES + 1)
    if len(data) > SVG_MAX_BYTES:
        raise PermanentError(f"the SVG is larger than the {SVG_MAX_BYTES // 2**20} MB accepted")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PermanentError("the SVG is not UTF-8 text") from None


def refuse_external_references(text: str) -> None:
    """PermanentError for any reference that could make resvg read something beside the SVG:
    an `href` or CSS `url()` that is not `#fragment` or `data:`, an external or parameter
    entity, or an entity whose text holds markup or references (which could spell an href the
    scan does not see). Regular expressions over at most SVG_MAX_BYTES: linear, no parser."""
    for pattern in (_HREF, _CSS_URL):
        for match in pattern.finditer(text):
            if not _LOCAL_REFERENCE.match(match.group(2)):
                raise PermanentError(
                    "the SVG references an external resource "
                    f"({short_error(match.group(2), 80)!r}); only #fragments and data: URIs are "
                    "drawn"
                )
    for match in _ENTITY.finditer(text):
        parameter, definition = match.groups()
        external = re.match(r"\s*(SYSTEM|PUBLIC)\b", definition)
        if parameter or external or re.search(r"[<&%]", definition):
            raise PermanentError(
                "the SVG declares an entity that is external, a parameter entity or markup; "
                "only plain-text entities are accepted"
            )


def declared_svg_size(text: str) -> tuple[float, float]:
    """The root <svg>'s size in CSS pixels as resvg reads it (width and height, else the
    viewBox scaled to whichever of them is given, else 100); PermanentError if absurd."""
    root = _SVG_ROOT.search(text[:_SVG_ROOT_WINDOW])
    attributes = (
        {m.group(1): m.group(3) for m in _ATTRIBUTE.finditer(root.group(1))} if root else {}
    )
    width = _length("width", attributes.get("width"))
    height = _length("height", attributes.get("height"))
    box = _view_box(attributes.get("viewBox"))
    if width is None and height is None and box is not None:
        width, height = box
    elif width is not None and height is None:
        height = width * box[1] / box[0] if box else _SVG_DEFAULT_SIZE
    elif height is not None and width is None:
        width = height * box[0] / box[1] if box else _SVG_DEFAULT_SIZE
    size = (width or _SVG_DEFAULT_SIZE, height or _SVG_DEFAULT_SIZE)
    sides = [*size, *(box or ())]
    if max(sides) > SVG_MAX_DECLARED:
        raise PermanentError(
            f"the SVG declares a {size[0]:.0f}x{size[1]:.0f} canvas (viewBox {box}), above the "
            f"{SVG_MAX_DECLARED:,} pixels a side accepted"
        )
    return size


def _length(name: str, value: str | None) -> float | None:
    """A CSS length in pixels; None when absent, a percentage or `auto` (resvg then sizes by
    the viewBox). PermanentError for anything else that is not a positive length: an entity
    or a unit resvg might read otherwise could make the size it draws at differ from ours."""
    if value is None or value.strip().endswith("%") or value.strip() == "auto":
        return None
    match = _LENGTH.fullmatch(value)
    pixels = (
        float(match.group(1)) * _CSS_UNITS[match.group(2)]
        if match and match.group(2) in _CSS_UNITS
        else 0
    )
    if pixels <= 0:
        raise PermanentError(
            f"the SVG's {name} ({short_error(value, 40)!r}) is not a length to size it by"
        )
    return pixels


def _view_box(value: str | None) -> tuple[float, float] | None:
    if value is not None and "&" in value:  # an entity: resvg would read what we cannot
        raise PermanentError("the SVG's viewBox is spelt with an entity reference")
    parts = re.split(r"[\s,]+", value.strip()) if value else []
    try:
        width, height = float(parts[2]), float(parts[3])
    except (IndexError, ValueError):
        return None
    return (width, height) if width > 0 and height > 0 else None


# --- Photoshop ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhotoshopHeader:
    """The 26-byte file header: what decides which reader decodes the composite."""

    version: int  # 1: PSD, 2: PSB
    channels: int  # the composite's stored channels: colour, then alpha or spot channels
    width: int
    height: int
    depth: int  # bits per channel
    color_mode: int  # Adobe's numbers: _COLOUR_CHANNELS' keys

    @property
    def format_name(self) -> str:
        return "PSD" if self.version == 1 else "PSB"

    @property
    def pillow_reads_it(self) -> bool:
        """Pillow's PsdImagePlugin decodes the composite right, in C, without numpy: a PSD
        (not a PSB) of 8 bits a channel (1 for bitmap) with exactly its mode's colour
        channels. Pillow reads no other depth, and takes any 4th RGB channel for alpha: a
        saved selection would punch holes, and a transparent composite keeps the white it is
        matted on; psd-tools tells transparency from extra channels and unmattes it."""
        return (
            self.version == 1
            and (self.color_mode, self.depth) in _PILLOW_MODES
            and self.channels == _COLOUR_CHANNELS[self.color_mode]
        )


def photoshop_composite(source: BinaryIO, _largest: int, max_pixels: int) -> Image.Image:
    """The PSD's or PSB's merged composite, by the reader its header calls for;
    PermanentError when there is none, or the header or the data is broken."""
    header = _photoshop_header(source)
    if header.width * header.height > max_pixels:
        raise PermanentError(
            f"the Photoshop file declares {header.width} x {header.height} pixels "
            f"({header.width * header.height / 1e6:.1f} MP): thumbnail_generation decodes at "
            f"most {max_pixels / 1e6:g} MP"
        )
    if not _has_real_merged_data(source):
        raise PermanentError(NO_COMPOSITE)
    _check_composite_length(source, header)
    source.seek(0)
    if header.pillow_reads_it:
        return _pillow_composite(source, header)
    return _psd_tools_composite(source, header)


def _photoshop_header(source: BinaryIO) -> PhotoshopHeader:
    """The header, checked against the format's own bounds, so that no reader is handed
    a size, depth or mode the specification does not have."""
    data = source.read(_PSD_HEADER.size)
    if len(data) < _PSD_HEADER.size:
        raise PermanentError("the Photoshop file is cut short inside its header")
    signature, version, channels, height, width, depth, mode = _PSD_HEADER.unpack(data)
    if signature != _PSD_SIGNATURE or version not in (1, 2):
        raise PermanentError("the file is not a Photoshop document (no 8BPS version 1 or 2)")
    header = PhotoshopHeader(version, channels, width, height, depth, mode)
    longest = _PSD_MAX_SIDE if version == 1 else _PSB_MAX_SIDE
    if not (0 < width <= longest and 0 < height <= longest):
        raise PermanentError(
            f"the {header.format_name} header declares {width} x {height} pixels: a side "
            f"must be 1 to {longest:,}"
        )
    if mode not in _COLOUR_CHANNELS or depth not in _DEPTHS[mode]:
        raise PermanentError(
            f"the Photoshop header declares colour mode {mode} at {depth} bits a channel, "
            "which Photoshop does not write"
        )
    if not _COLOUR_CHANNELS[mode] <= channels <= _PSD_MAX_CHANNELS:
        raise PermanentError(
            f"the Photoshop header declares {channels} channels: colour mode {mode} needs "
            f"{_COLOUR_CHANNELS[mode]} to {_PSD_MAX_CHANNELS}"
        )
    return header


def _has_real_merged_data(source: BinaryIO) -> bool:
    """Whether the version-info resource (1057) says the composite is real; True when the file
    has no such resource (older writers), since their composite always is."""
    (color_data,) = struct.unpack(">I", _read_exactly(source, 4))
    source.seek(color_data, io.SEEK_CUR)
    (length,) = struct.unpack(">I", _read_exactly(source, 4))
    resources = _read_exactly(source, min(length, _MAX_RESOURCES))
    at = 0
    while at + 12 <= len(resources) and resources[at : at + 4] == b"8BIM":
        (resource_id,) = struct.unpack_from(">H", resources, at + 4)
        name_length = resources[at + 6]
        at += 6 + (name_length + 2 if name_length % 2 == 0 else name_length + 1)
        if at + 4 > len(resources):
            break
        (size,) = struct.unpack_from(">I", resources, at)
        data = resources[at + 4 : at + 4 + size]
        if resource_id == _VERSION_INFO and len(data) >= 5:
            return data[4] != 0
        at += 4 + size + size % 2
    return True


def _check_composite_length(source: BinaryIO, header: PhotoshopHeader) -> None:
    """PermanentError when the file ends before its composite's data does. psd-tools decodes
    RLE cut short without a word, the missing rows black: a cut upload would make a half-black
    thumbnail. The data's length is known before decoding: raw, from the header; RLE, from its
    table of each row's byte count. (ZIP data, which carries no length, fails in zlib.)"""
    source.seek(_PSD_HEADER.size)
    for length_bytes in (4, 4, 4 if header.version == 1 else 8):  # colours, resources, layers
        source.seek(int.from_bytes(_read_exactly(source, length_bytes), "big"), io.SEEK_CUR)
    start = source.tell()
    size = source.seek(0, io.SEEK_END)
    source.seek(start)
    (compression,) = struct.unpack(">H", _read_exactly(source, 2))
    rows = header.channels * header.height
    if compression == _RAW:
        needed = 2 + rows * ((header.width * header.depth + 7) // 8)
    elif compression == _RLE:
        count = array.array("H" if header.version == 1 else "I")
        table = source.read(rows * count.itemsize)
        if len(table) < rows * count.itemsize:
            needed = 2 + rows * count.itemsize
        else:
            count.frombytes(table)
            if sys.byteorder == "little":
                count.byteswap()
            needed = 2 + len(table) + sum(count)
    elif compression in _ZIP:
        return
    else:
        raise PermanentError(
            f"the Photoshop file's composite is compressed by method {compression}, which "
            "Photoshop does not write (0 to 3)"
        )
    if size - start < needed:
        raise PermanentError(
            "the Photoshop file could not be read: it is cut short inside its composite image "
            f"({size - start:,} of its {needed:,} bytes)"
        )


def _pillow_composite(source: BinaryIO, header: PhotoshopHeader) -> Image.Image:
    """The composite, decoded, as a plain image. PsdImagePlugin numbers the layers as frames
    1..n (with the composite before them, at a frame 0 it refuses to seek to) and parses the
    layer records to count them: thumbnail.py would seek to 0 and fail on a layered file, or
    fail on layer records the composite never needed. The copy has neither."""
    try:
        with Image.open(source, formats=("PSD",)) as document:
            document.load()
            composite = document.copy()  # its info (the ICC profile CMYK needs) goes along
    except UnidentifiedImageError:  # its message is the file object's repr
        raise PermanentError(
            "the Photoshop file could not be read: its sections are broken"
        ) from None
    except _PILLOW_ERRORS as error:
        raise PermanentError(
            f"the Photoshop file could not be read: {short_error(error)}"
        ) from None
    return _named(composite, header.format_name)


def _psd_tools_composite(source: BinaryIO, header: PhotoshopHeader) -> Image.Image:
    """The stored merged image by psd-tools: `topil` reads the image data section, never the
    layers (`composite()` would re-composite them when asked, slower and not always as
    Photoshop drew them). 16- and 32-bit channels come out as 8-bit, CMYK as CMYK (its
    inverted storage undone) and transparency as alpha, unmatted from Photoshop's white.
    Colour profiles are left to thumbnail.py, as for every other decoder: the ICC profile
    rides along in `info`, and a CMYK composite goes to sRGB through it there."""
    from psd_tools import PSDDecompressionWarning, PSDImage  # noqa: PLC0415 - numpy: child only
    from psd_tools.constants import Resource  # noqa: PLC0415

    try:
        # psd-tools paints a channel it cannot decompress black and only warns: a corrupt or
        # cut file would make a black thumbnail. An error, so that it fails for good instead.
        with warnings.catch_warnings():
            warnings.simplefilter("error", PSDDecompressionWarning)
            document = PSDImage.open(source, max_alloc_bytes=PSD_TOOLS_MAX_ALLOC)
            composite = document.topil(apply_icc=False)
            icc = document.image_resources.get_data(Resource.ICC_PROFILE)
    except PSDDecompressionWarning:  # its message says the channel was painted black
        raise PermanentError(
            "the Photoshop file could not be read: its composite image data is corrupt"
        ) from None
    except _PSD_TOOLS_ERRORS as error:
        raise PermanentError(
            f"the Photoshop file could not be read: {short_error(error)}"
        ) from None
    if composite is None:
        raise PermanentError(NO_COMPOSITE)
    if isinstance(icc, bytes) and icc:
        composite.info["icc_profile"] = icc
    return _named(composite, header.format_name)


# --- camera RAW --------------------------------------------------------------------------------


def camera_raw(source: BinaryIO, largest: int, max_pixels: int) -> Image.Image:
    """The RAW's embedded preview when it covers `largest`, upright; else a half-size demosaic."""
    import rawpy  # noqa: PLC0415 - numpy, in the job's child only

    try:
        with rawpy.imread(source) as raw:
            preview = _raw_preview(raw, largest)
            if preview is not None:
                return preview
            return _demosaiced(raw, largest, max_pixels)
    except rawpy.LibRawError as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):  # LibRaw's own message, as C bytes
            reason = reason.decode("utf-8", "replace")
        raise PermanentError(
            f"the camera RAW could not be decoded: {short_error(reason)}"
        ) from None


def _raw_preview(raw: Any, largest: int) -> Image.Image | None:
    import rawpy  # noqa: PLC0415

    try:
        thumb = raw.extract_thumb()
    except (rawpy.LibRawNoThumbnailError, rawpy.LibRawUnsupportedThumbnailError):
        return None
    preview: Image.Image
    if thumb.format == rawpy.ThumbFormat.JPEG:
        preview = Image.open(io.BytesIO(thumb.data), formats=("JPEG",))
        if preview.getexif().get(0x0112, 1) != 1:
            return preview  # its own EXIF orientation: thumbnail.py applies it
    else:
        preview = _named(Image.fromarray(thumb.data), "RAW preview")
    if max(preview.size) < min(largest, max(raw.sizes.width, raw.sizes.height)):
        return None  # a small thumbnail, not the full-size preview: demosaic instead
    turn = _FLIPS.get(raw.sizes.flip)
    if turn is None:
        return preview
    preview.load()
    return _named(preview.transpose(turn), "RAW preview")


def _demosaiced(raw: Any, largest: int, max_pixels: int) -> Image.Image:
    """Half size (each 2x2 Bayer cell one pixel: a quarter of the work) when that still covers
    `largest`, else full size; within the pixel budget either way."""
    half = max(raw.sizes.width, raw.sizes.height) // 2 >= largest
    width, height = raw.sizes.width // (2 if half else 1), raw.sizes.height // (2 if half else 1)
    if width * height > max_pixels:
        raise PermanentError(
            f"the camera RAW demosaics to {width} x {height} pixels "
            f"({width * height / 1e6:.1f} MP): thumbnail_generation decodes at most "
            f"{max_pixels / 1e6:g} MP"
        )
    rgb = raw.postprocess(half_size=half, use_camera_wb=True, output_bps=8)
    return _named(Image.fromarray(rgb), "RAW")  # LibRaw has applied the camera's orientation


# --- audio cover art ---------------------------------------------------------------------------


def id3_cover_art(source: BinaryIO, largest: int, max_pixels: int) -> Image.Image:
    from mutagen.id3 import ID3, ID3NoHeaderError  # noqa: PLC0415

    try:
        tags = ID3(source)
    except ID3NoHeaderError:
        raise PermanentError(NO_COVER_ART) from None
    pictures = tags.getall("APIC")
    front = [p for p in pictures if p.type == 3] or pictures  # the front cover first
    return _art([bytes(p.data) for p in front])


def mp4_cover_art(source: BinaryIO, largest: int, max_pixels: int) -> Image.Image:
    from mutagen.mp4 import MP4  # noqa: PLC0415

    tags: Any = MP4(source).tags  # None when the file has no ilst atom
    return _art([bytes(cover) for cover in (tags.get("covr", []) if tags else [])])


def flac_cover_art(source: BinaryIO, largest: int, max_pixels: int) -> Image.Image:
    from mutagen.flac import FLAC  # noqa: PLC0415

    pictures = FLAC(source).pictures
    front = [p for p in pictures if p.type == 3] or pictures
    return _art([bytes(p.data) for p in front])


def _art(candidates: list[bytes]) -> Image.Image:
    if not candidates or not candidates[0]:
        raise PermanentError(NO_COVER_ART)
    art = candidates[0]
    art_type = sniff_content_type(art[:4096])
    decoder = ART_DECODERS.get(art_type)
    if decoder is None:
        raise PermanentError(
            f"the embedded cover art is {art_type}, not an image type cover art is read as "
            f"({', '.join(sorted(ART_DECODERS))})"
        )
    return Image.open(io.BytesIO(art), formats=(decoder,))


def _with_audio_errors(read: Source) -> Source:
    """mutagen's errors (a broken tag, a file that is not the container) as PermanentError."""

    def reading(source: BinaryIO, largest: int, max_pixels: int) -> Image.Image:
        from mutagen import MutagenError  # noqa: PLC0415

        try:
            return read(source, largest, max_pixels)
        except MutagenError as error:
            # some of mutagen's errors say only "error": then the tag is malformed, say that
            reason = str(error).strip()
            reason = reason if len(reason) > len("error") else "the tag is malformed"
            raise PermanentError(
                f"the audio file's tags could not be read: {short_error(reason)}"
            ) from None

    return reading


# --- helpers -----------------------------------------------------------------------------------


def _named[I: Image.Image](image: I, source_format: str) -> I:
    """The image, reporting the format it came from (the job's result says what was decoded)."""
    image.format = source_format
    return image


def _read_exactly(source: BinaryIO, count: int) -> bytes:
    data = source.read(count)
    if len(data) < count:
        raise PermanentError("the Photoshop file is cut short before its composite image")
    return data


_SOURCES: Final[Mapping[str, Source]] = {
    SVG_RENDERER: render_svg,
    PHOTOSHOP_COMPOSITE: photoshop_composite,
    CAMERA_RAW: camera_raw,
    ID3_COVER_ART: _with_audio_errors(id3_cover_art),
    MP4_COVER_ART: _with_audio_errors(mp4_cover_art),
    FLAC_COVER_ART: _with_audio_errors(flac_cover_art),
}
