"""Cold import time of each Lambda handler against `import boto3` alone, in the same run.

Each import runs in a fresh interpreter (a cold start), several times, interleaved so machine
noise hits both sides alike; the medians are compared. Target: no handler above 1.5x boto3.

    .venv/bin/python bench/cold_imports.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = {
    "ingest": "functions/ingest",
    "worker": "functions/worker",
    "sweep": "functions/sweep",
    "api": "functions/api",
}
TARGET = 1.5


def import_seconds(module: str, code_dir: Path | None) -> float:
    """Wall time of `import module` in a new interpreter, from its -X importtime total."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    # Like Lambda: the handler's folder is the working directory and on sys.path.
    cwd = code_dir or ROOT
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    # Lines read "import time: self [us] | cumulative [us] | package"; the module's own line
    # (top level: one space before its name) carries everything it imported.
    total_us = 0
    for line in result.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2] == f" {module}":
            total_us = int(parts[1])
    return total_us / 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    samples: dict[str, list[float]] = {"boto3": [], **{name: [] for name in HANDLERS}}
    for _ in range(runs):
        samples["boto3"].append(import_seconds("boto3", None))
        for name, folder in HANDLERS.items():
            samples[name].append(import_seconds("app", ROOT / folder))
    baseline = statistics.median(samples["boto3"])
    print(f"{'import':<10} {'median ms':>10} {'ratio to boto3':>15}")
    print(f"{'boto3':<10} {baseline * 1000:>10.1f} {1.0:>15.2f}")
    worst = 0.0
    for name in HANDLERS:
        median = statistics.median(samples[name])
        ratio = median / baseline
        worst = max(worst, ratio)
        print(f"{name:<10} {median * 1000:>10.1f} {ratio:>15.2f}")
    print(f"worst handler import / boto3: {worst:.2f} (target <= {TARGET})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
