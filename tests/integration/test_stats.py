"""Specification of the console's aggregates on DynamoDB (data/stats_repository.py and
functions/stats/app.py), on OpsTable and JobsTable as template.yaml defines them: real jobs moved
through the real JobRepository, their stream records fed to the stats handler, and the overview
and failure groups read back equal the truth, however often a batch is delivered; and reading
them costs the same few requests whatever the number of jobs."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from mypy_boto3_dynamodb import DynamoDBClient

from filejobs import runtime
from filejobs.data import stats_repository
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.stats_repository import StatsRepository, change_of_record
from filejobs.data.stream import job_from_image
from filejobs.domain import transitions
from filejobs.domain.failures import group_of
from filejobs.domain.job import AttemptOutcome, JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import Lane
from filejobs.domain.stats import ALL_TENANTS, JobFacts, Overview, StatsChange
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs_dev.infra.template import create_tables
from functions.stats import app as stats
from tests.aws_requests import counting_requests
from tests.factories import ingest_plan
from tests.streams import StreamTap

LEASE, KEEP = timedelta(minutes=5), timedelta(days=1)
SHARD = "shardId-00000001-stats"
BROKEN = "cannot identify image file '/tmp/{n}/photo.png'"


@dataclass
class _Context:
    function_name: str = "stats"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:stats"
    aws_request_id: str = "5e0c7b52-0cf4-4d71-9d8e-7b1c4f0e2a11"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


CONTEXT = cast(LambdaContext, _Context())


@dataclass
class Bench:
    client: DynamoDBClient
    ops: str
    jobs_table: str
    jobs: JobRepository
    files: FileRepository
    tap: StreamTap
    # Every overview of a test is read at one moment, the first read's (a minute may turn).
    moment: datetime | None = None

    @property
    def repository(self) -> StatsRepository:
        return StatsRepository(self.client, self.ops)

    def feed(self, records: list[dict[str, Any]], shard: str = SHARD) -> dict[str, Any]:
        """The records to the stats handler, as Lambda hands over a tumbling window's batch."""
        event = {
            "Records": records,
            "shardId": shard,
            "eventSourceARN": self.tap.stream_arn,
            "window": {"start": "2026-12-04T12:00:00Z", "end": "2026-12-04T12:15:00Z"},
            "state": {},
            "isFinalInvokeForWindow": False,
            "isWindowTerminatedEarly": False,
        }
        answer: dict[str, Any] = stats.handler(event, CONTEXT)
        return answer

    def overview(self, scope: str = ALL_TENANTS) -> Overview:
        self.moment = self.moment or utcnow()
        return self.repository.overview(scope, self.moment)


@pytest.fixture
def bench(tables: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    client = boto3.client("dynamodb")
    ops = f"ops-{uuid.uuid4().hex[:8]}"
    create_tables(client, {"OpsTable": ops})
    monkeypatch.setenv("OPS_TABLE_NAME", ops)
    monkeypatch.setenv("JOBS_TABLE_NAME", tables["JobsTable"])
    monkeypatch.setenv("FILES_TABLE_NAME", tables["FilesTable"])
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "filejobs-test")
    runtime.reset()
    tap = StreamTap.of_table(client, tables["JobsTable"])
    yield Bench(client, ops, tables["JobsTable"], JobRepository(), FileRepository(), tap)
    runtime.reset()


def ingest(bench: Bench, name: str, tenant: str = "acme") -> list[ProcessingJob]:
    plan = ingest_plan(utcnow(), "image/png", name=name, tenant=tenant)
    bench.files.record_ingest(plan)
    return list(plan.jobs)


def claim(bench: Bench, job: ProcessingJob) -> ProcessingJob:
    result = bench.jobs.apply(
        job.id, job.job_type, transitions.claim(now=utcnow(), lease=LEASE, worker="w")
    )
    assert isinstance(result, Applied)
    return result.job


