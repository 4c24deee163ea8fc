"""The DynamoDB side of the file item's bound (domain/quotas.NAMED_JOBS_PER_FILE): a job added to
a file that names all it may is put without its id on the file (the transaction only checks the
file is there); its tenant's index finds it (JobRepository.jobs_of), and erasing the file erases
it too. Against moto tables built from template.yaml (tests/unit/test_file_item_bound.py runs
10,000 on the fakes)."""

from __future__ import annotations

import pytest

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.quotas import NAMED_JOBS_PER_FILE
from filejobs.services.rescans import Rescans
from tests.fakes import RecordingDispatcher
from tests.integration.test_api import ACME, Api, ingested, stack  # noqa: F401
from tests.integration.test_api_rescans import clean
from tests.listing import jobs_of_file

BEYOND = 8  # rescans past the bound


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture, imported to be used here)
    return stack


def test_jobs_past_the_bound_are_found_by_the_index_and_erased_with_the_file(api: Api) -> None:
    plan = ingested("acme", "often.pdf")
    clean(plan)
    files, jobs = FileRepository(), JobRepository()
    rescans = Rescans(jobs, files, RecordingDispatcher())
    made = NAMED_JOBS_PER_FILE - len(plan.jobs) + BEYOND
    for n in range(made):
        stored = files.get(plan.file.id)
        assert stored is not None
        assert rescans.rescan(stored, key=f"k-{n}", by="test", reason="again").created

    stored = files.get(plan.file.id)
    assert stored is not None
    assert len(stored.job_ids) == NAMED_JOBS_PER_FILE
    every = {job.id for job in jobs_of_file(plan.file.id)}
    assert len(every) == len(plan.jobs) + made
    assert stored.job_ids < every

    status, erased = api.call("DELETE", f"/files/{plan.file.id}", who=ACME)

    assert status == 200, erased
    assert erased["jobs_erased"] == len(every)
    assert jobs.get_many(every) == []
