"""A job worker: one function per job type (JOB_TYPE), fed by its type's three queue lanes
(high, normal, low), whose messages it handles alike."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import process_partial_response

from filejobs import runtime
from filejobs.adapters.aws_errors import AWS_RETRY_POLICY
from filejobs.adapters.s3 import S3Outputs
from filejobs.adapters.workspace import shared_scratch
from filejobs.domain.fairness import TenantCap
from filejobs.domain.job import JobType
from filejobs.domain.messages import JobMessage
from filejobs.domain.time import utcnow
from filejobs.instrumentation import instruments, sqs_batch
from filejobs.observability import METRICS_NAMESPACE, SERVICE, record_scope
from filejobs.processors.base import Processor, Work
from filejobs.processors.registry import ScanSettings, processor_for
from filejobs.processors.sandbox import privileges
from filejobs.processors.sandbox.client import start_shared
from filejobs.services.worker import Disposition, RunningCap, WorkerService, WorkResult

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments()
logger, tracer, metrics = observed.logger, observed.tracer, observed.measured
processor = sqs_batch()
# The worker holds the function's credentials: no process of its user (clamd, clamscan, a
# decoder that broke out of its sandbox) may read its /proc environ or memory.
privileges.make_non_dumpable()

_METRIC = {
    Disposition.COMPLETED: "JobsCompleted",
    Disposition.RETRYING: "JobsRetried",
    Disposition.FAILED: "JobsFailed",
    Disposition.SKIPPED: "MessagesSkipped",
    Disposition.ABANDONED: "JobsAbandoned",
    Disposition.DEFERRED: "JobsDeferred",
}
# Neither started a job: the message was acknowledged without work, or sent again for later.
_NOT_STARTED = frozenset({Disposition.SKIPPED, Disposition.DEFERRED})


def job_type() -> JobType:
    return runtime.job_type()


@tracer.capture_method(capture_response=False)
def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
    with record_scope(logger, message_id=record.message_id):
        handle_record(record, lambda_context)


def handle_record(record: SQSRecord, context: LambdaContext | None = None) -> None:
    # A malformed message raises here: it fails alone and, after maxReceiveCount, rests in the DLQ.
    message = JobMessage.parse(record.body)
    tracer.put_annotation(key="job_id", value=message.job_id)
    tracer.put_annotation(key="job_type", value=message.job_type.value)
    # Every line about this job names it and its file; the next record of the batch starts clean.
    with record_scope(
        logger,
        job_id=message.job_id,
        file_id=message.file_id,
        job_type=message.job_type.value,
    ):
        handle(message, record.message_id, context)


def processor_of_this_worker() -> Processor:
    """This worker's processor, built once per execution environment."""
    return runtime.once(f"processor:{job_type().value}", build_processor)


def build_processor() -> Processor:
    """This worker's processor. The virus scan's and the deduplication check's are the whole use
    case: the processor reads the bytes, the service records what they mean (the verdict, acted
    on: services/virus_scan.py; the content's owner: services/dedup.py); the thumbnails' adds the
    near duplicates a job asks for (services/similar_images.py). The virus scan's is imported
    only by its own worker (it needs YARA, which only the scanning layer ships)."""
    kind, settings = job_type(), runtime.settings()
    if kind is JobType.DEDUPLICATION_CHECK:
        return deduplication_check()
    if kind is JobType.THUMBNAIL_GENERATION:
        return thumbnails_and_near_duplicates(settings.thumbnail_sizes)
    if kind is not JobType.VIRUS_SCAN:
        return processor_for(
            kind,
            runtime.s3(),
            None,
            thumbnail_sizes=settings.thumbnail_sizes,
            office=runtime.office_settings(),
        )
    from filejobs.adapters.quarantine import S3VerdictStore  # noqa: PLC0415
    from filejobs.services.virus_scan import VirusScan  # noqa: PLC0415

    scan = ScanSettings(
        quarantine_bucket=settings.require_quarantine_bucket(),
        signatures_bucket=settings.signatures_bucket,
        signatures_prefix=settings.signatures_prefix,
        clamd=settings.clamd if settings.uses_clamav else None,
        max_definitions_age=settings.max_definitions_age,
        max_bytes=settings.scan_max_bytes,
    )
    marks = S3VerdictStore(runtime.s3(), scan.quarantine_bucket, settings.outputs_bucket)
    scanner = counting_refusals(processor_for(kind, runtime.s3(), scan))
    return VirusScan(scanner, runtime.files(), marks, runtime.scan_gate())


def deduplication_check() -> Processor:
    """The digest, then its owner claimed and recorded on the file (services/dedup.py)."""
    from filejobs.data.content_index import ContentIndex  # noqa: PLC0415
    from filejobs.services.dedup import DeduplicationCheck  # noqa: PLC0415

    digest = processor_for(JobType.DEDUPLICATION_CHECK, runtime.s3(), None)
    return DeduplicationCheck(digest, ContentIndex(), runtime.files())


def thumbnails_and_near_duplicates(thumbnail_sizes: str | None) -> Processor:
    """The thumbnails, then, where the job asks, the tenant's images that look nearly the same
    (services/similar_images.py)."""
    from filejobs.data.similar_index import SimilarImagesIndex  # noqa: PLC0415
    from filejobs.services.similar_images import NearDuplicates  # noqa: PLC0415

    thumbnails = processor_for(
        JobType.THUMBNAIL_GENERATION, runtime.s3(), None, thumbnail_sizes=thumbnail_sizes
    )
    return NearDuplicates(thumbnails, SimilarImagesIndex(), runtime.files())