def complete(bench: Bench, job: ProcessingJob, result: dict[str, Any] | None = None) -> None:
    running = claim(bench, job)
    done = transitions.complete(running, result=result or {}, now=utcnow(), retention=KEEP)
    assert isinstance(bench.jobs.apply(job.id, job.job_type, done), Applied)


def fail(bench: Bench, job: ProcessingJob, error: str, retry: bool = False) -> ProcessingJob:
    running = claim(bench, job)
    retry_at = utcnow() + timedelta(minutes=1) if retry else None
    failing = transitions.fail(
        running, error=error, now=utcnow(), retry_at=retry_at, retention=KEEP
    )
    result = bench.jobs.apply(job.id, job.job_type, failing)
    assert isinstance(result, Applied)
    return result.job


def act(bench: Bench, job: ProcessingJob, transition: transitions.Transition) -> None:
    assert isinstance(bench.jobs.apply(job.id, job.job_type, transition), Applied)


def story(bench: Bench) -> None:
    """Three files of acme and one of globex (3 jobs each: virus scan, dedup, thumbnail), moved
    through every kind of transition."""
    a, b, c = (ingest(bench, f"{n}.png") for n in "abc")
    g = ingest(bench, "g.png", tenant="globex")
    complete(bench, a[0], {"verdict": "CLEAN"})  # a virus scan, clean
    complete(bench, g[0], {"verdict": "INFECTED"})
    complete(bench, a[1])
    fail(bench, a[2], BROKEN.format(n=1))  # failed for good: group of 1
    fail(bench, b[2], BROKEN.format(n=2))  # the same group: 2
    failed = fail(bench, c[2], "boom 17")  # another group, then retried: back to pending
    act(bench, failed, transitions.retry(now=utcnow(), by="op", dispatch_grace=LEASE))
    fail(bench, g[2], BROKEN.format(n=3))  # globex: then soft-deleted, out of the groups
    act(bench, g[2], transitions.delete(now=utcnow(), by="op"))
    fail(bench, b[1], "timeout", retry=True)  # scheduled for a retry
    claim(bench, b[0])  # running
    cancel = transitions.cancel(now=utcnow(), by="op", reason="r", retention=KEEP)
    act(bench, c[0], cancel)  # cancelled while pending


@dataclass(frozen=True)
class Truth:
    active: Counter[tuple[JobType, Lane, JobStatus]]
    finished: Counter[tuple[JobType, Lane, JobStatus]]  # each time a job became terminal
    groups: Counter[str]  # failed jobs now (not deleted) by group id
    verdicts: Counter[str]


def truth(bench: Bench, scope: str = ALL_TENANTS) -> Truth:
    """What JobsTable says now, read item by item (the story's jobs all ended within the hour;
    a job failed for good and then retried keeps that attempt in its history)."""
    items = bench.client.scan(TableName=bench.jobs_table)["Items"]
    jobs = [job_from_image(item) for item in items]
    jobs = [j for j in jobs if scope in (j.tenant, ALL_TENANTS)]
    facts = [JobFacts.of(j) for j in jobs]
    finished: Counter[tuple[JobType, Lane, JobStatus]] = Counter()
    for job, fact in zip(jobs, facts, strict=True):
        if fact.status.is_terminal:
            finished[fact.job_type, fact.lane, fact.status] += 1
        if fact.status is not JobStatus.FAILED:
            failures = [a for a in job.attempts.values() if a.outcome is AttemptOutcome.FAILED]
            finished[fact.job_type, fact.lane, JobStatus.FAILED] += len(failures)
    return Truth(
        active=Counter((f.job_type, f.lane, f.status) for f in facts if not f.status.is_terminal),
        finished=finished,
        groups=Counter(group_of(f.job_type, f.error_message).id for f in facts if f.is_failed),
        verdicts=Counter(f.verdict for f in facts if f.verdict and f.status.is_terminal),
    )


