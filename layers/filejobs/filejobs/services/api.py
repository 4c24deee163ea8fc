"""The status API's queries and commands, for one authenticated caller.

Every input is validated here before any database call (ids must be UUIDs, enums must name a
member). A tenant caller sees and changes only its own tenant's files and jobs: another
tenant's id answers "not found", exactly as an id that does not exist, so existence never leaks.
Cancel and retry are each one conditional write (`JobRepository.apply`).

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
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from filejobs.access import Caller
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import InvalidCursorError, JobPage, JobRepository, PageCursor
from filejobs.domain import transitions
from filejobs.domain.file import StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.outcome import Applied
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import utcnow
from filejobs.views import file_view, job_view

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 25
MAX_LIMIT = 100
_MAX_TOKEN_LENGTH = 2048
_MAX_KEY_LENGTH = 1024
_MAX_REASON_LENGTH = 500
_DEFAULT_CANCEL_REASON = "cancelled through the API"


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
    clock: Callable[[], datetime] = utcnow
    dispatch_policy: DispatchPolicy = field(default_factory=DispatchPolicy)

    # --- files --------------------------------------------------------------------------------

    def file(self, caller: Caller, file_id: str) -> dict[str, Any]:
        stored = self._visible_file(caller, file_id)
        return {**file_view(stored), "jobs": [job_view(j) for j in self._jobs_of(caller, stored)]}

    def file_by_key(self, caller: Caller, params: Mapping[str, str]) -> dict[str, Any]:
        key = params.get("key")
        if not key:
            raise BadRequestError("query parameter key is required")
        if len(key) > _MAX_KEY_LENGTH:
            raise BadRequestError(f"key must be at most {_MAX_KEY_LENGTH} characters")
        bucket = params.get("bucket") or self.uploads_bucket
        if not bucket:
            raise BadRequestError("query parameter bucket is required")
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
        return job_view(self._visible_job(caller, job_id))

    def list_jobs(self, caller: Caller, params: Mapping[str, str]) -> dict[str, Any]:
        status = _enum(JobStatus, "status", params.get("status"))
        job_type = _enum(JobType, "job_type", params.get("job_type"))
        limit = _limit(params.get("limit"))
        tenant = params.get("tenant") or None
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
        jobs = [j for j in page.jobs if caller.may_see(j.tenant)]
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
        return job_view(self._apply(job, transition))

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

    def _visible_file(self, caller: Caller, file_id: str) -> StoredFile:
        _require_uuid("file id", file_id)
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
        _require_uuid("job id", job_id)
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
            and _is_uuid(after[1])
        ):
            raise invalid
        return PageCursor(after[0], after[1])


def _visible(caller: Caller, stored: StoredFile) -> bool:
    return stored.metadata.deleted_at is None and caller.may_see(stored.tenant)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _require_uuid(what: str, value: str) -> None:
    if not _is_uuid(value):
        raise BadRequestError(f"{what} must be a UUID, got {value[:80]!r}")


def _enum[E: (JobStatus, JobType)](kind: type[E], name: str, value: str | None) -> E | None:
    if value is None or value == "":
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise BadRequestError(f"{name} must be one of {allowed}; got {value[:80]!r}") from None


def _limit(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise BadRequestError(f"limit must be an integer from 1 to {MAX_LIMIT}; got {value[:20]!r}")
    return int(value)


def _cancel_reason(body: str | None) -> str:
    """The optional body of a cancel: {"reason": "..."}."""
    if body is None or not body.strip():
        return _DEFAULT_CANCEL_REASON
    try:
        data = json.loads(body)
    except ValueError:
        raise BadRequestError("the body must be JSON") from None
    if not isinstance(data, dict) or set(data) - {"reason"}:
        raise UnprocessableError('the body must be an object with at most "reason"')
    reason = data.get("reason", _DEFAULT_CANCEL_REASON)
    if not isinstance(reason, str) or not reason.strip() or len(reason) > _MAX_REASON_LENGTH:
        raise UnprocessableError(
            f"reason must be a non-empty string of at most {_MAX_REASON_LENGTH} characters"
        )
    return reason


def _sign(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
