"""The ingest use case: an S3 object-created record becomes a StoredFile and its jobs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from filejobs.data.file_repository import FileRepository, IngestResult
from filejobs.domain.content import SNIFF_BYTES, sniff_content_type
from filejobs.domain.ingest import ObjectCreated, plan_ingest, tenant_of
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
        head = self._heads.read_head(record.bucket, record.key, record.version_id, SNIFF_BYTES)
        content_type = sniff_content_type(head)
        plan = plan_ingest(record, content_type, now=self._clock())
        return self._files.record_ingest(plan)
