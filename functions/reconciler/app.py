"""The reconciler, run by EventBridge Scheduler every ReconcileEveryMinutes: ingests the uploads
no S3 notification announced (services/reconciler.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from filejobs import runtime
from filejobs.adapters.upload_listing import S3UploadListing
from filejobs.data.recorded_files import DynamoRecordedFiles
from filejobs.domain.reconciliation import Window
from filejobs.domain.time import utcnow
from filejobs.observability import METRICS_NAMESPACE, SERVICE, TRACED_MODULES
from filejobs.services.reconciler import Reconciler

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

# The template's defaults, for a run outside it (a test).
DEFAULT_EVERY_MINUTES = 15
DEFAULT_GRACE_SECONDS = 120

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)


def window() -> Window:
    every = float(os.environ.get("RECONCILE_EVERY_MINUTES") or DEFAULT_EVERY_MINUTES)
    grace = float(os.environ.get("RECONCILE_GRACE_SECONDS") or DEFAULT_GRACE_SECONDS)
    return Window.for_schedule(timedelta(minutes=every), timedelta(seconds=grace))


def reconciler(clock: Callable[[], datetime] = utcnow) -> Reconciler:
    settings = runtime.settings()
    bucket = settings.require_uploads_bucket()
    return Reconciler(
        bucket,
        S3UploadListing(runtime.s3(), bucket),
        DynamoRecordedFiles(runtime.dynamodb(), settings.files_table),
        runtime.fair_ingest_queue(),
        window(),
        clock=clock,
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = reconciler().run()
    found = len(report.unannounced)
    # Every run says how many it found, 0 included: the alarm's metric, and proof runs happen.
    metrics.add_metric(name="UnannouncedUploads", unit=MetricUnit.Count, value=found)
    if report.refused:
        metrics.add_metric(name="ReconcileRefused", unit=MetricUnit.Count, value=report.refused)
    summary = {
        "listed": report.listed,
        "checked": report.checked,
        "too_young": report.too_young,
        "unannounced": found,
        "refused": report.refused,
    }
    logger.info("reconciliation finished", extra=summary)
    return summary
