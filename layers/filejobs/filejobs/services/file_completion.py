"""Record a file's completion when the last of its jobs ends (domain/file_completion.py).

Called for each job that entered a terminal status, as the jobs' stream delivers it (the events
function). It reads the file and every one of its jobs with strongly consistent reads: whichever
of a file's jobs is handled last reads every other one's committed end, so one check always sees
the file complete, however the jobs' ends are spread over shards and invocations. The write is
conditioned on the completion being newer than the one recorded, so two checks of the same
moment (a record delivered again, two jobs that ended together) record it once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from filejobs.domain.file_completion import FileCompletion, completion_of
from filejobs.domain.job import ProcessingJob
from filejobs.domain.time import utcnow
from filejobs.ports import FileStore, JobStore


class FileCompletions:
    def __init__(
        self, jobs: JobStore, files: FileStore, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._jobs, self._files, self._clock = jobs, files, clock

    def job_ended(self, job: ProcessingJob) -> FileCompletion | None:
        """The completion this job's end recorded for its file, or None (a job still open, the
        completion recorded already, or no such file)."""
        stored = self._files.get(job.file_id, consistent=True)
        if stored is None:
            return None
        gone: frozenset[str] = frozenset()
        if stored.job_ids:
            jobs = self._jobs.get_many(stored.job_ids | {job.id}, consistent=True)
            # Put in the same write as their id, so missing now means expired or removed.
            gone = stored.job_ids - {found.id for found in jobs}
        else:
            # A file recorded before files kept their job ids: its jobs by the file index, which
            # is eventually consistent (a completion may be missed, never invented).
            jobs = self._jobs.jobs_of_file(stored.id)
        completion = completion_of(jobs, at=self._clock())
        if completion is None:
            return None
        if stored.processed is not None and stored.processed.fingerprint == completion.fingerprint:
            return None  # recorded already: no write
        recorded = self._files.record_completion(stored.id, completion, gone=gone)
        return completion if recorded else None
