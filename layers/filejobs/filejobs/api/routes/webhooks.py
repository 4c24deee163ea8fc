"""/webhooks: a tenant's endpoints for the outcome events (registered with a secret shown
once, listed, removed, their secret rotated, re-enabled) and their deliveries (listed, read,
sent again). services/webhooks.py; docs/WEBHOOKS.md."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi
from filejobs.api import webhooks as webhook_requests
from filejobs.api.calls import caller, json_answer, no_content, params, resource_router
from filejobs.api.use_cases import webhooks
from filejobs.services.webhooks import endpoint_view

router = resource_router()


@router.post("/webhooks", **openapi.REGISTER_WEBHOOK)
def register_webhook() -> Response[str]:
    who = caller(router.current_event)
    command = webhook_requests.register(router.current_event.body)
    made = webhooks().register(who, command)
    return json_answer(201, json.dumps(webhook_requests.with_secret(made)))


@router.get("/webhooks", **openapi.LIST_WEBHOOKS)
def list_webhooks() -> dict[str, Any]:
    who = caller(router.current_event)
    tenant = webhook_requests.listing_tenant(params(router.current_event))
    return webhook_requests.endpoints(webhooks().endpoints(who, tenant))


@router.get("/webhooks/<webhook_id>", **openapi.GET_WEBHOOK)
def get_webhook(webhook_id: str) -> dict[str, Any]:
    who = caller(router.current_event)
    return endpoint_view(webhooks().endpoint(who, webhook_requests.endpoint_id(webhook_id)))


@router.delete("/webhooks/<webhook_id>", **openapi.REMOVE_WEBHOOK)
def remove_webhook(webhook_id: str) -> Response[str]:
    who = caller(router.current_event)
    webhooks().remove(who, webhook_requests.endpoint_id(webhook_id))
    return no_content()


@router.post("/webhooks/<webhook_id>/rotate", **openapi.ROTATE_WEBHOOK)
def rotate_webhook(webhook_id: str) -> dict[str, Any]:
    who = caller(router.current_event)
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    overlap = webhook_requests.rotation(router.current_event.body)
    return webhook_requests.with_secret(webhooks().rotate(who, endpoint_id, overlap))


@router.post("/webhooks/<webhook_id>/enable", **openapi.ENABLE_WEBHOOK)
def enable_webhook(webhook_id: str) -> dict[str, Any]:
    who = caller(router.current_event)
    return endpoint_view(webhooks().enable(who, webhook_requests.endpoint_id(webhook_id)))


@router.get("/webhooks/<webhook_id>/deliveries", **openapi.WEBHOOK_DELIVERIES)
def webhook_deliveries(webhook_id: str) -> dict[str, Any]:
    who = caller(router.current_event)
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    limit, after = webhook_requests.page(params(router.current_event))
    found, last = webhooks().deliveries(who, endpoint_id, after=after, limit=limit)
    return webhook_requests.deliveries(found, last)


@router.get("/webhooks/<webhook_id>/deliveries/<delivery_id>", **openapi.WEBHOOK_DELIVERY)
def webhook_delivery(webhook_id: str, delivery_id: str) -> dict[str, Any]:
    who = caller(router.current_event)
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    found = webhooks().delivery(who, endpoint_id, webhook_requests.delivery_id(delivery_id))
    return webhook_requests.delivery(found)


@router.post("/webhooks/<webhook_id>/deliveries/<delivery_id>/resend", **openapi.RESEND_DELIVERY)
def resend_delivery(webhook_id: str, delivery_id: str) -> Response[str]:
    who = caller(router.current_event)
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    again = webhooks().resend(who, endpoint_id, webhook_requests.delivery_id(delivery_id))
    return json_answer(202, json.dumps(webhook_requests.delivery(again)))
