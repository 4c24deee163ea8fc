"""The reconciler: the safety net under S3's event notifications.

Run on a schedule (template.yaml ReconcilerFunction, every ReconcileEveryMinutes), it lists the
uploads bucket's object versions under `uploads/`, keeps the current ones modified within the
look-back window (two periods and the grace) and older than the grace, asks the files table
which of their file ids it holds (BatchGetItem, 100 keys a request, keys only), and sends the
notification of each missing one to the fair ingest queue, in its tenant's group, exactly as
the ingest router sends S3's own: the ingest's fairness, quotas and idempotency decide the rest
(a notification that was only late is recorded once, whichever comes first).

A listing reads every version under the prefix (S3 cannot list by date): 1 LIST request per
1,000 versions a run. At a scale where that matters, S3 Inventory's daily report is the input
(docs/OPERATIONS.md); it is not built here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from filejobs.domain.reconciliation import (
    Candidate,
    Window,
    notification_body,
    sort_versions,
    unannounced,
)
from filejobs.domain.tenant_prefixes import UPLOAD_PREFIX
from filejobs.domain.time import utcnow
from filejobs.ports import IngestQueue, Notification, RecordedFiles, UploadListing

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileReport:
    listed: int
    checked: int  # in the window, past their grace: looked up in the files table
    too_young: int
    unannounced: tuple[Candidate, ...]
    refused: int  # unannounced uploads the queue refused: the next run finds them again


class Reconciler:
    def __init__(
        self,
        bucket: str,
        listing: UploadListing,
        files: RecordedFiles,
        ingest: IngestQueue,
        window: Window,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._bucket, self._listing, self._files, self._ingest = bucket, listing, files, ingest
        self._window, self._clock = window, clock

    def run(self) -> ReconcileReport:
        now = self._clock()
        versions = self._listing.versions(UPLOAD_PREFIX)
        found = sort_versions(self._bucket, versions, now=now, window=self._window)
        recorded = self._files.recorded([c.file_id for c in found.candidates])
        missing = unannounced(found.candidates, recorded)
        refused = self._announce(missing)
        return ReconcileReport(
            found.listed, len(found.candidates), found.too_young, tuple(missing), len(refused)
        )

    def _announce(self, missing: Sequence[Candidate]) -> list[str]:
        for candidate in missing:
            logger.warning(
                "upload never announced: ingesting it",
                extra={"key": candidate.version.key, "file_id": candidate.file_id},
            )
        notifications = [Notification(c.file_id, notification_body(c), c.tenant) for c in missing]
        return self._ingest.send_all(notifications) if notifications else []
