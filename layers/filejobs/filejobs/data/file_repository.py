"""FileRepository: StoredFiles, and the atomic ingest of a file with its jobs."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import datetime

from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite

from filejobs.data.mapping import file_from_model, file_to_model, job_to_model
from filejobs.data.models import FileModel, JobModel
from filejobs.domain import keys
from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.ingest import IngestPlan

# Concurrent deliveries of one record collide as TransactionConflict; a retry then finds the
# winner's file and reports "already ingested".
_CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class Ingested:
    plan: IngestPlan


@dataclass(frozen=True)
class AlreadyIngested:
    file_id: str


type IngestResult = Ingested | AlreadyIngested


class FileRepository:
    def get(self, file_id: str, *, consistent: bool = True) -> StoredFile | None:
        try:
            return file_from_model(FileModel.get(file_id, consistent_read=consistent))
        except FileModel.DoesNotExist:
            return None

    def quarantine(self, file_id: str, *, reason: str, at: datetime, by: str) -> StoredFile | None:
        """Mark an active file quarantined, in one conditional write.

        Returns the file as stored afterwards (already quarantined or deleted files are left as
        they are), or None when there is no such file.
        """
        return self._update_if(
            file_id,
            [
                FileModel.status.set(FileStatus.QUARANTINED.value),
                FileModel.status_reason.set(reason),
            ],
            (FileModel.status == FileStatus.ACTIVE.value) & FileModel.deleted_at.does_not_exist(),
            at=at,
            by=by,
        )

    def record_scan(
        self, file_id: str, verdict: ScanStatus, *, at: datetime, by: str
    ) -> StoredFile | None:
        """Record the virus scan's verdict, in one conditional write; None if no such file.

        Infected is final: no later scan (a redelivered job) can turn it into anything else.
        Unscannable can become a verdict when a retried scan gets through.
        """
        earlier = {
            ScanStatus.CLEAN: [ScanStatus.UNSCANNABLE],
            ScanStatus.INFECTED: [ScanStatus.CLEAN, ScanStatus.UNSCANNABLE],
            ScanStatus.UNSCANNABLE: [],
        }[verdict]
        allowed = FileModel.scan_status.does_not_exist() | FileModel.scan_status.is_in(
            verdict.value, *(status.value for status in earlier)
        )
        return self._update_if(
            file_id, [FileModel.scan_status.set(verdict.value)], allowed, at=at, by=by
        )

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

    def versions_of(self, bucket: str, key: str) -> list[StoredFile]:
        """Every recorded version of an object key, newest first."""
        query = FileModel.by_object.query(keys.object_ref(bucket, key), scan_index_forward=False)
        return [file_from_model(m) for m in query]

    def record_ingest(self, plan: IngestPlan) -> IngestResult:
        """Put the file and all its jobs in one TransactWriteItems, or none if the file exists.

        Every put is conditional on its id being new, and ids are derived from the S3 record,
        so a duplicate delivery (however many, however concurrent) writes nothing.
        """
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                self._write_plan(plan)
            except TransactWriteError as error:
                reasons = [r.code for r in error.cancellation_reasons if r is not None]
                if "ConditionalCheckFailed" in reasons:
                    return AlreadyIngested(plan.file.id)
                if "TransactionConflict" in reasons and attempt < _CONFLICT_RETRIES:
                    time.sleep(random.uniform(0, 0.05 * 2**attempt))  # noqa: S311 (jitter)
                    continue
                raise
            return Ingested(plan)
        raise AssertionError("unreachable")  # pragma: no cover

    def _write_plan(self, plan: IngestPlan) -> None:
        # The model's own connection: no new botocore client per ingest.
        connection = FileModel._get_connection().connection
        with TransactWrite(connection=connection) as transaction:
            transaction.save(file_to_model(plan.file), condition=FileModel.id.does_not_exist())
            for job in plan.jobs:
                transaction.save(job_to_model(job), condition=JobModel.id.does_not_exist())
