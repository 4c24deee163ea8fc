"""The webhook routes' requests and answers (services/webhooks.py has the use cases): kept apart
from parsing.py and rendering.py, whose rules they share (400 unreadable, 422 not allowed)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from filejobs.domain import webhooks as rules
from filejobs.domain.keys import is_tenant
from filejobs.services.errors import InvalidRequestError, MalformedRequestError, NotFoundError
from filejobs.services.webhooks import Register, WithSecret, delivery_view, endpoint_view

ENDPOINT_ID_PATTERN = r"^wh-[0-9a-f]{24}-[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
DELIVERY_ID_PATTERN = r"^dl-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{20}$"
DEFAULT_DELIVERIES = 25
MAX_DELIVERIES = 100
_DIGITS = re.compile(r"[0-9]{1,6}")


def endpoint_id(text: str) -> str:
    if rules.tenant_of_endpoint(text) is None:
        raise NotFoundError("no such webhook endpoint")
    return text


def delivery_id(text: str) -> str:
    if not rules.is_delivery_id(text):
        raise NotFoundError("no such delivery")
    return text


def register(body: str | None) -> Register:
    """POST /webhooks: {"url", "event_types", "tenant"?, "description"?}."""
    data = _object(body, {"url", "event_types", "tenant", "description"})
    url = data.get("url")
    if not isinstance(url, str):
        raise InvalidRequestError("url is required: the endpoint's https URL")
    types = data.get("event_types")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types) or not types:
        raise InvalidRequestError(
            f"event_types is required: a list of some of {', '.join(rules.EVENT_TYPES)}"
        )
    if len(set(types)) != len(types):
        raise InvalidRequestError("event_types must name each type once")
    tenant = data.get("tenant")
    if "tenant" in data and not (isinstance(tenant, str) and is_tenant(tenant)):
        raise InvalidRequestError("tenant must be a tenant name")
    description = data.get("description", "")
    if (
        not isinstance(description, str)
        or len(description) > rules.MAX_DESCRIPTION_LENGTH
        or not _is_text(description)
    ):
        raise InvalidRequestError(
            f"description must be text of at most {rules.MAX_DESCRIPTION_LENGTH} characters"
        )
    return Register(url, frozenset(types), tenant, description)


def rotation(body: str | None) -> timedelta:
    """POST /webhooks/{id}/rotate: an optional {"overlap_hours"} (24 unless given, 0 to 168)."""
    data = _object(body, {"overlap_hours"})
    hours = data.get("overlap_hours", rules.ROTATION_OVERLAP.total_seconds() / 3600)
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not 0 <= hours <= 168:
        raise InvalidRequestError("overlap_hours must be a number from 0 to 168")
    return timedelta(hours=hours)


def listing_tenant(params: Mapping[str, str]) -> str | None:
    tenant = params.get("tenant")
    if tenant is not None and not is_tenant(tenant):
        raise MalformedRequestError("tenant must be a tenant name")
    return tenant


def page(params: Mapping[str, str]) -> tuple[int, str | None]:
    limit_text = params.get("limit", str(DEFAULT_DELIVERIES))
    if not _DIGITS.fullmatch(limit_text) or not 1 <= int(limit_text) <= MAX_DELIVERIES:
        raise MalformedRequestError(f"limit must be an integer from 1 to {MAX_DELIVERIES}")
    after = params.get("next_token")
    if after is not None and not rules.is_delivery_id(after):
        raise MalformedRequestError("next_token must be the previous page's next_token")
    return int(limit_text), after


def _object(body: str | None, allowed: set[str]) -> dict[str, Any]:
    if body is None or not body.strip():
        return {}
    try:
        data = json.loads(body)
    except ValueError as error:
        raise MalformedRequestError("the body must be a JSON object") from error
    if not isinstance(data, dict):
        raise MalformedRequestError("the body must be a JSON object")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidRequestError(f"unknown field {unknown[0]!r}")
    return data


# --- answers -------------------------------------------------------------------------------------


def with_secret(made: WithSecret) -> dict[str, Any]:
    """The one answer that shows a secret: the one just made (store it now)."""
    return {**endpoint_view(made.endpoint), "secret": made.secret}


def endpoints(found: list[rules.Endpoint]) -> dict[str, Any]:
    return {"webhooks": [endpoint_view(e) for e in found]}


def deliveries(found: list[rules.Delivery], next_token: str | None) -> dict[str, Any]:
    return {"deliveries": [delivery_view(d) for d in found], "next_token": next_token}


def delivery(found: rules.Delivery) -> dict[str, Any]:
    return delivery_view(found, with_body=True)


def _is_text(text: str) -> bool:
    """Text DynamoDB stores as written: valid UTF-8 (no lone surrogate), no control character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return all(c.isprintable() for c in text)
