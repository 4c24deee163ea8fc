"""A file's item does not grow with its rescans: it names at most NAMED_JOBS_PER_FILE of its jobs
in `job_ids` (domain/quotas.py); the rest are found through the jobs table's by_tenant index. On
the in-memory stores (10,000 rescans, each a real Rescans.rescan with its own key); the DynamoDB
repository's side is tests/integration/test_file_item_bound.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from filejobs.data.mapping import file_to_model
from filejobs.domain.file import StoredFile
from filejobs.domain.quotas import NAMED_JOBS_PER_FILE
from filejobs.services.rescans import Rescans
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore, RecordingDispatcher

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
RESCANS = 10_000
# DynamoDB's limit on an item is 400 KB; 10,000 job ids (36 characters each) would be 360 KB.
SMALL_ITEM_BYTES = 4_000


def item_bytes(stored: StoredFile) -> int:
    """The file's item as DynamoDB would store it, roughly: its attributes' JSON."""
    return len(json.dumps(file_to_model(stored).serialize()))


def test_ten_thousand_rescans_of_one_file_keep_its_item_small() -> None:
    jobs = InMemoryJobStore()
    files = InMemoryFileStore(jobs)
    plan = ingest_plan(NOW, "application/pdf")
    files.record_ingest(plan)
    rescans = Rescans(jobs, files, RecordingDispatcher(), clock=lambda: NOW + timedelta(hours=1))

    for n in range(RESCANS):
        stored = files.get(plan.file.id)
        assert stored is not None
        assert rescans.rescan(stored, key=f"k-{n}", by="test", reason="again").created

    stored = files.get(plan.file.id)
    assert stored is not None
    assert len(stored.job_ids) == NAMED_JOBS_PER_FILE
    assert item_bytes(stored) < SMALL_ITEM_BYTES
    # every rescan is still the file's, through the index
    assert len(jobs.jobs_of_file(plan.file.id)) == len(plan.jobs) + RESCANS
