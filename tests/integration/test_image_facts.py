"""thumbnail_generation's image facts (processors/image_facts.py) and its thumbnails' hygiene, on
real images made here with Pillow: EXIF with a GPS IFD written by Pillow's Exif, XMP by its JPEG
and PNG writers, IPTC as the APP13 Photoshop resource cameras and Photoshop write, an Adobe RGB
(1998) ICC profile assembled from its published colorants.

Each test: given an upload, when the processor runs (in the decoder sandbox, as deployed), then
the result's facts are right, bounded and free of GPS coordinates, and every thumbnail is sRGB
with no metadata; hostile metadata costs its facts, never the job.
"""

from __future__ import annotations

import base64
import io
import json
import random
import re
import struct
from typing import Any

import blurhash  # type: ignore[import-untyped]
import pytest
from PIL import Image, ImageCms, ImageDraw, ImageFilter, PngImagePlugin

from filejobs.domain.job import JobType
from filejobs.processors import image_facts
from filejobs.processors.image_facts import MAX_FACTS_BYTES, hamming
from filejobs.processors.thumbnail import ThumbnailProcessor, render_bundle
from tests.processing import MediaBench

BASE83 = re.compile(r"[0-9A-Za-z#$%*+,\-.:;=?@\[\]^_{|}~]+")
HEX = re.compile(r"#[0-9a-f]{6}")
LATITUDE, LONGITUDE = (48.0, 51.0, 29.6), (2.0, 17.0, 40.2)


# --- inputs -----------------------------------------------------------------------------------


