"""`make soak`: the system at a steady upload rate under chaos's faults for an hour, every
process's memory and the upload-to-terminal latency recorded over time, then chaos's audit.

The faults, the mix of real files, the random cancels through the API and the audit are
tools/chaos.py's; here the files arrive at a steady rate (`--rate` a minute for `--minutes`)
instead of all at once. Every `--sample-seconds` the resident memory (VmRSS) of every process
of the stack is read from /proc, grouped by role: the stack's own process (S3, SQS and
EventBridge are served in it), the DynamoDB emulator, each function's hosts, clamd. After the
last upload it waits until the system is quiet and audits everything, as chaos does.

What it holds the run to, beside the audit's 0 violations:
- **memory flat after warm-up** (the first sixth of the run, at most 10 minutes): from the
  median of the first samples after warm-up to the median of the last, no process group grows
  by more than MEMORY_GROWTH_MB or MEMORY_GROWTH_SHARE, whichever is larger. The emulators
  keep every item, stream record and object in memory, as AWS keeps them on disk, so they may
  also grow by EMULATOR_KB_PER_ITEM for each item the tables gained meanwhile;
- **latency p99 stable**: the p99 of upload-to-terminal (the file's last job terminal) of the
  last third of the files uploaded after warm-up is at most LATENCY_DRIFT times that of the
  first third.

It writes the samples (CSV) and the figures (JSON), prints the audit's figures and the verdict
(violations, memory growth, latency drift), then draws a plot of memory and latency over time
(PNG, `--plot`; docs/soak.png is the one docs/RELIABILITY.md shows) if matplotlib is installed
(the soak extra, which `make soak` installs; without it, it says so and draws none), and exits
1 on any violation.

    .venv/bin/python tools/soak.py [--minutes 60] [--rate 30] [--seed N] [--plot FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from filejobs_dev.infra.template import function_definitions, load_template
from filejobs_dev.local.chaos_audit import Report, Upload
from filejobs_dev.local.launch import LaunchedStack, launched, processes, project_copy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # run as a script or through runpy alike

import chaos  # noqa: E402

MEMORY_GROWTH_MB = 32.0
MEMORY_GROWTH_SHARE = 0.15
# An item is written about ten times (a job's transitions), each write leaving a stream record
# of both its images, and is indexed; the objects it stands for sit in the stack's S3.
EMULATOR_KB_PER_ITEM = 128.0
EMULATORS = ("stack (S3, SQS, EventBridge)", "emulator (DynamoDB)")
LATENCY_DRIFT = 1.5
WARM_UP_SHARE, WARM_UP_MAX_SECONDS = 1 / 6, 600.0
# Samples whose median stands for the memory of a moment (the first after warm-up, the last).
MEDIAN_OF = 5


# --- memory ------------------------------------------------------------------------------


@dataclass
class MemorySample:
    seconds: float  # since the first upload
    rss_mb: dict[str, float]  # process group -> resident MB, summed over its processes
    items: int  # items in the two tables when it was taken


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0  # gone meanwhile


def role_of(command: bytes, *, is_stack: bool) -> str:
    """The process group a process belongs to, from its command line."""
    if is_stack:
        return EMULATORS[0]
    words = [word.decode(errors="replace") for word in command.split(b"\0") if word]
    if "filejobs_dev.local.emulator" in words:
        return EMULATORS[1]
    if "filejobs_dev.local.host" in words:
        function = words[words.index("--function") + 1] if "--function" in words else "?"
        source = words[words.index("--source") + 1] if "--source" in words else "?"
        return f"{function} ({source})"
    return Path(words[0]).name if words else "?"


def memory_by_role(stack_pid: int) -> dict[str, float]:
    """Resident MB of the stack's process and of every process under it, by role."""
    every = list(processes())
    children: dict[int, list[int]] = defaultdict(list)
    commands = {}
    for pid, parent, command in every:
        children[parent].append(pid)
        commands[pid] = command
    by_role: dict[str, float] = defaultdict(float)
    pending = [stack_pid]
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        if pid != stack_pid and not commands.get(pid):
            continue  # exited, not yet reaped: it holds no memory
        by_role[role_of(commands.get(pid, b""), is_stack=pid == stack_pid)] += _rss_mb(pid)
    return dict(by_role)


class MemoryRecorder:
    """Samples memory_by_role every `every` seconds until stopped."""

    def __init__(self, stack: LaunchedStack, every: float, started: float) -> None:
        self._stack, self._every, self._started = stack, every, started
        self.samples: list[MemorySample] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory", daemon=True)

    def __enter__(self) -> MemoryRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(
                MemorySample(
                    time.monotonic() - self._started,
                    memory_by_role(self._stack.process.pid),
                    self._items(),
                )
            )
            self.stop.wait(self._every)

    def _items(self) -> int:
        tables = (self._stack.config["files_table"], self._stack.config["table_name"])
        try:
            return sum(self._count(table) for table in tables)
        except (BotoCoreError, ClientError):  # a busy emulator: the count only widens a bound
            return self.samples[-1].items if self.samples else 0

    def _count(self, table: str) -> int:
        dynamodb = self._stack.client("dynamodb")
        return int(dynamodb.describe_table(TableName=table)["Table"].get("ItemCount", 0))


