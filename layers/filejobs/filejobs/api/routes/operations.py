"""/operations: a bulk action on the jobs a filter finds (a dry run counts them), the recent
operations, one operation's progress."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import (
    caller,
    idempotency_key,
    json_answer,
    params,
    resource_router,
    started,
)
from filejobs.api.use_cases import operations, page_tokens
from filejobs.ports import PageCursor

router = resource_router()


@router.post("/operations", **openapi.START_OPERATION)
def start_operation() -> Response[str]:
    """A bulk action by filter: with dry_run, its count and a sample; else the operation."""
    event = router.current_event
    who = caller(event)
    command = parsing.start_operation(event.body, idempotency_key(event))
    if command.dry_run:
        found = operations().preview(who, command.action, command.filter)
        return json_answer(200, json.dumps(rendering.preview(found)))
    return started(operations().start(who, command))


@router.get("/operations", **openapi.LIST_OPERATIONS)
def list_operations() -> dict[str, Any]:
    who = caller(router.current_event)
    tenant, limit, token = parsing.operations_page(params(router.current_event))
    scope = {"listing": "operations", "caller": who.name, "tenant": tenant}
    tokens = page_tokens()
    after = None if token is None else tokens.decode(token, scope).id
    found, last = operations().recent(who, tenant=tenant, after=after, limit=limit)
    next_token = None if last is None else tokens.encode(PageCursor("-", last), scope)
    return rendering.operations(found, next_token)


@router.get("/operations/<operation_id>", **openapi.GET_OPERATION)
def get_operation(operation_id: str) -> dict[str, Any]:
    who = caller(router.current_event)
    return rendering.operation(operations().get(who, parsing.operation_id(operation_id)))
