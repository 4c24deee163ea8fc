"""Aggregates kept as jobs move: what one change of a job adds to the console's counts.

Each committed change of a job (a record of JobsTable's stream: its item before and after) makes
**deltas**, small additions to a few aggregates, in two scopes each: the job's tenant and
`ALL_TENANTS` (`*`, which no tenant id can be: `domain/keys.py`):

- **gauges** (one per scope): jobs active now, `{job_type}#{lane}#{status}` for each status that
  is not terminal: -1 for the status it leaves, +1 for the one it enters (an INSERT has no
  before, a REMOVE no after);
- **minute and hour buckets** (one per scope and minute or hour of the job's `completed_at`):
  when a job enters a terminal status from another, `{job_type}#{lane}#{status}` +1, its latency
  (creation to terminal status) in a log-spaced histogram, overall (`lat#{bucket}`) and per job
  type (`lat#{job_type}#{bucket}`), and a virus scan's verdict (`verdict#{verdict}`);
- **failure groups** (one per scope and group, `domain/failures.py`): a job that becomes failed
  (and is not deleted) joins its group (count +1, total +1, first and last seen, a sample); one
  that stops being so (retried, deleted, soft-deleted, or failed again in another group) leaves
  the group its old image was in (count -1).

Deltas merge by addition, so a batch of changes is written as one change per aggregate. Then,
from the stored aggregates, the pure functions below compose the console's overview: the latency
percentiles from merged histograms, each within 10% of the exact value (the histogram's buckets
are 1.2x wide and a percentile is reported as its bucket's geometric middle).

No I/O here: `data/stats_repository.py` keeps the aggregates, exactly once per stream record.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from filejobs.domain.failures import group_of
from filejobs.domain.job import ACTIVE_STATUSES, JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import Lane, lane_of

# The scope of every tenant's aggregates. Tenant ids match ^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$.
ALL_TENANTS = "*"
# A failure sample's message is kept to this many characters.
SAMPLE_MESSAGE_CHARS = 500
# The job types whose result carries a verdict (processors/scan: ScanVerdict's values).
VERDICTS = ("clean", "infected", "unscannable")

# --- the latency histogram --------------------------------------------------------------------

# Bucket b holds latencies in [FLOOR * RATIO**b, FLOOR * RATIO**(b+1)); below FLOOR in bucket 0,
# beyond the last bucket (24 h) in the last. A percentile is its bucket's geometric middle:
# within sqrt(RATIO) - 1 (9.5%) of any value of the bucket.
LATENCY_FLOOR_SECONDS = 0.01
LATENCY_RATIO = 1.2
LATENCY_CEILING_SECONDS = 24 * 3600.0
LATENCY_BUCKETS = math.ceil(
    math.log(LATENCY_CEILING_SECONDS / LATENCY_FLOOR_SECONDS) / math.log(LATENCY_RATIO)
)


def latency_bucket(seconds: float) -> int:
    if seconds <= LATENCY_FLOOR_SECONDS:
        return 0
    index = math.floor(math.log(seconds / LATENCY_FLOOR_SECONDS) / math.log(LATENCY_RATIO))
    return min(max(index, 0), LATENCY_BUCKETS - 1)


def bucket_seconds(bucket: int) -> float:
    """The value a bucket stands for: its geometric middle."""
    return float(LATENCY_FLOOR_SECONDS * LATENCY_RATIO ** (bucket + 0.5))


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p95: float
    p99: float

    def to_json(self) -> dict[str, float]:
        return {"p50": round(self.p50, 3), "p95": round(self.p95, 3), "p99": round(self.p99, 3)}


def percentile(histogram: Mapping[int, int], fraction: float) -> float | None:
    """The nearest-rank percentile (`fraction` of 1) of the latencies counted in `histogram`
    (bucket -> count; counts below 0 count as 0), or None when it counts none."""
    counts = sorted((b, n) for b, n in histogram.items() if n > 0)
    total = sum(n for _, n in counts)
    if total == 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for bucket, count in counts:
        seen += count
        if seen >= rank:
            return bucket_seconds(bucket)
    return bucket_seconds(counts[-1][0])  # pragma: no cover (the loop always reaches rank)


def percentiles(histogram: Mapping[int, int]) -> Percentiles | None:
    p50, p95, p99 = (percentile(histogram, f) for f in (0.50, 0.95, 0.99))
    if p50 is None or p95 is None or p99 is None:
        return None
    return Percentiles(p50, p95, p99)


def merged(histograms: Iterable[Mapping[int, int]]) -> Counter[int]:
    total: Counter[int] = Counter()
    for histogram in histograms:
        for bucket, count in histogram.items():
            total[bucket] += count
    return total


# --- counter names (the attributes of a gauge or a bucket) -----------------------------------

LATENCY_PREFIX = "lat#"
VERDICT_PREFIX = "verdict#"


def status_counter(job_type: JobType, lane: Lane, status: JobStatus) -> str:
    return f"{job_type.value}#{lane.value}#{status.value}"


def latency_counter(bucket: int, job_type: JobType | None = None) -> str:
    return f"{LATENCY_PREFIX}{bucket}" if job_type is None else f"lat#{job_type.value}#{bucket}"


def verdict_counter(verdict: str) -> str:
    return f"{VERDICT_PREFIX}{verdict}"


def histogram_of(counters: Mapping[str, int], job_type: JobType | None = None) -> dict[int, int]:
    """The latency histogram among a bucket's counters: overall, or a job type's."""
    prefix = LATENCY_PREFIX if job_type is None else f"lat#{job_type.value}#"
    found: dict[int, int] = {}
    for name, count in counters.items():
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            found[int(name[len(prefix) :])] = count
    return found


# --- a job, as the aggregates see it -----------------------------------------------------------


@dataclass(frozen=True)
class JobFacts:
    """The fields of a job's image the aggregates read."""

    id: str
    tenant: str
    job_type: JobType
    lane: Lane
    status: JobStatus
    created_at: datetime
    completed_at: datetime | None = None
    error_message: str | None = None
    verdict: str | None = None  # a virus scan's, lower case: clean | infected | unscannable
    deleted: bool = False

    @classmethod
    def of(cls, job: ProcessingJob) -> JobFacts:
        return cls(
            id=job.id,
            tenant=job.tenant,
            job_type=job.job_type,
            lane=lane_of(job),  # the lane its messages travel in
            status=job.status,
            created_at=job.metadata.created_at,
            completed_at=job.completed_at,
            error_message=job.error_message,
            verdict=verdict_of(job.job_type, job.result_data),
            deleted=job.metadata.deleted_at is not None,
        )

    @property
    def is_failed(self) -> bool:
        """Whether it belongs to a failure group: failed, and not deleted."""
        return self.status is JobStatus.FAILED and not self.deleted


