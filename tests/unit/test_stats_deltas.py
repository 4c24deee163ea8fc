"""Specification of the console's aggregates (domain/stats.py): what each change of a job adds
to the gauges, the minute and hour buckets and the failure groups, in the job's tenant's scope
and in every tenant's; latency percentiles from merged histograms within 10% of the exact ones;
and the overview composed from stored counters."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.domain.failures import group_of
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.messages import Lane
from filejobs.domain.stats import (
    ALL_TENANTS,
    SAMPLE_MESSAGE_CHARS,
    Deltas,
    Gauge,
    GroupOf,
    HourBucket,
    JobFacts,
    MinuteBucket,
    StatsChange,
    compose_overview,
    deltas_of,
    latency_bucket,
    latency_counter,
    percentile,
    percentiles,
    sequence_key,
    verdict_of,
)

T0 = datetime(2026, 12, 4, 11, 58, 30, tzinfo=UTC)
THUMB = JobType.THUMBNAIL_GENERATION
SCOPES = ("acme", ALL_TENANTS)


def job(status: JobStatus = JobStatus.PENDING, **changes: object) -> JobFacts:
    facts = JobFacts(
        id="job-1",
        tenant="acme",
        job_type=THUMB,
        lane=Lane.NORMAL,
        status=status,
        created_at=T0,
    )
    return replace(facts, **changes)  # type: ignore[arg-type]


def change(old: JobFacts | None, new: JobFacts | None, at: datetime = T0) -> Deltas:
    return deltas_of(StatsChange("100", at, old, new)).without_empty()


def gauges(deltas: Deltas) -> dict[str, dict[str, int]]:
    return {a.scope: dict(d.counts) for a, d in deltas.items() if isinstance(a, Gauge)}


def test_an_inserted_job_counts_as_active_in_its_tenant_and_in_every_tenant() -> None:
    deltas = change(None, job(JobStatus.PENDING))
    assert gauges(deltas) == {s: {"thumbnail_generation#normal#pending": 1} for s in SCOPES}
    assert set(deltas) == {Gauge("acme"), Gauge(ALL_TENANTS)}


def test_a_claim_moves_a_job_from_pending_to_running_in_its_lane() -> None:
    old = job(JobStatus.PENDING, lane=Lane.HIGH)
    deltas = change(old, replace(old, status=JobStatus.RUNNING))
    expected = {"thumbnail_generation#high#pending": -1, "thumbnail_generation#high#running": 1}
    assert gauges(deltas) == {s: expected for s in SCOPES}


@pytest.mark.parametrize("status", [JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING])
def test_every_active_status_is_a_gauge(status: JobStatus) -> None:
    deltas = change(None, job(status))
    assert gauges(deltas)["acme"] == {f"thumbnail_generation#normal#{status.value}": 1}


def test_a_heartbeat_or_a_write_that_keeps_the_status_changes_nothing() -> None:
    running = job(JobStatus.RUNNING)
    assert change(running, replace(running, error_message="x")) == {}


def test_a_removed_active_job_leaves_its_gauge() -> None:
    deltas = change(job(JobStatus.SCHEDULED), None)
    assert gauges(deltas) == {s: {"thumbnail_generation#normal#scheduled": -1} for s in SCOPES}


def test_completing_counts_the_job_latency_and_type_in_the_minute_and_hour_it_ended() -> None:
    running = job(JobStatus.RUNNING)
    ended = T0 + timedelta(seconds=90)  # 12:00:00, the next hour
    done = replace(running, status=JobStatus.COMPLETED, completed_at=ended)
    deltas = change(running, done, at=ended + timedelta(seconds=5))
    bucket = latency_bucket(90)
    expected = {
        "thumbnail_generation#normal#completed": 1,
        latency_counter(bucket): 1,
        latency_counter(bucket, THUMB): 1,
    }
    minute = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    for scope in SCOPES:
        assert dict(deltas[MinuteBucket(scope, minute)].counts) == expected
        assert dict(deltas[HourBucket(scope, minute)].counts) == expected
        assert dict(deltas[Gauge(scope)].counts) == {"thumbnail_generation#normal#running": -1}
    assert len(deltas) == 6


def test_a_terminal_job_without_completed_at_counts_at_the_records_time() -> None:
    pending = job(JobStatus.PENDING)
    at = T0 + timedelta(minutes=3)
    deltas = change(pending, replace(pending, status=JobStatus.CANCELLED), at=at)
    minute = MinuteBucket("acme", at.replace(second=0))
    assert deltas[minute].counts["thumbnail_generation#normal#cancelled"] == 1


def test_a_write_to_a_finished_job_that_keeps_its_status_counts_nothing_again() -> None:
    done = job(JobStatus.COMPLETED, completed_at=T0)
    assert change(done, replace(done, deleted=True)) == {}


def test_a_virus_scans_verdict_is_counted_when_it_completes() -> None:
    scan = job(JobStatus.RUNNING, job_type=JobType.VIRUS_SCAN)
    done = replace(scan, status=JobStatus.COMPLETED, completed_at=T0, verdict="infected")
    deltas = change(scan, done)
    assert (
        deltas[HourBucket(ALL_TENANTS, T0.replace(minute=0, second=0))].counts["verdict#infected"]
        == 1
    )


def test_the_verdict_is_read_from_the_scans_result() -> None:
    assert verdict_of(JobType.VIRUS_SCAN, {"verdict": "CLEAN"}) == "clean"
    assert verdict_of(JobType.VIRUS_SCAN, {"verdict": "UNSCANNABLE"}) == "unscannable"
    assert verdict_of(JobType.VIRUS_SCAN, {"verdict": "ERROR"}) is None
    assert verdict_of(JobType.VIRUS_SCAN, None) is None
    assert verdict_of(THUMB, {"verdict": "CLEAN"}) is None


def failing(
    message: str = "cannot identify image file '/tmp/a/1.png'",
) -> tuple[JobFacts, JobFacts]:
    running = job(JobStatus.RUNNING)
    failed = replace(
        running,
        status=JobStatus.FAILED,
        completed_at=T0 + timedelta(seconds=2),
        error_message=message,
    )
    return running, failed


def test_a_job_that_fails_joins_its_failure_group_with_a_sample() -> None:
    running, failed = failing()
    deltas = change(running, failed)
    group = group_of(THUMB, failed.error_message)
    for scope in SCOPES:
        delta = deltas[GroupOf(scope, group.id)]
        assert dict(delta.counts) == {"count": 1, "total": 1}
        assert delta.fingerprint == "cannot identify image file <quoted>"
        assert delta.first_seen == delta.last_seen == failed.completed_at
        assert delta.sample is not None
        assert (delta.sample.job_id, delta.sample.tenant) == ("job-1", "acme")
        assert delta.sample.error_message == failed.error_message
    # and the failure is counted in its minute and hour as well
    assert (
        deltas[MinuteBucket("acme", T0.replace(second=0))].counts[
            "thumbnail_generation#normal#failed"
        ]
        == 1
    )


def test_a_samples_message_is_capped() -> None:
    running, failed = failing("x" * 3000)
    [sample] = {d.sample for a, d in change(running, failed).items() if isinstance(a, GroupOf)}
    assert sample is not None and len(sample.error_message) == SAMPLE_MESSAGE_CHARS


def test_a_failed_job_retried_leaves_its_group_and_counts_as_pending_again() -> None:
    _, failed = failing()
    retried = replace(failed, status=JobStatus.PENDING, completed_at=None, error_message=None)
    deltas = change(failed, retried)
    group = group_of(THUMB, failed.error_message)
    for scope in SCOPES:
        assert dict(deltas[GroupOf(scope, group.id)].counts) == {"count": -1}
        assert dict(deltas[Gauge(scope)].counts) == {"thumbnail_generation#normal#pending": 1}
    assert not any(isinstance(a, MinuteBucket | HourBucket) for a in deltas)


def test_a_soft_deleted_failed_job_leaves_its_group() -> None:
    _, failed = failing()
    deltas = change(failed, replace(failed, deleted=True))
    group = group_of(THUMB, failed.error_message)
    assert {a: dict(d.counts) for a, d in deltas.items()} == {
        GroupOf(s, group.id): {"count": -1} for s in SCOPES
    }


def test_a_failed_job_removed_by_ttl_leaves_its_group() -> None:
    _, failed = failing()
    deltas = change(failed, None)
    group = group_of(THUMB, failed.error_message)
    assert {a: dict(d.counts) for a, d in deltas.items()} == {
        GroupOf(s, group.id): {"count": -1} for s in SCOPES
    }


def test_deltas_of_a_batch_merge_by_addition() -> None:
    running, failed = failing()
    merged = Deltas()
    merged.merge(change(None, job(JobStatus.PENDING)))
    merged.merge(change(job(JobStatus.PENDING), running))
    merged.merge(change(running, failed))
    merged = merged.without_empty()
    # pending +1 -1, running +1 -1: the gauge is back where it was
    assert Gauge("acme") not in merged
    group = group_of(THUMB, failed.error_message)
    assert dict(merged[GroupOf("acme", group.id)].counts) == {"count": 1, "total": 1}


def test_sequence_numbers_order_as_numbers_whatever_their_length() -> None:
    numbers = ["9", "10", "000011", "1100000000017454423009", "99999999999999999999"]
    assert sorted(numbers, key=sequence_key) == [
        "9", "10", "000011", "99999999999999999999", "1100000000017454423009"
    ]  # fmt: skip


# --- percentiles ----------------------------------------------------------------------------


def exact(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


@pytest.mark.parametrize("seed", range(20))
def test_percentiles_of_merged_histograms_are_within_10_percent_of_the_exact_ones(
    seed: int,
) -> None:
    rng = random.Random(seed)
    # latencies from 10 ms to a day, log-uniform and clustered, in several minutes' histograms
    values = [10 ** rng.uniform(-2, math.log10(86_400)) for _ in range(rng.randint(1, 3000))]
    values += [rng.gauss(3.0, 0.5) for _ in range(rng.randint(0, 500))]
    values = [v for v in values if 0.01 <= v <= 86_400]
    histograms: list[dict[int, int]] = [{} for _ in range(7)]
    for value in values:
        histogram = rng.choice(histograms)
        histogram[latency_bucket(value)] = histogram.get(latency_bucket(value), 0) + 1
    merged: dict[int, int] = {}
    for histogram in histograms:
        for bucket, count in histogram.items():
            merged[bucket] = merged.get(bucket, 0) + count
    for fraction in (0.5, 0.95, 0.99):
        estimate = percentile(merged, fraction)
        truth = exact(values, fraction)
        assert estimate is not None
        assert abs(estimate - truth) <= 0.10 * truth, (fraction, estimate, truth)


def test_no_latencies_have_no_percentiles_and_negative_counts_count_as_none() -> None:
    assert percentiles({}) is None
    assert percentiles({5: -3}) is None
    assert percentiles({5: -3, 40: 1}) == percentiles({40: 1})


# --- the overview --------------------------------------------------------------------------


def test_the_overview_composes_rows_series_latency_and_verdicts_from_stored_counters() -> None:
    now = datetime(2026, 12, 4, 0, 10, 20, tzinfo=UTC)  # the last hour crosses midnight
    gauge = {
        "thumbnail_generation#high#pending": 3,
        "thumbnail_generation#high#running": 1,
        "compression#normal#scheduled": -2,  # a job older than the aggregates: reads as 0
    }
    this_minute = now.replace(second=0)
    an_hour_ago = this_minute - timedelta(minutes=59)
    too_old = this_minute - timedelta(minutes=60)
    fast, slow = latency_bucket(0.8), latency_bucket(4.0)
    minutes = {
        this_minute: {
            "thumbnail_generation#high#completed": 2,
            "thumbnail_generation#high#failed": 1,
            f"lat#{fast}": 2,
            f"lat#{slow}": 1,
            f"lat#thumbnail_generation#{fast}": 2,
        },
        an_hour_ago: {"virus_scan#normal#completed": 1, "verdict#clean": 1, f"lat#{fast}": 1},
        too_old: {"thumbnail_generation#high#completed": 50},
    }
    hours = {
        now.replace(minute=0, second=0): {"thumbnail_generation#high#failed": 1},
        datetime(2026, 12, 3, 1, tzinfo=UTC): {
            "thumbnail_generation#high#failed": 4,
            "verdict#infected": 2,
        },
        datetime(2026, 12, 3, 0, tzinfo=UTC): {"thumbnail_generation#high#failed": 100},
    }
    overview = compose_overview("acme", now, gauge, minutes, hours)
    rows = {(r.job_type, r.lane): r for r in overview.queues}
    assert len(rows) == len(JobType) * len(Lane)
    thumbs = rows[THUMB, Lane.HIGH]
    assert (thumbs.pending, thumbs.scheduled, thumbs.running) == (3, 0, 1)
    assert (thumbs.completed_last_hour, thumbs.failed_last_hour, thumbs.failed_last_day) == (
        2,
        1,
        5,
    )
    assert rows[JobType.COMPRESSION, Lane.NORMAL].scheduled == 0
    assert [p.minute for p in overview.series][::59] == [an_hour_ago, this_minute]
    assert len(overview.series) == 60
    last = overview.series[-1]
    assert (last.completed, last.failed, last.cancelled) == (2, 1, 0)
    assert last.latency is not None and last.latency.p50 == pytest.approx(0.8, rel=0.1)
    assert last.latency.p99 == pytest.approx(4.0, rel=0.1)
    assert overview.series[1].latency is None
    assert overview.latency is not None and overview.latency.p50 == pytest.approx(0.8, rel=0.1)
    type_latency = overview.latency_by_type[THUMB]
    assert type_latency is not None and type_latency.p99 == pytest.approx(0.8, rel=0.1)
    assert overview.latency_by_type[JobType.COMPRESSION] is None
    assert overview.verdicts_last_hour == {"clean": 1, "infected": 0, "unscannable": 0}
    assert overview.verdicts_last_day == {"clean": 0, "infected": 2, "unscannable": 0}