def counting_refusals(scan: Processor) -> Processor:
    """The scan, with every refusal for want of usable definitions counted (the
    DefinitionsUnavailable metric: its alarm says files are waiting for their verdict)."""
    from filejobs.processors.scan.current import DefinitionsUnavailableError  # noqa: PLC0415

    def counted(work: Work) -> dict[str, Any]:
        try:
            return scan(work)
        except DefinitionsUnavailableError as error:
            logger.error("scan refused: definitions unavailable", reason=str(error))
            metrics.add_metric(name="DefinitionsUnavailable", unit=MetricUnit.Count, value=1)
            raise

    return counted


def running_cap(context: LambdaContext | None) -> RunningCap | None:
    """The tenants' cap (TenantMaxRunningJobs, or a tenant's own max_in_flight_jobs), its slots
    lapsing at this invocation's deadline: Lambda stops the invocation then, so a slot it never
    gave back counts no longer."""
    slots = runtime.tenant_slots()
    if slots is None:
        return None

    def deadline() -> datetime:
        remaining = context.get_remaining_time_in_millis() if context is not None else 0
        # Without a context (a direct call), a lease is as long as an attempt may go unseen.
        left = timedelta(milliseconds=remaining) if remaining else runtime.settings().lease
        return utcnow() + left

    default = TenantCap(runtime.settings().tenant_max_running)
    return RunningCap(slots, default, deadline, own_cap=runtime.in_flight_caps())


def handle(message: JobMessage, message_id: str, context: LambdaContext | None = None) -> None:
    settings = runtime.settings()
    service = WorkerService(
        runtime.jobs(),
        runtime.dispatcher(),
        processor_of_this_worker(),
        job_type(),
        lease=settings.lease,
        retention=settings.retention,
        worker_id=runtime.worker_id(message_id),
        outputs=S3Outputs(runtime.s3(), settings.require_outputs_bucket()).for_job,
        scratch=shared_scratch(),
        gate=runtime.scan_gate(),
        retry_policy=AWS_RETRY_POLICY,
        limits=running_cap(context),
    )
    result = service.handle(message)
    job = result.job
    extra: dict[str, Any] = {
        "disposition": result.disposition.value,
        "detail": result.detail,
        "attempt": None if job is None else job.attempt,
    }
    if job is not None and job.file_id != message.file_id:
        extra["file_id"] = job.file_id  # the stored truth (an old message carries no file id)
    logger.info("job handled", extra=extra)
    record_metrics(result)


def start_decoders_early() -> None:
    """This worker's processor built and its decoder sandbox started while Lambda initialises
    the execution environment (a full vCPU, before any job waits): the zygote's imports and
    warm-up, 0.5-1.5 s, are then not on the first job's path. A failure here is logged and left
    to the first job, which starts the sandbox again and fails readably if it still cannot."""
    try:
        processor_of_this_worker()
        started = start_shared()
    except Exception:  # a head start only: its failure must not fail the init
        logger.exception("decoder sandbox not started at init: the first job will start it")
        return
    if started:
        logger.info("decoder sandbox started at init", sandboxes=started)


def record_metrics(result: WorkResult) -> None:
    if result.disposition not in _NOT_STARTED:
        metrics.add_metric(name="JobsStarted", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=_METRIC[result.disposition], unit=MetricUnit.Count, value=1)
    duration = result.job.duration() if result.job is not None else None
    if result.disposition is Disposition.COMPLETED and duration is not None:
        metrics.add_metric(
            name="JobDuration", unit=MetricUnit.Seconds, value=duration.total_seconds()
        )
    verdict = scan_verdict(result)
    if verdict is not None:
        # Its own metric and dimension (the dashboard's verdicts): a dimension added to the
        # batch's metrics would split every other figure of the invocation by verdict too.
        with single_metric(
            name="ScanVerdicts", unit=MetricUnit.Count, value=1, namespace=METRICS_NAMESPACE
        ) as counted:
            counted.add_dimension(name="service", value=SERVICE)
            counted.add_dimension(name="verdict", value=verdict)


def scan_verdict(result: WorkResult) -> str | None:
    """The verdict a completed virus scan acted on (the file's, when it kept an earlier one)."""
    job = result.job
    if result.disposition is not Disposition.COMPLETED or job is None:
        return None
    if job.job_type is not JobType.VIRUS_SCAN or not isinstance(job.result_data, dict):
        return None
    verdict = job.result_data.get("recorded_verdict") or job.result_data.get("verdict")
    return verdict if isinstance(verdict, str) else None


# Lambda sets it in a real execution environment only: tests and the local stack, which start
# many workers at once, keep starting the sandbox with the first job.
if runtime.in_lambda():
    start_decoders_early()


@observed.entry_point()
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    # Every figure of the invocation by its job type, and the same again under the stack alone
    # (a second EMF dimension set, added once per flush): a CloudWatch metric is its exact
    # dimensions, and the stack's failure-rate alarm and dashboard add every job type up, which
    # no alarm can do over six series of each metric.
    metrics.add_dimension(name="job_type", value=job_type().value)
    metrics.add_dimensions(service=SERVICE)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
