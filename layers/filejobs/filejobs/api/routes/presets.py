"""/presets: a tenant's upload presets (which jobs an upload gets), listed, written as a new
version, read (any version) and deleted (services/presets.py)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import caller, no_content, params, resource_router
from filejobs.api.use_cases import presets

router = resource_router()


@router.get("/presets", **openapi.LIST_PRESETS)
def list_presets() -> dict[str, Any]:
    who = caller(router.current_event)
    tenant = parsing.optional_tenant(params(router.current_event))
    return rendering.presets(presets().of_tenant(who, tenant))


@router.put("/presets/<preset_name>", **openapi.PUT_PRESET)
def put_preset(preset_name: str) -> dict[str, Any]:
    who = caller(router.current_event)
    change = parsing.preset_change(router.current_event.body)
    tenant = parsing.optional_tenant(params(router.current_event))
    return rendering.preset(presets().put(who, tenant, parsing.preset_name(preset_name), change))


@router.get("/presets/<preset_name>", **openapi.GET_PRESET)
def get_preset(preset_name: str) -> dict[str, Any]:
    who = caller(router.current_event)
    query = params(router.current_event)
    name, tenant = parsing.preset_name(preset_name), parsing.optional_tenant(query)
    return rendering.preset(presets().get(who, tenant, name, parsing.preset_version(query)))


@router.delete("/presets/<preset_name>", **openapi.DELETE_PRESET)
def delete_preset(preset_name: str) -> Response[str]:
    who = caller(router.current_event)
    tenant = parsing.optional_tenant(params(router.current_event))
    presets().delete(who, tenant, parsing.preset_name(preset_name))
    return no_content()
