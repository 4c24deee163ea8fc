"""A file's life after its upload: S3's removals followed, a file or a tenant erased.

`follow` is the file-removals function's use case (functions/file_removals/app.py): an S3
ObjectRemoved record makes the key's recorded files agree with its versions in S3
(domain/file_lifecycle.py `follow_s3`). `erase` is `DELETE /files/{id}`'s and, file by file, a
tenant erasure's (services/operations.py): every version of the key, every output, job and
record of its files removed, and an audit record kept that holds none of their content.

Each change of a job or a file is one conditional write, so any step can run twice: a redelivered
record, or a request repeated after a timeout, finds the work done and does nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from filejobs.access import Caller
from filejobs.domain import transitions
from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.file_lifecycle import (
    FOLLOWS_S3,
    Change,
    DeletionReason,
    Erasure,
    ObjectRemoved,
    OutputsPurge,
    Restore,
    Withdraw,
    follow_again_after,
    follow_s3,
    follows_s3,
    purge_still_wanted,
    rerun_on_restore,
    restore_idempotency_key,
)
from filejobs.domain.ingest import DEFAULT_DISPATCH, new_job
from filejobs.domain.job import ProcessingJob
from filejobs.domain.quotas import names_another_job
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs.ports import (
    BatchDispatcher,
    DerivedOutputs,
    ErasureLog,
    FileStore,
    JobStore,
    OutputsPurges,
    QuarantinedCopies,
    UploadVersions,
)
from filejobs.services.errors import NotFoundError

ERASED = "the file was erased"


@dataclass(frozen=True)
class Withdrawn:
    """What deleting one file did."""

    file: StoredFile
    cancelled: int
    outputs_deleted: int


class FileLifecycle:
    def __init__(
        self,
        files: FileStore,
        jobs: JobStore,
        versions: UploadVersions,
        outputs: DerivedOutputs,
        dispatcher: Callable[[], BatchDispatcher],
        *,
        retention: timedelta,
        erasures: ErasureLog | None = None,
        purges: OutputsPurges | None = None,
        quarantined: QuarantinedCopies | None = None,
        dispatch: DispatchPolicy = DEFAULT_DISPATCH,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._files = files
        self._jobs = jobs
        self._versions = versions
        self._outputs = outputs
        self._dispatcher = dispatcher  # built on first use: a deletion sends no message
        self._retention = retention
        self._erasures = erasures
        self._purges = purges
        self._quarantined = quarantined
        self._dispatch = dispatch
        self._clock = clock

    # --- following S3 ---------------------------------------------------------------------------

    def follow(self, removed: ObjectRemoved) -> list[Change]:
        """The key's recorded files brought in line with its versions now; what changed."""
        files = self._files.versions_of(removed.bucket, removed.key)
        if not files:
            self._follow_again_if_hidden(removed)
            return []
        if not any(follows_s3(f) for f in files):
            # Only files S3 does not lead (a quarantine's own deletion, a rejected upload's):
            # no listing of the key is needed.
            return []
        versions = self._versions.versions(removed.bucket, removed.key)
        changes = follow_s3(files, versions, named=removed.version_id)
        for change in changes:
            if isinstance(change, Withdraw):
                self.withdraw(change.file, change.reason.value, marks=change.marks)
            else:
                self._restore(change)
        return changes

    def _follow_again_if_hidden(self, removed: ObjectRemoved) -> None:
        """No file recorded: never uploaded, erased, or not ingested yet. In the last case a
        marker hides a version the ingest will record all the same: read the removal again."""
        if self._purges is None:
            return
        delay = follow_again_after(
            self._versions.versions(removed.bucket, removed.key), removed.attempt
        )
        if delay is not None:
            self._purges.follow_later(replace(removed, attempt=removed.attempt + 1), delay)

    def withdraw(self, stored: StoredFile, reason: str, *, marks: bool = True) -> Withdrawn:
        """The file marked deleted (its `File Deleted` event comes from that write), its open jobs
        cancelled, its derived outputs deleted."""
        now = self._clock()
        after: StoredFile | None = stored
        if marks:
            after = self._files.mark_deleted(stored.id, reason=reason, at=now, by=FOLLOWS_S3)
        cancelled = self._cancel_open(stored, f"the file was deleted: {reason}", by=FOLLOWS_S3)
        deleted = self._outputs.delete_all(stored.tenant, stored.id)
        self._purge_later(stored)
        return Withdrawn(after or stored, cancelled, deleted)

    def purge(self, purge: OutputsPurge) -> int:
        """A later purge's turn: the file's outputs deleted again, unless it was restored."""
        if not purge_still_wanted(self._files.get(purge.file_id)):
            return 0
        return self._outputs.delete_all(purge.tenant, purge.file_id)

    def _purge_later(self, stored: StoredFile) -> None:
        if self._purges is not None:
            self._purges.purge_later(OutputsPurge(stored.tenant, stored.id))

    def _cancel_open(self, stored: StoredFile, reason: str, *, by: str) -> int:
        cancel = transitions.cancel(
            now=self._clock(), by=by, reason=reason, retention=self._retention
        )
        cancelled = 0
        for job in self._jobs_of(stored):
            if not job.status.is_terminal:
                written = self._jobs.apply(job.id, job.job_type, cancel)
                cancelled += isinstance(written, Applied)
        return cancelled

    def _jobs_of(self, stored: StoredFile) -> list[ProcessingJob]:
        """The file's jobs: the ones its item names, and, once it names all it may
        (domain/quotas.NAMED_JOBS_PER_FILE), the others (JobStore.jobs_of)."""
        return self._jobs.jobs_of(stored)

    def _unnamed_job_ids(self, stored: StoredFile) -> set[str]:
        """The ids of the file's jobs its item may not name (none while it names fewer than it
        may and names any: no read). Soft-deleted jobs are left out: those expire by their TTL."""
        if stored.job_ids and names_another_job(stored):
            return set()
        return {job.id for job in self._jobs.jobs_of(stored)} - stored.job_ids

    def _restore(self, change: Restore) -> None:
        """The jobs first (pending, not sent: a worker would find the file deleted still), then
        the file active again, then the messages. A delivery that dies after the first step is
        done again by the next; one that dies after the second leaves pending jobs the sweep
        sends (it sends every pending job no message took)."""
        deleted = change.file
        made = self._rerun_jobs(deleted)
        reason = DeletionReason.DELETE_MARKER.value
        now = self._clock()
        after = self._files.restore(deleted.id, reason=reason, at=now, by=FOLLOWS_S3)
        if after is None or after.status is not FileStatus.ACTIVE:
            return
        self._dispatcher().dispatch_all(made)

    def _rerun_jobs(self, deleted: StoredFile) -> list[ProcessingJob]:
        made = []
        for job in rerun_on_restore(self._jobs.get_many(deleted.job_ids)):
            again = new_job(
                deleted,
                job.job_type,
                now=self._clock(),
                created_by=FOLLOWS_S3,
                dispatch=self._dispatch,
                idempotency_key=restore_idempotency_key(deleted, job.job_type),
                priority=job.priority,
                max_retries=job.max_retries,
                input_data=dict(job.input_data or {}),
            )
            self._files.add_job(again)  # False on a redelivery: it exists, pending still
            made.append(again)
        return made

    # --- erasure --------------------------------------------------------------------------------

    def erase(self, caller: Caller, file_id: str, *, operation_id: str | None = None) -> Erasure:
        """Erase the upload for good: every version of its key in the uploads bucket, and for
        each recorded version its outputs, its quarantined copy, its jobs and its record.
        Raises NotFoundError for a file the caller may not see (as for one that does not
        exist)."""
        stored = self._files.get(file_id)
        if stored is None or not caller.may_see(stored.tenant):
            raise NotFoundError(f"no file {file_id}")
        files = self._files.versions_of(stored.bucket, stored.key) or [stored]
        # Outputs first: the versions' deletion makes S3 notify the file-removals function,
        # which would delete them itself and leave this record's count short.
        outputs = copies = 0
        for each in files:
            self._cancel_open(each, ERASED, by=caller.name)  # a running worker stops at once
            outputs += self._outputs.delete_all(each.tenant, each.id)
            if self._quarantined is not None:
                copies += self._quarantined.delete_all(each.tenant, each.id)
        # Then the content, before any record: a request that dies half way is repeated and
        # finds the file still recorded.
        versions_deleted = self._versions.delete_all(stored.bucket, stored.key)
        jobs = 0
        for each in files:
            every = each.job_ids | self._unnamed_job_ids(each)
            jobs += sum(self._jobs.erase(job_id) for job_id in sorted(every))
            self._files.erase(each)
            self._purge_later(each)
        erasure = Erasure(
            tenant=stored.tenant,
            file_ids=tuple(sorted(f.id for f in files)),
            erased_at=self._clock(),
            erased_by=caller.name,
            versions_deleted=versions_deleted,
            outputs_deleted=outputs,
            jobs_erased=jobs,
            operation_id=operation_id,
            quarantined_copies_deleted=copies,
        )
        if self._erasures is not None:
            self._erasures.record(erasure)
        return erasure
