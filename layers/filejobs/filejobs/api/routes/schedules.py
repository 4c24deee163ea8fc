"""/schedules: a tenant's recurring bulk actions (EventBridge Scheduler), made, listed,
enabled or paused, deleted (services/schedules.py; docs/SCHEDULES.md)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import about, caller, json_answer, no_content, params, resource_router
from filejobs.api.use_cases import schedules
from filejobs.domain.time import utcnow

router = resource_router()


@router.post("/schedules", **openapi.CREATE_SCHEDULE)
def create_schedule() -> Response[str]:
    who = caller(router.current_event)
    made = schedules().create(who, parsing.new_schedule(router.current_event.body))
    return json_answer(201, json.dumps(rendering.schedule(made, utcnow())))


@router.get("/schedules", **openapi.LIST_SCHEDULES)
def list_schedules() -> dict[str, Any]:
    who = caller(router.current_event)
    found = schedules().of_tenant(who, parsing.optional_tenant(params(router.current_event)))
    return rendering.schedules(found, utcnow())


@router.get("/schedules/<schedule_id>", **openapi.GET_SCHEDULE)
def get_schedule(schedule_id: str) -> dict[str, Any]:
    about("schedule_id", schedule_id)
    who = caller(router.current_event)
    found = schedules().get(who, parsing.schedule_id(schedule_id))
    return rendering.schedule(found, utcnow())


@router.patch("/schedules/<schedule_id>", **openapi.CHANGE_SCHEDULE)
def change_schedule(schedule_id: str) -> dict[str, Any]:
    about("schedule_id", schedule_id)
    who = caller(router.current_event)
    enabled = parsing.schedule_change(router.current_event.body)
    changed = schedules().set_enabled(who, parsing.schedule_id(schedule_id), enabled)
    return rendering.schedule(changed, utcnow())


@router.delete("/schedules/<schedule_id>", **openapi.DELETE_SCHEDULE)
def delete_schedule(schedule_id: str) -> Response[str]:
    about("schedule_id", schedule_id)
    who = caller(router.current_event)
    schedules().delete(who, parsing.schedule_id(schedule_id))
    return no_content()
