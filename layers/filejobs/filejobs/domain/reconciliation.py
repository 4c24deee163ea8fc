"""Reconciliation, the pure part: which of the uploads bucket's recent objects no notification
announced, and the notification that announces each.

S3's event notifications are at least once when they are configured and delivered; a changed
notification configuration, a deleted queue policy or an outage drops them, and so did the local
stack's emulator (issue 46). The reconciler (services/reconciler.py) lists the bucket's recent
object versions on a schedule, works out the file id the ingest gives each one
(`keys.file_id_for`, the same id a notification yields, so a duplicate is a no-op), and sends
each one the files table lacks to the fair ingest queue as the ingest router would have.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote_plus

from filejobs.domain import keys
from filejobs.domain.ingest import InvalidUploadError, tenant_of

# How a reconciled upload's notification says where it came from: the ingest treats it as S3's
# own (its jobs keep their normal lanes: the upload is new, only its announcement was lost).
RECONCILER_EVENT_SOURCE = "filejobs:reconciler"
RECONCILED_EVENT_NAME = "ObjectCreated:Reconciled"
# A version id S3 gives objects written before the bucket was versioned: it names no version the
# ingest could have recorded (that object's notification carried none), so it is not looked at.
NULL_VERSION = "null"


@dataclass(frozen=True)
class ListedVersion:
    """One object version as ListObjectVersions names it (delete markers are listed apart and
    never reach here)."""

    key: str
    version_id: str | None
    last_modified: datetime
    size: int
    etag: str
    is_latest: bool


@dataclass(frozen=True)
class Window:
    """Which versions a run looks at: modified at most `look_back` ago, and at least `grace` ago
    (younger ones may still have their notification on its way)."""

    look_back: timedelta
    grace: timedelta

    @classmethod
    def for_schedule(cls, every: timedelta, grace: timedelta) -> Window:
        """Two schedule periods and the grace: an upload is looked at by at least two runs
        once its grace is over, so one failed or late run loses nothing."""
        return cls(look_back=2 * every + grace, grace=grace)


@dataclass(frozen=True)
class Candidate:
    """A recent upload version and the id of the file the ingest records for it."""

    bucket: str
    tenant: str
    version: ListedVersion
    file_id: str


@dataclass(frozen=True)
class Sorted:
    """A run's listed versions, sorted: those to check, those too young yet, those out of the
    window or not uploads."""

    candidates: tuple[Candidate, ...]
    too_young: int
    ignored: int

    @property
    def listed(self) -> int:
        return len(self.candidates) + self.too_young + self.ignored


def sort_versions(
    bucket: str, versions: Iterable[ListedVersion], *, now: datetime, window: Window
) -> Sorted:
    """The current versions of uploads (`uploads/{tenant}/...`) modified within the window, read
    once as they come (a listing of the whole prefix is never held in memory). A noncurrent
    version was overwritten or deleted (its own notification was due long ago, and a quarantine
    leaves the infected version noncurrent); a key that is not an upload is never ingested, so
    it cannot be missing."""
    candidates: list[Candidate] = []
    too_young = ignored = 0
    oldest, youngest = now - window.look_back, now - window.grace
    for version in versions:
        tenant = _upload_tenant(version)
        if tenant is None or version.last_modified < oldest:
            ignored += 1
        elif version.last_modified > youngest:
            too_young += 1
        else:
            file_id = keys.file_id_for(bucket, version.key, str(version.version_id))
            candidates.append(Candidate(bucket, tenant, version, file_id))
    return Sorted(tuple(candidates), too_young, ignored)


def _upload_tenant(version: ListedVersion) -> str | None:
    if not version.is_latest or version.version_id in (None, NULL_VERSION):
        return None
    try:
        return tenant_of(version.key)
    except InvalidUploadError:
        return None


def unannounced(candidates: Iterable[Candidate], recorded: set[str]) -> list[Candidate]:
    """The candidates whose file the files table lacks: uploads no notification announced (a
    rejected upload is recorded too, so it is not among them)."""
    return [candidate for candidate in candidates if candidate.file_id not in recorded]


def notification_body(candidate: Candidate) -> str:
    """The S3 ObjectCreated notification the upload's own would have been: its key URL-encoded
    as S3 encodes it, its version id, size and eTag."""
    version = candidate.version
    described = {
        "key": quote_plus(version.key),
        "size": version.size,
        "eTag": version.etag.strip('"'),
        "versionId": version.version_id,
    }
    record = {
        "eventVersion": "2.1",
        "eventSource": RECONCILER_EVENT_SOURCE,
        "eventTime": version.last_modified.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "eventName": RECONCILED_EVENT_NAME,
        "s3": {"bucket": {"name": candidate.bucket}, "object": described},
    }
    return json.dumps({"Records": [record]})
