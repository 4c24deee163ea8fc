"""The console's aggregates (domain/stats.py) in OpsTable, kept exactly once per stream record.

Written with the plain boto3 client, not PynamoDB: an aggregate's counters are attributes named
by the data (`thumbnail_generation#normal#completed`, `lat#42`), each added to with `ADD`, and
PynamoDB can only express updates of the attributes a model declares.

Key layout (`pk` / `sk`: attributes; TTL in `expires_at`; every time UTC):

- gauge: `gauge#{scope}` / `now`: `{job_type}#{lane}#{status}` of the active statuses. No TTL.
- minute bucket: `minute#{scope}#{YYYY-MM-DD}` / `HH:MM`: `{job_type}#{lane}#{status}` of the
  terminal statuses, the latency histogram `lat#{bucket}` and `lat#{job_type}#{bucket}`, the
  verdicts `verdict#{clean|infected|unscannable}`. Kept 8 days after the minute.
- hour bucket: `hour#{scope}#{YYYY-MM}` / `DDTHH`: as a minute bucket. Kept 400 days.
- failure group: `failures#{scope}` / `{group id}` (`{job_type}.{digest}`, domain/failures.py):
  `count` (failed now), `total` (ever), `job_type`, `fingerprint`, `first_seen`, `last_seen`
  (ISO 8601), `sample` (a map: job_id, tenant, job_type, fingerprint, error_message). No TTL.
- stream cursor: `cursor#{shard}` / `-`: `sequence`, the last record of the shard applied. Kept
  2 days after its last write (a stream keeps its records 24 hours).

`scope` is a tenant or `*` (every tenant). A day's minutes are one partition and a month's hours
another, so the last 60 minutes are one or two Queries (midnight) and the last 24 hours one or two
(a month's end): `overview` makes at most 5 requests, whatever the number of jobs.

Exactly once: `apply` reads the shard's cursor (consistently: once per shard for the life of the
repository, which then remembers what it wrote, see below), skips the records at or below it,
merges the deltas of the others by aggregate, and writes them in one TransactWriteItems with the
cursor, on the condition that the cursor is still what was read. A redelivered batch finds its
records at or below the cursor; a batch another invocation applied meanwhile cancels the
transaction on that condition, and is read again and skipped. More than 99 aggregates (a
transaction holds 100 items, the cursor one of them) are written as consecutive transactions of
consecutive records, each advancing the cursor to its last record. A batch whose records change
no aggregate (a heartbeat) advances the cursor alone, with one conditional UpdateItem.

The cursor remembered: Lambda hands a shard's batches over one at a time, in order, so the
instance that applied a shard's last batch usually gets its next one. The repository (kept for the
container's life: runtime.stats_table) remembers the cursor each of its writes left and writes the
next batch against it without reading it: one TransactWriteItems per batch instead of a GetItem
and a TransactWriteItems. The condition keeps it exact: a remembered cursor that is no longer the
stored one (another instance applied a batch of the shard since, or the cursor expired) cancels
the transaction, and the cursor is read again, as after any refused write. Only what this
instance itself wrote is remembered, so a record at or below it was applied: skipping it is right.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from filejobs.data.stream import job_from_image
from filejobs.domain.job import JobType
from filejobs.domain.stats import (
    Aggregate,
    Delta,
    Deltas,
    FailureGroupSummary,
    FailureSample,
    Gauge,
    GroupOf,
    HourBucket,
    JobFacts,
    MinuteBucket,
    Overview,
    StatsChange,
    compose_overview,
    day_hours,
    deltas_of,
    sequence_key,
    series_minutes,
)
from filejobs.domain.time import utcnow

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MINUTES_KEPT = timedelta(days=8)
HOURS_KEPT = timedelta(days=400)
CURSOR_KEPT = timedelta(days=2)  # a stream keeps its records 24 hours
# A transaction's items: the aggregates and the cursor.
TRANSACTION_ITEMS = 100
# Failure groups read per call at most (pages of 1 MB each).
GROUP_PAGES = 10
# Shards whose cursors an instance remembers at most (a stream's shards roll over every few hours:
# the oldest is forgotten first, and read again if it ever comes back).
CURSORS_REMEMBERED = 256
# Transactions cancelled by a concurrent one on the same item (another shard's batch on the `*`
# gauge): tried again this many times, after a short random wait, then the batch fails and
# Lambda retries it.
CONFLICT_ATTEMPTS = 5
_CONFLICT_WAIT_SECONDS = 0.05
_REFUSED = "ConditionalCheckFailedException"
_CANCELLED = "TransactionCanceledException"


def gauge_key(scope: str) -> tuple[str, str]:
    return f"gauge#{scope}", "now"


def minute_key(scope: str, minute: datetime) -> tuple[str, str]:
    at = minute.astimezone(UTC)
    return f"minute#{scope}#{at:%Y-%m-%d}", f"{at:%H:%M}"


def hour_key(scope: str, hour: datetime) -> tuple[str, str]:
    at = hour.astimezone(UTC)
    return f"hour#{scope}#{at:%Y-%m}", f"{at:%dT%H}"


def group_key(scope: str, group_id: str) -> tuple[str, str]:
    return f"failures#{scope}", group_id


def cursor_key(shard_id: str) -> tuple[str, str]:
    return f"cursor#{shard_id}", "-"


def key_of(aggregate: Aggregate) -> tuple[str, str]:
    match aggregate:
        case Gauge(scope):
            return gauge_key(scope)
        case MinuteBucket(scope, minute):
            return minute_key(scope, minute)
        case HourBucket(scope, hour):
            return hour_key(scope, hour)
        case GroupOf(scope, group_id):
            return group_key(scope, group_id)


def change_of_record(record: Mapping[str, Any]) -> StatsChange:
    """A stream record of JobsTable as Lambda delivers it (typed attribute values) -> the change
    the aggregates read. Raises (KeyError, ValueError...) on a record it cannot read."""
    images: Mapping[str, Any] = record["dynamodb"]
    sequence = str(images["SequenceNumber"])
    if not sequence.isdigit():
        raise ValueError(f"not a sequence number: {sequence!r}")
    at = _written_at(images.get("ApproximateCreationDateTime"))
    old, new = images.get("OldImage"), images.get("NewImage")
    return StatsChange(
        sequence=sequence,
        at=at,
        old=None if old is None else JobFacts.of(job_from_image(dict(old))),
        new=None if new is None else JobFacts.of(job_from_image(dict(new))),
    )


def _written_at(value: Any) -> datetime:
    """A record's ApproximateCreationDateTime: epoch seconds as Lambda sends it (a number), or
    an ISO 8601 string as some readers of the stream write it; now when it is absent."""
    if value is None:
        return utcnow()
    if isinstance(value, int | float) or (isinstance(value, str) and _is_number(value)):
        return datetime.fromtimestamp(float(value), UTC)
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class StatsRepository:
    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client, self._table = client, table
        self._clock, self._sleep = clock, sleep
        # Each shard's cursor as this repository last wrote or read it (module docstring).
        self._cursors: dict[str, str] = {}

    # --- writing -------------------------------------------------------------------------------

    def apply(self, shard_id: str, records: Sequence[StatsChange]) -> int:
        """Adds the deltas of the records after the shard's cursor, once each: how many records
        it applied (0 when every one was applied before)."""
        ordered = sorted(records, key=lambda r: sequence_key(r.sequence))
        cursor = self._cursors.get(shard_id) or self.cursor(shard_id)
        applied, conflicts = 0, 0
        while pending := [r for r in ordered if _after(r.sequence, cursor)]:
            chunk, deltas = _first_chunk(pending)
            outcome = self._write(shard_id, cursor, chunk[-1].sequence, deltas)
            if outcome is _Outcome.WRITTEN:
                cursor = chunk[-1].sequence
                self._remember(shard_id, cursor)
                applied += len(chunk)
                continue
            if outcome is _Outcome.CONFLICT:
                conflicts += 1
                if conflicts >= CONFLICT_ATTEMPTS:
                    raise ConcurrentWritesError(f"{conflicts} transactions cancelled by others")
                self._sleep(random.uniform(0, _CONFLICT_WAIT_SECONDS * 2**conflicts))  # noqa: S311
            # The cursor moved (another invocation applied these records), or a retry: read it.
            cursor = self.cursor(shard_id)
        return applied

    def cursor(self, shard_id: str) -> str | None:
        """The sequence number of the shard's last applied record; None before its first."""
        pk, sk = cursor_key(shard_id)
        item = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": pk}, "sk": {"S": sk}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            self._cursors.pop(shard_id, None)
            return None
        sequence: str = item["sequence"]["S"]
        self._remember(shard_id, sequence)
        return sequence

    def _remember(self, shard_id: str, sequence: str) -> None:
        self._cursors.pop(shard_id, None)  # re-inserted last: the most recent is kept longest
        self._cursors[shard_id] = sequence
        if len(self._cursors) > CURSORS_REMEMBERED:
            del self._cursors[next(iter(self._cursors))]

    def _write(self, shard_id: str, read: str | None, last: str, deltas: Deltas) -> _Outcome:
        now = self._clock()
        cursor = self._cursor_update(shard_id, read, last, now)
        try:
            if not deltas:
                self._client.update_item(**cursor)
            else:
                items = [{"Update": cursor}]
                items += [{"Update": self._update(a, d)} for a, d in deltas.items()]
                self._client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code == _REFUSED:
                return _Outcome.MOVED
            if code != _CANCELLED:
                raise
            reasons = [
                str(r.get("Code") or "None") for r in error.response.get("CancellationReasons", [])
            ]
            if reasons and reasons[0] == "ConditionalCheckFailed":
                return _Outcome.MOVED
            if any(r in {"TransactionConflict", "ThrottlingError"} for r in reasons):
                return _Outcome.CONFLICT
            raise
        return _Outcome.WRITTEN

    def _cursor_update(
        self, shard_id: str, read: str | None, last: str, now: datetime
    ) -> dict[str, Any]:
        pk, sk = cursor_key(shard_id)
        values: dict[str, Any] = {
            ":sequence": {"S": last},
            ":expires": {"N": str(int((now + CURSOR_KEPT).timestamp()))},
        }
        if read is None:
            condition = "attribute_not_exists(pk)"
        else:
            condition = "#sequence = :read"
            values[":read"] = {"S": read}
        return {
            "TableName": self._table,
            "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
            "UpdateExpression": "SET #sequence = :sequence, expires_at = :expires",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#sequence": "sequence"},
            "ExpressionAttributeValues": values,
        }

    def _update(self, aggregate: Aggregate, delta: Delta) -> dict[str, Any]:
        pk, sk = key_of(aggregate)
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        adds, sets = [], []
        for n, (counter, amount) in enumerate(sorted(delta.counts.items())):
            names[f"#c{n}"] = counter
            values[f":c{n}"] = {"N": str(amount)}
            adds.append(f"#c{n} :c{n}")
        expires = _expiry(aggregate)
        if expires is not None:
            sets.append("expires_at = :expires")
            values[":expires"] = {"N": str(int(expires.timestamp()))}
        if isinstance(aggregate, GroupOf):
            _group_sets(delta, sets, names, values)
        expression = f"ADD {', '.join(adds)}" if adds else ""
        if sets:
            expression += f" SET {', '.join(sets)}"
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
            "UpdateExpression": expression.strip(),
            "ExpressionAttributeValues": values,
        }
        if names:
            update["ExpressionAttributeNames"] = names
        return update

    # --- reading ------------------------------------------------------------------------------

    def overview(self, scope: str, now: datetime) -> Overview:
        """The overview of `scope` (a tenant or `*`) at `now`: one GetItem (the gauge) and one or
        two Queries each for the last 60 minutes and the last 24 hours."""
        pk, sk = gauge_key(scope)
        item = self._client.get_item(
            TableName=self._table, Key={"pk": {"S": pk}, "sk": {"S": sk}}
        ).get("Item", {})
        minutes = self._buckets(series_minutes(now), scope, minute_key)
        hours = self._buckets(day_hours(now), scope, hour_key)
        return compose_overview(scope, now, _counters(item), minutes, hours)

    def _buckets(
        self, moments: list[datetime], scope: str, key: Callable[[str, datetime], tuple[str, str]]
    ) -> dict[datetime, dict[str, int]]:
        """The buckets of `moments` (consecutive, oldest first), one Query per partition."""
        by_partition: dict[str, dict[str, datetime]] = {}
        for moment in moments:
            pk, sk = key(scope, moment)
            by_partition.setdefault(pk, {})[sk] = moment
        found: dict[datetime, dict[str, int]] = {}
        for pk, sorts in by_partition.items():
            for item in self._query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
                ExpressionAttributeValues={
                    ":pk": {"S": pk},
                    ":first": {"S": min(sorts)},
                    ":last": {"S": max(sorts)},
                },
            ):
                at = sorts.get(item["sk"]["S"])
                if at is not None:
                    found[at] = _counters(item)
        return found

    def failure_groups(
        self, scope: str, job_type: JobType | None = None, limit: int = 100
    ) -> list[FailureGroupSummary]:
        """The groups of `scope` with failed jobs now, largest first: one Query (its pages, at
        most GROUP_PAGES)."""
        condition = "pk = :pk"
        values: dict[str, Any] = {":pk": {"S": group_key(scope, "")[0]}, ":zero": {"N": "0"}}
        if job_type is not None:
            condition += " AND begins_with(sk, :type)"
            values[":type"] = {"S": f"{job_type.value}."}
        items = self._query(
            KeyConditionExpression=condition,
            FilterExpression="#count > :zero",
            ExpressionAttributeNames={"#count": "count"},
            ExpressionAttributeValues=values,
            pages=GROUP_PAGES,
        )
        groups = [g for item in items if (g := _group(item)) is not None]
        groups.sort(key=lambda g: (-g.count, g.id))
        return groups[:limit]

    def failure_group(self, scope: str, group_id: str) -> FailureGroupSummary | None:
        pk, sk = group_key(scope, group_id)
        item = self._client.get_item(
            TableName=self._table, Key={"pk": {"S": pk}, "sk": {"S": sk}}
        ).get("Item")
        return None if item is None else _group(item)

    def _query(self, *, pages: int | None = None, **parameters: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        read = 0
        while True:
            request = {"TableName": self._table, **parameters}
            if start:
                request["ExclusiveStartKey"] = start
            page = self._client.query(**request)
            items.extend(page.get("Items", []))
            read += 1
            start = page.get("LastEvaluatedKey")
            if not start or (pages is not None and read >= pages):
                return items


class ConcurrentWritesError(RuntimeError):
    """Transactions kept being cancelled by concurrent ones: the batch is retried by Lambda."""


class _Outcome(Enum):
    WRITTEN = "written"
    MOVED = "moved"  # the cursor is not what was read: another invocation applied records
    CONFLICT = "conflict"  # a concurrent transaction on one of the items, or throttling


def _after(sequence: str, cursor: str | None) -> bool:
    return cursor is None or sequence_key(sequence) > sequence_key(cursor)


def _first_chunk(pending: Sequence[StatsChange]) -> tuple[list[StatsChange], Deltas]:
    """The longest run of records from the first whose merged deltas fit a transaction beside
    the cursor (a record's own deltas always do: at most ten aggregates)."""
    chunk: list[StatsChange] = []
    merged = Deltas()
    for record in pending:
        deltas = deltas_of(record).without_empty()
        if chunk and len(set(merged) | set(deltas)) > TRANSACTION_ITEMS - 1:
            break
        merged.merge(deltas)
        chunk.append(record)
    return chunk, merged.without_empty()


def _expiry(aggregate: Aggregate) -> datetime | None:
    match aggregate:
        case MinuteBucket(_, minute):
            return minute + MINUTES_KEPT
        case HourBucket(_, hour):
            return hour + HOURS_KEPT
        case _:
            return None


def _group_sets(
    delta: Delta, sets: list[str], names: dict[str, str], values: dict[str, Any]
) -> None:
    if delta.job_type is not None:
        sets.append("job_type = :job_type")
        values[":job_type"] = {"S": delta.job_type.value}
    if delta.fingerprint is not None:
        sets.append("fingerprint = :fingerprint")
        values[":fingerprint"] = {"S": delta.fingerprint}
    if delta.first_seen is not None:
        sets.append("first_seen = if_not_exists(first_seen, :first_seen)")
        values[":first_seen"] = {"S": delta.first_seen.isoformat()}
    if delta.last_seen is not None:
        sets.append("last_seen = :last_seen")
        values[":last_seen"] = {"S": delta.last_seen.isoformat()}
    if delta.sample is not None:
        sample = delta.sample
        sets.append("#sample = :sample")
        names["#sample"] = "sample"
        values[":sample"] = {
            "M": {
                "job_id": {"S": sample.job_id},
                "tenant": {"S": sample.tenant},
                "job_type": {"S": sample.job_type.value},
                "fingerprint": {"S": sample.fingerprint},
                "error_message": {"S": sample.error_message},
            }
        }


def _counters(item: Mapping[str, Any]) -> dict[str, int]:
    """An aggregate's counters: its number attributes named `...#...`."""
    return {
        name: int(value["N"])
        for name, value in item.items()
        if "#" in name and isinstance(value, Mapping) and "N" in value
    }


def _group(item: Mapping[str, Any]) -> FailureGroupSummary | None:
    try:
        job_type = JobType(item["job_type"]["S"])
    except (KeyError, ValueError):
        return None  # only ever left (the job failed before the aggregates began)
    sample = item.get("sample", {}).get("M")
    return FailureGroupSummary(
        id=item["sk"]["S"],
        job_type=job_type,
        fingerprint=item.get("fingerprint", {}).get("S", ""),
        count=max(int(item.get("count", {}).get("N", "0")), 0),
        total=max(int(item.get("total", {}).get("N", "0")), 0),
        first_seen=_time(item.get("first_seen")),
        last_seen=_time(item.get("last_seen")),
        sample=None
        if not sample
        else FailureSample(
            job_id=sample["job_id"]["S"],
            tenant=sample["tenant"]["S"],
            job_type=JobType(sample["job_type"]["S"]),
            fingerprint=sample["fingerprint"]["S"],
            error_message=sample["error_message"]["S"],
        ),
    )


def _time(value: Mapping[str, Any] | None) -> datetime | None:
    return None if not value or "S" not in value else datetime.fromisoformat(value["S"])
