"""Record a file's completion when the last of its jobs ends (domain/file_completion.py).

Called for each job that entered a terminal status, as the jobs' stream delivers it (the events
function). It reads the file and every one of its jobs with strongly consistent reads: whichever
of a file's jobs is handled last reads every other one's committed end, so one check always sees
the file complete, however the jobs' ends are spread over shards and invocations. The write is
conditioned on the completion being newer than the one recorded, so two checks of the same
moment (a record delivered again, two jobs that ended together) record it once.

One request, most of the time: the ingest's jobs have ids derived from the tenant, the file and
the job type (domain/keys.ingest_job_types), so the check reads the file and the ingest jobs its
content gets by default (the ended job's `content_type`: domain/content.job_types_for) together,
in one BatchGetItem across both tables (data/completion_reads.py), before it knows which of them
exist. Only a file whose `job_ids` names other jobs (a preset's other types, jobs requested
through the API, rescans) costs a second request, for those. The argument above is unchanged:
every read of the batch is strongly consistent and sent after the triggering end was committed,
so it sees that end and every end committed before it, exactly as the file's read followed by
its jobs' did.
(Each key asked costs a read unit, found or not: asking only for the default plan's jobs keeps a
check at the units of the file's read and its jobs' read before, 1 + the file's jobs, in one
request instead of two; asking for every type's would cost up to 7.)

No check is skipped. A virus scan that ended clean and released its file's gated jobs might look
like an end that cannot be the last (those jobs were pending when it released them), but the
release happens *before* the scan job's own terminal write: a released job can run and end, and
have its check read the scan job still running, before the scan's end is committed (a slow or
crashed scan worker commits it seconds or minutes later, on a retry). The scan's own check is then
the only one that sees the file complete, so it must run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol

from filejobs.domain import keys
from filejobs.domain.content import job_types_for
from filejobs.domain.file import StoredFile
from filejobs.domain.file_completion import FileCompletion, completion_of
from filejobs.domain.job import ProcessingJob
from filejobs.domain.time import utcnow
from filejobs.ports import FileStore, JobStore


class FileAndJobs(Protocol):
    def file_and_jobs(
        self, file_id: str, job_ids: Iterable[str]
    ) -> tuple[StoredFile | None, list[ProcessingJob]]:
        """The file and those of `job_ids` stored, each read strongly consistently."""
        ...


class SeparateReads:
    """The file, then its jobs: two requests (stores that cannot read both tables at once)."""

    def __init__(self, jobs: JobStore, files: FileStore) -> None:
        self._jobs, self._files = jobs, files

    def file_and_jobs(
        self, file_id: str, job_ids: Iterable[str]
    ) -> tuple[StoredFile | None, list[ProcessingJob]]:
        stored = self._files.get(file_id, consistent=True)
        wanted = set(job_ids)
        return stored, (self._jobs.get_many(wanted, consistent=True) if wanted else [])


class FileCompletions:
    def __init__(
        self,
        jobs: JobStore,
        files: FileStore,
        *,
        together: FileAndJobs | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._jobs, self._files, self._clock = jobs, files, clock
        self._together = together or SeparateReads(jobs, files)

    def job_ended(self, job: ProcessingJob) -> FileCompletion | None:
        """The completion this job's end recorded for its file, or None (a job still open, the
        completion recorded already, or no such file)."""
        asked = likely_ingest_jobs(job) | {job.id}
        stored, read = self._together.file_and_jobs(job.file_id, asked)
        if stored is None:
            return None
        gone: frozenset[str] = frozenset()
        if stored.job_ids:
            wanted = stored.job_ids | {job.id}
            jobs = [found for found in read if found.id in wanted]
            if unread := wanted - asked:
                jobs += self._jobs.get_many(unread, consistent=True)
            # Put in the same write as their id, so missing now means expired or removed.
            gone = stored.job_ids - {found.id for found in jobs}
        else:
            # A file recorded before files kept their job ids: its jobs through its tenant's
            # index (JobStore.jobs_of), which is eventually consistent.
            jobs = self._jobs.jobs_of(stored)
        completion = completion_of(jobs, at=self._clock())
        if completion is None:
            return None
        if stored.processed is not None and stored.processed.fingerprint == completion.fingerprint:
            return None  # recorded already: no write
        recorded = self._files.record_completion(stored.id, completion, gone=gone)
        return completion if recorded else None


def likely_ingest_jobs(job: ProcessingJob) -> set[str]:
    """The ids of the ingest jobs the ended job's file most likely has: those the default plan
    gives its content type (with cover art or without), and the ended job's own type."""
    content_type = str((job.input_data or {}).get("content_type", ""))
    likely = {
        job.job_type,
        *job_types_for(content_type),
        *job_types_for(content_type, cover_art=True),
    }
    ingest_jobs = keys.ingest_job_types(job.tenant, job.file_id)
    return {job_id for job_id, job_type in ingest_jobs.items() if job_type in likely}
