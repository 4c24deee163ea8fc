"""Where a stored object is: its bucket, its key and, when versioned, the exact version.

A value the processors read by (processors/source.py), the virus scan marks and quarantines
(adapters/quarantine.py) and the ports name (ports.VerdictStore): it lives here so that none of
them imports another layer for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from filejobs.domain.job import ProcessingJob
from filejobs.domain.retry import PermanentError


@dataclass(frozen=True)
class ObjectLocation:
    bucket: str
    key: str
    version_id: str | None

    @classmethod
    def of(cls, job: ProcessingJob) -> ObjectLocation:
        """The object a job is about, as ingest wrote it into the job's input_data."""
        data = job.input_data or {}
        bucket, key, version = data.get("bucket"), data.get("key"), data.get("version_id")
        if not isinstance(bucket, str) or not isinstance(key, str):
            raise PermanentError("job input_data names no object (bucket and key)")
        return cls(bucket, key, version if isinstance(version, str) and version else None)

    def request(self) -> dict[str, Any]:
        """GetObject/HeadObject arguments for exactly this version."""
        request: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key}
        if self.version_id:
            request["VersionId"] = self.version_id
        return request

    def __str__(self) -> str:
        version = f" (version {self.version_id})" if self.version_id else ""
        return f"s3://{self.bucket}/{self.key}{version}"
