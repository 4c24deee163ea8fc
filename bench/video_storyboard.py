"""What the storyboard and the animation add to a video_thumbnail job: a 60 s 1080p H.264 video.

The video is made here with the ffmpeg CLI (`testsrc2`, 1920x1080, 30 fps, libx264 `-preset
veryfast`, a keyframe every `--gop` frames: 60 is 2 s, what phones and streaming encoders use;
250 is x264's default). Two contenders run the sandbox's own tasks on the local file, in this one
process, interleaved so machine noise hits both alike:

- poster: `decode_poster`, the job before the preview bundle (one frame, scaled, WebP);
- previews: `decode_previews`, the job now (the poster, 60 storyboard tiles, a 3 s animation at
  10 fps, their encodings).

Medians are compared; the extra time is the difference, and the ratio previews / poster. No
target: the figure is what a job now costs more, in seconds. With `--json PATH`, the figures are
also written there as a row of the report's Processors table (bench/common.py).

    .venv/bin/python bench/video_storyboard.py [--runs 3] [--gop 60] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    add_json_argument,
    make_section,
    markdown_command,
    markdown_row,
    utc_now,
    write_section,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

from filejobs.processors import video  # noqa: E402
from filejobs.processors.sandbox.task import Decoded  # noqa: E402

SECONDS, SIZE, FPS = 60, "1920x1080", 30


def make_video(path: Path, gop: int) -> None:
    pattern = f"testsrc2=duration={SECONDS}:size={SIZE}:rate={FPS}"
    encode = f"-c:v libx264 -preset veryfast -pix_fmt yuv420p -g {gop}".split()
    ffmpeg = shutil.which("ffmpeg") or "ffmpeg"  # make bench-deps installs it
    command = [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", pattern, *encode, str(path)]
    subprocess.run(command, check=True)  # noqa: S603 - our own arguments


def timed(task: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (this process and its threads) of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    task()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--runs", type=int, default=3)
    arguments.add_argument("--gop", type=int, default=60)
    add_json_argument(arguments)
    options = arguments.parse_args()
    if options.runs < 1 or options.gop < 1:
        arguments.error("--runs and --gop must be at least 1")
    measured_at = utc_now()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "clip.mp4"
        make_video(path, options.gop)
        print(f"{SECONDS} s {SIZE} H.264 at {FPS} fps, keyframe every {options.gop} frames, "
              f"{path.stat().st_size / 1e6:.1f} MB; {os.cpu_count()} CPUs")  # fmt: skip

        def poster() -> Decoded:
            with path.open("rb") as source:
                return video.decode_poster(source, {"demuxer": "mov"})

        def previews() -> Decoded:
            with path.open("rb") as source:
                return video.decode_previews(source, {"demuxer": "mov"})

        contenders = {"poster": poster, "previews": previews}
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
        poster()  # warm: the libraries loaded, as in the sandbox's zygote
        made = previews().result  # what the job makes: the table says so
        for _run in range(options.runs):
            for name, task in contenders.items():
                samples[name].append(timed(task))
    medians = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in samples.items()
    }
    for name, (wall, cpu) in medians.items():
        print(f"{name:9s} wall {wall:6.2f} s   cpu {cpu:6.2f} s   (median of {options.runs})")
    (poster_wall, poster_cpu), (all_wall, all_cpu) = medians["poster"], medians["previews"]
    print(
        f"extra for storyboard + animation: wall +{all_wall - poster_wall:.2f} s "
        f"(x{all_wall / poster_wall:.1f}), cpu +{all_cpu - poster_cpu:.2f} s "
        f"(x{all_cpu / poster_cpu:.1f})"
    )
    write_section(options.json, section(medians, made, options.gop, measured_at))


def section(
    medians: dict[str, tuple[float, float]], made: dict[str, Any], gop: int, measured_at: str
) -> dict[str, Any]:
    """One row of the Processors table: the previews job against the poster alone, as medians of
    (wall, CPU) seconds; `made` is the previews' result (its tiles, its animation's length). No
    target: the extra seconds are reported."""
    (poster_wall, poster_cpu), (all_wall, all_cpu) = medians["poster"], medians["previews"]
    tiles = made["storyboard"]["tiles"] if made.get("storyboard") else 0
    animation = made["animation"]["end_seconds"] - made["animation"]["start_seconds"]
    row = {
        "what": "video_storyboard_60s_1080p",
        "gop": gop,
        "storyboard_tiles": tiles,
        "animation_seconds": round(animation, 3),
        "poster_wall_s": round(poster_wall, 3),
        "poster_cpu_s": round(poster_cpu, 3),
        "previews_wall_s": round(all_wall, 3),
        "previews_cpu_s": round(all_cpu, 3),
        "extra_wall_s": round(all_wall - poster_wall, 3),
        "extra_cpu_s": round(all_cpu - poster_cpu, 3),
        "previews_vs_poster": round(all_wall / poster_wall, 3),
    }
    markdown = markdown_row(
        [
            f"video poster + storyboard ({tiles} tiles) + {animation:.1f} s animation of a"
            f" {SECONDS} s {SIZE} H.264 (keyframe every {gop} frames)",
            markdown_command(),
            f"{all_wall:.2f} s ({all_cpu:.2f} s CPU)",
            f"the poster alone {poster_wall:.2f} s ({poster_cpu:.2f} s CPU)",
            f"+{all_wall - poster_wall:.2f} s, {all_wall / poster_wall:.1f}x the time",
            "none: the extra seconds are reported",
            "",
        ]
    )
    return make_section("processors", [row], [markdown], [], measured_at)


if __name__ == "__main__":
    main()
