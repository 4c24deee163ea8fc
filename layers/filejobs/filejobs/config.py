"""Settings of a deployed function, read from its environment (set by template.yaml)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from filejobs.domain.job import JobType
from filejobs.domain.messages import Lane
from filejobs.domain.quotas import TenantQuotas
from filejobs.domain.retention import keep_last_setting
from filejobs.domain.scanning import UnscannablePolicy

MiB = 1024 * 1024
GiB = 1024 * MiB
# The template's defaults for every tenant's quotas (TenantMaxFilesPerDay...); 0 is unlimited.
DEFAULT_TENANT_QUOTAS = TenantQuotas(
    files_per_day=10_000,
    bytes_per_day=10 * GiB,
    max_file_bytes=1 * GiB,
    max_in_flight_jobs=10,
)
# The engines of the virus scan (the ScanEngines parameter).
CLAMAV_AND_YARA = "clamav+yara"
YARA_ONLY = "yara"
# Set by `filejobs dev` and the tests only: webhooks may then go to http://127.0.0.1.
WEBHOOKS_LOCAL_MODE_VARIABLE = "FILEJOBS_WEBHOOKS_LOCAL_MODE"
# The local-caller switch of the API (access.py): SAM sets the first in its containers, never
# Lambda; the template declares the second empty, only the local stack's env file sets it.
SAM_LOCAL_VARIABLE = "AWS_SAM_LOCAL"
LOCAL_CALLERS_VARIABLE = "FILEJOBS_LOCAL_CALLERS"
LOCAL_CALLERS_BY_HEADER = "header"
# Where an unpacked LibreOffice layer is (processors/office_runtime.py reads its manifest there).
LIBREOFFICE_LAYER_DIR = Path("/opt/libreoffice")


class ConfigurationError(RuntimeError):
    """The function's environment lacks something template.yaml should have set."""


