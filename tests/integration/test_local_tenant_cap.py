"""Specification: on the local stack, the tenants' cap (TenantMaxRunningJobs) holds end to end.

One stack with two pollers per function and a cap of one running job per tenant and job type.
A tenant uploads four text files at once, their compression slowed to 2 s each (an injected
`slow` fault): two workers would run two at a time, the cap lets one run; the others are
deferred, and still every job completes.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.localstack import TERMINAL, RunningStack, running_stack

FILES = 4
SLOW = [{"kind": "slow", "job_type": "compression", "key_contains": "capped", "seconds": 2}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("capped")
    faults = root / "faults.json"
    faults.write_text(json.dumps(SLOW))
    options = (
        "--workers", "2", "--parameter", "TenantMaxRunningJobs=1", "--faults", str(faults),
    )  # fmt: skip
    with running_stack(root, *options, schedule_seconds=None) as running:
        yield running


def tenants_jobs(stack: RunningStack, tenant: str) -> list[dict[str, Any]]:
    return stack.scan(
        stack.config["table_name"],
        FilterExpression="tenant = :tenant",
        ExpressionAttributeValues={":tenant": {"S": tenant}},
    )


def settled(stack: RunningStack, tenant: str, jobs: int, seconds: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        items = tenants_jobs(stack, tenant)
        if len(items) >= jobs and all(item["status"]["S"] in TERMINAL for item in items):
            return items
        time.sleep(1)
    raise AssertionError(f"{tenant}'s {jobs} jobs did not all end within {seconds} s")


def spans(items: list[dict[str, Any]], job_type: str) -> list[tuple[datetime, datetime]]:
    """(started, ended) of each job of the type, in start order."""
    return sorted(
        (
            datetime.fromisoformat(item["started_at"]["S"]),
            datetime.fromisoformat(item["completed_at"]["S"]),
        )
        for item in items
        if item["job_type"]["S"] == job_type
    )


def test_one_tenant_never_runs_more_jobs_of_a_type_than_its_cap_and_every_job_completes(
    stack: RunningStack,
) -> None:
    # given a tenant's 4 text files (4 jobs each), uploaded at once
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]
    for n in range(FILES):
        body = f"notes {n}\n".encode() * 50
        s3.put_object(Bucket=bucket, Key=f"uploads/capped/notes-{n}.md", Body=body)
    # when every job has ended (deferred jobs come back 10-30 s later)
    items = settled(stack, "capped", FILES * 4, seconds=240)
    # then every one completed: a deferral never fails a job nor spends its attempts
    assert {item["status"]["S"] for item in items} == {"completed"}
    assert {item["attempt"]["N"] for item in items} == {"1"}
    # and the slow compressions ran one at a time: each started after the one before ended
    compressions = spans(items, "compression")
    assert len(compressions) == FILES
    for (_, ended), (started, _) in itertools.pairwise(compressions):
        assert started >= ended
