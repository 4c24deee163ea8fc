"""Cold start of each Lambda handler against `import boto3` alone, in the same run.

Each sample runs in a fresh interpreter (a cold start), several times, interleaved so machine
noise hits both sides alike; the medians are compared. Two figures per handler:

- import: `import app` (the handler module) against `import boto3`. Target: no handler above 1.5x.
- import+setup: the import, then what the first invocation builds and later ones reuse (the
  settings, and the clients of the services the handler calls: S3, SQS, DynamoDB through
  PynamoDB), against `import boto3` plus the same clients built with boto3. Work moved out of
  the import into the first invocation shows up here: Lambda bills it and a user waits for it.

The interpreter sees what a deployed function sees: the shared layer as `sam build` makes it
(infra/layers/Makefile: its packages and the filejobs package, compiled ahead of time), built
here for this machine's platform, and the standard library, nothing of the project's venv
(`python -S`); the handler's folder as working directory; LAMBDA_TASK_ROOT (the Tracer then
enables itself and patches botocore, as deployed); the table names the settings require.
`import boto3` runs from the same layer, under the same conditions.
Setup counts the DynamoDB client PynamoDB builds, in a botocore session of its own, for the model
the handler's first invocation uses. Not counted: the second model's (a duplicate ingest reads
jobs too), nor the extra ones several threads can race to build when a 16-way fan-out (the
sweep's, the listings') makes the first DynamoDB call.

With `--json PATH`, the figures are also written there as the rows of the report's "Cold start
of the handlers" table (bench/common.py): `import boto3` first, then one row per handler.

    .venv/bin/python bench/cold_imports.py [--runs 7] [--layer BUILD/FileJobsLayer/python]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    add_json_argument,
    make_section,
    markdown_row,
    target,
    utc_now,
    write_section,
)

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5


@dataclass(frozen=True)
class Handler:
    folder: str
    boto3_clients: tuple[str, ...]  # the services it calls (its first invocation builds them)
    setup: str  # how the handler builds them: runtime's clients and the models' connections


HANDLERS = {
    "ingest": Handler(
        "functions/ingest",
        ("s3", "sqs", "dynamodb"),
        "runtime.s3(); runtime.sqs(); dynamodb(models.FileModel)",
    ),
    "worker": Handler(
        "functions/worker",
        ("s3", "sqs", "dynamodb"),
        "runtime.s3(); runtime.sqs(); dynamodb(models.JobModel)",
    ),
    "sweep": Handler(
        "functions/sweep",
        ("sqs", "dynamodb"),
        "runtime.sqs(); dynamodb(models.JobModel)",
    ),
    "api": Handler("functions/api", ("dynamodb",), "dynamodb(models.JobModel)"),
    "events": Handler("functions/events", ("events",), "runtime.events()"),
}

# Run after the timed import, in the same interpreter; prints the setup's seconds.
_SETUP = """
import time
_started = time.perf_counter()
{prelude}
{setup}
print(time.perf_counter() - _started)
"""
_HANDLER_PRELUDE = """from filejobs import runtime
from filejobs.data import models
def dynamodb(model):  # the client PynamoDB builds at a model's first request
    return model._get_connection().connection.client
runtime.tables()"""


@dataclass(frozen=True)
class Sample:
    import_seconds: float
    setup_seconds: float


def build_layer(into: Path) -> Path:
    """The shared layer, built by the recipe `sam build` uses (run in layers/, as SAM runs it in
    a copy of layers/), for this machine's platform."""
    recipe = ["-C", str(ROOT / "layers"), "-f", str(ROOT / "infra" / "layers" / "Makefile")]
    subprocess.run(  # noqa: S603 (fixed arguments)
        ["make", "-s", *recipe, "build-FileJobsLayer",  # noqa: S607
         f"ARTIFACTS_DIR={into}", f"PYTHON={sys.executable}", "PLATFORM="],
        check=True,
    )  # fmt: skip
    return into / "python"


