"""The payloads Lambda hands a function, built from what the local event sources read.

Shapes as AWS documents them for SQS, EventBridge Scheduler, DynamoDB Streams, API Gateway
REST proxy integrations and CloudFormation custom resources: the handlers cannot tell them from
the real ones.
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """An SQS event source batch from ReceiveMessage results."""
    return {"Records": [_sqs_record(message, queue_arn, region) for message in messages]}


def _sqs_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    attributes = message.get("MessageAttributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": _b64(value.get("BinaryValue")),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in attributes.items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def scheduled_event(schedule_arn: str, region: str, account: str) -> dict[str, Any]:
    """What EventBridge Scheduler's default input to a Lambda target looks like."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.scheduler",
        "account": account,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [schedule_arn],
        "detail": {},
    }


def custom_resource_event(
    request_type: str,
    *,
    response_url: str,
    stack_id: str,
    logical_id: str,
    resource_type: str,
    service_token: str,
    properties: dict[str, Any],
    physical_id: str | None = None,
) -> dict[str, Any]:
    """A CloudFormation custom resource request (Create, Update or Delete) to a Lambda function;
    the function PUTs its answer to `response_url`."""
    event: dict[str, Any] = {
        "RequestType": request_type,
        "ServiceToken": service_token,
        "ResponseURL": response_url,
        "StackId": stack_id,
        "RequestId": str(uuid.uuid4()),
        "LogicalResourceId": logical_id,
        "ResourceType": resource_type,
        "ResourceProperties": {"ServiceToken": service_token, **properties},
    }
    if physical_id is not None:  # Update and Delete name the resource they are about
        event["PhysicalResourceId"] = physical_id
    return event


def dynamodb_event(
    records: list[dict[str, Any]],
    stream_arn: str,
    region: str,
    *,
    window: TumblingWindow | None = None,
) -> dict[str, Any]:
    """A DynamoDB Streams batch from GetRecords results (dates as Lambda sends them: epoch);
    with a tumbling window (`TumblingWindowInSeconds`), the window's fields too, the shard's id
    among them."""
    batch = []
    for record in records:
        item = dict(record)
        change = dict(item["dynamodb"])
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            change["ApproximateCreationDateTime"] = created.timestamp()
        item["dynamodb"] = change
        item["eventSourceARN"] = stream_arn
        item["awsRegion"] = region
        batch.append(item)
    event: dict[str, Any] = {"Records": batch}
    if window is not None:
        event.update(window.fields(stream_arn))
    return event


@dataclass(frozen=True)
class TumblingWindow:
    """The fields Lambda adds to a stream batch when its event source has a tumbling window:
    the window, the state the function answered last in it, and the shard the batch is from."""

    shard_id: str
    start: datetime
    seconds: int
    state: dict[str, Any]

    def fields(self, stream_arn: str) -> dict[str, Any]:
        end = self.start + timedelta(seconds=self.seconds)
        return {
            "window": {"start": _zulu(self.start), "end": _zulu(end)},
            "state": self.state,
            "shardId": self.shard_id,
            "eventSourceARN": stream_arn,
            "isFinalInvokeForWindow": False,
            "isWindowTerminatedEarly": False,
        }


def _zulu(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def api_event(
    *,
    method: str,
    resource: str,
    path: str,
    path_parameters: dict[str, str],
    query: str,
    headers: dict[str, str],
    body: bytes,
    authorizer: dict[str, Any],
    stage: str = "local",
    stage_variables: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway REST proxy event (payload 1.0) for one HTTP request; `authorizer` is a
    Lambda authorizer's context or a Cognito authorizer's `{"claims": {...}}`."""
    query_values = parse_qs(query, keep_blank_values=True)
    text_body: str | None = None
    encoded = False
    if body:
        try:
            text_body = body.decode()
        except UnicodeDecodeError:
            text_body, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in query_values.items()} or None,
        "multiValueQueryStringParameters": query_values or None,
        "pathParameters": path_parameters or None,
        "stageVariables": stage_variables,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent", "")},
            "authorizer": authorizer,
        },
        "body": text_body,
        "isBase64Encoded": encoded,
    }