def photo(size: tuple[int, int] = (800, 600), seed: int = 7) -> Image.Image:
    """Gradients, shapes and grain: about what a phone photo holds, deterministic per seed."""
    rng = random.Random(seed)
    red = Image.linear_gradient("L").resize(size)
    green = Image.radial_gradient("L").resize(size)
    blue = Image.linear_gradient("L").rotate(90 + seed * 37).resize(size)
    im = Image.merge("RGB", (red, green, blue))
    draw = ImageDraw.Draw(im)
    for _ in range(25):
        x, y = rng.randrange(size[0]), rng.randrange(size[1])
        w, h = rng.randrange(20, size[0] // 2), rng.randrange(20, size[1] // 2)
        fill = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        draw.ellipse((x, y, x + w, y + h), fill=fill)
    grain = Image.effect_noise(size, 30).convert("RGB")
    return Image.blend(im, grain, 0.08).filter(ImageFilter.SMOOTH)


def encoded(im: Image.Image, fmt: str, **params: Any) -> bytes:
    out = io.BytesIO()
    im.save(out, fmt, **params)
    return out.getvalue()


def camera_exif(*, orientation: int = 6, gps: bool = True) -> Image.Exif:
    exif = Image.Exif()
    exif[0x010F] = "Canon"
    exif[0x0110] = "Canon EOS R5"
    exif[0x0112] = orientation
    exif[0xA431] = "123456789012"  # BodySerialNumber: personal, never in a thumbnail
    sub = exif.get_ifd(0x8769)
    sub[0x9003] = "2024:05:01 12:34:56"  # DateTimeOriginal
    sub[0x9011] = "+02:00"  # OffsetTimeOriginal
    sub[0xA434] = "RF24-105mm F4 L IS USM"  # LensModel
    if gps:
        location = exif.get_ifd(0x8825)
        location.update({1: "N", 2: LATITUDE, 3: "E", 4: LONGITUDE})
    return exif


def xmp(body: str, rdf_attributes: str = "") -> bytes:
    return (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/">'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        '<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/"'
        ' xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:exif="http://ns.adobe.com/exif/1.0/"'
        f" {rdf_attributes}>{body}</rdf:Description></rdf:RDF></x:xmpmeta>"
        '<?xpacket end="w"?>'
    ).encode()


def keywords(*words: str) -> str:
    return (
        "<dc:subject><rdf:Bag>"
        + "".join(f"<rdf:li>{w}</rdf:li>" for w in words)
        + ("</rdf:Bag></dc:subject>")
    )


def iptc_segment(records: list[tuple[int, int, bytes]]) -> bytes:
    """A JPEG APP13 segment: Photoshop's image resource 0x0404 holding IPTC-IIM datasets."""
    iim = b"".join(
        b"\x1c" + bytes([record, dataset]) + struct.pack(">H", len(value)) + value
        for record, dataset, value in records
    )
    resource = b"8BIM" + struct.pack(">H", 0x0404) + b"\x00\x00" + struct.pack(">I", len(iim))
    resource += iim + b"\x00" * (len(iim) % 2)
    payload = b"Photoshop 3.0\x00" + resource
    return b"\xff\xed" + struct.pack(">H", len(payload) + 2) + payload


def with_segment(jpeg: bytes, segment: bytes) -> bytes:
    """`segment` inserted right after the JPEG's SOI marker, where APPn segments go."""
    assert jpeg[:2] == b"\xff\xd8"
    return jpeg[:2] + segment + jpeg[2:]


def _s15(value: float) -> bytes:
    return struct.pack(">i", round(value * 65536))


def adobe_rgb_icc() -> bytes:
    """An ICC v2 display profile of Adobe RGB (1998): its D50-adapted colorants and its 563/256
    gamma, as Adobe publishes them (a matrix/TRC profile LittleCMS reads like Adobe's own)."""

    def xyz(x: float, y: float, z: float) -> bytes:
        return b"XYZ " + bytes(4) + _s15(x) + _s15(y) + _s15(z)

    text = b"Adobe RGB (1998)"
    desc = b"desc" + bytes(4) + struct.pack(">I", len(text) + 1) + text + b"\x00"
    desc += bytes(4 + 4 + 2 + 1 + 67)  # no Unicode, no ScriptCode description
    curve = b"curv" + bytes(4) + struct.pack(">IH", 1, 563) + bytes(2)
    tags = [
        (b"desc", desc),
        (b"wtpt", xyz(0.9642, 1.0, 0.8249)),
        (b"rXYZ", xyz(0.60974, 0.31111, 0.01947)),
        (b"gXYZ", xyz(0.20528, 0.62567, 0.06087)),
        (b"bXYZ", xyz(0.14919, 0.06322, 0.74457)),
        (b"rTRC", curve),
        (b"gTRC", curve),
        (b"bTRC", curve),
        (b"cprt", b"text" + bytes(4) + b"public domain\x00" + bytes(2)),
    ]
    offset = 128 + 4 + 12 * len(tags)
    table, data = struct.pack(">I", len(tags)), b""
    for signature, body in tags:
        table += signature + struct.pack(">II", offset + len(data), len(body))
        data += body + bytes(-len(body) % 4)
    size = offset + len(data)
    header = struct.pack(">I", size) + b"lcms" + struct.pack(">I", 0x02100000)
    header += b"mntrRGB XYZ " + struct.pack(">6H", 2024, 1, 1, 0, 0, 0) + b"acsp"
    header += bytes(4 + 4 + 4 + 4 + 8) + struct.pack(">I", 0)  # platform ... intent
    header += _s15(0.9642) + _s15(1.0) + _s15(0.8249) + bytes(4 + 16 + 28)
    assert len(header) == 128
    return header + table + data


# --- running ----------------------------------------------------------------------------------


def run(
    media: MediaBench, name: str, data: bytes, **input_data: object
) -> tuple[dict[str, Any], list[bytes]]:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, name, data, input_data=input_data)
    result = ThumbnailProcessor(media.s3)(work)
    return result, [media.output(thumb["key"]) for thumb in result["thumbnails"]]


def facts_of(result: dict[str, Any]) -> dict[str, Any]:
    facts = {key: result[key] for key in image_facts.FACT_KEYS}
    compact = json.dumps(facts, ensure_ascii=False, separators=(",", ":"))
    assert len(compact.encode()) <= MAX_FACTS_BYTES
    return facts


def assert_valid_pixel_facts(facts: dict[str, Any]) -> None:
    """Well-formed placeholders, colours and hash, whatever the image."""
    hashed = facts["placeholders"]["blurhash"]
    assert BASE83.fullmatch(hashed) and len(hashed) == 28
    thumb = base64.b64decode(facts["placeholders"]["thumbhash"], validate=True)
    assert 5 <= len(thumb) <= 25
    assert re.fullmatch(r"[0-9a-f]{16}", facts["perceptual_hash"]["value"])
    assert facts["perceptual_hash"]["algorithm"] == "phash"
    palette = facts["colors"]["palette"]
    assert len(palette) <= image_facts.PALETTE_COLOURS
    assert all(HEX.fullmatch(c["hex"]) and 0 <= c["share"] <= 1 for c in palette)
    assert facts["colors"]["dominant"] == (palette[0]["hex"] if palette else None)