# --- the run -----------------------------------------------------------------------------


@dataclass
class Soak:
    uploads: list[Upload]
    uploaded_at: dict[str, float]  # key -> seconds since the first upload
    memory: list[MemorySample]
    raw: dict[str, Any]
    started_epoch: float
    figures: dict[str, float] = field(default_factory=dict)


def paced_upload(
    stack: LaunchedStack, files: list[tuple[str, str, bytes, chaos.Kind]], interval: float
) -> tuple[list[Upload], dict[str, float]]:
    """Puts file i at `i * interval` seconds, whatever the stack's pace (puts that take longer
    overlap, on a few threads); returns the uploads and when each was put."""
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
    started = time.monotonic()
    uploaded_at: dict[str, float] = {}

    def put(numbered: tuple[int, tuple[str, str, bytes, chaos.Kind]]) -> Upload:
        number, (key, name, body, kind) = numbered
        time.sleep(max(0.0, started + number * interval - time.monotonic()))
        uploaded_at[key] = time.monotonic() - started
        answer = s3.put_object(Bucket=bucket, Key=key, Body=body)
        return Upload(key, answer.get("VersionId"), name, kind.expected, kind.poisoned)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(put, enumerate(files))), uploaded_at


def run(arguments: argparse.Namespace, scratch: Path) -> Soak:
    root = project_copy(ROOT, scratch)
    workers = [
        name
        for name, spec in function_definitions(load_template(root / "template.yaml")).items()
        if name.endswith("Worker") and any(kind == "SQS" for kind, _ in spec.events)
    ]
    faults, fault_log = scratch / "faults.json", scratch / "faults.log"
    # Every fault of the chaos run, the dropped notification too (with the reconciler at the
    # chaos run's pace to find what it dropped).
    rules = [
        *chaos.fault_rules(arguments.seed, workers),
        chaos.dropped_notifications(arguments.seed),
    ]
    faults.write_text(json.dumps(rules))
    fault_log.touch()
    count = round(arguments.rate * arguments.minutes)
    print(f"soak: {count} files at {arguments.rate:g} a minute for {arguments.minutes:g} min")
    files = chaos.Corpus(arguments.seed).deal(count)
    log_path = ROOT / ".filejobs" / "soak.log"
    log_path.parent.mkdir(exist_ok=True)
    options = [
        "--faults", str(faults),
        "--fault-log", str(fault_log),
        "--parameter", f"JobLeaseSeconds={chaos.LEASE_SECONDS}",
        *chaos.RECONCILER_OPTIONS,
        "--schedule-seconds", str(chaos.SWEEP_EVERY_SECONDS),
        "--function-workers", "SweepFunction=2",
        "--visibility-seconds", str(chaos.VISIBILITY_SECONDS),
    ]  # fmt: skip
    with log_path.open("wb") as log, launched(root, *options, output=log) as stack:
        print(f"soak: stack up (log: {log_path}); uploading", flush=True)
        file_processed = chaos.watch_file_processed(stack)
        budget = max(3, count // 25)
        every = arguments.minutes * 60 / budget
        started, started_epoch = time.monotonic(), time.time()
        with (
            MemoryRecorder(stack, arguments.sample_seconds, started) as recorder,
            chaos.Canceller(stack, budget, every=every, seed=arguments.seed) as canceller,
        ):
            uploads, uploaded_at = paced_upload(stack, files, 60 / arguments.rate)
            quiet, stalled = waited(chaos.wait_until_quiet, stack, len(uploads), arguments.timeout)
        if not stalled:
            _, stalled = waited(chaos.wait_until_processed, stack, arguments.timeout)
        events = chaos.drain(stack, file_processed)
        raw = chaos.collect(stack, uploads, fault_log, canceller.cancelled, events)
    raw["timings"] = {"quiescence after the last upload s": quiet}
    raw["cancel_errors"] = canceller.errors
    raw["stalled"] = stalled
    return Soak(uploads, uploaded_at, recorder.samples, raw, started_epoch)


def waited(wait: Callable[..., float], *arguments: Any) -> tuple[float, list[str]]:
    """A wait's seconds, or, when it timed out, how: the run is audited all the same (an upload
    never recorded keeps the system from quiet, and the audit says which)."""
    try:
        return wait(*arguments), []
    except TimeoutError as error:
        return float(arguments[-1]), [f"{wait.__name__}: {error}"]


# --- what the run showed ---------------------------------------------------------------------


def warm_up_seconds(minutes: float) -> float:
    return min(WARM_UP_MAX_SECONDS, minutes * 60 * WARM_UP_SHARE)


def latencies(soak: Soak) -> list[tuple[float, float]]:
    """(uploaded at, seconds from upload to the file's last job terminal), per uploaded file."""
    evidence = chaos.evidence_of(soak.raw)
    files = {(file.key, file.version_id): file.id for file in evidence.files}
    finished: dict[str, datetime] = {}
    for job in evidence.jobs:
        end = job.completed_at or job.metadata.updated_at
        if job.file_id not in finished or end > finished[job.file_id]:
            finished[job.file_id] = end
    found = []
    for upload in soak.uploads:
        file_id = files.get((upload.key, upload.version_id))
        if file_id is None or file_id not in finished:
            continue  # the audit reports a file lost
        at = soak.uploaded_at[upload.key]
        found.append((at, finished[file_id].timestamp() - soak.started_epoch - at))
    return sorted(found)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else 0


def check_latency(
    measured: list[tuple[float, float]], report: Report, warm_up: float
) -> dict[str, float]:
    """Judges (uploaded at, latency) pairs, in upload order; returns the figures."""
    after = [latency for at, latency in measured if at >= warm_up]
    third = len(after) // 3
    if third < 10:
        report.check("latency", [f"only {len(after)} files after warm-up: too few to judge"])
        return {}
    first, last = p99(after[:third]), p99(after[-third:])
    drifted = last > LATENCY_DRIFT * first
    report.check(
        "latency p99 stable",
        [f"p99 {first:.1f} s -> {last:.1f} s (over {LATENCY_DRIFT}x)"] if drifted else [],
    )
    return {
        "latency p50 s": statistics.median(after),
        "latency p99 s": p99(after),
        "latency p99 first third s": first,
        "latency p99 last third s": last,
    }


def check_memory(samples: list[MemorySample], report: Report, warm_up: float) -> dict[str, float]:
    """Judges the memory samples taken after warm-up; returns the figures."""
    after = [sample for sample in samples if sample.seconds >= warm_up]
    if len(after) < 2 * MEDIAN_OF:
        report.check("memory", [f"only {len(after)} samples after warm-up: too few to judge"])
        return {}
    figures = {}
    early, late = after[:MEDIAN_OF], after[-MEDIAN_OF:]
    gained = statistics.median(s.items for s in late) - statistics.median(s.items for s in early)
    problems = []
    for role in sorted({role for sample in after for role in sample.rss_mb}):
        start = statistics.median(s.rss_mb.get(role, 0.0) for s in early)
        end = statistics.median(s.rss_mb.get(role, 0.0) for s in late)
        bound = max(MEMORY_GROWTH_MB, MEMORY_GROWTH_SHARE * start)
        if role in EMULATORS:
            bound += EMULATOR_KB_PER_ITEM * max(0.0, gained) / 1024
        figures[f"RSS {role} MB at the end"] = end
        figures[f"RSS {role} growth MB (bound {bound:.0f})"] = end - start
        if end - start > bound:
            problems.append(f"{role}: {start:.0f} -> {end:.0f} MB (bound +{bound:.0f})")
    figures["items the tables gained after warm-up"] = gained
    report.check("memory flat after warm-up", problems)
    return figures


def judged(soak: Soak, minutes: float) -> tuple[Report, list[tuple[float, float]]]:
    report = chaos.audited(soak.raw)
    report.check("quiet before the timeout", soak.raw.get("stalled", []))
    soak.figures[AUDIT_VIOLATIONS] = len(report.violations)
    warm_up = warm_up_seconds(minutes)
    measured = latencies(soak)
    soak.figures["warm-up s"] = warm_up
    soak.figures |= check_memory(soak.memory, report, warm_up)
    soak.figures |= check_latency(measured, report, warm_up)
    return report, measured


# --- what it writes --------------------------------------------------------------------------


def write_samples(samples: list[MemorySample], path: Path) -> None:
    roles = sorted({role for sample in samples for role in sample.rss_mb})
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["seconds", "items", *roles])
        for sample in samples:
            writer.writerow(
                [f"{sample.seconds:.1f}", sample.items]
                + [f"{sample.rss_mb.get(role, 0.0):.1f}" for role in roles]
            )


