"""Finding jobs by filter (domain/operations.JobFilter), a bounded number of reads at a time.

DynamoDB answers a key condition, not a search: each filter is served by the index that narrows
it most (a tenant's jobs newest first, or every tenant's jobs in one status in queue order, one
status after another), and the rest of the filter (error text, failure group, time range) is
checked on the jobs read. A page reads at most `max_reads` listing pages, so a request costs the
same however many jobs are stored; when the filter leaves a page short, the caller gets what was
found and a cursor to go on from (the console's "more").

The cursor is the listing's own, with the phase (which status of the sequence) in front.
"""

from __future__ import annotations

from dataclasses import dataclass

from filejobs.domain.job import JobStatus, ProcessingJob
from filejobs.domain.operations import ACTS_ON, Action, JobFilter
from filejobs.ports import InvalidCursorError, JobPage, JobStore, PageCursor

# Listing pages one search request reads at most (each page: `limit` entries per index shard).
MAX_READS = 4


class FilterTooWideError(ValueError):
    """A filter across every tenant that names no status: it would be a table scan."""


@dataclass(frozen=True)
class SearchPage:
    jobs: list[ProcessingJob]
    next: PageCursor | None  # None: nothing more matches
    reads: int  # listing pages read


@dataclass(frozen=True)
class _Phase:
    status: JobStatus | None  # None: every status of the tenant's listing


class JobSearch:
    def __init__(self, jobs: JobStore, *, max_reads: int = MAX_READS) -> None:
        self._jobs, self._max_reads = jobs, max_reads

    def page(
        self,
        wanted: JobFilter,
        *,
        action: Action | None = None,
        after: PageCursor | None = None,
        limit: int = 50,
    ) -> SearchPage:
        """Up to `limit` jobs matching `wanted` (and that `action` acts on), from `after`."""
        phases = _phases(wanted, action)
        phase, inner = _split(after, len(phases))
        found: list[ProcessingJob] = []
        reads = 0
        while phase < len(phases) and reads < self._max_reads and len(found) < limit:
            # Never more than the page still needs, so the listing's cursor is where this page ends.
            listed = self._list(wanted, phases[phase], inner, limit - len(found))
            reads += 1
            found += [j for j in listed.jobs if wanted.matches(j) and _acts(action, j)]
            if listed.next is None or _older_than_wanted(wanted, phases[phase], listed):
                phase, inner = phase + 1, None
            else:
                inner = listed.next
        done = phase >= len(phases)
        return SearchPage(found, None if done else _join(phase, inner), reads)

    def _list(
        self, wanted: JobFilter, phase: _Phase, after: PageCursor | None, limit: int
    ) -> JobPage:
        job_type = wanted.effective_type
        if wanted.tenant is not None:
            return self._jobs.tenant_page(
                wanted.tenant, status=phase.status, job_type=job_type, after=after, limit=limit
            )
        assert phase.status is not None
        return self._jobs.status_page(phase.status, job_type=job_type, after=after, limit=limit)


def _phases(wanted: JobFilter, action: Action | None) -> list[_Phase]:
    statuses = wanted.statuses(action)
    if wanted.tenant is not None:
        # The tenant's index filters one status in the query; several are checked on the jobs.
        return [_Phase(statuses[0] if len(statuses) == 1 else None)] if statuses else []
    if len(statuses) == len(JobStatus):
        raise FilterTooWideError(
            "a search across every tenant names a tenant, a status or a failure group"
        )
    return [_Phase(s) for s in statuses]


def _acts(action: Action | None, job: ProcessingJob) -> bool:
    return action is None or job.status in ACTS_ON[action]


def _older_than_wanted(wanted: JobFilter, phase: _Phase, listed: JobPage) -> bool:
    """A tenant's listing is newest first: past `since`, nothing later can match."""
    if wanted.tenant is None or wanted.since is None or not listed.jobs:
        return False
    del phase
    return listed.jobs[-1].metadata.created_at < wanted.since


def _join(phase: int, inner: PageCursor | None) -> PageCursor:
    if inner is None:
        return PageCursor(f"{phase}|", "-")
    return PageCursor(f"{phase}|{inner.range_value}", inner.id)


def _split(after: PageCursor | None, phases: int) -> tuple[int, PageCursor | None]:
    if after is None:
        return 0, None
    head, bar, rest = after.range_value.partition("|")
    if not bar or not head.isdigit() or not 0 <= int(head) < phases:
        raise InvalidCursorError("not a search cursor")
    if after.id == "-" and not rest:
        return int(head), None
    return int(head), PageCursor(rest, after.id)
