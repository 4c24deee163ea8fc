"""The operations queue on SQS: a bulk operation's next page, as a message naming it.

The message says only which operation to advance; where it stands is in OpsTable. So a message
delivered twice, or late, advances the operation from wherever it is (services/operations.py).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

from filejobs.domain.operations import is_operation_id

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SqsOperationQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client, self._url = client, queue_url

    def send(self, operation_id: str, delay: timedelta) -> None:
        self._client.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps({"operation_id": operation_id}),
            DelaySeconds=max(0, int(delay.total_seconds())),
        )


def operation_of(body: str) -> str | None:
    """The operation a message names; None for a body that names none."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    operation_id = parsed.get("operation_id") if isinstance(parsed, dict) else None
    return operation_id if isinstance(operation_id, str) and is_operation_id(operation_id) else None
