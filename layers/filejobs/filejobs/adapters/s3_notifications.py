"""S3 event notifications, as they arrive in the ingest queue's message bodies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event

from filejobs.domain.file_lifecycle import ObjectRemoved, RemovalKind
from filejobs.domain.ingest import BACKFILL_EVENT_SOURCE, ObjectCreated, tenant_of_notification
from filejobs.domain.messages import MalformedMessageError, json_object


def object_created_records(body: str) -> list[ObjectCreated]:
    """The ObjectCreated records of one S3 notification; [] for a test event or other kinds.

    Raises MalformedMessageError for anything that is not an S3 notification.
    """
    return _records(body, _is_created, _object_created)


def object_removed_records(body: str) -> list[ObjectRemoved]:
    """The ObjectRemoved records of one S3 notification; [] for a test event or other kinds.

    Raises MalformedMessageError for anything that is not an S3 notification.
    """
    return _records(body, _is_removed, _object_removed)


def _records[R](body: str, wanted: Callable[[str], bool], read: Callable[[Any], R]) -> list[R]:
    """The records of one notification whose event name is `wanted`, each `read`."""
    data = json_object(body, "S3 notification")
    if data.get("Event") == "s3:TestEvent":
        return []  # sent once when the notification is configured
    if not isinstance(data.get("Records"), list):
        raise MalformedMessageError("S3 notification has no Records list")
    try:
        return [read(r) for r in S3Event(data).records if wanted(r.event_name)]
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedMessageError(f"S3 record is incomplete: {error!r}") from None


def _is_removed(event_name: str) -> bool:
    return event_name in {kind.value for kind in RemovalKind}


def _object_removed(record: Any) -> ObjectRemoved:
    s3_object = record.s3.get_object
    return ObjectRemoved(
        bucket=record.s3.bucket.name,
        key=unquote_plus(s3_object.key),
        kind=RemovalKind(record.event_name),
        version_id=s3_object.get("versionId"),
        sequencer=s3_object.get("sequencer"),
    )


def _is_created(event_name: str) -> bool:
    return event_name.startswith("ObjectCreated:")


def _object_created(record: Any) -> ObjectCreated:
    s3_object = record.s3.get_object
    return ObjectCreated(
        bucket=record.s3.bucket.name,
        # Keys arrive URL-encoded (space as '+'); Powertools decodes only S3Event.object_key.
        key=unquote_plus(s3_object.key),
        size=s3_object.size,
        etag=s3_object.etag,
        version_id=s3_object.version_id,
        sequencer=s3_object.get("sequencer"),
        backfill=record.get("eventSource") == BACKFILL_EVENT_SOURCE,
    )


def tenant_of_body(body: str) -> str | None:
    """The tenant a notification's message is for (its group on the fair ingest queue); None for
    anything the ingest will refuse or acknowledge unread (it is a tenant of its own there)."""
    try:
        return tenant_of_notification(object_created_records(body))
    except MalformedMessageError:
        return None