@dataclass(frozen=True)
class Settings:
    jobs_table: str
    files_table: str
    lease: timedelta
    retention: timedelta
    queue_urls: Mapping[tuple[JobType, Lane], str]
    # Only the sweep reads them: it fails the jobs whose messages were dead-lettered.
    dead_letter_urls: Mapping[JobType, str] = field(default_factory=dict)
    # Where POST /uploads signs uploads into (the API's).
    uploads_bucket: str | None = None
    outputs_bucket: str | None = None
    quarantine_bucket: str | None = None
    # Where the virus scan's definitions are published (the updater writes, workers read).
    signatures_bucket: str | None = None
    signatures_prefix: str = "signatures/"
    # The clamd the virus scan keeps warm (the ClamAV layer's on Lambda; PATH's elsewhere).
    clamd: str = "clamd"
    # clamav+yara fails closed without ClamAV definitions; yara is YARA alone, by choice.
    scan_engines: str = CLAMAV_AND_YARA
    max_definitions_age: timedelta = timedelta(hours=48)
    scan_max_bytes: int = 512 * MiB
    unscannable: UnscannablePolicy = UnscannablePolicy.HOLD
    event_bus: str | None = None
    # The quotas of a tenant an operator gave none of its own (the ingest and the API read them).
    tenant_quotas: TenantQuotas = DEFAULT_TENANT_QUOTAS
    endpoint_url: str | None = None
    # DynamoDB's own, where it is served apart (botocore's service-specific variable).
    dynamodb_endpoint_url: str | None = None
    # The tenants' cap (domain/fairness.py): jobs of one tenant running at once per job type
    # (0: no cap), and the table of their slots. Only the workers read them.
    tenant_max_running: int = 0
    tenant_slots_table: str | None = None
    # Where the ingest router re-sends S3's notifications, in their tenants' groups.
    fair_ingest_queue_url: str | None = None
    # The file-removals queue (S3's removals and the delayed purges of deleted files' outputs),
    # and how long a purge waits: past the longest worker timeout (template.yaml).
    file_removals_queue_url: str | None = None
    outputs_purge_delay: timedelta = timedelta(seconds=360)
    # What operators see and do (docs/CONSOLE.md): aggregates, failure groups, bulk operations.
    ops_table: str | None = None
    # Where a bulk operation's next page is sent, and how many jobs a second it changes.
    operations_queue_url: str | None = None
    operation_rate: int = 50
    # Where webhook deliveries are queued (services/webhooks.py); local mode (set by the local
    # stack and the tests alone, never by the template) lets them reach http://127.0.0.1.
    webhooks_queue_url: str | None = None
    webhooks_local_mode: bool = False
    # The KMS key webhook signing secrets are sealed with (adapters/kms_secrets.py), and what this
    # function does with them: "seal" (the API: new and rotated secrets) or "open" (the webhooks
    # function: to sign). Neither: it reads endpoints with their secrets left sealed.
    webhook_secrets_key_arn: str | None = None
    webhook_secrets_use: str | None = None
    # Where schedules are armed (EventBridge Scheduler): their group, the queue their runs go
    # to (its ARN), the role the scheduler sends with, and where a run it cannot send goes.
    schedule_group: str | None = None
    operations_queue_arn: str | None = None
    scheduler_role_arn: str | None = None
    schedule_dead_letter_arn: str | None = None
    # Finished jobs kept per file and job type beside the TTL (KeepLastFinishedJobs; only the
    # events function reads it: services/retention.py). A type not named: the TTL alone.
    keep_last: Mapping[JobType, int] = field(default_factory=dict)
    # What signs the API's page tokens: the stack's Secrets Manager secret (its ARN, the
    # template's), or the secret itself (the tests); neither: unsigned tokens (page_tokens.py).
    page_token_secret_arn: str | None = None
    page_token_secret: str | None = None
    # The region the tables are in (Lambda sets both variables; a test or a shell either).
    region: str = "us-east-1"
    # This function's name (Lambda's), which names the worker that holds a job's lease.
    function_name: str = "worker"
    # A thumbnail job's sizes when it names none (ThumbnailSizes; processors/thumbnail.py
    # parses and checks them where the processor is built).
    thumbnail_sizes: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        return cls(
            jobs_table=_required(env, "JOBS_TABLE_NAME"),
            files_table=_required(env, "FILES_TABLE_NAME"),
            lease=timedelta(seconds=int(env.get("LEASE_SECONDS", "300"))),
            retention=timedelta(days=int(env.get("RETENTION_DAYS", "30"))),
            queue_urls={
                (job_type, lane): url
                for job_type in JobType
                for lane in Lane
                if (url := env.get(queue_url_variable(job_type, lane)))
            },
            dead_letter_urls={
                job_type: url
                for job_type in JobType
                if (url := env.get(dead_letter_url_variable(job_type)))
            },
            uploads_bucket=env.get("UPLOADS_BUCKET") or None,
            outputs_bucket=env.get("OUTPUTS_BUCKET"),
            quarantine_bucket=env.get("QUARANTINE_BUCKET"),
            signatures_bucket=env.get("SIGNATURES_BUCKET"),
            signatures_prefix=env.get("SIGNATURES_PREFIX", "signatures/"),
            clamd=env.get("CLAMD", "clamd"),
            scan_engines=_choice(env, "SCAN_ENGINES", (CLAMAV_AND_YARA, YARA_ONLY)),
            max_definitions_age=timedelta(hours=_number(env, "MAX_DEFINITIONS_AGE_HOURS", 48)),
            scan_max_bytes=_number(env, "SCAN_MAX_FILE_SIZE_MB", 512) * MiB,
            unscannable=UnscannablePolicy(
                _choice(env, "UNSCANNABLE_FILES", tuple(p.value for p in UnscannablePolicy))
            ),
            event_bus=env.get("EVENT_BUS_NAME"),
            tenant_quotas=tenant_quotas_from(env),
            endpoint_url=endpoint_from(env),
            dynamodb_endpoint_url=endpoint_from(env, "dynamodb"),
            tenant_max_running=_count(env, "TENANT_MAX_RUNNING_JOBS", 0),
            tenant_slots_table=env.get("TENANT_SLOTS_TABLE_NAME") or None,
            fair_ingest_queue_url=env.get("FAIR_INGEST_QUEUE_URL") or None,
            file_removals_queue_url=env.get("FILE_REMOVALS_QUEUE_URL") or None,
            outputs_purge_delay=timedelta(seconds=_number(env, "OUTPUTS_PURGE_DELAY_SECONDS", 360)),
            ops_table=env.get("OPS_TABLE_NAME") or None,
            operations_queue_url=env.get("OPERATIONS_QUEUE_URL") or None,
            operation_rate=_count(env, "OPERATION_RATE", 50) or 50,
            webhooks_queue_url=env.get("WEBHOOKS_QUEUE_URL") or None,
            webhooks_local_mode=env.get(WEBHOOKS_LOCAL_MODE_VARIABLE) == "1",
            webhook_secrets_key_arn=env.get("WEBHOOK_SECRETS_KEY_ARN") or None,
            webhook_secrets_use=env.get("WEBHOOK_SECRETS_USE") or None,
            schedule_group=env.get("SCHEDULE_GROUP_NAME") or None,
            operations_queue_arn=env.get("OPERATIONS_QUEUE_ARN") or None,
            scheduler_role_arn=env.get("SCHEDULER_ROLE_ARN") or None,
            schedule_dead_letter_arn=env.get("SCHEDULE_DEAD_LETTER_ARN") or None,
            keep_last=_keep_last(env),
            page_token_secret_arn=env.get("API_TOKEN_SECRET_ARN") or None,
            page_token_secret=env.get("API_TOKEN_SECRET") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            function_name=env.get("AWS_LAMBDA_FUNCTION_NAME", "worker"),
            thumbnail_sizes=env.get("THUMBNAIL_SIZES"),
        )

    @property
    def uses_clamav(self) -> bool:
        return self.scan_engines == CLAMAV_AND_YARA

    def require_ops_table(self) -> str:
        if not self.ops_table:
            raise ConfigurationError("OPS_TABLE_NAME is not set")
        return self.ops_table

    def require_operations_queue(self) -> str:
        if not self.operations_queue_url:
            raise ConfigurationError("OPERATIONS_QUEUE_URL is not set")
        return self.operations_queue_url

    def require_webhooks_queue(self) -> str:
        if not self.webhooks_queue_url:
            raise ConfigurationError("WEBHOOKS_QUEUE_URL is not set")
        return self.webhooks_queue_url

    def require_scheduler(self) -> tuple[str, str, str]:
        """The schedule group, the operations queue's ARN and the scheduler's role."""
        if not (self.schedule_group and self.operations_queue_arn and self.scheduler_role_arn):
            raise ConfigurationError(
                "SCHEDULE_GROUP_NAME, OPERATIONS_QUEUE_ARN and SCHEDULER_ROLE_ARN must be set"
            )
        return self.schedule_group, self.operations_queue_arn, self.scheduler_role_arn

    def require_uploads_bucket(self) -> str:
        if not self.uploads_bucket:
            raise ConfigurationError("environment variable UPLOADS_BUCKET is not set")
        return self.uploads_bucket

    def require_outputs_bucket(self) -> str:
        if not self.outputs_bucket:
            raise ConfigurationError("environment variable OUTPUTS_BUCKET is not set")
        return self.outputs_bucket

    def require_quarantine_bucket(self) -> str:
        if not self.quarantine_bucket:
            raise ConfigurationError("environment variable QUARANTINE_BUCKET is not set")
        return self.quarantine_bucket

    def require_fair_ingest_queue(self) -> str:
        if not self.fair_ingest_queue_url:
            raise ConfigurationError("environment variable FAIR_INGEST_QUEUE_URL is not set")
        return self.fair_ingest_queue_url

    def require_event_bus(self) -> str:
        if not self.event_bus:
            raise ConfigurationError("environment variable EVENT_BUS_NAME is not set")
        return self.event_bus


