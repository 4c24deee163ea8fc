"""Does a role of template.yaml allow the AWS calls a handler really makes?

moto does not enforce IAM, so a missing grant only shows in a deployed stack. This module records
every botocore call made in-process, turns each into the IAM actions and resource ARNs AWS would
authorise it against, and evaluates them with the role's statements from the template, its
intrinsics resolved to the resources the test created.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any
from unittest import mock
from urllib.parse import urlparse

from botocore.client import BaseClient

REGION = "us-east-1"
ACCOUNT = "123456789012"
PARTITION = "aws"


@dataclass(frozen=True)
class Call:
    service: str
    operation: str
    params: dict[str, Any]


@dataclass
class CallRecorder:
    calls: list[Call] = field(default_factory=list)


@contextmanager
def recording_calls() -> Iterator[CallRecorder]:
    """Every botocore API call made in the block, by any client."""
    recorder = CallRecorder()
    original = BaseClient._make_api_call  # type: ignore[attr-defined]

    def record(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        service = client.meta.service_model.service_name
        recorder.calls.append(Call(service, operation, dict(params)))
        return original(client, operation, params)

    with mock.patch.object(BaseClient, "_make_api_call", record):
        yield recorder


# --- calls -> (action, resource) ------------------------------------------------------------


def table_arn(table: str, index: str | None = None) -> str:
    arn = f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
    return f"{arn}/index/{index}" if index else arn


def queue_arn_of_url(url: str) -> str:
    return f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{urlparse(url).path.rsplit('/', 1)[-1]}"


def object_arn(bucket: str, key: str) -> str:
    return f"arn:{PARTITION}:s3:::{bucket}/{key}"


def bus_arn(name_or_arn: str) -> str:
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    return f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/{name_or_arn}"


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_SQS_ACTIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_S3_OBJECT_WRITES = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}


class UnmappedCallError(AssertionError):
    """A call this module does not know how to authorise: map it rather than skip it."""


def permissions_of(call: Call) -> list[tuple[str, str]]:
    """The (IAM action, resource ARN) pairs AWS checks for one API call."""
    params = call.params
    if call.service == "dynamodb":
        return _dynamodb(call.operation, params)
    if call.service == "sqs":
        action = _SQS_ACTIONS.get(call.operation, call.operation)
        return [(f"sqs:{action}", queue_arn_of_url(params["QueueUrl"]))]
    if call.service == "s3":
        return _s3(call.operation, params)
    if call.service == "events" and call.operation == "PutEvents":
        return [
            ("events:PutEvents", bus_arn(e.get("EventBusName", "default")))
            for e in params["Entries"]
        ]
    if call.service == "scheduler":
        return _scheduler(call.operation, params)
    if call.service == "secretsmanager" and call.operation == "GetSecretValue":
        # The template hands functions a secret's ARN (its Ref), which IAM matches as it is.
        return [("secretsmanager:GetSecretValue", params["SecretId"])]
    raise UnmappedCallError(f"no IAM mapping for {call.service}:{call.operation}")


def _scheduler(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """A schedule's own ARN; creating or changing one also passes its target's role."""
    if operation not in {"CreateSchedule", "UpdateSchedule", "DeleteSchedule", "GetSchedule"}:
        raise UnmappedCallError(f"no IAM mapping for scheduler:{operation}")
    group = params.get("GroupName", "default")
    arn = f"arn:{PARTITION}:scheduler:{REGION}:{ACCOUNT}:schedule/{group}/{params['Name']}"
    pairs = [(f"scheduler:{operation}", arn)]
    if operation in {"CreateSchedule", "UpdateSchedule"}:
        pairs.append(("iam:PassRole", params["Target"]["RoleArn"]))
    return pairs


def _dynamodb(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    if operation in {"TransactWriteItems", "TransactGetItems"}:
        pairs = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            pairs.append((f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table_arn(body["TableName"])))
        return pairs
    if operation in {"BatchGetItem", "BatchWriteItem"}:
        return [(f"dynamodb:{operation}", table_arn(t)) for t in params["RequestItems"]]
    if operation in {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "DescribeTable",
    }:
        return [(f"dynamodb:{operation}", table_arn(params["TableName"], params.get("IndexName")))]
    raise UnmappedCallError(f"no IAM mapping for dynamodb:{operation}")


def _s3(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    versioned = bool(params.get("VersionId"))
    if operation == "ListObjectsV2":
        return [("s3:ListBucket", f"arn:{PARTITION}:s3:::{params['Bucket']}")]
    if operation == "ListObjectVersions":
        return [("s3:ListBucketVersions", f"arn:{PARTITION}:s3:::{params['Bucket']}")]
    if operation == "DeleteObjects":
        # One DeleteObject (or DeleteObjectVersion) per key named, as S3 authorises it.
        return [
            (
                "s3:DeleteObjectVersion" if o.get("VersionId") else "s3:DeleteObject",
                object_arn(params["Bucket"], o["Key"]),
            )
            for o in params["Delete"]["Objects"]
        ]
    if operation == "CopyObject":
        return _s3_copy(params)
    if operation == "UploadPartCopy":
        return _s3_copy(params)[:2]
    target = object_arn(params["Bucket"], params["Key"])
    if operation in {"GetObject", "HeadObject"}:
        return [("s3:GetObjectVersion" if versioned else "s3:GetObject", target)]
    if operation in _S3_OBJECT_WRITES:
        return [("s3:PutObject", target)]
    if operation in {"PutObjectTagging", "GetObjectTagging", "DeleteObject"}:
        verb = operation.removesuffix("Tagging").removesuffix("Object")
        suffix = "Tagging" if operation.endswith("Tagging") else ""
        action = f"s3:{verb}ObjectVersion{suffix}" if versioned else f"s3:{operation}"
        return [(action, target)]
    if operation == "AbortMultipartUpload":
        return [("s3:AbortMultipartUpload", target)]
    raise UnmappedCallError(f"no IAM mapping for s3:{operation}")


def _s3_copy(params: dict[str, Any]) -> list[tuple[str, str]]:
    source = params["CopySource"]
    if isinstance(source, str):
        path, _, query = source.partition("?versionId=")
        bucket, _, key = path.lstrip("/").partition("/")
        version = query
    else:
        bucket, key, version = source["Bucket"], source["Key"], source.get("VersionId")
    read = "s3:GetObjectVersion" if version else "s3:GetObject"
    pairs = [
        (read, object_arn(bucket, key)),
        ("s3:PutObject", object_arn(params["Bucket"], params["Key"])),
    ]
    if params.get("Tagging") or params.get("TaggingDirective") == "REPLACE":
        pairs.append(("s3:PutObjectTagging", object_arn(params["Bucket"], params["Key"])))
    return pairs


# --- the template's statements, resolved ------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    actions: frozenset[str]
    resources: tuple[str, ...]
    # The statement's `StringLike` conditions on request keys (`s3:prefix` of a listing): a
    # request names a value matching one of the patterns, or the grant does not apply.
    string_like: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def allows(self, action: str, resource: str, context: Mapping[str, str] | None = None) -> bool:
        return (
            any(fnmatchcase(action, a) for a in self.actions)
            and any(fnmatchcase(resource, r) for r in self.resources)
            and all(
                key in (context or {}) and any(fnmatchcase((context or {})[key], p) for p in pats)
                for key, pats in self.string_like
            )
        )


def request_context(call: Call) -> dict[str, str]:
    """The condition keys a call carries that the template's statements test."""
    if call.service == "s3" and call.operation in {"ListObjectsV2", "ListObjectVersions"}:
        return {"s3:prefix": str(call.params.get("Prefix", ""))}
    return {}