def draw_plot(soak: Soak, measured: list[tuple[float, float]], warm_up: float, path: Path) -> str:
    """The plot, when matplotlib is there (the soak extra): what became of it, in a line. Never
    raises: the run's verdict is already printed, and a missing plot must not hide it."""
    try:
        import matplotlib as mpl  # noqa: PLC0415 (the soak extra's alone)
    except ImportError:
        return (
            "soak: no plot: matplotlib is not installed (`make soak` installs the soak extra;"
            " or .venv/bin/uv pip install -e '.[soak]')"
        )
    try:
        plot(soak, measured, warm_up, path, mpl)
    except Exception as error:  # any failure of the plot is only the plot's
        return f"soak: no plot: {type(error).__name__}: {error}"
    return f"soak: plot in {path}"


def plot(
    soak: Soak, measured: list[tuple[float, float]], warm_up: float, path: Path, mpl: Any
) -> None:
    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, (memory, latency) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    minutes = [sample.seconds / 60 for sample in soak.memory]
    roles = sorted({role for sample in soak.memory for role in sample.rss_mb})
    hosts = [role for role in roles if role not in EMULATORS]
    for role in EMULATORS:
        memory.plot(minutes, [s.rss_mb.get(role, 0.0) for s in soak.memory], label=role)
    memory.plot(
        minutes,
        [sum(s.rss_mb.get(role, 0.0) for role in hosts) for s in soak.memory],
        label=f"function hosts and clamd ({len(hosts)} groups, summed)",
    )
    memory.set_ylabel("resident memory (MB)")
    memory.legend(loc="upper left", fontsize="small")
    memory.set_ylim(bottom=0)
    windows: dict[int, list[float]] = defaultdict(list)
    width = 120.0  # seconds of uploads per point
    for at, seconds in measured:
        windows[int(at // width)].append(seconds)
    centres = [(index + 0.5) * width / 60 for index in sorted(windows)]
    for name, quantile in (("p50", statistics.median), ("p99", p99)):
        latency.plot(centres, [quantile(windows[i]) for i in sorted(windows)], label=name)
    latency.set_ylabel("upload to terminal (s), per 2 min of uploads")
    latency.set_xlabel("minutes since the first upload")
    latency.legend(loc="upper left", fontsize="small")
    latency.set_ylim(bottom=0)
    for axes in (memory, latency):
        axes.axvline(warm_up / 60, color="grey", linestyle=":", linewidth=1)
        axes.grid(alpha=0.3)
    figure.suptitle(f"soak: {len(soak.uploads)} files under chaos's faults")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60, help="how long files arrive")
    parser.add_argument("--rate", type=float, default=30, help="files a minute")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--sample-seconds", type=float, default=15)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to quiescence")
    parser.add_argument("--plot", type=Path, default=ROOT / ".filejobs" / "soak.png")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="filejobs-soak-") as scratch:
        soak = run(arguments, Path(scratch))
    return finish(soak, arguments.minutes, ROOT / ".filejobs", arguments.plot)