@dataclass(frozen=True)
class CallerSettings:
    """Whom the API recognises as its callers (access.py): the Cognito group of operators, the
    stack's API roles (API_*_ROLE and their unique ids, API_*_ROLE_ID, in API_ACCOUNT_ID), and
    whether the local-caller header is read (both switches on: SAM's container and the local
    stack's env file, neither of which a deployed function runs under)."""

    operator_group: str = "operators"
    account_id: str | None = None
    operator_role: str | None = None
    operator_role_id: str | None = None
    tenant_role: str | None = None
    tenant_role_id: str | None = None
    local_callers: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> CallerSettings:
        return cls(
            operator_group=env.get("API_OPERATOR_GROUP", "operators"),
            account_id=env.get("API_ACCOUNT_ID"),
            operator_role=env.get("API_OPERATOR_ROLE"),
            operator_role_id=env.get("API_OPERATOR_ROLE_ID"),
            tenant_role=env.get("API_TENANT_ROLE"),
            tenant_role_id=env.get("API_TENANT_ROLE_ID"),
            local_callers=(
                env.get(SAM_LOCAL_VARIABLE) == "true"
                and env.get(LOCAL_CALLERS_VARIABLE) == LOCAL_CALLERS_BY_HEADER
            ),
        )


@dataclass(frozen=True)
class ApiSettings:
    """The API function's own: the web apps' origins (the template's UploadsAllowedOrigins,
    joined by ','), whose pages may call it from the browser; none by default (no CORS header),
    and the uploads bucket GET /files?key= looks a key up in."""

    allowed_origins: tuple[str, ...] = ()
    uploads_bucket: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ApiSettings:
        origins = env.get("API_ALLOWED_ORIGINS", "").split(",")
        return cls(
            allowed_origins=tuple(o.strip() for o in origins if o.strip()),
            uploads_bucket=env.get("UPLOADS_BUCKET"),
        )


