"""Throughput and upload-to-terminal latency of the local stack, by workers per function, with
no-op processing (the machinery alone) and with the real processors.

For each processing mode and worker count it starts `filejobs dev` in a scratch copy of the
project, uploads N files under uploads/bench/ at once with a plain S3 client (8 threads), waits
until every job of every file is terminal, and reads the jobs once from the table through the
emulator. The files are a mix of real media from tools/samples.py, each body made once and
varied by a few bytes per file (a JPEG comment, a trailing PDF comment, an MP4 `free` box, a
text line), so every file has content of its own as uploads do:

    40% photos  1600x1200 JPEG, or 1200x800 with EXIF orientation 6: scan, dedup, thumbnail
    20% PDFs    2 pages: scan, dedup, document preview, compression
    30% text    1 KB of Markdown notes: scan, dedup, document preview, compression
    10% videos  2 s of 320x240 H.264 in MP4: scan, dedup, video poster

Before the runs of the noop mode, the same files go once through the stack as it was before its
throughput work (`filejobs dev --baseline`: one moto server for every service, moto's own
request routing, short polling), at 1 worker per function: "today's 1 worker", measured on this
machine in this run, is what the ratios below compare against.

How many jobs each file gets is what the ingest plans for it (`job_types_for` of its sniffed
content type), so the wait knows how many to expect. With `--processing noop` the stack runs
with the fault rule `{"kind": "noop"}` (filejobs_dev/local/faults.py): every job is claimed,
completed and its outcome published as usual (the virus scan's file recorded clean, its gated
jobs released), but no processor runs. `real` runs the processors.

    files/s, jobs/s  : N / (last job finished - first upload returned), jobs likewise
    latency p50, p99 : per file, its last job's completed_at minus the moment its upload returned
    peak MB          : the emulator's peak resident memory (the stack process, where S3, SQS
                       and EventBridge run, plus its DynamoDB process)
    re-sent, skipped : jobs the sweep sent again (re-dispatched or promoted: its summaries in
                       the stack's log), and messages a worker acknowledged without work (its
                       MessagesSkipped metric), each as a share of the jobs
    vs 1 worker      : jobs/s over the 1-worker run's of the same processing mode

and, for noop processing, the two ratios the local stack is held to:

    noop jobs/s ratio 4 workers / today's 1 worker: R   (4 workers over the baseline's 1)
    noop jobs/s ratio 2/1: R                            (2 workers over 1, both as it is now)

The figures are for this machine running moto server, every function host and the uploader on
the same cores: they show the machinery's overhead and how it scales, not AWS's.
bench/notes/local_stack.md says what they mean.

    .venv/bin/python bench/local_stack.py [--files N] [--workers 1 2 4]
        [--processing noop|real|both] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from common import (
    add_json_argument,
    make_section,
    markdown_row,
    target,
    upload_all,
    utc_now,
    write_section,
)

from filejobs.domain.content import SNIFF_BYTES, job_types_for, sniff_content_type
from filejobs_dev.local.launch import LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # tools/ is not a package

from samples import pdf, photo, video  # noqa: E402

# Files per run, the same in both modes so their latencies compare: the whole default run
# (2 modes x 3 worker counts) takes about 10 minutes on a 2-core machine.
DEFAULT_FILES = 120
MODES = ("noop", "real")
NOOP_RULES = [{"kind": "noop"}]
TENANT = "bench"
UPLOAD_THREADS = 8
POLL_SECONDS = 5.0
HEADER = (
    "| processing | workers per function | files | jobs | files/s | jobs/s | p50 s | p99 s "
    "| emulator peak MB | re-sent | skipped | vs 1 worker |"
)


# --- the files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    extension: str
    body: bytes  # made once
    vary: Callable[[bytes, int], bytes]  # the body with content of file `number`'s own


def _jpeg(body: bytes, number: int) -> bytes:
    """A COM segment right after SOI: still the same image, to every decoder."""
    comment = f"filejobs bench {number:05d}".encode()
    return body[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + body[2:]


def _pdf(body: bytes, number: int) -> bytes:
    """A comment after %%EOF: readers look for the trailer from the end and skip it."""
    return body + f"%filejobs bench {number:05d}\n".encode()


def _mp4(body: bytes, number: int) -> bytes:
    """A top-level `free` box at the end: ignored by every demuxer."""
    payload = f"filejobs bench {number:05d}".encode()
    return body + struct.pack(">I", len(payload) + 8) + b"free" + payload


def _text(body: bytes, number: int) -> bytes:
    return body + f"\nfile {number:05d}\n".encode()


NOTES = b"Meeting notes\n\n- ship the local stack\n- measure it\n" * 20
# Dealt in this order, over and over: 40% photos, 20% PDFs, 30% text, 10% videos.
PATTERN = ("photo", "text", "pdf", "photo", "text", "rotated", "video", "text", "pdf", "photo")


def corpus() -> dict[str, Kind]:
    kinds = (
        Kind("photo", "jpg", photo(), _jpeg),
        Kind("rotated", "jpg", photo(1200, 800, orientation=6), _jpeg),
        Kind("pdf", "pdf", pdf(), _pdf),
        Kind("text", "md", NOTES, _text),
        Kind("video", "mp4", video(), _mp4),
    )
    return {kind.name: kind for kind in kinds}


@dataclass(frozen=True)
class Upload:
    kind: str
    key: str
    body: bytes
    jobs: int  # what the ingest plans for it


def deal(kinds: dict[str, Kind], count: int) -> list[Upload]:
    uploads = []
    for number in range(count):
        kind = kinds[PATTERN[number % len(PATTERN)]]
        body = kind.vary(kind.body, number)
        planned = job_types_for(sniff_content_type(body[:SNIFF_BYTES]))
        key = f"uploads/{TENANT}/{number:05d}-{kind.name}.{kind.extension}"
        uploads.append(Upload(kind.name, key, body, len(planned)))
    return uploads


def describe(uploads: list[Upload]) -> str:
    kinds = Counter(upload.kind for upload in uploads)
    return ", ".join(f"{n} {name}" for name, n in kinds.items())


# --- one run ----------------------------------------------------------------------------------


def wait_until_terminal(stack: LaunchedStack, jobs: int, seconds: float) -> list[dict[str, Any]]:
    """Every job item, once there are `jobs` and all are terminal. Asks for counts every few
    seconds (the emulator serves every function: the wait must add little to its load)."""
    deadline = time.monotonic() + seconds
    progress = stack.progress()
    while progress.jobs < jobs or progress.active:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"after {seconds:.0f} s: {progress.jobs} of {jobs} jobs made,"
                f" {progress.active} not terminal"
            )
        time.sleep(POLL_SECONDS)
        progress = stack.progress()
    return stack.scan(stack.config["table_name"])


@dataclass(frozen=True)
class Row:
    processing: str
    workers: int
    files: int
    jobs: int
    completed: int
    files_per_s: float
    jobs_per_s: float
    p50_s: float
    p99_s: float
    peak_mb: float
    resent: int = 0
    skipped: int = 0
    vs_1_worker: float | None = None

    def cells(self) -> list[str]:
        jobs = f"{self.jobs}" + ("" if self.completed == self.jobs else f" ({self.completed} ok)")
        ratio = "" if self.vs_1_worker is None else f"{self.vs_1_worker:.2f}x"
        return [
            self.processing,
            f"{self.workers}",
            f"{self.files}",
            jobs,
            f"{self.files_per_s:.2f}",
            f"{self.jobs_per_s:.2f}",
            f"{self.p50_s:.1f}",
            f"{self.p99_s:.1f}",
            f"{self.peak_mb:.0f}",
            f"{self.resent} ({self.resent / self.jobs:.1%})",
            f"{self.skipped} ({self.skipped / self.jobs:.1%})",
            ratio,
        ]

    def markdown(self) -> str:
        return markdown_row(self.cells())


def amplification(log_path: Path) -> tuple[int, int]:
    """From the stack's log: the jobs the sweep sent again, the messages workers skipped."""
    resent = skipped = 0
    for line in log_path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") == "sweep finished":
            actions = entry.get("actions") or {}
            resent += int(actions.get("redispatched", 0)) + int(actions.get("promoted", 0))
        skipped += int(sum(entry.get("MessagesSkipped") or [0]))
    return resent, skipped


