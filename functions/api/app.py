"""The status API: files and jobs, seen through the caller's tenant; cancel, retry, rescan;
tenants' upload quotas.

Thin: each route identifies its caller (401 before anything else), parses its request into a
command (filejobs/api/parsing.py), hands both to `filejobs.services.api.StatusApi`, and renders
the result (filejobs/api/rendering.py). A refusal answers its HTTP status with one error shape,
{"error": {"code", "message"}}. Each route's OpenAPI description is filejobs/api/openapi.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import timedelta
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, CORSConfig, Response
from aws_lambda_powertools.event_handler.exceptions import ServiceError

from filejobs import console, runtime
from filejobs.access import Caller, caller_from
from filejobs.adapters.s3 import S3OutputLinks
from filejobs.api import openapi, parsing, rendering
from filejobs.api import webhooks as webhook_requests
from filejobs.api.rendering import ErrorCode
from filejobs.domain.time import utcnow
from filejobs.instrumentation import instruments
from filejobs.ports import PageCursor
from filejobs.services.api import Requested, StatusApi
from filejobs.services.errors import (
    QuotaExceededError,
    RequestRefusedError,
    UnidentifiedCallerError,
)
from filejobs.services.operations import BulkOperations, Started
from filejobs.services.page_tokens import PageTokens
from filejobs.services.presets import Presets
from filejobs.services.quotas import TenantLimits
from filejobs.services.schedules import Schedules
from filejobs.services.uploads import Uploads
from filejobs.services.webhooks import Webhooks, endpoint_view

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


def page_tokens() -> PageTokens:
    return PageTokens(runtime.page_token_secret())


def service() -> StatusApi:
    bucket = runtime.settings().outputs_bucket
    links = S3OutputLinks(runtime.s3, bucket) if bucket else None
    return runtime.status_api(tokens=page_tokens(), links=links)


def operations() -> BulkOperations:
    return runtime.bulk_operations(service())


def schedules() -> Schedules:
    return runtime.schedules(service())


def presets() -> Presets:
    return runtime.presets()


def quotas() -> TenantLimits:
    return runtime.tenant_limits()


def webhooks() -> Webhooks:
    return runtime.webhooks()


def uploads() -> Uploads:
    return runtime.uploads()


def caller() -> Caller:
    # From the authorizer context (the local stack's tokens) or, with IAM auth, from the
    # assumed role of the signer (access.py); anyone else is refused.
    found = caller_from(app.current_event.raw_event, runtime.callers())
    if found is None:
        raise UnidentifiedCallerError("the request carries no valid caller identity")
    return found


def params() -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


def idempotency_key() -> str | None:
    return app.current_event.headers.get("Idempotency-Key")  # headers are case-insensitive


def _json(status: int, body: str, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=body, headers=headers)


def _requested(requested: Requested) -> Response[str]:
    """201 with the new job, or 200 with the job an earlier request of the same key made."""
    return _json(
        200 if requested.replayed else 201,
        json.dumps(rendering.job_with_outputs(requested.job)),
        headers={
            "Idempotency-Key": requested.idempotency_key,
            "Idempotent-Replayed": "true" if requested.replayed else "false",
        },
    )


def _started(started: Started) -> Response[str]:
    """202 with the operation started, or 200 with the one an earlier request of the same key
    started."""
    headers = {"Idempotent-Replayed": "true" if started.replayed else "false"}
    return _json(200 if started.replayed else 202, json.dumps(rendering.started(started)), headers)


def _about(key: str, value: str) -> None:
    """Name the job or file on every log line and trace of this request, once it is well formed
    (the path is the caller's to choose); keys are cleared at the next invocation."""
    try:
        uuid.UUID(value)
    except ValueError:
        return
    tracer.put_annotation(key=key, value=value)
    logger.append_keys(**{key: value})


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
    return _json(status, rendering.error_body(code, refusal.message), headers)


def service_error(error: ServiceError) -> Response[str]:
    code = {405: ErrorCode.METHOD_NOT_ALLOWED}.get(error.status_code, ErrorCode.BAD_REQUEST)
    message = error.msg if isinstance(error.msg, str) else json.dumps(error.msg)
    return _json(error.status_code, rendering.error_body(code, message))


@app.not_found
def route_not_found(_: Exception) -> Response[str]:
    return _json(404, rendering.error_body(ErrorCode.NOT_FOUND, "no such route"))


def internal_error(_: Exception) -> Response[str]:
    logger.exception("request failed")  # the trace goes to the log, never to the caller
    return _json(500, rendering.error_body(ErrorCode.INTERNAL, "internal error"))


# Powertools picks the handler of the nearest class in the error's MRO.
app.exception_handler(RequestRefusedError)(request_refused)
app.exception_handler(ServiceError)(service_error)
app.exception_handler(Exception)(internal_error)


# --- routes ------------------------------------------------------------------------------------


@app.get("/health", **openapi.HEALTH)
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/files", **openapi.FIND_FILE)
def find_files() -> dict[str, Any]:
    """One file's versions by its key (key=), or a tenant's files under a prefix (prefix=)."""
    who = caller()
    if "key" not in params() and params().keys() & {"prefix", "tenant", "limit", "next_token"}:
        return rendering.file_listing(service().list_files(who, parsing.list_files(params())))
    query = parsing.find_file(params(), runtime.api_settings().uploads_bucket)
    return rendering.file_versions(service().file_by_key(who, query))


@app.get("/files/<file_id>", **openapi.GET_FILE)
def get_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    who = caller()
    file_id = parsing.canonical_id("file id", file_id)
    return rendering.file_with_jobs(service().file(who, file_id))


@app.delete("/files/<file_id>", **openapi.ERASE_FILE)
def erase_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    who = caller()
    file_id = parsing.canonical_id("file id", file_id)
    return runtime.file_lifecycle().erase(who, file_id).to_dict()


@app.get("/files/<file_id>/jobs", **openapi.FILE_JOBS)
def jobs_of_file(file_id: str) -> dict[str, Any]:
    _about("file_id", file_id)
    who = caller()
    query = parsing.file_jobs(file_id, params())
    return rendering.jobs_of_file(service().file_jobs(who, query))


@app.post("/files/<file_id>/jobs", **openapi.REQUEST_JOB)
def request_job(file_id: str) -> Response[str]:
    _about("file_id", file_id)
    who = caller()
    command = parsing.request_job(file_id, app.current_event.body, idempotency_key())
    return _requested(service().request_job(who, command))


@app.post("/files/<file_id>/rescan", **openapi.RESCAN_FILE)
def rescan_file(file_id: str) -> Response[str]:
    _about("file_id", file_id)
    who = caller()
    command = parsing.rescan_file(file_id, app.current_event.body, idempotency_key())
    return _requested(service().rescan_file(who, command))


@app.post("/rescans", **openapi.RESCAN_FILES)
def rescan_files() -> Response[str]:
    who = caller()
    command = parsing.rescan_files(app.current_event.body, idempotency_key())
    page = service().rescan_files(who, command)
    body = json.dumps(rendering.rescanned_page(page))
    return _json(200, body, headers={"Idempotency-Key": page.idempotency_key})


@app.get("/jobs", **openapi.LIST_JOBS)
def list_jobs() -> dict[str, Any]:
    who = caller()
    return rendering.job_listing(service().list_jobs(who, parsing.list_jobs(params())))


@app.get("/jobs/<job_id>", **openapi.GET_JOB)
def get_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    who = caller()
    job_id = parsing.canonical_id("job id", job_id)
    return rendering.job_with_outputs(service().job(who, job_id))


@app.delete("/jobs/<job_id>", **openapi.DELETE_JOB)
def delete_job(job_id: str) -> Response[str]:
    _about("job_id", job_id)
    who = caller()
    service().delete(who, parsing.canonical_id("job id", job_id))
    return Response(status_code=204, body="")


@app.post("/jobs/<job_id>/cancel", **openapi.CANCEL_JOB)
def cancel_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    who = caller()
    command = parsing.cancel_job(job_id, app.current_event.body)
    return rendering.job(service().cancel(who, command))


@app.post("/jobs/<job_id>/retry", **openapi.RETRY_JOB)
def retry_job(job_id: str) -> dict[str, Any]:
    _about("job_id", job_id)
    who = caller()
    job_id = parsing.canonical_id("job id", job_id)
    return rendering.job(service().retry(who, job_id))


@app.get("/overview", **openapi.OVERVIEW)
def overview() -> dict[str, Any]:
    who = caller()
    tenant = parsing.optional_tenant(params())
    return rendering.console_overview(runtime.console_views().overview(who, tenant))


@app.get("/failures", **openapi.FAILURES)
def failures() -> dict[str, Any]:
    who = caller()
    tenant, job_type = parsing.failures_query(params())
    return rendering.failure_groups(runtime.console_views().failures(who, tenant, job_type))


@app.post("/operations", **openapi.START_OPERATION)
def start_operation() -> Response[str]:
    """A bulk action by filter: with dry_run, its count and a sample; else the operation."""
    who = caller()
    command = parsing.start_operation(app.current_event.body, idempotency_key())
    if command.dry_run:
        found = operations().preview(who, command.action, command.filter)
        return _json(200, json.dumps(rendering.preview(found)))
    return _started(operations().start(who, command))


@app.get("/operations", **openapi.LIST_OPERATIONS)
def list_operations() -> dict[str, Any]:
    who = caller()
    tenant, limit, token = parsing.operations_page(params())
    scope = {"listing": "operations", "caller": who.name, "tenant": tenant}
    tokens = page_tokens()
    after = None if token is None else tokens.decode(token, scope).id
    found, last = operations().recent(who, tenant=tenant, after=after, limit=limit)
    next_token = None if last is None else tokens.encode(PageCursor("-", last), scope)
    return rendering.operations(found, next_token)


@app.get("/operations/<operation_id>", **openapi.GET_OPERATION)
def get_operation(operation_id: str) -> dict[str, Any]:
    who = caller()
    return rendering.operation(operations().get(who, parsing.operation_id(operation_id)))


@app.post("/schedules", **openapi.CREATE_SCHEDULE)
def create_schedule() -> Response[str]:
    who = caller()
    made = schedules().create(who, parsing.new_schedule(app.current_event.body))
    return _json(201, json.dumps(rendering.schedule(made, utcnow())))


@app.get("/schedules", **openapi.LIST_SCHEDULES)
def list_schedules() -> dict[str, Any]:
    who = caller()
    found = schedules().of_tenant(who, parsing.optional_tenant(params()))
    return rendering.schedules(found, utcnow())


@app.get("/schedules/<schedule_id>", **openapi.GET_SCHEDULE)
def get_schedule(schedule_id: str) -> dict[str, Any]:
    _about("schedule_id", schedule_id)
    who = caller()
    found = schedules().get(who, parsing.schedule_id(schedule_id))
    return rendering.schedule(found, utcnow())


@app.patch("/schedules/<schedule_id>", **openapi.CHANGE_SCHEDULE)
def change_schedule(schedule_id: str) -> dict[str, Any]:
    _about("schedule_id", schedule_id)
    who = caller()
    enabled = parsing.schedule_change(app.current_event.body)
    changed = schedules().set_enabled(who, parsing.schedule_id(schedule_id), enabled)
    return rendering.schedule(changed, utcnow())


@app.delete("/schedules/<schedule_id>", **openapi.DELETE_SCHEDULE)
def delete_schedule(schedule_id: str) -> Response[str]:
    _about("schedule_id", schedule_id)
    who = caller()
    schedules().delete(who, parsing.schedule_id(schedule_id))
    return Response(status_code=204, body="")


@app.get("/presets", **openapi.LIST_PRESETS)
def list_presets() -> dict[str, Any]:
    who = caller()
    return rendering.presets(presets().of_tenant(who, parsing.optional_tenant(params())))


@app.put("/presets/<preset_name>", **openapi.PUT_PRESET)
def put_preset(preset_name: str) -> dict[str, Any]:
    who = caller()
    change = parsing.preset_change(app.current_event.body)
    tenant = parsing.optional_tenant(params())
    return rendering.preset(presets().put(who, tenant, parsing.preset_name(preset_name), change))


@app.get("/presets/<preset_name>", **openapi.GET_PRESET)
def get_preset(preset_name: str) -> dict[str, Any]:
    who = caller()
    name, tenant = parsing.preset_name(preset_name), parsing.optional_tenant(params())
    return rendering.preset(presets().get(who, tenant, name, parsing.preset_version(params())))


@app.delete("/presets/<preset_name>", **openapi.DELETE_PRESET)
def delete_preset(preset_name: str) -> Response[str]:
    who = caller()
    tenant = parsing.optional_tenant(params())
    presets().delete(who, tenant, parsing.preset_name(preset_name))
    return Response(status_code=204, body="")


@app.get("/tenants/<tenant>/quotas", **openapi.GET_QUOTAS)
def get_quotas(tenant: str) -> dict[str, Any]:
    who = caller()
    return rendering.quota_report(quotas().report(who, parsing.tenant_name(tenant)))


@app.put("/tenants/<tenant>/quotas", **openapi.SET_QUOTAS)
def set_quotas(tenant: str) -> dict[str, Any]:
    who = caller()
    name = parsing.tenant_name(tenant)
    change = parsing.quota_change(app.current_event.body)
    return rendering.quota_report(quotas().change(who, name, change))


@app.post("/tenants/<tenant>/erasure", **openapi.ERASE_TENANT)
def erase_tenant(tenant: str) -> Response[str]:
    """An operator's erasure of a whole tenant: with dry_run, its count of files; else the
    operation, as POST /operations answers one."""
    who = caller()
    command = parsing.tenant_erasure(tenant, app.current_event.body, idempotency_key())
    if command.dry_run:
        found = operations().preview_erasure(who, command.tenant)
        return _json(200, json.dumps(rendering.erasure_preview(found)))
    return _started(operations().erase_tenant(who, command))


@app.post("/uploads", **openapi.UPLOAD)
def sign_upload() -> dict[str, Any]:
    """A presigned POST into the tenant's uploads, for a browser (services/uploads.py)."""
    who = caller()
    tenant, request = parsing.upload_request(app.current_event.body)
    return rendering.signed_upload(uploads().mint(who, tenant, request))


# --- webhooks (services/webhooks.py; docs/WEBHOOKS.md) ------------------------------------------


@app.post("/webhooks", **openapi.REGISTER_WEBHOOK)
def register_webhook() -> Response[str]:
    who = caller()
    command = webhook_requests.register(app.current_event.body)
    made = webhooks().register(who, command)
    return _json(201, json.dumps(webhook_requests.with_secret(made)))


@app.get("/webhooks", **openapi.LIST_WEBHOOKS)
def list_webhooks() -> dict[str, Any]:
    who = caller()
    tenant = webhook_requests.listing_tenant(params())
    return webhook_requests.endpoints(webhooks().endpoints(who, tenant))


@app.get("/webhooks/<webhook_id>", **openapi.GET_WEBHOOK)
def get_webhook(webhook_id: str) -> dict[str, Any]:
    who = caller()
    return endpoint_view(webhooks().endpoint(who, webhook_requests.endpoint_id(webhook_id)))


@app.delete("/webhooks/<webhook_id>", **openapi.REMOVE_WEBHOOK)
def remove_webhook(webhook_id: str) -> Response[str]:
    who = caller()
    webhooks().remove(who, webhook_requests.endpoint_id(webhook_id))
    return Response(status_code=204, body="")


@app.post("/webhooks/<webhook_id>/rotate", **openapi.ROTATE_WEBHOOK)
def rotate_webhook(webhook_id: str) -> dict[str, Any]:
    who = caller()
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    overlap = webhook_requests.rotation(app.current_event.body)
    return webhook_requests.with_secret(webhooks().rotate(who, endpoint_id, overlap))


@app.post("/webhooks/<webhook_id>/enable", **openapi.ENABLE_WEBHOOK)
def enable_webhook(webhook_id: str) -> dict[str, Any]:
    who = caller()
    return endpoint_view(webhooks().enable(who, webhook_requests.endpoint_id(webhook_id)))


@app.get("/webhooks/<webhook_id>/deliveries", **openapi.WEBHOOK_DELIVERIES)
def webhook_deliveries(webhook_id: str) -> dict[str, Any]:
    who = caller()
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    limit, after = webhook_requests.page(params())
    found, last = webhooks().deliveries(who, endpoint_id, after=after, limit=limit)
    return webhook_requests.deliveries(found, last)


@app.get("/webhooks/<webhook_id>/deliveries/<delivery_id>", **openapi.WEBHOOK_DELIVERY)
def webhook_delivery(webhook_id: str, delivery_id: str) -> dict[str, Any]:
    who = caller()
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    found = webhooks().delivery(who, endpoint_id, webhook_requests.delivery_id(delivery_id))
    return webhook_requests.delivery(found)


@app.post("/webhooks/<webhook_id>/deliveries/<delivery_id>/resend", **openapi.RESEND_DELIVERY)
def resend_delivery(webhook_id: str, delivery_id: str) -> Response[str]:
    who = caller()
    endpoint_id = webhook_requests.endpoint_id(webhook_id)
    again = webhooks().resend(who, endpoint_id, webhook_requests.delivery_id(delivery_id))
    return _json(202, json.dumps(webhook_requests.delivery(again)))


@cache
def _openapi_document() -> str:
    return resources.files("filejobs.api_docs").joinpath("openapi.json").read_text()


@app.get("/openapi.json", **openapi.OPENAPI_DOCUMENT)
def openapi_document() -> Response[str]:
    caller()
    return _json(200, _openapi_document())


@app.get("/docs", **openapi.DOCS_PAGE_ROUTE)
def docs_page() -> Response[str]:
    caller()
    return Response(
        status_code=200,
        content_type="text/html; charset=utf-8",
        body=openapi.DOCS_PAGE,
        headers={"Cache-Control": "no-store", "Content-Security-Policy": openapi.DOCS_POLICY},
    )


# --- the operator console: its shell holds no data (docs/CONSOLE.md), so no caller is read -----


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
    stage_variables = app.current_event.stage_variables
    if name == console.CONFIG:
        settings = console.sign_in_settings(stage_variables)
        return _json(200, json.dumps(settings), headers={"Cache-Control": "no-store"})
    try:
        content_type, body = console.asset(name)
    except console.UnknownAssetError:
        return _json(404, rendering.error_body(ErrorCode.NOT_FOUND, "no such console file"))
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if name == console.PAGE:
        sign_in = console.sign_in_origin(stage_variables)
        headers["Content-Security-Policy"] = console.console_policy(_image_origin(), sign_in)
        headers["Referrer-Policy"] = "no-referrer"
    return Response(status_code=200, content_type=content_type, body=body.decode(), headers=headers)


@app.get("/console", include_in_schema=False)
def console_page() -> Response[str]:
    return _console_file(console.PAGE)


@app.get("/console/<asset>", include_in_schema=False)
def console_asset(asset: str) -> Response[str]:
    return _console_file(asset)


@observed.entry_point(clear_state=True, capture_response=False)  # job views stay out of traces
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
