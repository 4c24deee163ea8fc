"""A job's retry budget (`max_retries`) is held by the domain, not only by the API.

The API refuses a `max_retries` outside 1..MAX_RETRIES_LIMIT (api/parsing.py); `new_job`, which
every path that makes a job goes through (ingest plans, the API, rescans, replays, the CLI),
refuses the same values, so no path can store a job whose budget the API would have refused.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from filejobs.api.parsing import request_job
from filejobs.domain.ingest import new_job
from filejobs.domain.job import MAX_RETRIES_LIMIT, InvalidJobError, JobType, ProcessingJob
from filejobs.domain.retry import DispatchPolicy
from filejobs.services.errors import InvalidRequestError
from tests.factories import ingest_plan

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
FILE_ID = "3f0c3c8e-6d1b-4f43-9a57-0b6f0d8c2a11"


def job_with(max_retries: object) -> ProcessingJob:
    stored = ingest_plan(NOW, "text/plain").file
    return new_job(
        stored,
        JobType.COMPRESSION,
        now=NOW,
        created_by="test",
        dispatch=DispatchPolicy(),
        max_retries=max_retries,  # type: ignore[arg-type]
    )


def api_accepts(max_retries: object) -> bool:
    body = json.dumps({"job_type": "compression", "max_retries": max_retries})
    try:
        request_job(FILE_ID, body, None)
    except InvalidRequestError:
        return False
    return True


def domain_accepts(max_retries: object) -> bool:
    try:
        job_with(max_retries)
    except InvalidJobError:
        return False
    return True


@pytest.mark.parametrize("max_retries", [-1, 0, 1, 2, MAX_RETRIES_LIMIT, MAX_RETRIES_LIMIT + 1, 99])
def test_new_job_accepts_exactly_the_budgets_the_api_accepts(max_retries: int) -> None:
    assert domain_accepts(max_retries) == api_accepts(max_retries)


@pytest.mark.parametrize("max_retries", [0, MAX_RETRIES_LIMIT + 1, -3])
def test_a_budget_out_of_range_is_refused_saying_what_is_allowed(max_retries: int) -> None:
    allowed = f"max_retries: must be an integer from 1 to {MAX_RETRIES_LIMIT}"
    with pytest.raises(InvalidJobError, match=allowed):
        job_with(max_retries)


@pytest.mark.parametrize("max_retries", [True, 2.5, 3.0, "3", None])
def test_a_budget_that_is_not_an_integer_is_refused(max_retries: object) -> None:
    # None is no budget at all here: the caller meant the default, and says so by leaving it out
    if max_retries is None:
        assert job_with(None).max_retries == 3
        return
    with pytest.raises(InvalidJobError, match="max_retries"):
        job_with(max_retries)


def test_the_limits_themselves_are_budgets_a_job_may_have() -> None:
    assert job_with(1).max_retries == 1
    assert job_with(MAX_RETRIES_LIMIT).max_retries == MAX_RETRIES_LIMIT


def test_a_refused_budget_is_a_value_error_as_callers_already_map_them() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        job_with(0)


def test_a_job_built_directly_is_held_to_the_same_budget() -> None:
    job = job_with(3)
    with pytest.raises(InvalidJobError, match="max_retries"):
        ProcessingJob(**{**vars(job), "max_retries": MAX_RETRIES_LIMIT + 1})
    job.max_retries = 0  # changed after the fact: the spec's invariants name it
    assert f"max_retries 0 outside 1..{MAX_RETRIES_LIMIT}" in job.invariant_violations()
