"""Publishes outcome events to the stack's EventBridge bus."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from filejobs.domain.outcome_events import SOURCE, OutcomeEvent

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient


class PublishError(RuntimeError):
    """EventBridge refused an entry; the stream record fails and is retried."""


class EventBridgePublisher:
    def __init__(self, client: EventBridgeClient, bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def publish(self, event: OutcomeEvent) -> None:
        response = self._client.put_events(
            Entries=[
                {
                    "EventBusName": self._bus,
                    "Source": SOURCE,
                    "DetailType": event.detail_type.value,
                    "Detail": json.dumps(event.detail, default=str),
                    "Time": event.time,
                }
            ]
        )
        # PutEvents succeeds as a call even when an entry is refused (throttled, too big).
        if response.get("FailedEntryCount", 0):
            (entry,) = response["Entries"]
            reason = f"{entry.get('ErrorCode')}: {entry.get('ErrorMessage')}"
            raise PublishError(f"event {event.event_id} refused by EventBridge ({reason})")
