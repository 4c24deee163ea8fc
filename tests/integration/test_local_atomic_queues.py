"""The upload issue 46 lost (filejobs_dev/local/moto_fixes.py, "A queue's messages change one
request at a time"): an S3 notification sent to a queue while a consumer's delete of another
message was rebuilding the queue's list of messages vanished, and no error said so.

The scenario stops the delete at the instant the race needs (after it has copied the queue's
messages, before it puts the copy in place) and uploads an object then, so the loss happens on
every run, not once in a few hundred uploads. The same fix keeps two receives at once from
both handing out one message: that scenario stops a receive as it takes the message. Each run
is a process of its own (tests/fresh_process.py): the fixes patch moto for the whole process.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import boto3
from moto import mock_aws

from tests.fresh_process import in_fresh_process

# How long the stopped delete waits for the upload's notification to land: with the fix, the
# upload waits for the delete instead, so this is the time the fixed run spends waiting.
LANDING_SECONDS = 0.5


def _moto_sqs_line(function: str, text: str) -> tuple[str, int]:
    """moto's SQS models file, and the number of the first line holding `text` in the method
    whose `def` line starts with `function`."""
    from moto.sqs import models  # noqa: PLC0415

    with open(models.__file__, encoding="utf-8") as source:
        lines = source.read().splitlines()
    start = next(n for n, line in enumerate(lines) if line.strip().startswith(function))
    offset = next(n for n, line in enumerate(lines[start:]) if text in line)
    return models.__file__, start + offset + 1


@contextmanager
def stopping_at(
    place: tuple[str, int], meanwhile: threading.Thread, done: threading.Event
) -> Iterator[None]:
    """While inside, this thread stops the first time it reaches `place` (file, line), starts
    `meanwhile`, and waits up to LANDING_SECONDS for it to set `done` before going on."""
    filename, line = place
    reached = threading.Event()

    def at_the_line(frame: FrameType, event: str, _: Any) -> Any:
        if event == "line" and frame.f_lineno == line and not reached.is_set():
            reached.set()
            meanwhile.start()
            done.wait(LANDING_SECONDS)
        return at_the_line

    def tracer(frame: FrameType, event: str, _: Any) -> Any:
        return at_the_line if event == "call" and frame.f_code.co_filename == filename else None

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(None)
    assert reached.is_set(), f"moto never reached line {line} of {filename}"
    meanwhile.join()


def upload_during_a_delete(*, fixed: bool = True) -> dict[str, Any]:
    """A bucket notifying a queue; one notification received; its delete stopped just before it
    replaces the queue's messages, while another object is uploaded. The keys the queue then
    holds."""
    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="ingest")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        s3.create_bucket(Bucket="uploads")
        s3.put_bucket_notification_configuration(
            Bucket="uploads",
            NotificationConfiguration={
                "QueueConfigurations": [
                    {"QueueArn": arn["Attributes"]["QueueArn"], "Events": ["s3:ObjectCreated:*"]}
                ]
            },
        )
        sqs.purge_queue(QueueUrl=queue)  # the s3:TestEvent
        s3.put_object(Bucket="uploads", Key="uploads/acme/first.txt", Body=b"1")
        (first,) = sqs.receive_message(QueueUrl=queue)["Messages"]

        landed = threading.Event()

        def upload_second() -> None:
            s3.put_object(Bucket="uploads", Key="uploads/acme/second.txt", Body=b"2")
            landed.set()

        replacing = _moto_sqs_line("def delete_message(self, receipt_handle", "self._messages =")
        with stopping_at(replacing, threading.Thread(target=upload_second), landed):
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=first["ReceiptHandle"])
        held = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        keys = [r["s3"]["object"]["key"] for m in held for r in json.loads(m["Body"])["Records"]]
        return {"uploader_ran": landed.is_set(), "keys": keys}


def two_receives_at_once(*, fixed: bool = True) -> list[list[str]]:
    """One message in a queue; a receive stopped as it takes the message, while another
    receive runs. The bodies each receive handed out."""
    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="the one job")
        other: list[str] = []
        done = threading.Event()

        def receive_too() -> None:
            got = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=30).get("Messages", [])
            other.extend(m["Body"] for m in got)
            done.set()

        taking = _moto_sqs_line("def receive_message(", "queue.pending_messages.add(message)")
        with stopping_at(taking, threading.Thread(target=receive_too), done):
            got = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=30).get("Messages", [])
        return [[m["Body"] for m in got], other]


def test_an_upload_notified_while_another_notification_is_deleted_reaches_the_queue() -> None:
    # given an upload whose notification is sent at the instant a consumer's delete of another
    # notification replaces the queue's messages
    result = in_fresh_process(upload_during_a_delete)
    # then the queue holds its notification
    assert result["uploader_ran"]
    assert result["keys"] == ["uploads%2Facme%2Fsecond.txt"]


def test_moto_as_released_loses_the_notification_sent_during_a_delete() -> None:
    # the loss issue 46 saw (this fails once moto locks its deletes: drop the fix then)
    result = in_fresh_process(upload_during_a_delete, fixed=False)
    assert result["uploader_ran"]
    assert result["keys"] == []


def test_a_message_is_handed_to_one_of_two_receives_at_once() -> None:
    # given a receive stopped as it takes the queue's one message, and another receive then
    first, second = in_fresh_process(two_receives_at_once)
    # then one of them has it, within its visibility timeout
    assert first == ["the one job"]
    assert second == []


def test_moto_as_released_hands_one_message_to_two_receives_at_once() -> None:
    # the gap the fix closes: both receives take the message
    assert in_fresh_process(two_receives_at_once, fixed=False) == [["the one job"]] * 2
