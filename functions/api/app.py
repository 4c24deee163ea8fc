"""The status API: files and jobs, seen through the caller's tenant; cancel and retry.

Thin: routing, the caller's identity and the error shape are here; every query and command is
`filejobs.services.api.StatusApi`'s. Every error answers {"error": {"code", "message"}}.
Validation is by hand (services/api.py): Powertools' own needs pydantic, which the layer does
not ship.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import ServiceError

from filejobs import runtime
from filejobs.access import Caller, caller_from
from filejobs.data.file_repository import FileRepository
from filejobs.observability import SERVICE, TRACED_MODULES
from filejobs.services.api import ApiError, StatusApi, UnauthorizedError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)
app = APIGatewayRestResolver()


def service() -> StatusApi:
    settings = runtime.settings()
    secret = os.environ.get("API_TOKEN_SECRET")
    return StatusApi(
        jobs=runtime.jobs(),
        files=FileRepository(),
        dispatcher=runtime.dispatcher,
        retention=settings.retention,
        token_secret=secret.encode() if secret else None,
        uploads_bucket=os.environ.get("UPLOADS_BUCKET"),
    )


def caller() -> Caller:
    # The local stack puts {"tenant", "role"} in the authorizer context of every request. The
    # deployed API's IAM auth carries none yet (mapping IAM principals to it is later work), so
    # there every route but /health answers 401.
    found = caller_from(app.current_event.raw_event)
    if found is None:
        raise UnauthorizedError("the request carries no valid caller identity")
    return found


def params() -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


def _error(status: int, code: str, message: str) -> Response[str]:
    body = json.dumps({"error": {"code": code, "message": message}})
    return Response(status_code=status, content_type="application/json", body=body)


def _about(key: str, value: str) -> None:
    """Name the job or file on every log line and trace of this request, once it is well formed
    (the path is the caller's to choose); keys are cleared at the next invocation."""
    try:
        uuid.UUID(value)
    except ValueError:
        return
    tracer.put_annotation(key=key, value=value)
    logger.append_keys(**{key: value})


def api_error(error: ApiError) -> Response[str]:
    logger.info(error.log or "request refused", extra={"status": error.status})
    return _error(error.status, error.code, error.message)


def service_error(error: ServiceError) -> Response[str]:
    code = {405: "method_not_allowed"}.get(error.status_code, "bad_request")
    message = error.msg if isinstance(error.msg, str) else json.dumps(error.msg)
    return _error(error.status_code, code, message)


@app.not_found
def route_not_found(_: Exception) -> Response[str]:
    return _error(404, "not_found", "no such route")


def internal_error(_: Exception) -> Response[str]:
    logger.exception("request failed")  # the trace goes to the log, never to the caller
    return _error(500, "internal", "internal error")


# Powertools picks the handler of the nearest class in the error's MRO.
app.exception_handler(ApiError)(api_error)
app.exception_handler(ServiceError)(service_error)
app.exception_handler(Exception)(internal_error)


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/files")
def file_by_key() -> dict[str, Any]:
    return service().file_by_key(caller(), params())


@app.get("/files/<file_id>")
def get_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    return service().file(caller(), file_id)


@app.get("/files/<file_id>/jobs")
def jobs_of_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    return service().file_jobs(caller(), file_id, params())


@app.get("/jobs")
def list_jobs() -> dict[str, Any]:
    return service().list_jobs(caller(), params())


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    return service().job(caller(), job_id)


@app.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    return service().cancel(caller(), job_id, app.current_event.body)


@app.post("/jobs/<job_id>/retry")
def retry_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    return service().retry(caller(), job_id)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)  # job views stay out of the traces
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
