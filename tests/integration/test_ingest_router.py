"""The ingest router (functions/ingest_router): S3's notifications re-sent to the fair ingest
queue in their tenants' groups, so that a quiet tenant's upload is not ingested after a noisy
tenant's whole burst. On moto resources built from template.yaml, with the local stack's fair
queue emulation (tests/conftest.py applies it to the in-process moto)."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import unquote_plus

import pytest

from filejobs import runtime
from filejobs.adapters.ingest_queue import (
    MAX_BATCH_BYTES,
    SqsIngestQueue,
    batches,
)
from filejobs.data.file_repository import FileRepository
from filejobs.ports import Notification
from functions.ingest import app as ingest
from functions.ingest_router import app as ingest_router
from tests.integration import test_handlers as handlers
from tests.integration.test_handlers import Stack, invoke, receive, sqs_record

stack = handlers.stack


@pytest.fixture
def routed(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The stack, with the router's environment (its queue), and S3's test event routed away."""
    monkeypatch.setenv("FAIR_INGEST_QUEUE_URL", stack.queue("FairIngestQueue"))
    runtime.reset()
    assert invoke(ingest_router.handler, receive(stack, "IngestQueue")) == []
    assert invoke(ingest.handler, receive(stack, "FairIngestQueue")) == []
    return stack


def upload(stack: Stack, tenant: str, name: str) -> str:
    key = f"uploads/{tenant}/{name}"
    stack.s3.put_object(Bucket=stack.uploads, Key=key, Body=f"{key} {uuid.uuid4()}".encode())
    return key


def group_of(record: dict[str, Any]) -> str | None:
    group: str | None = record["attributes"].get("MessageGroupId")
    return group


def keys_in(record: dict[str, Any]) -> list[str]:
    """The keys a notification names (S3 sends them URL-encoded)."""
    notification = json.loads(record["body"])
    return [unquote_plus(r["s3"]["object"]["key"]) for r in notification.get("Records", [])]


def test_each_notification_goes_on_unchanged_in_its_tenants_group(routed: Stack) -> None:
    # given uploads of two tenants
    upload(routed, "acme", "a.txt")
    upload(routed, "globex", "report 2026.txt")
    notifications = receive(routed, "IngestQueue")
    # when the router handles S3's messages
    assert invoke(ingest_router.handler, notifications) == []
    # then each is on the fair ingest queue, byte for byte, named by its tenant
    forwarded = receive(routed, "FairIngestQueue")
    assert sorted(r["body"] for r in forwarded) == sorted(r["body"] for r in notifications)
    assert {group_of(r): keys_in(r) for r in forwarded} == {
        "acme": ["uploads/acme/a.txt"],
        "globex": ["uploads/globex/report 2026.txt"],
    }
    # and the ingest records them as ever
    assert invoke(ingest.handler, forwarded) == []
    for key in ("uploads/acme/a.txt", "uploads/globex/report 2026.txt"):
        assert FileRepository().versions_of(routed.uploads, key)


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        json.dumps({"Records": "not a list"}),
        json.dumps({"Event": "s3:TestEvent"}),
        json.dumps({"Records": [{"s3": {"object": {"key": "elsewhere/acme/x"}}}]}),
        "\u00e9\u6f22\U0001f600" * 100,
    ],
    ids=["not-json", "records-not-a-list", "test-event", "incomplete-record", "unicode"],
)
def test_a_message_the_ingest_will_refuse_goes_on_without_a_group(routed: Stack, body: str) -> None:
    # given a message in S3's queue that names no tenant
    routed.sqs.send_message(QueueUrl=routed.queue("IngestQueue"), MessageBody=body)
    # when the router handles it, then it is not lost: it goes on as it came, a tenant of its own
    assert invoke(ingest_router.handler, receive(routed, "IngestQueue")) == []
    [forwarded] = receive(routed, "FairIngestQueue")
    assert forwarded["body"] == body
    assert group_of(forwarded) is None


def test_a_notification_naming_two_tenants_goes_on_without_a_group(routed: Stack) -> None:
    upload(routed, "acme", "a.txt")
    upload(routed, "globex", "b.txt")
    records = [json.loads(r["body"])["Records"][0] for r in receive(routed, "IngestQueue")]
    routed.sqs.send_message(
        QueueUrl=routed.queue("IngestQueue"), MessageBody=json.dumps({"Records": records})
    )
    assert invoke(ingest_router.handler, receive(routed, "IngestQueue")) == []
    [forwarded] = receive(routed, "FairIngestQueue")
    assert group_of(forwarded) is None


def test_a_quiet_tenants_upload_is_ingested_before_a_noisy_tenants_backlog(
    routed: Stack,
) -> None:
    # given a noisy tenant's 40 uploads, routed, and the ingest's first batch of them done
    noisy = [upload(routed, "noisy", f"burst-{n:02d}.txt") for n in range(40)]
    assert invoke(ingest_router.handler, receive(routed, "IngestQueue")) == []
    first = receive_batch(routed, "FairIngestQueue")
    assert invoke(ingest.handler, first) == []
    delete(routed, "FairIngestQueue", first)
    # when a quiet tenant uploads a file
    quiet = upload(routed, "quiet", "one.txt")
    assert invoke(ingest_router.handler, receive(routed, "IngestQueue")) == []
    # then the ingest's next batch starts with it, not after the other 30
    batch = receive_batch(routed, "FairIngestQueue")
    assert keys_in(batch[0]) == [quiet]
    assert all(keys_in(r)[0] in noisy for r in batch[1:])


def receive_batch(stack: Stack, logical_id: str) -> list[dict[str, Any]]:
    """One receive of up to 10 messages, as Lambda's poller hands them to an invocation."""
    url = stack.queue(logical_id)
    arn = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    got = stack.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )["Messages"]
    return [sqs_record(message, arn["Attributes"]["QueueArn"]) for message in got]


def delete(stack: Stack, logical_id: str, records: list[dict[str, Any]]) -> None:
    """What the poller does after an invocation that reported no failure."""
    for record in records:
        stack.sqs.delete_message(
            QueueUrl=stack.queue(logical_id), ReceiptHandle=record["receiptHandle"]
        )


# --- the queue's adapter ----------------------------------------------------------------------


class RefusingSqs:
    """An SQS client that takes every entry but those whose body is `refuse`."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        self.batches.append(Entries)
        failed = [
            {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"}
            for e in Entries
            if e["MessageBody"] == "refuse"
        ]
        return {"Successful": [], "Failed": failed}


def test_the_messages_sqs_refuses_are_the_ones_reported_for_redelivery() -> None:
    client = RefusingSqs()
    notes = [Notification(f"m{n}", "refuse" if n in (3, 11) else "ok", "acme") for n in range(12)]
    refused = SqsIngestQueue(client, "url").send_all(notes)  # type: ignore[arg-type]
    assert refused == ["m3", "m11"]
    assert [len(b) for b in client.batches] == [10, 2]
    assert all(e["MessageGroupId"] == "acme" for b in client.batches for e in b)


def test_a_batch_is_cut_before_its_bodies_pass_sqs_limit() -> None:
    big = "x" * (MAX_BATCH_BYTES // 3)
    notes = [Notification(f"m{n}", big, None) for n in range(5)]
    assert [len(b) for b in batches(notes)] == [3, 2]
    # a body of one multi-byte character counts its bytes, not its characters
    wide = "\u6f22" * (MAX_BATCH_BYTES // 6)  # 3 bytes each: half the limit
    assert [len(b) for b in batches([Notification("a", wide, None)] * 3)] == [2, 1]
