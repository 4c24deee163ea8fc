"""PynamoDB models of the two tables defined in template.yaml (JobsTable, FilesTable).

The template is the source of truth for keys and indexes:
`tests/integration/test_template_tables.py` fails if these models and the template disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pynamodb.attributes import (
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
)
from pynamodb.indexes import (
    AllProjection,
    GlobalSecondaryIndex,
    IncludeProjection,
    KeysOnlyProjection,
)
from pynamodb.models import Model


class InJobsTable:
    """The Meta of every model stored in JobsTable: one table name and region for all of them.
    bind_tables points them at the stack's table, region and endpoint (runtime.tables(), from
    config.Settings; a test's own tables); these are the names before it has run."""

    table_name = "filejobs-jobs"
    region = "us-east-1"


class InFilesTable:
    """The Meta of every model stored in FilesTable (files, content index, quotas, usage)."""

    table_name = "filejobs-files"
    region = "us-east-1"


class _Audited(Model):
    """The spec's audit metadata, flattened so created_at can key an index."""

    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()
    updated_by = UnicodeAttribute()
    deleted_at = UTCDateTimeAttribute(null=True)
    deleted_by = UnicodeAttribute(null=True)


class JobsByStatusAndType(GlobalSecondaryIndex["JobModel"]):
    """Sparse: a running job is not in it (docs/TABLE_DESIGN.md): a claim and a completion then
    move no key here, and running jobs are listed from `by_sweep`, which holds every one."""

    class Meta:
        index_name = "by_status_type"
        projection = IncludeProjection(
            ["tenant", "file_id", "job_type", "status", "priority", "created_at"]
        )

    status_type_shard = UnicodeAttribute(hash_key=True)
    queue_order = UnicodeAttribute(range_key=True)


class JobsByTenant(GlobalSecondaryIndex["JobModel"]):
    class Meta:
        index_name = "by_tenant"
        projection = IncludeProjection(["file_id", "job_type", "status", "priority"])

    tenant_shard = UnicodeAttribute(hash_key=True)
    created_at = UTCDateTimeAttribute(range_key=True)


class JobsDueForSweep(GlobalSecondaryIndex["JobModel"]):
    """Sparse: only jobs with a `sweep_at` (every active job, no finished one) are in it."""

    class Meta:
        index_name = "by_sweep"
        projection = AllProjection()

    sweep_shard = UnicodeAttribute(hash_key=True)
    sweep_at = UTCDateTimeAttribute(range_key=True)


