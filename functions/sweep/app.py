"""The sweep, run every minute by EventBridge Scheduler with reserved concurrency 1."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.observability import METRICS_NAMESPACE, SERVICE
from filejobs.services.sweep import SweepService

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    sweep = SweepService(runtime.jobs(), runtime.dispatcher(), retention=settings.retention)
    report = sweep.run()
    summary = {
        "examined": report.examined,
        "actions": dict(report.actions),
        "lost_races": report.lost_races,
        "errors": report.errors,
    }
    logger.info("sweep finished", extra=summary)
    for action, count in report.actions.items():
        metrics.add_metric(name=f"Sweep{action.title()}", unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="SweepErrors", unit=MetricUnit.Count, value=report.errors)
    return summary
