"""The low lane on the local stack: a new upload's latency behind a backlog of a tenant's rescans.

One `filejobs dev` (one poller per function, the real processors), in a scratch copy of the
project. Tenant `acme` has one file; a backlog of BACKLOG virus scans of it is queued at once
(jobs made as a rescan makes them, by a child process with the stack's environment, so no
rescan quota stands in the way), and then the same tenant uploads a new file: its latency is
from its upload's return to the last of its jobs ending. Three runs, one after another:

    idle     no backlog
    normal   the backlog at priority 0: in the scan's normal lane, as every rescan was before
             the low lane (the new upload's scan waits behind it; the drain is waited for)
    low      the backlog at the rescans' priority (-10): in the scan's low lane

and prints each latency. The target: behind the low lane's backlog, a new upload waits at most
for the one backlog scan in hand, whatever the backlog's length (low <= idle + the longest of
the backlog's scans). With one host per worker (the local stack's default, `--scan-workers 1`)
that host is one execution environment for all three lanes, and a normal-lane message it takes
waits for the low-lane job it runs; on Lambda each lane's event source invokes environments of
its own. With `--scan-workers 3` the scan's third host polls only the normal and high lanes
(a lane is polled by at most its MaximumConcurrency of hosts, as on Lambda). The backlog's
tenant is the uploader's, so the fair queue does not reorder them: only the lane keeps the
upload ahead.

    .venv/bin/python bench/low_lane.py [--backlog 200] [--scan-workers 1] [--timeout 1800]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from common import add_json_argument, make_section, markdown_row, target, utc_now, write_section

from filejobs_cli.local_stack_file import LOCAL_CREDENTIALS
from filejobs_dev.local.launch import TERMINAL, LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
BACKLOG = 200
TENANT = "acme"
NOTES = b"Meeting notes\n\n- rescan the whole tenant\n" * 10
BACKLOG_KEY = "bench-backlog"
POLL_SECONDS = 1.0
HEADER = [
    "| backlog | in lane | new upload's latency s | backlog scans ended by then |",
    "| --- | --- | --- | --- |",
]


@dataclass(frozen=True)
class Row:
    backlog: int
    lane: str
    latency_s: float
    backlog_ended: int

    def markdown(self) -> str:
        return markdown_row(
            [f"{self.backlog}", self.lane, f"{self.latency_s:.1f}", f"{self.backlog_ended}"]
        )


# --- the backlog, made in a child with the stack's environment -----------------------------------


def make_backlog(file_id: str, count: int, priority: int, label: str) -> None:
    """`count` scan jobs of the file at `priority`, stored and sent as a rescan stores and sends
    its job (runs in a child whose environment is a function's on the local stack)."""
    from filejobs import runtime  # noqa: PLC0415 (the child's environment configures it)
    from filejobs.data.file_repository import FileRepository  # noqa: PLC0415
    from filejobs.domain.ingest import new_job  # noqa: PLC0415
    from filejobs.domain.job import JobType  # noqa: PLC0415
    from filejobs.domain.retry import DispatchPolicy  # noqa: PLC0415
    from filejobs.domain.time import utcnow  # noqa: PLC0415

    runtime.tables()
    files = FileRepository()
    stored = files.get(file_id)
    assert stored is not None, file_id
    jobs = [
        new_job(
            stored,
            JobType.VIRUS_SCAN,
            now=utcnow(),
            created_by="bench",
            dispatch=DispatchPolicy(),
            idempotency_key=f"{BACKLOG_KEY}:{label}:{n}",
            priority=priority,
            input_data={"rescan": {"reason": "bench", "requested_by": "bench"}},
        )
        for n in range(count)
    ]
    for job in jobs:
        files.add_job(job)
    runtime.dispatcher().dispatch_all(jobs)


def queue_backlog(
    stack: LaunchedStack, file_id: str, count: int, priority: int, label: str
) -> None:
    environments = json.loads((stack.root / ".filejobs" / "sam-env.json").read_text())
    environment = {
        **os.environ,
        **environments["SweepFunction"],
        **LOCAL_CREDENTIALS,
        "AWS_REGION": stack.config["region"],
        "AWS_DEFAULT_REGION": stack.config["region"],
    }
    command = [
        sys.executable,
        __file__,
        "--make-backlog",
        file_id,
        str(count),
        str(priority),
        label,
    ]
    subprocess.run(command, env=environment, check=True, cwd=stack.root)  # noqa: S603 (ours)


def backlog_ended(stack: LaunchedStack, label: str) -> int:
    return stack.count(
        stack.config["table_name"],
        FilterExpression="begins_with(idempotency_key, :key) AND #status IN (:c, :f, :x)",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={
            ":key": {"S": f"{BACKLOG_KEY}:{label}:"},
            ":c": {"S": "completed"},
            ":f": {"S": "failed"},
            ":x": {"S": "cancelled"},
        },
    )


# --- the uploads ----------------------------------------------------------------------------------


def upload(stack: LaunchedStack, name: str) -> tuple[str, float]:
    key = f"uploads/{TENANT}/{name}.md"
    body = NOTES + f"\n{name}\n".encode()
    stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=body)
    return key, time.time()


