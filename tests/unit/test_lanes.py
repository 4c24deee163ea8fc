"""Specification: a job's priority alone chooses its queue lane. Higher is more important (the
spec's processing job model): operators' raised jobs (1 and up) go first, new work (0) next, and
rescans and backfills (below 0) wait in a low lane that never holds new work up."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from filejobs.domain.ingest import BACKFILL_PRIORITY
from filejobs.domain.job import PRIORITY_MAX, PRIORITY_MIN
from filejobs.domain.messages import Lane, lane_for_priority
from filejobs.domain.stats import JobFacts
from filejobs.services.rescans import RESCAN_PRIORITY
from tests.factories import pending_job


@pytest.mark.parametrize(
    ("priority", "lane"),
    [
        (PRIORITY_MAX, Lane.HIGH),
        (1, Lane.HIGH),
        (0, Lane.NORMAL),
        (-1, Lane.LOW),
        (PRIORITY_MIN, Lane.LOW),
    ],
)
def test_the_lane_follows_the_priority(priority: int, lane: Lane) -> None:
    assert lane_for_priority(priority) is lane


def test_rescans_and_backfills_take_the_low_lane() -> None:
    assert lane_for_priority(RESCAN_PRIORITY) is Lane.LOW
    assert lane_for_priority(BACKFILL_PRIORITY) is Lane.LOW


def test_the_overview_counts_a_job_in_the_lane_its_messages_travel_in() -> None:
    # given a rescan's job, a new upload's and an operator's raised one
    jobs = {priority: pending_job(datetime(2026, 12, 5, tzinfo=UTC)) for priority in (-10, 0, 5)}
    for priority, job in jobs.items():
        job.priority = priority
    # then the stats' aggregates count each in its own lane
    lanes = {priority: JobFacts.of(job).lane for priority, job in jobs.items()}
    assert lanes == {-10: Lane.LOW, 0: Lane.NORMAL, 5: Lane.HIGH}
