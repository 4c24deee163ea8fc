"""The ingest use case: an S3 object-created record becomes a StoredFile and its jobs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from filejobs.data.file_repository import AlreadyIngested, FileRepository, IngestResult
from filejobs.domain import keys
from filejobs.domain.content import SNIFF_BYTES, sniff_content_type
from filejobs.domain.ingest import InvalidUploadError, ObjectCreated, plan_ingest, tenant_of
from filejobs.domain.retry import is_missing_object
from filejobs.domain.time import utcnow


class HeadReader(Protocol):
    def read_head(self, bucket: str, key: str, version_id: str | None, length: int) -> bytes: ...


class IngestService:
    def __init__(
        self,
        files: FileRepository,
        heads: HeadReader,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._files = files
        self._heads = heads
        self._clock = clock

    def ingest(self, record: ObjectCreated) -> IngestResult:
        """Record the upload once, however often the record is delivered.

        Raises `InvalidUploadError` for keys outside `uploads/{tenant}/`, before any I/O.
        """
        tenant_of(record.key)
        try:
            head = self._heads.read_head(record.bucket, record.key, record.version_id, SNIFF_BYTES)
        except Exception as error:
            if not is_missing_object(error):
                raise
            return self._gone(record)
        content_type = sniff_content_type(head)
        plan = plan_ingest(record, content_type, now=self._clock())
        return self._files.record_ingest(plan)

    def _gone(self, record: ObjectCreated) -> IngestResult:
        """The version is no longer there. A late duplicate of a recorded upload (its file
        since quarantined or deleted) is a duplicate like any other; an upload never recorded
        was withdrawn before its ingest, and there is nothing to process."""
        file_id = keys.file_id_for(record.bucket, record.key, record.version_marker)
        if self._files.get(file_id) is not None:
            return AlreadyIngested(file_id)
        raise InvalidUploadError(
            f"key {record.key!r}: the object was deleted before it could be ingested"
        )
