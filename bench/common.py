"""Pieces the benchmarks under bench/ share: file chunks, fresh-process runs and their figures.

Each bench is run as `.venv/bin/python bench/<name>.py`, so this folder is on sys.path and the
benches import this module as `common`.

Sections: given `--json PATH`, a bench also writes its figures as one JSON object
(`make_section`, `write_section`) that a report renderer concatenates into docs/BENCHMARKS.md:
its `markdown_rows` go under its section's table header (`PROCESSOR_TABLE_HEADER`,
`COLD_START_TABLE_HEADER`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from filejobs_dev.local.launch import LaunchedStack

MiB = 1024 * 1024
CHUNK = 1024 * 1024  # ObjectSource's chunk size
ROOT = Path(__file__).resolve().parents[1]

# The two header lines of each section's markdown table; each bench's `markdown_rows` go under
# them. The cold-start table's boto3 figure changes with every run, so it is a row ("boto3"),
# not part of the header.
PROCESSOR_TABLE_HEADER = [
    "| what | command | ours | baseline | ratio | target | peak memory |",
    "| --- | --- | --- | --- | --- | --- | --- |",
]
COLD_START_TABLE_HEADER = [
    "| handler | import ms | / boto3 | import + setup ms | / boto3 + same clients |",
    "| --- | --- | --- | --- | --- |",
]

# Runs argv[1:] and prints its stdout, then its peak RSS in KiB (Linux ru_maxrss): only that
# child is counted, not the parent's memory at fork.
_PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "out = subprocess.run(sys.argv[1:], check=True, stdout=subprocess.PIPE, text=True).stdout\n"
    "print(out.strip())\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


class Sample(NamedTuple):
    """One fresh process: its wall seconds, its own peak RSS (KiB) and its stdout."""

    seconds: float
    peak_kib: int
    stdout: str


def file_chunks(path: Path, chunk: int = CHUNK) -> Iterator[bytes]:
    """The file's bytes, `chunk` at a time, unbuffered."""
    with path.open("rb", buffering=0) as source:
        yield from iter(lambda: source.read(chunk), b"")


def timed(command: Sequence[str]) -> Sample:
    """Runs `command` in a fresh process; exits with its stderr if it fails.

    The peak RSS is the process's own (wait4 reaps it: its rusage, not a total of children), but
    Linux carries the parent's figure at fork into it: see `peak_rss_mb` for a clean one.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        begin = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err)  # noqa: S603
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - begin
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"{command[0]} failed: {err.read().decode(errors='replace')}")
        return Sample(wall, usage.ru_maxrss, out.read().decode())


def peak_rss_mb(command: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[str, float]:
    """(stdout stripped, peak RSS in MB) of `command`, run by a small wrapper process.

    The wrapper forks the command, so its figure does not start from this process's memory.
    """
    lines = subprocess.run(  # noqa: S603 (our own interpreter, our own code)
        [sys.executable, "-c", _PEAK_RSS, *command],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.splitlines()
    return "\n".join(lines[:-1]), int(lines[-1]) / 1024


def interleaved(contenders: Mapping[str, Sequence[str]], runs: int) -> dict[str, list[Sample]]:
    """`runs` samples of each contender, one round of all of them at a time, in order, so
    machine noise hits all alike."""
    samples: dict[str, list[Sample]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, command in contenders.items():
            samples[name].append(timed(command))
    return samples


def interleaved_calls(
    contestants: Mapping[str, Callable[[Path], int | None]], path: Path, rounds: int, reps: int
) -> dict[str, list[float]]:
    """Each contestant called on `path` once to warm up (imports, codec tables, page cache),
    then `rounds` rounds of `reps` calls each, the contestants taking turns so that this shared
    machine's noise hits them alike: the seconds of each call, divided by the count it returns
    (the thumbnails it made, say) where it returns one."""
    for run in contestants.values():
        run(path)
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(rounds):
        for name, run in contestants.items():
            for _ in range(reps):
                started = time.perf_counter()
                made = run(path)
                samples[name].append((time.perf_counter() - started) / (made or 1))
    return samples


def cold_and_warm(
    samples: Mapping[str, list[Sample]],
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Wall seconds and highest peak RSS (KiB) of each contender, "ours" split in two.

    The "ours" child prints JSON whose "warm" lists the timings of its repeated calls: its wall
    time less those is a cold start ("ours"), and those are "ours (warm)" (same process, same
    peak RSS).
    """
    walls: dict[str, list[float]] = {name: [] for name in (*samples, "ours (warm)")}
    rss = {name: max(sample.peak_kib for sample in runs) for name, runs in samples.items()}
    for name, runs in samples.items():
        for sample in runs:
            if name == "ours":
                warm = json.loads(sample.stdout)["warm"]
                walls["ours"].append(sample.seconds - sum(warm))
                walls["ours (warm)"].extend(warm)
            else:
                walls[name].append(sample.seconds)
    rss["ours (warm)"] = rss["ours"]
    return walls, rss


class ColdWarm(NamedTuple):
    """Median wall seconds and highest peak RSS (MiB) of each contender; "ours" is the cold
    start, "ours (warm)" a later call in the same process."""

    medians: dict[str, float]
    peak_mib: dict[str, float]


