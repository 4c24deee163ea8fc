"""The sharded keys of the tables' indexes: how items spread over an index's partitions.

Index keys that many writes share are write-sharded: `shard_of(id)` spreads items over N
partitions of the index, and a reader queries the N shards and merges. See docs/TABLE_DESIGN.md
for the partition arithmetic behind each N. The domain knows none of this: the repositories
derive these keys from a job's or a file's fields when they write it.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from filejobs.domain.job import PRIORITY_MAX, JobStatus, JobType

# Fixed width, so string order is time order (isoformat() drops zero microseconds).
SORTABLE_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"

# Partitions per sharded index key (docs/TABLE_DESIGN.md has the arithmetic). Changing a count
# after data exists strands items in shards readers no longer query: treat them as fixed.
STATUS_SHARDS = 32
SWEEP_SHARDS = 256
TENANT_SHARDS = 16
FILE_TENANT_SHARDS = 16
SCAN_AGE_SHARDS = 16


def shard_of(item_id: str, shards: int) -> int:
    # UUIDs (v4 or v5) are uniformly distributed: their integer value is a fair shard hash.
    return uuid.UUID(item_id).int % shards


def status_type_key(status: JobStatus, job_type: JobType, job_id: str) -> str | None:
    """The job's `by_status_type` key, or None for a running job, which that index leaves out:
    a claim and a completion then move no key there (a delete and a put each, 4 write units a
    job), and `by_sweep`, which holds every running job already, lists them."""
    if not listed_by_status(status):
        return None
    return f"{status.value}#{job_type.value}#{shard_of(job_id, STATUS_SHARDS):02d}"


def listed_by_status(status: JobStatus) -> bool:
    """Whether jobs in `status` are in `by_status_type` (every status but running)."""
    return status is not JobStatus.RUNNING


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
