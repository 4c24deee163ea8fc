"""The fair ingest queue: S3's upload notifications, each in its tenant's group.

S3 cannot give a notification a `MessageGroupId`, so the queue it notifies serves every tenant's
uploads in the order they came: one tenant's burst of uploads holds back every other tenant's
ingest. The ingest router re-sends each notification, its body unchanged, with its tenant as
the group, which makes the queue the ingest reads an SQS fair queue, as the job queues are
(adapters/sqs.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from filejobs.adapters.sqs import MAX_BATCH_ENTRIES
from filejobs.ports import Notification

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

# SendMessageBatch also takes at most 256 KiB of bodies in all (a queue's default largest
# message, so any one message fits alone).
MAX_BATCH_BYTES = 256 * 1024


class SqsIngestQueue:
    def __init__(self, client: SQSClient, url: str) -> None:
        self._client = client
        self._url = url

    def send_all(self, notifications: Sequence[Notification]) -> list[str]:
        """Sends every notification in as few batches as the limits allow; returns the message
        ids of those SQS refused, for the caller to have redelivered."""
        refused: list[str] = []
        for batch in batches(notifications):
            entries = [_entry(str(number), n) for number, n in enumerate(batch)]
            response = self._client.send_message_batch(QueueUrl=self._url, Entries=entries)
            refused.extend(batch[int(f["Id"])].message_id for f in response.get("Failed", []))
        return refused


def batches(notifications: Sequence[Notification]) -> Iterator[list[Notification]]:
    """The notifications in order, cut into batches SendMessageBatch accepts."""
    batch: list[Notification] = []
    size = 0
    for notification in notifications:
        full = len(batch) == MAX_BATCH_ENTRIES
        if batch and (full or size + notification.size > MAX_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(notification)
        size += notification.size
    if batch:
        yield batch


def _entry(entry_id: str, notification: Notification) -> SendMessageBatchRequestEntryTypeDef:
    entry: SendMessageBatchRequestEntryTypeDef = {"Id": entry_id, "MessageBody": notification.body}
    if notification.tenant is not None:
        entry["MessageGroupId"] = notification.tenant
    return entry
