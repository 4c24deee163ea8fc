"""thumbnail_generation's pixel budget is on the pixels decoded: the 200 MP photo a phone takes and
the 100 MP a medium-format camera takes get thumbnails (a JPEG is decoded at 1/8 scale), within
the function's memory; a PNG or TIFF that would decode 900 MP or 3,600 MP whole is refused before
a pixel is decoded, for good, naming the limit; so is a JPEG too large even at 1/8."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.thumbnail import LIMITS, MAX_PIXELS, ThumbnailProcessor, render_thumbnails
from filejobs_dev.infra.template import function_definitions, load_template
from tests.integration.test_thumbnail_processor import fails, png_declaring
from tests.processing import MediaBench

PHONE = (16_320, 12_240)  # 200 MP
MEDIUM_FORMAT = (11_648, 8_736)  # 100 MP
MiB = 1024 * 1024


def real_jpeg(folder: Path, size: tuple[int, int]) -> Path:
    """A real JPEG of `size`: a gradient with a yellow block, encoded by libjpeg (seconds)."""
    path = folder / f"{size[0]}x{size[1]}.jpg"
    if not path.exists():
        image = Image.linear_gradient("L").resize(size, Image.Resampling.NEAREST).convert("RGB")
        width, height = size
        ImageDraw.Draw(image).rectangle(
            (width // 10, height // 10, width // 3, height // 3), fill=(250, 210, 40)
        )
        image.save(path, quality=80)
    return path


@pytest.fixture(scope="session")
def photos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("large-photos")
    return {"phone": real_jpeg(folder, PHONE), "medium": real_jpeg(folder, MEDIUM_FORMAT)}


def test_a_200_mp_phone_photo_gets_its_thumbnails_in_the_sandbox(
    media: MediaBench, photos: dict[str, Path]
) -> None:
    work = media.work_for(JobType.THUMBNAIL_GENERATION, "phone.jpg", photos["phone"].read_bytes())
    result = ThumbnailProcessor(media.s3)(work)
    assert (result["source"]["width"], result["source"]["height"]) == PHONE
    thumbnails = sorted(result["thumbnails"], key=lambda t: -t["width"])
    assert [(t["width"], t["height"]) for t in thumbnails] == [(512, 384), (256, 192), (128, 96)]
    largest = Image.open(io.BytesIO(media.output(thumbnails[0]["key"])))
    # the yellow block a tenth in from the top left is where it was
    r, g, b = largest.convert("RGB").getpixel((100, 70))  # type: ignore[misc]
    assert r > 200 and g > 170 and b < 100


def test_a_100_mp_camera_photo_decodes_at_an_eighth_and_its_thumbnails_are_exact(
    photos: dict[str, Path],
) -> None:
    info, rendered = render_thumbnails(photos["medium"], (1024, 256))
    assert (info.width, info.height) == MEDIUM_FORMAT
    assert [(r.width, r.height) for r in rendered] == [(1024, 768), (256, 192)]


def test_the_largest_size_a_job_may_ask_for_is_decoded_within_the_budget(
    photos: dict[str, Path],
) -> None:
    # 4096 px from the 200 MP photo: decoded at 1/2 scale, 8160 x 6120 = 49.9 MP, just within
    _, rendered = render_thumbnails(photos["phone"], (4096,))
    assert (rendered[0].width, rendered[0].height) == (4096, 3072)


def peak_rss_of_a_thumbnail(path: Path) -> int:
    """Bytes at most resident while a fresh process makes the default thumbnails of `path`."""
    # VmHWM, the peak of this process's own memory: ru_maxrss would carry its parent's peak
    # (the process it was forked from) across exec.
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from filejobs.processors.thumbnail import render_thumbnails\n"
        "render_thumbnails(Path(sys.argv[1]))\n"
        "status = Path('/proc/self/status').read_text().splitlines()\n"
        "print(next(line.split()[1] for line in status if line.startswith('VmHWM:')))\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(answer.stdout) * 1024  # in KiB


def test_a_200_mp_photos_thumbnails_stay_far_within_the_functions_memory(
    photos: dict[str, Path],
) -> None:
    megabytes = function_definitions(load_template())["ThumbnailGenerationWorker"].memory
    peak = peak_rss_of_a_thumbnail(photos["phone"])
    assert peak < LIMITS.memory_bytes
    assert peak < megabytes * MiB / 2, f"{peak / MiB:.0f} MiB of {megabytes}"


def tiff_declaring(width: int, height: int) -> bytes:
    """A TIFF header whose one directory declares width x height (8-bit grey), no pixels."""
    entries = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 8), (259, 3, 1, 1),
               (262, 3, 1, 1), (273, 4, 1, 8), (277, 3, 1, 1), (278, 4, 1, height),
               (279, 4, 1, width * height)]  # fmt: skip
    directory = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        packed = struct.pack("<I", value) if kind == 4 else struct.pack("<HH", value, 0)
        directory += struct.pack("<HHI", tag, kind, count) + packed
    return b"II*\x00" + struct.pack("<I", 8) + directory + b"\x00\x00\x00\x00"


def jpeg_declaring(width: int, height: int) -> bytes:
    """A small real JPEG whose frame header is patched to declare width x height."""
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 120, 200)).save(out, "JPEG")
    data = bytearray(out.getvalue())
    frame = data.find(b"\xff\xc0")
    data[frame + 5 : frame + 9] = struct.pack(">HH", height, width)
    return bytes(data)


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        (
            "bomb.png",
            png_declaring(30_000, 30_000),
            "the image declares 30000 x 30000 pixels (900.0 MP), all of which would be "
            "decoded: thumbnail_generation decodes at most 50 MP",
        ),
        (
            "bomb.tiff",
            tiff_declaring(60_000, 60_000),
            "the image declares 60000 x 60000 pixels (3600.0 MP), all of which would be "
            "decoded: thumbnail_generation decodes at most 50 MP",
        ),
        (
            "bomb.jpg",
            jpeg_declaring(65_000, 65_000),
            "the JPEG declares 65000 x 65000 pixels (4225.0 MP); even decoded at 1/8 scale it "
            "is 8125 x 8125 (66.0 MP), and thumbnail_generation decodes at most 50 MP",
        ),
    ],
    ids=["900 MP PNG", "60,000 x 60,000 TIFF", "JPEG over the budget at 1/8"],
)
def test_an_image_that_would_decode_past_the_budget_is_refused_before_decoding(
    media: MediaBench, name: str, data: bytes, expected: str
) -> None:
    assert len(data) < 2_000
    assert fails(media, name, data) == expected


def test_the_budget_is_the_one_the_processor_enforces() -> None:
    with pytest.raises(PermanentError, match="decodes at most 1 MP"):
        render_thumbnails(io.BytesIO(png_declaring(2000, 1000)), max_pixels=1_000_000)
    assert MAX_PIXELS == 50_000_000
