"""Specification: nothing made from a file the scan found infected is served, from the moment
the verdict is recorded: before the file is marked quarantined and before a byte of it moves
(services/api.py `_outputs`, services/virus_scan.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from filejobs.access import Caller
from filejobs.domain import keys, transitions
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.transition_result import Applied
from filejobs.services.api import StatusApi
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
KEEP = timedelta(days=30)
ACME = Caller(tenant="acme", operator=False)


class Links:
    def link(self, key: str, lifetime: timedelta) -> str:
        return f"https://outputs.example/{key}?expires={int(lifetime.total_seconds())}"


@pytest.fixture
def api(jobs: InMemoryJobStore, files: InMemoryFileStore, sent: RecordingDispatcher) -> StatusApi:
    return StatusApi(jobs=jobs, files=files, dispatcher=lambda: sent, retention=KEEP, links=Links())


def thumbnail_made(jobs: InMemoryJobStore, plan: IngestPlan) -> ProcessingJob:
    """The file's thumbnail job, completed with one derived file."""
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    claim = transitions.claim(now=T0, lease=timedelta(minutes=5), worker="w")
    claimed = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(claimed, Applied)
    key = f"{keys.derived_prefix(plan.file.tenant, plan.file.id)}thumbnail_generation/t.webp"
    done = transitions.complete(claimed.job, result={"key": key}, now=T0, retention=KEEP)
    assert isinstance(jobs.apply(job.id, job.job_type, done), Applied)
    return job


def verdict(status: ScanStatus) -> ScanRecord:
    return ScanRecord(verdict=status, scanned_at=T0, job_id="scan", signatures=("Eicar",))


def test_a_clean_files_outputs_are_linked(
    api: StatusApi, jobs: InMemoryJobStore, files: InMemoryFileStore
) -> None:
    plan = ingest_plan(T0)
    files.record_ingest(plan)
    files.record_scan(plan.file.id, verdict(ScanStatus.CLEAN), by="scan")
    job = thumbnail_made(jobs, plan)

    shown = api.job(ACME, job.id).outputs

    assert [o.url.split("?")[0].rsplit("/", 1)[-1] for o in shown] == ["t.webp"]


def test_a_file_recorded_infected_gets_no_link_before_it_is_even_marked_quarantined(
    api: StatusApi, jobs: InMemoryJobStore, files: InMemoryFileStore
) -> None:
    # Given a file whose outputs were made while it was thought clean
    plan = ingest_plan(T0)
    files.record_ingest(plan)
    files.record_scan(plan.file.id, verdict(ScanStatus.CLEAN), by="scan")
    job = thumbnail_made(jobs, plan)
    # When a rescan records it infected, the file still active (the quarantine not begun)
    after = files.record_scan(plan.file.id, verdict(ScanStatus.INFECTED), by="scan")
    assert after is not None and after.status.value == "active"

    # Then no link to its outputs is given: nothing made from it is served
    assert api.job(ACME, job.id).outputs == []
    assert all(j.outputs == [] for j in api.file(ACME, plan.file.id).jobs)
