"""Throughput and upload-to-terminal latency of the local stack, at 1 and at 4 workers per function.

For each worker count it starts `filejobs dev` (in a scratch copy of the project), uploads N
small text files under uploads/bench/ with a plain S3 client (8 threads), waits until every job
of every file is terminal, and reads the jobs once from the table through the emulator. Each text
file gets four jobs (virus scan, document preview, compression, deduplication check).

    files/s, jobs/s  : N / (last job finished - first upload), jobs likewise
    latency p50, p99 : per file, its last job's completed_at minus the moment its upload returned
    peak MB          : the stack process's peak resident memory (moto server runs in it)

The figures are for this machine running moto server, every function host and the uploader on
the same cores: they show the machinery's overhead and how it scales, not AWS's.

    .venv/bin/python bench/local_stack.py [--files 500] [--workers 1 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from filejobs.local.launch import TERMINAL, LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]


def upload_all(stack: LaunchedStack, count: int) -> dict[str, float]:
    """key -> wall time (epoch seconds) its upload returned."""
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]

    def put(number: int) -> tuple[str, float]:
        key = f"uploads/bench/file-{number:05d}.txt"
        s3.put_object(Bucket=bucket, Key=key, Body=f"bench file {number}\n".encode() * 40)
        return key, time.time()

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(put, range(count)))


def wait_until_terminal(
    stack: LaunchedStack, files: int, jobs_per_file: int, seconds: float
) -> list[dict[str, Any]]:
    """Every job item, once all are terminal. Polls with a projected scan every 5 s: the poll
    itself is load on the emulator, which serves every function too."""
    deadline = time.monotonic() + seconds
    table = stack.config["table_name"]
    while time.monotonic() < deadline:
        projected = stack.scan(
            table, ProjectionExpression="#s", ExpressionAttributeNames={"#s": "status"}
        )
        statuses = [item["status"]["S"] for item in projected]
        if len(statuses) >= files * jobs_per_file and all(s in TERMINAL for s in statuses):
            return stack.scan(table)
        time.sleep(5)
    raise TimeoutError(f"not every job was terminal after {seconds:.0f} s")


def measure(files: int, workers: int, timeout: float) -> dict[str, float]:
    # The stack's log outlives the scratch copy: .filejobs/ is the project's ignored state.
    log_path = ROOT / ".filejobs" / f"bench-local-stack-{workers}w.log"
    log_path.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fj-bench-") as scratch:
        root = project_copy(ROOT, Path(scratch))
        with (
            log_path.open("wb") as log,
            launched(root, "--workers", str(workers), output=log) as stack,
        ):
            uploaded = upload_all(stack, files)
            items = wait_until_terminal(stack, files, 4, timeout)
            peak_mb = stack.peak_memory_mb()
    finished: dict[str, float] = {}
    keys_of_files: dict[str, str] = {}
    for item in items:
        file_id = item["file_id"]["S"]
        keys_of_files.setdefault(
            file_id, item.get("input_data", {}).get("M", {}).get("key", {}).get("S", "")
        )
        done = datetime.fromisoformat(item["completed_at"]["S"]).timestamp()
        finished[file_id] = max(finished.get(file_id, 0.0), done)
    latencies = sorted(finished[f] - uploaded[keys_of_files[f]] for f in finished)
    span = max(finished.values()) - min(uploaded.values())
    statuses = [item["status"]["S"] for item in items]
    return {
        "files": float(len(finished)),
        "jobs": float(len(items)),
        "completed": float(statuses.count("completed")),
        "files_per_s": len(finished) / span,
        "jobs_per_s": len(items) / span,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "peak_mb": peak_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--timeout", type=float, default=1800)
    arguments = parser.parse_args()
    results = {w: measure(arguments.files, w, arguments.timeout) for w in arguments.workers}
    baseline = results[arguments.workers[0]]
    print(f"local stack, {arguments.files} small text files (4 jobs each)")
    base = arguments.workers[0]
    header = (
        "workers",
        "files",
        "jobs",
        "done",
        "files/s",
        "jobs/s",
        "p50 s",
        "p99 s",
        "peak MB",
        f"vs {base}",
    )
    print(" ".join(f"{h:>8}" for h in header))
    for workers, r in results.items():
        ratio = r["jobs_per_s"] / baseline["jobs_per_s"]
        cells = [
            f"{workers}",
            f"{r['files']:.0f}",
            f"{r['jobs']:.0f}",
            f"{r['completed']:.0f}",
            f"{r['files_per_s']:.2f}",
            f"{r['jobs_per_s']:.2f}",
            f"{r['p50']:.2f}",
            f"{r['p99']:.2f}",
            f"{r['peak_mb']:.0f}",
            f"{ratio:.2f}x",
        ]
        print(" ".join(f"{c:>8}" for c in cells))


if __name__ == "__main__":
    main()
