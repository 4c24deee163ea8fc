"""The chaos run's "dropped notification" fault (filejobs_dev/local/faults.py, kind `drop`): the
share of a function's messages its rule picks is lost unread, and each loss is logged with the
keys its S3 notification named, for the audit to count what the reconciler must make up for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.faults import FAULT_LOG_VARIABLE, dropped_messages, parse_faults


def notification(number: int) -> dict[str, Any]:
    body = {"Records": [{"s3": {"object": {"key": f"uploads%2Facme%2Fn+{number}.txt"}}}]}
    return {"MessageId": f"m{number}", "Body": json.dumps(body), "ReceiptHandle": f"r{number}"}


def test_a_drop_rule_loses_its_share_of_its_functions_messages_and_logs_their_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "faults.log"
    monkeypatch.setenv(FAULT_LOG_VARIABLE, str(log))
    rules = parse_faults(
        '[{"kind": "drop", "function": "IngestRouterFunction", "probability": 0.1, "seed": 7}]'
    )
    received = [notification(n) for n in range(1000)]
    # the router loses about a tenth of what it receives, the same ones whoever draws
    lost = dropped_messages(rules, "IngestRouterFunction", received)
    assert 60 <= len(lost) <= 140
    assert dropped_messages(rules, "IngestRouterFunction", received) == lost
    # another function loses nothing
    assert dropped_messages(rules, "IngestFunction", received) == set()
    # and each loss is logged with the key its notification named, decoded
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    first = next(line for line in lines if line["message"] == min(lost, key=lambda m: int(m[1:])))
    assert first["kind"] == "drop"
    assert first["keys"] == [f"uploads/acme/n {first['message'][1:]}.txt"]


def test_a_message_that_is_no_s3_notification_is_dropped_with_no_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "faults.log"
    monkeypatch.setenv(FAULT_LOG_VARIABLE, str(log))
    rules = parse_faults('[{"kind": "drop", "function": "IngestRouterFunction"}]')
    message = {"MessageId": "t", "Body": '{"Event": "s3:TestEvent"}', "ReceiptHandle": "r"}
    assert dropped_messages(rules, "IngestRouterFunction", [message]) == {"t"}
    assert json.loads(log.read_text())["keys"] == []
