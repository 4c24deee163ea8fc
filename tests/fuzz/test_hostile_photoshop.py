"""Hostile Photoshop files: cut short, corrupted, or with a header that lies. Each reader the
header can send a file to (Pillow for an 8-bit PSD of its mode's colour channels, psd-tools
for 16-bit, PSB and extra channels) must end in thumbnails or a readable PermanentError, and
a declared size above the pixel budget must be refused before a pixel is decoded.

Mutants run through `render_thumbnails` in this process (thousands of sandbox forks would be
slow; the parsers are the same), the lying headers through the processor and its sandbox."""

from __future__ import annotations

import io
import random
import struct

import pytest
from PIL import Image

from filejobs.domain.content import PHOTOSHOP
from filejobs.domain.retry import PermanentError
from filejobs.processors import image_sources
from filejobs.processors.thumbnail import DECODERS, render_thumbnails
from tests.integration.test_photoshop_composites import fails, halves, photoshop, quadrants
from tests.processing import MediaBench

PSD_DECODERS = DECODERS[PHOTOSHOP]
HEADER = struct.Struct(">4sH6xHIIHH")  # signature, version, channels, height, width, depth, mode


def sources() -> dict[str, bytes]:
    """One valid file for each reader and layout (small: the mutants are many)."""
    scene = quadrants((96, 64))
    layers = [(layer.resize((96, 32)), top * 64 // 300, 0) for layer, top, _ in halves()]
    return {
        "pillow-rgb-8-layered": photoshop(scene, layers=layers),
        "pillow-cmyk-8": photoshop(scene.convert("CMYK")),
        "psd-tools-rgb-16-layered": photoshop(scene, depth=16, layers=layers),
        "psd-tools-grey-16": photoshop(scene.convert("L"), depth=16),
        "psd-tools-psb-8": photoshop(scene, version=2),
    }


SOURCES = sources()


def thumbnails_or_a_readable_failure(data: bytes) -> str:
    """'ok' or the failure's message; any other exception fails the test."""
    try:
        render_thumbnails(io.BytesIO(data), (32,), "webp", decoders=PSD_DECODERS)
    except PermanentError as error:
        message = str(error)
        assert message and "\n" not in message and "Traceback" not in message
        assert len(message) < 400, message
        return message
    return "ok"


def mutants(data: bytes, seed: int) -> list[bytes]:
    """Cuts at 8 points, and seeded runs of flipped bits, zeroed and 0xff bytes."""
    rng = random.Random(seed)
    cuts = [data[: len(data) * part // 9] for part in range(1, 9)]
    changed = []
    for _ in range(24):
        body = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(26, len(body))  # past the header: that is checked on its own
            run = rng.randint(1, 8)
            kind = rng.choice(("flip", "zero", "ones"))
            for i in range(at, min(at + run, len(body))):
                body[i] = {"flip": body[i] ^ (1 << rng.randrange(8)), "zero": 0, "ones": 255}[kind]
        changed.append(bytes(body))
    return cuts + changed


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_mutant_ends_in_thumbnails_or_a_readable_permanent_failure(name: str) -> None:
    outcomes = [thumbnails_or_a_readable_failure(m) for m in mutants(SOURCES[name], seed=48)]
    # the cuts at least fail (a composite cut short is not a picture), and say so
    assert all(outcome != "ok" for outcome in outcomes[:8]), outcomes[:8]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_file_cut_inside_its_composite_says_it_could_not_be_read(name: str) -> None:
    data = SOURCES[name]
    message = thumbnails_or_a_readable_failure(data[: len(data) - 200])
    assert message.startswith("the Photoshop file could not be read:"), message


def with_header(data: bytes, **fields: int) -> bytes:
    signature, version, channels, height, width, depth, mode = HEADER.unpack(data[:26])
    values = {"version": version, "channels": channels, "height": height, "width": width}
    values |= {"depth": depth, "mode": mode} | fields
    header = HEADER.pack(
        signature,
        values["version"],
        values["channels"],
        values["height"],
        values["width"],
        values["depth"],
        values["mode"],
    )
    return header + data[26:]


LYING_HEADERS = [
    ({"width": 0}, "declares 0 x 64 pixels: a side must be 1 to 30,000"),
    ({"height": 30_001}, "declares 96 x 30001 pixels"),
    ({"depth": 12}, "colour mode 3 at 12 bits a channel"),
    ({"mode": 5}, "colour mode 5"),
    ({"mode": 2, "depth": 16}, "colour mode 2 at 16 bits a channel"),
    ({"channels": 2}, "declares 2 channels: colour mode 3 needs 3 to 56"),
    ({"channels": 57}, "declares 57 channels"),
    ({"version": 3}, "not a Photoshop document"),
]


@pytest.mark.parametrize(("fields", "said"), LYING_HEADERS, ids=[str(f) for f, _ in LYING_HEADERS])
def test_a_header_outside_the_specification_is_refused_saying_what_it_declares(
    media: MediaBench, fields: dict[str, int], said: str
) -> None:
    data = with_header(SOURCES["psd-tools-rgb-16-layered"], **fields)
    assert said in fails(media, data)


@pytest.mark.parametrize("name", ["pillow-rgb-8-layered", "psd-tools-rgb-16-layered"])
def test_a_size_the_data_does_not_back_fails_to_read_and_is_never_decoded_past_it(
    name: str,
) -> None:
    # given a header declaring 4000 x 3000 over a 96 x 64 file's data
    data = with_header(SOURCES[name], width=4000, height=3000)
    # then it fails for good (the data runs out), as a Photoshop file that could not be read
    message = thumbnails_or_a_readable_failure(data)
    assert message.startswith("the Photoshop file could not be read:"), message


@pytest.mark.parametrize("version", [1, 2])
def test_a_declared_size_over_the_pixel_budget_is_refused_before_decoding(
    media: MediaBench, version: int
) -> None:
    # given a few kilobytes declaring 20,000 x 20,000 pixels (400 MP, 2.4 GB at 16 bits)
    source = SOURCES["psd-tools-psb-8" if version == 2 else "psd-tools-rgb-16-layered"]
    data = with_header(source, width=20_000, height=20_000)
    # then refused by its declared size, which the message quotes
    message = fails(media, data)
    assert message.startswith("the Photoshop file declares 20000 x 20000 pixels (400.0 MP)")


def test_the_budget_counts_the_declared_pixels_whichever_reader() -> None:
    for name in ("pillow-cmyk-8", "psd-tools-grey-16"):
        with pytest.raises(PermanentError, match="declares 96 x 64 pixels"):
            render_thumbnails(
                io.BytesIO(SOURCES[name]), (32,), "webp", decoders=PSD_DECODERS, max_pixels=6000
            )


def test_a_psb_may_be_wider_than_a_psd() -> None:
    header = image_sources._photoshop_header(
        io.BytesIO(with_header(SOURCES["psd-tools-psb-8"], width=40_000, height=10))
    )
    assert header.width == 40_000 and not header.pillow_reads_it


def test_every_source_is_valid_before_it_is_mutated() -> None:
    for name, data in SOURCES.items():
        info, rendered = render_thumbnails(io.BytesIO(data), (32,), "webp", decoders=PSD_DECODERS)
        assert (info.width, info.height) == (96, 64), name
        assert Image.open(io.BytesIO(rendered[0].data)).size == (32, 21), name