def assert_clean_srgb(thumbnail: bytes) -> None:
    """No EXIF, XMP, IPTC or ICC profile, not even a fragment of one, in the file's bytes."""
    im = Image.open(io.BytesIO(thumbnail))
    assert not {"exif", "xmp", "icc_profile", "photoshop"} & set(im.info)
    assert not im.getexif()
    for marker in (b"Exif\x00", b"ns.adobe.com/xap", b"Photoshop 3.0", b"ICC_PROFILE", b"ICCP"):
        assert marker not in thumbnail, marker
    assert im.mode in ("RGB", "RGBA", "L")


def thumbhash_average(value: str) -> tuple[float, float, float, float]:
    """The reference's thumbHashToAverageRGBA (evanw/thumbhash), 0..1 each."""
    data = base64.b64decode(value)
    header = data[0] | data[1] << 8 | data[2] << 16
    lum = (header & 63) / 63
    yb = (header >> 6 & 63) / 31.5 - 1
    rg = (header >> 12 & 63) / 31.5 - 1
    alpha = (data[5] & 15) / 15 if header >> 23 else 1.0
    blue = lum - 2 / 3 * yb
    red = (3 * lum - blue + rg) / 2
    green = red - rg
    return (*(max(0.0, min(1.0, c)) for c in (red, green, blue)), alpha)  # type: ignore[return-value]


def thumbhash_aspect(value: str) -> float:
    """The reference's thumbHashToApproximateAspectRatio."""
    data = base64.b64decode(value)
    has_alpha, landscape = data[2] & 0x80, data[4] & 0x80
    lx = (5 if has_alpha else 7) if landscape else data[3] & 7
    ly = data[3] & 7 if landscape else (5 if has_alpha else 7)
    return lx / ly


# --- a camera photo ---------------------------------------------------------------------------


def test_a_camera_photo_gives_its_facts_and_only_whether_it_has_a_position(
    media: MediaBench,
) -> None:
    # given a JPEG from a camera: EXIF (make, model, lens, time and zone, orientation 6, serial),
    # a GPS position, XMP (rating, label, keywords, the position again) and IPTC
    packet = xmp(
        keywords("harbour", "boats"),
        'xmp:Rating="4" xmp:Label="Red" exif:GPSLatitude="48,51.49N" exif:GPSLongitude="2,17.67E"',
    )
    iptc = iptc_segment(
        [
            (1, 90, b"\x1b%G"),
            (2, 5, "Le port, été".encode()),
            (2, 25, b"harbour"),
            (2, 25, b"sea"),
            (2, 116, b"(c) 2024 A. Photographer"),
        ]
    )
    source = encoded(photo(), "JPEG", quality=90, exif=camera_exif(), xmp=packet)
    data = with_segment(source, iptc)

    # when thumbnailed
    result, thumbnails = run(media, "IMG_0001.jpg", data)

    # then the facts people filter by are there, and of the position only that there is one
    metadata = facts_of(result)["metadata"]
    assert metadata == {
        "camera_make": "Canon",
        "camera_model": "Canon EOS R5",
        "lens": "RF24-105mm F4 L IS USM",
        "taken_at": "2024-05-01T12:34:56+02:00",
        "orientation": 6,
        "gps_present": True,
        "keywords": ["harbour", "sea", "boats"],  # IPTC's and XMP's, each once
        "iptc": {"title": "Le port, été", "copyright": "(c) 2024 A. Photographer"},
        "xmp": {"rating": 4, "label": "Red"},
    }
    stored = json.dumps(result)
    for coordinate in ("29.6", "40.2", "51.49", "17.67", "123456789012"):
        assert coordinate not in stored
    # and the thumbnails carry none of it: no EXIF (nor its GPS IFD), XMP, IPTC or profile
    assert len(thumbnails) == 3
    for thumbnail in thumbnails:
        assert_clean_srgb(thumbnail)
    assert all(thumb["kind"] == "thumbnail" for thumb in result["thumbnails"])
    assert_valid_pixel_facts(result)


def test_jpeg_thumbnails_of_a_photo_with_metadata_carry_none(media: MediaBench) -> None:
    # given the camera photo, asked for JPEG thumbnails (Pillow's JPEG writer can write XMP)
    packet = xmp("", 'exif:GPSLatitude="48,51.49N"')
    data = encoded(photo(), "JPEG", quality=90, exif=camera_exif(), xmp=packet)

    # when thumbnailed
    result, thumbnails = run(media, "IMG_0002.jpg", data, format="jpeg", sizes=[256, 2000])

    # then both are bare JPEGs, the one at the source's own size too
    assert [t["format"] for t in result["thumbnails"]] == ["jpeg", "jpeg"]
    for thumbnail in thumbnails:
        assert_clean_srgb(thumbnail)
    assert result["metadata"]["gps_present"] is True