class Resolver:
    """Intrinsics of IAM statements -> concrete ARNs of the resources a test created."""

    def __init__(self, attributes: Mapping[str, str], stack_name: str = "filejobs") -> None:
        # "LogicalId.Attribute" -> value, e.g. "JobsTable.Arn", "JobsTable.StreamArn".
        self._attributes = attributes
        self._pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": stack_name,
        }

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and isinstance(value.get("Ref"), str):
            # a resource whose Ref is its ARN (a secret, a topic), known as "LogicalId"
            return self._substitute(value["Ref"])
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            name = target if isinstance(target, str) else ".".join(target)
            return self._attribute(name)
        if isinstance(value, dict) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
            return re.sub(
                r"\$\{([^}]+)\}", lambda m: self._substitute(m.group(1)), value["Fn::Sub"]
            )
        raise AssertionError(f"cannot resolve {value!r}")

    def known(self, name: str) -> str | None:
        """The value of "LogicalId.Attribute" (or a Ref's "LogicalId"), if the test made it."""
        return self._attributes.get(name)

    def _substitute(self, name: str) -> str:
        return self._pseudo[name] if name in self._pseudo else self._attribute(name)

    def _attribute(self, name: str) -> str:
        if name not in self._attributes:
            raise AssertionError(f"no value for {name}: create that resource in the test")
        return self._attributes[name]


def grants(policies: list[dict[str, Any]], resolver: Resolver) -> list[Grant]:
    resolved = []
    for document in policies:
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow", statement
            actions = statement["Action"]
            resources = statement["Resource"]
            resolved.append(
                Grant(
                    frozenset(actions if isinstance(actions, list) else [actions]),
                    tuple(
                        resolver.resolve(r)
                        for r in (resources if isinstance(resources, list) else [resources])
                    ),
                    _string_like(statement.get("Condition", {})),
                )
            )
    return resolved


def _string_like(condition: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The `StringLike` tests on `s3:prefix`; the other condition keys the template uses
    (LeadingKeys, iam:PassedToService) are not request keys this check models."""
    tests = condition.get("StringLike", {})
    return tuple(
        (key, tuple(values if isinstance(values, list) else [values]))
        for key, values in tests.items()
        if key == "s3:prefix"
    )


def denied(calls: list[Call], role_grants: list[Grant]) -> list[str]:
    """Each permission a call needed that no grant allows, as "action on resource (operation)"."""
    refused = []
    for call in calls:
        context = request_context(call)
        for action, resource in permissions_of(call):
            if not any(g.allows(action, resource, context) for g in role_grants):
                refused.append(f"{action} on {resource} ({call.service}:{call.operation})")
    return sorted(set(refused))
