"""Poster frame of a 1080p, 10 s H.264 video: our core (PyAV + Pillow) against the ffmpeg CLI.

The video is made here with PyAV: 1920x1080, 30 fps, a keyframe every 2 s, moving content (a
gradient, a sweeping bar, the frame number). Our core is `extract_poster` + `encode_webp` on a
local path, exactly what VideoPosterProcessor runs after the download: the frame at 10% of the
duration (1 s), scaled to 1280 px on its long edge, written as WebP.

Each sample of every contender runs in a fresh process, interleaved so machine noise hits all
alike; medians are compared and each process's peak RSS (wait4) is reported. Contenders:

- ours (cold): a fresh interpreter importing av and Pillow, then the core: a Lambda cold start.
- ours (warm): the core again in that same process: every invocation after the first.
- ffmpeg: `ffmpeg -ss T -i in.mp4 -frames:v 1 out.webp`, as asked (a 1920x1080 WebP).
- ffmpeg scaled: the same with `-vf scale=1280:-2`, the same output as ours.

Peak RSS is the process's own (wait4); the parent imports nothing heavy, since a child's figure
starts from its parent's at fork. Target: ours faster than the CLI.

    .venv/bin/python bench/video_frames.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

SECONDS, FPS, SIZE, GOP = 10, 30, (1920, 1080), 60
WARM_REPS = 3


def make_video(path: Path) -> None:
    import av  # noqa: PLC0415 (children only: see the note on peak RSS)
    from PIL import Image, ImageDraw  # noqa: PLC0415

    gradient = Image.linear_gradient("L").resize(SIZE)
    with av.open(str(path), "w", format="mp4") as video:
        stream = video.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        stream.options = {"g": str(GOP), "preset": "veryfast", "crf": "23"}
        for n in range(SECONDS * FPS):
            image = Image.merge(
                "RGB",
                (
                    gradient,
                    gradient.rotate(n % 360),
                    gradient.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
                ),
            )
            draw = ImageDraw.Draw(image)
            x = n * 16 % SIZE[0]
            draw.rectangle((x, 0, x + 120, SIZE[1]), fill=(255, 200, 0))
            draw.text((60, 60), f"frame {n}", fill="white", font_size=96)
            frame = av.VideoFrame.from_image(image)  # type: ignore[no-untyped-call]
            for packet in stream.encode(frame):
                video.mux(packet)
        for packet in stream.encode():
            video.mux(packet)


def child(source: Path, out: Path) -> None:
    """One fresh process: the core once cold, then WARM_REPS more; prints the timings."""
    from filejobs.processors.video import encode_webp, extract_poster  # noqa: PLC0415

    timings = []
    for _ in range(1 + WARM_REPS):
        begin = time.perf_counter()
        poster = extract_poster(source)
        out.write_bytes(encode_webp(poster.image))
        timings.append(time.perf_counter() - begin)
    # The process's wall time less the warm repetitions is a cold start: interpreter, imports,
    # the first call.
    print(json.dumps({"warm": timings[1:]}))


def make(path: Path) -> None:
    from filejobs.processors.video import poster_time  # noqa: PLC0415

    make_video(path)
    print(f"{poster_time(float(SECONDS)):.3f}")


def timed(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stdout of one fresh process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        begin = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err)  # noqa: S603
        _, status, usage = os.wait4(process.pid, 0)  # reaps it: its own rusage, not a total
        wall = time.perf_counter() - begin
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"{command[0]} failed: {err.read().decode(errors='replace')}")
        return wall, usage.ru_maxrss, out.read().decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--make", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.make:
        make(args.make)
        return
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise SystemExit("ffmpeg is not on PATH (apt-get install -y ffmpeg)")
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "in.mp4"
        at = timed([sys.executable, __file__, "--make", str(source)])[2].strip()
        print(
            f"video: {SIZE[0]}x{SIZE[1]}, {SECONDS} s at {FPS} fps, keyframe every {GOP} frames,"
            f" {source.stat().st_size / 1e6:.1f} MB; poster at {at} s; {args.runs} runs"
        )
        contenders = {
            "ours": [sys.executable, __file__, "--child", str(source), f"{scratch}/ours.webp"],
            "ffmpeg": [
                *(ffmpeg, "-v", "error", "-y", "-ss", at, "-i", str(source)),
                *("-frames:v", "1", f"{scratch}/ffmpeg.webp"),
            ],
            "ffmpeg scaled": [
                *(ffmpeg, "-v", "error", "-y", "-ss", at, "-i", str(source)),
                *("-frames:v", "1", "-vf", "scale=1280:-2", f"{scratch}/scaled.webp"),
            ],
        }
        walls: dict[str, list[float]] = {name: [] for name in (*contenders, "ours (warm)")}
        rss: dict[str, int] = dict.fromkeys(contenders, 0)
        for _ in range(args.runs):
            for name, command in contenders.items():
                wall, peak, stdout = timed(command)
                rss[name] = max(rss[name], peak)
                if name == "ours":
                    warm = json.loads(stdout)["warm"]
                    walls["ours"].append(wall - sum(warm))
                    walls["ours (warm)"].extend(warm)
                else:
                    walls[name].append(wall)
        medians = {name: statistics.median(values) for name, values in walls.items()}
        rss["ours (warm)"] = rss["ours"]
        for name, median in medians.items():
            label = "ours (cold)" if name == "ours" else name
            peak_mib = rss[name] / 1024
            print(f"  {label:14} median {median * 1000:7.1f} ms   peak RSS {peak_mib:6.1f} MiB")
        for theirs in ("ffmpeg", "ffmpeg scaled"):
            for ours in ("ours", "ours (warm)"):
                label = "ours (cold)" if ours == "ours" else ours
                ratio = medians[ours] / medians[theirs]
                print(f"  {label} / {theirs}: {ratio:.2f}x")
        sizes = {p.name: p.stat().st_size for p in Path(scratch).glob("*.webp")}
        print(f"  outputs: {sizes}")


if __name__ == "__main__":
    main()
