"""thumbnail_generation on real images made here with Pillow, uploaded to moto S3.

Each test: given an upload (and the job's options), when the processor runs, then its thumbnails
decode with Pillow at the right size, orientation and colour, or the job fails permanently with a
message a person can read.
"""

from __future__ import annotations

import io
import struct
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import pytest
from PIL import Image

from filejobs.config import ConfigurationError
from filejobs.domain.content import AUDIO_WITH_ART, THUMBNAILABLE_IMAGES
from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors import registry
from filejobs.processors.base import StopRequested
from filejobs.processors.thumbnail import (
    DECODERS,
    EVERY_DECODER,
    ThumbnailProcessor,
    render_thumbnails,
    sizes_setting,
)
from tests.processing import MediaBench

RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)


# --- inputs -----------------------------------------------------------------------------------


def encoded(im: Image.Image, fmt: str, **params: Any) -> bytes:
    out = io.BytesIO()
    im.save(out, fmt, **params)
    return out.getvalue()


def scene(size: tuple[int, int] = (800, 600)) -> Image.Image:
    """Red left half, blue right half: colour and aspect survive any format."""
    im = Image.new("RGB", size, BLUE)
    im.paste(RED, (0, 0, size[0] // 2, size[1]))
    return im


def _box(kind: bytes, payload: bytes, version: int | None = None) -> bytes:
    """An ISOBMFF box; a full box (version and zero flags) when `version` is given."""
    if version is not None:
        payload = struct.pack(">I", version << 24) + payload
    return struct.pack(">I", 8 + len(payload)) + kind + payload


def heic(im: Image.Image) -> bytes:
    """A real HEIC still image: one HEVC frame from libx265 (PyAV) in a minimal HEIF container.

    pi-heif decodes but cannot encode, so the container is written here: ftyp; meta with hdlr
    'pict', the primary item 1 of type hvc1, its extent in mdat, and its properties hvcC (the
    VPS, SPS and PPS) and ispe (the size); mdat with the slices, each behind a 4-byte length.
    """
    ctx = av.CodecContext.create("libx265", "w")
    assert isinstance(ctx, av.VideoCodecContext)
    ctx.width, ctx.height, ctx.pix_fmt = im.width, im.height, "yuv420p"
    ctx.time_base = Fraction(1, 25)
    ctx.options = {"x265-params": "log-level=none", "crf": "18"}
    rgb = av.VideoFrame.from_image(im.convert("RGB"))  # type: ignore[no-untyped-call]
    frame = rgb.reformat(format="yuv420p")
    annex_b = b"".join(bytes(p) for p in [*ctx.encode(frame), *ctx.encode(None)])
    nals = [n.strip(b"\x00") for n in annex_b.split(b"\x00\x00\x01") if n.strip(b"\x00")]
    by_type = {(n[0] >> 1) & 0x3F: n for n in nals}
    params = [by_type[32], by_type[33], by_type[34]]  # VPS, SPS, PPS
    slices = b"".join(struct.pack(">I", len(n)) + n for n in nals if (n[0] >> 1) & 0x3F < 32)
    hvcc = bytes([1, 0x01]) + struct.pack(">I", 0x60000000) + bytes([0x90, 0, 0, 0, 0, 0, 90])
    hvcc += struct.pack(">H", 0xF000) + bytes([0xFC, 0xFD, 0xF8, 0xF8, 0, 0, 0x0F, len(params)])
    for n in params:
        hvcc += bytes([0x80 | (n[0] >> 1) & 0x3F]) + struct.pack(">HH", 1, len(n)) + n
    ftyp = _box(b"ftyp", b"heic" + bytes(4) + b"mif1heic")

    def meta(offset: int) -> bytes:
        iloc = bytes([0x44, 0]) + struct.pack(">HHHHII", 1, 1, 0, 1, offset, len(slices))
        infe = _box(b"infe", struct.pack(">HH", 1, 0) + b"hvc1\x00", version=2)
        ispe = _box(b"ispe", struct.pack(">II", im.width, im.height), version=0)
        ipma = _box(b"ipma", struct.pack(">IHB", 1, 1, 2) + bytes([0x81, 0x02]), version=0)
        return _box(
            b"meta",
            _box(b"hdlr", bytes(4) + b"pict" + bytes(13), version=0)
            + _box(b"pitm", struct.pack(">H", 1), version=0)
            + _box(b"iloc", iloc, version=0)
            + _box(b"iinf", struct.pack(">H", 1) + infe, version=0)
            + _box(b"iprp", _box(b"ipco", _box(b"hvcC", hvcc) + ispe) + ipma),
            version=0,
        )

    return ftyp + meta(len(ftyp) + len(meta(0)) + 8) + _box(b"mdat", slices)


def png_declaring(width: int, height: int) -> bytes:
    """A tiny valid PNG whose IHDR is patched to declare width x height (CRC recomputed)."""
    data = bytearray(encoded(Image.new("1", (16, 16)), "PNG"))
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def close(pixel: Any, colour: tuple[int, ...], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour, strict=False))


def run(
    media: MediaBench, name: str, data: bytes, **input_data: object
) -> tuple[dict[str, Any], list[Image.Image]]:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, name, data, input_data=input_data)
    result = ThumbnailProcessor(media.s3)(work)
    images: list[Image.Image] = []
    for thumb in result["thumbnails"]:
        body = media.output(thumb["key"])
        assert len(body) == thumb["bytes"]
        im = Image.open(io.BytesIO(body))
        im.load()
        images.append(im)
    return result, images


