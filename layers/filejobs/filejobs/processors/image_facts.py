"""What thumbnail_generation tells about an image besides its thumbnails: two placeholders
(BlurHash, ThumbHash), its colours, a perceptual hash, and the camera facts people filter by.

Pure functions of a Pillow image, run in the decoder sandbox's child on pixels already decoded:
`pixel_facts` on a rendition of at most ~128 px (each fact resizes it to the 32-48 px it needs),
`metadata_facts` on the opened source (its EXIF, IPTC and XMP). Both together cost a few
milliseconds, whatever the source's size.

No numpy: the math is a few thousand multiply-adds on 32x32 pixels (plain Python, separable
sums: 3-7 ms for all four), while importing numpy costs 0.4-0.6 s in every job's child (it may
not be imported in the sandbox's zygote: OpenBLAS starts threads). The algorithms are the
references': BlurHash as woltapp's C encoder, ThumbHash as evanw's `rgbaToThumbHash`
(JavaScript rounding), the perceptual hash as `imagehash.phash` (a 32x32 greyscale DCT-II, the
8x8 lowest frequencies against their median), without imagehash's scipy and PyWavelets (over
100 MB).

What reaches the result is bounded: each text is stripped of control characters and capped, the
lists are short, and the whole stays within MAX_FACTS_BYTES of JSON (it is stored on the job's
DynamoDB item). GPS coordinates are never read into it: only whether the image has them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import operator
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Final, cast
from xml.etree import ElementTree
from xml.parsers import expat  # noqa: F401 - loaded once, in the sandbox's zygote

from PIL import Image, ImageFile, IptcImagePlugin

# The compact JSON of every fact together, at most: the job's DynamoDB item holds it. A camera
# photo's facts take about 500 bytes; IPTC and XMP extras are trimmed first (`within_budget`).
MAX_FACTS_BYTES: Final = 700
FACT_KEYS: Final = ("placeholders", "colors", "perceptual_hash", "metadata")
FACTS_EDGE: Final = 128  # the pixel facts start from at most this (each shrinks it further)
BLURHASH_EDGE: Final = 32  # pixels on the long edge: BlurHash keeps 4x3 cosines of them
THUMBHASH_EDGE: Final = 32  # the reference allows 100; its 7 cosines need far fewer
PALETTE_EDGE: Final = 48
PALETTE_COLOURS: Final = 5
PALETTE_MERGE: Final = 6  # colours this close on every channel are one
PHASH_EDGE: Final = 32  # imagehash.phash: hash_size 8 x highfreq_factor 4
PHASH_BITS: Final = 8
XMP_MAX_BYTES: Final = 256 * 1024  # a bigger packet is not read (Lightroom's are ~10-60 KB)
KEYWORDS: Final = 5
_LIMITS: Final = {"make": 24, "model": 40, "lens": 40, "title": 48, "label": 16, "keyword": 24}

_WHITE: Final = (255, 255, 255)
_BASE83: Final = (
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~"
)
_TO_LINEAR: Final = tuple(  # each 8-bit sRGB value in linear light, 0..1
    v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
    for v in (i / 255 for i in range(256))
)

# EXIF (TIFF tag numbers): IFD0, the Exif IFD, the GPS IFD.
_MAKE, _MODEL, _ORIENTATION = 0x010F, 0x0110, 0x0112
_EXIF_IFD, _GPS_IFD = 0x8769, 0x8825
_TAKEN, _DIGITIZED, _TAKEN_OFFSET, _DIGITIZED_OFFSET = 0x9003, 0x9004, 0x9011, 0x9012
_LENS_MODEL: Final = 0xA434
_GPS_LATITUDE, _GPS_LONGITUDE = 2, 4
# IPTC IIM: record 2's object name, keywords, headline, copyright; record 1's character set.
_IPTC_TITLE, _IPTC_KEYWORDS, _IPTC_HEADLINE, _IPTC_COPYRIGHT = (2, 5), (2, 25), (2, 105), (2, 116)
_IPTC_CHARSET, _UTF8_ESCAPE = (1, 90), b"\x1b%G"
_XMP_NS: Final = {
    "xmp": "http://ns.adobe.com/xap/1.0/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "exif": "http://ns.adobe.com/exif/1.0/",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
}
_EXIF_DATE: Final = re.compile(r"\d{4}:\d\d:\d\d \d\d:\d\d:\d\d")
_OFFSET: Final = re.compile(r"[+-]\d\d:\d\d")


# --- pixels -----------------------------------------------------------------------------------


def pixel_facts(im: Image.Image) -> dict[str, Any]:
    """The placeholders, colours and perceptual hash of `im` (RGB, RGBA or L; best a rendition
    of about 100-128 px: each fact shrinks it further)."""
    im = _shrunk(im, FACTS_EDGE, Image.Resampling.BOX)  # whatever size it came at
    rgba = im if im.mode == "RGBA" else im.convert("RGBA")
    flat = _flatten(rgba)
    palette = palette_of(rgba)
    return {
        "placeholders": {"blurhash": blurhash_of(flat), "thumbhash": thumbhash_of(rgba)},
        "colors": {"dominant": palette[0]["hex"] if palette else None, "palette": palette},
        "perceptual_hash": {"algorithm": "phash", "value": phash_of(flat)},
    }


def _flatten(rgba: Image.Image) -> Image.Image:
    """RGB, transparent areas on white (as the JPEG thumbnails show them)."""
    if _least_alpha(rgba) == 255:  # fully opaque
        return rgba.convert("RGB")
    flat = Image.new("RGB", rgba.size, _WHITE)
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return flat


def _least_alpha(rgba: Image.Image) -> int:
    low, _ = cast("tuple[int, int]", rgba.getchannel("A").getextrema())
    return low


def _shrunk(im: Image.Image, edge: int, resample: Image.Resampling) -> Image.Image:
    """`im` with its long edge at most `edge` pixels (never enlarged), aspect kept."""
    width, height = im.size
    scale = edge / max(width, height)
    if scale >= 1:
        return im
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return im.resize(size, resample, reducing_gap=2.0)


def _projections(
    channel: Sequence[float], width: int, height: int, xs: Sequence[Sequence[float]]
) -> list[list[float]]:
    """For each row, its dot product with each of the basis rows `xs`: the first half of a
    separable 2-D transform (then each output is one dot product down the columns)."""
    rows = [channel[y * width : (y + 1) * width] for y in range(height)]
    return [[sum(map(operator.mul, row, basis)) for basis in xs] for row in rows]


def _column_sum(projections: list[list[float]], index: int, ys: Sequence[float]) -> float:
    return sum(row[index] * fy for row, fy in zip(projections, ys, strict=True))


# BlurHash (https://blurha.sh, woltapp/blurhash's C encoder)


def blurhash_of(rgb: Image.Image) -> str:
    """4x3 components for a landscape image, 3x4 for a portrait one: 28 characters."""
    small = _shrunk(rgb, BLURHASH_EDGE, Image.Resampling.BOX)
    width, height = small.size
    nx, ny = (4, 3) if width >= height else (3, 4)
    data = small.tobytes()
    channels = [[_TO_LINEAR[v] for v in data[c::3]] for c in range(3)]
    xs = [[math.cos(math.pi * i * x / width) for x in range(width)] for i in range(nx)]
    ys = [[math.cos(math.pi * j * y / height) for y in range(height)] for j in range(ny)]
    projections = [_projections(ch, width, height, xs) for ch in channels]
    factors = []
    for j in range(ny):
        for i in range(nx):
            norm = (1.0 if i == j == 0 else 2.0) / (width * height)
            factors.append([norm * _column_sum(p, i, ys[j]) for p in projections])
    dc, ac = factors[0], factors[1:]
    peak = max((abs(v) for factor in ac for v in factor), default=0.0)
    quantised_peak = max(0, min(82, math.floor(peak * 166 - 0.5)))
    maximum = (quantised_peak + 1) / 166
    text = _base83(nx - 1 + (ny - 1) * 9, 1) + _base83(quantised_peak, 1)
    text += _base83((_to_srgb8(dc[0]) << 16) + (_to_srgb8(dc[1]) << 8) + _to_srgb8(dc[2]), 4)
    for r, g, b in ac:
        quant = [_quantise_ac(v / maximum) for v in (r, g, b)]
        text += _base83(quant[0] * 19 * 19 + quant[1] * 19 + quant[2], 2)
    return text


def _quantise_ac(value: float) -> int:
    signed_root = math.copysign(math.sqrt(abs(value)), value)
    return max(0, min(18, math.floor(signed_root * 9 + 9.5)))


def _to_srgb8(linear: float) -> int:
    v = max(0.0, min(1.0, linear))
    if v <= 0.0031308:
        return int(v * 12.92 * 255 + 0.5)
    return int((1.055 * v ** (1 / 2.4) - 0.055) * 255 + 0.5)


def _base83(value: int, length: int) -> str:
    return "".join(_BASE83[value // 83 ** (length - i) % 83] for i in range(1, length + 1))


# ThumbHash (https://evanw.github.io/thumbhash/, evanw/thumbhash's rgbaToThumbHash)


def thumbhash_of(rgba: Image.Image) -> str:
    """The hash's bytes in standard base64 (what the reference's demo and decoders take)."""
    small = _shrunk(rgba, THUMBHASH_EDGE, Image.Resampling.BOX)
    return base64.b64encode(_thumbhash_bytes(small)).decode()


def _thumbhash_bytes(rgba: Image.Image) -> bytes:
    width, height = rgba.size
    count = width * height
    data = rgba.tobytes()
    alpha = [a / 255 for a in data[3::4]]
    colour = [[v / 255 for v in data[c::4]] for c in range(3)]
    total_alpha = sum(alpha)
    average = [
        sum(map(operator.mul, alpha, ch)) / total_alpha if total_alpha else 0.0 for ch in colour
    ]
    has_alpha = total_alpha < count
    # Composited onto the average colour, then luminance, yellow-blue, red-green, alpha.
    r, g, b = (
        [avg * (1 - a) + a * v for a, v in zip(alpha, ch, strict=True)]
        for avg, ch in zip(average, colour, strict=True)
    )
    lum = [(rr + gg + bb) / 3 for rr, gg, bb in zip(r, g, b, strict=True)]
    yb = [(rr + gg) / 2 - bb for rr, gg, bb in zip(r, g, b, strict=True)]
    rg = [rr - gg for rr, gg in zip(r, g, strict=True)]
    limit = 5 if has_alpha else 7  # fewer luminance terms when alpha takes bytes
    lx = max(1, _js_round(limit * width / max(width, height)))
    ly = max(1, _js_round(limit * height / max(width, height)))

    def encode(channel: list[float], nx: int, ny: int) -> tuple[float, list[float], float]:
        return _thumbhash_channel(channel, width, height, nx, ny)

    l_dc, l_ac, l_scale = encode(lum, max(3, lx), max(3, ly))
    p_dc, p_ac, p_scale = encode(yb, 3, 3)
    q_dc, q_ac, q_scale = encode(rg, 3, 3)
    a_dc, a_ac, a_scale = encode(alpha, 5, 5) if has_alpha else (1.0, [], 1.0)
    landscape = width > height
    header24 = (
        _js_round(63 * l_dc)
        | _js_round(31.5 + 31.5 * p_dc) << 6
        | _js_round(31.5 + 31.5 * q_dc) << 12
        | _js_round(31 * l_scale) << 18
        | int(has_alpha) << 23
    )
    header16 = (
        (ly if landscape else lx)
        | _js_round(63 * p_scale) << 3
        | _js_round(63 * q_scale) << 9
        | int(landscape) << 15
    )
    out = [header24 & 255, header24 >> 8 & 255, header24 >> 16, header16 & 255, header16 >> 8]
    if has_alpha:
        out.append(_js_round(15 * a_dc) | _js_round(15 * a_scale) << 4)
    factors = [*l_ac, *p_ac, *q_ac, *a_ac]
    start = len(out)
    out.extend([0] * ((len(factors) + 1) // 2))
    for index, factor in enumerate(factors):
        out[start + index // 2] |= _js_round(15 * factor) << ((index & 1) * 4)
    return bytes(out)


def _thumbhash_channel(
    channel: list[float], width: int, height: int, nx: int, ny: int
) -> tuple[float, list[float], float]:
    """(DC, AC normalised into 0..1, AC's scale) over the reference's triangle of cosines."""
    pairs = [(cx, cy) for cy in range(ny) for cx in range(nx) if cx * ny < nx * (ny - cy)]
    xs = [[math.cos(math.pi / width * cx * (x + 0.5)) for x in range(width)] for cx in range(nx)]
    ys = [[math.cos(math.pi / height * cy * (y + 0.5)) for y in range(height)] for cy in range(ny)]
    projections = _projections(channel, width, height, xs)
    values = [_column_sum(projections, cx, ys[cy]) / (width * height) for cx, cy in pairs]
    dc, ac = values[0], values[1:]
    scale = max((abs(f) for f in ac), default=0.0)
    if scale:
        ac = [0.5 + 0.5 / scale * f for f in ac]
    return dc, ac, scale


def _js_round(value: float) -> int:
    """JavaScript's Math.round (halves up), which the reference's bytes are made with."""
    return math.floor(value + 0.5)


# Colours


def palette_of(rgba: Image.Image) -> list[dict[str, Any]]:
    """Up to PALETTE_COLOURS colours of the opaque pixels (median cut), most frequent first,
    each with its share of them (rounded to 0.01); none for a fully transparent image."""
    small = _shrunk(rgba, PALETTE_EDGE, Image.Resampling.BOX)
    opaque = _opaque_pixels(small)
    if opaque is None:
        return []
    quantised = opaque.quantize(PALETTE_COLOURS, Image.Quantize.MEDIANCUT)
    colours = quantised.getpalette() or []
    found: list[tuple[int, tuple[int, ...]]] = []
    for count, index in sorted(quantised.getcolors() or [], key=lambda c: -c[0]):
        at = cast("int", index) * 3  # a P image's colours are palette indexes
        found.append((count, tuple(colours[at : at + 3])))
    merged: list[list[Any]] = []  # [count, rgb]: near-equal colours (a cut through a flat area)
    for count, rgb in found:
        same = next((m for m in merged if _near(m[1], rgb)), None)
        if same is None:
            merged.append([count, rgb])
        else:
            same[0] += count
    total = sum(count for count, _ in merged)
    ranked = sorted(merged, key=lambda m: -m[0])
    return [{"hex": _hex(rgb), "share": round(count / total, 2)} for count, rgb in ranked]


def _hex(rgb: tuple[int, ...]) -> str:
    return "#" + "".join(f"{channel:02x}" for channel in rgb)


def _near(first: tuple[int, ...], second: tuple[int, ...]) -> bool:
    return max(abs(a - b) for a, b in zip(first, second, strict=True)) <= PALETTE_MERGE


def _opaque_pixels(rgba: Image.Image) -> Image.Image | None:
    """The pixels at least half opaque, as an RGB image (one row when some are not)."""
    if _least_alpha(rgba) >= 128:
        return rgba.convert("RGB")
    data = rgba.tobytes()
    kept = b"".join(data[i : i + 3] for i in range(0, len(data), 4) if data[i + 3] >= 128)
    if not kept:
        return None
    return Image.frombytes("RGB", (len(kept) // 3, 1), kept)


# Perceptual hash (imagehash.phash)


def phash_of(rgb: Image.Image) -> str:
    """64 bits as 16 hex digits, as imagehash prints them; close images differ in few bits."""
    grey = rgb.convert("L").resize((PHASH_EDGE, PHASH_EDGE), Image.Resampling.LANCZOS)
    n = PHASH_EDGE
    # scipy.fftpack.dct's unnormalised DCT-II (the factor 2 does not move the median).
    basis = [
        [2 * math.cos(math.pi * k * (2 * i + 1) / (2 * n)) for i in range(n)]
        for k in range(PHASH_BITS)
    ]
    projections = _projections(list(grey.tobytes()), n, n, basis)
    low = [
        _column_sum(projections, v, basis[u]) for u in range(PHASH_BITS) for v in range(PHASH_BITS)
    ]
    median = statistics.median(low)
    bits = "".join("1" if value > median else "0" for value in low)
    return f"{int(bits, 2):016x}"


def hamming(first: str, second: str) -> int:
    """Bits that differ between two perceptual hashes (hex)."""
    return (int(first, 16) ^ int(second, 16)).bit_count()


# --- metadata ---------------------------------------------------------------------------------


def metadata_facts(im: Image.Image) -> dict[str, Any]:
    """The camera, lens, capture time, orientation and whether there is a GPS position (never
    the position); the keywords of IPTC and XMP (Lightroom writes the same ones in both), and a
    few fields of each. A malformed block loses its own facts: never the job, nor the others'."""
    exif = _guarded(lambda: _exif_facts(im), {})
    xmp = _guarded(lambda: _xmp_facts(_xmp_packet(im)), {})
    iptc = _guarded(lambda: _iptc_facts(im), {})
    xmp_time, xmp_gps = xmp.pop("taken_at", None), xmp.pop("gps", False)
    return {
        "camera_make": exif.get("make"),
        "camera_model": exif.get("model"),
        "lens": exif.get("lens"),
        "taken_at": exif.get("taken_at") or xmp_time,
        "orientation": exif.get("orientation"),
        "gps_present": bool(exif.get("gps") or xmp_gps),
        "keywords": _keywords([*iptc.pop("keywords", []), *xmp.pop("keywords", [])]),
        "iptc": iptc,
        "xmp": xmp,
    }


def _guarded(read: Callable[[], dict[str, Any]], absent: dict[str, Any]) -> dict[str, Any]:
    # Metadata is a bonus: whatever a hostile or broken block makes Pillow or the XML parser
    # raise costs its facts, never the thumbnails already made.
    try:
        return read()
    except Exception:
        return absent


def _exif_facts(im: Image.Image) -> dict[str, Any]:
    exif = im.getexif()
    sub = exif.get_ifd(_EXIF_IFD) if _EXIF_IFD in exif else {}
    gps = exif.get_ifd(_GPS_IFD) if _GPS_IFD in exif else {}
    orientation = exif.get(_ORIENTATION)
    taken = _exif_time(sub.get(_TAKEN), sub.get(_TAKEN_OFFSET)) or _exif_time(
        sub.get(_DIGITIZED), sub.get(_DIGITIZED_OFFSET)
    )
    return {
        "make": clean_text(exif.get(_MAKE), _LIMITS["make"]),
        "model": clean_text(exif.get(_MODEL), _LIMITS["model"]),
        "lens": clean_text(sub.get(_LENS_MODEL), _LIMITS["lens"]),
        "taken_at": taken,
        "orientation": orientation if type(orientation) is int and 1 <= orientation <= 8 else None,
        "gps": _GPS_LATITUDE in gps and _GPS_LONGITUDE in gps,
    }


def _exif_time(value: object, offset: object) -> str | None:
    """'2024:05:01 12:34:56' (+ '+02:00') as ISO 8601; None unless it is a real time."""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not isinstance(text, str) or not _EXIF_DATE.fullmatch(text.strip()[:19]):
        return None
    try:
        moment = datetime.strptime(text.strip()[:19], "%Y:%m:%d %H:%M:%S")
    except ValueError:  # 0000:00:00 00:00:00, month 13
        return None
    zone = offset.strip() if isinstance(offset, str) and _OFFSET.fullmatch(offset.strip()) else ""
    return moment.isoformat() + zone


def _iptc_facts(im: Image.Image) -> dict[str, Any]:
    if not isinstance(im, ImageFile.ImageFile):
        return {}
    records = IptcImagePlugin.getiptcinfo(im) or {}
    charset = records.get(_IPTC_CHARSET)
    utf8 = isinstance(charset, bytes) and charset.startswith(_UTF8_ESCAPE)

    def texts(key: tuple[int, int]) -> list[str]:
        value = records.get(key)
        values = value if isinstance(value, list) else [value] if value is not None else []
        return [_iptc_text(v, utf8) for v in values if isinstance(v, bytes)]

    facts = {
        "title": _first_text([*texts(_IPTC_TITLE), *texts(_IPTC_HEADLINE)], _LIMITS["title"]),
        "keywords": _keywords(texts(_IPTC_KEYWORDS)),
        "copyright": _first_text(texts(_IPTC_COPYRIGHT), _LIMITS["title"]),
    }
    return {key: value for key, value in facts.items() if value}


def _iptc_text(value: bytes, utf8: bool) -> str:
    if utf8:
        return value.decode("utf-8", "replace")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _xmp_packet(im: Image.Image) -> bytes | None:
    packet = im.info.get("xmp")
    if isinstance(packet, str):
        packet = packet.encode("utf-8", "replace")
    return packet if isinstance(packet, bytes) else None


def _xmp_facts(packet: bytes | None) -> dict[str, Any]:
    """Rating, label and keywords (dc:subject); whether exif:GPSLatitude is there; the capture
    time when EXIF had none. A packet over XMP_MAX_BYTES, or with a DTD, is not parsed: XMP
    never has a DTD, and without one there is no entity to expand (billion laughs) or fetch."""
    if not packet or len(packet) > XMP_MAX_BYTES:
        return {}
    text = packet.decode("utf-8", "replace").strip("\x00 \r\n\t")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        return {}
    root = ElementTree.fromstring(text)  # noqa: S314 - no DTD (above): nothing to expand
    values = _xmp_values(root)
    facts: dict[str, Any] = {
        "rating": _rating(values.get(f"{{{_XMP_NS['xmp']}}}Rating")),
        "label": _first_text(values.get(f"{{{_XMP_NS['xmp']}}}Label", []), _LIMITS["label"]),
        "keywords": _keywords(values.get(f"{{{_XMP_NS['dc']}}}subject", [])),
        "gps": f"{{{_XMP_NS['exif']}}}GPSLatitude" in values,
        "taken_at": _xmp_time(values.get(f"{{{_XMP_NS['exif']}}}DateTimeOriginal")),
    }
    return {key: value for key, value in facts.items() if value not in (None, [], False)}


_XMP_WANTED: Final = frozenset(
    f"{{{_XMP_NS[prefix]}}}{name}"
    for prefix, name in (
        ("xmp", "Rating"),
        ("xmp", "Label"),
        ("dc", "subject"),
        ("exif", "GPSLatitude"),
        ("exif", "DateTimeOriginal"),
    )
)


def _xmp_values(root: ElementTree.Element) -> dict[str, list[str]]:
    """The wanted properties' texts, written either way RDF allows: as attributes of an
    rdf:Description, or as elements (a list's rdf:li items, or plain text)."""
    values: dict[str, list[str]] = {}
    for element in root.iter():
        for name, value in element.attrib.items():
            if name in _XMP_WANTED:
                values.setdefault(name, []).append(value)
        if element.tag in _XMP_WANTED:
            items = [li.text or "" for li in element.iter(f"{{{_XMP_NS['rdf']}}}li")]
            values.setdefault(element.tag, []).extend(items or [element.text or ""])
    return values


def _rating(values: list[str] | None) -> int | None:
    """xmp:Rating: -1 (rejected) to 5; some writers write '4.0'."""
    with contextlib.suppress(ValueError, TypeError, IndexError, OverflowError):
        rating = float((values or [])[0])
        if rating.is_integer() and -1 <= rating <= 5:
            return int(rating)
    return None


def _xmp_time(values: list[str] | None) -> str | None:
    """An XMP date (ISO 8601 already) when it parses as one: at least a full date and time."""
    text = (values or [""])[0].strip()[:32]
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return text if len(text) >= 16 else None


# --- text and size ----------------------------------------------------------------------------


def clean_text(value: object, limit: int) -> str | None:
    """Printable text, spaces collapsed, at most `limit` characters; None for none, or for what
    is not text (binary junk in a string tag: a text has few control codes, if any)."""
    if isinstance(value, bytes):
        value = value[: limit * 8].decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    sample = value[: limit * 8].rstrip("\x00")
    kept = "".join(ch for ch in sample if (ch.isprintable() and ch != "\ufffd") or ch.isspace())
    if (len(sample) - len(kept)) * 10 > len(sample):  # over 10% control codes: binary, not text
        return None
    text = " ".join(kept.split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_text(values: Iterable[str], limit: int) -> str | None:
    return next((t for t in (clean_text(v, limit) for v in values) if t), None)


def _keywords(values: Iterable[str]) -> list[str]:
    kept: list[str] = []
    for value in values:
        word = clean_text(value, _LIMITS["keyword"])
        if word and word not in kept:
            kept.append(word)
        if len(kept) == KEYWORDS:
            break
    return kept


def within_budget(facts: dict[str, Any]) -> dict[str, Any]:
    """`facts` trimmed to MAX_FACTS_BYTES of JSON: the keywords go first (the last first), then
    the IPTC and XMP fields, then the palette's rarest colours; the camera facts and the hashes
    stay (each is capped on its own)."""
    trims: list[Callable[[], bool]] = [
        lambda: _pop_keyword(facts),
        lambda: _pop_key(facts, "iptc"),
        lambda: _pop_key(facts, "xmp"),
        lambda: _pop_palette(facts),
    ]
    for trim in trims:
        while _size(facts) > MAX_FACTS_BYTES and trim():
            pass
    return facts


def _pop_keyword(facts: dict[str, Any]) -> bool:
    words = facts.get("metadata", {}).get("keywords")
    if not words:
        return False
    words.pop()
    return True


def _pop_key(facts: dict[str, Any], block: str) -> bool:
    fields = facts.get("metadata", {}).get(block)
    if not fields:
        return False
    fields.pop(next(reversed(fields)))
    return True


def _pop_palette(facts: dict[str, Any]) -> bool:
    palette = facts.get("colors", {}).get("palette")
    if not palette or len(palette) <= 1:
        return False
    palette.pop()
    return True


def _size(value: object) -> int:
    """Compact JSON's bytes: about what DynamoDB counts (names and values, in UTF-8)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def checked(value: object) -> dict[str, Any]:
    """The decoder child's facts as the worker keeps them: an object of the known keys within
    the budget, else nothing (the child decodes untrusted bytes: its answer is not trusted)."""
    if not isinstance(value, dict) or not set(value) <= set(FACT_KEYS):
        return {}
    if not all(isinstance(v, dict) for v in value.values()) or _size(value) > MAX_FACTS_BYTES:
        return {}
    return value
