"""When a file is processed: every one of its jobs is terminal, and what each of them ended as.

A file's jobs finish one by one, on different workers, and any of them may be opened again later
(a retry, a rescan, a job requested through the API). The file is *processed* each time all of
them are terminal at once; a `FileCompletion` is that moment, named by a fingerprint of every
job's (id, attempt, status). The same state read twice gives the same fingerprint, so a check
made twice (a stream record delivered again, two jobs of the file ending together) records and
announces one completion; a re-opened file that finishes again has new attempts or a new job,
so it gives a new fingerprint and a new completion.

Completions are ordered by `version`, the latest write among the file's jobs: the repository
records one only if it is newer than the one recorded, so a check that read an older state
(slow, or replayed) can never replace a newer completion.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from filejobs.domain.job import TERMINAL_STATUSES, ProcessingJob
from filejobs.domain.outputs import OUTPUTS_SUMMARISED, DerivedFile, derived_files

# A job's result as the completion carries it: small results whole, larger ones by their scalar
# fields. Bounded so that a file's completion (kept on its item, sent in one event) stays small.
RESULT_SUMMARY_BYTES = 1024
ERROR_SUMMARY_CHARS = 500
# Up to this many jobs are summarised one by one; a file with more (API jobs, many rescans)
# names the rest by count. The fingerprint always covers every job.
JOBS_SUMMARISED = 50


@dataclass(frozen=True)
class JobSummary:
    """One job of a processed file, as the completion reports it."""

    id: str
    job_type: str
    status: str
    attempt: int
    error: str | None
    result: dict[str, Any] | None
    # The files the job wrote, typed (domain/outputs.py), at most OUTPUTS_SUMMARISED of them;
    # `more_outputs` counts the rest.
    outputs: tuple[DerivedFile, ...] = ()
    more_outputs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """As the API shows it (and File Processed sends it)."""
        return {
            "id": self.id,
            "job_type": self.job_type,
            "status": self.status,
            "attempt": self.attempt,
            "error": self.error,
            "result": self.result,
            "outputs": [{"key": file.key, **file.facts()} for file in self.outputs],
            "more_outputs": self.more_outputs,
        }


@dataclass(frozen=True)
class FileCompletion:
    """A moment at which every job of a file was terminal."""

    fingerprint: str
    # The latest `updated_at` among the jobs (ISO 8601, UTC): orders completions of one file.
    version: str
    completed_at: datetime
    jobs: tuple[JobSummary, ...]
    # Jobs left out of `jobs` (past JOBS_SUMMARISED): counted, not listed.
    more_jobs: int = 0

    def counts(self) -> dict[str, int]:
        """Jobs by status, over the jobs summarised."""
        tally: dict[str, int] = {}
        for job in self.jobs:
            tally[job.status] = tally.get(job.status, 0) + 1
        return tally


def completion_of(jobs: Iterable[ProcessingJob], *, at: datetime) -> FileCompletion | None:
    """The file's completion when every job is terminal; None while one is not (or it has none:
    a file given no jobs was never going to be processed, it was refused)."""
    ordered = sorted(jobs, key=lambda job: (job.metadata.created_at, job.id))
    if not ordered or any(job.status not in TERMINAL_STATUSES for job in ordered):
        return None
    return FileCompletion(
        fingerprint=fingerprint(ordered),
        version=max(job.metadata.updated_at for job in ordered).isoformat(),
        completed_at=at,
        jobs=tuple(summarise(job) for job in ordered[:JOBS_SUMMARISED]),
        more_jobs=max(len(ordered) - JOBS_SUMMARISED, 0),
    )


def fingerprint(jobs: Iterable[ProcessingJob]) -> str:
    states = sorted(f"{job.id}:{job.attempt}:{job.status.value}" for job in jobs)
    return hashlib.sha256("\n".join(states).encode()).hexdigest()[:32]


def summarise(job: ProcessingJob) -> JobSummary:
    files = derived_files(job)
    error = job.error_message
    if error is not None and len(error) > ERROR_SUMMARY_CHARS:
        error = error[: ERROR_SUMMARY_CHARS - 1] + "…"
    return JobSummary(
        id=job.id,
        job_type=job.job_type.value,
        status=job.status.value,
        attempt=job.attempt,
        error=error,
        result=summarise_result(job.result_data),
        outputs=tuple(files[:OUTPUTS_SUMMARISED]),
        more_outputs=max(len(files) - OUTPUTS_SUMMARISED, 0),
    )


def summarise_result(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The result whole when it is small; else its scalar fields, marked `truncated`."""
    if result is None:
        return None
    whole = dict(result)
    if _size(whole) <= RESULT_SUMMARY_BYTES:
        return whole
    scalars: dict[str, Any] = {"truncated": True}
    for name, value in whole.items():
        if isinstance(value, (str, int, float, bool)) or value is None:
            candidate = {**scalars, name: value}
            if _size(candidate) <= RESULT_SUMMARY_BYTES:
                scalars = candidate
    return scalars


def _size(value: object) -> int:
    return len(json.dumps(value, default=str, separators=(",", ":")).encode())
