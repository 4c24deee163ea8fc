"""The status API's queries and commands, for one authenticated caller.

Every input is validated here before any database call (ids must be UUIDs, enums must name a
member). A tenant caller sees and changes only its own tenant's files and jobs: another
tenant's id answers "not found", exactly as an id that does not exist, so existence never leaks.
Cancel, retry and delete are each one conditional write (`JobRepository.apply`); a job
requested again for a file is one conditional put (`JobRepository.create`) whose id derives
from the caller's idempotency key, so repeating the request can never make a second job.

Page tokens are opaque: base64url of JSON naming the listing they continue (caller, tenant,
filters) and where the last page ended. With `API_TOKEN_SECRET` set they are signed
(HMAC-SHA256); without it a token is still bound to its caller and listing, and a tenant's
listing reads only that tenant's partitions whatever a token says, so a forged token can
reorder a tenant's own jobs at worst, never show another tenant's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from filejobs.access import Caller
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import InvalidCursorError, JobPage, JobRepository, PageCursor
from filejobs.domain import scanning, transitions
from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.ingest import new_job
from filejobs.domain.job import PRIORITY_MAX, PRIORITY_MIN, JobStatus, JobType, ProcessingJob
from filejobs.domain.keys import is_tenant
from filejobs.domain.messages import is_uuid
from filejobs.domain.outcome import Applied
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import utcnow
from filejobs.services.rescans import Rescans
from filejobs.views import Output, file_view, job_view, output_keys

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 25
MAX_LIMIT = 100
_MAX_TOKEN_LENGTH = 2048
_MAX_KEY_LENGTH = 1024
_MAX_REASON_LENGTH = 500
_DEFAULT_CANCEL_REASON = "cancelled through the API"
_DEFAULT_RESCAN_REASON = "rescan requested through the API"
RESCAN_PAGE_LIMIT = 100
# Download URLs of a job's outputs: long enough to fetch them, short enough not to be shared.
OUTPUT_URL_LIFETIME = timedelta(minutes=15)
MAX_INPUT_DATA_BYTES = 8 * 1024
_MAX_INPUT_DEPTH = 16  # DynamoDB nests maps and lists 32 deep at most
INPUT_INTEGER_BOUND = 10**38  # DynamoDB numbers carry 38 digits
INPUT_MIN_MAGNITUDE, INPUT_MAX_MAGNITUDE = 1e-130, 1e126  # and range no wider than this
# Visible ASCII: what an HTTP header carries unchanged through every proxy.
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,128}")
_DIGITS = re.compile(r"[0-9]{1,9}")
BUCKET_NAME_PATTERN = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
_BUCKET_NAME = re.compile(BUCKET_NAME_PATTERN)
# What a job's input_data says about its source object (domain/ingest.py): never the caller's.
LOCATION_FIELDS = frozenset({"bucket", "key", "version_id", "size", "content_type"})


class ApiError(Exception):
    """An answer other than 2xx: the handler renders it as {"error": {"code", "message"}}."""

    status = 500
    code = "internal"

    def __init__(self, message: str, *, log: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.log = log  # what the handler logs, when more telling than the status


class BadRequestError(ApiError):
    status, code = 400, "bad_request"


class UnauthorizedError(ApiError):
    status, code = 401, "unauthorized"


class NotFoundError(ApiError):
    status, code = 404, "not_found"


class ConflictError(ApiError):
    status, code = 409, "conflict"


class UnprocessableError(ApiError):
    status, code = 422, "unprocessable"


@dataclass(frozen=True)
class JobRequest:
    """The body of POST /files/{file_id}/jobs, validated."""

    job_type: JobType
    priority: int = 0
    input_data: dict[str, Any] | None = None


@dataclass(frozen=True)
class Requested:
    view: dict[str, Any]
    replayed: bool  # the job an earlier request with the same key made
    idempotency_key: str


class Dispatcher(Protocol):
    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        """Send the job's message to its worker queue."""


