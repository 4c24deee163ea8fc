"""Wiring for Lambda handlers: clients and repositories built once per container.

Only what every handler uses is imported at the top: the files repository is imported by
`files()` when a handler first asks for it, so the others do not load it at every cold start.
The repositories come from `jobs()` and `files()`, which bind the models to the environment's
tables first (`tables()`). Clients come
from botocore itself: boto3 would add its resources and S3 transfer manager (and, through them,
multiprocessing), some 30 ms of each cold start, and none of it is used.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import botocore.session

from filejobs.adapters.ingest_queue import SqsIngestQueue
from filejobs.adapters.sqs import SqsDeadLetters, SqsDispatcher, SqsQueueWatch
from filejobs.config import (
    ApiSettings,
    CallerSettings,
    OfficeSettings,
    ReconcilerSettings,
    RescanSettings,
    Settings,
    UpdaterVariables,
    started_by_lambda,
    worker_job_type,
)
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import Tables, bind_tables
from filejobs.domain.time import utcnow

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from filejobs.adapters.scheduler import EventBridgeScheduler
    from filejobs.data.file_repository import FileRepository
    from filejobs.data.preset_repository import PresetRepository
    from filejobs.data.stats_repository import StatsRepository
    from filejobs.data.tenant_slots import DynamoTenantSlots
    from filejobs.data.webhook_repository import WebhookRepository
    from filejobs.domain.definitions import DefinitionsManifest
    from filejobs.domain.job import JobType
    from filejobs.domain.quotas import TenantQuotas
    from filejobs.ports import OutputLinks, WebhookSender
    from filejobs.services.api import StatusApi
    from filejobs.services.console import ConsoleViews
    from filejobs.services.file_lifecycle import FileLifecycle
    from filejobs.services.operations import BulkOperations
    from filejobs.services.page_tokens import PageTokens
    from filejobs.services.presets import PresetCache, Presets
    from filejobs.services.quotas import TenantLimits
    from filejobs.services.scan_gate import ScanGate
    from filejobs.services.schedules import Schedules
    from filejobs.services.tenant_erasure import TenantErasure
    from filejobs.services.uploads import Uploads
    from filejobs.services.webhooks import Webhooks


@cache
def settings() -> Settings:
    return Settings.from_env()


# A function's own settings, read at each call as the handlers read them before they lived
# here (a test changes them between invocations without a reset()).
def api_settings() -> ApiSettings:
    return ApiSettings.from_env()


def callers() -> CallerSettings:
    """Whom the API recognises (access.caller_from)."""
    return CallerSettings.from_env()


def reconciler_settings() -> ReconcilerSettings:
    return ReconcilerSettings.from_env()


def rescan_settings() -> RescanSettings:
    return RescanSettings.from_env()


def office_settings() -> OfficeSettings:
    return OfficeSettings.from_env()


def updater_variables() -> UpdaterVariables:
    return UpdaterVariables.from_env()


def job_type() -> JobType:
    """The job type this worker function runs."""
    return worker_job_type()


def in_lambda() -> bool:
    """Whether Lambda started this process (not a test, not the local stack)."""
    return started_by_lambda()


@cache
def tables() -> Tables:
    """The environment's tables, the PynamoDB models bound to them. PynamoDB binds a model
    class (its Meta), not an instance: the repositories built below are the only way the
    handlers reach a table, so nothing reads one before this has run."""
    loaded = settings()
    return bind_tables(
        jobs_table=loaded.jobs_table,
        files_table=loaded.files_table,
        region=loaded.region,
        endpoint_url=loaded.dynamodb_endpoint_url,
    )


@cache
def aws_session() -> botocore.session.Session:
    """The one session every client here comes from (as boto3.client's default session is)."""
    return botocore.session.get_session()


@cache
def s3() -> S3Client:
    return cast("S3Client", _client("s3"))


@cache
def sqs() -> SQSClient:
    return cast("SQSClient", _client("sqs"))


@cache
def events() -> EventBridgeClient:
    return cast("EventBridgeClient", _client("events"))


@cache
def scheduler_client() -> EventBridgeSchedulerClient:
    return cast("EventBridgeSchedulerClient", _client("scheduler"))


@cache
def dynamodb() -> DynamoDBClient:
    """A plain DynamoDB client, for the tables PynamoDB does not model (the tenants' slots)."""
    client = aws_session().create_client("dynamodb", endpoint_url=settings().dynamodb_endpoint_url)
    return cast("DynamoDBClient", client)


def _client(service: str) -> object:
    return aws_session().create_client(service, endpoint_url=settings().endpoint_url)


# How long the page-token key is kept after a read (Powertools Parameters' cache): a rotated
# secret takes effect within the hour, and a warm API function reads it once an hour at most.
PAGE_TOKEN_SECRET_MAX_AGE = 3600


@cache
def secrets() -> SecretsProvider:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

    # Any client with get_secret_value serves; this one honours the local stack's endpoint.
    return SecretsProvider(boto3_client=cast("Any", _client("secretsmanager")))


def page_token_secret() -> bytes | None:
    """The key the API signs its page tokens with: the stack's secret, read through Powertools
    Parameters and cached; else a secret given as such (tests); else None (unsigned)."""
    loaded = settings()
    if loaded.page_token_secret_arn:
        value = secrets().get(loaded.page_token_secret_arn, max_age=PAGE_TOKEN_SECRET_MAX_AGE)
        return str(value).encode()
    return loaded.page_token_secret.encode() if loaded.page_token_secret else None


def jobs() -> JobRepository:
    tables()
    return JobRepository()


def files() -> FileRepository:
    from filejobs.data.file_repository import FileRepository  # noqa: PLC0415 (not every handler)

    tables()
    return FileRepository()


def tenant_limits() -> TenantLimits:
    """The tenants' quotas: the template's defaults, and each tenant's own from FilesTable."""
    from filejobs.data.quota_repository import QuotaRepository  # noqa: PLC0415 (not every handler)
    from filejobs.services.quotas import TenantLimits  # noqa: PLC0415

    tables()
    return TenantLimits(QuotaRepository(), settings().tenant_quotas)


def ingest_limits() -> Callable[[str], TenantQuotas]:
    """The ingest's: each tenant's quotas in force, kept a minute in this function instance
    (services/quotas.RememberedLimits), so an upload reads no quota item in the common case."""
    from filejobs.services.quotas import RememberedLimits  # noqa: PLC0415 (the ingest's)

    return once("ingest limits", lambda: RememberedLimits(tenant_limits().limits))


def dispatcher() -> SqsDispatcher:
    return SqsDispatcher(sqs(), settings().queue_urls)


def fair_ingest_queue() -> SqsIngestQueue:
    return SqsIngestQueue(sqs(), settings().require_fair_ingest_queue())


def queue_watch() -> SqsQueueWatch:
    return SqsQueueWatch(sqs(), settings().queue_urls)


def dead_letters() -> SqsDeadLetters:
    return SqsDeadLetters(sqs(), settings().dead_letter_urls)


def tenant_slots() -> DynamoTenantSlots | None:
    """The tenants' slots (the workers' cap, domain/fairness.py); None when the environment
    names no table. With TenantMaxRunningJobs at 0 a tenant's own cap still holds it."""
    from filejobs.data.tenant_slots import DynamoTenantSlots  # noqa: PLC0415 (workers only)

    loaded = settings()
    if not loaded.tenant_slots_table:
        return None
    return DynamoTenantSlots(dynamodb(), loaded.tenant_slots_table)


def stats_table() -> StatsRepository:
    """The console's aggregates in OpsTable (data/stats_repository.py): the stats function keeps
    them from the jobs' stream, the API reads them. One per container: it remembers each stream
    shard's cursor it wrote, so a shard's next batch is written without reading it first."""
    from filejobs.data.stats_repository import StatsRepository  # noqa: PLC0415 (two handlers)

    return once("stats table", lambda: StatsRepository(dynamodb(), settings().require_ops_table()))


def in_flight_caps() -> Callable[[str], int | None]:
    """Each tenant's own running cap (its max_in_flight_jobs quota), read through a cache kept
    for this container's life (services/quotas.InFlightCaps)."""
    from filejobs.data.quota_repository import QuotaRepository  # noqa: PLC0415 (workers only)
    from filejobs.services.quotas import InFlightCaps  # noqa: PLC0415

    def build() -> InFlightCaps:
        tables()
        return InFlightCaps(QuotaRepository())

    return once("in-flight caps", build)


def scan_gate() -> ScanGate:
    """The virus scan's gate (services/scan_gate.py), for the handlers that hold, release or
    settle the jobs waiting on a verdict: the workers, the sweep and the API."""
    from filejobs.services.scan_gate import ScanGate  # noqa: PLC0415 (not every handler)

    loaded = settings()
    return ScanGate(
        files(),
        jobs(),
        dispatcher(),
        retention=loaded.retention,
        unscannable=loaded.unscannable,
    )


def status_api(*, tokens: PageTokens | None = None, links: OutputLinks | None = None) -> StatusApi:
    """The status API's use cases (the API function's; the operations function changes jobs
    through them too)."""
    from filejobs.services.api import StatusApi  # noqa: PLC0415 (not every handler)
    from filejobs.services.page_tokens import PageTokens  # noqa: PLC0415

    return StatusApi(
        jobs=jobs(),
        files=files(),
        dispatcher=dispatcher,
        retention=settings().retention,
        tokens=tokens or PageTokens(None),
        links=links,
        scan_ended=lambda scan: scan_gate().scan_ended(scan),
        limits=lambda tenant: tenant_limits().limits(tenant),
    )


def console_views() -> ConsoleViews:
    """The console's overview and failure groups (services/console.py): the aggregates, the
    dead-letter queues' depths, the definitions' manifest (when the environment names them)."""
    from filejobs.adapters.definitions import DefinitionsStore  # noqa: PLC0415 (the API's)
    from filejobs.services.console import ConsoleViews  # noqa: PLC0415

    loaded = settings()

    def manifest() -> DefinitionsManifest | None:
        assert loaded.signatures_bucket is not None
        return (
            DefinitionsStore(s3(), loaded.signatures_bucket, loaded.signatures_prefix)
            .current()
            .manifest
        )

    return ConsoleViews(
        stats_table(),
        dead_letters=dead_letters().depths if loaded.dead_letter_urls else None,
        definitions=manifest if loaded.signatures_bucket else None,
    )


def bulk_operations(api: StatusApi | None = None) -> BulkOperations:
    """Bulk actions by filter (services/operations.py): OpsTable, the operations queue."""
    from filejobs.adapters.operations_queue import SqsOperationQueue  # noqa: PLC0415
    from filejobs.data.operation_repository import OperationRepository  # noqa: PLC0415
    from filejobs.services.operations import BulkOperations  # noqa: PLC0415

    loaded = settings()
    table = loaded.require_ops_table()

    def queue() -> SqsOperationQueue:
        return SqsOperationQueue(sqs(), loaded.require_operations_queue())

    def failed_in_group(scope: str, group_id: str) -> int | None:
        found = stats_table().failure_group(scope, group_id)
        return None if found is None else max(found.count, 0)

    return BulkOperations(
        store=OperationRepository(dynamodb(), table),
        queue=queue,
        status_api=api or status_api(),
        failed_in_group=failed_in_group,
        tenant_erasure=tenant_erasure,
        rate=loaded.operation_rate,
        limits=lambda tenant: tenant_limits().limits(tenant),
    )


def webhook_repository() -> WebhookRepository:
    """OpsTable's webhook endpoints, their secrets sealed with the stack's key, or opened with it,
    as this function's environment says (config.py webhook_secrets_use)."""
    from filejobs.adapters.kms_secrets import KmsSecretCipher  # noqa: PLC0415
    from filejobs.data.webhook_repository import WebhookRepository  # noqa: PLC0415

    loaded = settings()
    key = loaded.webhook_secrets_key_arn
    # "seal" or "open" in a deployed function; both only where the API and the webhooks function
    # share one process (the tests).
    uses = set((loaded.webhook_secrets_use or "").split(","))
    cipher = None if key is None else KmsSecretCipher(_client("kms"), key)
    return WebhookRepository(
        dynamodb(),
        loaded.require_ops_table(),
        sealer=cipher if "seal" in uses else None,
        opener=cipher if "open" in uses else None,
    )


def webhooks(
    *, clock: Callable[[], datetime] | None = None, sender: WebhookSender | None = None
) -> Webhooks:
    """Tenants' webhooks (services/webhooks.py): OpsTable, the webhooks queue, the pinned HTTP
    sender, the notice of a disabled endpoint on the stack's bus (where the environment names
    one: the API function only manages endpoints)."""
    from filejobs.adapters.webhook_http import (  # noqa: PLC0415 (two handlers)
        EventBridgeWebhookNotices,
        PinnedSender,
        SqsWebhookQueue,
    )
    from filejobs.services.webhooks import RememberedEndpoints, Webhooks  # noqa: PLC0415

    loaded = settings()
    store = webhook_repository()
    # Each tenant's endpoints (and that it has none) kept a minute per container, for fan_out.
    remembered = once("webhook endpoints", lambda: RememberedEndpoints(store.endpoints))

    def queue() -> SqsWebhookQueue:
        return SqsWebhookQueue(sqs(), loaded.require_webhooks_queue())

    def pinned() -> WebhookSender:
        return sender or PinnedSender(local_mode=loaded.webhooks_local_mode)

    def notices() -> EventBridgeWebhookNotices:
        return EventBridgeWebhookNotices(events(), loaded.require_event_bus())

    return Webhooks(
        store,
        endpoints_of=remembered,
        queue=queue,
        sender=pinned,
        notices=notices if loaded.event_bus else None,
        local_mode=loaded.webhooks_local_mode,
        clock=clock or utcnow,
    )


def schedules(api: StatusApi | None = None) -> Schedules:
    """Recurring schedules (services/schedules.py): OpsTable, EventBridge Scheduler, and the
    bulk operations each run starts."""
    from filejobs.data.schedule_repository import ScheduleRepository  # noqa: PLC0415
    from filejobs.domain.job_options import options_of  # noqa: PLC0415
    from filejobs.services.schedules import Schedules  # noqa: PLC0415

    loaded = settings()

    def check_options(job_type: JobType, options: dict[str, Any]) -> None:
        options_of(job_type).check(options)

    return Schedules(
        store=ScheduleRepository(dynamodb(), loaded.require_ops_table()),
        scheduler=event_scheduler,
        operations=lambda: bulk_operations(api),
        check_options=check_options,
    )


def event_scheduler() -> EventBridgeScheduler:
    """The stack's schedule group in EventBridge Scheduler (adapters/scheduler.py)."""
    from filejobs.adapters.scheduler import EventBridgeScheduler  # noqa: PLC0415

    loaded = settings()
    group, target, role = loaded.require_scheduler()
    return EventBridgeScheduler(
        scheduler_client(),
        group=group,
        target_arn=target,
        role_arn=role,
        dead_letter_arn=loaded.schedule_dead_letter_arn,
    )


def worker_id(context_request_id: str | None = None) -> str:
    name = settings().function_name
    return f"{name}:{context_request_id}" if context_request_id else name


_built: dict[str, Any] = {}


def once[T](name: str, build: Callable[[], T]) -> T:
    """What `build` makes, made once per container (a processor with its compiled rules)."""
    if name not in _built:
        _built[name] = build()
    built: T = _built[name]
    return built


def presets() -> Presets:
    """Upload presets, managed through the API (services/presets.py), in OpsTable."""
    from filejobs.services.presets import Presets  # noqa: PLC0415

    return Presets(_preset_store())


@cache
def preset_cache() -> PresetCache:
    """Ingest's: each tenant's presets, kept for a minute in this function instance."""
    from filejobs.services.presets import PresetCache  # noqa: PLC0415

    return PresetCache(_preset_store())


def uploads() -> Uploads:
    """Signed uploads into the uploads bucket (services/uploads.py): each tenant's file-size
    limit in force, its presets, presigned POSTs with the function's credentials."""
    from filejobs.adapters.s3 import S3UploadSigner  # noqa: PLC0415 (the API's alone)
    from filejobs.services.uploads import Uploads  # noqa: PLC0415

    signer = S3UploadSigner(s3, settings().require_uploads_bucket())
    return Uploads(signer, tenant_limits().limits, _preset_store())


def file_lifecycle() -> FileLifecycle:
    """A file's life after its upload (services/file_lifecycle.py): S3's removals followed by
    the file-removals function, files erased by the API and by a tenant erasure's operation."""
    from filejobs.adapters.s3_lifecycle import (  # noqa: PLC0415 (three handlers)
        S3DerivedOutputs,
        S3QuarantinedCopies,
        S3UploadVersions,
        SqsOutputsPurges,
    )
    from filejobs.data.erasure_repository import ErasureRepository  # noqa: PLC0415
    from filejobs.services.file_lifecycle import FileLifecycle  # noqa: PLC0415

    loaded = settings()
    erasures = ErasureRepository(dynamodb(), loaded.ops_table) if loaded.ops_table else None
    queue = loaded.file_removals_queue_url
    purges = SqsOutputsPurges(sqs(), queue, loaded.outputs_purge_delay) if queue else None
    return FileLifecycle(
        files(),
        jobs(),
        S3UploadVersions(s3()),
        S3DerivedOutputs(s3(), loaded.outputs_bucket),
        dispatcher,
        retention=loaded.retention,
        erasures=erasures,
        purges=purges,
        quarantined=S3QuarantinedCopies(s3(), loaded.quarantine_bucket),
    )


def tenant_erasure() -> TenantErasure:
    """A tenant's erasure, page by page, in the operations function (services/tenant_erasure.py):
    files erased as DELETE /files/{id} erases one, the tenant's settings and remains deleted."""
    from filejobs.adapters.s3_lifecycle import S3TenantObjects  # noqa: PLC0415
    from filejobs.data.quota_repository import QuotaRepository  # noqa: PLC0415
    from filejobs.data.schedule_repository import ScheduleRepository  # noqa: PLC0415
    from filejobs.data.tenant_settings import TenantSettingsRepository  # noqa: PLC0415
    from filejobs.data.webhook_repository import WebhookRepository  # noqa: PLC0415
    from filejobs.services.tenant_erasure import TenantErasure  # noqa: PLC0415

    loaded = settings()
    table = loaded.require_ops_table()
    objects = S3TenantObjects(
        s3(),
        uploads=loaded.require_uploads_bucket(),
        outputs=loaded.outputs_bucket,
        quarantine=loaded.quarantine_bucket,
    )
    tenant_settings = TenantSettingsRepository(
        webhooks=WebhookRepository(dynamodb(), table),
        presets=_preset_store(),
        quotas=QuotaRepository(),
    )
    return TenantErasure(
        lifecycle=file_lifecycle(),
        objects=objects,
        settings=tenant_settings,
        schedules=ScheduleRepository(dynamodb(), table),
        scheduler=event_scheduler,
    )


def _preset_store() -> PresetRepository:
    from filejobs.data.preset_repository import PresetRepository  # noqa: PLC0415

    return PresetRepository(dynamodb(), settings().require_ops_table())


def reset() -> None:
    """Forget every cached client and setting (tests change the environment between cases)."""
    for cached in (
        settings,
        tables,
        aws_session,
        s3,
        sqs,
        events,
        scheduler_client,
        dynamodb,
        secrets,
        preset_cache,
    ):
        cached.cache_clear()
    _built.clear()
