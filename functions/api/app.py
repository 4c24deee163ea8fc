"""The status API: files and jobs, seen through the caller's tenant; cancel, retry, rescan;
bulk operations, schedules, presets, quotas, uploads, webhooks; the console's page.

Thin: the resolver, one Router per resource (filejobs/api/routes/, each route identifying its
caller, parsing its request into a command, calling its use case and rendering the result), and
the one error shape every refusal answers with its HTTP status, {"error": {"code", "message"}}.
Each route's OpenAPI description is filejobs/api/openapi.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, CORSConfig, Response
from aws_lambda_powertools.event_handler.exceptions import ServiceError

from filejobs import runtime
from filejobs.api import rendering
from filejobs.api.calls import json_answer
from filejobs.api.rendering import ErrorCode
from filejobs.api.routes import ROUTERS
from filejobs.instrumentation import instruments
from filejobs.services.errors import QuotaExceededError, RequestRefusedError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

observed = instruments(measured=False)
logger, tracer = observed.logger, observed.tracer


def cors(origins: Sequence[str]) -> CORSConfig | None:
    """Powertools answers each listed origin with its own name (never '*') and a preflight
    (OPTIONS, which API Gateway lets through unsigned on /uploads) with the methods routed."""
    if not origins:
        return None
    return CORSConfig(allow_origin=origins[0], extra_origins=list(origins[1:]), max_age=600)


app = APIGatewayRestResolver(cors=cors(runtime.api_settings().allowed_origins))
for router in ROUTERS:
    app.include_router(router)


# --- errors: one shape -------------------------------------------------------------------------


def request_refused(refusal: RequestRefusedError) -> Response[str]:
    status, code = rendering.status_of(refusal)
    logger.info(refusal.log or "request refused", extra={"status": status})
    # A quota spent for now: when to ask again, as HTTP says it (RFC 9110, section 10.2.3).
    headers = (
        {"Retry-After": str(refusal.retry_after)}
        if isinstance(refusal, QuotaExceededError)
        else None
    )
    return json_answer(status, rendering.error_body(code, refusal.message), headers)


def service_error(error: ServiceError) -> Response[str]:
    code = {405: ErrorCode.METHOD_NOT_ALLOWED}.get(error.status_code, ErrorCode.BAD_REQUEST)
    message = error.msg if isinstance(error.msg, str) else json.dumps(error.msg)
    return json_answer(error.status_code, rendering.error_body(code, message))


@app.not_found
def route_not_found(_: Exception) -> Response[str]:
    return json_answer(404, rendering.error_body(ErrorCode.NOT_FOUND, "no such route"))


def internal_error(_: Exception) -> Response[str]:
    logger.exception("request failed")  # the trace goes to the log, never to the caller
    return json_answer(500, rendering.error_body(ErrorCode.INTERNAL, "internal error"))


# Powertools picks the handler of the nearest class in the error's MRO.
app.exception_handler(RequestRefusedError)(request_refused)
app.exception_handler(ServiceError)(service_error)
app.exception_handler(Exception)(internal_error)


@observed.entry_point(clear_state=True, capture_response=False)  # job views stay out of traces
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
