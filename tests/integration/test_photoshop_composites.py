"""thumbnail_generation on Photoshop files of every depth and colour mode it meets: 8 and 16
bits a channel; RGB, CMYK and grayscale; flat and layered; PSD and PSB. Each file is written
here by psd-tools (and by ImageMagick where it is installed), its merged composite a scene of
four coloured quadrants, and thumbnailed through the processor and its decoder sandbox: the
thumbnail must be that composite, in its aspect, in 8-bit sRGB, whichever reader the header
sent it to (processors/image_sources.py, "Photoshop")."""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from PIL import Image, ImageChops, PsdImagePlugin
from psd_tools import PSDImage
from psd_tools.api.layers import PixelLayer
from psd_tools.api.pil_io import encode_channel
from psd_tools.constants import ChannelID, Compression

from filejobs.domain.content import PHOTOSHOP
from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors import image_sources
from filejobs.processors.thumbnail import ThumbnailProcessor
from tests.processing import MediaBench

Depth = Literal[8, 16]
Colour = tuple[int, int, int]

# Four quadrants, each colour far from the others: a thumbnail of anything else (a layer, a
# blank canvas, the wrong channel order, CMYK read as inverted) fails at least one of them.
TOP_LEFT, TOP_RIGHT = (200, 40, 40), (40, 160, 60)
BOTTOM_LEFT, BOTTOM_RIGHT = (30, 50, 200), (240, 220, 90)
SIZE = (400, 300)
# WebP at quality 80 and the 16-to-8-bit rounding move a flat colour by a few levels.
TOLERANCE = 8


