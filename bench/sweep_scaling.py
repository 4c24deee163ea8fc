"""What one sweep reads, against the table's size: 1,000 and then 100,000 finished jobs, with
the same number of jobs due each time.

The jobs table is built from template.yaml in moto (in this process). Finished jobs are written
as the repository writes them (completed: no `sweep_at`, so no entry in the sparse `by_sweep`
index); the due jobs are pending jobs whose dispatch grace ran out an hour ago. One
`SweepService.run()` is metered with the local stack's meter (filejobs_dev/local/metering.py):
items read are the items its queries evaluated, with their read units; the sweep then moves
each due job on (a conditional write each), which the figures show too. A ratio near 1 says
the sweep's cost follows the work due, not the table.

moto answers an index query by walking the whole table, so the wall time printed grows with the
table here; DynamoDB reads only the index's partition. The items read are DynamoDB's figure.
moto also sorts the whole table before each index query, then sorts the matches by the index's
keys: the bench skips the first sort (`unsorted_walk`), which changes no answer and makes the
100,000-item run minutes shorter.

    .venv/bin/python bench/sweep_scaling.py [--due 100] [--sizes 1000 100000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from copy import deepcopy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
}.items():  # fmt: skip
    os.environ[_name] = _value
for _variable in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
    os.environ.pop(_variable, None)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from moto.core.models import DEFAULT_ACCOUNT_ID  # noqa: E402
from moto.dynamodb.models import dynamodb_backends  # noqa: E402
from moto.dynamodb.models.table import Table  # noqa: E402

from filejobs.data.job_repository import JobRepository  # noqa: E402
from filejobs.data.mapping import job_to_model  # noqa: E402
from filejobs.data.models import JobModel, bind_tables  # noqa: E402
from filejobs.domain import transitions  # noqa: E402
from filejobs.domain.ingest import ObjectCreated, plan_ingest  # noqa: E402
from filejobs.domain.job import ProcessingJob  # noqa: E402
from filejobs.services.sweep import SweepService  # noqa: E402
from filejobs_dev.infra.template import create_tables  # noqa: E402
from filejobs_dev.local.metering import Meter, MeterLog  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_row, run_command, utc_now, write_section  # noqa: E402

TARGET = 1.2
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Discarding:
    """The sweep's dispatcher: counts the messages it would send."""

    def __init__(self) -> None:
        self.sent = 0

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self.sent += 1


def template_jobs() -> list[ProcessingJob]:
    """A text file's planned jobs, an hour old: the shapes every job of the bench copies."""
    record = ObjectCreated(
        bucket="uploads", key="uploads/bench/notes.txt", size=1_000, etag="e", version_id="v1"
    )
    return list(plan_ingest(record, "text/plain", now=NOW - timedelta(hours=1)).jobs)


def finished(job: ProcessingJob) -> ProcessingJob:
    """The job run to completion, as the domain moves it (a copy)."""
    done = deepcopy(job)
    done.apply(
        transitions.claim(now=job.metadata.created_at, lease=timedelta(minutes=5), worker="bench")
    )
    done.apply(
        transitions.complete(
            done, result={"ok": True}, now=job.metadata.created_at, retention=timedelta(days=30)
        )
    )
    return done


def unsorted_walk() -> None:
    """moto's `Table.all_items` sorts every item on each call; an index query sorts its matches
    by the index's keys afterwards, so the first sort only costs time (O(n log n) per query, 256
    queries a sweep). Nothing else this bench runs walks the table (no scans, no base-table
    queries), so here the walk may be unsorted."""

    def all_items(table: Table) -> list[Any]:
        items: list[Any] = []
        for entries in table.items.values():
            items.extend(entries.values() if table.range_key_attr else [entries])
        return items

    Table.all_items = all_items  # type: ignore[method-assign,assignment]


def write_jobs(jobs: list[ProcessingJob]) -> None:
    """The jobs as the repository stores them, put straight into moto's table: filling 100,000
    items through HTTP would take most of the bench's time, and the fill is not measured."""
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(JobModel.Meta.table_name)
    for job in jobs:
        table.put_item(job_to_model(job).serialize())


