"""Count AWS requests with botocore's event hooks, the way a cost model needs them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from filejobs.data.models import FileModel, JobModel


class RequestCounter:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __call__(self, model: Any, **_: Any) -> None:
        self.calls[f"{model.service_model.service_name}:{model.name}"] += 1

    def count(self, service: str, operations: set[str] | None = None) -> int:
        return sum(
            n
            for call, n in self.calls.items()
            if call.startswith(f"{service}:")
            and (operations is None or call.split(":", 1)[1] in operations)
        )


DYNAMODB_READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}


@contextmanager
def counting_requests(*clients: Any) -> Iterator[RequestCounter]:
    """Count every request the models' DynamoDB clients (and `clients`) send in the block."""
    counter = RequestCounter()
    targets = [JobModel._get_connection().connection.client]
    targets.append(FileModel._get_connection().connection.client)
    targets.extend(clients)
    unique = {id(c): c for c in targets}.values()
    for client in unique:
        client.meta.events.register("before-call.*.*", counter)
    try:
        yield counter
    finally:
        for client in unique:
            client.meta.events.unregister("before-call.*.*", counter)
