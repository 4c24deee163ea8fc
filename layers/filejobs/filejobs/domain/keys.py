"""Deterministic identities and the sharded index keys.

Ids are UUIDv5 of what makes a thing unique, so a duplicate delivery computes the same id and a
conditional put (`attribute_not_exists(id)`) turns it into a no-op: idempotency with no lookup.

Index keys that many writes share are write-sharded: `shard_of(id)` spreads items over N
partitions of the index, and a reader queries the N shards and merges. See docs/TABLE_DESIGN.md
for the partition arithmetic behind each N.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime

from filejobs.domain.job import PRIORITY_MAX, JobStatus, JobType
from filejobs.domain.retry import PermanentError

# A tenant: the first segment of an upload key (`uploads/{tenant}/...`), a caller's scope, and a
# part of index keys, so it is kept to characters that are safe in all of them.
TENANT_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
_TENANT = re.compile(TENANT_PATTERN)


def is_tenant(text: str) -> bool:
    # fullmatch: with match(), "$" also matches before a final newline ("acme\n").
    return _TENANT.fullmatch(text) is not None


# Fixed width, so string order is time order (isoformat() drops zero microseconds).
SORTABLE_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"

_NAMESPACE = uuid.UUID("6f1f4c1e-5d0a-4c0e-9a57-2f3b7d1c9e11")

# Partitions per sharded index key (docs/TABLE_DESIGN.md has the arithmetic). Changing a count
# after data exists strands items in shards readers no longer query: treat them as fixed.
STATUS_SHARDS = 32
SWEEP_SHARDS = 256
TENANT_SHARDS = 16
FILE_TENANT_SHARDS = 16
SCAN_AGE_SHARDS = 16


def file_id_for(bucket: str, key: str, version: str) -> str:
    """One id per object version; `version` is the S3 version id, or the event sequencer."""
    return str(uuid.uuid5(_NAMESPACE, f"file\x00{bucket}\x00{key}\x00{version}"))


def job_id_for(tenant: str, idempotency_key: str) -> str:
    """The idempotency key *is* the job's identity within its tenant: it is never released."""
    return str(uuid.uuid5(_NAMESPACE, f"job\x00{tenant}\x00{idempotency_key}"))


def ingest_idempotency_key(file_id: str, job_type: JobType) -> str:
    return f"ingest:{file_id}:{job_type.value}"


def shard_of(item_id: str, shards: int) -> int:
    # UUIDs (v4 or v5) are uniformly distributed: their integer value is a fair shard hash.
    return uuid.UUID(item_id).int % shards


def status_type_key(status: JobStatus, job_type: JobType, job_id: str) -> str:
    return f"{status.value}#{job_type.value}#{shard_of(job_id, STATUS_SHARDS):02d}"


def status_type_partitions(status: JobStatus, job_type: JobType) -> list[str]:
    return [f"{status.value}#{job_type.value}#{n:02d}" for n in range(STATUS_SHARDS)]


def queue_order(priority: int, created_at: datetime) -> str:
    """Sorts higher priority first, then older first (ascending string order)."""
    return f"{PRIORITY_MAX - priority:03d}#{created_at.strftime(SORTABLE_TIME)}"


def tenant_key(tenant: str, job_id: str) -> str:
    return f"{tenant}#{shard_of(job_id, TENANT_SHARDS):02d}"


def tenant_partitions(tenant: str) -> list[str]:
    return [f"{tenant}#{n:02d}" for n in range(TENANT_SHARDS)]


def file_tenant_key(tenant: str, file_id: str) -> str:
    return f"{tenant}#{shard_of(file_id, FILE_TENANT_SHARDS):02d}"


def file_tenant_partitions(tenant: str) -> list[str]:
    return [f"{tenant}#{n:02d}" for n in range(FILE_TENANT_SHARDS)]


def scan_age_key(file_id: str) -> str:
    return f"scan#{shard_of(file_id, SCAN_AGE_SHARDS):02d}"


def scan_age_partitions() -> list[str]:
    return [f"scan#{n:02d}" for n in range(SCAN_AGE_SHARDS)]


def sweep_key(job_id: str) -> str:
    return f"sweep#{shard_of(job_id, SWEEP_SHARDS):03d}"


def sweep_partitions() -> list[str]:
    return [f"sweep#{n:03d}" for n in range(SWEEP_SHARDS)]


def object_ref(bucket: str, key: str) -> str:
    return f"{bucket}/{key}"


# Derived files: one folder per job under the tenant's prefix of the outputs bucket. A re-run of
# the job writes the same keys, so it overwrites its earlier outputs instead of adding copies.
DERIVED_PREFIX = "derived"
_OUTPUT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class InvalidOutputNameError(PermanentError):
    """An output name that could escape its job's folder or is not a plain file name."""


def derived_prefix(tenant: str, file_id: str) -> str:
    """Every derived file of a file (all its jobs' folders): what a quarantine withdraws."""
    return f"{DERIVED_PREFIX}/{tenant}/{file_id}/"


def derived_key(tenant: str, file_id: str, job_type: JobType, name: str) -> str:
    if not _OUTPUT_NAME.fullmatch(name) or ".." in name:
        raise InvalidOutputNameError(f"output name {name!r} is not a plain file name")
    return f"{DERIVED_PREFIX}/{tenant}/{file_id}/{job_type.value}/{name}"


# Quarantined copies: one folder per file in the quarantine bucket. The upload's own name ends
# the key, for the person who looks, cut to a bound so that any key S3 accepts (1,024 bytes of
# UTF-8) still makes a key S3 accepts here.
QUARANTINE_PREFIX = "quarantine"
_QUARANTINE_NAME_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def quarantine_key(tenant: str, file_id: str, key: str) -> str:
    name = _CONTROL.sub("_", key.rsplit("/", 1)[-1]) or "object"
    encoded = name.encode()
    if len(encoded) > _QUARANTINE_NAME_BYTES:
        # Cut on a character boundary: a key must stay valid UTF-8.
        name = encoded[:_QUARANTINE_NAME_BYTES].decode(errors="ignore")
    return f"{QUARANTINE_PREFIX}/{tenant}/{file_id}/{name}"