def per_minute(items: list[dict[str, Any]], uploaded: dict[str, float]) -> list[int]:
    """How many jobs reached their end in each minute after the first upload: a collapse
    under load shows as a falling run of minutes."""
    start = min(uploaded.values())
    counts: Counter[int] = Counter()
    for item in items:
        done = datetime.fromisoformat(item["completed_at"]["S"]).timestamp()
        counts[int((done - start) // 60)] += 1
    return [counts[minute] for minute in range(max(counts) + 1)] if counts else []


def percentile(values: list[float], share: float) -> float:
    """Nearest rank: the smallest value with at least `share` of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def measure(
    processing: str,
    workers: int,
    uploads: list[Upload],
    timeout: float,
    scratch: Path,
    *,
    baseline: bool = False,
) -> Row:
    options = ["--workers", str(workers), *(["--baseline"] if baseline else [])]
    if processing == "noop":
        rules = scratch / "noop-faults.json"
        rules.write_text(json.dumps(NOOP_RULES))
        options += ["--faults", str(rules)]
    # The stack's log outlives the scratch copy: .filejobs/ is the project's ignored state.
    suffix = "-baseline" if baseline else ""
    log_path = ROOT / ".filejobs" / f"bench-local-stack-{processing}-{workers}w{suffix}.log"
    log_path.parent.mkdir(exist_ok=True)
    root = project_copy(ROOT, scratch)
    with log_path.open("wb") as log, launched(root, *options, output=log) as stack:
        uploaded = upload_all(stack, uploads, UPLOAD_THREADS)
        items = wait_until_terminal(stack, sum(u.jobs for u in uploads), timeout)
        peak_mb = stack.peak_memory_mb()
    noops = sum(1 for item in items if "noop" in item.get("result_data", {}).get("M", {}))
    if noops != (len(items) if processing == "noop" else 0):
        raise RuntimeError(f"{processing} processing, yet {noops} of {len(items)} jobs no-ops")
    resent, skipped = amplification(log_path)
    finished: dict[str, float] = {}  # key -> its last job's completed_at
    for item in items:
        key = item["input_data"]["M"]["key"]["S"]
        done = datetime.fromisoformat(item["completed_at"]["S"]).timestamp()
        finished[key] = max(finished.get(key, 0.0), done)
    latencies = [finished[key] - uploaded[key] for key in finished]
    span = max(finished.values()) - min(uploaded.values())
    print(f"  jobs finished per minute from the first upload: {per_minute(items, uploaded)}")
    return Row(
        processing=f"{processing} (before)" if baseline else processing,
        workers=workers,
        files=len(finished),
        jobs=len(items),
        completed=sum(1 for item in items if item["status"]["S"] == "completed"),
        files_per_s=len(finished) / span,
        jobs_per_s=len(items) / span,
        p50_s=statistics.median(latencies),
        p99_s=percentile(latencies, 0.99),
        peak_mb=peak_mb,
        resent=resent,
        skipped=skipped,
    )


# What the local stack is held to: 4 workers per function against today's 1 (the baseline), and
# 2 workers against 1, both as the stack is now.
TARGET_4_OVER_TODAY = 3.0
TARGET_2_OVER_1 = 1.6


def noop_ratios(today: Row | None, measured: list[Row]) -> list[dict[str, Any]]:
    """The ratios the local stack is held to, from the runs that were made, as targets."""
    by_workers = {row.workers: row.jobs_per_s for row in measured}
    targets = []
    if today is not None and 4 in by_workers:
        ratio = by_workers[4] / today.jobs_per_s
        name = "noop jobs/s ratio 4 workers / today's 1 worker"
        targets.append(
            target(name, f">= {TARGET_4_OVER_TODAY}", ratio, ratio >= TARGET_4_OVER_TODAY)
        )
    if 1 in by_workers and 2 in by_workers:
        ratio = by_workers[2] / by_workers[1]
        name = "noop jobs/s ratio 2/1"
        targets.append(target(name, f">= {TARGET_2_OVER_1}", ratio, ratio >= TARGET_2_OVER_1))
    return targets


# --- the whole bench --------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--files", type=int, default=DEFAULT_FILES, help="files per run")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--processing", choices=(*MODES, "both"), default="both")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    add_json_argument(parser)
    arguments = parser.parse_args()
    modes = MODES if arguments.processing == "both" else (arguments.processing,)
    started = time.monotonic()
    kinds = corpus()
    rows: list[Row] = []
    ratios: list[dict[str, Any]] = []
    for processing in modes:
        uploads = deal(kinds, arguments.files)
        jobs = sum(u.jobs for u in uploads)
        print(f"{processing}: {len(uploads)} files ({describe(uploads)}), {jobs} jobs", flush=True)
        measured = []
        today = None
        if processing == "noop":
            with tempfile.TemporaryDirectory(prefix="fj-bench-") as scratch:
                today = measure(
                    processing, 1, uploads, arguments.timeout, Path(scratch), baseline=True
                )
            print(f"  {today.markdown()}  ({time.monotonic() - started:.0f} s in)", flush=True)
        for workers in arguments.workers:
            with tempfile.TemporaryDirectory(prefix="fj-bench-") as scratch:
                row = measure(processing, workers, uploads, arguments.timeout, Path(scratch))
            measured.append(row)
            elapsed = time.monotonic() - started
            print(f"  {row.markdown()}  ({elapsed:.0f} s in)", flush=True)
        one = next((r for r in measured if r.workers == 1), None)
        rows += [] if today is None else [today]
        rows += [
            r if one is None else replace(r, vs_1_worker=r.jobs_per_s / one.jobs_per_s)
            for r in measured
        ]
        ratios += noop_ratios(today, measured)
    header = [HEADER, "| " + " | ".join("---" for _ in HEADER.split("|")[1:-1]) + " |"]
    print("\n".join([*header, *(row.markdown() for row in rows)]))
    for ratio in ratios:
        print(f"{ratio['name']}: {ratio['value']:.2f} (target {ratio['target']})")
    print(f"({time.monotonic() - started:.0f} s in all)")
    rounded = [
        {name: round(v, 3) if isinstance(v, float) else v for name, v in asdict(row).items()}
        for row in rows
    ]
    markdown = [r.markdown() for r in rows]
    section = make_section("local_stack", rounded, markdown, ratios, utc_now())
    write_section(arguments.json, {**section, "header": header})


if __name__ == "__main__":
    main()
