"""/overview and /failures: the console's views of the jobs (services/console_views.py)."""

from __future__ import annotations

from typing import Any

from filejobs import runtime
from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import caller, params, resource_router

router = resource_router()


@router.get("/overview", **openapi.OVERVIEW)
def overview() -> dict[str, Any]:
    who = caller(router.current_event)
    tenant = parsing.optional_tenant(params(router.current_event))
    return rendering.console_overview(runtime.console_views().overview(who, tenant))


@router.get("/failures", **openapi.FAILURES)
def failures() -> dict[str, Any]:
    who = caller(router.current_event)
    tenant, job_type = parsing.failures_query(params(router.current_event))
    return rendering.failure_groups(runtime.console_views().failures(who, tenant, job_type))