@dataclass
class StatusApi:
    jobs: JobRepository
    files: FileRepository
    dispatcher: Callable[[], Dispatcher]  # built only when a retry needs it
    retention: timedelta
    token_secret: bytes | None = None
    uploads_bucket: str | None = None
    outputs_bucket: str | None = None
    s3: Callable[[], S3Client] | None = None  # presigns output URLs (no request is made)
    clock: Callable[[], datetime] = utcnow
    dispatch_policy: DispatchPolicy = field(default_factory=DispatchPolicy)
    # Told of a scan job a caller cancelled: the jobs that wait on its verdict are settled
    # (services/scan_gate.py `scan_ended`), not left to their next look by the sweep.
    scan_ended: Callable[[ProcessingJob], None] | None = None

    # --- files --------------------------------------------------------------------------------

    def file(self, caller: Caller, file_id: str) -> dict[str, Any]:
        stored = self._visible_file(caller, file_id)
        jobs = self._jobs_of(caller, stored)
        return {**file_view(stored), "jobs": [self._full_view(j, stored) for j in jobs]}

    def request_job(
        self, caller: Caller, file_id: str, body: str | None, idempotency_key: str | None
    ) -> Requested:
        """A new job of a type on a file, once per idempotency key (a new one when none given).

        The same key again answers the job it made (`replayed`), whatever became of it; the same
        key with another request is a conflict. A parsing job on a file not yet scanned clean is
        accepted: it waits behind the scan gate like ingest's own jobs.
        """
        request = _job_request(body)
        key = _idempotency_key(idempotency_key)
        stored = self._visible_file(caller, file_id)
        _may_run(request.job_type, stored)
        job = new_job(
            stored,
            request.job_type,
            now=self.clock(),
            created_by=caller.name,
            dispatch=self.dispatch_policy,
            idempotency_key=f"api:{stored.id}:{key}",
            priority=request.priority,
            input_data=request.input_data,
        )
        if self.jobs.create(job):
            try:
                self.dispatcher().dispatch(job)
            except Exception:
                # Pending with sweep_at = now + grace: the sweep sends it if this did not.
                logger.exception("requested job not dispatched; the sweep will send it")
            return Requested(job_view(job, outputs=[]), replayed=False, idempotency_key=key)
        existing = self.jobs.get(job.id)
        if existing is None or existing.metadata.deleted_at is not None:
            raise ConflictError(
                f"Idempotency-Key {key!r} was used for a job of file {stored.id} that no longer "
                "exists; a key is never reused: send another",
                log="idempotency key of a deleted job",
            )
        same = (existing.job_type, existing.priority, existing.input_data) == (
            job.job_type,
            job.priority,
            job.input_data,
        )
        if not same:
            raise ConflictError(
                f"Idempotency-Key {key!r} was used for another request on file {stored.id} "
                f"(job {existing.id}: {existing.job_type.value}, priority {existing.priority})",
                log="idempotency key reused with another request",
            )
        return Requested(self._full_view(existing), replayed=True, idempotency_key=key)

    def rescan_file(
        self, caller: Caller, file_id: str, body: str | None, idempotency_key: str | None
    ) -> Requested:
        """A new virus scan of the file with the current definitions, once per idempotency key
        (a new one when none given). A quarantined or deleted file has nothing to rescan."""
        reason = _reason(body, _DEFAULT_RESCAN_REASON, allowed={"reason"})
        key = _idempotency_key(idempotency_key)
        stored = self._visible_file(caller, file_id)
        rescans = self._rescans()
        refusal = rescans.why_not(stored)
        if refusal is not None:
            raise ConflictError(f"file {stored.id} cannot be rescanned: {refusal}")
        done = rescans.rescan(stored, key=f"api:{key}", by=caller.name, reason=reason)
        view = job_view(done.job, outputs=[]) if done.created else self._full_view(done.job)
        return Requested(view, replayed=not done.created, idempotency_key=key)

    def rescan_files(
        self, caller: Caller, body: str | None, idempotency_key: str | None
    ) -> tuple[dict[str, Any], str]:
        """One page of a tenant's files under a key prefix, each rescanned; the answer's
        next_token continues the same operation (the same key: a page run twice makes no second
        job). Returns the answer and the operation's key."""
        request = _rescan_request(body)
        tenant = request.get("tenant")
        if not caller.operator:
            if tenant is not None and tenant != caller.tenant:
                raise NotFoundError(f"no tenant {tenant!r}")
            tenant = caller.tenant
        if tenant is None:
            raise UnprocessableError("an operator rescans the files of one tenant (tenant)")
        key = _idempotency_key(idempotency_key)
        prefix = request.get("prefix", "")
        scope = {"operation": "rescan", "tenant": tenant, "prefix": prefix, "key": key}
        token = request.get("next_token")
        after = None
        if token is not None:
            cursor = self._decode_token(token, scope)
            after = (cursor.range_value, cursor.id)
        page = self._rescans().rescan_prefix(
            tenant,
            prefix=prefix,
            key=f"bulk:{key}",
            by=caller.name,
            reason=request.get("reason", _DEFAULT_RESCAN_REASON),
            after=after,
            limit=RESCAN_PAGE_LIMIT,
            dry_run=request.get("dry_run", False),
        )
        next_token = None
        if page.next is not None:
            next_token = self._encode_token(PageCursor(page.next[0], page.next[1]), scope)
        answer = {
            "tenant": tenant,
            "prefix": prefix,
            "dry_run": request.get("dry_run", False),
            "requested": [
                {"file_id": r.job.file_id, "job_id": r.job.id, "created": r.created}
                for r in page.requested
            ],
            "skipped": [{"file_id": s.file_id, "reason": s.reason} for s in page.skipped],
            "next_token": next_token,
        }
        return answer, key

    def _rescans(self) -> Rescans:
        return Rescans(
            self.jobs,
            self.files,
            _LazyDispatcher(self.dispatcher),
            clock=self.clock,
            dispatch=self.dispatch_policy,
        )

    def file_by_key(self, caller: Caller, params: Mapping[str, str]) -> dict[str, Any]:
        key = params.get("key")
        if not key:
            raise BadRequestError("query parameter key is required")
        if len(key) > _MAX_KEY_LENGTH or not _is_text(key):
            raise BadRequestError(f"key must be text of at most {_MAX_KEY_LENGTH} characters")
        bucket = params.get("bucket", self.uploads_bucket)
        if bucket is None:
            raise BadRequestError("query parameter bucket is required")
        if not _BUCKET_NAME.fullmatch(bucket):
            raise BadRequestError(f"bucket must be an S3 bucket name; got {bucket[:80]!r}")
        if len(key.encode()) > _MAX_KEY_LENGTH:
            # S3 keys are at most 1,024 bytes of UTF-8, so there is none; and the query would
            # exceed DynamoDB's 2,048-byte partition key (a ValidationException, a 500).
            raise NotFoundError(f"no file with key {key!r}")
        versions = [f for f in self.files.versions_of(bucket, key) if _visible(caller, f)]
        if not versions:
            raise NotFoundError(f"no file with key {key!r}")
        return {"bucket": bucket, "key": key, "files": [file_view(f) for f in versions]}

    def file_jobs(self, caller: Caller, file_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        status = _enum(JobStatus, "status", params.get("status"))
        stored = self._visible_file(caller, file_id)
        jobs = self._jobs_of(caller, stored, status)
        return {"file_id": stored.id, "jobs": [job_view(j) for j in jobs]}

    # --- jobs ---------------------------------------------------------------------------------

    def job(self, caller: Caller, job_id: str) -> dict[str, Any]:
        return self._full_view(self._visible_job(caller, job_id))

    def delete(self, caller: Caller, job_id: str) -> None:
        """Soft-delete a finished job: one conditional write; a job still active is a conflict."""
        job = self._visible_job(caller, job_id)
        self._apply(job, transitions.delete(now=self.clock(), by=caller.name))

    def list_jobs(self, caller: Caller, params: Mapping[str, str]) -> dict[str, Any]:
        status = _enum(JobStatus, "status", params.get("status"))
        job_type = _enum(JobType, "job_type", params.get("job_type"))
        limit = _limit(params.get("limit"))
        tenant = params.get("tenant")
        if tenant is not None and not is_tenant(tenant):
            raise BadRequestError(f"tenant must be a tenant name; got {tenant[:80]!r}")
        if not caller.operator:
            if tenant is not None and tenant != caller.tenant:
                raise NotFoundError(f"no tenant {tenant!r}")
            tenant = caller.tenant
        if tenant is None and status is None:
            raise BadRequestError(
                "an operator lists the jobs of one tenant (tenant=) or in one status (status=)"
            )
        scope = {
            "caller": "operator" if caller.operator else f"tenant:{caller.tenant}",
            "tenant": tenant,
            "status": None if status is None else status.value,
            "job_type": None if job_type is None else job_type.value,
        }
        token = params.get("next_token")
        after = None if token is None else self._decode_token(token, scope)
        try:
            if tenant is not None:
                page: JobPage = self.jobs.tenant_page(
                    tenant, status=status, job_type=job_type, after=after, limit=limit
                )
                order = "newest_first"
            else:
                assert status is not None
                page = self.jobs.status_page(status, job_type=job_type, after=after, limit=limit)
                order = "queue"
        except InvalidCursorError:
            raise BadRequestError("next_token is not valid") from None
        # The partitions read were the caller's own; checked again all the same.
        jobs = [j for j in page.jobs if caller.may_see(j.tenant) and j.metadata.deleted_at is None]
        return {
            "jobs": [job_view(j) for j in jobs],
            "order": order,
            "next_token": None if page.next is None else self._encode_token(page.next, scope),
        }

    def cancel(self, caller: Caller, job_id: str, body: str | None) -> dict[str, Any]:
        reason = _cancel_reason(body)
        job = self._visible_job(caller, job_id)
        transition = transitions.cancel(
            now=self.clock(), by=caller.name, reason=reason, retention=self.retention
        )
        cancelled = self._apply(job, transition)
        if cancelled.job_type is JobType.VIRUS_SCAN and self.scan_ended is not None:
            try:
                self.scan_ended(cancelled)
            except Exception:
                # The cancel stands; the sweep settles the waiting jobs at their next look.
                logger.exception("the jobs waiting on scan %s were not settled", cancelled.id)
        return job_view(cancelled)

    def retry(self, caller: Caller, job_id: str) -> dict[str, Any]:
        job = self._visible_job(caller, job_id)
        transition = transitions.retry(
            now=self.clock(), by=caller.name, dispatch_grace=self.dispatch_policy.grace
        )
        retried = self._apply(job, transition)
        try:
            self.dispatcher().dispatch(retried)
        except Exception:
            # The job is pending with sweep_at = now + grace: the sweep sends it if this did not.
            logger.exception("retried job not dispatched; the sweep will send it")
        return job_view(retried)

    # --- helpers ------------------------------------------------------------------------------

    def _full_view(self, job: ProcessingJob, stored: StoredFile | None = None) -> dict[str, Any]:
        """A job's view with download URLs of its outputs (single-job answers only)."""
        return job_view(job, outputs=self._outputs(job, stored))

    def _outputs(self, job: ProcessingJob, stored: StoredFile | None) -> list[Output]:
        found = output_keys(job)
        if not found or self.s3 is None or not self.outputs_bucket:
            return []
        stored = stored or self.files.get(job.file_id, consistent=False)
        if stored is None or stored.status is not FileStatus.ACTIVE:
            return []  # a quarantined file's outputs were withdrawn: no URL to a deleted object
        client = self.s3()
        expires_at = self.clock() + OUTPUT_URL_LIFETIME
        lifetime = int(OUTPUT_URL_LIFETIME.total_seconds())
        return [
            Output(
                key=key,
                url=client.generate_presigned_url(
                    "get_object",
                    Params={"Bucket": self.outputs_bucket, "Key": key},
                    ExpiresIn=lifetime,
                ),
                expires_at=expires_at,
            )
            for key in found
        ]

    def _visible_file(self, caller: Caller, file_id: str) -> StoredFile:
        file_id = _canonical_uuid("file id", file_id)
        stored = self.files.get(file_id, consistent=False)
        if stored is None or not _visible(caller, stored):
            raise NotFoundError(f"no file {file_id}", log="file not found")
        return stored

    def _jobs_of(
        self, caller: Caller, stored: StoredFile, status: JobStatus | None = None
    ) -> list[ProcessingJob]:
        jobs = self.jobs.jobs_of_file(stored.id, status)
        return [j for j in jobs if caller.may_see(j.tenant) and j.metadata.deleted_at is None]

    def _visible_job(self, caller: Caller, job_id: str) -> ProcessingJob:
        job_id = _canonical_uuid("job id", job_id)
        job = self.jobs.get(job_id, consistent=False)
        if job is None or job.metadata.deleted_at is not None or not caller.may_see(job.tenant):
            raise NotFoundError(f"no job {job_id}", log="job not found")
        return job

    def _apply(self, job: ProcessingJob, transition: transitions.Transition) -> ProcessingJob:
        result = self.jobs.apply(job.id, job.job_type, transition)
        if isinstance(result, Applied):
            return result.job
        if result.conflict in (transitions.Conflict.NOT_FOUND, transitions.Conflict.DELETED):
            raise NotFoundError(f"no job {job.id}")
        status = job.status.value if result.current is None else result.current.status.value
        raise ConflictError(
            f"job {job.id} cannot {transition.name}: it is {status} ({result.conflict.value})"
        )

    def _encode_token(self, cursor: PageCursor, scope: dict[str, Any]) -> str:
        payload = json.dumps(
            {"scope": scope, "after": [cursor.range_value, cursor.id]},
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        token = _b64encode(payload)
        if self.token_secret is not None:
            token += "." + _b64encode(_sign(self.token_secret, payload))
        return token

    def _decode_token(self, token: str, scope: dict[str, Any]) -> PageCursor:
        invalid = BadRequestError("next_token is not valid for this listing")
        if len(token) > _MAX_TOKEN_LENGTH:
            raise invalid
        body, _, signature = token.partition(".")
        try:
            payload = _b64decode(body)
            if self.token_secret is not None and not hmac.compare_digest(
                _b64decode(signature), _sign(self.token_secret, payload)
            ):
                raise invalid
            data = json.loads(payload)
        except (ValueError, binascii.Error):
            raise invalid from None
        if not isinstance(data, dict) or data.get("scope") != scope:
            raise invalid
        after = data.get("after")
        if not (
            isinstance(after, list)
            and len(after) == 2
            and all(isinstance(part, str) for part in after)
            and is_uuid(after[1])
        ):
            raise invalid
        return PageCursor(after[0], after[1])


class _LazyDispatcher:
    """The dispatcher, built on the first send only (a dry run or a replay sends nothing)."""

    def __init__(self, build: Callable[[], Dispatcher]) -> None:
        self._build = build

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        self._build().dispatch(job, delay)


def _visible(caller: Caller, stored: StoredFile) -> bool:
    return stored.metadata.deleted_at is None and caller.may_see(stored.tenant)


def _canonical_uuid(what: str, value: str) -> str:
    """The id as stored (lower case), or a 400 before any database call."""
    if not is_uuid(value):
        raise BadRequestError(f"{what} must be a UUID, got {value[:80]!r}")
    return value.lower()


def _enum[E: (JobStatus, JobType)](kind: type[E], name: str, value: str | None) -> E | None:
    if value is None:  # absent; an empty value is refused like any other unknown one
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise BadRequestError(f"{name} must be one of {allowed}; got {value[:80]!r}") from None


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    # Not str.isdigit(): it takes "²", which int() refuses.
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_LIMIT:
        raise BadRequestError(f"limit must be an integer from 1 to {MAX_LIMIT}; got {value[:20]!r}")
    return int(value)


def _cancel_reason(body: str | None) -> str:
    """The optional body of a cancel: {"reason": "..."}."""
    return _reason(body, _DEFAULT_CANCEL_REASON, allowed={"reason"})


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
        raise BadRequestError("the body must be JSON") from None
    if not isinstance(data, dict) or set(data) - allowed:
        fields = ", ".join(f'"{name}"' for name in sorted(allowed))
        raise UnprocessableError(f"the body must be an object with at most {fields}")
    return data


def _checked_reason(reason: object) -> str:
    if (
        not isinstance(reason, str)
        or not reason.strip()
        or len(reason) > _MAX_REASON_LENGTH
        or not _is_text(reason)
    ):
        raise UnprocessableError(
            f"reason must be a non-empty string of at most {_MAX_REASON_LENGTH} characters"
        )
    return reason


def _rescan_request(body: str | None) -> dict[str, Any]:
    """The body of POST /rescans: {"tenant"?, "prefix"?, "reason"?, "dry_run"?, "next_token"?}."""
    data = _optional_object(body, {"tenant", "prefix", "reason", "dry_run", "next_token"})
    # A field that is there must be of its kind: null is not "absent".
    if "tenant" in data and (not isinstance(data["tenant"], str) or not is_tenant(data["tenant"])):
        raise UnprocessableError("tenant must be a tenant name")
    prefix = data.get("prefix", "")
    if (
        not isinstance(prefix, str)
        or len(prefix.encode("utf-8", errors="replace")) > _MAX_KEY_LENGTH
        or not _is_text(prefix)
    ):
        raise UnprocessableError(f"prefix must be text of at most {_MAX_KEY_LENGTH} bytes")
    if "reason" in data:
        _checked_reason(data["reason"])
    if not isinstance(data.get("dry_run", False), bool):
        raise UnprocessableError("dry_run must be true or false")
    if "next_token" in data and not isinstance(data["next_token"], str):
        raise UnprocessableError("next_token must be the previous answer's next_token")
    return data


def _job_request(body: str | None) -> JobRequest:
    """The body of a job request: {"job_type", "priority"?, "input_data"?}."""
    if body is None or not body.strip():
        raise BadRequestError('the body must be a JSON object with "job_type"')
    if len(body.encode()) > MAX_INPUT_DATA_BYTES * 2:
        raise UnprocessableError(f"the body must be at most {MAX_INPUT_DATA_BYTES * 2} bytes")
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except ValueError:
        raise BadRequestError("the body must be JSON") from None
    allowed = {"job_type", "priority", "input_data"}
    if not isinstance(data, dict) or not set(data) <= allowed or "job_type" not in data:
        raise UnprocessableError(
            'the body must be an object with "job_type" and at most "priority" and "input_data"'
        )
    job_type = data["job_type"]
    if not isinstance(job_type, str) or job_type not in JobType:
        known = ", ".join(member.value for member in JobType)
        raise UnprocessableError(f"job_type must be one of {known}; got {str(job_type)[:80]!r}")
    priority = _priority(data.get("priority", 0))
    input_data = data.get("input_data")
    if input_data is not None:
        _check_input_data(input_data)
    return JobRequest(JobType(job_type), priority, input_data or None)


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
        raise UnprocessableError(
            f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_input_data(input_data: object) -> None:
    if not isinstance(input_data, dict):
        raise UnprocessableError("input_data must be an object")
    size = len(json.dumps(input_data, separators=(",", ":")).encode())
    if size > MAX_INPUT_DATA_BYTES:
        raise UnprocessableError(
            f"input_data must be at most {MAX_INPUT_DATA_BYTES} bytes as JSON; it is {size}"
        )
    reserved = sorted(LOCATION_FIELDS & set(input_data))
    if reserved:
        raise UnprocessableError(
            f"input_data may not set {', '.join(reserved)}: the file's location is the job's own"
        )

    _check_input_value(input_data, 1)


def _check_input_value(value: object, depth: int) -> None:
    """What DynamoDB would refuse in a stored map, refused up front as the caller's mistake (on
    AWS it would otherwise be a ValidationException, a 500): nesting, empty or non-text keys,
    non-text strings, numbers out of its range."""
    if depth > _MAX_INPUT_DEPTH:
        raise UnprocessableError(f"input_data nests deeper than {_MAX_INPUT_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not key or not _is_text(key):
                raise UnprocessableError("input_data keys must be non-empty Unicode text")
            _check_input_value(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_input_value(item, depth + 1)
    elif isinstance(value, str):
        if not _is_text(value):
            raise UnprocessableError("input_data strings must be Unicode text")
    elif isinstance(value, bool):
        return
    elif isinstance(value, int) and abs(value) >= INPUT_INTEGER_BOUND:
        raise UnprocessableError("input_data numbers must have at most 38 digits")
    elif (
        isinstance(value, float)
        and value
        and not INPUT_MIN_MAGNITUDE <= abs(value) < INPUT_MAX_MAGNITUDE
    ):
        raise UnprocessableError("input_data numbers must be 0 or from 1e-130 to 1e126 in size")


def _is_text(value: str) -> bool:
    """False for a string with a lone surrogate: JSON's \\ud800 escapes can carry one, and no
    UTF-8 (what DynamoDB stores) can."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _idempotency_key(value: str | None) -> str:
    """The caller's Idempotency-Key, or a fresh one: without a key every request is a new job."""
    if value is None:
        return str(uuid.uuid4())
    if not _IDEMPOTENCY_KEY.fullmatch(value):
        raise BadRequestError(
            "Idempotency-Key must be 1 to 128 visible ASCII characters (no spaces)"
        )
    return value


def _may_run(job_type: JobType, stored: StoredFile) -> None:
    """Refuse a job the file cannot have: a quarantined or deleted file, or a parsing job the
    scan gate would cancel. One still waiting for its scan is accepted (the gate holds it)."""
    if stored.status is not FileStatus.ACTIVE:
        raise ConflictError(
            f"file {stored.id} is {stored.status.value}: no job can be requested for it",
            log="job requested on an inactive file",
        )
    if scanning.gate(job_type, stored) is scanning.Gate.REFUSE:
        raise ConflictError(
            f"file {stored.id} cannot be parsed: {scanning.refusal_reason(stored)}",
            log="parsing job requested on a refused file",
        )


def _sign(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
