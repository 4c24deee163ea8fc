"""The rescan policy, run every hour by EventBridge Scheduler.

Clean verdicts older than RescanAfterDays, or given with definitions older than
RescanDefinitionsBefore, are scanned again (services/rescans.py), at most RESCAN_MAX_PER_RUN a
run so that a policy switched on over a large table does not bury new uploads' scans. With both
parameters unset it does nothing, reading nothing.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from filejobs import runtime
from filejobs.config import ConfigurationError
from filejobs.observability import METRICS_NAMESPACE, SERVICE, TRACED_MODULES
from filejobs.services.rescans import Rescans

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)

DEFAULT_MAX_PER_RUN = 500


def policy() -> tuple[timedelta | None, str | None, int]:
    """(rescan verdicts older than, rescan verdicts given with definitions before, per run)."""
    days = os.environ.get("RESCAN_AFTER_DAYS", "0") or "0"
    per_run = os.environ.get("RESCAN_MAX_PER_RUN", str(DEFAULT_MAX_PER_RUN))
    if not days.isdigit() or not per_run.isdigit() or int(per_run) < 1:
        raise ConfigurationError("RESCAN_AFTER_DAYS and RESCAN_MAX_PER_RUN must be whole numbers")
    before = os.environ.get("RESCAN_DEFINITIONS_BEFORE", "").strip() or None
    return (timedelta(days=int(days)) if int(days) else None), before, int(per_run)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    older_than, definitions_before, per_run = policy()
    if older_than is None and definitions_before is None:
        logger.info("rescan policy off (RescanAfterDays=0, RescanDefinitionsBefore empty)")
        return {"enabled": False}
    rescans = Rescans(runtime.jobs(), runtime.files(), runtime.dispatcher())
    report = rescans.run_policy(
        older_than=older_than, definitions_before=definitions_before, max_files=per_run
    )
    summary = {
        "enabled": True,
        "requested": report.requested,
        "already_requested": report.already_requested,
        "examined": report.examined,
    }
    logger.info("rescan policy run", extra=summary)
    metrics.add_metric(name="RescansRequested", unit=MetricUnit.Count, value=report.requested)
    return summary
