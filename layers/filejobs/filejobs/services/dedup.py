"""The deduplication check: the content's digest, then the tenant's content index says who owns
that content, and the file records both.

The first file of a tenant with a hash owns it; later files get `duplicate_of` = the owner. The
claim is one UpdateItem of the content index item that sets its owner only where it has none
and answers the owner (data/content_index.py: exactly one of any number of concurrent claimants
wins, and each learns the winner from its own request) and the file's hash and `duplicate_of`
are one write: a re-run gives the same answer and writes the same. As with the virus scan
(services/virus_scan.py), the processor only reads bytes and the use case records what they mean.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from filejobs.domain.retry import PermanentError
from filejobs.domain.time import utcnow
from filejobs.ports import ContentOwners, FileStore
from filejobs.processors.base import Processor, Work

WRITER = "deduplication_check"


class DeduplicationCheck:
    def __init__(
        self,
        digest: Processor,
        owners: ContentOwners,
        files: FileStore,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._digest = digest
        self._owners = owners
        self._files = files
        self._clock = clock

    def __call__(self, work: Work) -> dict[str, Any]:
        job = work.job
        found = self._digest(work)
        sha256 = str(found["sha256"])
        now = self._clock()
        owner = self._owners.claim(job.tenant, sha256, job.file_id, at=now)
        duplicate_of = None if owner == job.file_id else owner
        recorded = self._files.record_content(
            job.file_id, sha256=sha256, duplicate_of=duplicate_of, at=now, by=WRITER
        )
        if recorded is None:
            raise PermanentError(f"file {job.file_id} is not recorded")
        work.log(
            "first of its tenant with this content: recorded as its owner"
            if duplicate_of is None
            else f"duplicate of file {duplicate_of}: recorded on the file"
        )
        return {**found, "duplicate_of": duplicate_of, "owner": owner}