def seen(overview: Overview) -> Truth:
    """The same, as the overview tells it."""
    active: Counter[tuple[JobType, Lane, JobStatus]] = Counter()
    finished: Counter[tuple[JobType, Lane, JobStatus]] = Counter()
    for row in overview.queues:
        active[row.job_type, row.lane, JobStatus.PENDING] = row.pending
        active[row.job_type, row.lane, JobStatus.SCHEDULED] = row.scheduled
        active[row.job_type, row.lane, JobStatus.RUNNING] = row.running
        finished[row.job_type, row.lane, JobStatus.COMPLETED] = row.completed_last_hour
        finished[row.job_type, row.lane, JobStatus.FAILED] = row.failed_last_hour
    # cancellations are in the series only
    cancelled = sum(p.cancelled for p in overview.series)
    finished[JobType.VIRUS_SCAN, Lane.NORMAL, JobStatus.CANCELLED] = cancelled
    return Truth(
        active=+active,
        finished=+finished,
        groups=Counter(),
        verdicts=+Counter(overview.verdicts_last_hour),
    )


def groups_seen(bench: Bench, scope: str = ALL_TENANTS) -> Counter[str]:
    return Counter({g.id: g.count for g in bench.repository.failure_groups(scope)})


def assert_true(bench: Bench, scope: str = ALL_TENANTS) -> None:
    expected, overview = truth(bench, scope), bench.overview(scope)
    told = seen(overview)
    assert told.active == +expected.active
    assert told.finished == +expected.finished
    assert told.verdicts == +expected.verdicts
    assert groups_seen(bench, scope) == expected.groups
    # the series adds up to the hour, and every finished job had a latency
    assert sum(p.completed + p.failed + p.cancelled for p in overview.series) == sum(
        expected.finished.values()
    )
    assert overview.latency is not None


# --- the overview and the failure groups equal the truth ---------------------------------------


def test_the_overview_and_failure_groups_equal_the_tables_truth_in_every_scope(
    bench: Bench,
) -> None:
    # given jobs moved through every kind of transition, their stream fed to the handler
    story(bench)
    records = bench.tap.read()
    assert bench.feed(records) == {"state": {}}
    # then every scope's overview and failure groups tell what the table holds
    for scope in (ALL_TENANTS, "acme", "globex"):
        assert_true(bench, scope)
    # concretely: the story's two broken images in one group, the retried and the deleted
    # failures in none
    [broken] = bench.repository.failure_groups(ALL_TENANTS)
    assert (broken.count, broken.total) == (2, 3)
    assert broken.fingerprint == "cannot identify image file <quoted>"
    assert broken.sample is not None and broken.sample.tenant == "globex"
    assert bench.repository.failure_group(ALL_TENANTS, broken.id) == broken
    assert bench.repository.failure_groups("globex") == []
    assert bench.overview("globex").verdicts_last_hour["infected"] == 1


def test_a_batch_delivered_twice_is_counted_once(bench: Bench) -> None:
    story(bench)
    records = bench.tap.read()
    bench.feed(records)
    before = bench.overview(), bench.repository.failure_groups(ALL_TENANTS)
    # when Lambda delivers the same batch again
    bench.feed(records)
    # then nothing changed
    assert (bench.overview(), bench.repository.failure_groups(ALL_TENANTS)) == before
    assert bench.repository.apply(SHARD, [change_of_record(r) for r in records]) == 0
    assert_true(bench)


def test_overlapping_batches_count_each_record_once(bench: Bench) -> None:
    story(bench)
    records = bench.tap.read()
    half, more = len(records) // 2, 3 * len(records) // 4
    # when batches overlap (a retry from an earlier point, then the rest with the tail again)
    bench.feed(records[:more])
    bench.feed(records[half:])
    bench.feed(records[:half])
    # then each record counted once
    assert_true(bench)


