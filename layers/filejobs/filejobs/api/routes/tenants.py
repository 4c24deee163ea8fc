"""/tenants/{tenant}: a tenant's upload quotas, read and changed, and an operator's erasure of
the whole tenant (a dry run counts its files)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import caller, idempotency_key, json_answer, resource_router, started
from filejobs.api.use_cases import operations, quotas

router = resource_router()


@router.get("/tenants/<tenant>/quotas", **openapi.GET_QUOTAS)
def get_quotas(tenant: str) -> dict[str, Any]:
    who = caller(router.current_event)
    return rendering.quota_report(quotas().report(who, parsing.tenant_name(tenant)))


@router.put("/tenants/<tenant>/quotas", **openapi.SET_QUOTAS)
def set_quotas(tenant: str) -> dict[str, Any]:
    who = caller(router.current_event)
    name = parsing.tenant_name(tenant)
    change = parsing.quota_change(router.current_event.body)
    return rendering.quota_report(quotas().change(who, name, change))


@router.post("/tenants/<tenant>/erasure", **openapi.ERASE_TENANT)
def erase_tenant(tenant: str) -> Response[str]:
    """An operator's erasure of a whole tenant: with dry_run, its count of files; else the
    operation, as POST /operations answers one."""
    event = router.current_event
    who = caller(event)
    command = parsing.tenant_erasure(tenant, event.body, idempotency_key(event))
    if command.dry_run:
        found = operations().preview_erasure(who, command.tenant)
        return json_answer(200, json.dumps(rendering.erasure_preview(found)))
    return started(operations().erase_tenant(who, command))