def copies(shape: ProcessingJob, count: int) -> list[ProcessingJob]:
    return [replace(shape, id=str(uuid.uuid4()), file_id=str(uuid.uuid4())) for _ in range(count)]


def measure(
    due: int, finished_jobs: int, shapes: list[ProcessingJob], log: Path
) -> dict[str, float]:
    """One sweep over `due` due jobs; returns what it read (and did) from the meter's lines."""
    write_jobs(copies(shapes[0], due))  # pending, dispatch grace long over
    log.write_text("")
    meter = Meter(MeterLog(str(log), "SweepFunction", None), boto3.client("dynamodb"))
    client = JobModel._get_connection().connection.client
    meter.instrument(client)
    dispatcher = Discarding()
    started = time.perf_counter()
    try:
        report = SweepService(JobRepository(), dispatcher, clock=lambda: NOW).run()
    finally:
        seconds = time.perf_counter() - started
        meter.uninstrument(client)  # the next table fill is not the sweep's
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    queries = [line for line in lines if line["op"] == "Query"]
    return {
        "finished": float(finished_jobs),
        "due": float(due),
        "examined": float(report.examined),
        "queries": float(len(queries)),
        "items_read": float(sum(line["items"] for line in queries)),
        "read_units": sum(line["rru"] for line in queries),
        "writes": float(sum(1 for line in lines if line["op"] == "UpdateItem")),
        "dispatched": float(dispatcher.sent),
        "seconds": seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 100_000])
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    small, large = arguments.sizes
    shapes = template_jobs()
    done_shapes = [finished(job) for job in shapes]
    results = []
    unsorted_walk()
    with mock_aws(), tempfile.TemporaryDirectory() as scratch:
        names = {"JobsTable": "bench-jobs", "FilesTable": "bench-files"}
        create_tables(boto3.client("dynamodb"), names)
        bind_tables(jobs_table=names["JobsTable"], files_table=names["FilesTable"])
        log = Path(scratch) / "meter.jsonl"
        written = 0
        for size in (small, large):
            started = time.perf_counter()
            for start in range(written, size, 5_000):
                count = min(5_000, size - start)
                write_jobs(copies(done_shapes[start % len(done_shapes)], count))
            written = size
            print(f"  {size:,} finished jobs written in {time.perf_counter() - started:.0f} s")
            results.append(measure(arguments.due, size, shapes, log))
    return report(results, arguments.json)


def report(results: list[dict[str, float]], out: Path | None) -> int:
    header = ("finished jobs", "due", "examined", "queries", "items read", "read units",
              "writes", "sent", "wall s (moto)")  # fmt: skip
    print(" ".join(f"{h:>14}" for h in header))
    rows = []
    for r in results:
        cells = [f"{r['finished']:,.0f}", f"{r['due']:.0f}", f"{r['examined']:.0f}",
                 f"{r['queries']:.0f}", f"{r['items_read']:.0f}", f"{r['read_units']:.1f}",
                 f"{r['writes']:.0f}", f"{r['dispatched']:.0f}", f"{r['seconds']:.2f}"]  # fmt: skip
        rows.append(cells)
        print(" ".join(f"{c:>14}" for c in cells))
    small, large = results
    ratio = large["items_read"] / max(small["items_read"], 1.0)
    label = f"{large['finished'] / 1000:.0f}k/{small['finished'] / 1000:.0f}k"
    print(f"sweep read ratio {label}: {ratio:.2f} (target <= {TARGET})")
    section: dict[str, Any] = {
        "section": "sweep",
        "rows": results,
        "header": [markdown_row(header), markdown_row(["---"] * len(header))],
        "markdown_rows": [markdown_row(cells) for cells in rows],
        "targets": [
            {
                "name": f"sweep read ratio {label}",
                "target": f"<= {TARGET}",
                "value": round(ratio, 3),
                "met": ratio <= TARGET,
            },
        ],
        "command": run_command(),
        "measured_at": utc_now(),
    }
    write_section(out, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
