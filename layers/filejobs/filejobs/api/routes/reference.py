"""/health, and the API's own reference: /openapi.json (the committed document, as
tools/openapi.py writes it) and /docs (Swagger UI over it)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from aws_lambda_powertools.event_handler import Response

from filejobs.api import openapi
from filejobs.api.calls import caller, json_answer, resource_router

router = resource_router()


@router.get("/health", **openapi.HEALTH)
def health() -> dict[str, str]:
    return {"status": "ok"}


@cache
def _openapi_document() -> str:
    return resources.files("filejobs.api_docs").joinpath("openapi.json").read_text()


@router.get("/openapi.json", **openapi.OPENAPI_DOCUMENT)
def openapi_document() -> Response[str]:
    caller(router.current_event)
    return json_answer(200, _openapi_document())


@router.get("/docs", **openapi.DOCS_PAGE_ROUTE)
def docs_page() -> Response[str]:
    caller(router.current_event)
    return Response(
        status_code=200,
        content_type="text/html; charset=utf-8",
        body=openapi.DOCS_PAGE,
        headers={"Cache-Control": "no-store", "Content-Security-Policy": openapi.DOCS_POLICY},
    )