def cold_start(layer: Path, module: str, code_dir: Path, prelude: str, setup: str) -> Sample:
    """`import module` in a new interpreter (its -X importtime total), then `setup` (wall time)."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONDONTWRITEBYTECODE": "1",  # the layer is read-only in Lambda
        "PYTHONPATH": str(layer),
        "LAMBDA_TASK_ROOT": str(code_dir),
        "AWS_DEFAULT_REGION": "us-east-1",
        "JOBS_TABLE_NAME": "bench-jobs",
        "FILES_TABLE_NAME": "bench-files",
        "OUTPUTS_BUCKET": "bench-outputs",
        "JOB_TYPE": "virus_scan",
    }
    code = f"import {module}\n" + _SETUP.format(prelude=prelude, setup=setup)
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-S", "-X", "importtime", "-c", code],
        cwd=code_dir,  # like Lambda: the handler's folder is the working directory, on sys.path
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
            break
    return Sample(total_us / 1e6, float(result.stdout.split()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7, help="samples per handler (7)")
    parser.add_argument("--layer", type=Path, help="a built FileJobsLayer/python folder")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    measured_at = utc_now()
    with tempfile.TemporaryDirectory() as scratch:
        layer = args.layer or build_layer(Path(scratch))
        rows = measure(layer, args.runs)
    write_section(args.json, section(rows, measured_at))
    return 0


def measure(layer: Path, runs: int) -> list[dict[str, Any]]:
    """Prints the medians; returns them as rows (ms and ratios): boto3's, then each handler's."""
    boto3_imports: list[float] = []
    baselines: dict[str, list[float]] = {name: [] for name in HANDLERS}
    handlers: dict[str, list[Sample]] = {name: [] for name in HANDLERS}
    for _ in range(runs):
        for name, handler in HANDLERS.items():
            clients = "; ".join(f"boto3.client({c!r})" for c in handler.boto3_clients)
            base = cold_start(layer, "boto3", ROOT, "", clients)
            boto3_imports.append(base.import_seconds)
            baselines[name].append(base.import_seconds + base.setup_seconds)
            handlers[name].append(
                cold_start(layer, "app", ROOT / handler.folder, _HANDLER_PRELUDE, handler.setup)
            )
    boto3_import = statistics.median(boto3_imports)
    print(
        f"{'':<8} {'import ms':>10} {'/ boto3':>8} {'setup ms':>9} {'import+setup ms':>16}"
        f" {'/ boto3+clients':>16}"
    )
    print(f"{'boto3':<8} {boto3_import * 1000:>10.1f} {1.0:>8.2f}")
    rows: list[dict[str, Any]] = [
        {"handler": "boto3", "import_ms": round(boto3_import * 1000, 1), "import_vs_boto3": 1.0}
    ]
    worst_import = worst_total = 0.0
    for name, handler in HANDLERS.items():
        imported = statistics.median(s.import_seconds for s in handlers[name])
        setup = statistics.median(s.setup_seconds for s in handlers[name])
        total = statistics.median(s.import_seconds + s.setup_seconds for s in handlers[name])
        baseline = statistics.median(baselines[name])
        worst_import = max(worst_import, imported / boto3_import)
        worst_total = max(worst_total, total / baseline)
        print(
            f"{name:<8} {imported * 1000:>10.1f} {imported / boto3_import:>8.2f}"
            f" {setup * 1000:>9.1f} {total * 1000:>16.1f} {total / baseline:>16.2f}"
            f"   (boto3 + {', '.join(handler.boto3_clients)}: {baseline * 1000:.1f} ms)"
        )
        rows.append(
            {
                "handler": name,
                "import_ms": round(imported * 1000, 1),
                "import_vs_boto3": round(imported / boto3_import, 3),
                "setup_ms": round(setup * 1000, 1),
                "import_setup_ms": round(total * 1000, 1),
                "boto3_clients_ms": round(baseline * 1000, 1),
                "import_setup_vs_boto3_clients": round(total / baseline, 3),
            }
        )
    print(f"worst handler import / boto3: {worst_import:.2f} (target <= {TARGET})")
    print(f"worst handler import+setup / boto3 with the same clients: {worst_total:.2f}")
    return rows


def section(rows: list[dict[str, Any]], measured_at: str) -> dict[str, Any]:
    """The "Cold start of the handlers" table: boto3's row, then one per handler, and the
    target: no handler's import above TARGET times `import boto3`'s."""
    boto3, handlers = rows[0], rows[1:]
    markdown_rows = [markdown_row(["`import boto3`", f"{boto3['import_ms']:.1f}", "1.00", "", ""])]
    markdown_rows += [
        markdown_row(
            [
                row["handler"],
                f"{row['import_ms']:.1f}",
                f"{row['import_vs_boto3']:.2f}",
                f"{row['import_setup_ms']:.1f}",
                f"{row['import_setup_vs_boto3_clients']:.2f}",
            ]
        )
        for row in handlers
    ]
    worst = max(row["import_vs_boto3"] for row in handlers)
    goal = target(
        f"no handler import above {TARGET}x import boto3", f"<= {TARGET}x", worst, worst <= TARGET
    )
    return make_section("cold_start", rows, markdown_rows, [goal], measured_at)


if __name__ == "__main__":
    sys.exit(main())