def print_cold_warm(samples: Mapping[str, list[Sample]], theirs: Sequence[str]) -> ColdWarm:
    """Prints each contender's median and peak RSS, then ours (cold, warm) against `theirs`;
    returns those figures."""
    walls, rss = cold_and_warm(samples)
    medians = {name: statistics.median(values) for name, values in walls.items()}
    peaks = {name: kib / 1024 for name, kib in rss.items()}
    for name, median in medians.items():
        label = "ours (cold)" if name == "ours" else name
        print(f"  {label:14} median {median * 1000:7.1f} ms   peak RSS {peaks[name]:6.1f} MiB")
    for their in theirs:
        for ours in ("ours", "ours (warm)"):
            label = "ours (cold)" if ours == "ours" else ours
            print(f"  {label} / {their}: {medians[ours] / medians[their]:.2f}x")
    return ColdWarm(medians, peaks)


def fresh_process_main(
    doc: str | None,
    child: Callable[[Path, Path], None],
    make: Callable[[Path], None],
    bench: Callable[[int, Path | None], None],
    runs: int = 7,
) -> None:
    """A bench whose samples are fresh processes of this same script: `--child SOURCE OUT`
    runs `child`, `--make PATH` runs `make` (both hidden), otherwise `bench(--runs, --json)`."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--runs", type=int, default=runs, help=f"samples per contender ({runs})")
    add_json_argument(parser)
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--make", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
    elif args.make:
        make(args.make)
    else:
        if args.runs < 1:
            parser.error("--runs must be at least 1")
        bench(args.runs, args.json)


# Sections: the figures of a run, for the report renderer.


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """`--json PATH`: where to write the run's section (see `make_section`); none by default."""
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write this run's figures there, as a report section (JSON)",
    )


def utc_now() -> str:
    """Now, ISO 8601 in UTC to the second: 2026-11-30T14:05:09+00:00."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def bench_command(argv: Sequence[str] | None = None) -> list[str]:
    """The bench's own command line as it ran, minus `--json PATH`: the script relative to the
    project root (bench/<name>.py) and its arguments."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    words = [str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else str(script)]
    rest = iter(argv[1:])
    for word in rest:
        if word == "--json":
            next(rest, None)
        elif not word.startswith("--json="):
            words.append(word)
    return words


def run_command(argv: Sequence[str] | None = None) -> str:
    """How to run the bench again: `.venv/bin/python bench/<name>.py ARGS` (this interpreter,
    relative to the project root when it is under it)."""
    python = Path(os.path.abspath(sys.executable))  # not resolve(): a venv's python is a link
    if python.is_relative_to(ROOT):
        python = python.relative_to(ROOT)
    return shlex.join([str(python), *bench_command(argv)])


def markdown_command(argv: Sequence[str] | None = None) -> str:
    """The bench's command for a table cell: `bench/<name>.py ARGS`, in backticks."""
    return f"`{shlex.join(bench_command(argv))}`"


def markdown_row(cells: Sequence[str]) -> str:
    """One row of a markdown table (an empty cell as `| |`); a `|` inside a cell is escaped."""
    return "|" + "|".join(f" {cell.replace('|', '\\|')} " if cell else " " for cell in cells) + "|"


def verdict(met: bool) -> str:
    """A target's outcome as the tables word it."""
    return "met" if met else "**missed**"


def target(name: str, goal: str, value: float, met: bool) -> dict[str, Any]:
    """One entry of a section's `targets`: what, the goal as stated, the measured figure."""
    return {"name": name, "target": goal, "value": round(value, 3), "met": met}


def size_label(mib: int) -> str:
    """1024 -> "1 GiB", 64 -> "64 MiB"."""
    return f"{mib // 1024} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib} MiB"


def make_section(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    markdown_rows: Sequence[str],
    targets: Sequence[Mapping[str, Any]],
    measured_at: str,
    *,
    command: str | None = None,
) -> dict[str, Any]:
    """A bench's figures for the report: `name` is its section ("processors", "cold_start"),
    `rows` one dict of plain numbers per table row, `markdown_rows` those rows under the
    section's table header, `targets` from `target`, `measured_at` from `utc_now`."""
    return {
        "section": name,
        "rows": [dict(row) for row in rows],
        "markdown_rows": list(markdown_rows),
        "targets": [dict(entry) for entry in targets],
        "command": run_command() if command is None else command,
        "measured_at": measured_at,
    }


def write_section(path: Path | None, section: dict[str, Any]) -> None:
    """Writes `section` as JSON to `path` (its folders made as needed); nothing when None."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(section, indent=2) + "\n")


class Uploadable(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def body(self) -> bytes: ...


def upload_all(
    stack: LaunchedStack, uploads: Sequence[Uploadable], threads: int
) -> dict[str, float]:
    """Puts each upload into the local stack's uploads bucket, `threads` at a time: key -> wall
    time (epoch seconds) its upload returned."""
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]

    def put(upload: Uploadable) -> tuple[str, float]:
        s3.put_object(Bucket=bucket, Key=upload.key, Body=upload.body)
        return upload.key, time.time()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return dict(pool.map(put, uploads))
