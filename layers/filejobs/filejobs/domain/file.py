"""StoredFile: an uploaded object version, as the system knows it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from filejobs.domain.job import AuditMetadata


class ScanStatus(StrEnum):
    """The virus scan's verdict on a file. Until it is clean, no decoder may parse the file."""

    CLEAN = "clean"
    INFECTED = "infected"
    # The scan failed for good (an archive bomb, a limit): the file cannot be vouched for.
    UNSCANNABLE = "unscannable"


class FileStatus(StrEnum):
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    DELETED = "deleted"


@dataclass
class StoredFile:
    """One version of one uploaded object. A new version of the same key is a new StoredFile."""

    id: str
    tenant: str
    bucket: str
    key: str
    version_id: str | None
    etag: str
    sequencer: str | None
    size: int
    # Sniffed from the first bytes, never taken from the name or the uploader's Content-Type.
    content_type: str
    metadata: AuditMetadata
    sha256: str | None = None
    status: FileStatus = FileStatus.ACTIVE
    # Why the status is what it is (the virus scan's verdict for a quarantined file).
    status_reason: str | None = None
    scan_status: ScanStatus | None = None
    duplicate_of: str | None = None
