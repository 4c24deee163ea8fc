"""The status API (GET /jobs/{job_id}, GET /health); the full API is the status API issue's.

API Gateway has already matched the request to one of the template's resources and passes the
resource's template (`/jobs/{job_id}`) and path parameters: the function only dispatches on the
method and that template. (Powertools' APIGatewayRestResolver would match the path again, and
importing it loads every event handler Powertools has, AppSync's and Bedrock's included, every
event data class and asyncio: some 30 ms of each cold start, for two GET routes.)
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer

from filejobs import runtime
from filejobs.observability import SERVICE, TRACED_MODULES
from filejobs.views import job_view

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def health(_: Mapping[str, str]) -> dict[str, Any]:
    return {"status": "ok"}


def get_job(parameters: Mapping[str, str]) -> dict[str, Any]:
    job_id = parameters.get("job_id", "")
    try:
        uuid.UUID(job_id)
    except ValueError:
        raise HttpError(400, f"job id must be a UUID, got {job_id!r}") from None
    tracer.put_annotation(key="job_id", value=job_id)
    # Only a well-formed id reaches the logs: the path is the caller's to choose.
    with logger.append_context_keys(job_id=job_id):
        job = runtime.jobs().get(job_id, consistent=False)
        if job is None or job.metadata.deleted_at is not None:
            logger.info("job not found")
            raise HttpError(404, f"no job {job_id}")
        return job_view(job)


# (method, API Gateway resource template) -> the route; its argument is the path parameters.
ROUTES: dict[tuple[str, str], Callable[[Mapping[str, str]], dict[str, Any]]] = {
    ("GET", "/health"): health,
    ("GET", "/jobs/{job_id}"): get_job,
}


def response(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body, separators=(",", ":")),
        "isBase64Encoded": False,
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)  # job views stay out of the traces
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    route = ROUTES.get((event.get("httpMethod", ""), event.get("resource", "")))
    try:
        if route is None:
            raise HttpError(404, "Not found")
        return response(200, route(event.get("pathParameters") or {}))
    except HttpError as error:
        # The error body Powertools' resolver gave; anything else is a function error (a 502).
        return response(error.status, {"statusCode": error.status, "message": error.message})
