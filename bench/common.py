"""Pieces the benchmarks under bench/ share: file chunks, fresh-process runs and their figures.

Each bench is run as `.venv/bin/python bench/<name>.py`, so this folder is on sys.path and the
benches import this module as `common`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

MiB = 1024 * 1024
CHUNK = 1024 * 1024  # ObjectSource's chunk size

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


def print_cold_warm(samples: Mapping[str, list[Sample]], theirs: Sequence[str]) -> None:
    """Prints each contender's median and peak RSS, then ours (cold, warm) against `theirs`."""
    walls, rss = cold_and_warm(samples)
    medians = {name: statistics.median(values) for name, values in walls.items()}
    for name, median in medians.items():
        label = "ours (cold)" if name == "ours" else name
        peak_mib = rss[name] / 1024
        print(f"  {label:14} median {median * 1000:7.1f} ms   peak RSS {peak_mib:6.1f} MiB")
    for their in theirs:
        for ours in ("ours", "ours (warm)"):
            label = "ours (cold)" if ours == "ours" else ours
            print(f"  {label} / {their}: {medians[ours] / medians[their]:.2f}x")


def fresh_process_main(
    doc: str | None,
    child: Callable[[Path, Path], None],
    make: Callable[[Path], None],
    bench: Callable[[int], None],
    runs: int = 7,
) -> None:
    """A bench whose samples are fresh processes of this same script: `--child SOURCE OUT`
    runs `child`, `--make PATH` runs `make` (both hidden), otherwise `bench(--runs)`."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--make", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
    elif args.make:
        make(args.make)
    else:
        bench(args.runs)
