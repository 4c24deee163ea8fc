"""The local stack's DynamoDB throttling bursts, against moto server: AWS's error, AWS's retries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.endpoint import Endpoint
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from filejobs_dev.local.faults import parse_faults, throttle_dynamodb
from filejobs_dev.local.stack import free_port

ENDPOINT: Any = Endpoint  # its private _send: not in the stubs
BURST = parse_faults('[{"kind": "throttle", "every": 20, "seconds": 2}]')


@pytest.fixture
def endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def client(service: str, endpoint: str, attempts: int) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
    )


def test_a_request_in_a_burst_fails_as_aws_throttling_and_one_outside_is_sent(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ENDPOINT, "_send", ENDPOINT._send)  # put back after the test
    monkeypatch.setenv("FILEJOBS_LOCAL_FAULT_LOG", str(tmp_path / "faults.log"))
    now = [1000.5]  # within the burst of 1000..1002
    throttle_dynamodb(BURST, "TestFunction", clock=lambda: now[0], rand=lambda: 0.0)
    dynamodb, sqs = client("dynamodb", endpoint, 1), client("sqs", endpoint, 1)
    # when a DynamoDB request is made during a burst, with no retries left to botocore
    with pytest.raises(ClientError) as refused:
        dynamodb.list_tables()
    # then it fails with the error AWS gives, which the code classifies as transient
    assert refused.value.response["Error"]["Code"] == "ThrottlingException"
    # and the injection is in the fault log, naming the function and the operation
    line = json.loads((tmp_path / "faults.log").read_text())
    assert (line["kind"], line["function"], line["operation"]) == (
        "throttle",
        "TestFunction",
        "ListTables",
    )
    # and other services are never throttled
    assert sqs.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
    # when the burst is over, then the same request is sent and answered
    now[0] = 1003.0
    assert dynamodb.list_tables()["TableNames"] == []


def test_botocore_retries_a_throttled_request_until_the_burst_ends(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ENDPOINT, "_send", ENDPOINT._send)
    calls = []

    def clock() -> float:  # the burst ends after the second try
        calls.append(1)
        return 1000.5 if len(calls) <= 2 else 1010.0

    throttle_dynamodb(BURST, "TestFunction", clock=clock, rand=lambda: 0.0)
    # given botocore's standard retries (3 attempts), when a request meets a short burst
    answer = client("dynamodb", endpoint, 3).list_tables()
    # then the SDK's own backoff rides it out: the caller sees the answer
    assert answer["TableNames"] == []
    assert answer["ResponseMetadata"]["RetryAttempts"] == 2