def quadrants(size: tuple[int, int] = SIZE) -> Image.Image:
    width, height = size
    im = Image.new("RGB", size, TOP_LEFT)
    im.paste(TOP_RIGHT, (width // 2, 0, width, height // 2))
    im.paste(BOTTOM_LEFT, (0, height // 2, width // 2, height))
    im.paste(BOTTOM_RIGHT, (width // 2, height // 2, width, height))
    return im


def photoshop(
    composite: Image.Image,
    *,
    depth: Depth = 8,
    layers: Sequence[tuple[Image.Image, int, int]] = (),
    version: int = 1,
    compression: Compression = Compression.RLE,
) -> bytes:
    """A PSD (or PSB) written by psd-tools whose stored merged composite is `composite`
    (RGB, CMYK or L) at `depth` bits a channel, over `layers` (RGBA images, top and left).
    The layers are drawn first (psd-tools writes their composite), then the stored composite
    is set to `composite`, as Photoshop's "Maximize compatibility" stores it."""
    document = PSDImage.new(composite.mode, composite.size, depth=depth)
    for number, (layer, top, left) in enumerate(layers):
        PixelLayer.frompil(layer, document, f"layer {number + 1}", top, left, compression)
    for pixel_layer in document:
        without_mask(pixel_layer)
    document._record.header.version = version  # PSB: psd-tools writes its 8-byte lengths
    first = io.BytesIO()
    document.save(first)
    first.seek(0)
    reopened = PSDImage.open(first)
    bands = composite.split()
    if composite.mode == "CMYK":  # Photoshop stores ink inverted: 0 is full ink
        bands = tuple(ImageChops.invert(band) for band in bands)
    planes = [encode_channel(band, depth) for band in bands]
    reopened._record.image_data.compression = compression
    reopened._record.image_data.set_data(planes, reopened._record.header)
    out = io.BytesIO()
    reopened.save(out)
    return out.getvalue()


def without_mask(layer: Any) -> None:
    """The layer's empty user-mask channel (psd-tools writes one for every layer) removed: a
    layer is then stored as Photoshop stores one without a mask, and Pillow's PsdImagePlugin
    counts it as a frame (it skips records of more than four channels)."""
    record = layer._record
    kept = [i for i, info in enumerate(record.channel_info) if info.id != ChannelID.USER_LAYER_MASK]
    record.channel_info[:] = [record.channel_info[i] for i in kept]
    layer._channels[:] = [layer._channels[i] for i in kept]


def halves() -> list[tuple[Image.Image, int, int]]:
    """Two layers: the scene's top half and its bottom half, each alone a different picture
    from the composite (the other half transparent)."""
    scene = quadrants().convert("RGBA")
    width, height = SIZE
    top = scene.crop((0, 0, width, height // 2))
    bottom = scene.crop((0, height // 2, width, height))
    return [(top, 0, 0), (bottom, height // 2, 0)]


def thumbnail(
    media: MediaBench, data: bytes, sizes: list[int]
) -> tuple[dict[str, Any], Image.Image]:
    work = media.work_for(
        JobType.THUMBNAIL_GENERATION,
        "art.psd",
        data,
        {"content_type": PHOTOSHOP, "sizes": sizes, "format": "webp"},
    )
    result = ThumbnailProcessor(media.s3)(work)
    largest = max(result["thumbnails"], key=lambda thumb: thumb["size"])
    im = Image.open(io.BytesIO(media.output(largest["key"])), formats=("WEBP",))
    im.load()
    return result, im


def fails(media: MediaBench, data: bytes) -> str:
    work = media.work_for(
        JobType.THUMBNAIL_GENERATION, "art.psd", data, {"content_type": PHOTOSHOP, "sizes": [64]}
    )
    with pytest.raises(PermanentError) as raised:
        ThumbnailProcessor(media.s3)(work)
    message = str(raised.value)
    assert "Traceback" not in message and "\n" not in message
    return message


def quadrant_colours(im: Image.Image) -> list[Colour]:
    """The colour at the centre of each quadrant: top left, top right, bottom left, right."""
    rgb = im.convert("RGB")
    xs, ys = (rgb.width // 4, 3 * rgb.width // 4), (rgb.height // 4, 3 * rgb.height // 4)
    return [rgb.getpixel((x, y)) for y in ys for x in xs]  # type: ignore[misc]


def close(seen: Sequence[Colour], wanted: Sequence[Colour]) -> bool:
    return all(
        abs(a - b) <= TOLERANCE
        for got, want in zip(seen, wanted, strict=True)
        for a, b in zip(got, want, strict=True)
    )


def grey(colour: Colour) -> Colour:
    level = Image.new("RGB", (1, 1), colour).convert("L").getpixel((0, 0))
    assert isinstance(level, int)
    return (level, level, level)


SCENE = [TOP_LEFT, TOP_RIGHT, BOTTOM_LEFT, BOTTOM_RIGHT]


def rgb_file(depth: Depth, *, layered: bool = False, version: int = 1) -> bytes:
    return photoshop(quadrants(), depth=depth, layers=halves() if layered else (), version=version)


# name, the file, the colours the thumbnail shows, the reader the header sends it to
CASES: list[tuple[str, Callable[[], bytes], list[Colour], str]] = [
    ("rgb-8-flat", lambda: rgb_file(8), SCENE, "Pillow"),
    ("rgb-8-layered", lambda: rgb_file(8, layered=True), SCENE, "Pillow"),
    ("rgb-16-flat", lambda: rgb_file(16), SCENE, "psd-tools"),
    ("rgb-16-layered", lambda: rgb_file(16, layered=True), SCENE, "psd-tools"),
    # CMYK without a profile: sRGB by Pillow's formula, the inverse of the one that made it
    ("cmyk-8", lambda: photoshop(quadrants().convert("CMYK"), depth=8), SCENE, "Pillow"),
    ("cmyk-16", lambda: photoshop(quadrants().convert("CMYK"), depth=16), SCENE, "psd-tools"),
    (
        "grey-8",
        lambda: photoshop(quadrants().convert("L"), depth=8),
        [grey(c) for c in SCENE],
        "Pillow",
    ),
    (
        "grey-16",
        lambda: photoshop(quadrants().convert("L"), depth=16),
        [grey(c) for c in SCENE],
        "psd-tools",
    ),
    # a PSB's image data is laid out as a PSD's when raw; psd-tools writes its 8-byte lengths
    (
        "psb-8-layered",
        lambda: photoshop(quadrants(), layers=halves(), version=2, compression=Compression.RAW),
        SCENE,
        "psd-tools",
    ),
    (
        "psb-16",
        lambda: photoshop(quadrants(), depth=16, version=2, compression=Compression.RAW),
        SCENE,
        "psd-tools",
    ),
]


@pytest.mark.parametrize(("name", "make", "colours", "reader"), CASES, ids=[c[0] for c in CASES])
def test_each_depth_and_mode_thumbnails_to_its_merged_composite(
    media: MediaBench, name: str, make: Callable[[], bytes], colours: list[Colour], reader: str
) -> None:
    # given a Photoshop file whose merged composite is the four-quadrant scene
    data = make()
    header = image_sources._photoshop_header(io.BytesIO(data))
    assert header.pillow_reads_it == (reader == "Pillow")
    # when thumbnailed at 256 and 128
    result, im = thumbnail(media, data, [256, 128])
    # then 8-bit sRGB thumbnails of the scene's size and aspect, showing its four colours
    assert result["source"]["width"] == SIZE[0] and result["source"]["height"] == SIZE[1]
    assert result["source"]["format"] == ("PSB" if header.version == 2 else "PSD")
    assert sorted((t["width"], t["height"]) for t in result["thumbnails"]) == [
        (128, 96),
        (256, 192),
    ]
    assert im.size == (256, 192) and im.mode in ("RGB", "RGBA")
    assert close(quadrant_colours(im), colours), (name, quadrant_colours(im), colours)


def test_a_layered_8_bit_file_is_not_read_as_its_layers(media: MediaBench) -> None:
    # given an 8-bit layered PSD that Pillow opens with its two layers as frames 1 and 2 (and
    # refuses to seek to the composite before them: "attempt to seek outside sequence")
    data = rgb_file(8, layered=True)
    with Image.open(io.BytesIO(data), formats=("PSD",)) as opened:
        assert isinstance(opened, PsdImagePlugin.PsdImageFile)
        assert opened.n_frames == 2 and opened.tell() == 1
    # when thumbnailed, then one picture: the composite, not a layer, no seeking
    result, im = thumbnail(media, data, [256])
    assert result["source"]["frames"] == 1
    assert close(quadrant_colours(im), SCENE), quadrant_colours(im)


@pytest.mark.parametrize("depth", [8, 16])
def test_the_stored_composite_is_thumbnailed_not_the_layers_composited_again(
    media: MediaBench, depth: Depth
) -> None:
    # given a layered file whose stored composite (the scene) is not what its layers make
    # (two grey layers): a reader that composited the layers again would show grey
    layers = [(Image.new("RGBA", (200, 300), (128, 128, 128, 255)), 0, 0)] * 2
    data = photoshop(quadrants(), depth=depth, layers=layers)
    # when thumbnailed
    _, im = thumbnail(media, data, [256])
    # then the stored composite's colours
    assert close(quadrant_colours(im), SCENE), quadrant_colours(im)


def test_a_transparent_composite_keeps_its_alpha(media: MediaBench) -> None:
    # given an 8-bit RGB file whose composite has a 4th channel, its transparency: psd-tools
    # reads it (Pillow would take any 4th channel, a saved selection too, for alpha)
    scene = Image.new("RGBA", SIZE, (0, 0, 0, 0))
    scene.paste((*TOP_LEFT, 255), (0, 0, SIZE[0] // 2, SIZE[1]))
    document = PSDImage.frompil(scene)
    out = io.BytesIO()
    document.save(out)
    data = out.getvalue()
    header = image_sources._photoshop_header(io.BytesIO(data))
    assert header.channels == 4 and not header.pillow_reads_it
    # when thumbnailed
    _, im = thumbnail(media, data, [256])
    # then the left half is opaque in the scene's colour, the right half transparent
    assert im.mode == "RGBA"
    left, right = im.getpixel((64, 96)), im.getpixel((192, 96))
    assert isinstance(left, tuple) and isinstance(right, tuple)
    assert left[3] == 255 and right[3] == 0
    assert close([(left[0], left[1], left[2])], [TOP_LEFT]), left


def test_a_file_without_a_composite_fails_saying_how_to_save_it(media: MediaBench) -> None:
    # given a 16-bit PSD whose version-info resource says hasRealMergedData is false
    data = bytearray(rgb_file(16, layered=True))
    at = data.index(b"8BIM\x04\x21\x00\x00")  # its id, then an empty name (2 bytes)
    data[at + 8 + 4 + 4] = 0  # after the size (4) and the resource's version (4)
    # then it fails for good, saying to save with "Maximize compatibility"
    assert fails(media, bytes(data)) == image_sources.NO_COMPOSITE


# --- as ImageMagick writes them (where it is installed: the project does not need it) ---------

MAGICK = Path("/usr/bin/convert")
magick = pytest.mark.skipif(
    not MAGICK.exists() or shutil.which("identify") is None, reason="ImageMagick not installed"
)


def magick_psd(tmp_path: Path, arguments: list[str]) -> bytes:
    """`convert scene.png [top.png bottom.png] ARGUMENTS out.psd`: ImageMagick writes the first
    image as the merged composite and any others as layers."""
    quadrants().save(tmp_path / "scene.png")
    layers = []
    for number, (layer, top, _left) in enumerate(halves()):
        canvas = Image.new("RGBA", SIZE, (0, 0, 0, 0))
        canvas.paste(layer, (0, top))
        canvas.save(tmp_path / f"layer{number}.png")
        layers.append(str(tmp_path / f"layer{number}.png"))
    wanted = [str(tmp_path / "scene.png"), *(layers if "layered" in arguments else [])]
    options = [a for a in arguments if a != "layered"]
    subprocess.run(
        [str(MAGICK), *wanted, *options, str(tmp_path / "out.psd")], check=True, timeout=60
    )
    return (tmp_path / "out.psd").read_bytes()


MAGICK_CASES = [
    ("rgb-16-flat", ["-depth", "16"], SCENE),
    ("rgb-8-layered", ["layered", "-depth", "8"], SCENE),
    ("rgb-16-layered", ["layered", "-depth", "16"], SCENE),
    ("cmyk-16", ["-colorspace", "CMYK", "-depth", "16"], SCENE),
    ("grey-16", ["-colorspace", "Gray", "-depth", "16"], None),
]


@magick
@pytest.mark.parametrize(
    ("name", "arguments", "colours"), MAGICK_CASES, ids=[c[0] for c in MAGICK_CASES]
)
def test_imagemagick_s_photoshop_files_thumbnail_to_their_composite(
    media: MediaBench, tmp_path: Path, name: str, arguments: list[str], colours: list[Colour] | None
) -> None:
    data = magick_psd(tmp_path, arguments)
    _, im = thumbnail(media, data, [256])
    assert im.size == (256, 192)
    seen = quadrant_colours(im)
    if colours is None:  # ImageMagick's grey is its own luma: four distinct greys
        assert all(r == g == b for r, g, b in seen) and len(set(seen)) == 4, seen
    else:
        assert close(seen, colours), (name, seen)
