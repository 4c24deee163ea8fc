"""FileRepository: StoredFiles, and the atomic ingest of a file with its jobs."""

from __future__ import annotations

import heapq
import itertools
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from pynamodb.connection import Connection
from pynamodb.constants import ALL_OLD
from pynamodb.exceptions import CancellationReason, DeleteError, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from filejobs.data import index_keys
from filejobs.data.content_index import ContentIndex
from filejobs.data.mapping import (
    completion_to_map,
    file_from_model,
    file_to_model,
    job_to_model,
    scan_to_map,
)
from filejobs.data.models import FileModel, JobModel, UsageModel
from filejobs.data.quota_repository import rescan_updates, usage_from, usage_id, usage_update
from filejobs.data.similar_index import SimilarImagesIndex
from filejobs.domain import keys
from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus, StoredFile
from filejobs.domain.file_completion import FileCompletion
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import ProcessingJob
from filejobs.domain.quotas import (
    DayUsage,
    QuotaSpentError,
    RescanCharge,
    SpentQuota,
    UsageCharge,
)
from filejobs.ports import (
    AlreadyIngested,
    ApiJobAdded,
    FilePage,
    FileRef,
    Ingested,
    IngestResult,
    OverQuota,
    ScannedFile,
)

# Concurrent deliveries of one record collide as TransactionConflict; a retry then finds the
# winner's file and reports "already ingested".
_CONFLICT_RETRIES = 5