def latency(stack: LaunchedStack, name: str, timeout: float) -> float:
    """Seconds from the upload's return to the end of its last job."""
    key, uploaded = upload(stack, name)
    stored = stack.settled(key, timeout)
    ended = max(datetime.fromisoformat(job["completed_at"]).timestamp() for job in stored["jobs"])
    assert {job["status"] for job in stored["jobs"]} == {"completed"}, stored["jobs"]
    return ended - uploaded


def longest_backlog_scan(stack: LaunchedStack, label: str) -> float:
    """Seconds the longest of the backlog's ended scans ran (claim to completion)."""
    items = stack.scan(
        stack.config["table_name"],
        FilterExpression="begins_with(idempotency_key, :key) AND #status = :c",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={
            ":key": {"S": f"{BACKLOG_KEY}:{label}:"},
            ":c": {"S": "completed"},
        },
    )
    return max(_stamp(item, "completed_at") - _stamp(item, "started_at") for item in items)


def _stamp(item: dict[str, Any], name: str) -> float:
    return datetime.fromisoformat(item[name]["S"]).timestamp()


def drained(stack: LaunchedStack, label: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while backlog_ended(stack, label) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"backlog {label} not drained in {timeout:.0f} s")
        time.sleep(POLL_SECONDS)


def measure(
    backlog: int, timeout: float, scratch: Path, *, options: list[str]
) -> tuple[list[Row], float]:
    """The rows, and the longest scan of the normal lane's backlog."""
    log_path = ROOT / ".filejobs" / "bench-low-lane.log"
    log_path.parent.mkdir(exist_ok=True)
    root = project_copy(ROOT, scratch)
    rows = []
    with log_path.open("wb") as log, launched(root, *options, output=log) as stack:
        # warm-up: every host has imported its processor and clamd is warm before any timing;
        # this file is the one the backlog rescans
        seed_key, _ = upload(stack, "seed")
        seed = stack.settled(seed_key, timeout)
        assert {job["status"] for job in seed["jobs"]} <= TERMINAL
        rows.append(Row(0, "-", latency(stack, "idle", timeout), 0))
        print(f"  {rows[-1].markdown()}", flush=True)
        for lane, priority in (("normal", 0), ("low", -10)):
            queue_backlog(stack, seed["id"], backlog, priority, lane)
            seconds = latency(stack, f"behind-{lane}", timeout)
            rows.append(Row(backlog, lane, seconds, backlog_ended(stack, lane)))
            print(f"  {rows[-1].markdown()}", flush=True)
            if lane == "normal":
                drained(stack, lane, backlog, timeout)  # before the next backlog is queued
                longest = longest_backlog_scan(stack, lane)
    return rows, longest


def main() -> None:
    if sys.argv[1:2] == ["--make-backlog"]:
        file_id, count, priority, label = sys.argv[2:6]
        make_backlog(file_id, int(count), int(priority), label)
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=BACKLOG, help="scans queued at once")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per wait")
    parser.add_argument(
        "--scan-workers",
        type=int,
        default=1,
        help="hosts of the scan's worker (filejobs dev --function-workers VirusScanWorker=N)",
    )
    add_json_argument(parser)
    arguments = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fj-bench-") as scratch:
        workers = ["--function-workers", f"VirusScanWorker={arguments.scan_workers}"]
        rows, longest = measure(
            arguments.backlog, arguments.timeout, Path(scratch), options=workers
        )
    idle, _, low = rows
    bound = idle.latency_s + longest
    print("\n".join([*HEADER, *(row.markdown() for row in rows)]))
    print(f"scan hosts: {arguments.scan_workers}; the longest backlog scan: {longest:.1f} s")
    print(
        f"new upload's latency behind the low lane's backlog: {low.latency_s:.1f} s"
        f" (target <= idle + the longest backlog scan = {bound:.1f} s)"
    )
    print(f"({time.monotonic() - started:.0f} s in all)")
    name = "new upload latency behind a low-lane backlog (s)"
    goal = f"<= idle + the longest backlog scan ({bound:.1f})"
    targets = [target(name, goal, low.latency_s, low.latency_s <= bound)]
    rounded: list[dict[str, Any]] = [
        {key: round(v, 3) if isinstance(v, float) else v for key, v in asdict(row).items()}
        for row in rows
    ]
    section = make_section("low_lane", rounded, [r.markdown() for r in rows], targets, utc_now())
    write_section(arguments.json, {**section, "header": HEADER})


if __name__ == "__main__":
    main()
