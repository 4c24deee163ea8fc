"""Thumbnails per second from a 12 MP JPEG: our core against naive Pillow and pyvips.

A 4000x3000 JPEG (quality 90; gradients, shapes and sensor-like noise, about the entropy of a
phone photo) is written to a temp dir, then each contestant turns it into a 256 px WebP, many
times, interleaved round by round so machine noise hits all alike; medians are compared.

- naive: `Image.open(); im.thumbnail((256, 256)); im.save(webp)`. Note that Pillow's thumbnail()
  already asks libjpeg for a reduced-scale decode (draft, with reducing_gap 2: 1/4 here).
- full decode: the same after `im.load()`, i.e. what thumbnailing costs without any draft.
- ours: `render_thumbnails(path, (256,), "webp")`, the processor's core without S3: DCT scaling
  to the smallest scale covering the size (1/8 here), Lanczos, WebP.
- ours, default job: the three default sizes (128, 256, 512) from one decode; thumbnails/s
  counts all three. Not the headline figure: the others make one thumbnail per decode.
- pyvips: `pyvips.Image.thumbnail(path, 256).webpsave_buffer(Q=80)` (shrink-on-load too), when
  `import pyvips` works (pip install pyvips-binary pyvips); else reported as skipped.

Peak RSS of our path is measured in a fresh interpreter that only runs our core. With
`--json PATH`, the figures are also written there as rows of the report's Processors table
(bench/common.py). `--runs` is `--rounds` by another name, as in the other benches.

    .venv/bin/python bench/thumbnails.py [--rounds 7] [--reps 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    add_json_argument,
    interleaved_calls,
    make_section,
    markdown_command,
    markdown_row,
    target,
    utc_now,
    verdict,
    write_section,
)
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

from filejobs.processors.thumbnail import WEBP_QUALITY, render_thumbnails  # noqa: E402

SIZE = 256
PHOTO = (4000, 3000)
TARGET_VS_NAIVE = 5.0
TARGET_VS_PYVIPS = 1.0
NAIVE, FULL, OURS, DEFAULT_JOB, PYVIPS = (
    "naive Pillow thumbnail()",
    "Pillow full decode",
    "ours (core, 256)",
    "ours (default job: 3 sizes)",
    "pyvips thumbnail",
)


def make_photo(path: Path, size: tuple[int, int] = PHOTO) -> None:
    """Smooth colour gradients and shapes under per-pixel noise, saved as JPEG quality 90."""
    width, height = size
    red = Image.linear_gradient("L").resize(size)
    green = Image.radial_gradient("L").resize(size)
    blue = Image.linear_gradient("L").rotate(90).resize(size)
    im = Image.merge("RGB", (red, green, blue))
    draw = ImageDraw.Draw(im)
    for i in range(40):
        x, y = (i * 397) % width, (i * 263) % height
        draw.ellipse((x, y, x + 300 + i * 7, y + 200 + i * 5), fill=(i * 6, 255 - i * 5, 90))
    noise = Image.merge("RGB", [Image.effect_noise(size, 24 + 4 * c) for c in range(3)])
    Image.blend(im, noise, 0.18).save(path, "JPEG", quality=90)


def naive(path: Path) -> int:
    with Image.open(path) as im:
        im.thumbnail((SIZE, SIZE))
        im.save(io.BytesIO(), "WEBP", quality=WEBP_QUALITY)
    return 1


def full_decode(path: Path) -> int:
    with Image.open(path) as im:
        im.load()
        im.thumbnail((SIZE, SIZE))
        im.save(io.BytesIO(), "WEBP", quality=WEBP_QUALITY)
    return 1


def ours(path: Path) -> int:
    return len(render_thumbnails(path, (SIZE,), "webp")[1])


def ours_default_job(path: Path) -> int:
    return len(render_thumbnails(path, (128, 256, 512), "webp")[1])


def pyvips_thumbnail() -> Callable[[Path], int] | None:
    try:
        import pyvips  # noqa: PLC0415 (optional: the bench extra)
    except (ImportError, OSError):
        return None

    def run(path: Path) -> int:
        pyvips.Image.thumbnail(str(path), SIZE).webpsave_buffer(Q=WEBP_QUALITY)
        return 1

    return run


def peak_rss_of_ours(path: Path, reps: int) -> tuple[int, int]:
    """(peak RSS after imports, peak RSS after `reps` runs of our core) in KiB, fresh process.

    Linux's ru_maxrss (resource.getrusage) survives fork and exec, so a child would report this
    process's peak (the 12 MP image made above): the child reads its own high-water mark,
    VmHWM, where /proc has it, and falls back to ru_maxrss elsewhere.
    """
    code = f"""
import resource, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT / "layers" / "filejobs")!r})
from filejobs.processors.thumbnail import render_thumbnails

def peak():
    try:
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

base = peak()
for _ in range({reps}):
    render_thumbnails(Path({str(path)!r}), ({SIZE},), "webp")