class FileRepository:
    def get(self, file_id: str, *, consistent: bool = True) -> StoredFile | None:
        try:
            return file_from_model(FileModel.get(file_id, consistent_read=consistent))
        except FileModel.DoesNotExist:
            return None

    def quarantine(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        """Mark an active file quarantined, in one conditional write (and out of the rescan
        policy's index: there is nothing left to rescan).

        Returns the file as stored afterwards (already quarantined or deleted files are left as
        they are), or None when there is no such file.
        """
        return self._update_if(
            file_id,
            [
                FileModel.status.set(FileStatus.QUARANTINED.value),
                FileModel.status_reason.set(reason),
                FileModel.scan_shard.remove(),
            ],
            (FileModel.status == FileStatus.ACTIVE.value) & FileModel.deleted_at.does_not_exist(),
            at=at,
            by=by,
        )

    def record_scan(self, file_id: str, record: ScanRecord, *, by: str) -> StoredFile | None:
        """Record the virus scan's verdict and its evidence, in one conditional write; None if
        there is no such file.

        Infected is final: no later scan (a redelivered job, a rescan) can turn it into anything
        else. Unscannable can become clean or infected when a later scan gets through; a clean
        verdict is replaced by a rescan's. Only a clean verdict of an active file puts the file
        in the rescan policy's index.
        """
        verdict = record.verdict
        earlier = {
            ScanStatus.CLEAN: [ScanStatus.UNSCANNABLE],
            ScanStatus.INFECTED: [ScanStatus.CLEAN, ScanStatus.UNSCANNABLE],
            ScanStatus.UNSCANNABLE: [],
        }[verdict]
        allowed = FileModel.scan_status.does_not_exist() | FileModel.scan_status.is_in(
            verdict.value, *(status.value for status in earlier)
        )
        actions: list[Action] = [
            FileModel.scan_status.set(verdict.value),
            FileModel.scan_record.set(scan_to_map(record)),
            FileModel.scanned_at.set(record.scanned_at),
        ]
        if record.definitions_version is None:
            actions.append(FileModel.definitions_version.remove())
        else:
            actions.append(FileModel.definitions_version.set(record.definitions_version))
        if verdict is ScanStatus.CLEAN:
            # Only while active: the condition below keeps a quarantined file out of the index.
            actions.append(FileModel.scan_shard.set(index_keys.scan_age_key(file_id)))
            allowed &= FileModel.status == FileStatus.ACTIVE.value
        else:
            actions.append(FileModel.scan_shard.remove())
        return self._update_if(file_id, actions, allowed, at=record.scanned_at, by=by)

    def keep_displaced_tags(
        self, file_id: str, tags: dict[str, str], *, at: datetime, by: str
    ) -> None:
        """The uploader's tags the verdict tag displaced, on the file's record. Set, not merged:
        only the first verdict tag of a version can displace any (once it carries scan-status,
        which only the scan may retag, a verdict replaces its own tag), and a retried attempt
        displaces the same ones again."""
        self._update_if(
            file_id, [FileModel.displaced_tags.set(tags)], FileModel.id.exists(), at=at, by=by
        )

    def record_content(
        self, file_id: str, *, sha256: str, duplicate_of: str | None, at: datetime, by: str
    ) -> StoredFile | None:
        """The file's hash and duplicate_of (removed when it owns its content), in one
        UpdateItem of an existing file; None when there is none."""
        duplicate = (
            FileModel.duplicate_of.set(duplicate_of)
            if duplicate_of is not None
            else FileModel.duplicate_of.remove()
        )
        return self._update_if(
            file_id, [FileModel.sha256.set(sha256), duplicate], FileModel.id.exists(), at=at, by=by
        )

    def mark_deleted(
        self, file_id: str, *, reason: str, at: datetime, by: str
    ) -> StoredFile | None:
        """An active (or deleted) file marked deleted with `reason`, in one conditional write, out
        of the rescan policy's index. Not `deleted_at`: that hides a record from every read, and
        a file whose object was deleted is still shown, as deleted. A quarantined or rejected
        file is left as it is (and returned so)."""
        return self._update_if(
            file_id,
            [
                FileModel.status.set(FileStatus.DELETED.value),
                FileModel.status_reason.set(reason),
                FileModel.scan_shard.remove(),
            ],
            FileModel.status.is_in(FileStatus.ACTIVE.value, FileStatus.DELETED.value),
            at=at,
            by=by,
        )

    def restore(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        """A file deleted with `reason` active again, in one conditional write (back in the
        rescan policy's index when its verdict is clean)."""
        model = self.get(file_id)
        if model is None:
            return None
        actions: list[Action] = [
            FileModel.status.set(FileStatus.ACTIVE.value),
            FileModel.status_reason.remove(),
        ]
        if model.scan_status is ScanStatus.CLEAN:
            actions.append(FileModel.scan_shard.set(index_keys.scan_age_key(file_id)))
        deleted_so = (FileModel.status == FileStatus.DELETED.value) & (
            FileModel.status_reason == reason
        )
        return self._update_if(file_id, actions, deleted_so, at=at, by=by)

    def erase(self, stored: StoredFile) -> bool:
        """The file's item deleted, its content index entry when it names this file (the next
        upload of that content owns it then), and its entries in the near-duplicate index (none
        of an erased image stays to be found)."""
        if stored.sha256 is not None:
            ContentIndex().release(stored.tenant, stored.sha256, stored.id)
        SimilarImagesIndex().remove(stored.tenant, stored.id)
        try:
            FileModel(id=stored.id).delete(condition=FileModel.id.exists())
        except DeleteError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _update_if(
        self, file_id: str, actions: list[Action], condition: Condition, *, at: datetime, by: str
    ) -> StoredFile | None:
        """One UpdateItem of an existing file under `condition`, with its audit fields.

        The file as stored afterwards: the updated one, or, when the condition refused the
        change, the one that refused it (None if there is no such file).
        """
        model = FileModel(id=file_id)
        try:
            model.update(
                actions=[*actions, FileModel.updated_at.set(at), FileModel.updated_by.set(by)],
                condition=FileModel.id.exists() & condition,
            )
        except UpdateError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            return self.get(file_id)
        return file_from_model(model)

    def same_content(self, stored: StoredFile, *, limit: int = 20) -> list[StoredFile]:
        """The tenant's other files with the same content as `stored` (none before its hash is
        recorded), oldest first: one Query of `by_content`, then the files."""
        if stored.sha256 is None:
            return []
        entries = FileModel.by_content.query(
            stored.sha256,
            range_key_condition=FileModel.tenant_shard.startswith(f"{stored.tenant}#"),
            limit=limit + 1,
            page_size=limit + 1,
        )
        ids = [e.id for e in entries if e.id != stored.id][:limit]
        found = [f for f in (self.get(i, consistent=False) for i in ids) if f is not None]
        return sorted(found, key=lambda f: (f.metadata.created_at, f.id))

    def files_of_tenant(
        self,
        tenant: str,
        *,
        prefix: str = "",
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> FilePage:
        """A tenant's files whose key starts with `prefix`, in key order (then id), `limit` at a
        time: its 16 partitions of `by_tenant_key` read in parallel and merged."""
        index = FileModel.by_tenant_key

        def shard(partition: str) -> list[FileModel]:
            condition: Condition | None = FileModel.key.startswith(prefix) if prefix else None
            if after is not None:
                condition = FileModel.key >= after[0]
            query = index.query(partition, range_key_condition=condition, page_size=limit + 1)
            beyond = (m for m in query if after is None or (m.key, m.id) > after)
            # In key order, the first key past the prefix ends what can match.
            matching = itertools.takewhile(_in_prefix(prefix), beyond)
            return list(itertools.islice(matching, limit + 1))

        with ThreadPoolExecutor(max_workers=index_keys.FILE_TENANT_SHARDS) as pool:
            streams = list(pool.map(shard, index_keys.file_tenant_partitions(tenant)))
        merged = list(
            itertools.islice(heapq.merge(*streams, key=lambda m: (m.key, m.id)), limit + 1)
        )
        page = [FileRef(m.id, m.key) for m in merged[:limit]]
        cursor = (page[-1].key, page[-1].id) if len(merged) > limit else None
        return FilePage(page, cursor)

    def scanned_before(
        self, cutoff: datetime, *, definitions_before: str | None = None, per_shard: int = 100
    ) -> Iterator[ScannedFile]:
        """Clean files whose verdict was given before `cutoff` (and, with `definitions_before`,
        with definitions older than that version), oldest first in each partition."""
        index = FileModel.by_scan_age
        condition = None
        if definitions_before is not None:
            condition = FileModel.definitions_version.does_not_exist() | (
                FileModel.definitions_version < definitions_before
            )

        def shard(partition: str) -> list[FileModel]:
            query = index.query(
                partition,
                range_key_condition=FileModel.scanned_at < cutoff,
                filter_condition=condition,
                limit=per_shard,
            )
            return list(query)

        with ThreadPoolExecutor(max_workers=index_keys.SCAN_AGE_SHARDS) as pool:
            streams = list(pool.map(shard, index_keys.scan_age_partitions()))
        for model in heapq.merge(*streams, key=lambda m: (m.scanned_at, m.id)):
            yield ScannedFile(model.id, model.tenant, model.scanned_at, model.definitions_version)

    def versions_of(self, bucket: str, key: str) -> list[StoredFile]:
        """Every recorded version of an object key, newest first."""
        query = FileModel.by_object.query(keys.object_ref(bucket, key), scan_index_forward=False)
        return [file_from_model(m) for m in query]

    def record_ingest(self, plan: IngestPlan, charge: UsageCharge | None = None) -> IngestResult:
        """Put the file and all its jobs in one TransactWriteItems, or none if the file exists;
        with `charge`, count the upload against its tenant's day in the same transaction.

        Every put is conditional on its id being new, and ids are derived from the S3 record,
        so a duplicate delivery (however many, however concurrent) writes nothing, and counts
        nothing. The count is an ADD conditional on the day staying within the charge's limits:
        of two uploads racing for a quota's last file, one commits and the other is OverQuota.
        """
        if charge is not None and not charge.fits(DayUsage(charge.tenant, charge.day)):
            # Larger than the whole day's allowance: no state of the day could take it.
            if self.get(plan.file.id) is not None:
                return AlreadyIngested(plan.file.id)
            return OverQuota(charge, self._usage(charge))

        def refusal(
            error: TransactWriteError, codes: list[str]
        ) -> AlreadyIngested | OverQuota | None:
            if _refused(codes, 0):
                return AlreadyIngested(plan.file.id)
            if charge is not None and _refused(codes, len(codes) - 1):
                return OverQuota(charge, self._usage(charge, error.cancellation_reasons[-1]))
            return None

        refused = _transact(lambda: self._write_plan(plan, charge), refusal)
        if refused is not None:
            return refused
        return Ingested(plan)

    def add_api_job(
        self, job: ProcessingJob, *, per_file: int, charge: RescanCharge | None = None
    ) -> ApiJobAdded:
        """The job's put and its file's `api_jobs` ADD in one TransactWriteItems: the job is
        stored only while the file has had fewer than `per_file`, and a job that exists already
        (a replayed request) counts nothing. A rescan's `charge` is counted in the same
        transaction (QuotaSpentError when a limit refuses it)."""

        def refusal(_error: TransactWriteError, codes: list[str]) -> ApiJobAdded | None:
            if _refused(codes, 0):
                return ApiJobAdded.EXISTS
            if _refused(codes, 1):
                return ApiJobAdded.FILE_SPENT
            _raise_if_spent(codes)
            return None

        refused = _transact(lambda: self._write_api_job(job, per_file, charge), refusal)
        return ApiJobAdded.CREATED if refused is None else refused

    def _write_api_job(
        self, job: ProcessingJob, per_file: int, charge: RescanCharge | None
    ) -> None:
        counted = FileModel.api_jobs.does_not_exist() | (FileModel.api_jobs < per_file)
        with TransactWrite(connection=_connection()) as transaction:
            transaction.save(job_to_model(job), condition=JobModel.id.does_not_exist())
            transaction.update(
                FileModel(id=job.file_id),
                actions=[FileModel.api_jobs.add(1), FileModel.job_ids.add({job.id})],
                condition=FileModel.id.exists() & counted,
            )
            _count_rescan(transaction, charge)

    def add_job(
        self, job: ProcessingJob, *, charge: RescanCharge | None = None, named: bool = True
    ) -> bool:
        """The job's put and its id's ADD to its file's `job_ids`, in one TransactWriteItems:
        False (nothing written) when the job exists already. A rescan's `charge` is counted in
        the same transaction (QuotaSpentError when a limit refuses it). Not `named` (the file
        names all it may: domain/quotas.NAMED_JOBS_PER_FILE), the file only counts it in
        `unnamed_jobs`: the job is found through its tenant's index (JobRepository.jobs_of)."""

        def refusal(_error: TransactWriteError, codes: list[str]) -> bool | None:
            if _refused(codes, 0):
                return False
            if _refused(codes, 1):
                raise LookupError(f"no file {job.file_id} to add job {job.id} to")
            _raise_if_spent(codes)
            return None

        return _transact(lambda: self._write_job(job, charge, named), refusal) is None

    def _write_job(self, job: ProcessingJob, charge: RescanCharge | None, named: bool) -> None:
        with TransactWrite(connection=_connection()) as transaction:
            transaction.save(job_to_model(job), condition=JobModel.id.does_not_exist())
            # Not named: counted, a number that stays a number (and the same permission).
            named_or_counted = (
                FileModel.job_ids.add({job.id}) if named else FileModel.unnamed_jobs.add(1)
            )
            transaction.update(
                FileModel(id=job.file_id),
                actions=[named_or_counted],
                condition=FileModel.id.exists(),
            )
            _count_rescan(transaction, charge)

    def record_completion(
        self, file_id: str, completion: FileCompletion, *, gone: frozenset[str] = frozenset()
    ) -> bool:
        """The file's completion, in one UpdateItem conditioned on it being newer than the one
        recorded (domain/file_completion.py): False when it is not, or there is no such file.
        `gone` (jobs expired or removed since) leave the file's job_ids in the same write, so
        the set holds the file's living jobs, not every job it ever had.

        The file's audit fields are left alone: a completion is the jobs' doing, not a change
        anyone made to the file.
        """
        newer = FileModel.processed_version.does_not_exist() | (
            FileModel.processed_version < completion.version
        )
        forget = [FileModel.job_ids.delete(set(gone))] if gone else []
        try:
            FileModel(id=file_id).update(
                actions=[
                    FileModel.processed_fingerprint.set(completion.fingerprint),
                    FileModel.processed_version.set(completion.version),
                    FileModel.processed.set(completion_to_map(completion)),
                    *forget,
                ],
                condition=FileModel.id.exists() & newer,
            )
        except UpdateError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _usage(self, charge: UsageCharge, reason: CancellationReason | None = None) -> DayUsage:
        """The day as the refused count found it: from the refusal itself when DynamoDB sent
        the item back (ReturnValuesOnConditionCheckFailure), else read."""
        if reason is not None and reason.raw_item:
            return usage_from(UsageModel.from_raw_data(reason.raw_item), charge.tenant, charge.day)
        try:
            model = UsageModel.get(usage_id(charge.tenant, charge.day), consistent_read=True)
        except UsageModel.DoesNotExist:
            return DayUsage(charge.tenant, charge.day)
        return usage_from(model, charge.tenant, charge.day)

    def _write_plan(self, plan: IngestPlan, charge: UsageCharge | None) -> None:
        # The file first and the usage last: a refusal's reasons are read by position.
        with TransactWrite(connection=_connection()) as transaction:
            transaction.save(file_to_model(plan.file), condition=FileModel.id.does_not_exist())
            for job in plan.jobs:
                transaction.save(job_to_model(job), condition=JobModel.id.does_not_exist())
            if charge is not None:
                item, actions, condition = usage_update(charge)
                transaction.update(
                    item, actions=actions, condition=condition, return_values=ALL_OLD
                )


# Where a rescan's counts sit in the transaction that adds its job (after the job, the file).
_TENANT_RESCANS, _FILE_RESCANS = 2, 3


def _count_rescan(transaction: TransactWrite, charge: RescanCharge | None) -> None:
    """The rescan's two counts, its tenant's day then its file's, in the job's transaction."""
    if charge is None:
        return
    for item, actions, condition in rescan_updates(charge):
        transaction.update(item, actions=actions, condition=condition)


def _raise_if_spent(codes: list[str]) -> None:
    """A rescan's count refused: which limit (the job and the file passed their conditions)."""
    if _refused(codes, _TENANT_RESCANS):
        raise QuotaSpentError(SpentQuota.RESCANS)
    if _refused(codes, _FILE_RESCANS):
        raise QuotaSpentError(SpentQuota.FILE_RESCANS)


def _connection() -> Connection:
    # The model's own connection: no new botocore client per write.
    return FileModel._get_connection().connection


def _transact[R](
    write: Callable[[], None], refusal: Callable[[TransactWriteError, list[str]], R]
) -> R | None:
    """Runs the transaction `write`: None once it commits; what `refusal` makes of a condition
    it failed (when `refusal` knows it: not None); again after a backoff while it only met
    another transaction on the same items (TransactionConflict), at most _CONFLICT_RETRIES
    times; any other failure raised."""
    for attempt in range(_CONFLICT_RETRIES + 1):
        try:
            write()
        except TransactWriteError as error:
            codes = _reason_codes(error)
            refused = refusal(error, codes)
            if refused is not None:
                return refused
            if "TransactionConflict" in codes and attempt < _CONFLICT_RETRIES:
                _back_off(attempt)
                continue
            raise
        return None
    raise AssertionError("unreachable")  # pragma: no cover


def _reason_codes(error: TransactWriteError) -> list[str]:
    """Each item's cancellation code, in the transaction's order ("None" for an item that was
    not the cause)."""
    return ["None" if r is None else r.code for r in error.cancellation_reasons]


def _refused(codes: list[str], position: int) -> bool:
    """Whether the transaction's item at `position` failed its condition (a transaction that
    failed for another reason, a missing table say, has no reasons at all)."""
    return 0 <= position < len(codes) and codes[position] == "ConditionalCheckFailed"


def _back_off(attempt: int) -> None:
    time.sleep(random.uniform(0, 0.05 * 2**attempt))  # noqa: S311 (jitter)


def _in_prefix(prefix: str) -> Callable[[FileModel], bool]:
    def inside(model: FileModel) -> bool:
        return model.key.startswith(prefix)

    return inside
