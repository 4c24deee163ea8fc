"""Large photos' thumbnails within the pixel budget: peak memory and time of a 61 MP full-frame,
a 100 MP medium-format and a 200 MP phone JPEG (decoded at reduced scale), against a 40 MP PNG
decoded whole (the baseline, measured in the same run), and the thumbnail function's MemorySize.

Each image is made here (real encodes by libjpeg and zlib), then thumbnailed at the default
sizes (128, 256, 512) by `render_thumbnails` in a fresh process, whose own peak resident memory
(VmHWM) and wall time are read; each contender runs `--runs` times, interleaved, medians shown.

    .venv/bin/python bench/thumbnail_pixels.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))
sys.path.insert(0, str(ROOT / "dev"))

from filejobs_dev.infra.template import function_definitions, load_template  # noqa: E402

IMAGES = {
    "40 MP PNG (baseline, decoded whole)": ("png", (7_296, 5_472)),
    "61 MP JPEG (full-frame camera)": ("jpg", (9_504, 6_336)),
    "100 MP JPEG (medium format)": ("jpg", (11_648, 8_736)),
    "200 MP JPEG (phone)": ("jpg", (16_320, 12_240)),
}
BASELINE = next(iter(IMAGES))
MAKE = """
import sys
from PIL import Image, ImageDraw
width, height = int(sys.argv[2]), int(sys.argv[3])
image = Image.linear_gradient("L").resize((width, height), Image.Resampling.NEAREST).convert("RGB")
ImageDraw.Draw(image).rectangle((width // 10, height // 10, width // 3, height // 3), fill=(250, 210, 40))
image.save(sys.argv[1], quality=85) if sys.argv[1].endswith(".jpg") else image.save(sys.argv[1], compress_level=1)
"""  # noqa: E501
THUMBNAIL = """
import sys
from pathlib import Path
from filejobs.processors.thumbnail import render_thumbnails
info, rendered = render_thumbnails(Path(sys.argv[1]))
status = Path("/proc/self/status").read_text().splitlines()
print(next(line.split()[1] for line in status if line.startswith("VmHWM:")), len(rendered))
"""


def thumbnail(path: Path) -> tuple[float, float]:
    """(seconds, peak MiB) of one fresh process making the default thumbnails of `path`."""
    begin = time.perf_counter()
    answer = subprocess.run(  # noqa: S603 (this interpreter, our own script)
        [sys.executable, "-c", THUMBNAIL, str(path)],
        capture_output=True, text=True, check=True, timeout=300,
        env={"PYTHONPATH": str(ROOT / "layers" / "filejobs"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    seconds = time.perf_counter() - begin
    return seconds, int(answer.stdout.split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    memory = function_definitions(load_template())["ThumbnailGenerationWorker"].memory
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in IMAGES}
    with tempfile.TemporaryDirectory(prefix="pixels-bench-") as folder:
        paths = {}
        for name, (kind, (width, height)) in IMAGES.items():
            paths[name] = Path(folder) / f"{width}x{height}.{kind}"
            subprocess.run(  # noqa: S603 (this interpreter, our own script)
                [sys.executable, "-c", MAKE, str(paths[name]), str(width), str(height)],
                check=True, timeout=600,
            )  # fmt: skip
        for _ in range(runs):
            for name in IMAGES:
                samples[name].append(thumbnail(paths[name]))
        sizes = {name: path.stat().st_size / 1e6 for name, path in paths.items()}
    base_seconds = statistics.median(s for s, _ in samples[BASELINE])
    base_peak = statistics.median(p for _, p in samples[BASELINE])
    print(f"thumbnails 128/256/512 in a fresh process, medians of {runs} runs; "
          f"ThumbnailGenerationWorker MemorySize {memory} MB")  # fmt: skip
    print(f"{'image':<38} {'file MB':>8} {'seconds':>8} {'x base':>7} {'peak MiB':>9} "
          f"{'x base':>7} {'of memory':>10}")  # fmt: skip
    for name, taken in samples.items():
        seconds = statistics.median(s for s, _ in taken)
        peak = statistics.median(p for _, p in taken)
        print(f"{name:<38} {sizes[name]:>8.1f} {seconds:>8.2f} {seconds / base_seconds:>6.2f}x "
              f"{peak:>9.0f} {peak / base_peak:>6.2f}x {peak / memory:>9.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
