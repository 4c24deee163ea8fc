"""Keep-last-N retention: when a job finishes, its file's older finished jobs of its type beyond
N are retired (domain/retention.py for the rule, transitions.retire for the write).

Where it runs: the events function, on the jobs table's stream (functions/events/app.py), for
each write that moved a job into a terminal status. Not the worker, nor the sweep:

- The stream carries every finish, whoever wrote it: a worker's completion or failure, the
  sweep's rescue of a lost lease with no retry left, a dead-lettered or never-claimed job, an
  API or bulk cancel. Hooked into the worker, a file whose last finish was a cancel would keep
  N+1 until the TTL; the sweep reads only active jobs (its index is sparse) and would need a
  scan of finished ones to do it.
- It adds nothing to the worker's critical path or role: a read of the file and one
  BatchGetItem of the jobs its item names per finish of a type that keeps N, and one
  conditional write per job retired, in a function already subscribed to exactly those
  writes (its filter passes terminal statuses only). A type the setting does not name costs nothing.
- A stream batch that fails is retried: every step is idempotent (a retired job is deleted, so
  a second retirement loses on its guard), so a retry retires nothing twice.

Each retirement is one conditional UpdateItem guarded on the job being finished still, and
finished when it was read (`completed_at`): a job retried since (running, or finished again and
so among the newest) is left alone. The file's jobs are read eventually consistent and may not
show the job that just finished as finished, so that job is taken from the stream record.
Retirement writes are themselves terminal-to-terminal changes on the stream: they announce
nothing and trigger no retention (only a change *into* a terminal status does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from filejobs.domain import transitions
from filejobs.domain.job import ProcessingJob
from filejobs.domain.retention import KeepLast, to_retire
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs.ports import FileStore, JobStore

logger = logging.getLogger(__name__)


class Retention:
    def __init__(
        self,
        jobs: JobStore,
        files: FileStore,
        keep: KeepLast,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._jobs = jobs
        self._files = files
        self._keep = keep
        self._clock = clock

    def applies_to(self, before: ProcessingJob | None, after: ProcessingJob | None) -> bool:
        """Whether this change finished a job of a type that keeps only its last N."""
        if after is None or not after.is_terminal or after.metadata.deleted_at is not None:
            return False
        if before is not None and before.is_terminal:
            return False  # still finished (a soft delete, a retirement): no new finish
        return self._keep.get(after.job_type, 0) > 0

    def on_change(self, before: ProcessingJob | None, after: ProcessingJob | None) -> list[str]:
        """Retire what the finish of `after` puts beyond its type's N; the ids retired."""
        if after is None or not self.applies_to(before, after):
            return []
        return self.trim(after)

    def trim(self, finished: ProcessingJob) -> list[str]:
        retired: list[str] = []
        stored = self._files.get(finished.file_id, consistent=False)
        if stored is None:  # erased: its jobs went with it
            return retired
        jobs_of_file = self._jobs.jobs_of(stored, consistent=False)
        for old in to_retire(finished, jobs_of_file, self._keep):
            result = self._jobs.apply(
                old.id, old.job_type, transitions.retire(old, now=self._clock())
            )
            if isinstance(result, Applied):
                retired.append(old.id)
            else:  # retried, deleted or retired since it was read: left as it is
                logger.info("job %s not retired: %s", old.id, result.conflict)
        return retired
