"""The local stack creates the template's EventBridge rules with their targets, so a tenant's
event on the stack's bus reaches the webhooks queue as on AWS (and nothing else does)."""

from __future__ import annotations

import json
from typing import Any, cast

import boto3

from filejobs_dev.infra.template import load_template
from filejobs_dev.local.resources import provision


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
