"""A file's life after its upload follows its object in S3: the pure rules.

S3 says that something was removed from a key (`ObjectRemoved:Delete`: a version or a delete
marker is gone for good; `ObjectRemoved:DeleteMarkerCreated`: a delete hid the current version),
at least once, in any order, sometimes late. So a removal is never applied as the event says:
the key's versions are read as they are *now* and every recorded file of the key is brought in
line with them (`follow_s3`). That is idempotent, and two events of one key read in either order
reach the same state.

- A file whose version is gone from the bucket is **deleted** (reason: its version was deleted).
- A file whose version is the newest one of a key whose latest entry is a delete marker is
  **deleted** (reason: a delete marker hides it). Older noncurrent versions were superseded by
  a newer upload before, and stay as they were.
- A file deleted by a delete marker whose version is the key's current version again (the marker
  was deleted: S3's way to undelete) is **restored**: active again, and the jobs the deletion
  cancelled or whose outputs it deleted are run again, so its outputs come back.
- A quarantined file (the virus scan moved its version out itself) and a rejected upload (it
  never had jobs or outputs) are left as they are; so is a file the scan found infected and is
  quarantining: its verdict is recorded before the move, whose own ObjectRemoved notification
  must not mark the file deleted before the scan marks it quarantined (the chaos run saw it).

- A delete marker can beat the upload's own ingest (an app that uploads and at once deletes,
  a backlog of uploads): no file is recorded yet when the removal is read, and the ingest then
  reads the version by its id, which a marker does not hide. So a removal that finds no file,
  while a marker hides versions of the key, is read again later (`FOLLOW_AGAIN_AFTER`), by when
  the ingest has recorded the file and it is deleted as any other.

Deleting a file cancels its open jobs and deletes its derived outputs. Erasing it (the API's
`DELETE /files/{id}`, a tenant's erasure) goes further: every version of its key, its jobs and
its own record are removed, and only an audit record that holds no content is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob

# Who the lifecycle's writes are recorded as (`updated_by`, `cancelled_by`, `deleted_by`).
FOLLOWS_S3 = "s3:lifecycle"
# S3's id of the version of an object written while the bucket was not versioned.
NULL_VERSION = "null"


class RemovalKind(StrEnum):
    VERSION_DELETED = "ObjectRemoved:Delete"
    DELETE_MARKER_CREATED = "ObjectRemoved:DeleteMarkerCreated"


@dataclass(frozen=True)
class ObjectRemoved:
    """What an S3 ObjectRemoved record says (key URL-decoded): only which key to look at again.
    `attempt`: which reading of it this is (more than 1: read again, see FOLLOW_AGAIN_AFTER)."""

    bucket: str
    key: str
    kind: RemovalKind
    version_id: str | None = None
    sequencer: str | None = None
    attempt: int = 1

    def to_dict(self) -> dict[str, object]:
        return {
            "bucket": self.bucket,
            "key": self.key,
            "kind": self.kind.value,
            "version_id": self.version_id,
            "sequencer": self.sequencer,
            "attempt": self.attempt,
        }


# When a removal that found no recorded file under a delete marker is read again: soon, for the
# usual race with an ingest seconds behind; then up to SQS's longest delay, for a backlog.
FOLLOW_AGAIN_AFTER = (
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=15),
    timedelta(minutes=15),
)


@dataclass(frozen=True)
class KeyVersions:
    """One key's versions as S3 lists them now. `real` are the version ids of the object's
    versions (not delete markers), newest first; `marker_on_top`: its latest entry is a delete
    marker (a GET of the key answers 404)."""

    real: tuple[str, ...]
    marker_on_top: bool

    @property
    def current(self) -> str | None:
        """The version a GET of the key reads; None while a delete marker hides the key."""
        return None if self.marker_on_top or not self.real else self.real[0]

    @property
    def hidden(self) -> str | None:
        """The version the delete marker on top hides (the newest real one)."""
        return self.real[0] if self.marker_on_top and self.real else None


class DeletionReason(StrEnum):
    VERSION_DELETED = "its version was deleted from the uploads bucket"
    DELETE_MARKER = "a delete marker hides its version (delete the marker to restore it)"


@dataclass(frozen=True)
class Withdraw:
    """Mark the file deleted (if it is not yet), cancel its open jobs, delete its outputs. Also
    given for a file deleted already: a delivery that died half way is finished by the next."""

    file: StoredFile
    reason: DeletionReason

    @property
    def marks(self) -> bool:
        """Whether the file's record must be written (it is not deleted with this reason yet)."""
        stored = self.file
        return stored.status is not FileStatus.DELETED or stored.status_reason != self.reason


@dataclass(frozen=True)
class Restore:
    file: StoredFile


type Change = Withdraw | Restore


def follow_again_after(versions: KeyVersions, attempt: int) -> timedelta | None:
    """When to read again a removal that found no recorded file of its key (this was its
    `attempt`-th reading, from 1): while a marker hides a version the ingest may yet record;
    None when nothing is hidden (never uploaded, erased, undeleted) or the attempts are spent."""
    if versions.hidden is None or attempt > len(FOLLOW_AGAIN_AFTER):
        return None
    return FOLLOW_AGAIN_AFTER[attempt - 1]


