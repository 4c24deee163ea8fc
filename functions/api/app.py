"""The status API: files and jobs, seen through the caller's tenant; cancel and retry.

Thin: routing, the caller's identity and the error shape are here; every query and command is
`filejobs.services.api.StatusApi`'s. Every error answers {"error": {"code", "message"}}.
Validation is by hand (services/api.py): Powertools' own needs pydantic, which the layer does
not ship.

Each route carries its OpenAPI description as plain data (`_doc`): summary, the query, header
and body it reads, and its answers. `tools/openapi.py` turns the resolver into the document
(with pydantic, in the dev venv only) and writes it to `filejobs/api_docs/openapi.json`, which
`GET /openapi.json` serves as committed: nothing here imports pydantic.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import ServiceError

from filejobs import runtime
from filejobs.access import Caller, caller_from
from filejobs.data.file_repository import FileRepository
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.keys import TENANT_PATTERN
from filejobs.observability import SERVICE, TRACED_MODULES
from filejobs.services.api import (
    BUCKET_NAME_PATTERN,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    ApiError,
    Requested,
    StatusApi,
    UnauthorizedError,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
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
        outputs_bucket=settings.outputs_bucket,
        s3=runtime.s3,
        scan_ended=lambda scan: runtime.scan_gate().scan_ended(scan),
    )


def caller() -> Caller:
    # From the authorizer context (the local stack's tokens) or, with IAM auth, from the
    # assumed role of the signer (access.py); anyone else is refused.
    found = caller_from(app.current_event.raw_event)
    if found is None:
        raise UnauthorizedError("the request carries no valid caller identity")
    return found


def params() -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


def _error(status: int, code: str, message: str) -> Response[str]:
    body = json.dumps({"error": {"code": code, "message": message}})
    return Response(status_code=status, content_type="application/json", body=body)


def _requested(requested: Requested) -> Response[str]:
    """201 with the new job, or 200 with the job an earlier request of the same key made."""
    return Response(
        status_code=200 if requested.replayed else 201,
        content_type="application/json",
        body=json.dumps(requested.view),
        headers={
            "Idempotency-Key": requested.idempotency_key,
            "Idempotent-Replayed": "true" if requested.replayed else "false",
        },
    )


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


# --- OpenAPI descriptions, as data --------------------------------------------------------------

ERROR_SCHEMA_REF = "#/components/schemas/Error"
GATEWAY_ERROR_SCHEMA_REF = "#/components/schemas/GatewayError"
_ERRORS = {
    400: "The request is malformed (an id that is not a UUID, an unknown filter, a bad token)",
    401: "The request carries no valid caller identity",
    404: "No such resource for this caller (another tenant's answers exactly so)",
    409: "The resource is not in a state that allows this",
    422: "The body is well-formed JSON but not a valid request",
}


def _query(name: str, description: str, *, required: bool = False, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": {"type": "string", **schema},
    }


def _doc(
    summary: str,
    description: str,
    *,
    ok: tuple[int, str, str],  # status, description, component schema name ("" for no body)
    ok_media: str = "application/json",
    errors: tuple[int, ...] = (400, 401, 404),
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    ok_headers: dict[str, Any] | None = None,
    extra_ok: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """The route decorator's OpenAPI arguments. Query and header parameters travel as the
    `x-filejobs-parameters` extension: Powertools derives path parameters from the handler's
    signature and would overwrite a `parameters` extension; tools/openapi.py merges the two."""
    status, ok_description, schema = ok
    success: OpenAPIResponse = {"description": ok_description}
    # An empty content map stops Powertools from inventing a JSON body; tools/openapi.py drops it.
    success["content"] = {}
    if schema:
        success["content"] = {ok_media: {"schema": {"$ref": f"#/components/schemas/{schema}"}}}
    if ok_headers:
        success["headers"] = ok_headers
    responses: dict[int, OpenAPIResponse] = {status: success}
    if extra_ok is not None:
        extra: OpenAPIResponse = {"description": extra_ok[1]}
        if schema:
            extra["content"] = success["content"]
        if ok_headers:
            extra["headers"] = ok_headers
        responses[extra_ok[0]] = extra
    for code in (*errors, 500):
        responses[code] = {
            "description": _ERRORS.get(code, "Internal error (the details are in the log)"),
            "content": {"application/json": {"schema": {"$ref": ERROR_SCHEMA_REF}}},
        }
    # Before the function runs: API Gateway's IAM auth refuses an unsigned or foreign request
    # with its own body; the local stack's router never answers so.
    responses[403] = {
        "description": "API Gateway refused the request's signature (IAM auth; its own body)",
        "content": {"application/json": {"schema": {"$ref": GATEWAY_ERROR_SCHEMA_REF}}},
    }
    extensions: dict[str, Any] = {}
    if parameters:
        extensions["x-filejobs-parameters"] = parameters
    if body is not None:
        extensions["requestBody"] = body
    return {
        "summary": summary,
        "description": description,
        "responses": responses,
        "openapi_extensions": extensions or None,
        "tags": ["status"],
    }


_STATUS_FILTER = _query("status", "Only jobs in this status", enum=[s.value for s in JobStatus])
_IDEMPOTENCY_HEADER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "1 to 128 visible ASCII characters. The same key on the same file answers the job it "
        "made (200, Idempotent-Replayed: true); with another request, 409. Without one, every "
        "request makes a new job."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[!-~]+$"},
}
# The answer of a request made once per Idempotency-Key: which key, and whether it replayed.
_REPLAY_HEADERS = {
    "Idempotency-Key": {
        "description": "The key the job was made under (generated when none was sent)",
        "schema": {"type": "string"},
    },
    "Idempotent-Replayed": {
        "description": "true when the answer is an earlier request's job",
        "schema": {"type": "string", "enum": ["true", "false"]},
    },
}
_JOB_REQUEST_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobRequest"}}},
}


# --- routes ---------------------------------------------------------------------------------------


@app.get(
    "/health",
    **_doc(
        "Liveness",
        "Answers any authenticated caller without reading the table.",
        ok=(200, "Alive", "Health"),
        errors=(401,),
    ),
)
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get(
    "/files",
    **_doc(
        "Find a file by its object key",
        "Every recorded version of the key the caller may see, newest first.",
        ok=(200, "The versions of the key", "FileVersions"),
        parameters=[
            _query("key", "The object key", required=True, minLength=1, maxLength=1024),
            _query(
                "bucket",
                "The bucket; the stack's uploads bucket when omitted",
                pattern=BUCKET_NAME_PATTERN,
            ),
        ],
    ),
)
def file_by_key() -> dict[str, Any]:
    return service().file_by_key(caller(), params())


@app.get(
    "/files/<file_id>",
    **_doc(
        "A file with its jobs",
        "Completed jobs carry `outputs`: download URLs of their derived files, valid 15 minutes.",
        ok=(200, "The file and its jobs", "FileWithJobs"),
    ),
)
def get_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    return service().file(caller(), file_id)


@app.get(
    "/files/<file_id>/jobs",
    **_doc(
        "A file's jobs",
        "In creation order, without output URLs.",
        ok=(200, "The file's jobs", "FileJobs"),
        parameters=[_STATUS_FILTER],
    ),
)
def jobs_of_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    return service().file_jobs(caller(), file_id, params())


@app.post(
    "/files/<file_id>/jobs",
    **_doc(
        "Request a job of a type for a file",
        "One conditional write, then the job is sent to its worker (the sweep sends it if that "
        "send fails). A parsing job on a file not yet scanned waits for a clean verdict.",
        ok=(201, "The new job", "Job"),
        extra_ok=(200, "A repeated request: the job the same Idempotency-Key made"),
        ok_headers=_REPLAY_HEADERS,
        errors=(400, 401, 404, 409, 422),
        parameters=[_IDEMPOTENCY_HEADER],
        body=_JOB_REQUEST_BODY,
    ),
)
def request_job(file_id: str) -> Response[str]:
    _about("file_id", file_id)
    event = app.current_event
    key = event.headers.get("Idempotency-Key")  # headers are case-insensitive
    requested = service().request_job(caller(), file_id, event.body, key)
    return _requested(requested)


@app.post(
    "/files/<file_id>/rescan",
    **_doc(
        "Rescan a file with the current definitions",
        "A new virus scan job on the file. If it finds an infection the first scan missed, the "
        "file is quarantined (its version moved out of the uploads bucket), its derived outputs "
        "are withdrawn and `File Quarantined` is published. A quarantined or deleted file "
        "answers 409.",
        ok=(201, "The rescan job", "Job"),
        extra_ok=(200, "A repeated request: the job the same Idempotency-Key made"),
        ok_headers=_REPLAY_HEADERS,
        errors=(400, 401, 404, 409, 422),
        parameters=[_IDEMPOTENCY_HEADER],
        body={
            "required": False,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/RescanRequest"}}
            },
        },
    ),
)
def rescan_file(file_id: str) -> Response[str]:
    _about("file_id", file_id)
    event = app.current_event
    key = event.headers.get("Idempotency-Key")
    requested = service().rescan_file(caller(), file_id, event.body, key)
    return _requested(requested)


@app.post(
    "/rescans",
    **_doc(
        "Rescan a tenant's files under a key prefix, a page at a time",
        "Up to 100 files per request, in key order; send the answer's next_token (with the "
        "same Idempotency-Key) for the next page. Repeating a page makes no second job for a "
        "file. With dry_run nothing is written: the page says what would be rescanned.",
        ok=(200, "One page of rescans", "RescanPage"),
        ok_headers={
            "Idempotency-Key": {
                "description": "The operation's key: send it with every page of the operation",
                "schema": {"type": "string"},
            },
        },
        errors=(400, 401, 404, 422),
        parameters=[_IDEMPOTENCY_HEADER],
        body={
            "required": False,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/RescanFilesRequest"}}
            },
        },
    ),
)
def rescan_files() -> Response[str]:
    event = app.current_event
    answer, key = service().rescan_files(caller(), event.body, event.headers.get("Idempotency-Key"))
    return Response(
        status_code=200,
        content_type="application/json",
        body=json.dumps(answer),
        headers={"Idempotency-Key": key},
    )


@app.get(
    "/jobs",
    **_doc(
        "List jobs",
        "A tenant's jobs newest first, or (operators) the jobs in one status in queue order. "
        "Pages continue with next_token; deleted jobs are never listed.",
        ok=(200, "One page of jobs", "JobPage"),
        parameters=[
            _STATUS_FILTER,
            _query("job_type", "Only jobs of this type", enum=[t.value for t in JobType]),
            _query(
                "tenant",
                "The tenant (operators; a tenant may name only its own)",
                pattern=TENANT_PATTERN,
            ),
            _query(
                "limit",
                f"Page size ({DEFAULT_LIMIT})",
                type="integer",
                minimum=1,
                maximum=MAX_LIMIT,
            ),
            _query("next_token", "The previous page's next_token", maxLength=2048),
        ],
    ),
)
def list_jobs() -> dict[str, Any]:
    return service().list_jobs(caller(), params())


@app.get(
    "/jobs/<job_id>",
    **_doc(
        "A job",
        "A completed job carries `outputs`: download URLs of its derived files, valid 15 minutes.",
        ok=(200, "The job", "Job"),
    ),
)
def get_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    return service().job(caller(), job_id)


@app.delete(
    "/jobs/<job_id>",
    **_doc(
        "Delete a finished job",
        "Soft delete of a completed, failed or cancelled job: it is never shown again.",
        ok=(204, "Deleted", ""),
        errors=(400, 401, 404, 409),
    ),
)
def delete_job(job_id: str) -> Response[str]:
    _about("job_id", job_id)
    service().delete(caller(), job_id)
    return Response(status_code=204, body="")


@app.post(
    "/jobs/<job_id>/cancel",
    **_doc(
        "Cancel a job",
        "A pending, scheduled or running job; a running worker's later writes then lose.",
        ok=(200, "The cancelled job", "Job"),
        errors=(400, 401, 404, 409, 422),
        body={
            "required": False,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/CancelRequest"}}
            },
        },
    ),
)
def cancel_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    return service().cancel(caller(), job_id, app.current_event.body)


@app.post(
    "/jobs/<job_id>/retry",
    **_doc(
        "Retry a failed or cancelled job",
        "In place: the same job, pending again, sent to its worker.",
        ok=(200, "The job, pending", "Job"),
        errors=(400, 401, 404, 409),
    ),
)
def retry_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    return service().retry(caller(), job_id)


@cache
def _openapi_document() -> str:
    return resources.files("filejobs.api_docs").joinpath("openapi.json").read_text()


@app.get(
    "/openapi.json",
    **_doc(
        "This API's OpenAPI document",
        "As committed (tools/openapi.py writes it).",
        ok=(200, "The OpenAPI 3.1 document", "OpenApiDocument"),
        errors=(401,),
    ),
)
def openapi_document() -> Response[str]:
    caller()
    return Response(status_code=200, content_type="application/json", body=_openapi_document())


# swagger-ui-dist from unpkg, pinned to one release. No SRI hashes: they could not be computed
# offline when this was written; add integrity= attributes once computed from the release files.
SWAGGER_UI = "https://unpkg.com/swagger-ui-dist@5.17.14"
# Relative: under the stage's path (/v1/docs -> /v1/openapi.json).
_DOCS_SCRIPT = 'window.ui = SwaggerUIBundle({url: "openapi.json", dom_id: "#swagger-ui"});'


def _script_hash(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


DOCS_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>filejobs status API</title>
<link rel="stylesheet" href="{SWAGGER_UI}/swagger-ui.css" crossorigin="anonymous">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{SWAGGER_UI}/swagger-ui-bundle.js" crossorigin="anonymous"></script>
<script>{_DOCS_SCRIPT}</script>
</body>
</html>
"""
_DOCS_POLICY = (
    f"default-src 'none'; script-src {SWAGGER_UI}/ 'sha256-{_script_hash(_DOCS_SCRIPT)}'; "
    f"style-src {SWAGGER_UI}/; img-src 'self' data:; connect-src 'self'"
)


@app.get(
    "/docs",
    **_doc(
        "This API's documentation (Swagger UI)",
        "An HTML page that loads openapi.json; behind the same auth as every route.",
        ok=(200, "The page", "DocsPage"),
        ok_media="text/html",
        errors=(401,),
    ),
)
def docs_page() -> Response[str]:
    caller()
    return Response(
        status_code=200,
        content_type="text/html; charset=utf-8",
        body=DOCS_PAGE,
        headers={"Cache-Control": "no-store", "Content-Security-Policy": _DOCS_POLICY},
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)  # job views stay out of the traces
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