def test_a_photo_without_metadata_has_a_clean_absence(media: MediaBench) -> None:
    # given a PNG with no metadata at all
    result, _ = run(media, "plain.png", encoded(photo((320, 240)), "PNG"))

    # then every metadata fact says "not stated", and the pixel facts are all there
    assert facts_of(result)["metadata"] == {
        "camera_make": None,
        "camera_model": None,
        "lens": None,
        "taken_at": None,
        "orientation": None,
        "gps_present": False,
        "keywords": [],
        "iptc": {},
        "xmp": {},
    }
    assert_valid_pixel_facts(result)


# --- colour spaces ----------------------------------------------------------------------------


def test_an_adobe_rgb_jpeg_gives_srgb_thumbnails(media: MediaBench) -> None:
    # given a JPEG tagged Adobe RGB (1998), a muted red and a teal in that space
    icc = adobe_rgb_icc()
    im = Image.new("RGB", (400, 200), (150, 60, 50))
    im.paste((40, 140, 130), (200, 0, 400, 200))
    data = encoded(im, "JPEG", quality=95, icc_profile=icc)

    # when thumbnailed
    _, [thumbnail] = run(media, "adobe.jpg", data, sizes=[200])

    # then its pixels are what LittleCMS makes of those colours in sRGB (Adobe RGB's numbers
    # shown as sRGB would look dull), and it carries no profile
    assert_clean_srgb(thumbnail)
    rgb = Image.open(io.BytesIO(thumbnail)).convert("RGB")
    for x, adobe in ((50, (150, 60, 50)), (150, (40, 140, 130))):
        converted = ImageCms.profileToProfile(
            Image.new("RGB", (1, 1), adobe),
            ImageCms.ImageCmsProfile(io.BytesIO(icc)),
            ImageCms.createProfile("sRGB"),
        )
        assert converted is not None
        srgb, pixel = converted.getpixel((0, 0)), rgb.getpixel((x, 50))
        assert isinstance(pixel, tuple) and isinstance(srgb, tuple)
        assert max(abs(a - b) for a, b in zip(pixel, srgb, strict=True)) <= 6
        assert max(abs(a - b) for a, b in zip(pixel, adobe, strict=True)) >= 12


def test_a_cmyk_jpeg_gives_plain_rgb_thumbnails(media: MediaBench) -> None:
    # given a CMYK JPEG (Adobe's inverted CMYK, as Photoshop writes it)
    im = Image.new("CMYK", (300, 200), (0, 255, 255, 0))
    result, [thumbnail] = run(media, "print.jpg", encoded(im, "JPEG", quality=95), sizes=[150])

    # then the thumbnail is RGB, red, with no profile; the palette says red too
    assert_clean_srgb(thumbnail)
    assert Image.open(io.BytesIO(thumbnail)).mode == "RGB"
    red, green, blue = (int(result["colors"]["dominant"][i : i + 2], 16) for i in (1, 3, 5))
    assert red > 200 and green < 60 and blue < 60


# --- placeholders and hashes ------------------------------------------------------------------


def test_blurhash_is_the_reference_encoder_s_and_decodes_to_the_image_s_colours() -> None:
    # given a 32x24 image (BlurHash's own size here: no shrinking), red left and blue right
    im = Image.new("RGB", (32, 24), (20, 40, 220))
    im.paste((230, 30, 20), (0, 0, 16, 24))

    # when hashed
    hashed = image_facts.blurhash_of(im)

    # then the string is the one woltapp's algorithm makes (the blurhash package's port), and
    # it decodes to red on the left and blue on the right
    rows = [[list(im.getpixel((x, y))) for x in range(32)] for y in range(24)]  # type: ignore[arg-type]
    assert hashed == blurhash.encode(rows, 4, 3)
    decoded = blurhash.decode(hashed, 32, 24)
    left, right = decoded[12][3], decoded[12][28]
    assert left[0] > 150 and left[2] < 110
    assert right[2] > 150 and right[0] < 110