def fails(media: MediaBench, name: str, data: bytes, **input_data: object) -> str:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, name, data, input_data=input_data)
    with pytest.raises(PermanentError) as raised:
        ThumbnailProcessor(media.s3)(work)
    message = str(raised.value)
    assert "Traceback" not in message and "\n" not in message
    return message


# --- every format -----------------------------------------------------------------------------

FORMATS = [
    ("photo.jpg", "JPEG", {"quality": 90}),
    ("photo.png", "PNG", {}),
    ("photo.webp", "WEBP", {"quality": 90}),
    ("photo.gif", "GIF", {}),
    ("photo.tiff", "TIFF", {}),
    ("photo.bmp", "BMP", {}),
    ("photo.avif", "AVIF", {"quality": 90}),
    ("photo.heic", "HEIF", {}),  # written by heic() above
]


@pytest.mark.parametrize(("name", "fmt", "params"), FORMATS, ids=[f[1] for f in FORMATS])
def test_every_supported_format_gives_webp_thumbnails_of_the_default_sizes(
    media: MediaBench, name: str, fmt: str, params: dict[str, Any]
) -> None:
    # given an 800x600 image, red left and blue right, in this format
    data = heic(scene()) if fmt == "HEIF" else encoded(scene(), fmt, **params)

    # when the job runs with no options
    result, images = run(media, name, data)

    # then 128, 256 and 512 px WebP thumbnails, 4:3, with the colours where they were
    assert result["source"]["width"] == 800 and result["source"]["height"] == 600
    assert result["source"]["format"] == fmt
    assert [t["size"] for t in result["thumbnails"]] == [128, 256, 512]
    assert [im.size for im in images] == [(128, 96), (256, 192), (512, 384)]
    for im, thumb in zip(images, result["thumbnails"], strict=True):
        assert im.format == "WEBP" and thumb["format"] == "webp"
        assert thumb["key"].endswith(f"/thumb-{thumb['size']}.webp")
        assert (thumb["width"], thumb["height"]) == im.size
        rgb = im.convert("RGB")
        assert close(rgb.getpixel((im.width // 4, im.height // 2)), RED)
        assert close(rgb.getpixel((3 * im.width // 4, im.height // 2)), BLUE)
    assert isinstance(result["duration_ms"], int)


# --- orientation, colour modes, alpha, animation ----------------------------------------------


def test_an_exif_rotated_jpeg_comes_out_upright(media: MediaBench) -> None:
    # given a 400x200 JPEG stored sideways (orientation 6: show it turned 90 degrees clockwise)
    # whose stored top-left quarter is red, the rest blue
    stored = Image.new("RGB", (400, 200), BLUE)
    stored.paste(RED, (0, 0, 200, 100))
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encoded(stored, "JPEG", quality=95, exif=exif)

    # when thumbnailed at 128
    result, [thumb] = run(media, "sideways.jpg", data, sizes=[128])

    # then it is portrait (64x128) and the red quarter is now at the top right
    assert result["source"]["orientation_applied"] is True
    assert (result["source"]["width"], result["source"]["height"]) == (400, 200)
    assert thumb.size == (64, 128)
    rgb = thumb.convert("RGB")
    assert close(rgb.getpixel((56, 8)), RED)
    assert close(rgb.getpixel((8, 8)), BLUE)
    assert close(rgb.getpixel((56, 120)), BLUE)


def test_a_tiff_tagged_sideways_is_turned_once(media: MediaBench) -> None:
    # given the same sideways picture as a TIFF with its Orientation tag 6 (Pillow's TIFF reader
    # turns a frame itself as it loads it, and drops the tag)
    stored = Image.new("RGB", (400, 200), BLUE)
    stored.paste(RED, (0, 0, 200, 100))
    data = encoded(stored, "TIFF", tiffinfo={0x0112: 6})

    # when thumbnailed at 128
    result, [thumb] = run(media, "sideways.tiff", data, sizes=[128])

    # then it is portrait with the red quarter at the top right: turned once, not twice
    assert result["source"]["orientation_applied"] is True
    assert thumb.size == (64, 128)
    rgb = thumb.convert("RGB")
    assert close(rgb.getpixel((56, 8)), RED)
    assert close(rgb.getpixel((8, 8)), BLUE)
    assert close(rgb.getpixel((8, 120)), BLUE)


def test_a_cmyk_jpeg_keeps_its_colours(media: MediaBench) -> None:
    # given a CMYK JPEG: red (no cyan, full magenta and yellow) left, black (full K) right
    im = Image.new("CMYK", (300, 200), (0, 0, 0, 255))
    im.paste((0, 255, 255, 0), (0, 0, 150, 200))
    data = encoded(im, "JPEG", quality=95)

    # when thumbnailed
    result, [thumb] = run(media, "print.jpg", data, sizes=[150])

    # then red stays red and black stays black, not inverted
    assert result["source"]["mode"] == "CMYK"
    rgb = thumb.convert("RGB")
    assert close(rgb.getpixel((30, 50)), RED)
    assert close(rgb.getpixel((120, 50)), (0, 0, 0))


def test_a_16_bit_png_is_scaled_to_8_bits_not_clipped(media: MediaBench) -> None:
    # given a 16-bit grey PNG: black, mid grey (32896) and white (65535) thirds
    im = Image.new("I;16", (300, 100), 0)
    im.paste(32896, (100, 0, 200, 100))
    im.paste(65535, (200, 0, 300, 100))
    data = encoded(im, "PNG")

    # when thumbnailed
    result, [thumb] = run(media, "scan.png", data, sizes=[300])

    # then the thirds read about 0, 128 and 255 (a plain convert would make mid grey white)
    assert result["source"]["mode"].startswith("I")
    grey = thumb.convert("L")
    assert abs(int(grey.getpixel((50, 50))) - 0) <= 8  # type: ignore[arg-type]
    assert abs(int(grey.getpixel((150, 50))) - 128) <= 8  # type: ignore[arg-type]
    assert abs(int(grey.getpixel((250, 50))) - 255) <= 8  # type: ignore[arg-type]


def rgba_badge() -> bytes:
    """A transparent 200x200 PNG with an opaque red square in the middle."""
    im = Image.new("RGBA", (200, 200), (0, 0, 0, 0))
    im.paste((255, 0, 0, 255), (50, 50, 150, 150))
    return encoded(im, "PNG")


def test_an_rgba_png_keeps_its_alpha_in_webp(media: MediaBench) -> None:
    # given a transparent PNG with an opaque red square
    # when thumbnailed to WebP
    _, [thumb] = run(media, "badge.png", rgba_badge(), sizes=[100])

    # then the corners are transparent and the middle opaque red
    assert thumb.mode == "RGBA"
    assert thumb.getpixel((2, 2))[3] == 0  # type: ignore[index]
    middle = thumb.getpixel((50, 50))
    assert close(middle, (255, 0, 0, 255))


def test_an_rgba_png_as_jpeg_is_flattened_onto_white(media: MediaBench) -> None:
    # given a transparent PNG with an opaque red square
    # when thumbnailed to JPEG
    result, [thumb] = run(media, "badge.png", rgba_badge(), sizes=[100], format="jpeg")

    # then the transparent corners are white, the square red
    assert thumb.format == "JPEG" and thumb.mode == "RGB"
    assert result["thumbnails"][0]["key"].endswith("/thumb-100.jpeg")
    assert close(thumb.getpixel((2, 2)), WHITE)
    assert close(thumb.getpixel((50, 50)), RED)


@pytest.mark.parametrize(
    ("mode", "fmt", "colour"),
    [
        ("1", "PNG", 1),
        ("L", "PNG", 200),
        ("LA", "PNG", (200, 255)),
        ("P", "PNG", 7),
        ("F", "TIFF", 0.5),
        ("I", "TIFF", 40000),
    ],
)
def test_any_colour_mode_gives_a_decodable_thumbnail(
    media: MediaBench, mode: str, fmt: str, colour: Any
) -> None:
    # given a 320x240 image in an unusual mode
    data = encoded(Image.new(mode, (320, 240), colour), fmt)

    # when thumbnailed
    result, [thumb] = run(media, f"odd.{fmt.lower()}", data, sizes=[160])

    # then a 160x120 WebP comes out
    assert result["source"]["mode"] == mode or mode in {"I", "F"}
    assert thumb.size == (160, 120)


def test_a_palette_png_with_a_transparent_colour_keeps_alpha(media: MediaBench) -> None:
    # given a palette PNG whose index 0 is transparent, index 1 an opaque green square
    im = Image.new("P", (100, 100), 0)
    im.putpalette([0, 0, 0, 0, 255, 0] + [0] * 762)
    im.paste(1, (25, 25, 75, 75))
    data = encoded(im, "PNG", transparency=0)

    # when thumbnailed
    _, [thumb] = run(media, "icon.png", data, sizes=[100])

    # then the border is transparent and the square green
    assert thumb.mode == "RGBA"
    assert thumb.getpixel((2, 2))[3] == 0  # type: ignore[index]
    assert close(thumb.getpixel((50, 50)), (*GREEN, 255))


def test_an_animated_gif_uses_its_first_frame(media: MediaBench) -> None:
    # given a three-frame GIF: red, then green, then blue
    frames = [Image.new("RGB", (120, 90), c) for c in (RED, GREEN, BLUE)]
    data = encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100)

    # when thumbnailed
    result, [thumb] = run(media, "anim.gif", data, sizes=[60])

    # then the source counts three frames and the thumbnail is the red one
    assert result["source"]["frames"] == 3
    assert thumb.size == (60, 45)
    assert close(thumb.convert("RGB").getpixel((30, 22)), RED)


# --- options --------------------------------------------------------------------------------


def test_sizes_and_format_are_honoured_and_small_images_are_not_upscaled(
    media: MediaBench,
) -> None:
    # given a 2400x1600 JPEG
    data = encoded(scene((2400, 1600)), "JPEG", quality=90)

    # when asked for JPEG at 64, 300 and 4000 px
    result, images = run(media, "big.jpg", data, sizes=[300, 4000, 64], format="jpeg")

    # then three JPEGs, smallest first, the 4000 one at the image's own size
    assert [t["size"] for t in result["thumbnails"]] == [64, 300, 4000]
    assert [im.size for im in images] == [(64, 43), (300, 200), (2400, 1600)]
    assert all(im.format == "JPEG" for im in images)
    assert [t["key"].rsplit("/", 1)[1] for t in result["thumbnails"]] == [
        "thumb-64.jpeg",
        "thumb-300.jpeg",
        "thumb-4000.jpeg",
    ]
    assert close(images[0].getpixel((10, 20)), RED)


def test_a_large_jpeg_decoded_at_reduced_scale_gives_exact_sizes(media: MediaBench) -> None:
    # given a 3000x2000 JPEG (decoded at 1/8 scale, 375x250, for a 200 px largest size)
    data = encoded(scene((3000, 2000)), "JPEG", quality=90)

    # when asked for 200 and 100 px
    result, images = run(media, "wide.jpg", data, sizes=[200, 100])

    # then both come out at the exact 3:2 sizes, colours in place; the source size is the full one
    assert (result["source"]["width"], result["source"]["height"]) == (3000, 2000)
    assert [im.size for im in images] == [(100, 67), (200, 133)]
    for im in images:
        rgb = im.convert("RGB")
        assert close(rgb.getpixel((im.width // 4, im.height // 2)), RED)
        assert close(rgb.getpixel((3 * im.width // 4, im.height // 2)), BLUE)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"sizes": [8]}, "bad option input_data.sizes[0]: must be an integer from 16 to 4096"),
        ({"sizes": [5000]}, "input_data.sizes[0]: must be an integer from 16 to 4096 pixels"),
        ({"sizes": list(range(100, 109))}, "input_data.sizes: must hold at most 8 values; got 9"),
        ({"sizes": ["big"]}, "input_data.sizes[0]: must be an integer from 16 to 4096 pixels"),
        ({"sizes": [128, 128.5]}, "input_data.sizes[1]: must be an integer from 16 to 4096"),
        ({"sizes": []}, "input_data.sizes: must be a list of 1 to 8 integers"),
        ({"sizes": 128}, "input_data.sizes: must be a list of 1 to 8 integers"),
        ({"format": "png"}, "input_data.format: must be one of webp, jpeg, avif; got 'png'"),
        # a job stored before options were checked at request time fails as readably
        ({"format": "WEBP"}, "input_data.format: must be one of webp, jpeg, avif; got 'WEBP'"),
    ],
)
def test_invalid_options_fail_the_job_permanently(
    media: MediaBench, options: dict[str, object], says: str
) -> None:
    # given a good image but bad options, when the job runs, then it fails saying why
    assert says in fails(media, "ok.png", encoded(scene((64, 48)), "PNG"), **options)


# --- bad input ----------------------------------------------------------------------------------


def test_a_truncated_jpeg_fails_permanently(media: MediaBench) -> None:
    # given the first half of a real JPEG
    whole = encoded(Image.effect_noise((640, 480), 60).convert("RGB"), "JPEG", quality=90)
    # when thumbnailed, then it fails as undecodable, naming the truncation
    message = fails(media, "cut.jpg", whole[: len(whole) // 2], sizes=[128])
    assert message.startswith("the image could not be decoded:")
    assert "truncated" in message


def test_a_zero_byte_file_fails_permanently(media: MediaBench) -> None:
    assert fails(media, "empty.jpg", b"") == (
        "the file is empty (0 bytes): there is no image to thumbnail"
    )


def test_garbage_bytes_fail_permanently(media: MediaBench) -> None:
    message = fails(media, "noise.jpg", bytes(range(256)) * 40)
    assert message.startswith("thumbnail_generation does not decode application/octet-stream")


def test_a_png_declaring_900_megapixels_is_refused_as_a_bomb(media: MediaBench) -> None:
    # given a 100-byte PNG whose header declares 30000x30000
    data = png_declaring(30000, 30000)
    assert len(data) < 200
    # when thumbnailed, then it is refused before any decoding
    message = fails(media, "bomb.png", data)
    assert message == (
        "the image declares 30000 x 30000 pixels (900.0 MP), all of which would be decoded: "
        "thumbnail_generation decodes at most 50 MP"
    )


def test_declared_dimensions_over_the_limit_are_refused_before_decoding(
    media: MediaBench,
) -> None:
    # given a PNG declaring 8000x8000 (64 MP: over our 50 MP, under Pillow's own bomb limit)
    # whose pixel data could not even fill it
    data = png_declaring(8000, 8000)
    # when thumbnailed, then our limit answers, not a decoding error
    assert fails(media, "huge.png", data) == (
        "the image declares 8000 x 8000 pixels (64.0 MP), all of which would be decoded: "
        "thumbnail_generation decodes at most 50 MP"
    )


def test_the_deployment_picks_the_sizes_of_a_job_that_names_none(media: MediaBench) -> None:
    # given a worker deployed with ThumbnailSizes=512 (the template's THUMBNAIL_SIZES, read by
    # config.Settings and passed in by the worker)
    processor = registry.processor_for(
        JobType.THUMBNAIL_GENERATION, media.s3, None, thumbnail_sizes="512"
    )
    data = encoded(scene((1200, 800)), "JPEG")
    # when a job names no sizes, then one thumbnail is written, at the deployment's size
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "one.jpg", data)
    assert [t["size"] for t in processor(work)["thumbnails"]] == [512]
    # and a job that names its own still gets those
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "two.jpg", data, input_data={"sizes": [64]})
    assert [t["size"] for t in processor(work)["thumbnails"]] == [64]


@pytest.mark.parametrize("setting", ["", "abc", "128,,512", "8", "128,99999", "1,2,3,4,5,6,7,8,9"])
def test_a_deployment_s_sizes_that_cannot_be_used_are_refused_saying_why(setting: str) -> None:
    if not setting:  # unset or empty: the documented default
        assert sizes_setting(setting) == (512, 256, 128)
        return
    with pytest.raises(ConfigurationError, match=r"^THUMBNAIL_SIZES must be pixel sizes"):
        sizes_setting(setting)


def test_the_pixel_limit_is_configurable(media: MediaBench) -> None:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "a.png", encoded(scene((300, 200)), "PNG"))
    with pytest.raises(PermanentError, match=r"300 x 200 pixels .* at most 0\.05 MP$"):
        ThumbnailProcessor(media.s3, max_pixels=50_000)(work)


def test_an_object_over_the_byte_limit_is_refused(media: MediaBench) -> None:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "a.bmp", encoded(scene((300, 200)), "BMP"))
    with pytest.raises(PermanentError, match=r"larger than the 1000 bytes"):
        ThumbnailProcessor(media.s3, max_bytes=1000)(work)


# --- stopping -----------------------------------------------------------------------------------


def test_a_stopped_job_stops(media: MediaBench) -> None:
    # given a job whose stop signal is raised (cancelled or taken over)
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "a.png", encoded(scene(), "PNG"))
    media.stop[0] = True
    # when it runs, then it stops and writes nothing
    with pytest.raises(StopRequested):
        ThumbnailProcessor(media.s3)(work)
    listed = media.s3.list_objects_v2(Bucket=media.outputs)
    assert listed.get("KeyCount", 0) == 0


def test_a_stop_between_sizes_ends_the_rendering(tmp_path: Path) -> None:
    # given an image on disk and a stop signal that rises after the first size
    path = tmp_path / "a.png"
    scene().save(path)
    calls: list[int] = []

    def should_stop() -> bool:
        calls.append(1)
        return len(calls) > 1

    # when rendering three sizes, then it stops before the second
    with pytest.raises(StopRequested):
        render_thumbnails(path, (128, 256, 512), "webp", should_stop=should_stop)
    assert len(calls) == 2


# --- one decoder per type: no bytes reach a parser they were not sniffed for ----------------------

EPS = (
    b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 64 64\n%%EndComments\n"
    b"newpath 0 0 moveto 64 64 lineto stroke\nshowpage\n%%EOF\n"
)


def test_each_thumbnailable_type_has_one_decoder_pillow_has_and_none_runs_a_program() -> None:
    assert set(DECODERS) == THUMBNAILABLE_IMAGES | AUDIO_WITH_ART
    Image.init()
    assert set(EVERY_DECODER) <= set(Image.OPEN)  # names Pillow (and pi-heif) registered
    assert not {"EPS", "PDF", "FITS", "HDF5", "GRIB", "BUFR", "WMF", "MPEG"} & set(EVERY_DECODER)


def test_an_eps_file_never_reaches_pillow_s_eps_parser(tmp_path: Path) -> None:
    # Given an EPS file, which Pillow left to itself identifies as an image (Ghostscript would
    # render it on load)
    path = tmp_path / "source"
    path.write_bytes(EPS)
    with Image.open(path) as probed:
        assert probed.format == "EPS"
    # When thumbnails are made of it, as a PNG (a mislabelled file) or with every decoder
    for decoders in (DECODERS["image/png"], EVERY_DECODER):
        with pytest.raises(PermanentError, match="not an image its type's decoder reads"):
            render_thumbnails(path, decoders=decoders)


def test_a_thumbnail_job_for_content_that_is_not_an_image_fails_before_reading_it(
    media: MediaBench,
) -> None:
    # EPS sniffs as text/plain: the API would refuse such a job (422); one made anyway fails
    message = fails(media, "drawing.eps", EPS)
    assert message.startswith("thumbnail_generation does not decode text/plain files")
    assert "image/png" in message


def test_a_png_labelled_as_a_jpeg_is_not_decoded(media: MediaBench) -> None:
    png = encoded(scene((64, 64)), "PNG")
    message = fails(media, "lies.jpg", png, content_type="image/jpeg")
    assert "decoders: JPEG" in message