@dataclass(frozen=True)
class UpdaterVariables:
    """The definitions updater's environment (template.yaml's DefinitionsUpdater), checked;
    its handler parses the mirror's three (DEFINITIONS_MIRROR, OFFICIAL_DATABASES,
    DEFINITIONS_CUSTOM_URLS) into the mirror's settings."""

    bucket: str
    prefix: str = "signatures/"
    freshclam: str = "freshclam"
    clamscan: str = "clamscan"
    mirror: str = ""
    official_databases: str = "main,daily,bytecode"
    custom_urls: str = ""
    uses_clamav: bool = True  # ScanEngines clamav+yara; "yara": no ClamAV database is fetched
    max_age: timedelta = timedelta(hours=48)
    keep: int = 3
    endpoint_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> UpdaterVariables:
        bucket = env.get("SIGNATURES_BUCKET")
        if not bucket:
            raise ConfigurationError("environment variable SIGNATURES_BUCKET is not set")
        engines = env.get("SCAN_ENGINES", CLAMAV_AND_YARA)
        if engines not in (CLAMAV_AND_YARA, YARA_ONLY):
            raise ConfigurationError(
                f"SCAN_ENGINES must be one of {', '.join((CLAMAV_AND_YARA, YARA_ONLY))}"
            )
        return cls(
            bucket=bucket,
            prefix=env.get("SIGNATURES_PREFIX", "signatures/"),
            freshclam=env.get("FRESHCLAM", "freshclam"),
            clamscan=env.get("CLAMSCAN", "clamscan"),
            mirror=env.get("DEFINITIONS_MIRROR", ""),
            official_databases=env.get("OFFICIAL_DATABASES", "main,daily,bytecode"),
            custom_urls=env.get("DEFINITIONS_CUSTOM_URLS", ""),
            uses_clamav=engines == CLAMAV_AND_YARA,
            max_age=timedelta(hours=_at_least(env, "MAX_DEFINITIONS_AGE_HOURS", "48", 1)),
            keep=int(_at_least(env, "DEFINITIONS_KEEP", "3", 1)),
            endpoint_url=endpoint_from(env),
        )


def worker_job_type(env: Mapping[str, str] = os.environ) -> JobType:
    """The job type a worker function runs (JOB_TYPE, one per worker in the template)."""
    return JobType(env["JOB_TYPE"])


def started_by_lambda(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is a Lambda execution environment's (Lambda alone sets
    AWS_LAMBDA_INITIALIZATION_TYPE): tests and the local stack, which start many workers at
    once, do not pay a worker's warm-up at import."""
    return bool(env.get("AWS_LAMBDA_INITIALIZATION_TYPE"))


