"""/jobs: a caller's jobs listed by filter, one job with its outputs and logs, its deletion,
cancel and retry."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import about, caller, no_content, params, resource_router
from filejobs.api.use_cases import status_api

router = resource_router()


@router.get("/jobs", **openapi.LIST_JOBS)
def list_jobs() -> dict[str, Any]:
    who = caller(router.current_event)
    query = parsing.list_jobs(params(router.current_event))
    return rendering.job_listing(status_api().list_jobs(who, query))


@router.get("/jobs/<job_id>", **openapi.GET_JOB)
def get_job(job_id: str) -> dict[str, Any]:
    about("job_id", job_id)
    who = caller(router.current_event)
    job_id = parsing.canonical_id("job id", job_id)
    return rendering.job_with_outputs(status_api().job(who, job_id))


@router.delete("/jobs/<job_id>", **openapi.DELETE_JOB)
def delete_job(job_id: str) -> Response[str]:
    about("job_id", job_id)
    who = caller(router.current_event)
    status_api().delete(who, parsing.canonical_id("job id", job_id))
    return no_content()


@router.post("/jobs/<job_id>/cancel", **openapi.CANCEL_JOB)
def cancel_job(job_id: str) -> dict[str, Any]:
    about("job_id", job_id)
    who = caller(router.current_event)
    command = parsing.cancel_job(job_id, router.current_event.body)
    return rendering.job(status_api().cancel(who, command))


@router.post("/jobs/<job_id>/retry", **openapi.RETRY_JOB)
def retry_job(job_id: str) -> dict[str, Any]:
    about("job_id", job_id)
    who = caller(router.current_event)
    job_id = parsing.canonical_id("job id", job_id)
    return rendering.job(status_api().retry(who, job_id))
