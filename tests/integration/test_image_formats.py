"""thumbnail_generation on SVG, Photoshop, camera RAW, JPEG XL and audio cover art: real files
of each format (tests/image_media.py), through the processor and its decoder sandbox."""

from __future__ import annotations

import http.server
import io
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from filejobs.domain.content import (
    AUDIO_WITH_ART,
    JPEG_XL,
    PHOTOSHOP,
    SVG,
    THUMBNAILABLE_IMAGES,
)
from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors import image_sources
from filejobs.processors.thumbnail import DECODERS, ThumbnailProcessor, render_thumbnails
from tests import image_media
from tests.image_media import RED
from tests.processing import MediaBench

DNG = "image/x-adobe-dng"


def run(
    media: MediaBench, name: str, data: bytes, content_type: str, **input_data: object
) -> tuple[dict[str, Any], list[Image.Image]]:
    work = media.work_for(
        JobType.THUMBNAIL_GENERATION, name, data, {"content_type": content_type, **input_data}
    )
    result = ThumbnailProcessor(media.s3)(work)
    images = []
    for thumb in result["thumbnails"]:
        im = Image.open(io.BytesIO(media.output(thumb["key"])))
        im.load()
        images.append(im.convert("RGB"))
    return result, images


def fails(media: MediaBench, name: str, data: bytes, content_type: str) -> str:
    work = media.work_for(
        JobType.THUMBNAIL_GENERATION, name, data, {"content_type": content_type, "sizes": [128]}
    )
    with pytest.raises(PermanentError) as raised:
        ThumbnailProcessor(media.s3)(work)
    message = str(raised.value)
    assert "Traceback" not in message and "\n" not in message
    return message


def reddish(pixel: Any) -> bool:
    """Red well above green and blue: a RAW's colour goes through a camera matrix and a tone
    curve, so its red is red, not exactly (255, 0, 0)."""
    red, green, blue = pixel
    return bool(red > 180 and red - max(green, blue) > 100)


def bluish(pixel: Any) -> bool:
    red, green, blue = pixel
    return bool(blue > 180 and blue - max(red, green) > 100)