def powertools_names(env: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """(service, metrics namespace): Powertools' own variables, "filejobs" when unset or empty."""
    service = env.get("POWERTOOLS_SERVICE_NAME") or "filejobs"
    return service, env.get("POWERTOOLS_METRICS_NAMESPACE") or "filejobs"


@dataclass(frozen=True)
class ReconcilerSettings:
    """The reconciler's schedule and how long an upload's notification may still be on its way
    (RECONCILE_EVERY_MINUTES, RECONCILE_GRACE_SECONDS; the template's defaults when unset)."""

    every: timedelta = timedelta(minutes=15)
    grace: timedelta = timedelta(seconds=120)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ReconcilerSettings:
        defaults = cls()
        every = env.get("RECONCILE_EVERY_MINUTES")
        grace = env.get("RECONCILE_GRACE_SECONDS")
        return cls(
            every=timedelta(minutes=float(every)) if every else defaults.every,
            grace=timedelta(seconds=float(grace)) if grace else defaults.grace,
        )


@dataclass(frozen=True)
class RescanSettings:
    """The rescan policy (RescanAfterDays, RescanDefinitionsBefore, RescanMaxPerRun): verdicts
    older than `older_than`, or given with definitions before `definitions_before`, are scanned
    again, at most `per_run` files a run. Neither: the policy is off."""

    older_than: timedelta | None = None
    definitions_before: str | None = None
    per_run: int = 500

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> RescanSettings:
        days = env.get("RESCAN_AFTER_DAYS", "0") or "0"
        per_run = env.get("RESCAN_MAX_PER_RUN", str(cls.per_run))
        if not days.isdigit() or not per_run.isdigit() or int(per_run) < 1:
            raise ConfigurationError(
                "RESCAN_AFTER_DAYS and RESCAN_MAX_PER_RUN must be whole numbers"
            )
        return cls(
            older_than=timedelta(days=int(days)) if int(days) else None,
            definitions_before=env.get("RESCAN_DEFINITIONS_BEFORE", "").strip() or None,
            per_run=int(per_run),
        )


@dataclass(frozen=True)
class OfficeSettings:
    """Where LibreOffice is (processors/office_runtime.py): FILEJOBS_SOFFICE names a program
    outright; else the layer unpacked at FILEJOBS_LIBREOFFICE_LAYER (/opt/libreoffice unless
    set)."""

    soffice: str | None = None
    layer: Path = LIBREOFFICE_LAYER_DIR

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> OfficeSettings:
        layer = env.get("FILEJOBS_LIBREOFFICE_LAYER")
        return cls(
            soffice=env.get("FILEJOBS_SOFFICE") or None,
            layer=Path(layer) if layer else LIBREOFFICE_LAYER_DIR,
        )


def inherited(names: Iterable[str], env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Those of `names` this process's environment holds, to hand on to a program it starts
    (the decoders' zygote, ClamAV's programs): what the OS gave the process, not a setting, and
    nothing beyond `names`, so no credential reaches a program that parses hostile files."""
    return {name: env[name] for name in names if name in env}


def endpoint_from(env: Mapping[str, str], service: str | None = None) -> str | None:
    """Where the functions' clients send their requests: AWS's own endpoints (None) unless the
    environment points them elsewhere, `service`'s own endpoint first.

    The template declares `FILEJOBS_ENDPOINT_URL` and `FILEJOBS_ENDPOINT_URL_DYNAMODB`, empty on
    AWS, so that `sam local` can set them (it overrides only variables the template declares):
    botocore's own `AWS_ENDPOINT_URL` cannot be declared, as an empty one is not "unset" to it.
    """
    names = ["FILEJOBS_ENDPOINT_URL", "AWS_ENDPOINT_URL"]
    if service is not None:
        suffix = service.upper()
        names[:0] = [f"FILEJOBS_ENDPOINT_URL_{suffix}", f"AWS_ENDPOINT_URL_{suffix}"]
    return next((url for name in names if (url := env.get(name))), None)


def tenant_quotas_from(env: Mapping[str, str]) -> TenantQuotas:
    defaults = DEFAULT_TENANT_QUOTAS
    return TenantQuotas(
        files_per_day=_count(env, "TENANT_MAX_FILES_PER_DAY", defaults.files_per_day),
        bytes_per_day=_count(env, "TENANT_MAX_BYTES_PER_DAY", defaults.bytes_per_day),
        max_file_bytes=_count(env, "TENANT_MAX_FILE_BYTES", defaults.max_file_bytes),
        max_in_flight_jobs=_count(env, "TENANT_MAX_IN_FLIGHT_JOBS", defaults.max_in_flight_jobs),
    )


def dead_letter_url_variable(job_type: JobType) -> str:
    return f"DEAD_LETTER_QUEUE_URL_{job_type.value.upper()}"


def queue_url_variable(job_type: JobType, lane: Lane) -> str:
    """QUEUE_URL_{TYPE} for the normal lane, QUEUE_URL_{TYPE}_HIGH and QUEUE_URL_{TYPE}_LOW."""
    suffix = "" if lane is Lane.NORMAL else f"_{lane.value.upper()}"
    return f"QUEUE_URL_{job_type.value.upper()}{suffix}"


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise ConfigurationError(f"environment variable {name} is not set")
    return value


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed` (the first when unset): a misspelt value stops the function, it does
    not quietly pick a weaker setting."""
    value = env.get(name) or allowed[0]
    if value not in allowed:
        raise ConfigurationError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _number(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ConfigurationError(f"{name} must be a positive whole number; got {value!r}")
    return int(value)


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    """A whole number, 0 included (a quota of 0 is unlimited)."""
    value = env.get(name)
    if not value:
        return default
    if not value.isascii() or not value.isdigit():
        raise ConfigurationError(f"{name} must be a whole number (0: unlimited); got {value!r}")
    return int(value)


def _at_least(env: Mapping[str, str], name: str, default: str, minimum: float) -> float:
    """A number (a fraction allowed) of at least `minimum`."""
    value = env.get(name, default)
    try:
        number = float(value)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {value!r}") from None
    if number < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum:g}, got {value!r}")
    return number


def _keep_last(env: Mapping[str, str]) -> dict[JobType, int]:
    try:
        return keep_last_setting(env.get("KEEP_LAST_FINISHED_JOBS"))
    except ValueError as error:
        raise ConfigurationError(str(error)) from error
