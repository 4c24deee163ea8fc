"""The console's aggregates: JobsTable's stream in, OpsTable's counters out, exactly once.

Subscribed to the jobs table's stream with no filter (a job entering a status, leaving one, or
removed all change an aggregate). Each batch's records become changes (domain/stats.py) applied
by `StatsRepository.apply` behind the cursor of the batch's shard (data/stats_repository.py):
a redelivered batch, or one another invocation applied first, adds nothing again.

The shard: Lambda hands a DynamoDB stream batch over without its shard id, except with a
tumbling window (`TumblingWindowInSeconds`), whose events carry `shardId`: the template sets one
for this alone (the window's `state` is unused, returned empty as Lambda requires). A stream has
several shards read at once (one per table partition, and each rolls over to a child every few
hours), and their sequence numbers interleave, so one cursor per stream would skip records; per
shard they only grow, and Lambda hands a shard's batches over one at a time, in order
(ParallelizationFactor 1, the default: it must stay so). An event without `shardId` (one made by
hand) falls back to a cursor per stream, with a warning.

A record it cannot read is logged, counted and skipped; it never fails the batch. A write that
fails raises: Lambda retries the batch (up to MaximumRetryAttempts, then the on-failure
destination), which the cursor makes safe.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.data.stats_repository import change_of_record
from filejobs.domain.stats import StatsChange
from filejobs.instrumentation import instruments

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured


def shard_of(event: DynamoDBStreamEvent) -> str:
    """The cursor's name for the batch's shard: its id, or (without one) its stream's ARN."""
    if event.shard_id:
        return str(event.shard_id)
    records: list[dict[str, Any]] = event.get("Records") or []
    source = str(
        event.get("eventSourceARN")
        or next((r.get("eventSourceARN") for r in records if r.get("eventSourceARN")), "unknown")
    )
    logger.warning("stream batch without shardId: one cursor for its whole stream", source=source)
    return source


def readable(records: list[dict[str, Any]]) -> list[StatsChange]:
    changes = []
    for record in records:
        try:
            changes.append(change_of_record(record))
        except Exception as error:  # any record it cannot read is skipped, whatever the fault
            sequence = (
                (record.get("dynamodb") or {}).get("SequenceNumber")
                if isinstance(record, dict)
                else None
            )
            logger.warning("unreadable stream record skipped", sequence=sequence, error=str(error))
            metrics.add_metric(name="StatsRecordsUnreadable", unit=MetricUnit.Count, value=1)
    return changes


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    stream = DynamoDBStreamEvent(event)
    records: list[dict[str, Any]] = event.get("Records") or []
    if records:
        changes = readable(records)
        shard = shard_of(stream)
        applied = runtime.stats_table().apply(shard, changes) if changes else 0
        metrics.add_metric(name="StreamRecordsRead", unit=MetricUnit.Count, value=len(records))
        metrics.add_metric(name="StatsRecordsApplied", unit=MetricUnit.Count, value=applied)
        logger.info(
            "stream batch applied",
            shard=shard,
            records=len(records),
            applied=applied,
            skipped=len(changes) - applied,
        )
    # A tumbling window's invocation must answer its state (Lambda fails one that does not).
    return {"state": {}}