print(base, peak())
"""
    out = subprocess.run(  # noqa: S603 (our own interpreter, our own code)
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    return int(out[0]), int(out[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", "--runs", type=int, default=7, help="rounds (7)")
    parser.add_argument("--reps", type=int, default=5, help="calls per contestant per round (5)")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be at least 1")
    measured_at = utc_now()

    contestants: dict[str, Callable[[Path], int]] = {
        NAIVE: naive,
        FULL: full_decode,
        OURS: ours,
        DEFAULT_JOB: ours_default_job,
    }
    vips = pyvips_thumbnail()
    if vips is not None:
        contestants[PYVIPS] = vips

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "photo.jpg"
        make_photo(path)
        print(
            f"input: {PHOTO[0]}x{PHOTO[1]} JPEG q90, {path.stat().st_size / 1e6:.2f} MB;"
            f" {SIZE} px WebP; "
            f"{args.rounds} rounds x {args.reps} calls, interleaved; {os.cpu_count()} CPUs"
        )
        if vips is None:
            print("pyvips: skipped (import pyvips failed: pip install pyvips-binary pyvips)")
        samples = interleaved_calls(contestants, path, args.rounds, args.reps)
        per_thumb = {name: statistics.median(times) for name, times in samples.items()}
        base_rss, peak_rss = peak_rss_of_ours(path, args.reps)

    naive_s = per_thumb[NAIVE]
    vips_s = per_thumb.get(PYVIPS)
    print(f"{'':30} {'ms/thumb':>9} {'thumbs/s':>9} {'vs naive':>9} {'vs pyvips':>9}")
    for name, seconds in per_thumb.items():
        vs_vips = f"{vips_s / seconds:8.2f}x" if vips_s else "        -"
        print(
            f"{name:30} {seconds * 1000:9.1f} {1 / seconds:9.1f} "
            f"{naive_s / seconds:8.2f}x {vs_vips}"
        )
    ours_s = per_thumb[OURS]
    print(
        f"peak RSS, our core alone: {peak_rss / 1024:.0f} MiB "
        f"({base_rss / 1024:.0f} MiB after imports; VmHWM of a fresh interpreter)"
    )
    print(f"this process's ru_maxrss (all contestants, image generation): {_rss() / 1024:.0f} MiB")
    verdicts = [f"vs naive Pillow {naive_s / ours_s:.2f}x (target {TARGET_VS_NAIVE}x)"]
    if vips_s:
        verdicts.append(f"vs pyvips {vips_s / ours_s:.2f}x (target {TARGET_VS_PYVIPS}x)")
    print("ours (core, 256): " + "; ".join(verdicts))
    write_section(args.json, section(per_thumb, peak_rss, measured_at))
    return 0


def section(per_thumb: dict[str, float], peak_rss_kib: int, measured_at: str) -> dict[str, Any]:
    """The two rows of the Processors table (one thumbnail; the default job's three) from the
    medians (seconds per thumbnail) and our core's peak RSS."""
    naive_s, full_s, ours_s = per_thumb[NAIVE], per_thumb[FULL], per_thumb[OURS]
    job_s, vips_s = per_thumb[DEFAULT_JOB], per_thumb.get(PYVIPS)
    peak_mib = peak_rss_kib / 1024
    vs_naive = naive_s / ours_s
    naive_met = vs_naive >= TARGET_VS_NAIVE
    targets = [
        target(
            f"{SIZE} px thumbnail: speed-up over naive Pillow",
            f">= {TARGET_VS_NAIVE:g}x",
            vs_naive,
            naive_met,
        )
    ]
    baseline = f"naive Pillow `open(); thumbnail()` {naive_s * 1000:.0f} ms"
    ratio = f"{vs_naive:.2f}x Pillow"
    goal = f">= {TARGET_VS_NAIVE:g}x Pillow: {verdict(naive_met)}"
    pyvips_goal = f">= {TARGET_VS_PYVIPS:.1f}x pyvips"
    vs_vips = None
    if vips_s is None:
        baseline += "; pyvips: not installed"
        goal += f"; {pyvips_goal}: not measured"
    else:
        vs_vips = vips_s / ours_s
        vips_met = vs_vips >= TARGET_VS_PYVIPS
        targets.append(
            target(
                f"{SIZE} px thumbnail: speed-up over pyvips",
                f">= {TARGET_VS_PYVIPS:.1f}x",
                vs_vips,
                vips_met,
            )
        )
        baseline += f"; pyvips `thumbnail` {vips_s * 1000:.0f} ms"
        ratio += f", {vs_vips:.2f}x pyvips"
        goal += f"; {pyvips_goal}: {verdict(vips_met)}"
    megapixels = PHOTO[0] * PHOTO[1] / 1e6
    rows: list[dict[str, Any]] = [
        {
            "what": f"thumbnail_{SIZE}",
            "ours_ms": round(ours_s * 1000, 1),
            "ours_per_s": round(1 / ours_s, 2),
            "naive_pillow_ms": round(naive_s * 1000, 1),
            "pillow_full_decode_ms": round(full_s * 1000, 1),
            "pyvips_ms": None if vips_s is None else round(vips_s * 1000, 1),
            "vs_naive_pillow": round(vs_naive, 3),
            "vs_pillow_full_decode": round(full_s / ours_s, 3),
            "vs_pyvips": None if vs_vips is None else round(vs_vips, 3),
            "peak_mib": round(peak_mib, 1),
        },
        {
            "what": "default_job_128_256_512",
            "ours_ms_per_thumbnail": round(job_s * 1000, 1),
            "vs_naive_pillow": round(naive_s / job_s, 3),
        },
    ]
    markdown_rows = [
        markdown_row(
            [
                f"{SIZE} px WebP thumbnail of a {megapixels:.0f} MP JPEG"
                f" ({PHOTO[0]}x{PHOTO[1]}, q90)",
                markdown_command(),
                f"{ours_s * 1000:.0f} ms ({1 / ours_s:.1f}/s)",
                baseline,
                ratio,
                goal,
                f"{peak_mib:.0f} MiB",
            ]
        ),
        markdown_row(
            [
                "default thumbnail job (128, 256, 512 from one decode)",
                "same",
                f"{job_s * 1000:.0f} ms per thumbnail",
                "",
                f"{naive_s / job_s:.2f}x Pillow",
                "",
                "",
            ]
        ),
    ]
    return make_section("processors", rows, markdown_rows, targets, measured_at)


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    sys.exit(main())
