"""A bulk operation's dry run shows a sample of SAMPLE_SIZE matching jobs even when the search
answers in short pages (one DynamoDB page per index shard, a cursor never past what was read),
reading on within the count's budget of reads; on in-memory stand-ins, no AWS."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from filejobs.access import Caller
from filejobs.domain.job import ProcessingJob
from filejobs.domain.operations import Action, JobFilter
from filejobs.ports import PageCursor
from filejobs.services.api import StatusApi
from filejobs.services.job_search import SearchPage
from filejobs.services.operations import COUNT_READS, SAMPLE_SIZE, BulkOperations
from tests.factories import pending_job

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
ACME = Caller(tenant="acme", operator=False)


@dataclass
class ShortPages:
    """A search of `jobs` whose every page ends after `per_page` of them, whatever was asked."""

    jobs: list[ProcessingJob]
    per_page: int
    limits: list[int] = field(default_factory=list)

    def page(self, wanted: Any, *, action: Any, after: PageCursor | None, limit: int) -> SearchPage:
        self.limits.append(limit)
        start = 0 if after is None else int(after.id)
        end = min(start + min(self.per_page, limit), len(self.jobs))
        more = PageCursor("-", str(end)) if end < len(self.jobs) else None
        return SearchPage(self.jobs[start:end], more, reads=1)


def operations(search: ShortPages) -> BulkOperations:
    status_api = cast("StatusApi", type("Api", (), {"jobs": None})())
    bulk = BulkOperations(store=cast("Any", None), queue=cast("Any", None), status_api=status_api)
    bulk._search = search  # type: ignore[assignment]
    return bulk


def jobs(count: int) -> list[ProcessingJob]:
    return [pending_job(NOW) for _ in range(count)]


def test_a_dry_runs_sample_fills_from_short_pages() -> None:
    search = ShortPages(jobs(60), per_page=3)
    preview = operations(search).preview(ACME, Action.CANCEL, JobFilter(tenant="acme"))
    assert len(preview.sample) == SAMPLE_SIZE
    assert [job.id for job in preview.sample] == [job.id for job in search.jobs[:SAMPLE_SIZE]]
    # each page asks only for what the sample still lacks
    assert search.limits[:4] == [10, 7, 4, 1]


def test_a_sample_holds_all_there_are_when_fewer_match() -> None:
    search = ShortPages(jobs(4), per_page=3)
    preview = operations(search).preview(ACME, Action.CANCEL, JobFilter(tenant="acme"))
    assert len(preview.sample) == 4


def test_a_sample_stops_at_the_read_budget() -> None:
    search = ShortPages(jobs(1000), per_page=0)  # pages that find nothing, yet go on
    preview = operations(search).preview(ACME, Action.CANCEL, JobFilter(tenant="acme"))
    assert preview.sample == []
    assert len(search.limits) <= 2 * COUNT_READS  # the sample's budget, then the count's