def finish(soak: Soak, minutes: float, kept: Path, plot_path: Path) -> int:
    report, measured = judged(soak, minutes)
    return conclude(
        soak, report, measured, warm_up_seconds(minutes), kept=kept, plot_path=plot_path
    )


def conclude(
    soak: Soak,
    report: Report,
    measured: list[tuple[float, float]],
    warm_up: float,
    *,
    kept: Path,
    plot_path: Path,
) -> int:
    """Keeps the run's samples and figures, prints the audit and the verdict, and only then
    draws the plot (which may fail, or be impossible, without hiding them); the exit status is
    the verdict's."""
    kept.mkdir(parents=True, exist_ok=True)
    write_samples(soak.memory, kept / "soak-memory.csv")
    figures = {**report.figures, **soak.raw["timings"], **soak.figures}
    (kept / "soak-figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(f"soak: samples in {kept / 'soak-memory.csv'}, figures in {kept / 'soak-figures.json'}")
    chaos.print_report(report, {**soak.raw["timings"], **soak.figures})
    print(verdict(report, soak.figures), flush=True)
    print(draw_plot(soak, measured, warm_up, plot_path), flush=True)
    return 1 if report.violations else 0


# The audit's violations (chaos's, and a wait that timed out), counted before the soak's own.
AUDIT_VIOLATIONS = "audit violations"
# The checks the soak adds to the audit, by the names they are reported under (the second when
# too few samples or files came after warm-up to judge).
SOAK_CHECKS = {
    "memory growth": ("memory flat after warm-up", "memory"),
    "latency drift": ("latency p99 stable", "latency"),
}


def verdict(report: Report, figures: dict[str, float]) -> str:
    """The run's verdict in a line: the audit's violations, memory growth, latency drift."""
    counts = {AUDIT_VIOLATIONS: int(figures.get(AUDIT_VIOLATIONS, 0))} | {
        label: sum(report.figures.get(name, 0) for name in names)
        for label, names in SOAK_CHECKS.items()
    }
    parts = ", ".join(f"{label} {n}" for label, n in counts.items())
    return f"soak verdict: {'FAILED' if report.violations else 'passed'} ({parts})"


if __name__ == "__main__":
    sys.exit(main())
