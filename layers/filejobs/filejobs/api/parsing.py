"""Requests parsed into the status API's commands (services/api.py), before any database call.

Ids must be UUIDs, enums must name a member, bodies must be JSON objects of known fields, and
whatever DynamoDB would refuse in a stored map is refused here as the caller's mistake. A
request that cannot be read is malformed (400); one that reads but asks for something not
allowed is invalid (422), its message opening with the field it is about
(`input_data.sizes[0]: must be ...`). Validation is by hand: Powertools' own needs pydantic,
which the layer does not ship; a job's options are checked by their definition in the domain
(domain/job_options.py), the one its processor reads them with.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from filejobs.domain.delays import MAX_DELAY_SECONDS
from filejobs.domain.job import MAX_RETRIES_LIMIT, PRIORITY_MAX, PRIORITY_MIN, JobStatus, JobType
from filejobs.domain.job_options import OptionError, options_of
from filejobs.domain.keys import is_tenant
from filejobs.domain.messages import is_uuid
from filejobs.domain.operations import (
    BULK_ACTIONS,
    Action,
    FilterError,
    JobFilter,
    is_operation_id,
)
from filejobs.domain.presets import NAME_PATTERN as PRESET_NAME_PATTERN
from filejobs.domain.presets import PresetJob
from filejobs.domain.quotas import MAX_QUOTA_VALUE, QUOTA_FIELDS, QuotaChange
from filejobs.domain.schedules import SCHEDULE_ID_PATTERN, ScheduleAction
from filejobs.domain.uploads import DEFAULT_EXPIRY, UploadRequest
from filejobs.services.api import (
    DEFAULT_CANCEL_REASON,
    DEFAULT_RESCAN_REASON,
    MAX_KEY_BYTES,
    CancelJob,
    FileJobs,
    FindFile,
    ListFiles,
    ListJobs,
    RequestJob,
    RescanFile,
    RescanFiles,
)
from filejobs.services.errors import InvalidRequestError, MalformedRequestError, NotFoundError
from filejobs.services.operations import EraseTenant, StartOperation
from filejobs.services.presets import PresetChange
from filejobs.services.schedules import NewSchedule

FILTER_FIELDS = frozenset({"tenant", "job_type", "status", "group", "error", "since", "until"})
DEFAULT_LIMIT = 25
MAX_LIMIT = 100
MAX_REASON_LENGTH = 500
MAX_INPUT_DATA_BYTES = 8 * 1024
JOB_REQUEST_FIELDS = frozenset(
    {"job_type", "priority", "input_data", "run_at", "delay_seconds", "max_retries"}
)
# Visible ASCII: what an HTTP header carries unchanged through every proxy.
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,128}")
_DIGITS = re.compile(r"[0-9]{1,9}")
BUCKET_NAME_PATTERN = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
_BUCKET_NAME = re.compile(BUCKET_NAME_PATTERN)
# What a job's input_data says about its source object (domain/ingest.py): never the caller's.
LOCATION_FIELDS = frozenset({"bucket", "key", "version_id", "size", "content_type"})

# --- one parser per command --------------------------------------------------------------------


def find_file(params: Mapping[str, str], uploads_bucket: str | None) -> FindFile:
    """GET /files?key=&bucket= (the bucket is the stack's uploads bucket when omitted)."""
    listing = sorted({"prefix", "tenant", "limit", "next_token"} & set(params))
    if "key" in params and listing:
        raise MalformedRequestError(
            f"key= finds one key's versions; {listing[0]}= lists files under a prefix (without key)"
        )
    key = params.get("key")
    if not key:
        raise MalformedRequestError("query parameter key is required")
    if len(key) > MAX_KEY_BYTES or not _is_text(key):
        raise MalformedRequestError(f"key must be text of at most {MAX_KEY_BYTES} characters")
    bucket = params.get("bucket", uploads_bucket)
    if bucket is None:
        raise MalformedRequestError("query parameter bucket is required")
    if not _BUCKET_NAME.fullmatch(bucket):
        raise MalformedRequestError(f"bucket must be an S3 bucket name; got {bucket[:80]!r}")
    return FindFile(bucket, key)


def file_jobs(file_id: str, params: Mapping[str, str]) -> FileJobs:
    status = _enum(JobStatus, "status", params.get("status"))
    return FileJobs(canonical_id("file id", file_id), status)


def request_job(file_id: str, body: str | None, idempotency_key: str | None) -> RequestJob:
    """POST /files/{file_id}/jobs: {"job_type", "priority"?, "input_data"? (the job type's
    options, domain/job_options.py), "run_at"? | "delay_seconds"?, "max_retries"?}."""
    data = _job_request_body(body)
    job_type = JobType(data["job_type"])
    priority = _priority(data.get("priority", 0))
    input_data = _input_data(job_type, data.get("input_data"))
    if "run_at" in data and "delay_seconds" in data:
        raise InvalidRequestError("run_at, delay_seconds: give one of them, not both")
    run_at = _run_at(data["run_at"]) if "run_at" in data else None
    delay = _delay(data["delay_seconds"]) if "delay_seconds" in data else None
    max_retries = _max_retries(data["max_retries"]) if "max_retries" in data else None
    key = _idempotency_key(idempotency_key)
    return RequestJob(
        file_id=canonical_id("file id", file_id),
        job_type=job_type,
        idempotency_key=key,
        priority=priority,
        input_data=input_data,
        run_at=run_at,
        delay=delay,
        max_retries=max_retries,
    )


def rescan_file(file_id: str, body: str | None, idempotency_key: str | None) -> RescanFile:
    """POST /files/{file_id}/rescan: an optional {"reason"}."""
    reason = _reason(body, DEFAULT_RESCAN_REASON, allowed={"reason"})
    key = _idempotency_key(idempotency_key)
    return RescanFile(canonical_id("file id", file_id), key, reason)


def rescan_files(body: str | None, idempotency_key: str | None) -> RescanFiles:
    """POST /rescans: {"tenant"?, "prefix"?, "reason"?, "dry_run"?, "next_token"?}."""
    data = _optional_object(body, {"tenant", "prefix", "reason", "dry_run", "next_token"})
    # A field that is there must be of its kind: null is not "absent".
    tenant = data.get("tenant")
    if "tenant" in data and (not isinstance(tenant, str) or not is_tenant(tenant)):
        raise InvalidRequestError("tenant must be a tenant name")
    prefix = data.get("prefix", "")
    if (
        not isinstance(prefix, str)
        or len(prefix.encode("utf-8", errors="replace")) > MAX_KEY_BYTES
        or not _is_text(prefix)
    ):
        raise InvalidRequestError(f"prefix must be text of at most {MAX_KEY_BYTES} bytes")
    reason = _checked_reason(data.get("reason", DEFAULT_RESCAN_REASON))
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InvalidRequestError("dry_run must be true or false")
    next_token = data.get("next_token")
    if "next_token" in data and not isinstance(next_token, str):
        raise InvalidRequestError("next_token must be the previous answer's next_token")
    return RescanFiles(
        idempotency_key=_idempotency_key(idempotency_key),
        tenant=tenant,
        prefix=prefix,
        reason=reason,
        dry_run=dry_run,
        next_token=next_token,
    )


def list_jobs(params: Mapping[str, str]) -> ListJobs:
    """GET /jobs?tenant=&status=&job_type=&group=&error=&since=&until=&limit=&next_token=
    (other query parameters are ignored, as on every route)."""
    wanted = job_filter({k: v for k, v in params.items() if k in FILTER_FIELDS})
    return ListJobs(_limit(params.get("limit")), wanted, params.get("next_token"))


def job_filter(fields: Mapping[str, object]) -> JobFilter:
    """A filter of jobs, from a query string or from an operation's `filter` object."""
    unknown = sorted(set(fields) - FILTER_FIELDS)
    if unknown:
        raise MalformedRequestError(f"unknown filter field: {unknown[0][:40]!r}")
    texts = {name: _filter_text(name, fields.get(name)) for name in FILTER_FIELDS}
    tenant = texts["tenant"]
    if tenant is not None and not is_tenant(tenant):
        raise MalformedRequestError(f"tenant must be a tenant name; got {tenant[:80]!r}")
    try:
        return JobFilter(
            tenant=tenant,
            job_type=_enum(JobType, "job_type", texts["job_type"]),
            status=_enum(JobStatus, "status", texts["status"]),
            group=texts["group"],
            error=texts["error"],
            since=_moment("since", texts["since"]),
            until=_moment("until", texts["until"]),
        )
    except FilterError as error:
        raise MalformedRequestError(str(error)) from None


def list_files(params: Mapping[str, str]) -> ListFiles:
    """GET /files?prefix=&tenant=&limit=&next_token= (files under a key prefix)."""
    prefix = params.get("prefix", "")
    if len(prefix.encode("utf-8", errors="replace")) > MAX_KEY_BYTES or not _is_text(prefix):
        raise MalformedRequestError(f"prefix must be text of at most {MAX_KEY_BYTES} bytes")
    tenant = optional_tenant(params)
    return ListFiles(prefix, _limit(params.get("limit")), tenant, params.get("next_token"))


def start_operation(body: str | None, idempotency_key: str | None) -> StartOperation:
    """POST /operations: {"action", "filter", "reason", "dry_run"?}."""
    data = _optional_object(body, {"action", "filter", "reason", "dry_run"})
    action = data.get("action")
    if not isinstance(action, str) or action not in {a.value for a in BULK_ACTIONS}:
        choices = ", ".join(a.value for a in BULK_ACTIONS)
        raise InvalidRequestError(f"action must be one of: {choices}")
    wanted = data.get("filter")
    if not isinstance(wanted, dict):
        raise InvalidRequestError("filter must be an object (the fields of GET /jobs)")
    if "reason" not in data:
        raise InvalidRequestError("reason is required: it is kept in the operation's audit record")
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InvalidRequestError("dry_run must be true or false")
    try:
        parsed_filter = job_filter(wanted)
    except MalformedRequestError as error:
        raise InvalidRequestError(f"filter: {error.message}") from None
    return StartOperation(
        action=Action(action),
        filter=parsed_filter,
        reason=_checked_reason(data["reason"]),
        dry_run=dry_run,
        idempotency_key=None if idempotency_key is None else _idempotency_key(idempotency_key),
    )


def tenant_erasure(tenant: str, body: str | None, idempotency_key: str | None) -> EraseTenant:
    """POST /tenants/{tenant}/erasure: {"reason", "dry_run"?}."""
    data = _optional_object(body, {"reason", "dry_run"})
    if "reason" not in data:
        raise InvalidRequestError("reason is required: it is kept in the operation's audit record")
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InvalidRequestError("dry_run must be true or false")
    return EraseTenant(
        tenant=tenant_name(tenant),
        reason=_checked_reason(data["reason"]),
        dry_run=dry_run,
        idempotency_key=None if idempotency_key is None else _idempotency_key(idempotency_key),
    )


def optional_tenant(params: Mapping[str, str]) -> str | None:
    """?tenant= (an operator's choice of one tenant; a tenant may name only its own)."""
    tenant = params.get("tenant")
    if tenant is not None and not is_tenant(tenant):
        raise MalformedRequestError(f"tenant must be a tenant name; got {tenant[:80]!r}")
    return tenant


def failures_query(params: Mapping[str, str]) -> tuple[str | None, JobType | None]:
    """GET /failures?tenant=&job_type=."""
    return optional_tenant(params), _enum(JobType, "job_type", params.get("job_type"))


def operation_id(value: str) -> str:
    if not is_operation_id(value):
        raise NotFoundError(f"no operation {value[:80]!r}")
    return value


def operations_page(params: Mapping[str, str]) -> tuple[str | None, int, str | None]:
    """GET /operations?tenant=&limit=&next_token=: (tenant, limit, next_token)."""
    return optional_tenant(params), _limit(params.get("limit")), params.get("next_token")


def _filter_text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or not _is_text(value) or len(value) > 200:
        raise MalformedRequestError(f"{name} must be text of 1 to 200 characters")
    return value


def _moment(name: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise MalformedRequestError(
            f"{name} must be an ISO 8601 time, e.g. 2026-12-04T12:00:00Z; got {value[:40]!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def cancel_job(job_id: str, body: str | None) -> CancelJob:
    """POST /jobs/{job_id}/cancel: an optional {"reason"}."""
    reason = _reason(body, DEFAULT_CANCEL_REASON, allowed={"reason"})
    return CancelJob(canonical_id("job id", job_id), reason)


def tenant_name(value: str) -> str:
    """A tenant in a path (/tenants/{tenant}/...)."""
    if not is_tenant(value):
        raise MalformedRequestError(
            f"tenant must be 1-63 letters, digits, '-' or '_'; got {value[:80]!r}"
        )
    return value


def quota_change(body: str | None) -> QuotaChange:
    """PUT /tenants/{tenant}/quotas: {"files_per_day"?, "bytes_per_day"?, "max_file_bytes"?,
    "max_in_flight_jobs"?}, each an integer (0: unlimited) or null (back to the default)."""
    data = _optional_object(body, set(QUOTA_FIELDS))
    if not data:
        names = ", ".join(QUOTA_FIELDS)
        raise InvalidRequestError(
            f"the body must set (or reset, with null) at least one of {names}"
        )
    limits = {name: _quota_value(name, value) for name, value in data.items() if value is not None}
    reset = frozenset(name for name, value in data.items() if value is None)
    return QuotaChange(set=limits, reset=reset)


def _quota_value(name: str, value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON's 5.0 is the integer 5, as for priority
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_QUOTA_VALUE:
        raise InvalidRequestError(
            f"{name} must be null (the default) or an integer from 0 (unlimited) to "
            f"{MAX_QUOTA_VALUE}; got {json.dumps(value)[:40]}"
        )
    return value


def canonical_id(what: str, value: str) -> str:
    """The id as stored (lower case)."""
    if not is_uuid(value):
        raise MalformedRequestError(f"{what} must be a UUID, got {value[:80]!r}")
    return value.lower()


# --- fields ------------------------------------------------------------------------------------


def _enum[E: (JobStatus, JobType)](kind: type[E], name: str, value: str | None) -> E | None:
    if value is None:  # absent; an empty value is refused like any other unknown one
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise MalformedRequestError(
            f"{name} must be one of {allowed}; got {value[:80]!r}"
        ) from None


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    # Not str.isdigit(): it takes "²", which int() refuses.
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_LIMIT:
        raise MalformedRequestError(
            f"limit must be an integer from 1 to {MAX_LIMIT}; got {value[:20]!r}"
        )
    return int(value)


def _idempotency_key(value: str | None) -> str:
    """The caller's Idempotency-Key, or a fresh one: without a key every request is a new job."""
    if value is None:
        return str(uuid.uuid4())
    if not _IDEMPOTENCY_KEY.fullmatch(value):
        raise MalformedRequestError(
            "Idempotency-Key must be 1 to 128 visible ASCII characters (no spaces)"
        )
    return value


def _reason(body: str | None, default: str, *, allowed: set[str]) -> str:
    """The "reason" of an optional JSON body that may hold only `allowed` fields."""
    data = _optional_object(body, allowed)
    return _checked_reason(data.get("reason", default))


def _optional_object(body: str | None, allowed: set[str]) -> dict[str, Any]:
    if body is None or not body.strip():
        return {}
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except ValueError:
        raise MalformedRequestError("the body must be JSON") from None
    if not isinstance(data, dict) or set(data) - allowed:
        fields = ", ".join(f'"{name}"' for name in sorted(allowed))
        raise InvalidRequestError(f"the body must be an object with at most {fields}")
    return data


# A reason must hold a character that is not blank: white space by Python's rule and by
# ECMAScript's alike (Python counts U+001C-U+001F and U+0085, ECMAScript U+FEFF), so that the
# OpenAPI document's pattern means the same to every client's regex engine (REASON_PATTERN).
_BLANK_EXTRA = "\ufeff"
REASON_PATTERN = "[^\\s\\x1c-\\x1f\\x85\\ufeff]"


def _is_blank(text: str) -> bool:
    return all(character.isspace() or character in _BLANK_EXTRA for character in text)


def _checked_reason(reason: object) -> str:
    if (
        not isinstance(reason, str)
        or _is_blank(reason)
        or len(reason) > MAX_REASON_LENGTH
        or not _is_text(reason)
    ):
        raise InvalidRequestError(
            f"reason must be a non-empty string of at most {MAX_REASON_LENGTH} characters"
        )
    return reason


def _job_request_body(body: str | None) -> dict[str, Any]:
    if body is None or not body.strip():
        raise MalformedRequestError('the body must be a JSON object with "job_type"')
    if len(body.encode()) > MAX_INPUT_DATA_BYTES * 2:
        raise InvalidRequestError(f"the body must be at most {MAX_INPUT_DATA_BYTES * 2} bytes")
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except ValueError:
        raise MalformedRequestError("the body must be JSON") from None
    if not isinstance(data, dict) or "job_type" not in data:
        raise InvalidRequestError('the body must be an object with "job_type"')
    unknown = sorted(set(data) - JOB_REQUEST_FIELDS)
    if unknown:
        allowed = ", ".join(f'"{name}"' for name in sorted(JOB_REQUEST_FIELDS))
        raise InvalidRequestError(f"{unknown[0][:40]}: unknown field; the body takes {allowed}")
    job_type = data["job_type"]
    if not isinstance(job_type, str) or job_type not in JobType:
        known = ", ".join(member.value for member in JobType)
        raise InvalidRequestError(f"job_type must be one of {known}; got {str(job_type)[:80]!r}")
    return data


def _priority(value: object) -> int:
    # JSON has one number type: 5.0 is the integer 5 (as JSON Schema's "integer" says); 5.5 and
    # true are not.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not PRIORITY_MIN <= value <= PRIORITY_MAX
    ):
        raise InvalidRequestError(
            f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _input_data(job_type: JobType, input_data: object) -> dict[str, Any] | None:
    """The job type's options, checked by the definition its processor reads them with
    (domain/job_options.py): unknown names, wrong types and values out of bounds are refused,
    naming the field. Stored as given (a default may be the deployment's, read at run time)."""
    if input_data is None:
        return None
    if not isinstance(input_data, dict):
        raise InvalidRequestError(
            f"input_data: must be an object (the {job_type.value} job's options) or null"
        )
    reserved = sorted(LOCATION_FIELDS & set(input_data))
    if reserved:
        raise InvalidRequestError(
            f"input_data.{reserved[0]}: may not be set: the file's location is the job's own"
        )
    try:
        checked = options_of(job_type).check(input_data)
    except OptionError as error:
        raise InvalidRequestError(str(error), log="job options refused") from None
    return checked or None


# RFC 3339's date-time: a date, "T" (or a space, or "t"), a time with seconds, and an offset.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _run_at(value: object) -> datetime:
    shape = "an RFC 3339 time with its UTC offset, e.g. 2026-12-04T12:00:00Z"
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise InvalidRequestError(f"run_at: must be {shape}; got {json.dumps(value)[:60]}")
    text = value.upper().replace(" ", "T")
    text = re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", text)  # Python reads microseconds at most
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(f"run_at: must be {shape}; got {value[:60]!r}") from None
    return moment.astimezone(UTC)


def _whole_number(value: object) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON's 5.0 is the integer 5, as for priority
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value


def _delay(value: object) -> timedelta:
    seconds = _whole_number(value)
    if seconds is None or not 0 <= seconds <= MAX_DELAY_SECONDS:
        raise InvalidRequestError(
            f"delay_seconds: must be an integer from 0 to {MAX_DELAY_SECONDS} (30 days); "
            f"got {json.dumps(value)[:40]}"
        )
    return timedelta(seconds=seconds)


def _max_retries(value: object) -> int:
    retries = _whole_number(value)
    if retries is None or not 1 <= retries <= MAX_RETRIES_LIMIT:
        raise InvalidRequestError(
            f"max_retries: must be an integer from 1 to {MAX_RETRIES_LIMIT} (retries after the "
            f"first attempt); got {json.dumps(value)[:40]}"
        )
    return retries


def _is_text(value: str) -> bool:
    """False for a string with a lone surrogate: JSON's \\ud800 escapes can carry one, and no
    UTF-8 (what DynamoDB stores) can."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- schedules -----------------------------------------------------------------------------------

_SCHEDULE_FIELDS = {"name", "expression", "timezone", "action", "prefix", "tenant", "job_type"}


def new_schedule(body: str | None) -> NewSchedule:
    """POST /schedules: {"name", "expression", "action", "prefix", "timezone"?, "tenant"?,
    "job_type"? and "input_data"? (the job's options, action "run" only)}."""
    data = _optional_object(body, _SCHEDULE_FIELDS | {"input_data"})
    missing = sorted(n for n in ("name", "expression", "action", "prefix") if data.get(n) is None)
    if missing:
        raise InvalidRequestError(f"{', '.join(missing)}: required")
    texts = {name: data.get(name) for name in _SCHEDULE_FIELDS}
    for name, value in texts.items():
        if value is not None and (not isinstance(value, str) or not _is_text(value)):
            raise InvalidRequestError(f"{name}: must be text")
    action = data["action"]
    if action not in {a.value for a in ScheduleAction}:
        choices = ", ".join(a.value for a in ScheduleAction)
        raise InvalidRequestError(f"action: must be one of {choices}")
    tenant = data.get("tenant")
    if tenant is not None and not is_tenant(tenant):
        raise InvalidRequestError(f"tenant: must be a tenant name; got {tenant[:80]!r}")
    job_type = data.get("job_type")
    if job_type is not None and job_type not in JobType:
        known = ", ".join(member.value for member in JobType)
        raise InvalidRequestError(f"job_type: must be one of {known}; got {job_type[:80]!r}")
    return NewSchedule(
        name=data["name"],
        expression=data["expression"],
        action=ScheduleAction(action),
        prefix=data["prefix"],
        timezone="UTC" if data.get("timezone") is None else data["timezone"],
        tenant=tenant,
        job_type=None if job_type is None else JobType(job_type),
        options=_schedule_options(job_type, data.get("input_data")),
    )


def _schedule_options(job_type: str | None, given: object) -> dict[str, Any]:
    """The run's jobs' options, as an object; the service checks them against the job type's
    definition once it has checked the action and the type (domain/job_options.py)."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise InvalidRequestError(
            f"input_data: must be an object (the {job_type or 'job'}'s options) or null"
        )
    return given


def schedule_change(body: str | None) -> bool:
    """PATCH /schedules/{id}: {"enabled": true|false} (pause or resume)."""
    data = _optional_object(body, {"enabled"})
    enabled = data.get("enabled")
    if not isinstance(enabled, bool):
        raise InvalidRequestError("enabled: required, true or false")
    return enabled


def schedule_id(value: str) -> str:
    if not re.match(SCHEDULE_ID_PATTERN, value):
        raise NotFoundError(f"no schedule {value[:80]!r}")
    return value


# --- presets ---------------------------------------------------------------------------------

_PRESET_FIELDS = {"jobs", "prefixes", "tenant_default", "description"}
_PRESET_JOB_FIELDS = {"job_type", "options", "priority"}


def preset_name(value: str) -> str:
    """A preset's name in a path: anything else names no preset."""
    if not re.match(PRESET_NAME_PATTERN, value):
        raise NotFoundError(f"no preset {value[:80]!r}")
    return value


def preset_version(params: Mapping[str, str]) -> int | None:
    """?version= on GET /presets/{name}: a past version; none, the current one."""
    raw = params.get("version")
    if raw is None:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 1_000_000:
        raise MalformedRequestError(f"version must be a positive integer; got {raw[:20]!r}")
    return int(raw)


def preset_change(body: str | None) -> PresetChange:
    """PUT /presets/{name}: {"jobs": [{"job_type", "options"?, "priority"?}], "prefixes"?,
    "tenant_default"?, "description"?}; the service checks each job's options and the bindings."""
    data = _optional_object(body, _PRESET_FIELDS)
    if data.get("jobs") is None:
        raise InvalidRequestError("jobs: required (an empty list stores uploads and runs nothing)")
    prefixes = data.get("prefixes", [])
    if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
        raise InvalidRequestError("prefixes: a list of key prefixes")
    tenant_default = data.get("tenant_default", False)
    if not isinstance(tenant_default, bool):
        raise InvalidRequestError("tenant_default: true or false")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise InvalidRequestError("description: must be text")
    return PresetChange(
        jobs=_preset_jobs(data["jobs"]),
        prefixes=tuple(prefixes),
        tenant_default=tenant_default,
        description=description,
    )


def _preset_jobs(raw: object) -> tuple[PresetJob, ...]:
    if not isinstance(raw, list):
        raise InvalidRequestError("jobs: a list of {job_type, options?, priority?}")
    return tuple(_preset_job(f"jobs[{index}]", item) for index, item in enumerate(raw))


def _preset_job(where: str, item: object) -> PresetJob:
    if not isinstance(item, dict):
        raise InvalidRequestError(f"{where}: an object {{job_type, options?, priority?}}")
    unknown = sorted(set(item) - _PRESET_JOB_FIELDS)
    if unknown:
        raise InvalidRequestError(f"{where}.{unknown[0][:40]}: not a field of a preset's job")
    job_type = item.get("job_type")
    if not isinstance(job_type, str) or job_type not in JobType:
        known = ", ".join(member.value for member in JobType)
        raise InvalidRequestError(f"{where}.job_type: must be one of {known}")
    options = item.get("options", {})
    if not isinstance(options, dict):
        raise InvalidRequestError(f"{where}.options: an object of the job type's options")
    try:
        priority = _priority(item.get("priority", 0))
    except InvalidRequestError as error:
        raise InvalidRequestError(f"{where}.{error}") from None
    return PresetJob(JobType(job_type), options, priority)


# --- signed uploads (services/uploads.py) ---------------------------------------------------

UPLOAD_FIELDS = {"tenant", "filename", "folder", "content_type", "preset", "metadata", "expires_in"}
MAX_FILENAME_CHARS = 1024


def upload_request(body: str | None) -> tuple[str | None, UploadRequest]:
    """POST /uploads: {"tenant"? (operators), "filename"?, "folder"?, "content_type"?, "preset"?,
    "metadata"? {name: text}, "expires_in"? seconds}; the domain checks what each may be
    (domain/uploads.py). An empty body asks for a grant with every default."""
    data = _optional_object(body, UPLOAD_FIELDS)
    tenant = data.get("tenant")
    if "tenant" in data and (not isinstance(tenant, str) or not is_tenant(tenant)):
        raise InvalidRequestError("tenant: must be a tenant name")
    texts = {
        name: _optional_text(data, name)
        for name in ("filename", "folder", "content_type", "preset")
    }
    filename = texts["filename"]
    if filename is not None and len(filename) > MAX_FILENAME_CHARS:
        raise InvalidRequestError(f"filename: at most {MAX_FILENAME_CHARS} characters")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise InvalidRequestError("metadata: an object of names to text")
    expires_in = DEFAULT_EXPIRY
    if "expires_in" in data:
        seconds = _whole_number(data["expires_in"])
        if seconds is None:
            raise InvalidRequestError("expires_in: a whole number of seconds")
        expires_in = timedelta(seconds=seconds)
    request = UploadRequest(
        filename=filename,
        folder=texts["folder"],
        content_type=texts["content_type"],
        preset=texts["preset"],
        metadata=metadata,
        expires_in=expires_in,
    )
    return tenant, request


def _optional_text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if name in data and (not isinstance(value, str) or not value or not _is_text(value)):
        raise InvalidRequestError(f"{name}: must be non-empty text")
    return value