def version_of(stored: StoredFile) -> str:
    return stored.version_id or NULL_VERSION


def follow_s3(
    files: Sequence[StoredFile], versions: KeyVersions, *, named: str | None = None
) -> list[Change]:
    """What each recorded file of one key needs, to agree with the key's versions in S3.

    A file deleted already is withdrawn again only when the event names its version (`named`)
    or its version is the hidden one: enough to finish a delivery that died half way, without
    going over every deleted version of a key rewritten a thousand times on every event."""
    changes: list[Change] = []
    present = set(versions.real)
    for stored in files:
        if not follows_s3(stored):
            continue
        version = version_of(stored)
        deleted = stored.status is FileStatus.DELETED
        if deleted and _restorable(stored, versions):
            changes.append(Restore(stored))
        elif deleted and version not in (named, versions.hidden):
            continue
        elif version not in present:
            changes.append(Withdraw(stored, DeletionReason.VERSION_DELETED))
        elif version == versions.hidden:
            changes.append(Withdraw(stored, DeletionReason.DELETE_MARKER))
        elif deleted:
            changes.append(Withdraw(stored, _kept_reason(stored) or DeletionReason.DELETE_MARKER))
    return changes


def follows_s3(stored: StoredFile) -> bool:
    """Whether the file's life follows its object: not a quarantined or rejected file, nor an
    infected one (the scan's quarantine deletes its version itself, before it records the
    quarantine: the removal it causes must not make the file `deleted` first)."""
    return (
        stored.status not in (FileStatus.QUARANTINED, FileStatus.REJECTED)
        and stored.scan_status is not ScanStatus.INFECTED
    )


def _restorable(stored: StoredFile, versions: KeyVersions) -> bool:
    return (
        stored.status_reason == DeletionReason.DELETE_MARKER.value
        and version_of(stored) == versions.current
    )


def _kept_reason(stored: StoredFile) -> DeletionReason | None:
    """A deleted file keeps the reason it was deleted with, until its version is deleted for
    good (then it reads "version deleted": it can no longer be restored)."""
    if stored.status is not FileStatus.DELETED:
        return None
    try:
        return DeletionReason(stored.status_reason or "")
    except ValueError:
        return None


def rerun_on_restore(jobs: Sequence[ProcessingJob]) -> list[ProcessingJob]:
    """The jobs a restored file runs again, the newest of each type: one the deletion cancelled
    (its work never finished), or one that completed with outputs (the deletion removed them).
    A failed job stays failed: running it again is the caller's choice (POST .../retry)."""
    newest: dict[JobType, ProcessingJob] = {}
    for job in sorted(jobs, key=lambda j: (j.metadata.created_at, j.id)):
        newest[job.job_type] = job
    return [job for job in newest.values() if _lost_by_deletion(job)]


def _lost_by_deletion(job: ProcessingJob) -> bool:
    if job.status is JobStatus.CANCELLED:
        return job.cancelled_by == FOLLOWS_S3
    return job.status is JobStatus.COMPLETED and bool(job.result_data)


def restore_idempotency_key(stored: StoredFile, job_type: JobType) -> str:
    """One key per restoration of a file and type: a redelivered restore makes no second job,
    and a later deletion and restoration makes a new one (`stored` is the deleted file: its
    `updated_at` is when it was marked deleted)."""
    moment = stored.metadata.updated_at.isoformat()
    return f"restore:{stored.id}:{job_type.value}:{moment}"


@dataclass(frozen=True)
class OutputsPurge:
    """A file's derived outputs to delete again, once no attempt that was running when it was
    deleted can still write any (a worker's timeout later)."""

    tenant: str
    file_id: str

    def to_dict(self) -> dict[str, str]:
        return {"tenant": self.tenant, "file_id": self.file_id}


def purge_still_wanted(stored: StoredFile | None) -> bool:
    """Whether a later purge still applies: the file is gone (erased) or deleted still; one
    restored since has jobs writing its outputs again."""
    return stored is None or stored.status is not FileStatus.ACTIVE


# --- erasure -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Erasure:
    """The audit record of an erasure: who, when, how much. No key, name, hash or metadata of
    the file: what it held is what was erased."""

    tenant: str
    file_ids: tuple[str, ...]
    erased_at: datetime
    erased_by: str
    versions_deleted: int
    outputs_deleted: int
    jobs_erased: int
    # The tenant erasure (an operation) this was part of; None for one file's.
    operation_id: str | None = None
    # Versions of a quarantined file's copy in the quarantine bucket (infected bytes are the
    # upload's too).
    quarantined_copies_deleted: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "tenant": self.tenant,
            "file_ids": list(self.file_ids),
            "erased_at": self.erased_at.isoformat(),
            "erased_by": self.erased_by,
            "versions_deleted": self.versions_deleted,
            "outputs_deleted": self.outputs_deleted,
            "jobs_erased": self.jobs_erased,
            "quarantined_copies_deleted": self.quarantined_copies_deleted,
            "operation_id": self.operation_id,
        }