def verdict_of(job_type: JobType, result: Mapping[str, Any] | None) -> str | None:
    """A virus scan's own verdict (its result's `verdict`, processors/scan ScanVerdict)."""
    if job_type is not JobType.VIRUS_SCAN or not result:
        return None
    verdict = result.get("verdict")
    if not isinstance(verdict, str) or verdict.lower() not in VERDICTS:
        return None
    return verdict.lower()


@dataclass(frozen=True)
class StatsChange:
    """One stream record of a job: its sequence number (a decimal string, ordered within its
    shard), when it was written, and the job before and after (None: inserted, removed)."""

    sequence: str
    at: datetime
    old: JobFacts | None
    new: JobFacts | None


def sequence_key(sequence: str) -> tuple[int, str]:
    """Orders sequence numbers, decimal strings of varying length, as the numbers they are."""
    digits = sequence.lstrip("0")
    return (len(digits), digits)


# --- deltas -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gauge:
    scope: str


@dataclass(frozen=True)
class MinuteBucket:
    scope: str
    minute: datetime  # UTC, on the minute


@dataclass(frozen=True)
class HourBucket:
    scope: str
    hour: datetime  # UTC, on the hour


@dataclass(frozen=True)
class GroupOf:
    scope: str
    group_id: str


Aggregate = Gauge | MinuteBucket | HourBucket | GroupOf


@dataclass(frozen=True)
class FailureSample:
    job_id: str
    tenant: str
    job_type: JobType
    fingerprint: str
    error_message: str


@dataclass
class Delta:
    """What to add to one aggregate: counters (by name) and, for a failure group, its identity,
    the span it was seen over and its latest sample."""

    counts: Counter[str] = field(default_factory=Counter)
    job_type: JobType | None = None
    fingerprint: str | None = None
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    sample: FailureSample | None = None

    def add(self, other: Delta) -> None:
        """`other` after this one (a later record): counts add up, the later sample wins."""
        self.counts.update(other.counts)
        self.job_type = other.job_type or self.job_type
        self.fingerprint = other.fingerprint or self.fingerprint
        if other.first_seen is not None:
            self.first_seen = min(filter(None, (self.first_seen, other.first_seen)))
        if other.last_seen is not None:
            self.last_seen = max(filter(None, (self.last_seen, other.last_seen)))
        if other.sample is not None:
            self.sample = other.sample

    @property
    def is_empty(self) -> bool:
        return not any(self.counts.values()) and self.sample is None and self.first_seen is None


