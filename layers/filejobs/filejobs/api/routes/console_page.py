"""/console: the operator console's page and assets. Its shell holds no data (docs/CONSOLE.md),
so no caller is read; the data comes from the other routes, signed in."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import cache

from aws_lambda_powertools.event_handler import Response

from filejobs import console, runtime
from filejobs.adapters.s3 import S3OutputLinks
from filejobs.api import rendering
from filejobs.api.calls import json_answer, resource_router
from filejobs.api.rendering import ErrorCode

router = resource_router()


@cache
def _image_origin() -> str | None:
    """Where the presigned output URLs point (S3, or the local stack's emulator): the page's
    policy lets images load from there. Signed locally: no request is made."""
    bucket = runtime.settings().outputs_bucket
    if not bucket:
        return None
    link = S3OutputLinks(runtime.s3, bucket).link("derived/", timedelta(minutes=1))
    return console.origin_of(link)


def _console_file(name: str) -> Response[str]:
    stage_variables = router.current_event.stage_variables
    if name == console.CONFIG:
        settings = console.sign_in_settings(stage_variables)
        return json_answer(200, json.dumps(settings), headers={"Cache-Control": "no-store"})
    try:
        content_type, body = console.asset(name)
    except console.UnknownAssetError:
        return json_answer(404, rendering.error_body(ErrorCode.NOT_FOUND, "no such console file"))
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if name == console.PAGE:
        sign_in = console.sign_in_origin(stage_variables)
        headers["Content-Security-Policy"] = console.console_policy(_image_origin(), sign_in)
        headers["Referrer-Policy"] = "no-referrer"
    return Response(status_code=200, content_type=content_type, body=body.decode(), headers=headers)


@router.get("/console", include_in_schema=False)
def console_page() -> Response[str]:
    return _console_file(console.PAGE)


@router.get("/console/<asset>", include_in_schema=False)
def console_asset(asset: str) -> Response[str]:
    return _console_file(asset)
