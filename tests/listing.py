"""A file's jobs by its id, as the services read them (JobRepository.jobs_of on the stored file):
what a test against the real tables checks a file's jobs with."""

from __future__ import annotations

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.job import JobStatus, ProcessingJob


def jobs_of_file(file_id: str, status: JobStatus | None = None) -> list[ProcessingJob]:
    stored = FileRepository().get(file_id)
    return [] if stored is None else JobRepository().jobs_of(stored, status)
