"""StoredFile: an uploaded object version, as the system knows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from filejobs.domain.file_completion import FileCompletion
from filejobs.domain.job import AuditMetadata
from filejobs.domain.presets import AppliedPreset


class ScanStatus(StrEnum):
    """The virus scan's verdict on a file. Until it is clean, no decoder may parse the file."""

    CLEAN = "clean"
    INFECTED = "infected"
    # The scan cannot vouch for the file: larger than the scan reads, or an archive past the
    # engines' limits (a zip bomb, nesting too deep). What runs on it is a policy decision
    # (domain/scanning.py UnscannablePolicy).
    UNSCANNABLE = "unscannable"


@dataclass(frozen=True)
class ScanRecord:
    """The verdict the virus scan gave a file, and what gave it: the evidence a rescan policy
    and an auditor read ("scanned when, by which engines, with which definitions?")."""

    verdict: ScanStatus
    scanned_at: datetime
    job_id: str
    # Engine name -> its version ("clamav": "ClamAV 1.4.6", "yara": "4.5.2").
    engines: dict[str, str] = field(default_factory=dict)
    # The definitions set the verdict was given with (its set id, sortable by time); None when
    # only the rules shipped with the code were used.
    definitions_version: str | None = None
    signatures: tuple[str, ...] = ()
    # Why an UNSCANNABLE file could not be vouched for.
    reason: str | None = None


class FileStatus(StrEnum):
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    DELETED = "deleted"
    # Over its tenant's quotas at ingest (domain/quotas.py): recorded with the reason, given no
    # jobs, never processed.
    REJECTED = "rejected"


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
    # The evidence behind scan_status (None for a file scanned before verdicts were recorded).
    scan: ScanRecord | None = None
    duplicate_of: str | None = None
    # Every job ever made on this file (ingest's, the API's, rescans'), added in the same write
    # as each job: what "all of its jobs" means when the file's completion is checked.
    job_ids: frozenset[str] = frozenset()
    # The last time all its jobs were terminal (None until then): see domain/file_completion.py.
    processed: FileCompletion | None = None
    # The upload preset (name, version) that chose its jobs; None: the default table's.
    preset: AppliedPreset | None = None
    # Why a preset the upload named was not applied (no such preset).
    preset_note: str | None = None
