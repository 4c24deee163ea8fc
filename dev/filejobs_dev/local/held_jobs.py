"""Jobs recorded pending with their messages held back, for `filejobs events`.

On a running local stack every job message is taken by the stack's own workers within a second,
so an event file naming a job that waits for its worker needs a job whose message was never
sent: here it is written into the event file instead of the queue. The job is recorded as the
status API records a requested one (`new_job`, then the file's `add_job`: one transaction), with
a dispatch grace of HOLD: the sweep takes its message for lost, and sends it again, only after
that, so until then the event file is the job's one message (`sam local invoke` or
`filejobs invoke` runs it). Run in a function's environment on the stack (the tables, the
emulator), as `python -m filejobs_dev.local.held_jobs FILE_ID JOB_TYPE...`; prints one JSON line
per job: its id, type and message body.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta

from filejobs import runtime
from filejobs.domain.ingest import new_job
from filejobs.domain.job import JobType
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import DispatchPolicy

HOLD = timedelta(hours=1)
CREATED_BY = "local:filejobs-events"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="held_jobs")
    parser.add_argument("file_id")
    parser.add_argument("job_types", nargs="+", metavar="JOB_TYPE")
    parser.add_argument(
        "--purpose", default="worker", help="tells the jobs' idempotency keys apart"
    )
    arguments = parser.parse_args(argv)
    stored = runtime.files().get(arguments.file_id)
    if stored is None:
        print(f"held_jobs: no file {arguments.file_id}", file=sys.stderr)
        return 1
    now = datetime.now(UTC)
    for job_type in arguments.job_types:
        job = new_job(
            stored,
            JobType(job_type),
            now=now,
            created_by=CREATED_BY,
            dispatch=DispatchPolicy(grace=HOLD),
            # A new job at every run of `filejobs events`: the time is in its key.
            idempotency_key=f"sam-local:{stored.id}:{job_type}:{arguments.purpose}:{now:%Y%m%dT%H%M%S%f}",
        )
        if not runtime.files().add_job(job):
            print(f"held_jobs: job {job.id} exists already", file=sys.stderr)
            return 1
        body = JobMessage.for_job(job).to_json()
        print(json.dumps({"job_id": job.id, "job_type": job.job_type.value, "body": body}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