class Deltas(dict[Aggregate, Delta]):
    """Deltas by aggregate; `merge` adds another set after this one."""

    def count(self, aggregate: Aggregate, name: str, amount: int = 1) -> None:
        self.setdefault(aggregate, Delta()).counts[name] += amount

    def merge(self, other: Mapping[Aggregate, Delta]) -> Deltas:
        for aggregate, delta in other.items():
            self.setdefault(aggregate, Delta()).add(delta)
        return self

    def without_empty(self) -> Deltas:
        """Those that change something (a +1 and a -1 of one counter cancel out)."""
        kept = Deltas()
        for aggregate, delta in self.items():
            delta.counts = Counter({k: n for k, n in delta.counts.items() if n})
            if not delta.is_empty:
                kept[aggregate] = delta
        return kept


def on_the_minute(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def on_the_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def deltas_of(change: StatsChange) -> Deltas:
    """The deltas one change of a job makes, in the job's tenant's scope and in `*`'s."""
    deltas = Deltas()
    old, new = change.old, change.new
    job = new or old
    if job is None:
        return deltas
    scopes = sorted({(old or job).tenant, job.tenant, ALL_TENANTS})
    for scope in scopes:
        _gauge(deltas, scope, old, new)
        _terminal(deltas, scope, change.at, old, new)
        _groups(deltas, scope, change.at, old, new)
    return deltas


def _in_scope(scope: str, job: JobFacts | None) -> JobFacts | None:
    return job if job is not None and scope in (job.tenant, ALL_TENANTS) else None


def _gauge(deltas: Deltas, scope: str, old: JobFacts | None, new: JobFacts | None) -> None:
    before = _gauge_counter(_in_scope(scope, old))
    after = _gauge_counter(_in_scope(scope, new))
    if before == after:
        return
    if before is not None:
        deltas.count(Gauge(scope), before, -1)
    if after is not None:
        deltas.count(Gauge(scope), after, +1)


def _gauge_counter(job: JobFacts | None) -> str | None:
    if job is None or job.status not in ACTIVE_STATUSES:
        return None
    return status_counter(job.job_type, job.lane, job.status)


def _terminal(
    deltas: Deltas, scope: str, at: datetime, old: JobFacts | None, new: JobFacts | None
) -> None:
    job = _in_scope(scope, new)
    if job is None or not job.status.is_terminal:
        return
    if old is not None and old.status is job.status:
        return  # not entering it: a soft delete, or another write to a finished job
    ended = job.completed_at or at
    counters = [status_counter(job.job_type, job.lane, job.status)]
    latency = (ended - job.created_at).total_seconds()
    if latency >= 0:
        bucket = latency_bucket(latency)
        counters += [latency_counter(bucket), latency_counter(bucket, job.job_type)]
    if job.verdict is not None and job.status is JobStatus.COMPLETED:
        counters.append(verdict_counter(job.verdict))
    buckets = (MinuteBucket(scope, on_the_minute(ended)), HourBucket(scope, on_the_hour(ended)))
    for aggregate in buckets:
        for name in counters:
            deltas.count(aggregate, name)


def _groups(
    deltas: Deltas, scope: str, at: datetime, old: JobFacts | None, new: JobFacts | None
) -> None:
    before, after = _in_scope(scope, old), _in_scope(scope, new)
    left = group_of(before.job_type, before.error_message) if before and before.is_failed else None
    joined = group_of(after.job_type, after.error_message) if after and after.is_failed else None
    if left == joined:
        return
    if left is not None:
        delta = deltas.setdefault(GroupOf(scope, left.id), Delta())
        delta.add(Delta(Counter({"count": -1}), left.job_type, left.fingerprint))
    if joined is not None and after is not None:
        seen = after.completed_at or at
        sample = FailureSample(
            job_id=after.id,
            tenant=after.tenant,
            job_type=after.job_type,
            fingerprint=joined.fingerprint,
            error_message=(after.error_message or "")[:SAMPLE_MESSAGE_CHARS],
        )
        delta = deltas.setdefault(GroupOf(scope, joined.id), Delta())
        delta.add(
            Delta(
                Counter({"count": 1, "total": 1}),
                joined.job_type,
                joined.fingerprint,
                first_seen=seen,
                last_seen=seen,
                sample=sample,
            )
        )


# --- what the console reads ---------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRow:
    job_type: JobType
    lane: Lane
    pending: int
    scheduled: int
    running: int
    completed_last_hour: int
    failed_last_hour: int
    failed_last_day: int


@dataclass(frozen=True)
class MinutePoint:
    minute: datetime
    completed: int
    failed: int
    cancelled: int
    latency: Percentiles | None


@dataclass(frozen=True)
class Overview:
    scope: str
    generated_at: datetime
    queues: list[QueueRow]
    series: list[MinutePoint]  # the last 60 minutes, oldest first, the current one last
    latency: Percentiles | None  # over those 60 minutes
    latency_by_type: dict[JobType, Percentiles | None]  # likewise, per job type
    verdicts_last_hour: dict[str, int]
    verdicts_last_day: dict[str, int]  # the current hour and the 23 before it


@dataclass(frozen=True)
class FailureGroupSummary:
    id: str
    job_type: JobType
    fingerprint: str
    count: int
    total: int
    first_seen: datetime | None
    last_seen: datetime | None
    sample: FailureSample | None


SERIES_MINUTES = 60
DAY_HOURS = 24


def series_minutes(now: datetime) -> list[datetime]:
    """The minutes of the overview's series: the current one and the 59 before, oldest first."""
    last = on_the_minute(now)
    return [last - timedelta(minutes=n) for n in range(SERIES_MINUTES - 1, -1, -1)]


def day_hours(now: datetime) -> list[datetime]:
    """The hours of "the last day": the current one and the 23 before, oldest first."""
    last = on_the_hour(now)
    return [last - timedelta(hours=n) for n in range(DAY_HOURS - 1, -1, -1)]


def compose_overview(
    scope: str,
    now: datetime,
    gauge: Mapping[str, int],
    minutes: Mapping[datetime, Mapping[str, int]],
    hours: Mapping[datetime, Mapping[str, int]],
) -> Overview:
    """The overview from the stored aggregates: the gauge, the minute buckets (by minute; those
    outside the last 60 minutes ignored) and the hour buckets (likewise, the last 24 hours). A
    count read below 0 (a job that began before the aggregates did) reads as 0."""
    window = [minutes.get(m, {}) for m in series_minutes(now)]
    day = [hours.get(h, {}) for h in day_hours(now)]
    last_hour = _summed(window)
    last_day = _summed(day)
    rows = [
        QueueRow(
            job_type=job_type,
            lane=lane,
            pending=_at_least_0(gauge.get(status_counter(job_type, lane, JobStatus.PENDING))),
            scheduled=_at_least_0(gauge.get(status_counter(job_type, lane, JobStatus.SCHEDULED))),
            running=_at_least_0(gauge.get(status_counter(job_type, lane, JobStatus.RUNNING))),
            completed_last_hour=_at_least_0(
                last_hour[status_counter(job_type, lane, JobStatus.COMPLETED)]
            ),
            failed_last_hour=_at_least_0(
                last_hour[status_counter(job_type, lane, JobStatus.FAILED)]
            ),
            failed_last_day=_at_least_0(last_day[status_counter(job_type, lane, JobStatus.FAILED)]),
        )
        for job_type in JobType
        for lane in Lane
    ]
    series = [
        MinutePoint(
            minute=minute,
            completed=_status_total(counters, JobStatus.COMPLETED),
            failed=_status_total(counters, JobStatus.FAILED),
            cancelled=_status_total(counters, JobStatus.CANCELLED),
            latency=percentiles(histogram_of(counters)),
        )
        for minute, counters in zip(series_minutes(now), window, strict=True)
    ]
    return Overview(
        scope=scope,
        generated_at=now,
        queues=rows,
        series=series,
        latency=percentiles(histogram_of(last_hour)),
        latency_by_type={t: percentiles(histogram_of(last_hour, t)) for t in JobType},
        verdicts_last_hour={v: _at_least_0(last_hour[verdict_counter(v)]) for v in VERDICTS},
        verdicts_last_day={v: _at_least_0(last_day[verdict_counter(v)]) for v in VERDICTS},
    )


def _summed(buckets: Iterable[Mapping[str, int]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for counters in buckets:
        for name, count in counters.items():
            total[name] += count
    return total


def _status_total(counters: Mapping[str, int], status: JobStatus) -> int:
    return sum(
        _at_least_0(counters.get(status_counter(t, lane, status))) for t in JobType for lane in Lane
    )


def _at_least_0(count: int | None) -> int:
    return max(count or 0, 0)