@pytest.mark.parametrize("colour", [(200, 120, 40), (30, 90, 160), (128, 128, 128)])
def test_placeholders_of_a_plain_image_decode_to_its_colour(
    tmp_path: Any, colour: tuple[int, int, int]
) -> None:
    # given a plain 800x600 JPEG of one colour
    path = tmp_path / "plain.jpg"
    Image.new("RGB", (800, 600), colour).save(path, quality=95)

    # when its bundle is made
    facts = render_bundle(path).facts

    # then BlurHash (the package's decoder) and ThumbHash (the reference's average) give it back,
    # and ThumbHash's aspect is landscape
    decoded = blurhash.decode(facts["placeholders"]["blurhash"], 8, 6)
    assert all(abs(a - b) <= 4 for a, b in zip(decoded[3][4], colour, strict=True))
    thumbhash = facts["placeholders"]["thumbhash"]
    *average, alpha = thumbhash_average(thumbhash)
    assert all(abs(a * 255 - b) <= 10 for a, b in zip(average, colour, strict=True))
    assert alpha == 1.0
    assert 1.2 <= thumbhash_aspect(thumbhash) <= 1.5
    assert facts["colors"]["palette"][0]["share"] == 1.0


def test_thumbhash_keeps_a_portrait_s_aspect_and_its_transparency(tmp_path: Any) -> None:
    # given a portrait PNG, opaque green in its top half, transparent below
    im = Image.new("RGBA", (300, 600), (0, 0, 0, 0))
    im.paste((20, 200, 60, 255), (0, 0, 300, 300))
    path = tmp_path / "badge.png"
    im.save(path)

    # when its bundle is made
    facts = render_bundle(path).facts

    # then ThumbHash is portrait, half transparent, green; the palette is the opaque pixels' only
    thumbhash = facts["placeholders"]["thumbhash"]
    assert thumbhash_aspect(thumbhash) < 1
    red, green, blue, alpha = thumbhash_average(thumbhash)
    assert 0.35 <= alpha <= 0.65
    assert green > 0.6 and red < 0.3 and blue < 0.4
    assert facts["colors"]["palette"] == [{"hex": "#14c83c", "share": 1.0}]


def test_a_resized_re_encoded_copy_has_a_close_perceptual_hash_an_other_photo_a_far_one(
    tmp_path: Any,
) -> None:
    # given a photo, the same photo at 45% re-encoded as WebP at quality 60, and another photo
    original = photo((1200, 900), seed=3)
    paths = {name: tmp_path / name for name in ("original.jpg", "copy.webp", "other.jpg")}
    original.save(paths["original.jpg"], quality=92)
    original.resize((540, 405)).save(paths["copy.webp"], quality=60)
    photo((1200, 900), seed=11).save(paths["other.jpg"], quality=92)

    # when hashed
    hashes = {
        name: render_bundle(path).facts["perceptual_hash"]["value"] for name, path in paths.items()
    }

    # then the copy is within a few bits of the original, the other photo far from both
    assert hamming(hashes["original.jpg"], hashes["copy.webp"]) <= 6
    assert hamming(hashes["original.jpg"], hashes["other.jpg"]) >= 16
    assert hamming(hashes["copy.webp"], hashes["other.jpg"]) >= 16


# --- odd images -------------------------------------------------------------------------------


def odd_images() -> list[tuple[str, bytes]]:
    frames = [Image.new("P", (40, 30), i) for i in (5, 60, 200)]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:], duration=80, loop=0)
    return [
        ("one.png", encoded(Image.new("RGB", (1, 1), (255, 0, 0)), "PNG")),
        ("grey.jpg", encoded(photo((300, 200)).convert("L"), "JPEG")),
        ("alpha.png", encoded(Image.new("RGBA", (64, 48), (0, 120, 255, 100)), "PNG")),
        ("invisible.png", encoded(Image.new("RGBA", (64, 48), (0, 0, 0, 0)), "PNG")),
        ("animated.gif", gif.getvalue()),
        ("tall.png", encoded(Image.new("RGB", (3, 900), (9, 9, 9)), "PNG")),
    ]


@pytest.mark.parametrize(("name", "data"), odd_images(), ids=[n for n, _ in odd_images()])
def test_odd_images_give_valid_facts_or_a_clean_absence(
    media: MediaBench, name: str, data: bytes
) -> None:
    # when thumbnailed
    result, thumbnails = run(media, name, data)

    # then the facts are well formed (a fully transparent image has no colours) and small
    facts = facts_of(result)
    assert_valid_pixel_facts(facts)
    assert facts["metadata"]["gps_present"] is False
    if name == "invisible.png":
        assert facts["colors"] == {"dominant": None, "palette": []}
    if name == "one.png":
        assert facts["colors"]["dominant"] == "#ff0000"
    for thumbnail in thumbnails:
        assert_clean_srgb(thumbnail)


