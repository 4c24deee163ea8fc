"""The rescan policy, run every hour by EventBridge Scheduler.

Clean verdicts older than RescanAfterDays, or given with definitions older than
RescanDefinitionsBefore, are scanned again (services/rescans.py), at most RESCAN_MAX_PER_RUN a
run so that a policy switched on over a large table does not bury new uploads' scans. With both
parameters unset it does nothing, reading nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from filejobs import runtime
from filejobs.instrumentation import instruments
from filejobs.services.rescans import Rescans

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured


def policy() -> tuple[timedelta | None, str | None, int]:
    """(rescan verdicts older than, rescan verdicts given with definitions before, per run)."""
    settings = runtime.rescan_settings()
    return settings.older_than, settings.definitions_before, settings.per_run


@observed.entry_point()
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
