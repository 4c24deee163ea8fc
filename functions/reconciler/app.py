"""The reconciler, run by EventBridge Scheduler every ReconcileEveryMinutes: ingests the uploads
no S3 notification announced (services/reconciler.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from filejobs import runtime
from filejobs.adapters.upload_listing import S3UploadListing
from filejobs.data.recorded_files import DynamoRecordedFiles
from filejobs.domain.reconciliation import Window
from filejobs.domain.time import utcnow
from filejobs.instrumentation import instruments
from filejobs.services.reconciler import Reconciler

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured


def window() -> Window:
    settings = runtime.reconciler_settings()
    return Window.for_schedule(settings.every, settings.grace)


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


@observed.entry_point()
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
