"""Settings of a deployed function, read from its environment (set by template.yaml)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

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


def _keep_last(env: Mapping[str, str]) -> dict[JobType, int]:
    try:
        return keep_last_setting(env.get("KEEP_LAST_FINISHED_JOBS"))
    except ValueError as error:
        raise ConfigurationError(str(error)) from error
