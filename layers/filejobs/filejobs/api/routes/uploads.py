"""/uploads: a presigned POST into the tenant's uploads, for a browser (services/uploads.py;
docs/UPLOADS.md)."""

from __future__ import annotations

from typing import Any

from filejobs.api import openapi, parsing, rendering
from filejobs.api.calls import caller, resource_router
from filejobs.api.use_cases import uploads

router = resource_router()


@router.post("/uploads", **openapi.UPLOAD)
def sign_upload() -> dict[str, Any]:
    who = caller(router.current_event)
    tenant, request = parsing.upload_request(router.current_event.body)
    return rendering.signed_upload(uploads().mint(who, tenant, request))
