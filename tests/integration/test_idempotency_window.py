"""How long an Idempotency-Key answers its first job: for as long as the job's item is kept.

docs/JOBS.md promises exactly this. A key's job id derives from the tenant, the file and the key
(domain/keys.py), and nothing else remembers the key: while the job's item exists a repeat answers
it (200, a replay), even once the job has finished; once DynamoDB's TTL has deleted the item
(FinishedJobRetentionDays after the job finished, or at once for a job keep-last retention
retired) the same key makes a new job, under the same id. Keeping a key beyond its job would take
a write per job that nothing else needs (issue 46 holds a job to 5 DynamoDB requests).
"""

from __future__ import annotations

from typing import Any

import pytest

from filejobs.data.job_repository import JobRepository
from filejobs.domain.keys import job_id_for
from tests.integration.test_api import (
    Api,
    ingested,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.integration.test_api_requests import THUMBNAIL, completed, request_job


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture, imported to be used here)
    return stack


BODY: dict[str, Any] = {"job_type": THUMBNAIL}


def test_a_key_answers_its_finished_job_while_the_job_is_kept(api: Api) -> None:
    # Given a job requested under a key, which then completed (its item kept for the retention)
    plan = ingested("acme", "a.png")
    status, first, _ = request_job(api, plan.file.id, BODY, key="nightly-1")
    assert status == 201
    job = JobRepository().get(first["id"])
    assert job is not None
    done = completed(job, {"thumbnails": []})
    assert done.expires_at is not None  # when TTL may delete it: the key's last guaranteed day
    # When the same request comes again
    again, view, headers = request_job(api, plan.file.id, BODY, key="nightly-1")
    # Then it answers that finished job, as a replay, and makes nothing
    assert (again, view["id"], view["status"]) == (200, done.id, "completed")
    assert headers["Idempotent-Replayed"] == "true"


def test_once_ttl_has_deleted_the_job_the_same_key_makes_a_new_job_under_the_same_id(
    api: Api,
) -> None:
    # Given a job requested under a key, finished, and its item since deleted by TTL
    plan = ingested("acme", "a.png")
    _, first, _ = request_job(api, plan.file.id, BODY, key="nightly-1")
    job = JobRepository().get(first["id"])
    assert job is not None
    completed(job, {"thumbnails": []})
    assert JobRepository().erase(job.id)  # what DynamoDB's TTL does once `expires_at` passed
    # When the same request comes again
    status, view, headers = request_job(api, plan.file.id, BODY, key="nightly-1")
    # Then it is a new request: a new pending job (201, not a replay), under the id the key
    # derives, the same as the first job's
    assert (status, view["status"], headers["Idempotent-Replayed"]) == (201, "pending", "false")
    assert view["id"] == job.id == job_id_for("acme", f"api:{plan.file.id}:nightly-1")