def red_then_blue(im: Image.Image, *, vertical: bool = False) -> bool:
    """Red on the first half, blue on the second (left to right, or top to bottom)."""
    first = (im.width // 2, im.height // 4) if vertical else (im.width // 4, im.height // 2)
    second = (
        (im.width // 2, 3 * im.height // 4) if vertical else (3 * im.width // 4, im.height // 2)
    )
    return reddish(im.getpixel(first)) and bluish(im.getpixel(second))


def test_every_new_type_has_its_one_source_and_audio_its_art() -> None:
    assert set(DECODERS) == THUMBNAILABLE_IMAGES | AUDIO_WITH_ART
    assert all(len(DECODERS[kind]) == 1 for kind in image_sources.DECODERS)


# --- each format: sizes, aspect, orientation, content -------------------------------------------

LANDSCAPE = [(512, 384), (256, 192), (128, 96)]
SQUARE = [(500, 500), (256, 256), (128, 128)]

CASES = [
    ("drawing.svg", SVG, image_media.svg, "SVG", LANDSCAPE),
    ("poster.psd", PHOTOSHOP, image_media.psd, "PSD", LANDSCAPE),
    ("poster.psb", PHOTOSHOP, lambda: image_media.psd(version=2), "PSB", LANDSCAPE),
    ("photo.dng", DNG, image_media.dng, "RAW", LANDSCAPE),
    (
        "song.mp3",
        "audio/mpeg",
        lambda: image_media.mp3(image_media.jpeg(image_media.scene((500, 500)))),
        "JPEG",
        SQUARE,
    ),
    (
        "song.m4a",
        "audio/mp4",
        lambda: image_media.m4a(image_media.jpeg(image_media.scene((500, 500)))),
        "JPEG",
        SQUARE,
    ),
]


@pytest.mark.parametrize(
    ("name", "kind", "make", "source", "sizes"), CASES, ids=[c[0] for c in CASES]
)
def test_each_format_gives_thumbnails_of_the_requested_sizes_with_its_content(
    media: MediaBench,
    name: str,
    kind: str,
    make: Any,
    source: str,
    sizes: list[tuple[int, int]],
) -> None:
    # given a real file of the format showing red left, blue right
    # when thumbnailed at the default sizes
    result, images = run(media, name, make(), kind)
    # then each size, in the scene's aspect, red left and blue right
    assert result["source"]["format"] == source
    assert sorted((im.size for im in images), reverse=True) == sizes
    for im in images:
        assert red_then_blue(im), (name, im.size, im.getpixel((im.width // 4, im.height // 2)))


def test_a_flac_s_png_cover_is_decoded_as_a_png(media: MediaBench) -> None:
    png = io.BytesIO()
    image_media.scene((300, 300)).save(png, "PNG")
    result, images = run(media, "song.flac", image_media.flac(png.getvalue()), "audio/flac")
    assert result["source"]["format"] == "PNG"
    assert [im.size for im in images] == [(128, 128), (256, 256), (300, 300)]
    assert all(red_then_blue(im) for im in images)


def test_a_jpeg_xl_is_decoded_by_the_jxl_plugin(media: MediaBench) -> None:
    im = image_media.scene((800, 600))
    data = io.BytesIO()
    import pillow_jxl  # noqa: F401, PLC0415 - its encoder

    im.save(data, "JXL", lossless=True)
    result, images = run(media, "photo.jxl", data.getvalue(), JPEG_XL)
    assert result["source"]["format"] == "JXL"
    assert sorted((i.size for i in images), reverse=True) == LANDSCAPE
    assert all(red_then_blue(i) for i in images)


def test_a_jpeg_xl_shows_the_way_its_own_header_says_whatever_its_exif(
    media: MediaBench,
) -> None:
    # given a JPEG XL whose header leaves it as stored but whose Exif says orientation 6 (the
    # JXL standard has the Exif orientation ignored: the header's is the one libjxl applies)
    im = image_media.scene((800, 600))
    exif = Image.Exif()
    exif[0x0112] = 6
    data = io.BytesIO()
    import pillow_jxl  # noqa: F401, PLC0415 - its encoder

    im.save(data, "JXL", lossless=True, exif=exif.tobytes())
    assert Image.open(io.BytesIO(data.getvalue())).getexif()[0x0112] == 6

    # when thumbnailed, then as stored: landscape, red left, not turned by the Exif
    result, images = run(media, "photo.jxl", data.getvalue(), JPEG_XL)
    assert result["source"]["orientation_applied"] is False
    assert sorted((i.size for i in images), reverse=True) == LANDSCAPE
    assert all(red_then_blue(i) for i in images)


def test_a_dng_held_sideways_comes_out_upright(media: MediaBench) -> None:
    # given a DNG whose orientation tag says the camera was turned 90 degrees clockwise
    data = image_media.dng(orientation=6)
    # when thumbnailed (a demosaic: LibRaw applies the orientation)
    result, images = run(media, "sideways.dng", data, DNG, sizes=[256])
    # then portrait, red (the sensor's left) on top, from a half-size demosaic (300x400 still
    # covers 256)
    assert images[0].size == (192, 256)
    assert red_then_blue(images[0], vertical=True)
    assert (result["source"]["width"], result["source"]["height"]) == (300, 400)


def test_a_dng_s_full_size_preview_is_used_and_turned_upright(media: MediaBench) -> None:
    # given a DNG with a full-size preview in IFD 0 and orientation 6
    data = image_media.dng(orientation=6, preview=True)
    result, images = run(media, "preview.dng", data, DNG, sizes=[512])
    # then the preview is the thumbnail, turned the way LibRaw says the camera was held
    assert result["source"]["format"] == "RAW preview"
    assert images[0].size == (384, 512)
    assert red_then_blue(images[0], vertical=True)


def test_a_small_embedded_preview_gives_way_to_a_demosaic() -> None:
    data = image_media.dng((1600, 1200), preview=True)
    small = image_media.dng((1600, 1200))  # the same raw, no preview
    for body in (data, small):
        info, rendered = render_thumbnails(io.BytesIO(body), [512], decoders=DECODERS[DNG])
        assert (rendered[0].width, rendered[0].height) == (512, 384)
        assert info.format in ("RAW", "RAW preview")


# --- hostile and broken input -----------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []  # noqa: RUF012 - shared by the server's handlers on purpose

    def do_GET(self) -> None:
        self.requests.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[int, list[str]]]:
    _Recorder.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], _Recorder.requests
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "reference",
    [
        '<image width="100" height="100" href="http://127.0.0.1:{port}/x.png"/>',
        '<image width="100" height="100" xlink:href="http://127.0.0.1:{port}/x.png"/>',
        '<rect width="9" height="9" style="fill: url(http://127.0.0.1:{port}/x.svg#p)"/>',
        '<image width="100" height="100" xlink:href="file:///etc/passwd"/>',
        '<image width="100" height="100" href="/etc/passwd"/>',
        '<image width="100" height="100" href="x.png"/>',
        '<use href="other.svg#shape"/>',
    ],
)
def test_an_svg_referencing_anything_outside_itself_is_refused_and_nothing_is_fetched(
    media: MediaBench, recorder: tuple[int, list[str]], reference: str
) -> None:
    port, requests = recorder
    data = image_media.svg(body=reference.format(port=port))
    message = fails(media, "drawing.svg", data, SVG)
    assert message.startswith("the SVG references an external resource")
    assert requests == []


def test_an_svg_drawing_a_data_uri_and_a_fragment_is_rendered(media: MediaBench) -> None:
    png = io.BytesIO()
    Image.new("RGB", (4, 4), RED).save(png, "PNG")
    import base64  # noqa: PLC0415

    uri = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    body = (
        f'<defs><rect id="r" width="400" height="600" fill="#ff0000"/></defs>'
        f'<use href="#r"/><image x="400" width="10" height="10" href="{uri}"/>'
    )
    _, images = run(media, "drawing.svg", image_media.svg(body=body), SVG, sizes=[128])
    assert red_then_blue(images[0])


def test_an_svg_billion_laughs_is_refused(media: MediaBench) -> None:
    message = fails(media, "lol.svg", image_media.billion_laughs_svg(), SVG)
    assert "entity" in message


def test_resvg_itself_stops_a_billion_laughs() -> None:
    # the pre-check aside, resvg's parser refuses the entity loop on its own
    import resvg_py  # noqa: PLC0415

    with pytest.raises(ValueError, match="entity"):
        resvg_py.svg_to_bytes(svg_string=image_media.billion_laughs_svg().decode(), width=16)


def test_a_huge_svg_canvas_is_refused_and_a_large_one_rendered_at_the_thumbnail_size(
    media: MediaBench,
) -> None:
    message = fails(media, "huge.svg", image_media.svg("2000000", "1000000"), SVG)
    assert "2000000x1000000 canvas" in message
    message = fails(media, "huge.svg", image_media.svg("100%", "100%", view_box="0 0 9e9 9e9"), SVG)
    assert "above the 1,000,000 pixels a side accepted" in message
    # 40000x90000 declared (3.6 GP): drawn at 512 on its long edge, never at its own size
    _, images = run(media, "large.svg", image_media.svg("40000", "90000"), SVG, sizes=[512])
    assert images[0].size == (228, 512)
    assert red_then_blue(images[0])


def test_an_svg_above_the_byte_cap_is_refused(media: MediaBench) -> None:
    padding = "<!--" + "x" * image_sources.SVG_MAX_BYTES + "-->"
    message = fails(media, "big.svg", image_media.svg(body=padding), SVG)
    assert "larger than the 8 MB accepted" in message


def test_a_photoshop_file_without_a_composite_fails_saying_how_to_save_it(
    media: MediaBench,
) -> None:
    message = fails(media, "layers.psd", image_media.psd_without_composite(), PHOTOSHOP)
    assert message == image_sources.NO_COMPOSITE


@pytest.mark.parametrize("version", [1, 2])
def test_a_truncated_photoshop_file_fails_permanently(media: MediaBench, version: int) -> None:
    whole = image_media.psd(version=version)
    assert "could not be" in fails(media, "cut.psd", whole[: len(whole) // 3], PHOTOSHOP)
    assert "cut short" in fails(media, "cut.psd", whole[:20], PHOTOSHOP)


def test_a_raw_of_garbage_fails_permanently(media: MediaBench) -> None:
    whole = image_media.dng()
    for body in (b"II*\x00" + b"garbage!" * 4000, whole[:3000] + b"garbage!" * 4000):
        message = fails(media, "photo.dng", body, DNG)
        assert message.startswith("the camera RAW could not be decoded:"), message


@pytest.mark.parametrize(
    ("name", "kind", "make"),
    [
        ("bare.mp3", "audio/mpeg", image_media.mp3),
        ("bare.m4a", "audio/mp4", lambda: image_media.m4a(None)),
        ("bare.flac", "audio/flac", lambda: image_media.flac(None)),
    ],
)
def test_audio_without_cover_art_fails_permanently(
    media: MediaBench, name: str, kind: str, make: Any
) -> None:
    assert fails(media, name, make(), kind) == image_sources.NO_COVER_ART


def test_cover_art_that_is_not_a_jpeg_or_png_is_not_decoded(media: MediaBench) -> None:
    gif = io.BytesIO()
    image_media.scene((64, 64)).save(gif, "GIF")
    message = fails(media, "song.mp3", image_media.mp3(gif.getvalue()), "audio/mpeg")
    assert "image/gif" in message


# --- mutants: each source ends in thumbnails or a readable permanent failure --------------------

MUTATED = [
    ("drawing.svg", SVG, image_media.svg),
    ("poster.psd", PHOTOSHOP, image_media.psd),
    ("poster.psb", PHOTOSHOP, lambda: image_media.psd(version=2)),
    ("photo.dng", DNG, lambda: image_media.dng((200, 150), preview=True)),
    ("song.mp3", "audio/mpeg", lambda: image_media.mp3(image_media.jpeg(image_media.scene()))),
    ("song.m4a", "audio/mp4", lambda: image_media.m4a(image_media.jpeg(image_media.scene()))),
]


def mutants(data: bytes, seed: int) -> list[bytes]:
    """Truncations at a few points, and seeded runs of flipped and zeroed bytes."""
    rng = random.Random(seed)
    cuts = [data[: len(data) * part // 8] for part in (1, 3, 6)]
    flipped = []
    for _ in range(5):
        body = bytearray(data)
        for _ in range(rng.randint(1, 24)):
            at = rng.randrange(len(body))
            body[at] = rng.randrange(256) if rng.random() < 0.7 else 0
        flipped.append(bytes(body))
    return [*cuts, *flipped]


@pytest.mark.parametrize(("name", "kind", "make"), MUTATED, ids=[m[0] for m in MUTATED])
def test_a_mutated_file_gives_thumbnails_or_a_readable_permanent_failure(
    media: MediaBench, name: str, kind: str, make: Any
) -> None:
    for number, body in enumerate(mutants(make(), seed=len(name))):
        work = media.work_for(
            JobType.THUMBNAIL_GENERATION, f"{number}-{name}", body, {"content_type": kind}
        )
        try:
            ThumbnailProcessor(media.s3)(work)
        except PermanentError as error:
            message = str(error)
            assert "Traceback" not in message and "\n" not in message and len(message) < 400