class JobModel(_Audited):
    class Meta(InJobsTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    file_id = UnicodeAttribute()
    job_type = UnicodeAttribute()
    tenant = UnicodeAttribute()
    idempotency_key = UnicodeAttribute()
    status = UnicodeAttribute()
    priority = NumberAttribute()
    input_data: MapAttribute[Any, Any] = MapAttribute(null=True)
    result_data: MapAttribute[Any, Any] = MapAttribute(null=True)
    error_message = UnicodeAttribute(null=True)
    started_at = UTCDateTimeAttribute(null=True)
    completed_at = UTCDateTimeAttribute(null=True)
    retry_count = NumberAttribute()
    max_retries = NumberAttribute()
    scheduled_at = UTCDateTimeAttribute(null=True)
    lease_expires_at = UTCDateTimeAttribute(null=True)
    attempt = NumberAttribute()
    # {"<attempt number>": {started_at, ended_at, outcome, error}}: a map, so an attempt's entry
    # is written by path with no read, and the oldest dropped by path to keep it bounded.
    attempts: MapAttribute[Any, Any] = MapAttribute()
    dispatch_count = NumberAttribute()
    dispatched_at = UTCDateTimeAttribute(null=True)
    triggered_by = UnicodeAttribute(null=True)
    cancelled_by = UnicodeAttribute(null=True)
    cancel_reason = UnicodeAttribute(null=True)
    expires_at = NumberAttribute(null=True)  # DynamoDB TTL, epoch seconds
    # The running attempt's progress and log so far (domain/attempt_notes.py), written by its
    # heartbeats: {attempt, updated_at, fraction, message, log, log_dropped}.
    progress: MapAttribute[Any, Any] = MapAttribute(null=True)

    # Index keys, derived from the fields above by the repository on every write.
    status_type_shard = UnicodeAttribute(null=True)  # None while running (by_status_type)
    queue_order = UnicodeAttribute()
    tenant_shard = UnicodeAttribute()
    sweep_shard = UnicodeAttribute(null=True)  # only with a sweep_at (by_sweep is sparse)
    sweep_at = UTCDateTimeAttribute(null=True)

    by_status_type = JobsByStatusAndType()
    by_tenant = JobsByTenant()
    by_sweep = JobsDueForSweep()


class FilesByObject(GlobalSecondaryIndex["FileModel"]):
    class Meta:
        index_name = "by_object"
        projection = AllProjection()

    object_ref = UnicodeAttribute(hash_key=True)
    created_at = UTCDateTimeAttribute(range_key=True)


class FilesByTenantKey(GlobalSecondaryIndex["FileModel"]):
    class Meta:
        index_name = "by_tenant_key"
        projection = KeysOnlyProjection()

    tenant_shard = UnicodeAttribute(hash_key=True)
    key = UnicodeAttribute(range_key=True)


class FilesByScanAge(GlobalSecondaryIndex["FileModel"]):
    """Sparse: only active files with a clean verdict (a `scan_shard`) are in it."""

    class Meta:
        index_name = "by_scan_age"
        projection = IncludeProjection(["tenant", "definitions_version"])

    scan_shard = UnicodeAttribute(hash_key=True)
    scanned_at = UTCDateTimeAttribute(range_key=True)


class FilesByContent(GlobalSecondaryIndex["FileModel"]):
    """Sparse: only files whose content is hashed (a `sha256`) are in it."""

    class Meta:
        index_name = "by_content"
        projection = KeysOnlyProjection()

    sha256 = UnicodeAttribute(hash_key=True)
    tenant_shard = UnicodeAttribute(range_key=True)


class FileModel(_Audited):
    class Meta(InFilesTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    tenant = UnicodeAttribute()
    bucket = UnicodeAttribute()
    key = UnicodeAttribute()
    object_ref = UnicodeAttribute()
    version_id = UnicodeAttribute(null=True)
    etag = UnicodeAttribute()
    sequencer = UnicodeAttribute(null=True)
    size = NumberAttribute()
    content_type = UnicodeAttribute()
    sha256 = UnicodeAttribute(null=True)
    status = UnicodeAttribute()
    status_reason = UnicodeAttribute(null=True)
    scan_status = UnicodeAttribute(null=True)  # the virus scan's: clean, infected, unscannable
    # The verdict's evidence (domain.file.ScanRecord): engines, definitions, signatures, job.
    # Not `scan`: that is Model.scan (a table scan) to PynamoDB; stored under the name "scan".
    scan_record: MapAttribute[Any, Any] = MapAttribute(null=True, attr_name="scan")
    scanned_at = UTCDateTimeAttribute(null=True)
    definitions_version = UnicodeAttribute(null=True)
    # The uploader's tags the verdict tag displaced from the version (S3 keeps at most 10).
    displaced_tags: MapAttribute[Any, Any] = MapAttribute(null=True)
    duplicate_of = UnicodeAttribute(null=True)
    # Jobs requested through the API (POST /files/{id}/jobs), counted by a conditional ADD in the
    # same transaction as each job's put: at most domain/quotas.API_JOBS_PER_FILE.
    api_jobs = NumberAttribute(null=True)
    # The file's jobs, ADDed in the same write as each job (domain/file.py), up to
    # domain/quotas.NAMED_JOBS_PER_FILE; the jobs added past them are only counted here (found
    # through the jobs' by_tenant index from the file's creation on), so the item does not grow
    # with every rescan.
    job_ids = UnicodeSetAttribute(null=True)
    unnamed_jobs = NumberAttribute(null=True)
    # The file's last completion (domain/file_completion.py): its fingerprint and version are
    # top-level so the write that records a newer one can be conditioned on them.
    processed_fingerprint = UnicodeAttribute(null=True)
    processed_version = UnicodeAttribute(null=True)
    processed: MapAttribute[Any, Any] = MapAttribute(null=True)
    # The upload preset that chose its jobs ({name, version, by}; domain/presets.py), and why a
    # preset the upload named was not applied.
    preset: MapAttribute[Any, Any] = MapAttribute(null=True)
    preset_note = UnicodeAttribute(null=True)

    # Index keys, derived by the repository: tenant_shard at ingest; scan_shard while the file
    # is active and clean (the rescan policy's sparse index).
    tenant_shard = UnicodeAttribute(null=True)
    scan_shard = UnicodeAttribute(null=True)

    by_object = FilesByObject()
    by_tenant_key = FilesByTenantKey()
    by_scan_age = FilesByScanAge()
    by_content = FilesByContent()


class ContentIndexModel(Model):
    """The content index, in FilesTable: which file of a tenant first had some content.

    Its ids (`sha256#{tenant}#{hex}`) never collide with a file's UUID, and it has no
    `object_ref`, so it is not in `by_object`. Written once, by a conditional put.
    """

    class Meta(InFilesTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    file_id = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()


class ImageBucketModel(Model):
    """A bucket of the near-duplicate index (domain/similar_images.py), in FilesTable: id
    `phash#{tenant}#{band}#{value}`, `members` the tenant's images listed there, each as
    `{file_id}:{hash}` (a string set: ADD makes it where there is none, in the same request).
    No `object_ref`, `sha256` or shard: in no index of the table."""

    class Meta(InFilesTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    members = UnicodeSetAttribute(null=True)


class ImageHashModel(Model):
    """The hash an image was listed under (id `phash#{tenant}#file#{file_id}`): its erasure
    finds its buckets by it. Under the same `phash#` prefix as the buckets, the one part of the
    files table a thumbnail worker may write (its role's LeadingKeys condition)."""

    class Meta(InFilesTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    hash = UnicodeAttribute()


class QuotaModel(Model):
    """A tenant's own upload limits, in FilesTable (id `quota#{tenant}`): an attribute only for
    each limit an operator set (the rest are the defaults). Written by one UpdateItem."""

    class Meta(InFilesTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    tenant = UnicodeAttribute()
    files_per_day = NumberAttribute(null=True)
    bytes_per_day = NumberAttribute(null=True)
    max_file_bytes = NumberAttribute(null=True)
    max_in_flight_jobs = NumberAttribute(null=True)
    rescans_per_day = NumberAttribute(null=True)
    rescans_per_file_per_day = NumberAttribute(null=True)
    operations_per_day = NumberAttribute(null=True)
    max_running_operations = NumberAttribute(null=True)
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


class UsageModel(Model):
    """What a tenant uploaded in one UTC day, in FilesTable (id `usage#{tenant}#{YYYY-MM-DD}`):
    counted by the ingest's transaction with a conditional ADD, expired by TTL."""

    class Meta(InFilesTable):
        pass

    id = UnicodeAttribute(hash_key=True)
    tenant = UnicodeAttribute()
    day = UnicodeAttribute()
    files = NumberAttribute(null=True)
    bytes = NumberAttribute(null=True)
    # Rescans and bulk operations started that day (a file's own day item counts only rescans).
    rescans = NumberAttribute(null=True)
    operations = NumberAttribute(null=True)
    expires_at = NumberAttribute(null=True)  # DynamoDB TTL, epoch seconds


POOL_CONNECTIONS = 32

# Every model, by the table it is stored in: bind_tables binds each (a model left out would keep
# whatever table and region it was last given).
JOBS_TABLE_MODELS: tuple[type[Model], ...] = (JobModel,)
FILES_TABLE_MODELS: tuple[type[Model], ...] = (
    FileModel,
    ContentIndexModel,
    ImageBucketModel,
    ImageHashModel,
    QuotaModel,
    UsageModel,
)


@dataclass(frozen=True)
class Tables:
    """The tables the models are bound to (bind_tables)."""

    jobs: str
    files: str
    endpoint_url: str | None


def bind_tables(
    *,
    jobs_table: str,
    files_table: str,
    region: str | None = None,
    endpoint_url: str | None = None,
) -> Tables:
    """Point the models at concrete tables (a Lambda's environment, a test, the local stack)."""
    bindings: tuple[tuple[type[Model], str], ...] = (
        *((model, jobs_table) for model in JOBS_TABLE_MODELS),
        *((model, files_table) for model in FILES_TABLE_MODELS),
    )
    for model, name in bindings:
        meta: Any = model.Meta
        meta.table_name = name
        if region:
            meta.region = region
        meta.host = endpoint_url
        # The sweep and the listings query 16 shards at once (job_repository._FAN_OUT); with
        # botocore's default pool of 10 connections each extra thread opened and dropped one.
        meta.max_pool_connections = POOL_CONNECTIONS
        # PynamoDB caches one connection per model class; drop it so the new target is used.
        model._connection = None
    return Tables(jobs_table, files_table, endpoint_url)
