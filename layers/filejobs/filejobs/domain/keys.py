"""Deterministic identities, and the object keys of derived and quarantined files.

Ids are UUIDv5 of what makes a thing unique, so a duplicate delivery computes the same id and a
conditional put (`attribute_not_exists(id)`) turns it into a no-op: idempotency with no lookup.
"""

from __future__ import annotations

import re
import uuid

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError

# A tenant: the first segment of an upload key (`uploads/{tenant}/...`), a caller's scope, and a
# part of index keys, so it is kept to characters that are safe in all of them.
TENANT_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
_TENANT = re.compile(TENANT_PATTERN)


def is_tenant(text: str) -> bool:
    # fullmatch: with match(), "$" also matches before a final newline ("acme\n").
    return _TENANT.fullmatch(text) is not None


_NAMESPACE = uuid.UUID("6f1f4c1e-5d0a-4c0e-9a57-2f3b7d1c9e11")


def file_id_for(bucket: str, key: str, version: str) -> str:
    """One id per object version; `version` is the S3 version id, or the event sequencer."""
    return str(uuid.uuid5(_NAMESPACE, f"file\x00{bucket}\x00{key}\x00{version}"))


def job_id_for(tenant: str, idempotency_key: str) -> str:
    """The idempotency key *is* the job's identity within its tenant: it is held for as long as
    the job's item is kept, and free again once TTL has deleted it (docs/JOBS.md)."""
    return str(uuid.uuid5(_NAMESPACE, f"job\x00{tenant}\x00{idempotency_key}"))


def ingest_idempotency_key(file_id: str, job_type: JobType) -> str:
    return f"ingest:{file_id}:{job_type.value}"


def ingest_job_types(tenant: str, file_id: str) -> dict[str, JobType]:
    """The id the ingest gives each type's job on a file, and that type: a file's ingest jobs
    are found (or a job id told to be one) with no read."""
    return {
        job_id_for(tenant, ingest_idempotency_key(file_id, job_type)): job_type
        for job_type in JobType
    }


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


def quarantine_prefix(tenant: str, file_id: str) -> str:
    """The folder of a file's quarantined copy."""
    return f"{QUARANTINE_PREFIX}/{tenant}/{file_id}/"


def quarantine_key(tenant: str, file_id: str, key: str) -> str:
    name = _CONTROL.sub("_", key.rsplit("/", 1)[-1]) or "object"
    encoded = name.encode()
    if len(encoded) > _QUARANTINE_NAME_BYTES:
        # Cut on a character boundary: a key must stay valid UTF-8.
        name = encoded[:_QUARANTINE_NAME_BYTES].decode(errors="ignore")
    return f"{quarantine_prefix(tenant, file_id)}{name}"