def test_an_invocation_that_read_the_cursor_before_another_applied_the_batch_adds_nothing(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    story(bench)
    changes = [change_of_record(r) for r in bench.tap.read()]
    late = bench.repository
    # given one invocation that read the cursor (none yet)...
    real_cursor = StatsRepository.cursor
    reads: list[str | None] = []

    def stale_then_real(self: StatsRepository, shard_id: str) -> str | None:
        reads.append(None if not reads else real_cursor(self, shard_id))
        return reads[-1]

    # ...while another applied the batch
    assert bench.repository.apply(SHARD, changes) == len(changes)
    monkeypatch.setattr(StatsRepository, "cursor", stale_then_real)
    # when the first writes: its transaction is refused on the cursor, which it reads again
    assert late.apply(SHARD, changes) == 0
    assert reads == [None, changes[-1].sequence]
    assert_true(bench)


def test_more_aggregates_than_a_transaction_holds_are_written_in_order_in_several(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a transaction of at most 12 items (11 aggregates and the cursor; a record makes 10
    # at most)
    monkeypatch.setattr(stats_repository, "TRANSACTION_ITEMS", 12)
    story(bench)
    records = bench.tap.read()
    # when the batch is applied
    with counting_requests(runtime.dynamodb()) as counter:
        bench.feed(records)
    # then in several transactions, the cursor at the last record, every count right
    assert counter.calls["dynamodb:TransactWriteItems"] > 2
    assert bench.repository.cursor(SHARD) == records[-1]["dynamodb"]["SequenceNumber"]
    assert_true(bench)
    bench.feed(records)
    assert_true(bench)


def test_a_shards_next_batch_is_written_without_reading_its_cursor_again(bench: Bench) -> None:
    # given a shard whose batches come one after another to one function instance
    story(bench)
    records = bench.tap.read()
    half = len(records) // 2
    bench.feed(records[:half])
    # when its next batch comes
    with counting_requests(runtime.dynamodb()) as counter:
        bench.feed(records[half:])
    # then it is written against the cursor the instance left: no read, one write
    assert counter.calls["dynamodb:GetItem"] == 0
    assert counter.calls["dynamodb:TransactWriteItems"] == 1
    assert_true(bench)


def test_a_remembered_cursor_another_instance_moved_is_read_again_and_counts_stay_exact(
    bench: Bench,
) -> None:
    story(bench)
    records = bench.tap.read()
    third = len(records) // 3
    # given this instance applied the first third of a shard's records (and remembers its cursor)
    bench.feed(records[:third])
    # and another instance then applied up to two thirds
    other = StatsRepository(bench.client, bench.ops)
    assert other.apply(SHARD, [change_of_record(r) for r in records[third : 2 * third]])
    # when this instance gets a batch that overlaps what the other applied
    with counting_requests(runtime.dynamodb()) as counter:
        bench.feed(records[third:])
    # then its write on the stale cursor was refused, the cursor read, and each record counted once
    assert counter.calls["dynamodb:GetItem"] == 1
    assert_true(bench)
    assert bench.repository.cursor(SHARD) == records[-1]["dynamodb"]["SequenceNumber"]


def test_shards_keep_cursors_of_their_own(bench: Bench) -> None:
    # given the story's records split over two shards (each in order), the second with lower
    # sequence numbers than the first's last
    story(bench)
    records = bench.tap.read()
    first = records[::2]
    second = records[1::2]
    bench.feed(first, shard="shardId-A")
    bench.feed(second, shard="shardId-B")
    # then no record of either was skipped
    assert_true(bench)


def test_an_unreadable_record_is_skipped_and_the_others_counted(bench: Bench) -> None:
    story(bench)
    records = bench.tap.read()
    # given the insert of a job still pending (the only record of it) garbled, and a record
    # with no change at all
    ids = Counter(r["dynamodb"]["Keys"]["id"]["S"] for r in records)
    index = next(n for n, r in enumerate(records) if ids[r["dynamodb"]["Keys"]["id"]["S"]] == 1)
    record = records[index]
    records[index] = {**record, "dynamodb": {**record["dynamodb"], "NewImage": {"id": {"N": "x"}}}}
    # when the batch is fed, then it succeeds
    assert bench.feed([{"eventName": "MODIFY"}, *records]) == {"state": {}}
    # and only that job is missing from the counts
    told, expected = seen(bench.overview()).active, truth(bench).active
    missing = (JobType.DEDUPLICATION_CHECK, Lane.NORMAL, JobStatus.PENDING)
    assert expected - told == Counter({missing: 1})
    assert told - expected == Counter()


def test_a_write_that_fails_fails_the_batch_for_lambda_to_retry(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    story(bench)
    records = bench.tap.read()
    monkeypatch.setenv("OPS_TABLE_NAME", "no-such-table")
    runtime.reset()
    with pytest.raises(ClientError, match="ResourceNotFound"):
        bench.feed(records)


# --- reading costs the same whatever the number of jobs ------------------------------------------


def synthetic_story(n: int, now: datetime) -> list[StatsChange]:
    """N jobs of 3 tenants inserted, run, and completed or failed (one in 5, in 4 groups)."""
    changes: list[StatsChange] = []
    sequence = 10**20
    types = list(JobType)
    for k in range(n):
        created = now - timedelta(minutes=k % 50, seconds=k % 7)
        pending = JobFacts(
            id=str(uuid.UUID(int=k)),
            tenant=f"tenant-{k % 3}",
            job_type=types[k % len(types)],
            lane=Lane.HIGH if k % 4 == 0 else Lane.NORMAL,
            status=JobStatus.PENDING,
            created_at=created,
        )
        running = replace(pending, status=JobStatus.RUNNING)
        ended = created + timedelta(seconds=1 + k % 30)
        if k % 5 == 0:
            end = replace(
                running,
                status=JobStatus.FAILED,
                completed_at=ended,
                error_message=f"error {k % 4} in '/tmp/{k}/x'",
            )
        else:
            end = replace(running, status=JobStatus.COMPLETED, completed_at=ended)
        for old, new in ((None, pending), (pending, running), (running, end)):
            sequence += 1
            changes.append(StatsChange(str(sequence), ended, old, new))
    return changes


def reads_of(client: DynamoDBClient, jobs: int, now: datetime) -> tuple[int, int, Overview]:
    """The requests of an overview, and of the failure groups and one group, with the
    aggregates of `jobs` jobs in an OpsTable of their own."""
    table = f"ops-{jobs}-{uuid.uuid4().hex[:8]}"
    create_tables(client, {"OpsTable": table})
    repository = StatsRepository(client, table)
    repository.apply("shard", synthetic_story(jobs, now))
    with counting_requests(client) as counter:
        overview = repository.overview(ALL_TENANTS, now)
    overview_requests = sum(counter.calls.values())
    with counting_requests(client) as counter:
        groups = repository.failure_groups(ALL_TENANTS)
        repository.failure_group(ALL_TENANTS, groups[0].id)
    return overview_requests, sum(counter.calls.values()), overview


@pytest.mark.parametrize(
    "now",
    [
        datetime(2026, 12, 4, 12, 30, tzinfo=UTC),  # the hour and the day within one partition
        datetime(2026, 12, 1, 0, 30, tzinfo=UTC),  # both cross a midnight, the day a month's end
    ],
)
def test_reading_the_overview_and_the_groups_costs_the_same_for_50_and_500_jobs(
    bench: Bench, now: datetime
) -> None:
    small_overview, small_groups, small = reads_of(bench.client, 50, now)
    large_overview, large_groups, large = reads_of(bench.client, 500, now)
    # the counts grew tenfold...
    done = sum(r.completed_last_hour + r.failed_last_hour for r in small.queues)
    assert (done, sum(r.completed_last_hour + r.failed_last_hour for r in large.queues)) == (
        50,
        500,
    )
    # ...the requests did not: a GetItem and one Query per partition, then one Query and a GetItem
    crossing = now.hour == 0
    assert small_overview == large_overview == (5 if crossing else 3)
    assert small_groups == large_groups == 2
