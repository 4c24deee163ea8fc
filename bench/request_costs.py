"""AWS requests per file and job, counted on the local stack, and what a million files cost.

Starts `filejobs dev --meter-log --stream-batching-windows` (in a scratch copy of the project):
every function host counts each AWS request its code and its event source make, from botocore's
events, with DynamoDB's request units sized from the items (filejobs_dev/local/metering.py,
capacity.py), and the stream event sources gather records for their batching windows as Lambda
does. Then three paths,
one after the other, each waited out until every job is terminal and every queue empty:

- happy: photos, 2-second videos, 2-page PDFs and text files, each unique, nothing injected;
- retry: the same kinds, every job's first attempt failing with a transient error (the local
  stack's `transient` fault), so each job runs twice;
- cancel: text files whose document preview and compression run slowly (`slow` fault); each is
  cancelled through the API while it runs, as a user would;
- delete: photos processed, then each deleted with a plain DeleteObject (a delete marker): what
  following the deletion costs (the file marked deleted, its thumbnails deleted, `File Deleted`
  announced), counted from the first delete on, per deleted file.

For each path it prints, per group (a worker's job type, per job of that type; the ingest, per
file; the events publisher, per job; the API, per cancel), DynamoDB reads and writes with their
read and write units (the index writes among them), SQS requests as billed, S3 requests,
EventBridge events, invocations and GB-seconds; then the happy path's cost per million files at
the list prices of bench/prices/aws-us-east-1.toml, by job type, against the design's floor.

    .venv/bin/python bench/request_costs.py [--files 12] [--json PATH]

The cost gate (`make cost-gate`, in `make test`; filejobs_dev/local/cost_gate.py): `--check`
runs the happy path alone, at the size bench/costs.json was written at (3 files of each kind),
and exits 1 when a DynamoDB figure rose more than its tolerance over the file's; after a change
that means it, `--write-figures` writes the file again from the same happy path.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filejobs_dev.infra.template import function_definitions, load_template
from filejobs_dev.local import cost_gate
from filejobs_dev.local.costs import (
    DERIVED_DAYS,
    MONTH_SECONDS,
    SCHEDULED_GROUPS,
    SERVICES,
    Prices,
    Usage,
    dollars,
    dynamodb_per_job,
    floor_dollars,
    state_machine_writes_per_job,
    tally,
)
from filejobs_dev.local.host import rate_seconds
from filejobs_dev.local.launch import TERMINAL, LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from chaos import queue_depths  # noqa: E402 (tools/ is not a package)
from common import markdown_row, run_command, utc_now, write_section  # noqa: E402
from samples import pdf, photo, video  # noqa: E402

PRICES = ROOT / "bench" / "prices" / "aws-us-east-1.toml"
TEXT = b"Meeting notes\n\n- ship the local stack\n- measure what it costs\n" * 20
KINDS: dict[str, Callable[[], bytes]] = {
    "jpg": photo,
    "mp4": video,
    "pdf": pdf,
    "txt": lambda: TEXT,
}
SLOW_SECONDS = 20
CANCELLED_TYPES = ("document_preview", "compression")
SETTLE_SECONDS = 8  # for the outcome events to be published after the last job ends
# Issue 46's targets, happy path with every feature at its default: DynamoDB requests per job
# (every group's, over the path's jobs), the jobs' own transitions (claim, complete), write
# units per job of each job type (its worker's writes), a million files of the mix, and each
# job type's cost over its floor (above it, a note says what the difference buys).
TARGET_REQUESTS, TARGET_OWN_TRANSITIONS, TARGET_WRITE_UNITS = 5.0, 2.0, 8.0
TARGET_DOLLARS_PER_MILLION_FILES = 120.0
TARGET_OVER_FLOOR = 1.5
CENTS_WORTH_NAMING = 0.1  # $ a million: a smaller difference is left out of a type's note
# The cost gate's figures (filejobs_dev/local/cost_gate.py), and the happy path's size: the
# bench's, and the gate's (about a minute, its per-job figures the same from run to run).
FIGURES = ROOT / "bench" / "costs.json"
FILES, CHECK_FILES = 12, 3


@dataclass
class Phase:
    name: str
    started: float
    ended: float
    files: int
    jobs: Counter[str]  # by type
    outcomes: Counter[str]
    cancels: int = 0
    queries: int = 0  # status queries answered 200 (the happy path's API requests)

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs.values())


def fault_rules() -> list[dict[str, Any]]:
    return [
        {"kind": "transient", "key_contains": "/retry-", "attempts": 1},
        *(
            {"kind": "slow", "job_type": job_type, "key_contains": "/cancel-",
             "seconds": SLOW_SECONDS}
            for job_type in CANCELLED_TYPES
        ),
    ]  # fmt: skip


def unique_files(prefix: str, per_kind: int, kinds: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """`per_kind` files of each kind, each with bytes of its own (no duplicates on the happy
    path: a trailer every format here ignores)."""
    files = []
    for suffix in kinds:
        body = KINDS[suffix]()
        for number in range(per_kind):
            key = f"uploads/bench/{prefix}-{number:03d}.{suffix}"
            trailer = f"\n{prefix}-{number}\n".encode()
            files.append((key, body + trailer))
    return files


def upload(stack: LaunchedStack, files: list[tuple[str, bytes]]) -> None:
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda f: s3.put_object(Bucket=bucket, Key=f[0], Body=f[1]), files))


def jobs_of(stack: LaunchedStack, prefix: str) -> list[dict[str, Any]]:
    items = stack.scan(stack.config["table_name"])
    return [i for i in items if _key(i).startswith(f"uploads/bench/{prefix}-")]


def files_recorded(stack: LaunchedStack, prefix: str) -> int:
    items = stack.scan(stack.config["files_table"])
    return sum(
        1 for i in items if i.get("key", {}).get("S", "").startswith(f"uploads/bench/{prefix}-")
    )


def _key(item: dict[str, Any]) -> str:
    return str(item.get("input_data", {}).get("M", {}).get("key", {}).get("S", ""))


def wait_until_done(
    stack: LaunchedStack, prefix: str, files: int, seconds: float
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(2)
        if files_recorded(stack, prefix) < files:
            continue
        jobs = jobs_of(stack, prefix)
        busy = sum(n for queue, n in queue_depths(stack).items() if "DeadLetter" not in queue)
        if jobs and all(j["status"]["S"] in TERMINAL for j in jobs) and not busy:
            return jobs
    raise TimeoutError(f"{prefix}: not done after {seconds:.0f} s")


@contextmanager
def canceller(stack: LaunchedStack, prefix: str, counted: list[int]) -> Iterator[None]:
    """Cancels, through the API, each running job of the phase whose type runs slowly."""
    stop = threading.Event()
    done: set[str] = set()

    def run() -> None:
        while not stop.wait(1.0):
            for job in jobs_of(stack, prefix):
                if (
                    job["status"]["S"] == "running"
                    and job["job_type"]["S"] in CANCELLED_TYPES
                    and job["id"]["S"] not in done
                ):
                    status, _ = stack.api(
                        f"/jobs/{job['id']['S']}/cancel", method="POST",
                        body={"reason": "bench: cancel path"},
                    )  # fmt: skip
                    done.add(job["id"]["S"])
                    counted[0] += int(status == 200)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def query_status(stack: LaunchedStack, files: list[tuple[str, bytes]]) -> int:
    """What a client asks of each finished file, as the CLI does: its id by key, then the file
    with its jobs. Returns the queries answered 200."""
    answered = 0
    for key, _ in files:
        status, versions = stack.api(f"/files?key={urllib.parse.quote(key)}")
        answered += status == 200
        if status == 200 and versions.get("files"):
            status, _ = stack.api(f"/files/{versions['files'][0]['id']}")
            answered += status == 200
    return answered


def files_deleted(stack: LaunchedStack, prefix: str) -> int:
    items = stack.scan(stack.config["files_table"])
    return sum(
        1
        for i in items
        if i.get("key", {}).get("S", "").startswith(f"uploads/bench/{prefix}-")
        and i.get("status", {}).get("S") == "deleted"
    )


def delete_and_wait(
    stack: LaunchedStack, prefix: str, files: list[tuple[str, bytes]], seconds: float
) -> None:
    """Each upload deleted as any S3 client deletes it, until every file is marked deleted."""
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
    for key, _ in files:
        s3.delete_object(Bucket=bucket, Key=key)
    deadline = time.monotonic() + seconds
    while files_deleted(stack, prefix) < len(files):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{prefix}: files not deleted after {seconds:.0f} s")
        time.sleep(1)


def settle_seconds() -> float:
    """How long after a path's last job to wait: the outcome events' settling, or the longest
    batching window of a stream event source (the stats'), which the stack here honours as
    Lambda does, if longer: a batch still held is the path's cost, not the next one's."""
    functions = function_definitions(load_template(ROOT / "template.yaml"))
    windows = [
        float(properties.get("MaximumBatchingWindowInSeconds", 0))
        for spec in functions.values()
        for kind, properties in spec.events
        if kind == "DynamoDB"
    ]
    return max([SETTLE_SECONDS, *(window + 2 for window in windows)])


def run_phase(
    stack: LaunchedStack, name: str, files: list[tuple[str, bytes]], timeout: float
) -> Phase:
    settle = settle_seconds()
    started = time.time()
    cancels = [0]
    queries = 0
    if name == "delete":
        upload(stack, files)
        jobs = wait_until_done(stack, name, len(files), timeout)
        time.sleep(settle)
        started = time.time()  # what the deletions cost, not the uploads before them
        delete_and_wait(stack, name, files, timeout)
    elif name == "cancel":
        with canceller(stack, name, cancels):
            upload(stack, files)
            jobs = wait_until_done(stack, name, len(files), timeout)
    else:
        upload(stack, files)
        jobs = wait_until_done(stack, name, len(files), timeout)
        if name == "happy":
            queries = query_status(stack, files)
    time.sleep(settle)
    return Phase(
        name,
        started,
        time.time(),
        len(files),
        Counter(j["job_type"]["S"] for j in jobs),
        Counter(j["status"]["S"] for j in jobs),
        cancels[0],
        queries,
    )


# --- figures -----------------------------------------------------------------------------------


def per_unit(phase: Phase, group: str) -> int:
    """What a group's figures are divided by: jobs of its type, files, all jobs, or cancels;
    on the delete path, every group's by the files deleted."""
    if phase.name == "delete" or group in ("ingest_router", "ingest", "upload"):
        return phase.files
    if group in STREAM_GROUPS:
        return phase.total_jobs
    if group == "api":
        return max(phase.cancels or phase.queries, 1)
    if group in SCHEDULED_GROUPS:
        return 1
    return max(phase.jobs.get(group, 0), 1)


# Functions that every job's changes reach (its stream records, its outcome events), whatever
# its type: their figures are per job of every type, and they have no floor of their own.
STREAM_GROUPS = ("events", "stats", "webhooks")
UNIT_NAMES = {
    "ingest_router": "file",
    "ingest": "file",
    **dict.fromkeys(STREAM_GROUPS, "job"),
    "api": "cancel",
    **dict.fromkeys(SCHEDULED_GROUPS, "window"),
}
# The happy path's API requests are status queries; the cancel path's, cancels.
HAPPY_UNIT_NAMES = {**UNIT_NAMES, "upload": "file", "api": "status query"}
# On the delete path every figure is per file deleted.
DELETE_UNIT = "deleted file"
COLUMNS = (
    "group", "per", "DynamoDB reads", "DynamoDB writes", "read units", "write units (index)",
    "SQS requests", "S3 PUT-class", "S3 GET-class", "events", "invocations", "GB-s",
)  # fmt: skip


def group_rows(phase: Phase, usage: dict[str, Usage]) -> list[list[str]]:
    rows = []
    for group in sorted(usage, key=_group_order):
        u, n = usage[group], per_unit(phase, group)
        names = HAPPY_UNIT_NAMES if phase.queries else UNIT_NAMES
        rows.append([
            group, DELETE_UNIT if phase.name == "delete" else names.get(group, "job"),
            f"{u.dynamodb_reads / n:.2f}", f"{u.dynamodb_writes / n:.2f}",
            f"{u.read_units / n:.2f}",
            f"{u.write_units / n:.1f} ({u.index_write_units / n:.1f})",
            f"{u.sqs_requests / n:.2f}", f"{u.s3_put_class / n:.2f}", f"{u.s3_get_class / n:.2f}",
            f"{u.events / n:.2f}", f"{u.invocations / n:.2f}", f"{u.gb_seconds / n:.3f}",
        ])  # fmt: skip
    return rows


def _group_order(group: str) -> tuple[int, str]:
    order = {
        "upload": -2,
        "ingest_router": -1,
        "ingest": 0,
        "virus_scan": 1,
        "events": 8,
        "stats": 8,
        "webhooks": 8,
        "api": 9,
        "sweep": 10,
        "reconciler": 10,
    }
    return order.get(group, 5), group


PLURALS = {"file": "files", "job": "jobs", "status query": "status queries"}
# What a job type's cost above its floor buys, service by service (the floor: one invocation
# as long as the processor, a claim and a completion, one message, the processor's own S3).
WHAT_IT_BUYS = {
    "lambda": "the handler around the processor: the claim and completion round trips, the "
    "lease keeper, client setup (timed here against the local emulator, an upper bound)",
    "dynamodb": "the file's verdict, read as the job's message arrives (scan before parse)",
    "xray": "a trace of nearly every invocation (with FunctionTracing=Active)",
    "logs": "the handler's JSON log lines",
    "sqs": "requests beyond one send, receive and delete (negative: batched below that)",
}
DYNAMODB_BUYS = {
    "virus_scan": "the verdict recorded on the file before it is acted on (fail-closed "
    "evidence: the file's item, about 2.8 KB, and its by_object entry, which projects it all)",
    "deduplication_check": "the content index claimed by one conditional update, and the "
    "content's hash and duplicate recorded on the file (the by_content index the API's "
    "same-content listing reads)",
}


@dataclass
class Totals:
    """A million files of the happy path's mix, and what goes with them."""

    per_million_files: float = 0.0
    xray_per_million_files: float = 0.0  # what FunctionTracing=Active adds (or added)
    per_million_queries: float = 0.0
    over_floor: dict[str, float] = field(default_factory=dict)  # job type -> cost / floor
    floor_of: dict[str, float] = field(default_factory=dict)  # job type -> $ a million at floor
    # job type -> service -> $ a million jobs above the floor
    above_floor: dict[str, dict[str, float]] = field(default_factory=dict)


def cost_rows(
    phase: Phase, usage: dict[str, Usage], prices: Prices, *, traced: bool
) -> tuple[list[list[str]], Totals]:
    """$ per million of each group's unit (jobs of a type, files, status queries), by service,
    and against the floor; then the whole of a million files of this mix. The upload's own PUT
    (the client's, billed to the bucket's owner) is a row of its own. Not `traced` (the
    template's FunctionTracing is PassThrough), only the API's requests are, as API Gateway
    samples them; what Active would add is kept in the totals."""
    rows, totals = [], Totals()
    measured = {"upload": Usage(s3_put_class=phase.files), **usage}
    for group in sorted(measured, key=_group_order):
        # The sweep's cost is per window; an operation's, a person's bulk action, not a file's;
        # the file removals', a deleted file's (the delete path's table).
        if group in (*SCHEDULED_GROUPS, "operations", "file_removals") or (
            group == "api" and not phase.queries
        ):
            continue
        u, n = measured[group], per_unit(phase, group)
        scale = 1e6 / n
        traced_here = traced or group == "api"
        costs = dollars(u, prices, scale, traced=traced_here)
        if group == "api":
            totals.per_million_queries = sum(costs.values())
        else:
            share = dollars(u, prices, 1e6 / phase.files, traced=traced_here)
            totals.per_million_files += sum(share.values())
            totals.xray_per_million_files += dollars(u, prices, 1e6 / phase.files)["xray"]
        floor, ratio = "", ""
        if group not in HAPPY_UNIT_NAMES and group != "upload":
            floors = floor_dollars(u, n, prices, scale)
            least = sum(floors.values())
            totals.over_floor[group] = sum(costs.values()) / least
            totals.floor_of[group] = least
            totals.above_floor[group] = {s: costs[s] - floors[s] for s in SERVICES}
            floor, ratio = f"{least:.2f}", f"{totals.over_floor[group]:.2f}x"
        unit = HAPPY_UNIT_NAMES.get(group, "job")
        rows.append([
            group, f"1M {PLURALS.get(unit, unit)}",
            *(f"{costs[s]:.2f}" for s in SERVICES), f"**{sum(costs.values()):.2f}**", floor, ratio,
        ])  # fmt: skip
    return rows, totals


def above_floor_notes(totals: Totals) -> list[str]:
    """Per job type over the target: what its difference from the floor buys, with figures."""
    notes = []
    for group, ratio in sorted(totals.over_floor.items()):
        if ratio <= TARGET_OVER_FLOOR:
            continue
        gap = totals.above_floor[group]
        bought = {**WHAT_IT_BUYS, "dynamodb": DYNAMODB_BUYS.get(group, WHAT_IT_BUYS["dynamodb"])}
        parts = [
            f"{'-' if gap[service] < 0 else ''}${abs(gap[service]):.2f} {what}"
            for service, what in bought.items()
            if abs(gap[service]) >= CENTS_WORTH_NAMING
        ]
        floor = totals.floor_of[group]
        without_xray = (floor + sum(gap.values()) - gap["xray"]) / floor
        notes.append(
            f"- **{group}** ({ratio:.2f}x the floor; {without_xray:.2f}x without X-Ray): "
            + "; ".join(parts)
            + "."
        )
    return notes


def markdown_table(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
    return [markdown_row(header), markdown_row(["---"] * len(header)), *map(markdown_row, rows)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--files", type=int,
        help=f"happy-path files of each kind ({FILES}; with --write-figures, {CHECK_FILES}; with"
        " --check, as many as the figures were written with)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep-meter-log", type=Path, help="copy every metered request here")
    gate = parser.add_mutually_exclusive_group()
    gate.add_argument(
        "--write-figures", nargs="?", type=Path, const=FIGURES, metavar="PATH",
        help="the happy path alone; write its gated figures to PATH (default"
        f" {FIGURES.relative_to(ROOT)})",
    )  # fmt: skip
    gate.add_argument(
        "--check", nargs="?", type=Path, const=FIGURES, metavar="PATH",
        help="the cost gate: the happy path alone, its figures against PATH's; exits 1 when one"
        " rose past its tolerance",
    )  # fmt: skip
    arguments = parser.parse_args()
    files = arguments.files or gate_files(arguments.write_figures, arguments.check)
    prices = Prices.load(PRICES)
    log_path = ROOT / ".filejobs" / "bench-requests.log"
    log_path.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fj-requests-") as scratch:
        root = project_copy(ROOT, Path(scratch))
        meter_log, faults = Path(scratch) / "meter.jsonl", Path(scratch) / "faults.json"
        faults.write_text(json.dumps(fault_rules()))
        meter_log.touch()
        options = [
            "--meter-log", str(meter_log), "--faults", str(faults),
            # Stream sources batch as deployed: the stats' 30 s window is what makes them cheap.
            "--stream-batching-windows",
            # The reconciler every minute, so a run is measured (a month of idle is priced at
            # the template's rate).
            "--parameter", "ReconcileEveryMinutes=1",
        ]  # fmt: skip
        plan = {
            "happy": unique_files("happy", files, tuple(KINDS)),
            "retry": unique_files("retry", 1, tuple(KINDS)),
            "cancel": unique_files("cancel", 2, ("txt",)),
            "delete": unique_files("delete", 4, ("jpg",)),
        }
        if arguments.check or arguments.write_figures:  # the gate's are the happy path's alone
            plan = {"happy": plan["happy"]}
        with log_path.open("wb") as log, launched(root, *options, output=log) as stack:
            give_the_tenant_a_preset(stack)
            phases = [
                run_phase(stack, name, files, arguments.timeout) for name, files in plan.items()
            ]
            jobs_table = stack.config["table_name"]
        if arguments.keep_meter_log is not None:
            arguments.keep_meter_log.write_bytes(meter_log.read_bytes())
        lines = [json.loads(line) for line in meter_log.read_text().splitlines() if line.strip()]
    status = report(phases, lines, prices, jobs_table, arguments.json)
    if arguments.write_figures:
        write_figures(arguments.write_figures, phases[0], lines, files)
    if arguments.check:
        return check_figures(arguments.check, phases[0], lines, files)
    return status


def give_the_tenant_a_preset(stack: LaunchedStack) -> None:
    """The bench tenant gets an upload preset, bound to a prefix none of its files is under: its
    uploads keep their default jobs (the mix is unchanged), and the ingest reads the tenant's
    presets as it does for any tenant that has some (once a minute a function instance)."""
    preset = {"jobs": [], "prefixes": ["uploads/bench/archive/"]}
    status, answer = stack.api("/presets/archive?tenant=bench", method="PUT", body=preset)
    if status != 200:
        raise SystemExit(f"could not save the bench tenant's preset: {status} {answer}")


# The template's scheduled functions and the tally group each one's lines go to.
SCHEDULED = {
    "SweepFunction": "sweep",
    "DefinitionsUpdater": "definitions",
    "RescanPolicy": "rescan_policy",
    "ReconcilerFunction": "reconciler",
}


def idle_month(
    lines: list[dict[str, Any]], prices: Prices
) -> tuple[dict[str, float | None], float]:
    """$ a month with no traffic at all: each scheduled function at its template rate, each run
    priced as its runs were measured here, and Lambda's pollers long-polling every SQS source
    (five per source, a 20-second poll each: AWS's documented starting concurrency), which SQS
    bills as requests. The definitions updater's runs here fetch the local mirror's few
    signatures: on AWS each also reads the official database from S3 (minutes of GB-s a day).
    A scheduled function that did not run while the paths ran is None: not measured."""
    usage = tally(lines)
    template = load_template(ROOT / "template.yaml")
    functions = function_definitions(template)
    parameters = {k: str(v.get("Default", "")) for k, v in template.get("Parameters", {}).items()}
    scheduled: dict[str, float | None] = {}
    for function, group in SCHEDULED.items():
        measured = usage.get(group, Usage())
        if not measured.invocations:
            scheduled[group] = None
            continue
        traced = parameters.get("FunctionTracing") == "Active"
        per_run = sum(
            dollars(measured, prices, 1 / max(measured.invocations, 1), traced=traced).values()
        )
        rate = next(
            rate_seconds(_parameter(properties["ScheduleExpression"], parameters))
            for kind, properties in functions[function].events
            if kind in ("Schedule", "ScheduleV2")
        )
        scheduled[group] = per_run * MONTH_SECONDS / rate
    sources = sum(kind == "SQS" for spec in functions.values() for kind, _ in spec.events)
    polls = sources * 5 * (MONTH_SECONDS / 20)
    return scheduled, polls * prices.sqs_request


def write_units_per_job(phase: Phase, usage: dict[str, Usage]) -> dict[str, float]:
    """Each job type's worker's DynamoDB write units, per job of that type."""
    return {
        group: usage[group].write_units / count
        for group, count in phase.jobs.items()
        if count and group in usage
    }


def default_tracing() -> str:
    """The template's FunctionTracing default: what a stack deployed as it is traces."""
    template = load_template(ROOT / "template.yaml")
    return str(template["Parameters"]["FunctionTracing"]["Default"])


def _parameter(value: Any, parameters: dict[str, str]) -> str:
    """A template value that may be a parameter's (`!Ref DefinitionsUpdateSchedule`), or a
    text with parameters in it (`!Sub "rate(${ReconcileEveryMinutes} minutes)"`)."""
    if isinstance(value, dict) and "Ref" in value:
        return parameters[str(value["Ref"])]
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        text = str(value["Fn::Sub"])
        for name, given in parameters.items():
            text = text.replace("${" + name + "}", given)
        return text
    return str(value)


def report(
    phases: list[Phase],
    lines: list[dict[str, Any]],
    prices: Prices,
    jobs_table: str,
    out: Path | None,
) -> int:
    markdown: list[str] = []
    figures: dict[str, Any] = {}
    errors = sum(1 for line in lines if line.get("meter_error"))
    for phase in phases:
        usage = tally(lines, since=phase.started, until=phase.ended)
        requests, reads = dynamodb_per_job(usage, phase.total_jobs)
        own = state_machine_writes_per_job(usage, phase.total_jobs, jobs_table)
        figures[phase.name] = {
            "dynamodb_requests_per_job": requests,
            "dynamodb_reads_per_job": reads,
            "state_machine_writes_per_job": own,
        }
        title = (
            f"{phase.name} path: {phase.files} files, {phase.total_jobs} jobs"
            f" ({', '.join(f'{n} {s}' for s, n in sorted(phase.outcomes.items()))})"
        )
        print(f"\n{title}")
        table = markdown_table(COLUMNS, group_rows(phase, usage))
        print("\n".join(table))
        print(f"dynamodb requests per job ({phase.name} path): {requests:.2f} ({reads:.2f} reads)")
        print(f"  of which the jobs' own transitions (jobs-table updates by workers): {own:.2f}")
        summary = (
            f"DynamoDB requests per job: **{requests:.2f}**, of which reads {reads:.2f}; the jobs'"
            f" own transitions (the workers' updates of the jobs table): {own:.2f}."
        )
        markdown += [f"### {title[0].upper()}{title[1:]}", "", *table, "", summary, ""]
    happy = phases[0]
    usage = tally(lines, since=happy.started, until=happy.ended)
    tracing = default_tracing()
    rows, totals = cost_rows(happy, usage, prices, traced=tracing == "Active")
    per_million_files = totals.per_million_files
    header = ["group", "per", *(f"$ {s}" for s in SERVICES), "$ total", "$ floor", "x floor"]
    costs = markdown_table(header, rows)
    print(f"\ncost at {prices.region} list prices of {prices.as_of}, happy path")
    print("\n".join(costs))
    print(f"$ per 1M files of this mix: {per_million_files:.2f} (FunctionTracing={tracing})")
    traced = per_million_files + (0.0 if tracing == "Active" else totals.xray_per_million_files)
    untraced = traced - totals.xray_per_million_files
    print(f"$ per 1M files with FunctionTracing=Active: {traced:.2f}; PassThrough: {untraced:.2f}")
    print(f"$ per 1M status queries: {totals.per_million_queries:.2f}")
    above = markdown_table(
        ["job type", *(f"$ {s}" for s in SERVICES), "$ above the floor"],
        [
            [group, *(f"{gap[s]:.2f}" for s in SERVICES), f"**{sum(gap.values()):.2f}**"]
            for group, gap in sorted(totals.above_floor.items())
        ],
    )
    print("\nabove the floor, a million jobs of each type, by service")
    print("\n".join(above))
    requests, reads, own = figures["happy"].values()
    scheduled, polling = idle_month(lines, prices)
    runs = ", ".join(
        f"{group} ${cost:,.2f}" if cost is not None else f"{group} not measured: no run here"
        for group, cost in scheduled.items()
    )
    idle = (
        f"With no traffic at all, a month costs"
        f" ${sum(c for c in scheduled.values() if c is not None) + polling:,.2f}: the"
        f" scheduled runs ({runs}), Lambda's SQS pollers ${polling:,.2f}."
    )
    print(idle)
    print(f"dynamodb requests per job (happy path): {requests:.2f}")
    if errors:
        print(f"meter: {errors} requests could not be sized (see meter_error in the log)")
    per_type_units = write_units_per_job(happy, usage)
    whole_units = sum(
        u.write_units for g, u in usage.items() if g not in ("api", *SCHEDULED_GROUPS)
    )
    print(f"dynamodb write units per job (happy path, every group): "
          f"{whole_units / max(happy.total_jobs, 1):.2f}")  # fmt: skip
    targets = [
        {"name": "DynamoDB requests per job, happy path", "target": "<= 5",
         "value": round(requests, 2), "met": requests <= TARGET_REQUESTS},
        {"name": "the jobs' own transitions per job, happy path (claim, complete)",
         "target": "2", "value": round(own, 2), "met": own <= TARGET_OWN_TRANSITIONS},
        *({"name": f"{group}: DynamoDB write units per job (its worker's), happy path",
           "target": "<= 8", "value": round(units, 2), "met": units <= TARGET_WRITE_UNITS}
          for group, units in sorted(per_type_units.items())),
        {"name": "a million files of the mix, happy path", "target": "<= $120",
         "value": round(per_million_files, 2),
         "met": per_million_files <= TARGET_DOLLARS_PER_MILLION_FILES},
        *({"name": f"{group}: cost over the design's floor, happy path", "target": "<= 1.5",
           "value": round(ratio, 2), "met": ratio <= TARGET_OVER_FLOOR}
          for group, ratio in sorted(totals.over_floor.items())),
    ]  # fmt: skip
    markdown += [
        f"### Cost of the happy path at list prices ({prices.region}, {prices.as_of})",
        "",
        *costs,
        "",
        f"A million files of this mix (a quarter each of photos, 2-second videos, 2-page PDFs"
        f" and text files): **${per_million_files:,.2f}** with the template's"
        f" `FunctionTracing={tracing}`, the upload's PUT and the derived files' storage for"
        f" {DERIVED_DAYS} days included (**${traced:,.2f}** with `FunctionTracing=Active`,"
        f" **${untraced:,.2f}** with `PassThrough`). A status query"
        f" (`GET /files?key=`, then `GET /files/{{id}}`, each counted) costs"
        f" ${totals.per_million_queries:,.2f} per million. {idle}",
        "",
        "What each job type pays above its floor, a million jobs, by service:",
        "",
        *above,
        "",
        *above_floor_notes(totals),
        "",
    ]
    write_section(
        out,
        {
            "section": "requests",
            "rows": [],
            "figures": {
                **figures,
                "dollars_per_million_files": per_million_files,
                "dollars_per_million_files_untraced": untraced,
                "dollars_per_million_files_traced": traced,
                "dollars_per_million_status_queries": totals.per_million_queries,
                "cost_over_floor": totals.over_floor,
                "dollars_above_floor": totals.above_floor,
                "idle_dollars_per_month": {**scheduled, "sqs_polling": polling},
            },
            "markdown": markdown,
            "targets": targets,
            "command": run_command(),
            "measured_at": utc_now(),
        },
    )
    return 0


# --- the cost gate (filejobs_dev/local/cost_gate.py; make cost-gate) ---------------------------


def gate_files(write_figures: Path | None, check: Path | None) -> int:
    """The happy path's size: the gate's own when writing its figures; when checking, the size
    they were written at, as each function instance's one-off reads (a tenant's presets, a
    webhook endpoint's cache) weigh more per job on a smaller path; otherwise the bench's."""
    if check is not None:
        return int(json.loads(check.read_text())["files_per_kind"])
    return CHECK_FILES if write_figures is not None else FILES


def gate_figures(phase: Phase, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The happy path's gated figures: each group's DynamoDB requests and write units per unit
    of its work, and the path's totals per job."""
    usage = tally(lines, since=phase.started, until=phase.ended)
    groups = {
        group: asdict(
            cost_gate.group_figures(u, per_unit(phase, group), HAPPY_UNIT_NAMES.get(group, "job"))
        )
        for group, u in sorted(usage.items(), key=lambda item: _group_order(item[0]))
        if group not in SCHEDULED_GROUPS  # on their schedule, whatever the traffic
    }
    return {"totals": cost_gate.totals(usage, phase.total_jobs), "groups": groups}


def write_figures(path: Path, phase: Phase, lines: list[dict[str, Any]], files: int) -> None:
    """bench/costs.json from this run, keeping the tolerances the file states."""
    tolerances = dict(cost_gate.DEFAULT_TOLERANCES)
    if path.exists():
        tolerances = json.loads(path.read_text()).get("tolerance", tolerances)
    document = {
        "about": "The happy path's DynamoDB requests and write units (bench/request_costs.py"
        " --write-figures), which `make cost-gate` holds each change to: docs/BENCHMARKS.md.",
        "measured_at": utc_now(),
        "command": run_command(),
        "files_per_kind": files,
        "files": phase.files,
        "jobs": phase.total_jobs,
        "tolerance": tolerances,
        **_rounded(gate_figures(phase, lines)),
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\ncost gate: figures written to {path}")


def _rounded(figures: Any) -> Any:
    """Four decimals: a diff of the file shows what moved, not float noise."""
    if isinstance(figures, dict):
        return {name: _rounded(value) for name, value in figures.items()}
    return round(figures, 4) if isinstance(figures, float) else figures


def check_figures(path: Path, phase: Phase, lines: list[dict[str, Any]], files: int) -> int:
    """The gate: this run's figures against the committed ones; 1 when one rose too much."""
    committed = json.loads(path.read_text())
    measured = gate_figures(phase, lines)
    print(
        f"\ncost gate: the happy path at {files} files of each kind ({phase.total_jobs} jobs)"
        f" against {path.name} ({committed['files_per_kind']} of each, {committed['jobs']} jobs,"
        f" {committed['measured_at']})"
    )
    verdict = cost_gate.compare(committed, measured, committed.get("tolerance", {}))
    print("\n".join(cost_gate.render(verdict)))
    return 1 if verdict.failed else 0


if __name__ == "__main__":
    sys.exit(main())