# --- hostile metadata -------------------------------------------------------------------------


def hostile_inputs() -> list[tuple[str, bytes]]:
    base = photo((200, 150))
    junk = Image.Exif()
    junk[0x010F] = bytes(range(256)) * 40  # binary junk where a string belongs
    junk[0x0110] = "Nikon\x1b[2J\x07\x08 D850" + "X" * 5000  # control codes, then a flood
    junk.get_ifd(0x8769)[0x9003] = "0000:00:00 00:00:00"
    junk.get_ifd(0x8769)[0xA434] = "\x00\x01\x02\x03\x04\x05\x06\x07"
    huge = PngImagePlugin.PngInfo()
    huge.add_itxt("XML:com.adobe.xmp", xmp(keywords(*(f"k{i}" for i in range(150_000)))).decode())
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(
            b'<!ENTITY %s "%s">' % (bytes([98 + i]), b"&" + bytes([97 + i]) + b";" * 10)
            for i in range(8)
        )
        + b']><x:xmpmeta xmlns:x="adobe:ns:meta/">&i;</x:xmpmeta>'
    )
    many = xmp(
        keywords(*(f"keyword number {i} " * 2 for i in range(900))),
        'xmp:Label="' + "L" * 3000 + '" xmp:Rating="99"',
    )
    broken_iptc = b"\xff\xed" + struct.pack(">H", 40) + b"Photoshop 3.0\x008BIM\x04\x04\x00\x00"
    broken_iptc += struct.pack(">I", 9999) + b"\x1c\x02\x19\xff\xff" + b"\x00" * 9
    floods = iptc_segment([(2, 25, b"w" * 60) for _ in range(500)] + [(2, 5, b"\x00\x07" * 900)])
    return [
        ("junk_exif.jpg", encoded(base, "JPEG", exif=junk)),
        ("huge_xmp.png", encoded(base, "PNG", pnginfo=huge)),
        ("laughs.jpg", encoded(base, "JPEG", xmp=laughs)),
        ("many_keywords.jpg", encoded(base, "JPEG", xmp=many)),
        ("broken_iptc.jpg", with_segment(encoded(base, "JPEG"), broken_iptc)),
        ("flood_iptc.jpg", with_segment(encoded(base, "JPEG"), floods)),
        ("broken_xmp.webp", encoded(base, "WEBP", xmp=b"<x:xmpmeta><unclosed")),
    ]


HOSTILE = hostile_inputs()


@pytest.mark.parametrize(("name", "data"), HOSTILE, ids=[name for name, _ in HOSTILE])
def test_hostile_metadata_never_fails_the_job_nor_bloats_the_result(
    media: MediaBench, name: str, data: bytes
) -> None:
    # when thumbnailed
    result, thumbnails = run(media, name, data)

    # then the job succeeds, the facts stay within their budget, and every text is clean
    facts = facts_of(result)
    assert_valid_pixel_facts(facts)
    assert len(thumbnails) == 3
    texts = _texts(facts["metadata"])
    assert all(t.isprintable() and len(t) <= 48 for t in texts), texts
    assert facts["metadata"]["taken_at"] is None
    if name == "junk_exif.jpg":
        assert facts["metadata"]["camera_make"] is None  # junk, not text
        assert facts["metadata"]["camera_model"].startswith("Nikon[2J D850")
        assert facts["metadata"]["lens"] is None
    if name == "many_keywords.jpg":
        assert "rating" not in facts["metadata"]["xmp"]  # 99 is no rating
        assert len(facts["metadata"]["keywords"]) <= image_facts.KEYWORDS
    if name in ("huge_xmp.png", "laughs.jpg", "broken_xmp.webp"):
        assert facts["metadata"]["xmp"] == {}
    if name == "flood_iptc.jpg":
        assert facts["metadata"]["keywords"] in ([], ["w" * 23 + "…"])
        assert "title" not in facts["metadata"]["iptc"]  # control codes only


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def test_the_worker_keeps_no_facts_it_cannot_trust() -> None:
    # given what a subverted decoder child could answer
    answers: list[object] = [
        None,
        "facts",
        {"metadata": {"camera_make": "x" * 5000}},
        {"secrets": {}},
        {"placeholders": "not an object"},
    ]
    # then the worker keeps none of them; a sane answer it keeps as it is
    assert all(image_facts.checked(answer) == {} for answer in answers)
    sane = {"perceptual_hash": {"algorithm": "phash", "value": "0" * 16}}
    assert image_facts.checked(sane) == sane
