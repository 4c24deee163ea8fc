"""The message a job queue carries: just enough to claim the job, nothing to trust blindly.

Everything else (the object's location, the attempt number) comes back from the claim, so a
forged or stale message can at worst make a worker try a claim that the database refuses.
The file id rides along for the logs only: every line about a job names its file, even a line
written before (or instead of) the claim. The tenant rides along for the tenant's cap
(domain/fairness.py): a worker takes one of the tenant's slots before the claim, and the claim
then checks the message's tenant against the job's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.keys import is_tenant

# Jobs at or above this priority travel in their type's high-priority lane: they start before
# a backlog of normal jobs queued earlier.
HIGH_PRIORITY = 1
# Jobs below this priority (rescans, backfills) travel in their type's low lane, which its worker
# polls at a small concurrency of its own (the template's LowLaneMaximumConcurrency): a backlog
# there, however long, never holds up a new upload's jobs, which the normal lane takes.
LOW_PRIORITY_BELOW = 0
# SQS holds a message back for at most 15 minutes; a later retry waits for the sweep.
MAX_MESSAGE_DELAY = timedelta(minutes=15)


class Lane(StrEnum):
    NORMAL = "normal"
    HIGH = "high"
    LOW = "low"


class MalformedMessageError(ValueError):
    """A queue message that is not a job message; it fails alone and ends in the DLQ."""


@dataclass(frozen=True)
class JobMessage:
    job_id: str
    job_type: JobType
    # For logging only: the claim returns the job as stored, file id included. None in messages
    # sent before the field existed; they still parse.
    file_id: str | None = None
    # Whose job it is, for the tenant's cap. None in messages sent before the field existed.
    tenant: str | None = None

    @classmethod
    def for_job(cls, job: ProcessingJob) -> JobMessage:
        return cls(job.id, job.job_type, job.file_id, job.tenant)

    def to_json(self) -> str:
        body = {"job_id": self.job_id, "job_type": self.job_type.value}
        if self.file_id is not None:
            body["file_id"] = self.file_id
        if self.tenant is not None:
            body["tenant"] = self.tenant
        return json.dumps(body)

    @classmethod
    def parse(cls, body: str) -> JobMessage:
        data = json_object(body, "job message")
        job_id, job_type, file_id = data.get("job_id"), data.get("job_type"), data.get("file_id")
        if not isinstance(job_id, str) or not is_uuid(job_id):
            raise MalformedMessageError(f"job_id must be a UUID, got {job_id!r}")
        # isinstance first: a list or an object is not hashable, and `in` a set raised TypeError,
        # which the sweep's dead-letter review counted as an error on every run instead of
        # setting the letter aside as unreadable.
        if not isinstance(job_type, str) or job_type not in {t.value for t in JobType}:
            raise MalformedMessageError(f"unknown job_type {job_type!r}")
        # Logged as given, so held to the same shape as the job id.
        if file_id is not None and (not isinstance(file_id, str) or not is_uuid(file_id)):
            raise MalformedMessageError(f"file_id must be a UUID when given, got {file_id!r}")
        tenant = data.get("tenant")
        if tenant is not None and (not isinstance(tenant, str) or not is_tenant(tenant)):
            raise MalformedMessageError(f"tenant must be a tenant id when given, got {tenant!r}")
        return cls(job_id, JobType(job_type), file_id, tenant)


def json_object(body: str, what: str) -> dict[str, Any]:
    """A message body that must be a JSON object, or a MalformedMessageError naming `what`."""
    try:
        data: Any = json.loads(body)
    except (TypeError, ValueError) as error:
        raise MalformedMessageError(f"{what} is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise MalformedMessageError(f"{what} must be a JSON object")
    return data


def lane_of(job: ProcessingJob) -> Lane:
    """The queue lane a job's messages travel in, from its priority alone: every send of the
    job (its first, a retry's, a deferral's, the sweep's) goes to the same lane."""
    return lane_for_priority(job.priority)


def lane_for_priority(priority: int) -> Lane:
    """Higher priority is more important (the spec): operators' raised jobs go first, new work
    next, and negative priorities (rescans, backfills) wait in a lane of their own."""
    if priority >= HIGH_PRIORITY:
        return Lane.HIGH
    if priority < LOW_PRIORITY_BELOW:
        return Lane.LOW
    return Lane.NORMAL


# The hyphenated 8-4-4-4-12 form only, in either case: `uuid.UUID` also takes braces, a urn:
# prefix and bare hex, which name no stored id (ids are written as `str(uuid4())`).
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_UUID = re.compile(UUID_PATTERN)


def is_uuid(text: str) -> bool:
    """Whether `text` is a UUID in its hyphenated form (job, file and event ids all are)."""
    return _UUID.fullmatch(text) is not None
