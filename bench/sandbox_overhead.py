"""What the decoder sandbox costs per job: each decoder in the worker's process (before issue
19) against the same decoder run through the sandbox (the worker's path now).

Per file type, the decoder's task (`decode_thumbnails`, `decode_poster`, `decode_pdf_preview`,
`decode_text_preview`) is called on the open file in this process, then through
`Sandbox.decode` (fork from the warm zygote, limits, JSON reply, outputs checked), interleaved
round by round so machine noise hits both alike; medians are compared. Both paths encode the
same outputs, so the difference is the sandbox's own cost.

Goal (issue 19): the overhead per job <= 10% of the in-process time or <= 50 ms, whichever is
larger. The zygote's start (once per execution environment: a cold start's cost, not a job's)
is reported apart.

    .venv/bin/python bench/sandbox_overhead.py [--rounds 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
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
    target,
    utc_now,
    verdict,
    write_section,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

from filejobs.processors import document, thumbnail, video  # noqa: E402
from filejobs.processors.sandbox.client import Sandbox  # noqa: E402
from filejobs.processors.sandbox.task import Task  # noqa: E402

GOAL_RATIO = 0.10
GOAL_MS = 50.0


def make_media(folder: Path) -> list[tuple[str, Task, Path, dict[str, Any]]]:
    """Each decoder with a realistic file and the options its processor would pass."""
    from pdf_preview import text_pdf  # noqa: PLC0415
    from thumbnails import make_photo  # noqa: PLC0415
    from video_frames import make_video  # noqa: PLC0415

    photo, small, clip = folder / "photo.jpg", folder / "small.jpg", folder / "clip.mp4"
    make_photo(photo)
    make_photo(small, (800, 600))
    make_video(clip)
    pdf, text = folder / "report.pdf", folder / "notes.csv"
    pdf.write_bytes(text_pdf())
    text.write_text("".join(f"{n},item {n},{n * 3.5}\n" for n in range(2000)))
    jpeg = {"sizes": [512, 256, 128], "format": "webp", "max_pixels": thumbnail.MAX_PIXELS}
    return [
        ("thumbnails of a 12 MP JPEG", thumbnail.decode_thumbnails, photo, {
            **jpeg, "decoders": ["JPEG"]}),
        ("thumbnails of a 0.5 MP JPEG", thumbnail.decode_thumbnails, small, {
            **jpeg, "decoders": ["JPEG"]}),
        ("poster of a 1080p H.264 clip", video.decode_poster, clip, {"demuxer": "mov"}),
        ("preview of a text PDF", document.decode_pdf_preview, pdf, {}),
        ("preview of a CSV", document.decode_text_preview, text, {
            "content_type": "text/csv", "truncated": False}),
    ]  # fmt: skip


def in_process(task: Task, path: Path, options: dict[str, Any]) -> Callable[[], object]:
    def run() -> object:
        with path.open("rb") as source:
            return task(source, dict(options))

    return run


def sandboxed(
    sandbox: Sandbox, task: Task, path: Path, options: dict[str, Any]
) -> Callable[[], object]:
    def run() -> object:
        return sandbox.decode(task, path, options=options, output_allowed=lambda _name: True)

    return run


def medians(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, run in contenders.items():
            begin = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - begin) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", "--runs", type=int, default=15)
    add_json_argument(parser)
    args = parser.parse_args()
    rows, markdown_rows, targets = [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        media = make_media(Path(scratch))
        sandbox = Sandbox([thumbnail.__name__, video.__name__, document.__name__])
        begin = time.perf_counter()
        sandbox.decode(*media[-1][1:3], options=media[-1][3], output_allowed=lambda _n: True)
        start_ms = (time.perf_counter() - begin) * 1000
        print(f"zygote start + first job (once per environment): {start_ms:.0f} ms")
        for what, task, path, options in media:
            figures = medians(
                {
                    "in process": in_process(task, path, options),
                    "sandboxed": sandboxed(sandbox, task, path, options),
                },
                args.rounds,
            )
            base, ours = figures["in process"], figures["sandboxed"]
            overhead = ours - base
            allowed = max(GOAL_RATIO * base, GOAL_MS)
            met = overhead <= allowed
            print(
                f"{what}: in process {base:.1f} ms, sandboxed {ours:.1f} ms, "
                f"overhead {overhead:+.1f} ms ({ours / base:.3f}x; allowed {allowed:.0f} ms)"
                f" {verdict(met)}"
            )
            rows.append({"what": what, "in_process_ms": base, "sandboxed_ms": ours})
            markdown_rows.append(
                markdown_row(
                    [
                        f"sandbox: {what}",
                        markdown_command(),
                        f"{ours:.1f} ms",
                        f"{base:.1f} ms in process",
                        f"{ours / base:.3f}x",
                        f"overhead <= {allowed:.0f} ms: {verdict(met)}",
                        "",
                    ]
                )
            )
            targets.append(
                target(f"sandbox overhead ms: {what}", f"<= {allowed:.0f}", overhead, met)
            )
        sandbox.close()
    write_section(args.json, make_section("processors", rows, markdown_rows, targets, utc_now()))
    return 0 if all(t["met"] for t in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
