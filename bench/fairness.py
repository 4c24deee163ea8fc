"""Fairness between tenants on the local stack: a quiet tenant's latency behind a noisy one's burst.

One `filejobs dev` (one poller per function, the real processors), in a scratch copy of the
project, in four steps:

    warm-up  one file of each kind from tenant `warmup`, until its jobs are terminal: every
             host has imported its processor and clamd is warm before anything is timed
    idle     tenant `quiet` uploads QUIET_FILES files on the idle stack; each file's latency
             is from its upload's return to the last of its jobs reaching a terminal state
    burst    tenant `noisy` uploads NOISY_FILES files at once (UPLOAD_THREADS threads)
    loaded   QUIET_DELAY seconds after the burst began, tenant `quiet` uploads QUIET_FILES other
             files of the same kinds; their latencies, measured as the idle ones

and prints the ratio of the quiet tenant's median latencies, both measured in this run:

    quiet tenant latency ratio (loaded/idle): R      (target <= 2)

The files are small and real, so every job runs its processor: 1 KB Markdown notes (virus scan,
deduplication, document preview, compression) and 320x240 JPEG photos (virus scan,
deduplication, thumbnails), alternately, each with content of its own (a line or a JPEG comment
per file). The noisy tenant's backlog is not waited for: once the quiet tenant's files are done
the stack stops, and the bench prints how many of the noisy tenant's jobs had ended by then.

Beside each median, the quiet tenant's "from ingest" median: from the creation of a file's jobs
(the ingest's write) to the end of its last, the part the job queues and workers take; the rest
is the ingest router's hop and the fair ingest queue's. `--ingest-workers N` runs N pollers of
the fair ingest queue, as Lambda runs up to 10 ingest invocations at once (the local stack's
default is one).

    .venv/bin/python bench/fairness.py [--noisy-files 500] [--quiet-files 5] [--quiet-delay 10]
        [--ingest-workers 1] [--timeout 1500] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
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
from filejobs_dev.local.launch import TERMINAL, LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # tools/ is not a package

from samples import photo  # noqa: E402

NOISY_FILES = 500
QUIET_FILES = 5
QUIET_DELAY = 10.0
UPLOAD_THREADS = 8
POLL_SECONDS = 2.0
TARGET_RATIO = 2.0
HEADER = [
    "| quiet tenant | files | median s | max s | median s from ingest | noisy jobs ended by then |",
    "| --- | --- | --- | --- | --- | --- |",
]


# --- the files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upload:
    key: str
    body: bytes
    jobs: int  # what the ingest plans for it


NOTES = b"Meeting notes\n\n- ship the local stack\n- measure fairness\n" * 17


def _text(number: int) -> tuple[str, bytes]:
    return "md", NOTES + f"\nfile {number:05d}\n".encode()


def _photo_maker() -> Callable[[int], tuple[str, bytes]]:
    body = photo(320, 240)

    def varied(number: int) -> tuple[str, bytes]:
        """A COM segment right after SOI: still the same image, to every decoder."""
        comment = f"filejobs fairness {number:05d}".encode()
        marker = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
        return "jpg", body[:2] + marker + body[2:]

    return varied


def files(tenant: str, label: str, count: int, first: int) -> list[Upload]:
    """`count` files of `tenant`, text and photos in turn, numbered from `first` (each number's
    content differs from every other's)."""
    kinds = (_text, _photo_maker())
    uploads = []
    for index in range(count):
        number = first + index
        extension, body = kinds[index % len(kinds)](number)
        planned = job_types_for(sniff_content_type(body[:SNIFF_BYTES]))
        key = f"uploads/{tenant}/{label}-{number:05d}.{extension}"
        uploads.append(Upload(key, body, len(planned)))
    return uploads


# --- talking to the stack ---------------------------------------------------------------------


def _under(prefix: str, *, active_only: bool) -> dict[str, Any]:
    """A scan filter: the jobs of the files whose keys start with `prefix` (and not yet ended)."""
    expression = "begins_with(input_data.#key, :prefix)"
    values: dict[str, Any] = {":prefix": {"S": prefix}}
    names = {"#key": "key"}
    if active_only:
        expression += " AND NOT #status IN (:completed, :failed, :cancelled)"
        names["#status"] = "status"
        values.update({f":{status}": {"S": status} for status in sorted(TERMINAL)})
    return {
        "FilterExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def wait_for(stack: LaunchedStack, prefix: str, jobs: int, seconds: float) -> list[dict[str, Any]]:
    """The job items under `prefix`, once all `jobs` of them exist and have ended. Counts are
    asked for every POLL_SECONDS (a count copies no item: little load on the emulator)."""
    table = stack.config["table_name"]
    deadline = time.monotonic() + seconds
    while True:
        made = stack.count(table, **_under(prefix, active_only=False))
        active = stack.count(table, **_under(prefix, active_only=True))
        if made >= jobs and active == 0:
            return stack.scan(table, **_under(prefix, active_only=False))
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{prefix}: after {seconds:.0f} s, {made} of {jobs} jobs made, {active} not ended"
            )
        time.sleep(POLL_SECONDS)


def _stamp(item: dict[str, Any], name: str) -> float:
    return datetime.fromisoformat(item[name]["S"]).timestamp()


def latencies(items: list[dict[str, Any]], uploaded: dict[str, float]) -> list[float]:
    """Per file: its last job's end minus the moment its upload returned."""
    finished: dict[str, float] = {}
    for item in items:
        key = item["input_data"]["M"]["key"]["S"]
        finished[key] = max(finished.get(key, 0.0), _stamp(item, "completed_at"))
    return [finished[key] - uploaded[key] for key in uploaded]


def after_ingest(items: list[dict[str, Any]]) -> list[float]:
    """Per file: its last job's end minus the moment the ingest recorded its jobs (their
    created_at): the part of its latency spent in the job queues and the workers."""
    spans: dict[str, tuple[float, float]] = {}
    for item in items:
        key = item["input_data"]["M"]["key"]["S"]
        made, done = spans.get(key, (float("inf"), 0.0))
        spans[key] = (
            min(made, _stamp(item, "created_at")),
            max(done, _stamp(item, "completed_at")),
        )
    return [done - made for made, done in spans.values()]


def ended_jobs(stack: LaunchedStack, prefix: str) -> int:
    return stack.count(
        stack.config["table_name"],
        FilterExpression="begins_with(input_data.#key, :prefix) AND #status IN (:c, :f, :x)",
        ExpressionAttributeNames={"#key": "key", "#status": "status"},
        ExpressionAttributeValues={
            ":prefix": {"S": prefix},
            ":c": {"S": "completed"},
            ":f": {"S": "failed"},
            ":x": {"S": "cancelled"},
        },
    )


# --- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    stack: str  # idle or loaded
    files: int
    median_s: float
    max_s: float
    median_after_ingest_s: float
    noisy_jobs_ended: str

    def markdown(self) -> str:
        return markdown_row(
            [self.stack, f"{self.files}", f"{self.median_s:.1f}", f"{self.max_s:.1f}",
             f"{self.median_after_ingest_s:.1f}", self.noisy_jobs_ended]
        )  # fmt: skip


def measure(
    noisy: int, quiet: int, delay: float, timeout: float, scratch: Path, *, options: list[str]
) -> list[Row]:
    log_path = ROOT / ".filejobs" / "bench-fairness.log"
    log_path.parent.mkdir(exist_ok=True)
    root = project_copy(ROOT, scratch)
    warmup = files("warmup", "warm", 2, 90000)
    idle = files("quiet", "idle", quiet, 0)
    burst = files("noisy", "burst", noisy, 0)
    loaded = files("quiet", "loaded", quiet, 1000)
    with log_path.open("wb") as log, launched(root, *options, output=log) as stack:
        upload_all(stack, warmup, UPLOAD_THREADS)
        wait_for(stack, "uploads/warmup/", sum(u.jobs for u in warmup), timeout)
        print("  warmed up", flush=True)
        idle_at = upload_all(stack, idle, UPLOAD_THREADS)
        idle_items = wait_for(stack, "uploads/quiet/idle-", sum(u.jobs for u in idle), timeout)
        idle_row = _row("idle", idle_items, idle_at, "")
        print(f"  {idle_row.markdown()}", flush=True)
        began = time.time()
        with ThreadPoolExecutor(max_workers=1) as background:
            burst_done = background.submit(upload_all, stack, burst, UPLOAD_THREADS)
            time.sleep(max(0.0, began + delay - time.time()))
            loaded_at = upload_all(stack, loaded, UPLOAD_THREADS)
            burst_seconds = max(burst_done.result().values()) - began
        print(f"  burst of {noisy} files uploaded in {burst_seconds:.1f} s", flush=True)
        loaded_jobs = sum(u.jobs for u in loaded)
        loaded_items = wait_for(stack, "uploads/quiet/loaded-", loaded_jobs, timeout)
        noisy_ended = ended_jobs(stack, "uploads/noisy/")
    noisy_total = sum(u.jobs for u in burst)
    loaded_row = _row("loaded", loaded_items, loaded_at, f"{noisy_ended} of {noisy_total}")
    print(f"  {loaded_row.markdown()}", flush=True)
    return [idle_row, loaded_row]


def _row(name: str, items: list[dict[str, Any]], uploaded: dict[str, float], noisy: str) -> Row:
    seconds = latencies(items, uploaded)
    queued = statistics.median(after_ingest(items))
    return Row(name, len(seconds), statistics.median(seconds), max(seconds), queued, noisy)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--noisy-files", type=int, default=NOISY_FILES)
    parser.add_argument("--quiet-files", type=int, default=QUIET_FILES)
    parser.add_argument("--quiet-delay", type=float, default=QUIET_DELAY, help="seconds")
    parser.add_argument("--timeout", type=float, default=1500, help="seconds per wait")
    parser.add_argument(
        "--ingest-workers",
        type=int,
        default=1,
        help="pollers of the fair ingest queue (filejobs dev --function-workers IngestFunction=N)",
    )
    add_json_argument(parser)
    arguments = parser.parse_args()
    started = time.monotonic()
    print(
        f"noisy tenant: {arguments.noisy_files} files at once; quiet tenant:"
        f" {arguments.quiet_files} files idle, then {arguments.quiet_delay:.0f} s into the burst",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="fj-bench-") as scratch:
        rows = measure(
            arguments.noisy_files,
            arguments.quiet_files,
            arguments.quiet_delay,
            arguments.timeout,
            Path(scratch),
            options=["--function-workers", f"IngestFunction={arguments.ingest_workers}"],
        )
    idle, loaded = rows
    ratio = loaded.median_s / idle.median_s
    print("\n".join([*HEADER, *(row.markdown() for row in rows)]))
    print(f"quiet tenant latency ratio (loaded/idle): {ratio:.2f} (target <= {TARGET_RATIO:g})")
    print(f"({time.monotonic() - started:.0f} s in all)")
    name = "quiet tenant latency ratio (loaded/idle)"
    targets = [target(name, f"<= {TARGET_RATIO:g}", ratio, ratio <= TARGET_RATIO)]
    rounded = [
        {key: round(v, 3) if isinstance(v, float) else v for key, v in asdict(row).items()}
        for row in rows
    ]
    section = make_section("fairness", rounded, [r.markdown() for r in rows], targets, utc_now())
    write_section(arguments.json, {**section, "header": HEADER})


if __name__ == "__main__":
    main()
