"""What the decoder sandbox costs per job: each decoder in the worker's process (before issue
19), through the sandbox as issue 19 made it, and through the sandbox with issue 45's defences
(a private directory per job, Landlock, the socket filter, the sweep of leftover processes).

Per file type, the decoder's task (`decode_thumbnails`, `decode_poster`, `decode_pdf_preview`,
`decode_text_preview`) is called on the open file in this process, then through two sandboxes
(`Sandbox(confined=False)`: fork from the warm zygote, limits, JSON reply, outputs checked; and
`Sandbox()`, the worker's path now), interleaved round by round so machine noise hits all alike;
medians are compared. All paths encode the same outputs, so the differences are the sandbox's
own cost and its defences'.

Goal (issues 19 and 45): the sandbox's overhead per job, defences included, <= 10% of the
in-process time or <= 50 ms, whichever is larger. The defences' own cost (confined against
unconfined, same run) is reported beside it. The zygote's start (once per execution
environment, and again after each recycle) is reported apart.

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


def started(sandbox: Sandbox, media: list[tuple[str, Task, Path, dict[str, Any]]]) -> float:
    """The zygote's start and a first job, in ms: what a cold start (or a recycle) adds."""
    begin = time.perf_counter()
    sandbox.decode(*media[-1][1:3], options=media[-1][3], output_allowed=lambda _n: True)
    return (time.perf_counter() - begin) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", "--runs", type=int, default=15)
    add_json_argument(parser)
    args = parser.parse_args()
    rows, markdown_rows, targets = [], [], []
    modules = [thumbnail.__name__, video.__name__, document.__name__]
    with tempfile.TemporaryDirectory() as scratch:
        media = make_media(Path(scratch))
        before = Sandbox(modules, confined=False)
        confined = Sandbox(modules)
        for name, sandbox in (("issue 19", before), ("with defences", confined)):
            print(
                f"zygote start + first job, {name} (once per environment, and per recycle): "
                f"{started(sandbox, media):.0f} ms"
            )
        print(
            f"Landlock ABI: {confined.zygote_state()['landlock']} (0: none, the job's directory"
            " and the socket filter only)"
        )
        for what, task, path, options in media:
            figures = medians(
                {
                    "in process": in_process(task, path, options),
                    "issue 19": sandboxed(before, task, path, options),
                    "sandboxed": sandboxed(confined, task, path, options),
                },
                args.rounds,
            )
            base, old, ours = figures["in process"], figures["issue 19"], figures["sandboxed"]
            overhead, defences = ours - base, ours - old
            allowed = max(GOAL_RATIO * base, GOAL_MS)
            met = overhead <= allowed
            print(
                f"{what}: in process {base:.1f} ms, sandboxed before issue 45 {old:.1f} ms, "
                f"with its defences {ours:.1f} ms; overhead {overhead:+.1f} ms "
                f"({ours / base:.3f}x; allowed {allowed:.0f} ms) {verdict(met)}; "
                f"the defences {defences:+.1f} ms ({ours / old:.3f}x)"
            )
            rows.append(
                {
                    "what": what,
                    "in_process_ms": base,
                    "sandboxed_before_defences_ms": old,
                    "sandboxed_ms": ours,
                }
            )
            markdown_rows.append(
                markdown_row(
                    [
                        f"sandbox: {what}",
                        markdown_command(),
                        f"{ours:.1f} ms",
                        f"{base:.1f} ms in process, {old:.1f} ms before the defences",
                        f"{ours / base:.3f}x ({ours / old:.3f}x the defences)",
                        f"overhead <= {allowed:.0f} ms: {verdict(met)}",
                        "",
                    ]
                )
            )
            targets.append(
                target(f"sandbox overhead ms: {what}", f"<= {allowed:.0f}", overhead, met)
            )
        before.close()
        confined.close()
    write_section(args.json, make_section("processors", rows, markdown_rows, targets, utc_now()))
    return 0 if all(t["met"] for t in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
