"""Each status API route's OpenAPI description, as plain data, and the Swagger UI page.

A route's decorator takes its description (`_doc`): summary, the query, header and body it
reads, and its answers. `tools/openapi.py` turns the resolver into the document (with pydantic,
in the dev venv only) and writes it to `filejobs/api_docs/openapi.json`, which
`GET /openapi.json` serves as committed: nothing here imports pydantic.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any

from filejobs.api.parsing import BUCKET_NAME_PATTERN, DEFAULT_LIMIT, MAX_LIMIT
from filejobs.domain.failures import FAILURE_GROUP_PATTERN
from filejobs.domain.job import EXPLICIT_RETRIES_LIMIT, MAX_RETRIES_LIMIT
from filejobs.domain.keys import TENANT_PATTERN
from filejobs.domain.operations import MAX_ERROR_TEXT_CHARS
from filejobs.domain.presets import MAX_PRESETS_PER_TENANT
from filejobs.domain.presets import METADATA_KEY as PRESET_METADATA_KEY
from filejobs.domain.quotas import API_JOBS_PER_FILE
from filejobs.domain.schedules import MAX_SCHEDULES_PER_TENANT
from filejobs.services.page_tokens import MAX_TOKEN_LENGTH

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse


ERROR_SCHEMA_REF = "#/components/schemas/Error"
GATEWAY_ERROR_SCHEMA_REF = "#/components/schemas/GatewayError"
_ERRORS = {
    400: "The request is malformed (an id that is not a UUID, an unknown filter, a bad token)",
    401: "The request carries no valid caller identity",
    404: "No such resource for this caller (another tenant's answers exactly so)",
    409: "The resource is not in a state that allows this",
    # Answered by the function (this API's error shape) or by API Gateway (its own).
    403: "Not the caller's to do (an operator's power), or API Gateway refused the signature",
    422: "The body is well-formed JSON but not a valid request",
    429: "A quota of the tenant (or of the file) is spent for now: ask again after Retry-After",
}
_RETRY_AFTER: dict[str, Any] = {
    "Retry-After": {
        "description": "Seconds until the quota allows it again (the end of the UTC day, or a "
        "minute for running operations)",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def _query(name: str, description: str, *, required: bool = False, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": {"type": "string", **schema},
    }


def _listed_query(name: str, description: str, listed: str) -> dict[str, Any]:
    """A query parameter taking one of the document's named lists (components.schemas.JobType,
    JobStatus: tools/openapi.py writes each once)."""
    return {**_query(name, description), "schema": {"$ref": f"#/components/schemas/{listed}"}}


_TENANT_PARAMETER = _query(
    "tenant",
    "The tenant (an operator's choice; a tenant may name only its own)",
    pattern=TENANT_PATTERN,
)


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
    for code in (*(e for e in errors if e != 403), 500):
        responses[code] = {
            "description": _ERRORS.get(code, "Internal error (the details are in the log)"),
            "content": {"application/json": {"schema": {"$ref": ERROR_SCHEMA_REF}}},
        }
        if code == 429:
            responses[code]["headers"] = _RETRY_AFTER
    # Before the function runs: API Gateway's IAM auth refuses an unsigned or foreign request
    # with its own body; the local stack's router never answers so.
    responses[403] = {
        "description": "API Gateway refused the request's signature (IAM auth; its own body)",
        "content": {"application/json": {"schema": {"$ref": GATEWAY_ERROR_SCHEMA_REF}}},
    }
    if 403 in errors:
        either = [{"$ref": ERROR_SCHEMA_REF}, {"$ref": GATEWAY_ERROR_SCHEMA_REF}]
        responses[403] = {
            "description": _ERRORS[403],
            "content": {"application/json": {"schema": {"anyOf": either}}},
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


_STATUS_FILTER = _listed_query("status", "Only jobs in this status", "JobStatus")
_IDEMPOTENCY_HEADER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "1 to 128 visible ASCII characters. The same key on the same file answers the job it "
        "made (200, Idempotent-Replayed: true) for as long as that job is kept (active, or "
        "finished until its retention ends); with another request, 409. Without one, every "
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


# --- the routes ---------------------------------------------------------------------------------

# GET /health
HEALTH = _doc(
    "Liveness",
    "Answers any authenticated caller without reading the table.",
    ok=(200, "Alive", "Health"),
    errors=(401,),
)

# GET /files
FIND_FILE = _doc(
    "Find a file by its object key, or list files under a key prefix",
    "With `key`: every recorded version of the key the caller may see, newest first. With "
    "`prefix` (and no key): one page of a tenant's files whose key starts with it, in key order "
    "(an operator names the tenant).",
    ok=(200, "The versions of the key, or a page of files", "FilesAnswer"),
    parameters=[
        _query("key", "The object key", minLength=1, maxLength=1024),
        _query(
            "bucket",
            "The bucket; the stack's uploads bucket when omitted",
            pattern=BUCKET_NAME_PATTERN,
        ),
        _query("prefix", "A key prefix (lists files; without key)", maxLength=1024),
        _query("tenant", "The tenant (operators, with prefix)", pattern=TENANT_PATTERN),
        _query(
            "limit", f"Page size ({DEFAULT_LIMIT})", type="integer", minimum=1, maximum=MAX_LIMIT
        ),
        _query("next_token", "The previous page's next_token", maxLength=MAX_TOKEN_LENGTH),
    ],
)

# GET /files/<file_id>
GET_FILE = _doc(
    "A file with its jobs",
    "Completed jobs carry `outputs`: download URLs of their derived files, valid 15 minutes.",
    ok=(200, "The file and its jobs", "FileWithJobs"),
)

# GET /files/<file_id>/jobs
FILE_JOBS = _doc(
    "A file's jobs",
    "In creation order, without output URLs.",
    ok=(200, "The file's jobs", "FileJobs"),
    parameters=[_STATUS_FILTER],
)

# POST /files/<file_id>/jobs
REQUEST_JOB = _doc(
    "Request a job of a type for a file",
    "One conditional write, then the job is sent to its worker (the sweep sends it if that "
    "send fails). A parsing job on a file not yet scanned waits for a clean verdict. A job "
    "that decodes content only fits the types it decodes (thumbnail_generation: images; "
    "video_thumbnail: videos; document_preview: PDF and text): another answers 422. "
    "`input_data` holds the job type's options (thumbnail_generation: sizes, format; "
    "compression: algorithm, level; the others none), checked now: an unknown option or a bad "
    "value answers 422, its message opening with the field (`input_data.sizes[0]: ...`), and "
    "makes no job. With `run_at` or `delay_seconds` the job is `scheduled` until its time "
    f"(at most 30 days ahead); it starts then: within seconds for a delay of up to 15 minutes "
    "(a delayed message), within the sweep's period (1 minute) beyond. `max_retries` bounds "
    f"its retries (1 to {MAX_RETRIES_LIMIT}). A repeated Idempotency-Key answers the first "
    "request's job, its time included. A file "
    f"is given at most {API_JOBS_PER_FILE} jobs this way over its life (a repeated "
    "Idempotency-Key counts none; without one, every request is a new job): beyond, 409.",
    ok=(201, "The new job", "Job"),
    extra_ok=(200, "A repeated request: the job the same Idempotency-Key made"),
    ok_headers=_REPLAY_HEADERS,
    errors=(400, 401, 404, 409, 422),
    parameters=[_IDEMPOTENCY_HEADER],
    body=_JOB_REQUEST_BODY,
)

# POST /files/<file_id>/rescan
RESCAN_FILE = _doc(
    "Rescan a file with the current definitions",
    "A new virus scan job on the file. If it finds an infection the first scan missed, the "
    "file is quarantined (its version moved out of the uploads bucket), its derived outputs "
    "are withdrawn and `File Quarantined` is published. A quarantined, deleted or rejected "
    "file answers 409; so does a file that has had its jobs through the API (a rescan counts "
    f"among the {API_JOBS_PER_FILE} of `POST /files/{{file_id}}/jobs`). A rescan counts "
    "against the tenant's `rescans_per_day` and the file's `rescans_per_file_per_day` "
    "(GET /tenants/{tenant}/quotas): over either, 429 with Retry-After, and nothing is made.",
    ok=(201, "The rescan job", "Job"),
    extra_ok=(200, "A repeated request: the job the same Idempotency-Key made"),
    ok_headers=_REPLAY_HEADERS,
    errors=(400, 401, 404, 409, 422, 429),
    parameters=[_IDEMPOTENCY_HEADER],
    body={
        "required": False,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RescanRequest"}}},
    },
)

# POST /rescans
RESCAN_FILES = _doc(
    "Rescan a tenant's files under a key prefix, a page at a time",
    "Up to 100 files per request, in key order; send the answer's next_token (with the "
    "same Idempotency-Key) for the next page. Repeating a page makes no second job for a "
    "file. With dry_run nothing is written: the page says what would be rescanned. Each "
    "rescan counts as one of `POST /files/{file_id}/rescan`: a file rescanned all it may be "
    "today is skipped (with the reason); the tenant's rescans of the day spent answers 429 "
    "with Retry-After (the page's earlier files rescanned: the same page again makes only the "
    "rest).",
    ok=(200, "One page of rescans", "RescanPage"),
    ok_headers={
        "Idempotency-Key": {
            "description": "The operation's key: send it with every page of the operation",
            "schema": {"type": "string"},
        },
    },
    errors=(400, 401, 404, 422, 429),
    parameters=[_IDEMPOTENCY_HEADER],
    body={
        "required": False,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/RescanFilesRequest"}}
        },
    },
)

_FILTER_PARAMETERS = [
    _STATUS_FILTER,
    _listed_query("job_type", "Only jobs of this type", "JobType"),
    _query(
        "tenant", "The tenant (operators; a tenant may name only its own)", pattern=TENANT_PATTERN
    ),
    _query(
        "group",
        "Only the failed jobs of this failure group (GET /failures)",
        pattern=FAILURE_GROUP_PATTERN,
    ),
    _query(
        "error",
        "Only jobs whose error message contains this text (case-sensitive)",
        minLength=1,
        maxLength=MAX_ERROR_TEXT_CHARS,
    ),
    _query("since", "Only jobs created at or after this time (ISO 8601)", format="date-time"),
    _query("until", "Only jobs created before this time (ISO 8601)", format="date-time"),
]

# GET /jobs
LIST_JOBS = _doc(
    "Search jobs",
    "A tenant's jobs newest first, or (operators, naming no tenant) the jobs of one status or "
    "failure group in queue order. Filters combine. A page reads a bounded number of index "
    "pages: when the filters leave it short it still ends with a next_token to go on from. "
    "Deleted jobs are never listed.",
    ok=(200, "One page of jobs", "JobPage"),
    parameters=[
        *_FILTER_PARAMETERS,
        _query(
            "limit", f"Page size ({DEFAULT_LIMIT})", type="integer", minimum=1, maximum=MAX_LIMIT
        ),
        _query("next_token", "The previous page's next_token", maxLength=MAX_TOKEN_LENGTH),
    ],
)

# GET /jobs/<job_id>
GET_JOB = _doc(
    "A job",
    "A completed job carries `outputs`: download URLs of its derived files, valid 15 minutes.",
    ok=(200, "The job", "Job"),
)

# DELETE /files/<file_id>
ERASE_FILE = _doc(
    "Erase an upload for good",
    "Every version and delete marker of the file's key in the uploads bucket, and for each "
    "recorded version of it: its open jobs cancelled, its derived outputs and its quarantined "
    "copy (if the virus scan kept one) deleted, its jobs "
    "and its own record removed (results, options and idempotency keys with them). The answer "
    "is the erasure's audit record, kept in the stack: ids, counts, who and when, nothing that "
    "was in the file. The outputs are deleted once more a few minutes later, past the end of "
    "any job that was running. An erased file answers 404 from then on. To delete an upload "
    "without erasing it, delete its object in S3: the file is then `deleted` (its outputs "
    "removed, `File Deleted` published) and deleting the delete marker restores it.",
    ok=(200, "Erased: the audit record", "Erasure"),
)

# DELETE /jobs/<job_id>
DELETE_JOB = _doc(
    "Delete a finished job",
    "Soft delete of a completed, failed or cancelled job: it is never shown again.",
    ok=(204, "Deleted", ""),
    errors=(400, 401, 404, 409),
)

# POST /jobs/<job_id>/cancel
CANCEL_JOB = _doc(
    "Cancel a job",
    "A pending, scheduled or running job; a running worker's later writes then lose.",
    ok=(200, "The cancelled job", "Job"),
    errors=(400, 401, 404, 409, 422),
    body={
        "required": False,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CancelRequest"}}},
    },
)

# POST /jobs/<job_id>/retry
RETRY_JOB = _doc(
    "Retry a failed or cancelled job",
    "In place: the same job, pending again, sent to its worker, with a fresh retry budget. A "
    f"job runs at most {EXPLICIT_RETRIES_LIMIT + 1} budgets' worth of attempts in all: one that "
    "has answers 409 (request a new job instead), as does a job that has not finished.",
    ok=(200, "The job, pending", "Job"),
    errors=(400, 401, 404, 409),
)

# POST /operations
START_OPERATION = _doc(
    "Start a bulk action on the jobs a filter or failure group matches",
    "retry (failed or cancelled jobs), cancel (pending, scheduled, running), delete (finished: "
    "soft delete) or rescan (the matched jobs' files). With dry_run: the count and a sample, and "
    "nothing changes. Otherwise the operation is recorded (who, when, why, what filter) and runs "
    "in the background, paced, a page at a time: follow it with GET /operations/{id}. Each job "
    "is changed by one conditional write, so running it again changes nothing twice; the same "
    "Idempotency-Key answers the same operation. A tenant's filter is its own tenant's. A "
    "tenant's operation counts against its `operations_per_day` and is refused while it has "
    "`max_running_operations` running: 429 with Retry-After. A rescan operation stops (failed, "
    "saying why) when the tenant's rescans of the day are spent.",
    ok=(202, "The operation, started", "OperationAnswer"),
    extra_ok=(200, "A dry run's count, or the operation an earlier request of the key started"),
    errors=(400, 401, 404, 409, 422, 429),
    parameters=[{**_IDEMPOTENCY_HEADER, "description": "Starts at most one operation"}],
    body={
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/OperationRequest"}}
        },
    },
)

# GET /operations
LIST_OPERATIONS = _doc(
    "The bulk operations, newest first (the audit list)",
    "A tenant sees its own; an operator every one.",
    ok=(200, "One page of operations", "OperationPage"),
    parameters=[
        _query(
            "tenant", "Only this tenant's (a tenant may name only its own)", pattern=TENANT_PATTERN
        ),
        _query(
            "limit", f"Page size ({DEFAULT_LIMIT})", type="integer", minimum=1, maximum=MAX_LIMIT
        ),
        _query("next_token", "The previous page's next_token", maxLength=MAX_TOKEN_LENGTH),
    ],
)

# GET /operations/<operation_id>
GET_OPERATION = _doc(
    "A bulk operation: its filter, reason, progress and result",
    "Progress counts jobs processed, changed, skipped (their status no longer allowed the "
    "action) and errors, against the count matched when it started.",
    ok=(200, "The operation", "Operation"),
)

# POST /schedules
CREATE_SCHEDULE = _doc(
    "Create a recurring schedule: an action on every file under a key prefix, on a cron",
    "action rescan scans every file under prefix again; action run gives each of them a new job "
    "of job_type (with input_data as its options). expression is an EventBridge Scheduler cron "
    "expression, cron(minutes hours day-of-month month day-of-week year), in timezone (an IANA "
    "name, default UTC); L, W and # are not supported, and runs closer together than 23 hours "
    f"are refused. A tenant has at most {MAX_SCHEDULES_PER_TENANT}. Each run is a tracked "
    "operation (GET /operations/{id}), started once per scheduled time; prefix must lie in the "
    "tenant's uploads/{tenant}/. An operator names the tenant.",
    ok=(201, "The schedule, armed", "Schedule"),
    errors=(400, 401, 404, 409, 422),
    body={
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ScheduleRequest"}}
        },
    },
)

# GET /schedules
LIST_SCHEDULES = _doc(
    "The recurring schedules",
    "A tenant sees its own; an operator every tenant's, or one's with tenant=.",
    ok=(200, "The schedules, oldest first", "ScheduleList"),
    parameters=[
        _query(
            "tenant", "Only this tenant's (a tenant may name only its own)", pattern=TENANT_PATTERN
        )
    ],
)

# GET /schedules/<schedule_id>
GET_SCHEDULE = _doc(
    "A recurring schedule: its next runs and its last run's operation",
    "",
    ok=(200, "The schedule", "Schedule"),
)

# PATCH /schedules/<schedule_id>
CHANGE_SCHEDULE = _doc(
    "Pause or resume a recurring schedule",
    "A paused schedule starts no run; resumed, it runs at its next time (missed runs are not "
    "made up).",
    ok=(200, "The schedule", "Schedule"),
    errors=(400, 401, 404, 422),
    body={
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ScheduleChange"}}
        },
    },
)

# DELETE /schedules/<schedule_id>
DELETE_SCHEDULE = _doc(
    "Remove a recurring schedule",
    "Its runs stop; the operations it started stay in the audit list.",
    ok=(204, "Removed", ""),
)

# GET /presets
LIST_PRESETS = _doc(
    "The tenant's upload presets",
    "What runs on the tenant's uploads, where a preset applies: each preset's jobs, the key "
    "prefixes bound to it and whether it is the tenant's default. An operator names the tenant.",
    ok=(200, "The presets, by name", "PresetList"),
    errors=(400, 401, 404, 422),
    parameters=[_TENANT_PARAMETER],
)

# PUT /presets/<preset_name>
PUT_PRESET = _doc(
    "Create an upload preset, or save its next version",
    "A preset says which jobs run on an upload, each with its options (the job type's, as for "
    "POST /files/{file_id}/jobs) and a priority (0 or below from a tenant, as for a requested "
    "job; up to 100 from an operator). It applies to an upload that names it in its "
    f"metadata (x-amz-meta-{PRESET_METADATA_KEY}), else to uploads under the longest of the "
    "tenant's bound prefixes, else (tenant_default) to the tenant's other uploads; an upload "
    "with none gets the default jobs of its content type. Of its jobs, an upload gets those that "
    "fit its content type. jobs [] stores uploads and runs nothing; a preset with a parsing job "
    "must have virus_scan. Each save is a new version, applied to uploads from at most a minute "
    f"later; a file records the version it got. A tenant has at most {MAX_PRESETS_PER_TENANT}. "
    "An operator names the tenant.",
    ok=(200, "The preset's new version", "Preset"),
    errors=(400, 401, 404, 409, 422),
    parameters=[_TENANT_PARAMETER],
    body={
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PresetRequest"}}},
    },
)

# GET /presets/<preset_name>
GET_PRESET = _doc(
    "An upload preset: its current version, or a past one",
    "version= reads a past version (every version stays readable, a removed preset's too).",
    ok=(200, "The preset", "Preset"),
    errors=(400, 401, 404, 422),
    parameters=[
        _TENANT_PARAMETER,
        _query("version", "A past version's number", pattern="^[1-9][0-9]{0,5}$"),
    ],
)

# DELETE /presets/<preset_name>
DELETE_PRESET = _doc(
    "Remove an upload preset",
    "Uploads after it get the next preset that applies (or the default jobs); files keep the "
    "version they were given, and its versions stay readable.",
    ok=(204, "Removed", ""),
    errors=(400, 401, 404, 422),
    parameters=[_TENANT_PARAMETER],
)

# GET /overview
OVERVIEW = _doc(
    "The overview: queues, dead letters, the last hour's throughput and latency, the virus scan",
    "From aggregates kept as jobs move (never a table scan): per job type and lane, the jobs "
    "pending, scheduled and running, completed and failed in the last hour and failed in the "
    "last day; per minute of the last hour, the jobs finished and their upload-to-finish "
    "latency (p50, p95, p99, each within 10%); the virus scan's definitions age and verdicts. A "
    "tenant sees its own; an operator every tenant's, or one's with tenant=, and alone the "
    "dead-letter queues' depths.",
    ok=(200, "The overview", "Overview"),
    parameters=[
        _query(
            "tenant",
            "One tenant's (operators; a tenant may name only its own)",
            pattern=TENANT_PATTERN,
        ),
    ],
)

# GET /failures
FAILURES = _doc(
    "Failure groups: the jobs failed now, grouped by job type and error fingerprint",
    "The fingerprint is the error message with numbers, ids, hashes, paths, URLs and quoted "
    "names replaced by placeholders. Largest group first; a group's id is a filter of GET /jobs "
    "and POST /operations (group=).",
    ok=(200, "The failure groups", "FailureGroups"),
    parameters=[
        _query(
            "tenant",
            "One tenant's (operators; a tenant may name only its own)",
            pattern=TENANT_PATTERN,
        ),
        _listed_query("job_type", "Only groups of this job type", "JobType"),
    ],
)

# GET /tenants/<tenant>/quotas
GET_QUOTAS = _doc(
    "A tenant's quotas and today's usage",
    "The limits in force (the tenant's own where an operator set them, else the stack's "
    "defaults), both sets, and what the tenant's accepted uploads, rescans and bulk operations "
    "of today (UTC) add up to. 0 is unlimited. `max_in_flight_jobs` is the tenant's jobs "
    "running at once per job type (the others wait, pending, their attempts unspent). "
    "`rescans_per_day`, `rescans_per_file_per_day`, `operations_per_day` and "
    "`max_running_operations` hold what the tenant starts on the files it has (429 with "
    "Retry-After over them). A tenant reads its own; another tenant's answers 404.",
    ok=(200, "The tenant's quotas", "TenantQuotas"),
)

# PUT /tenants/<tenant>/quotas
SET_QUOTAS = _doc(
    "Set a tenant's upload quotas (operators)",
    "Each field given sets that limit for the tenant (0: unlimited); null puts it back to the "
    "stack's default; a field left out is left as it is. One write. The upload limits and "
    "`max_in_flight_jobs` hold uploads ingested and jobs started at most a minute later (the "
    "ingest and the workers keep a tenant's quotas a minute per function instance); the "
    "others hold at once. A tenant is refused (403).",
    ok=(200, "The tenant's quotas, as changed", "TenantQuotas"),
    errors=(400, 401, 403, 422),
    body={
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaChange"}}},
    },
)

# POST /tenants/<tenant>/erasure
ERASE_TENANT = _doc(
    "Erase a whole tenant (operators): a customer leaving",
    "A tracked operation (follow it with GET /operations/{id}): first what acts for the tenant "
    "or keeps its data without being a file stops (its schedules disarmed and deleted, its "
    "webhook endpoints and their deliveries, presets with every version, quota overrides and "
    "usage counters deleted); then each of its files is erased as DELETE /files/{id} erases one "
    "(an audit record each; progress counts files processed, erased as changed, skipped, "
    "errors); then every object version left under its prefixes (uploads never ingested, late "
    "outputs, quarantined copies) is deleted. `removed` says how much of each kind went. With "
    "dry_run: the count of its files, and nothing changes. The same Idempotency-Key answers the "
    "same operation. Revoke the tenant's access first: an upload made while it runs is erased "
    "only if it arrived before its file's page. A tenant is refused (403).",
    ok=(202, "The erasure, started", "TenantErasureAnswer"),
    extra_ok=(200, "A dry run's count, or the erasure an earlier request of the key started"),
    errors=(400, 401, 403, 409, 422),
    parameters=[{**_IDEMPOTENCY_HEADER, "description": "Starts at most one erasure"}],
    body={
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/TenantErasureRequest"}}
        },
    },
)

# POST /uploads
UPLOAD = _doc(
    "A signed upload: a form a browser posts one file with, straight to the uploads bucket",
    "For an app's backend to hand its page (docs/INTEGRATION.md). The server picks the key, "
    "uploads/{tenant}/{folder}{yyyy}/{mm}/{uuid}/{filename}: new for every grant, so no upload "
    "overwrites another; the filename is made safe (letters, digits, '.', '_', '-'). The form "
    "allows exactly that key, 1 byte to max_bytes (the tenant's file-size quota in force; 5 GB "
    "when it has none), the content_type given (any, if none), the metadata given and the "
    f"preset (sent as x-amz-meta-{PRESET_METADATA_KEY}; one the tenant does not have answers "
    "404), until expires_at "
    "(expires_in: 60 to 3600 seconds, 900 unless given). Post `fields` in order, then the file "
    "as the last field, `file`, as multipart/form-data to `url`; S3 answers 204. The ingest "
    "then processes it as any upload (GET /files?key=). A tenant's upload is its own; an "
    "operator names the tenant.",
    ok=(200, "The signed form and what it allows", "SignedUpload"),
    errors=(400, 401, 404, 422),
    body={
        "required": False,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/UploadRequest"}}},
    },
)

# --- webhooks (docs/WEBHOOKS.md) ------------------------------------------------------------------

_WEBHOOK_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WebhookRequest"}}},
}

# POST /webhooks
REGISTER_WEBHOOK = _doc(
    "Register a webhook endpoint for the caller's tenant (an operator names the tenant)",
    "The url must be https and its host a public address (a name is resolved and checked again "
    "at every delivery; no redirect is followed). Each delivery of the event types chosen is a "
    "POST signed with the endpoint's secret: Filejobs-Signature `t=<unix>,v1=<hex>`, the "
    "HMAC-SHA256 of `<t>.<body>`. The answer shows the secret, once: no other answer does.",
    ok=(201, "The endpoint and its secret (shown this once)", "WebhookWithSecret"),
    errors=(400, 401, 404, 409, 422),
    body=_WEBHOOK_BODY,
)

# GET /webhooks
LIST_WEBHOOKS = _doc(
    "A tenant's webhook endpoints",
    "A tenant sees its own; an operator names the tenant (tenant=). No secret is shown.",
    ok=(200, "The endpoints", "WebhookList"),
    errors=(400, 401, 404, 422),
    parameters=[
        _query(
            "tenant", "Whose (operators; a tenant may name only its own)", pattern=TENANT_PATTERN
        )
    ],
)

# GET /webhooks/<webhook_id>
GET_WEBHOOK = _doc(
    "A webhook endpoint",
    "Its URL, event types, status (a disabled endpoint says when and why) and when each active "
    "secret ends (never the secret).",
    ok=(200, "The endpoint", "Webhook"),
)

# DELETE /webhooks/<webhook_id>
REMOVE_WEBHOOK = _doc(
    "Remove a webhook endpoint",
    "Its deliveries stop (the next attempt of each fails: endpoint removed); their log expires "
    "30 days after each was made.",
    ok=(204, "Removed", ""),
)

# POST /webhooks/<webhook_id>/rotate
ROTATE_WEBHOOK = _doc(
    "Rotate a webhook endpoint's signing secret",
    "A new secret signs every delivery from now on; the previous one stays valid for "
    "overlap_hours (24 unless given, 0 to 168), and each delivery meanwhile carries a v1 "
    "signature under each. The answer shows the new secret, once.",
    ok=(200, "The endpoint and its new secret (shown this once)", "WebhookWithSecret"),
    errors=(400, 401, 404, 409, 422),
    body={
        "required": False,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Rotation"}}},
    },
)

# POST /webhooks/<webhook_id>/enable
ENABLE_WEBHOOK = _doc(
    "Enable a disabled webhook endpoint again",
    "An endpoint is disabled when it answers 410 Gone, or when every attempt to it failed for 24 "
    "hours; enabling it clears that. Deliveries that failed meanwhile are not sent again by "
    "themselves: resend them.",
    ok=(200, "The endpoint", "Webhook"),
    errors=(400, 401, 404, 409),
)

# GET /webhooks/<webhook_id>/deliveries
WEBHOOK_DELIVERIES = _doc(
    "A webhook endpoint's deliveries, newest first (kept 30 days)",
    "Each with its status (pending, retrying, succeeded, failed), attempts (time, response code, "
    "latency in ms, a short error) and next attempt.",
    ok=(200, "One page of deliveries", "WebhookDeliveryPage"),
    parameters=[
        _query("limit", "Page size (25)", type="integer", minimum=1, maximum=100),
        _query(
            "next_token",
            "The previous page's next_token",
            pattern=r"^dl-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{20}$",
        ),
    ],
)

# GET /webhooks/<webhook_id>/deliveries/<delivery_id>
WEBHOOK_DELIVERY = _doc(
    "One delivery, with the body sent",
    "The body is the exact JSON signed and sent at every attempt.",
    ok=(200, "The delivery", "WebhookDelivery"),
)

# POST /webhooks/<webhook_id>/deliveries/<delivery_id>/resend
RESEND_DELIVERY = _doc(
    "Send a delivery again",
    "A new delivery (its own id, resend_of the original) of the same event and body, signed "
    "anew and retried as any other. The endpoint must be enabled (409 otherwise).",
    ok=(202, "The new delivery, queued", "WebhookDelivery"),
    errors=(400, 401, 404, 409),
)

# GET /openapi.json
OPENAPI_DOCUMENT = _doc(
    "This API's OpenAPI document",
    "As committed (tools/openapi.py writes it).",
    ok=(200, "The OpenAPI 3.1 document", "OpenApiDocument"),
    errors=(401,),
)

# GET /docs
DOCS_PAGE_ROUTE = _doc(
    "This API's documentation (Swagger UI)",
    "An HTML page that loads openapi.json; behind the same auth as every route.",
    ok=(200, "The page", "DocsPage"),
    ok_media="text/html",
    errors=(401,),
)


# --- the documentation page -----------------------------------------------------------------------

# swagger-ui-dist from unpkg, pinned to one release, each file with its Subresource Integrity
# hash: a browser refuses a file that is not exactly the released one. The hashes come from the
# package npm publishes, checked against the registry's sha512 (tools/swagger_ui_integrity.py);
# a new release needs both changed together.
SWAGGER_UI = "https://unpkg.com/swagger-ui-dist@5.17.14"
SWAGGER_UI_INTEGRITY = {
    "swagger-ui.css": "sha384-wxLW6kwyHktdDGr6Pv1zgm/VGJh99lfUbzSn6HNHBENZlCN7W602k9VkGdxuFvPn",
    "swagger-ui-bundle.js": (
        "sha384-wmyclcVGX/WhUkdkATwhaK1X1JtiNrr2EoYJ+diV3vj4v6OC5yCeSu+yW13SYJep"
    ),
}
# Relative: under the stage's path (/v1/docs -> /v1/openapi.json).
_DOCS_SCRIPT = 'window.ui = SwaggerUIBundle({url: "openapi.json", dom_id: "#swagger-ui"});'


def _script_hash(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


DOCS_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>filejobs status API</title>
<link rel="stylesheet" href="{SWAGGER_UI}/swagger-ui.css"
 integrity="{SWAGGER_UI_INTEGRITY["swagger-ui.css"]}" crossorigin="anonymous">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{SWAGGER_UI}/swagger-ui-bundle.js"
 integrity="{SWAGGER_UI_INTEGRITY["swagger-ui-bundle.js"]}" crossorigin="anonymous"></script>
<script>{_DOCS_SCRIPT}</script>
</body>
</html>
"""
DOCS_POLICY = (
    f"default-src 'none'; script-src {SWAGGER_UI}/ 'sha256-{_script_hash(_DOCS_SCRIPT)}'; "
    f"style-src {SWAGGER_UI}/; img-src 'self' data:; connect-src 'self'"
)
