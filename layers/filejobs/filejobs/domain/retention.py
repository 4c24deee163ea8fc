"""Keep the last N finished jobs of a type per file: which finished jobs go, beside the TTL.

Every finished job expires by TTL (`FinishedJobRetentionDays`). A job type may also keep only
its last N finished jobs on each file (the `KeepLastFinishedJobs` parameter, e.g.
`thumbnail_generation=3,video_thumbnail=1`): when a job of that type finishes, the older finished
jobs of that type on that file beyond N are retired (transitions.retire: soft-deleted and due
for TTL at once). A job type the setting does not name keeps the TTL alone.

"Last" is by when they finished (completed_at), then by creation and id, so the order is total.
Only finished jobs count and only finished jobs go: a pending, scheduled or running job is never
touched, whatever its age.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from filejobs.domain.job import JobType, ProcessingJob

# No job type keeps more than this many finished jobs per file by this rule (the TTL does).
MAX_KEEP_LAST = 1000

type KeepLast = Mapping[JobType, int]


class KeepLastSettingError(ValueError):
    """The `KeepLastFinishedJobs` setting is not `type=N[,type=N...]` of known types."""


def keep_last_setting(text: str | None) -> dict[JobType, int]:
    """`thumbnail_generation=3, video_thumbnail=1` -> {type: N}; empty -> {} (TTL only).

    N is 1..MAX_KEEP_LAST; 0 leaves the type to the TTL, as if not named.
    """
    keep: dict[JobType, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, count = part.partition("=")
        refusal = KeepLastSettingError(
            f"KeepLastFinishedJobs: {part.strip()!r} is not job_type=N with N in "
            f"0..{MAX_KEEP_LAST} (job types: {', '.join(t.value for t in JobType)})"
        )
        try:
            job_type, number = JobType(name.strip()), int(count.strip())
        except ValueError as error:
            raise refusal from error
        if not sep or not 0 <= number <= MAX_KEEP_LAST:
            raise refusal
        if job_type in keep:
            raise KeepLastSettingError(f"KeepLastFinishedJobs names {job_type.value} twice")
        if number:
            keep[job_type] = number
    return keep


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def finish_order(job: ProcessingJob) -> tuple[datetime, datetime, str]:
    return (job.completed_at or _EARLIEST, job.metadata.created_at, job.id)


def to_retire(
    finished: ProcessingJob, jobs_of_file: Iterable[ProcessingJob], keep: KeepLast
) -> list[ProcessingJob]:
    """The jobs to retire now that `finished` has finished: its file's finished jobs of its
    type beyond the newest `keep[type]`, oldest first.

    `finished` is taken as it is (the file's jobs may be read from an index that has not caught
    up with its finish) and ranked with them, but retired only if the listing still has it: a
    job the listing lacks was deleted or retired since (a stream record is older than the
    table), and retiring it again would be a write that loses.
    """
    limit = keep.get(finished.job_type, 0)
    if limit <= 0 or not finished.is_terminal:
        return []
    by_id = {j.id: j for j in jobs_of_file if j.file_id == finished.file_id}
    listed = set(by_id)
    by_id[finished.id] = finished
    done = [
        j
        for j in by_id.values()
        if j.job_type is finished.job_type
        and j.is_terminal
        and j.metadata.deleted_at is None
        and j.completed_at is not None
    ]
    done.sort(key=finish_order, reverse=True)
    return sorted((j for j in done[limit:] if j.id in listed), key=finish_order)
