"""Specification: on the local stack, injected faults are recovered from as the design promises.

One stack, started with `--faults` (filejobs_dev/local/faults.py) and short visibility timeouts so a
failed record comes back, and reaches its dead-letter queue, within the test. Each test uploads a
file whose name selects its fault and watches the outcome through the HTTP API only.
"""

from __future__ import annotations

import io
import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from tests.localstack import RunningStack, running_stack

FAULTS = [
    {
        "kind": "transient",
        "job_type": "thumbnail_generation",
        "key_contains": "flaky",
        "attempts": 2,
    },
    {"kind": "slow", "job_type": "compression", "key_contains": "slow", "seconds": 120},
    {"kind": "poison", "job_type": "deduplication_check", "key_contains": "poison"},
    {"kind": "duplicate", "function": "IngestFunction"},
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("faulty")
    faults = root / "faults.json"
    faults.write_text(json.dumps(FAULTS))
    options = ("--faults", str(faults), "--visibility-seconds", "2")
    with running_stack(root, *options) as running:
        yield running


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), (90, 160, 40)).save(buffer, "PNG")
    return buffer.getvalue()


def upload(stack: RunningStack, name: str, body: bytes) -> str:
    key = f"uploads/acme/{name}"
    stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=body)
    return key


def job_of(stored: dict[str, Any], job_type: str) -> dict[str, Any]:
    return next(job for job in stored["jobs"] if job["job_type"] == job_type)


def wait_for_job(
    stack: RunningStack, key: str, job_type: str, status: str, seconds: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    bucket = stack.config["uploads_bucket"]
    while time.monotonic() < deadline:
        code, found = stack.api(f"/files?key={key}&bucket={bucket}")
        if code == 200:
            _, stored = stack.api(f"/files/{found['files'][0]['id']}")
            jobs = [j for j in stored["jobs"] if j["job_type"] == job_type]
            if jobs and jobs[0]["status"] == status:
                return dict(jobs[0])
        time.sleep(0.3)
    raise AssertionError(f"{key}: no {job_type} job {status} within {seconds} s")


def post(stack: RunningStack, path: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        stack.config["api_url"] + path,
        data=b"{}",
        method="POST",
        headers={
            "Authorization": f"Bearer {stack.config['api_token']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


def test_duplicate_s3_notifications_create_no_duplicate_files_or_jobs(stack: RunningStack) -> None:
    # given every notification the ingest function receives is delivered twice
    key = upload(stack, "twice.png", png())
    # when the upload is processed
    stored = stack.settled(key)
    # then there is one file for the object and one job per type
    bucket = stack.config["uploads_bucket"]
    _, found = stack.api(f"/files?key={key}&bucket={bucket}")
    assert [f["id"] for f in found["files"]] == [stored["id"]]
    types = [job["job_type"] for job in stored["jobs"]]
    assert (
        sorted(types)
        == sorted(set(types))
        == [
            "deduplication_check",
            "thumbnail_generation",
            "virus_scan",
        ]
    )
    assert all(job["status"] == "completed" for job in stored["jobs"])


def test_a_transient_failure_is_retried_with_backoff_and_then_succeeds(stack: RunningStack) -> None:
    # given the thumbnail's first two attempts fail with a transient error
    key = upload(stack, "flaky.png", png())
    # when the file is processed
    stored = stack.settled(key, seconds=90)
    thumbnail = job_of(stored, "thumbnail_generation")
    # then the third attempt completed, and the history keeps the two retried failures with
    # their reason
    assert thumbnail["status"] == "completed"
    assert thumbnail["retry_count"] == 2
    outcomes = [(a["number"], a["outcome"]) for a in thumbnail["attempts"]]
    assert outcomes == [(1, "retrying"), (2, "retrying"), (3, "completed")]
    assert all(
        "injected transient failure" in (a["error"] or "") for a in thumbnail["attempts"][:2]
    )
    # and the retries waited (backoff) rather than running back to back
    first_end = thumbnail["attempts"][0]["ended_at"]
    last_start = thumbnail["attempts"][2]["started_at"]
    assert last_start > first_end


def test_a_cancel_during_processing_sticks(stack: RunningStack) -> None:
    # given a compression job that takes two minutes
    key = upload(stack, "slow.txt", b"compress me, slowly\n" * 2000)
    running = wait_for_job(stack, key, "compression", "running")
    # when the user cancels it while it runs
    code, _ = post(stack, f"/jobs/{running['id']}/cancel")
    assert code == 200
    # then the worker stops, and the job stays cancelled (no late completion overwrites it)
    cancelled = wait_for_job(stack, key, "compression", "cancelled", seconds=30)
    time.sleep(3)
    _, again = stack.api(f"/jobs/{running['id']}")
    assert again["status"] == "cancelled"
    assert again["result"] is None
    assert cancelled["cancelled_by"]
    # and nothing was written for it
    outputs = stack.client("s3").list_objects_v2(
        Bucket=stack.config["outputs_bucket"],
        Prefix=f"derived/acme/{running['file_id']}/compression/",
    )
    assert outputs.get("KeyCount", 0) == 0


def test_a_poison_message_ends_in_the_dlq_and_the_sweep_fails_its_job_with_a_reason(
    stack: RunningStack,
) -> None:
    # given the dedup worker can never read this file's job message
    key = upload(stack, "poison.png", png())
    # when the queue gives up on it (maxReceiveCount) and the sweep reviews the dead letters
    failed = wait_for_job(stack, key, "deduplication_check", "failed", seconds=90)
    # then the job failed, saying what happened to its message
    assert "moved to the dead-letter queue" in failed["error_message"]
    # and every letter was settled: the job carries the outcome. (The stack delivers each
    # upload's notification twice, and the ingest's second delivery sends the pending job's
    # message again: that copy is poisoned too, and its letter may land after the first one
    # failed the job; the next review settles it.)
    dead_letters = stack.config["resources"]["refs"]["DeduplicationCheckDeadLetterQueue"]
    assert letters_waiting(stack, dead_letters, until_none_within=30) == "0"
    # and the file's other jobs were not held up
    stored = stack.settled(key)
    assert job_of(stored, "thumbnail_generation")["status"] == "completed"


def letters_waiting(stack: RunningStack, queue_url: str, *, until_none_within: float) -> str:
    """The queue's ApproximateNumberOfMessages, read until it is "0" or the time is up."""
    deadline = time.monotonic() + until_none_within
    while True:
        count = stack.client("sqs").get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
        if count == "0" or time.monotonic() > deadline:
            return str(count)
        time.sleep(0.5)


def test_a_queue_reports_the_visibility_timeout_its_receives_use(stack: RunningStack) -> None:
    # given a stack started with --visibility-seconds 2: the sweep reads a queue's own attribute
    # to judge how far back a message in flight may hide, so the queue must report what it does
    sqs = stack.client("sqs")
    for logical_id, attributes in stack.config["resources"]["attributes"].items():
        if "QueueUrl" not in attributes:
            continue
        reported = sqs.get_queue_attributes(
            QueueUrl=attributes["QueueUrl"], AttributeNames=["VisibilityTimeout"]
        )["Attributes"]["VisibilityTimeout"]
        assert reported == "2", logical_id
