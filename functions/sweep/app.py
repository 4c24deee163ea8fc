"""The sweep, run every minute by EventBridge Scheduler with reserved concurrency 1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from filejobs import runtime
from filejobs.adapters.aws_errors import AWS_RETRY_POLICY
from filejobs.data.job_repository import JobRepository
from filejobs.instrumentation import instruments
from filejobs.services.sweep import DeadLetterReview, SweepService

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from filejobs.domain.job import ProcessingJob
    from filejobs.ports import UnreadableItem

# The share of the function's timeout a run may spend before it stops taking due jobs (the dead
# letters, reviewed first, included): the rest is for a slow call in hand when the time is up.
# Jobs not reached stay due.
SWEEP_TIME_SHARE = 0.5

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured


class SweptJobs(JobRepository):
    """The jobs repository, with each due job's ids on every log line while the sweep acts on it."""

    def due_for_sweep(
        self, now: datetime, *, per_shard: int = 100, on_unreadable: UnreadableItem | None = None
    ) -> Iterator[ProcessingJob]:
        for job in super().due_for_sweep(now, per_shard=per_shard, on_unreadable=on_unreadable):
            # The sweep handles a job between two `next()` calls, so the job's keys stay while
            # it does, and are gone before the next job's (or once the sweep stops asking).
            with logger.append_context_keys(job_id=job.id, file_id=job.file_id):
                yield job


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    runtime.tables()  # SweptJobs is a JobRepository: its models must be bound first
    dispatcher = runtime.dispatcher()
    held = runtime.scan_gate()
    sweep = SweepService(
        SweptJobs(),
        dispatcher,
        queues=runtime.queue_watch(),
        held=held,
        retention=settings.retention,
        retry_policy=AWS_RETRY_POLICY,
    )
    letters = DeadLetterReview(
        SweptJobs(), runtime.dead_letters(), held=held, retention=settings.retention
    )
    total_ms = context.get_remaining_time_in_millis()
    try:
        # The letters first: a job whose message SQS gave up on is failed before the sweep can
        # take it for one whose message was lost and send a copy (a poisoned message's copy
        # went through all its deliveries again, and its job's end waited for them).
        reviewed = letters.run()
    finally:
        # Whatever ended the review, the due jobs are still attended to; its error is raised
        # after (and a failed run's, for its alarm and Lambda's retry).
        report = sweep.run(
            should_stop=lambda: context.get_remaining_time_in_millis() < total_ms * SWEEP_TIME_SHARE
        )
    summary = {
        "examined": report.examined,
        "actions": dict(report.actions),
        "lost_races": report.lost_races,
        "errors": report.errors,
        "cut_short": report.cut_short,
        "unreadable": report.unreadable,
        "dead_letters": dict(reviewed),
    }
    logger.info("sweep finished", extra=summary)
    for action, count in report.actions.items():
        metrics.add_metric(name=f"Sweep{action.title()}", unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="SweepErrors", unit=MetricUnit.Count, value=report.errors)
    metrics.add_metric(name="SweepCutShort", unit=MetricUnit.Count, value=int(report.cut_short))
    # Job items the sweep skipped, unreadable: each needs a person (docs/OPERATIONS.md).
    metrics.add_metric(name="UnreadableJobs", unit=MetricUnit.Count, value=report.unreadable)
    failed = reviewed.get("dead_lettered_jobs_failed", 0)
    metrics.add_metric(name="SweepDeadLetteredJobsFailed", unit=MetricUnit.Count, value=failed)
    return summary
