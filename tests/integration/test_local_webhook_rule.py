"""The local stack creates the template's EventBridge rules with their targets, so a tenant's
event on the stack's bus reaches the webhooks queue as on AWS (and nothing else does)."""

from __future__ import annotations

import json
from typing import Any, cast

import boto3

from filejobs_dev.infra.template import load_template
from filejobs_dev.local.resources import provision
from tests.fresh_process import in_fresh_process


def test_the_webhooks_rule_forwards_the_tenants_events_to_the_webhooks_queue(aws: None) -> None:
    no_endpoint = cast("str", None)  # moto's, in this process
    resources = provision(boto3.Session(region_name="us-east-1"), no_endpoint, load_template(), "t")
    queue = resources.refs["WebhooksQueue"]
    assert resources.attributes["WebhookEventsRule"]["Arn"].endswith("/t-WebhookEventsRule")
    events, sqs = boto3.client("events"), boto3.client("sqs")
    entries: Any = [
        {
            "EventBusName": resources.refs["JobEventsBus"],
            "Source": "filejobs",
            "DetailType": detail_type,
            "Detail": json.dumps({"tenant": "acme", "event_id": detail_type}),
        }
        for detail_type in ("Job Completed", "File Processed", "Webhook Disabled")
    ]
    assert events.put_events(Entries=entries)["FailedEntryCount"] == 0
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    forwarded = sorted(json.loads(m["Body"])["detail-type"] for m in got)
    assert forwarded == ["File Processed", "Job Completed"]


def rule_forwarded_on_the_served_emulator() -> list[str]:
    """The detail-types the webhooks queue got from the bus, on moto server as the local stack
    runs it (its fixes and speed-ups applied), the rule and queue provisioned from the template."""
    from filejobs_dev.local import moto_fixes  # noqa: PLC0415
    from tests.integration.test_local_moto_fixes import _served  # noqa: PLC0415

    moto_fixes.apply()
    with _served() as client:

        class Session:
            region_name = "us-east-1"

            def client(self, service: str, endpoint_url: str | None = None) -> Any:
                return client(service)

        session = cast("Any", Session())
        resources = provision(session, "unused", load_template(), "t")
        entries: Any = [
            {
                "EventBusName": resources.refs["JobEventsBus"],
                "Source": "filejobs",
                "DetailType": detail_type,
                "Detail": json.dumps({"tenant": "acme", "event_id": detail_type}),
            }
            for detail_type in ("Upload Rejected", "Webhook Disabled")
        ]
        assert client("events").put_events(Entries=entries)["FailedEntryCount"] == 0
        got = client("sqs").receive_message(
            QueueUrl=resources.refs["WebhooksQueue"], MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        return sorted(json.loads(m["Body"])["detail-type"] for m in got.get("Messages", []))


def test_the_served_emulator_forwards_the_rules_events_too() -> None:
    assert in_fresh_process(rule_forwarded_on_the_served_emulator) == ["Upload Rejected"]
