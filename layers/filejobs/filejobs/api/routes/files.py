"""/files: a file found by key or listed by prefix, its view with its jobs, its erasure, the
jobs asked of it and its rescan; /rescans: a rescan of a tenant's files by prefix."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs import runtime
from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import (
    about,
    caller,
    idempotency_key,
    json_answer,
    params,
    requested,
    resource_router,
)
from filejobs.api.use_cases import status_api

router = resource_router()

_LISTING = frozenset({"prefix", "tenant", "limit", "next_token"})


@router.get("/files", **openapi.FIND_FILE)
def find_files() -> dict[str, Any]:
    """One file's versions by its key (key=), or a tenant's files under a prefix (prefix=)."""
    who = caller(router.current_event)
    query = params(router.current_event)
    if "key" not in query and query.keys() & _LISTING:
        return rendering.file_listing(status_api().list_files(who, parsing.list_files(query)))
    wanted = parsing.find_file(query, runtime.api_settings().uploads_bucket)
    return rendering.file_versions(status_api().file_by_key(who, wanted))


@router.get("/files/<file_id>", **openapi.GET_FILE)
def get_file(file_id: str) -> dict[str, Any]:
    about("file_id", file_id)
    who = caller(router.current_event)
    file_id = parsing.canonical_id("file id", file_id)
    return rendering.file_with_jobs(status_api().file(who, file_id))


@router.delete("/files/<file_id>", **openapi.ERASE_FILE)
def erase_file(file_id: str) -> dict[str, Any]:
    about("file_id", file_id)
    who = caller(router.current_event)
    file_id = parsing.canonical_id("file id", file_id)
    return runtime.file_lifecycle().erase(who, file_id).to_dict()


@router.get("/files/<file_id>/jobs", **openapi.FILE_JOBS)
def jobs_of_file(file_id: str) -> dict[str, Any]:
    about("file_id", file_id)
    who = caller(router.current_event)
    query = parsing.file_jobs(file_id, params(router.current_event))
    return rendering.jobs_of_file(status_api().file_jobs(who, query))


@router.post("/files/<file_id>/jobs", **openapi.REQUEST_JOB)
def request_job(file_id: str) -> Response[str]:
    about("file_id", file_id)
    event = router.current_event
    who = caller(event)
    command = parsing.request_job(file_id, event.body, idempotency_key(event))
    return requested(status_api().request_job(who, command))


@router.post("/files/<file_id>/rescan", **openapi.RESCAN_FILE)
def rescan_file(file_id: str) -> Response[str]:
    about("file_id", file_id)
    event = router.current_event
    who = caller(event)
    command = parsing.rescan_file(file_id, event.body, idempotency_key(event))
    return requested(status_api().rescan_file(who, command))


@router.post("/rescans", **openapi.RESCAN_FILES)
def rescan_files() -> Response[str]:
    event = router.current_event
    who = caller(event)
    command = parsing.rescan_files(event.body, idempotency_key(event))
    page = status_api().rescan_files(who, command)
    body = json.dumps(rendering.rescanned_page(page))
    return json_answer(200, body, headers={"Idempotency-Key": page.idempotency_key})
