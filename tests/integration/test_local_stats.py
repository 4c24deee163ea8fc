"""Specification: on the local stack, StatsFunction is fed the jobs' stream (with the tumbling
window's shard id, as Lambda sends it) and an uploaded file's finished jobs show in the overview
read through StatsRepository."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from filejobs.data.stats_repository import StatsRepository
from filejobs.domain.messages import Lane
from filejobs.domain.stats import ALL_TENANTS, Overview
from filejobs.domain.time import utcnow
from tests.localstack import RunningStack, running_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("stats"), schedule_seconds=None) as running:
        yield running


def finished(overview: Overview) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for row in overview.queues:
        counts[row.job_type.value, "completed"] += row.completed_last_hour
        counts[row.job_type.value, "failed"] += row.failed_last_hour
    return +counts


def test_an_uploaded_files_finished_jobs_show_in_the_overview(
    stack: RunningStack, tmp_path: Path
) -> None:
    # given a text file uploaded by a tenant, every job of it finished
    key = "uploads/stats-tenant/notes.md"
    stack.client("s3").put_object(
        Bucket=stack.config["uploads_bucket"], Key=key, Body=b"# notes\n" * 40
    )
    stored = stack.settled(key, seconds=120)
    expected = Counter(
        (job["job_type"], job["status"])
        for job in stored["jobs"]
        if job["status"] in {"completed", "failed"}
    )
    assert expected
    # when the overview is read through StatsRepository (the stream is read every 0.25 s)
    ops_table = stack.config["resources"]["refs"]["OpsTable"]
    aggregates = StatsRepository(stack.client("dynamodb"), ops_table)
    deadline = time.monotonic() + 30
    while True:
        tenant = aggregates.overview("stats-tenant", utcnow())
        if finished(tenant) == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # then the tenant's and every tenant's show those jobs finished and none active
    assert finished(tenant) == expected
    everyone = aggregates.overview(ALL_TENANTS, utcnow())
    assert all(finished(everyone)[k] >= n for k, n in expected.items())
    assert all(r.pending == r.running == r.scheduled == 0 for r in tenant.queues)
    assert {r.lane for r in tenant.queues} == set(Lane)
    assert tenant.latency is not None
    assert tenant.verdicts_last_hour["clean"] == 1
    # and its cursor is the shard's, named by the window's shard id
    cursors = stack.scan(
        ops_table,
        FilterExpression="begins_with(pk, :cursor)",
        ExpressionAttributeValues={":cursor": {"S": "cursor#"}},
    )
    assert [c["pk"]["S"].startswith("cursor#shardId-") for c in cursors] == [True]
