"""thumbnail_generation: small WebP (or JPEG, or AVIF) renditions of an uploaded image, one per
size.

The object is streamed to the attempt's workspace (never held in memory twice), the pixels it
would decode are checked against a budget before a single one is (a PNG of a few hundred bytes
can declare 30000x30000; a 200 MP JPEG decodes at 1/8 scale: `check_decoded_pixels`), then it is
decoded once and resized to every requested long edge, largest first, each smaller one from the
previous.

JPEG is decoded at reduced scale (libjpeg's DCT scaling, `Image.draft`) to the smallest of 1/8,
1/4, 1/2 or 1 that still covers the largest requested size: most of the speed is there.

Input a retry cannot fix (corrupt, truncated, empty, unsupported, too large, bad options) is a
PermanentError with a readable message; anything else is retried as transient.

`render_thumbnails` is the core (a file in, encoded thumbnails out), with no S3: the bench calls
it. The worker runs it in the decoder sandbox (processors/sandbox), through `decode_thumbnails`:
Pillow and its codecs never run in the process that holds the function's credentials.

The job's result also tells about the image (`render_bundle`, image_facts.py): a BlurHash and a
ThumbHash, its dominant colours, a perceptual hash, and its camera facts (make, model, lens,
capture time, orientation, whether it has a GPS position: never the position). They are made
from the same decode, on the smallest rendition and the opened file's metadata.

Every thumbnail is sRGB and carries no metadata: pixels tagged with another RGB profile (Adobe
RGB, Display P3) are converted to sRGB (`_to_srgb`), CMYK through its profile (`_normalise`),
and the encoders are given no EXIF, XMP or ICC profile, so no GPS position or camera serial
leaves with a thumbnail. A job that asks (`keep_metadata`) gets the source's EXIF back in its
thumbnails, less what locates or identifies the camera or its owner (`kept_exif`); never XMP,
IPTC or a profile.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, cast

from PIL import ExifTags, Image, ImageCms, UnidentifiedImageError

from filejobs.config import ConfigurationError
from filejobs.domain.job_options import (
    OPTIONS,
    THUMBNAIL_MAX_SIZE,
    THUMBNAIL_MAX_SIZES,
    THUMBNAIL_MIN_SIZE,
    THUMBNAIL_SIZES,
    OptionError,
)
from filejobs.domain.job_values import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors import image_facts, image_sources
from filejobs.processors.base import StopRequested, Work, short_error
from filejobs.processors.sandbox.client import Sandbox, shared_sandbox
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Decoded
from filejobs.processors.source import (
    ObjectSource,
    content_type_of,
    decoder_for,
    human_size,
    reading_progress,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

try:  # HEIC/HEIF decoding, where the imaging layer ships pi-heif.
    from pi_heif import register_heif_opener  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - the layer without pi-heif still reads the rest
    pass
else:
    register_heif_opener()

DEFAULT_SIZES: Final = (128, 256, 512)
MIN_SIZE: Final = THUMBNAIL_MIN_SIZE
MAX_SIZE: Final = THUMBNAIL_MAX_SIZE
MAX_SIZE_COUNT: Final = THUMBNAIL_MAX_SIZES
# The pixels one thumbnail may decode, checked before decoding (`check_decoded_pixels`): the
# declared size of most formats, the reduced size a JPEG is decoded at. 50 MP of RGBA is 200 MB.
MAX_PIXELS: Final = 50_000_000
# Pillow's own bomb check is on the declared size at open: it would refuse a 200 MP JPEG that is
# decoded at 1/8. Ours replaces it, on what is decoded, in the same process, before any decode.
Image.MAX_IMAGE_PIXELS = None
MAX_BYTES: Final = 200 * 1024 * 1024
# What one image's decode may use in the sandbox: 50 MP of RGBA is 200 MB, plus its resized
# copies and the libraries' own address space.
LIMITS: Final = DecoderLimits(memory_bytes=2048 * MiB, cpu_seconds=30, wall_seconds=90)

FORMATS: Final[Mapping[str, tuple[str, str]]] = {
    # input_data["format"] (domain/job_options.py THUMBNAIL_FORMATS) -> (Pillow format, type)
    "webp": ("WEBP", "image/webp"),
    "jpeg": ("JPEG", "image/jpeg"),
    "avif": ("AVIF", "image/avif"),  # Pillow's own libavif (aom), in its wheels since 11.3
}
DEFAULT_FORMAT: Final = "webp"

# The one Pillow decoder for each image type a thumbnail is made of (domain/content.py's
# THUMBNAILABLE_IMAGES). An image is opened with its sniffed type's decoder alone: bytes sniffed
# as a PNG never reach another of Pillow's parsers, and none ever reaches those that run an
# external program (EPS runs Ghostscript) or parse scientific formats (FITS, HDF5, GRIB).
PILLOW_DECODERS: Final[Mapping[str, tuple[str, ...]]] = {
    "image/jpeg": ("JPEG",),
    "image/png": ("PNG",),
    "image/gif": ("GIF",),
    "image/webp": ("WEBP",),
    "image/tiff": ("TIFF",),
    "image/bmp": ("BMP",),
    "image/heic": ("HEIF",),  # pi-heif's
    "image/heif": ("HEIF",),
    "image/avif": ("AVIF",),
}
EVERY_DECODER: Final = tuple(sorted({n for names in PILLOW_DECODERS.values() for n in names}))
# SVG, Photoshop, camera RAW, JPEG XL and audio cover art: each type's one source
# (processors/image_sources.py), which makes the Pillow image this module thumbnails.
DECODERS: Final[Mapping[str, tuple[str, ...]]] = {**PILLOW_DECODERS, **image_sources.DECODERS}
_EMPTY: Final = "the file is empty (0 bytes): there is no image to thumbnail"
WEBP_QUALITY: Final = 80
JPEG_QUALITY: Final = 85
# AVIF (aom) at quality 50 matches WebP 80's fidelity (PSNR 33.9 vs 33.6 dB on a 512 px photo)
# in 29% fewer bytes. Speed 7 encodes that 512 px thumbnail in 45 ms, 4x WebP's 11.5 ms (2048 px:
# 307 ms, 1.9x); speed 6 costs 104 ms (9x) for 3% fewer bytes, speed 8 21 ms for 25% more
# bytes, speed 4 over half a second (bench figures of issue 48, one thread, one core). One
# thread: Lambda gives one vCPU up to 1,769 MB, and the sandbox counts every thread's CPU.
AVIF_QUALITY: Final = 50
AVIF_SPEED: Final = 7
# Box-reduce to within this factor of the target, then Lanczos: Pillow's thumbnail() default.
REDUCING_GAP: Final = 2.0

_ORIENTATION_TAG: Final = 0x0112
# EXIF orientation -> the turn that makes the pixels upright (as ImageOps.exif_transpose does).
_UPRIGHT: Final[Mapping[int, Image.Transpose]] = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# Formats whose own header says which way up, applied by their decoder: JPEG XL's standard has
# the Exif orientation ignored (a JPEG transcoded to JXL keeps its Exif, 6 and all, for a
# bit-exact way back, and its codestream says 6 too, which libjxl applies by default).
_ORIENTED_BY_THEIR_HEADER: Final = frozenset({"JXL"})
# What `keep_metadata` never copies from the source's EXIF: the GPS position; what names the
# camera, the lens or their owner (a serial is a person's as surely as a position is); the
# maker notes, the vendors' undocumented blocks where Canon, Nikon and Sony write the serial
# again; XMP, IPTC and ICC profiles a TIFF-style IFD0 may embed; the pointers to sub-IFDs
# (copied as bare offsets they would point nowhere); and the pixel dimensions, which are the
# source's, not the thumbnail's.
_NOT_KEPT: Final = frozenset(
    {
        ExifTags.IFD.GPSInfo,
        ExifTags.IFD.Exif,
        ExifTags.IFD.Interop,
        ExifTags.Base.SubIFDs,
        ExifTags.Base.BodySerialNumber,
        ExifTags.Base.CameraOwnerName,
        ExifTags.Base.LensSerialNumber,
        0xC62F,  # CameraSerialNumber (DNG)
        ExifTags.Base.MakerNote,
        ExifTags.Base.XMLPacket,
        ExifTags.Base.IPTCNAA,
        ExifTags.Base.InterColorProfile,
        ExifTags.Base.ExifImageWidth,
        ExifTags.Base.ExifImageHeight,
    }
)
# A JPEG's APP1 segment holds at most 65,533 bytes; EXIF beyond this (thousands of tags) is
# not kept at all rather than cut.
MAX_KEPT_EXIF_BYTES: Final = 60_000
_ALPHA_MODES: Final = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_SRGB = ImageCms.createProfile("sRGB")
# The facts' pixels come from the smallest thumbnail at least this large (else the decoded image):
# ThumbHash, BlurHash, the palette and the perceptual hash each shrink it to 32-48 px.
FACTS_SOURCE_EDGE: Final = 100


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    format: str  # a key of FORMATS
    keep_metadata: bool = False

    @classmethod
    def of(
        cls, input_data: Mapping[str, Any] | None, default_sizes: tuple[int, ...] = DEFAULT_SIZES
    ) -> Options:
        """The job's sizes (else the deployment's) and format, read by the definition the API
        checks requests with (domain/job_options.py); PermanentError saying which option is
        wrong and why (a job stored before its options were checked: a retry cannot fix it)."""
        try:
            options = OPTIONS[JobType.THUMBNAIL_GENERATION].read(input_data)
        except OptionError as error:
            raise PermanentError(f"bad option {error}") from None
        return cls(options["sizes"] or default_sizes, options["format"], options["keep_metadata"])


def checked_sizes(raw_sizes: object) -> tuple[int, ...]:
    """Thumbnail sizes, largest first, each once; PermanentError saying what is wrong."""
    try:
        sizes: tuple[int, ...] = THUMBNAIL_SIZES.read(raw_sizes, "sizes", {})
    except OptionError as error:
        raise PermanentError(str(error)) from None
    return sizes


def sizes_setting(value: str | None) -> tuple[int, ...]:
    """The deployment's default sizes (the template's ThumbnailSizes, `THUMBNAIL_SIZES`): each
    size costs a PUT and its storage per image, so a deployment picks how many it writes."""
    if value is None or not value.strip():
        return checked_sizes(DEFAULT_SIZES)
    try:
        return checked_sizes([int(part) for part in value.split(",")])
    except (ValueError, PermanentError) as error:
        raise ConfigurationError(
            f"THUMBNAIL_SIZES must be pixel sizes separated by commas, like 128,512: {error}"
        ) from None


@dataclass(frozen=True)
class SourceInfo:
    width: int
    height: int
    format: str
    mode: str
    frames: int
    orientation_applied: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "height": self.height,
            "format": self.format,
            "mode": self.mode,
            "frames": self.frames,
            "orientation_applied": self.orientation_applied,
        }


@dataclass(frozen=True)
class Rendered:
    size: int  # the requested long edge
    width: int
    height: int
    format: str
    data: bytes

    @property
    def name(self) -> str:
        return f"thumb-{self.size}.{self.format}"


@dataclass(frozen=True)
class Bundle:
    """One decode's thumbnails and, when asked for, the image's facts (image_facts.py)."""

    source: SourceInfo
    thumbnails: list[Rendered]
    facts: dict[str, Any]


def render_thumbnails(
    path: Path | BinaryIO,
    sizes: Sequence[int] = DEFAULT_SIZES,
    fmt: str = DEFAULT_FORMAT,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    max_pixels: int = MAX_PIXELS,
    decoders: tuple[str, ...] = EVERY_DECODER,
    keep_metadata: bool = False,
) -> tuple[SourceInfo, list[Rendered]]:
    """Decodes the image at `path` (a path or an open file) once, with one of `decoders`
    (Pillow's format names) only, and encodes one thumbnail per size, largest first.

    A thumbnail never upscales: an image smaller than a size is encoded at its own dimensions.
    With `keep_metadata`, each carries the source's EXIF as `kept_exif` leaves it.
    Raises PermanentError for input no retry can fix, StopRequested when told to stop.
    """
    bundle = render_bundle(
        path,
        sizes,
        fmt,
        should_stop=should_stop,
        max_pixels=max_pixels,
        decoders=decoders,
        facts=False,
        keep_metadata=keep_metadata,
    )
    return bundle.source, bundle.thumbnails


def render_bundle(
    path: Path | BinaryIO,
    sizes: Sequence[int] = DEFAULT_SIZES,
    fmt: str = DEFAULT_FORMAT,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    max_pixels: int = MAX_PIXELS,
    decoders: tuple[str, ...] = EVERY_DECODER,
    facts: bool = True,
    keep_metadata: bool = False,
) -> Bundle:
    """`render_thumbnails`, and with `facts` the image's placeholders, colours, perceptual hash
    and metadata (image_facts.py), from the same decode, within image_facts.MAX_FACTS_BYTES."""
    wanted = sorted(set(sizes), reverse=True)
    pil_format, _ = FORMATS[fmt]
    metadata: dict[str, Any] = {}
    exif = b""
    try:
        with image_sources.open_image(path, decoders, wanted[0], max_pixels) as im:
            info, base = _decode(im, wanted[0], max_pixels)
            base = _to_srgb(base, im.info.get("icc_profile"))
            if facts:
                metadata = image_facts.metadata_facts(im)
            if keep_metadata:
                exif = kept_exif(im)
    except PermanentError:
        raise
    except UnidentifiedImageError:
        raise PermanentError(_unidentified(path, decoders)) from None
    except (OSError, SyntaxError, ValueError, EOFError, IndexError, KeyError) as error:
        # Pillow's ways of saying "this file is broken": truncated, bad header, bad chunk.
        raise PermanentError(f"the image could not be decoded: {short_error(error)}") from None

    rendered: list[Rendered] = []
    current = facts_source = base
    for size in wanted:
        if should_stop():
            raise StopRequested
        target = _fit(base.size, size)
        if current.size != target:
            current = current.resize(target, Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP)
        if max(current.size) >= FACTS_SOURCE_EDGE:
            facts_source = current
        rendered.append(Rendered(size, *current.size, fmt, _encode(current, pil_format, exif)))
    if not facts:
        return Bundle(info, rendered, {})
    found = {**image_facts.pixel_facts(facts_source), "metadata": metadata}
    return Bundle(info, rendered, image_facts.within_budget(found))


def _decode(im: Image.Image, largest: int, max_pixels: int) -> tuple[SourceInfo, Image.Image]:
    """The first frame, upright, in RGB, RGBA or L, at least `largest` on its long edge if the
    image is that large (JPEG decoded at reduced scale)."""
    width, height = im.size
    if width <= 0 or height <= 0:
        raise PermanentError(f"the image declares no pixels ({width}x{height})")
    source_format = im.format or "unknown"
    source_mode = im.mode
    frames = int(getattr(im, "n_frames", 1))
    if frames > 1:
        im.seek(0)
    if source_format == "JPEG" and largest < max(width, height):
        # Ask for the largest thumbnail's box: draft picks the smallest DCT scale covering it,
        # and the image's size becomes the size that will be decoded.
        im.draft(im.mode, _fit((width, height), largest))
    # Before anything that may decode: a PNG's EXIF can follow its pixels, and reading it loads.
    check_decoded_pixels(source_format, (width, height), im.size, max_pixels)
    orientation = im.getexif().get(_ORIENTATION_TAG, 1)
    im.load()
    icc = im.info.get("icc_profile")
    image, rotate = _upright(im, source_format, orientation)
    image = _normalise(image, icc if isinstance(icc, bytes) else None)
    info = SourceInfo(width, height, source_format, source_mode, frames, rotate)
    return info, image


def _upright(im: Image.Image, source_format: str, orientation: object) -> tuple[Image.Image, bool]:
    """The loaded `im` turned the way its EXIF orientation (read before it loaded) says it is
    seen, and whether the orientation was applied."""
    if not isinstance(orientation, int) or orientation not in _UPRIGHT:
        return im, False  # upright already, or a value no camera writes
    if source_format in _ORIENTED_BY_THEIR_HEADER:
        return im, False
    if _ORIENTATION_TAG not in im.getexif():
        # Its decoder turned the pixels itself and dropped the tag as it did (Pillow's TIFF
        # reader, each frame): turning them again would show a sideways scan upside down.
        return im, True
    # The turn alone: ImageOps.exif_transpose also rewrites the image's EXIF, and raises on a
    # tag Pillow read but cannot write back (a Make typed FLOAT), failing the job for metadata
    # no thumbnail carries.
    return im.transpose(_UPRIGHT[orientation]), True


def check_decoded_pixels(
    source_format: str, declared: tuple[int, int], decoded: tuple[int, int], max_pixels: int
) -> None:
    """The pixel budget is on the pixels decoded, checked before a single one is: a JPEG is
    decoded at 1/2, 1/4 or 1/8 of its size (its DCT scaling), so a 200 MP phone photo costs
    3 MP; every other format is decoded whole, so its declared size is what it costs (a PNG of
    a few hundred bytes may declare 30,000 x 30,000)."""
    (width, height), (wide, high) = declared, decoded
    if wide * high <= max_pixels:
        return
    budget = f"thumbnail_generation decodes at most {max_pixels / 1e6:g} MP"
    if (wide, high) != (width, height):
        raise PermanentError(
            f"the JPEG declares {width} x {height} pixels ({width * height / 1e6:.1f} MP); "
            f"even decoded at 1/{round(width / wide)} scale it is {wide} x {high} "
            f"({wide * high / 1e6:.1f} MP), and {budget}"
        )
    scaled = " (a JPEG is decoded at 1/8 scale at most)" if source_format == "JPEG" else ""
    raise PermanentError(
        f"the image declares {width} x {height} pixels ({width * height / 1e6:.1f} MP), all of "
        f"which would be decoded{scaled}: {budget}"
    )


def _normalise(im: Image.Image, icc: bytes | None) -> Image.Image:
    """RGB, RGBA (alpha kept) or L with 8 bits a channel, whatever the source's mode."""
    mode = im.mode
    if mode == "CMYK":
        return _cmyk_to_rgb(im, icc)
    if mode.startswith("I") or mode == "F":
        return _to_8_bit(im)
    if mode in _ALPHA_MODES or "transparency" in im.info:  # RGBA, LA, PA; P, L, RGB with a key
        return im if mode == "RGBA" else im.convert("RGBA")
    return im if mode in ("RGB", "L") else im.convert("RGB")  # "1", "P", "YCbCr", "LAB", "HSV"


def _to_srgb(im: Image.Image, icc: object) -> Image.Image:
    """RGB pixels tagged with another RGB profile (Adobe RGB, Display P3, ProPhoto) converted
    to sRGB: the thumbnails carry no profile, and untagged pixels are shown as sRGB, where Adobe
    RGB's would look dull. Untagged, sRGB-tagged, grey and CMYK-tagged images (already converted
    by `_cmyk_to_rgb`) are left as they are, and so is a profile LittleCMS cannot read."""
    if im.mode not in ("RGB", "RGBA") or not isinstance(icc, bytes) or not icc:
        return im
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        if profile.profile.xcolor_space != "RGB " or _is_srgb(profile):
            return im
        converted = ImageCms.profileToProfile(im, profile, _SRGB, outputMode=im.mode)
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return im
    return converted if converted is not None else im


def _is_srgb(profile: ImageCms.ImageCmsProfile) -> bool:
    """sRGB by its description ("sRGB IEC61966-2.1", "sRGB built-in", "sRGB v4..."): converting
    those would cost a transform and change nothing."""
    return "srgb" in ImageCms.getProfileDescription(profile).lower()


def _cmyk_to_rgb(im: Image.Image, icc: bytes | None) -> Image.Image:
    """Through the embedded ICC profile when there is one (print CMYK), else Pillow's formula."""
    if icc:
        try:
            profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            converted = ImageCms.profileToProfile(im, profile, _SRGB, outputMode="RGB")
        except (ImageCms.PyCMSError, OSError, ValueError):
            pass  # a broken or non-CMYK profile: the plain conversion below is still right enough
        else:
            if converted is not None:
                return converted
    return im.convert("RGB")


def _to_8_bit(im: Image.Image) -> Image.Image:
    """16-bit and 32-bit grey (I;16*, I, F) scaled into 0..255, not clipped at 255.

    Integer images within 0..65535 are 16-bit samples (scaled by 1/257); floats within 0..1 are
    normalised samples (x255); anything else is stretched from its own minimum to maximum.
    """
    wide = im.convert("F")
    low, high = cast("tuple[float, float]", wide.getextrema())  # one band: (min, max)
    if im.mode != "F" and low >= 0 and high <= 65535:
        scale, offset = 1 / 257, 0.0
    elif im.mode == "F" and low >= 0 and high <= 1:
        scale, offset = 255.0, 0.0
    elif high > low:
        scale, offset = 255 / (high - low), -low * 255 / (high - low)
    else:
        scale, offset = 0.0, 0.0
    return wide.point(lambda v: v * scale + offset).convert("L")


def kept_exif(im: Image.Image) -> bytes:
    """The source's EXIF for `keep_metadata`: IFD0 and the Exif IFD, less `_NOT_KEPT`, with the
    orientation set to 1 (the pixels were turned upright; a viewer, or AVIF's own rotation
    box, would turn them again). Written anew, never edited in place: Pillow writes back a GPS
    IFD it has read even once its pointer is gone. Pillow writes no IFD1, so the source's own
    embedded thumbnail (the uncropped original, at times) is not kept. Empty when the source
    has none, or EXIF Pillow cannot read or write: metadata never costs a job its thumbnails."""
    try:
        source = im.getexif()
        kept = Image.Exif()
        kept.update({tag: v for tag, v in source.items() if tag not in _NOT_KEPT})
        details = source.get_ifd(ExifTags.IFD.Exif)
        kept_details = {tag: v for tag, v in details.items() if tag not in _NOT_KEPT}
        if kept_details:
            kept.get_ifd(ExifTags.IFD.Exif).update(kept_details)
        if not kept:
            return b""
        if _ORIENTATION_TAG in kept:
            kept[_ORIENTATION_TAG] = 1
        data = kept.tobytes()
    except Exception:  # a hostile block: whatever Pillow raises, the thumbnails go without
        return b""
    return data if len(data) <= MAX_KEPT_EXIF_BYTES else b""


def _encode(im: Image.Image, pil_format: str, exif: bytes = b"") -> bytes:
    """`exif` is the only metadata an encoder is given; AVIF is told there is no ICC profile,
    as its writer would otherwise copy the one `im.info` holds."""
    out = io.BytesIO()
    if pil_format == "JPEG":
        if im.mode == "RGBA":  # JPEG has no alpha: flatten onto white
            flat = Image.new("RGB", im.size, (255, 255, 255))
            flat.paste(im, mask=im.getchannel("A"))
            im = flat
        im.save(out, "JPEG", quality=JPEG_QUALITY, exif=exif)
    elif pil_format == "AVIF":
        im.save(
            out,
            "AVIF",
            quality=AVIF_QUALITY,
            speed=AVIF_SPEED,
            max_threads=1,
            icc_profile=None,
            exif=exif,
        )
    else:
        if im.mode == "L":
            im = im.convert("RGB")
        im.save(out, "WEBP", quality=WEBP_QUALITY, exif=exif)
    return out.getvalue()


def _fit(size: tuple[int, int], long_edge: int) -> tuple[int, int]:
    """`size` scaled so its long edge is `long_edge` (never up), each side at least 1."""
    width, height = size
    longest = max(width, height)
    if longest <= long_edge:
        return size
    scale = long_edge / longest
    return max(1, round(width * scale)), max(1, round(height * scale))


def _unidentified(path: Path | BinaryIO, decoders: Sequence[str]) -> str:
    if _is_empty(path):
        return _EMPTY
    return f"the file is not an image its type's decoder reads (decoders: {', '.join(decoders)})"


def _is_empty(path: Path | BinaryIO) -> bool:
    if isinstance(path, Path):
        return path.stat().st_size == 0
    return path.seek(0, io.SEEK_END) == 0


def warm_up() -> None:
    """In the sandbox's zygote, before the first job: every Pillow plugin imported, and each
    decoder and encoder run once on a tiny image, so that what their libraries set up on first
    use is done once here instead of in every job's fresh process. Single-threaded, as the
    zygote must stay to fork safely."""
    Image.init()
    tiny = Image.new("RGB", (32, 24), (200, 120, 40))
    for pil_format in ("JPEG", "PNG", "GIF", "WEBP", "TIFF", "BMP"):
        encoded = io.BytesIO()
        tiny.save(encoded, pil_format)
        encoded.seek(0)
        render_bundle(encoded, (16,), "webp", decoders=(pil_format,))
        render_thumbnails(encoded, (16,), "jpeg", decoders=(pil_format,))


def decode_thumbnails(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: `render_bundle` on the open file, with the options the worker
    checked; the thumbnails' bytes as outputs named `thumb-{size}.{format}`, the image's facts
    as the result's "facts"."""
    bundle = render_bundle(
        source,
        options["sizes"],
        options["format"],
        max_pixels=options["max_pixels"],
        decoders=tuple(options["decoders"]),
        keep_metadata=options.get("keep_metadata") is True,
    )
    facts = [
        {"size": t.size, "width": t.width, "height": t.height, "format": t.format}
        for t in bundle.thumbnails
    ]
    outputs = {thumb.name: thumb.data for thumb in bundle.thumbnails}
    result = {"source": bundle.source.as_dict(), "thumbnails": facts, "facts": bundle.facts}
    return Decoded(result, outputs)


class ThumbnailProcessor:
    def __init__(
        self,
        s3: S3Client,
        *,
        default_sizes: tuple[int, ...] = DEFAULT_SIZES,
        max_pixels: int = MAX_PIXELS,
        max_bytes: int = MAX_BYTES,
        sandbox: Sandbox | None = None,
        limits: DecoderLimits = LIMITS,
    ) -> None:
        self._source = ObjectSource(s3)
        self._default_sizes = default_sizes
        self._max_pixels = max_pixels
        self._max_bytes = max_bytes
        self._sandbox = sandbox or shared_sandbox(__name__)
        self._limits = limits

    def __call__(self, work: Work) -> dict[str, Any]:
        started = time.perf_counter()
        options = Options.of(work.job.input_data, self._default_sizes)
        content_type = content_type_of(work.job, self._source)
        decoders = decoder_for(
            content_type, DECODERS, job_type="thumbnail_generation", empty=_EMPTY
        )
        path = self._source.download(
            work.job,
            work.workspace / "source",
            work.should_stop,
            max_bytes=self._max_bytes,
            progress=reading_progress(work, verb="downloaded", end=0.4),
        )
        if work.should_stop():
            raise StopRequested
        work.log(
            f"read {human_size(path.stat().st_size)} {content_type}; sizes "
            f"{', '.join(str(s) for s in options.sizes)} as {options.format}"
        )
        work.report_progress(0.4, "decoding and resizing")
        names = {f"thumb-{size}.{options.format}": size for size in options.sizes}
        decoded = self._sandbox.decode(
            decode_thumbnails,
            path,
            options={
                "sizes": list(options.sizes),
                "format": options.format,
                "keep_metadata": options.keep_metadata,
                "max_pixels": self._max_pixels,
                "decoders": list(decoders),
            },
            limits=self._limits,
            should_stop=work.should_stop,
            output_allowed=names.__contains__,
        )
        _, output_type = FORMATS[options.format]
        facts = {fact.get("size"): fact for fact in _facts(decoded.result.get("thumbnails"))}
        work.log(_source_line(decoded.result.get("source")))
        thumbnails = []
        for done, (name, size) in enumerate(sorted(names.items(), key=lambda item: item[1])):
            if work.should_stop():
                raise StopRequested
            data, fact = decoded.outputs.get(name), facts.get(size, {})
            if data is None:
                raise PermanentError(f"the decoder returned no {name}")
            work.report_progress(0.8 + 0.2 * done / len(names), f"writing {name}")
            key = work.outputs.put_bytes(name, data, output_type)
            work.log(
                f"wrote {key}: {fact.get('width')}x{fact.get('height')}, {human_size(len(data))}"
            )
            thumbnails.append(
                {
                    "size": size,
                    "kind": "thumbnail",
                    "width": fact.get("width"),
                    "height": fact.get("height"),
                    "key": key,
                    "bytes": len(data),
                    "format": options.format,
                }
            )
        image = image_facts.checked(decoded.result.get("facts"))
        return {
            "source": decoded.result.get("source"),
            "thumbnails": thumbnails,
            **image,
            "duration_ms": round((time.perf_counter() - started) * 1000),
        }


def _source_line(source: object) -> str:
    """What the decoder saw: 'decoded 4032x3024 JPEG (RGB), EXIF orientation applied'."""
    if not isinstance(source, dict):
        return "decoded the image"
    line = f"decoded {source.get('width')}x{source.get('height')} {source.get('format')}"
    if source.get("mode"):
        line += f" ({source['mode']})"
    frames = source.get("frames")
    if isinstance(frames, int) and frames > 1:
        line += f", {frames} frames (the first one used)"
    if source.get("orientation_applied") is True:
        line += ", EXIF orientation applied"
    return line


def _facts(value: object) -> list[dict[str, Any]]:
    """The decoder's per-thumbnail facts, those that are objects (its answer is not trusted)."""
    return [fact for fact in value if isinstance(fact, dict)] if isinstance(value, list) else []
