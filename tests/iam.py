"""Does a role of template.yaml allow the AWS calls a handler really makes, and only those?

moto does not enforce IAM, so a missing grant only shows in a deployed stack. This module records
every botocore call made in-process, turns each into the IAM actions and resource ARNs AWS would
authorise it against, with the condition keys the template's statements test (the attributes a
DynamoDB write names, the tags of the S3 object a read names, as they were when it was read),
and evaluates them with the role's statements from the template, its intrinsics resolved to the
resources the test created: an explicit Deny wins over any Allow, as in AWS.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any
from unittest import mock
from urllib.parse import unquote, urlparse

from botocore.client import BaseClient
from botocore.exceptions import ClientError

from filejobs_dev.infra.template import load_template

REGION = "us-east-1"
ACCOUNT = "123456789012"
PARTITION = "aws"


@dataclass(frozen=True)
class Call:
    service: str
    operation: str
    params: dict[str, Any]
    # The tags of the S3 object version the call reads (a GetObject, a HeadObject, a copy's
    # source) when it was made: S3 tests `s3:ExistingObjectTag/<key>` against them. None: the
    # call reads no object, or the object was not there.
    object_tags: Mapping[str, str] | None = None


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
        tags = _tags_of_read(client, original, service, operation, params)
        recorder.calls.append(Call(service, operation, dict(params), tags))
        return original(client, operation, params)

    with mock.patch.object(BaseClient, "_make_api_call", record):
        yield recorder


_S3_READS = {"GetObject", "HeadObject", "CopyObject", "UploadPartCopy"}


def _tags_of_read(
    client: BaseClient, call_api: Any, service: str, operation: str, params: dict[str, Any]
) -> dict[str, str] | None:
    """The tags of the object version an S3 read names, fetched (unrecorded) just before it."""
    if service != "s3" or operation not in _S3_READS:
        return None
    bucket, key, version = _object_read(operation, params)
    named: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if version:
        named["VersionId"] = version
    try:
        found = call_api(client, "GetObjectTagging", named)
    except ClientError:
        return None  # not there: the read itself fails
    return {t["Key"]: t["Value"] for t in found["TagSet"]}


def _object_read(operation: str, params: dict[str, Any]) -> tuple[str, str, str | None]:
    """(bucket, key, version id) of the object an S3 read or a copy's source names."""
    if operation not in {"CopyObject", "UploadPartCopy"}:
        return params["Bucket"], params["Key"], params.get("VersionId")
    source = params["CopySource"]
    if isinstance(source, str):
        path, _, version = unquote(source).partition("?versionId=")
        bucket, _, key = path.lstrip("/").partition("/")
        return bucket, key, version or None
    return source["Bucket"], source["Key"], source.get("VersionId")


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
    if call.service == "kms" and call.operation in {"Encrypt", "Decrypt"}:
        # The functions name the key by its ARN (template.yaml), which KMS authorises.
        return [(f"kms:{call.operation}", params["KeyId"])]
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
    bucket, key, version = _object_read("CopyObject", params)
    read = "s3:GetObjectVersion" if version else "s3:GetObject"
    pairs = [
        (read, object_arn(bucket, key)),
        ("s3:PutObject", object_arn(params["Bucket"], params["Key"])),
    ]
    if params.get("Tagging") or params.get("TaggingDirective") == "REPLACE":
        pairs.append(("s3:PutObjectTagging", object_arn(params["Bucket"], params["Key"])))
    return pairs


# --- the template's statements, resolved ------------------------------------------------------

# Request context: condition key -> its values (one for a single-valued key).
Context = Mapping[str, list[str]]

# Condition keys this module gives a request (request_context); a statement testing another
# key is evaluated as if that test held when it narrows an Allow (LeadingKeys,
# iam:PassedToService: not modelled, the grant taken as given), and refused outright in a Deny
# (a Deny this module cannot evaluate must be modelled, not silently skipped).
MODELLED_KEYS = (
    "s3:prefix",
    "s3:ExistingObjectTag/",
    "dynamodb:Attributes",
    "aws:PrincipalArn",
    "aws:SecureTransport",
    "kms:EncryptionContext",  # ...Keys and ...:<key>: the webhook secrets' key policy
)


@dataclass(frozen=True)
class ConditionTest:
    """One test of a statement's Condition: `operator` (with its ForAnyValue:/ForAllValues:
    qualifier, if any) applied to the request's `key` against `values`."""

    operator: str
    key: str
    values: tuple[str, ...]

    def modelled(self) -> bool:
        return self.key.startswith(MODELLED_KEYS) or self.operator == "Null"

    def holds(self, context: Context) -> bool:
        qualifier, _, operator = self.operator.rpartition(":")
        present = context.get(self.key)
        if operator == "Null":
            # "Null": "true" holds when the key is absent, "false" when it is present.
            return (present is None) == (self.values[0].lower() == "true")
        negated = "Not" in operator
        match = _MATCHERS[operator.replace("Not", "")]
        if not present:
            # An absent key: a positive test fails, a negated one holds (IAM's rule for
            # single-valued keys); ForAnyValue fails and ForAllValues holds on an empty set.
            return qualifier == "ForAllValues" or (negated and not qualifier)
        hits = [any(match(value, pattern) for pattern in self.values) for value in present]
        if qualifier == "ForAllValues":
            return all(hit != negated for hit in hits)
        if qualifier == "ForAnyValue":
            return any(hit != negated for hit in hits)
        return any(hits) != negated


_MATCHERS: dict[str, Any] = {
    "StringEquals": lambda value, pattern: value == pattern,
    "StringLike": fnmatchcase,
    "ArnEquals": fnmatchcase,
    "ArnLike": fnmatchcase,
    "Bool": lambda value, pattern: value.lower() == pattern.lower(),
}


@dataclass(frozen=True)
class Grant:
    """One statement of a policy, resolved: what it allows (or denies), on what, if what."""

    actions: frozenset[str]
    resources: tuple[str, ...]
    conditions: tuple[ConditionTest, ...] = ()
    effect: str = "Allow"

    def applies(self, action: str, resource: str, context: Context | None = None) -> bool:
        """Does the statement speak to this request (its action, resource and conditions)?"""
        if not (
            any(fnmatchcase(action, a) for a in self.actions)
            and any(fnmatchcase(resource, r) for r in self.resources)
        ):
            return False
        for test in self.conditions:
            if not test.modelled():
                if self.effect == "Deny":
                    raise UnmappedCallError(
                        f"a Deny tests {test.key}, which this module does not model"
                    )
                continue
            if not test.holds(context or {}):
                return False
        return True

    def allows(self, action: str, resource: str, context: Context | None = None) -> bool:
        return self.effect == "Allow" and self.applies(action, resource, context)


def request_context(call: Call) -> dict[str, list[str]]:
    """The condition keys a call carries that the template's statements test (those of the
    whole call; a DynamoDB write's attributes are each item's: see authorisations)."""
    if call.service == "s3" and call.operation in {"ListObjectsV2", "ListObjectVersions"}:
        return {"s3:prefix": [str(call.params.get("Prefix", ""))]}
    if call.object_tags is not None:
        return {f"s3:ExistingObjectTag/{k}": [v] for k, v in call.object_tags.items()}
    if call.service == "kms":
        encryption_context = dict(call.params.get("EncryptionContext") or {})
        return {
            "kms:EncryptionContextKeys": sorted(encryption_context),
            **{f"kms:EncryptionContext:{k}": [v] for k, v in encryption_context.items()},
        }
    return {}


def authorisations(call: Call) -> list[tuple[str, str, dict[str, list[str]]]]:
    """(action, resource, request context) of each permission AWS checks for one call."""
    context = {"aws:SecureTransport": ["true"]} | request_context(call)  # boto3 speaks HTTPS
    pairs = permissions_of(call)
    written = _attributes_per_permission(call)
    return [
        (action, resource, context | ({"dynamodb:Attributes": names} if names is not None else {}))
        for (action, resource), names in zip(pairs, written or [None] * len(pairs), strict=True)
    ]


def _attributes_per_permission(call: Call) -> list[list[str] | None] | None:
    """`dynamodb:Attributes` of each permission a DynamoDB write checks: the top-level attribute
    names it names (an item's, an update's and its condition's, the key's)."""
    if call.service != "dynamodb":
        return None
    params = call.params
    if call.operation in {"PutItem", "UpdateItem", "DeleteItem"}:
        return [attribute_names(params)]
    if call.operation == "TransactWriteItems":
        return [attribute_names(next(iter(item.values()))) for item in params["TransactItems"]]
    if call.operation == "BatchWriteItem":
        return [
            sorted(
                {
                    name
                    for request in requests
                    for body in request.values()
                    for name in (body.get("Item") or body.get("Key") or {})
                }
            )
            for requests in params["RequestItems"].values()
        ]
    return None


_EXPRESSION_WORDS = {
    "SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "BETWEEN", "IN",
    "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains",
    "size", "if_not_exists", "list_append",
}  # fmt: skip


def attribute_names(body: Mapping[str, Any]) -> list[str]:
    """The top-level attribute names one write names: its item's, or its key's and those its
    update and condition expressions reach (counted whether read or written: a conservative
    reading of dynamodb:Attributes)."""
    names = set(body.get("Item") or {}) | set(body.get("Key") or {})
    names |= set(body.get("AttributeUpdates") or {}) | set(body.get("Expected") or {})
    placeholders = body.get("ExpressionAttributeNames") or {}
    for expression in (body.get("UpdateExpression"), body.get("ConditionExpression")):
        for path in re.findall(r"(?<![\w.\]:#])(?:#\w+|[A-Za-z_]\w*)", expression or ""):
            if path.startswith("#"):
                names.add(placeholders[path])
            elif path not in _EXPRESSION_WORDS:
                names.add(path)
    return sorted(names)


class Resolver:
    """Intrinsics of IAM statements -> concrete ARNs of the resources a test created."""

    def __init__(
        self,
        attributes: Mapping[str, str],
        stack_name: str = "filejobs",
        conditions: Mapping[str, bool] | None = None,
    ) -> None:
        # "LogicalId.Attribute" -> value, e.g. "JobsTable.Arn", "JobsTable.StreamArn".
        self._attributes = attributes
        self._pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": stack_name,
        }
        # The template's conditions (Fn::If); None: as a deploy with every default would have
        # them (template_conditions).
        self._conditions = conditions

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):  # a condition's `false`, as YAML read it
            return str(value).lower()
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

    def resolve_all(self, value: Any) -> list[str]:
        """A statement's list of values (a list, one value, or an Fn::If choosing either)."""
        if isinstance(value, dict) and "Fn::If" in value:
            condition, when, otherwise = value["Fn::If"]
            chosen = when if self.condition(condition) else otherwise
            return [] if chosen == {"Ref": "AWS::NoValue"} else self.resolve_all(chosen)
        if isinstance(value, list):
            return [v for each in value for v in self.resolve_all(each)]
        return [self.resolve(value)]

    def condition(self, name: str) -> bool:
        conditions = self._conditions
        if conditions is None:
            conditions = template_conditions()
        if name not in conditions:
            raise AssertionError(f"no value for the condition {name}: give it to the Resolver")
        return conditions[name]

    def known(self, name: str) -> str | None:
        """The value of "LogicalId.Attribute" (or a Ref's "LogicalId"), if the test made it."""
        return self._attributes.get(name)

    def _substitute(self, name: str) -> str:
        return self._pseudo[name] if name in self._pseudo else self._attribute(name)

    def _attribute(self, name: str) -> str:
        if name not in self._attributes:
            raise AssertionError(f"no value for {name}: create that resource in the test")
        return self._attributes[name]


def template_conditions(
    parameters: Mapping[str, Any] | None = None, template: Mapping[str, Any] | None = None
) -> dict[str, bool]:
    """The template's Conditions, evaluated with `parameters` (the rest at their defaults)."""
    if template is None:
        template = load_template()
    values = {
        name: spec.get("Default", "") for name, spec in template.get("Parameters", {}).items()
    }
    values.update(parameters or {})
    defined = template.get("Conditions", {})
    evaluated: dict[str, bool] = {}

    def value(expression: Any) -> Any:
        if isinstance(expression, dict) and "Ref" in expression:
            found = values[expression["Ref"]]
            return found.split(",") if isinstance(found, str) and "," in found else found
        if isinstance(expression, dict) and "Fn::Join" in expression:
            separator, parts = expression["Fn::Join"]
            resolved = value(parts)
            return separator.join(resolved if isinstance(resolved, list) else [str(resolved)])
        return expression

    def truth(expression: Any) -> bool:
        ((function, arguments),) = expression.items()
        if function in {"Condition", "Fn::Condition"}:
            return named(arguments)
        if function == "Fn::Equals":
            left, right = (value(a) for a in arguments)
            return str(left) == str(right)
        if function == "Fn::Not":
            return not truth(arguments[0])
        if function == "Fn::And":
            return all(truth(a) for a in arguments)
        if function == "Fn::Or":
            return any(truth(a) for a in arguments)
        raise AssertionError(f"cannot evaluate the condition {expression!r}")

    def named(name: str) -> bool:
        if name not in evaluated:
            evaluated[name] = truth(defined[name])
        return evaluated[name]

    return {name: named(name) for name in defined}


def grants(policies: list[dict[str, Any]], resolver: Resolver) -> list[Grant]:
    """Each statement of the policies (Allow or Deny), its intrinsics resolved."""
    resolved = []
    for document in policies:
        for statement in document["Statement"]:
            assert statement["Effect"] in {"Allow", "Deny"}, statement
            actions = statement["Action"]
            resolved.append(
                Grant(
                    frozenset(actions if isinstance(actions, list) else [actions]),
                    tuple(resolver.resolve_all(statement["Resource"])),
                    _conditions(statement.get("Condition", {}), resolver),
                    statement["Effect"],
                )
            )
    return resolved


def _conditions(condition: Mapping[str, Any], resolver: Resolver) -> tuple[ConditionTest, ...]:
    if "Fn::If" in condition:  # a Condition block that is there on some deploys only
        name, when, otherwise = condition["Fn::If"]
        chosen = when if resolver.condition(name) else otherwise
        return () if chosen == {"Ref": "AWS::NoValue"} else _conditions(chosen, resolver)
    return tuple(
        ConditionTest(operator, key, tuple(resolver.resolve_all(values)))
        for operator, tests in condition.items()
        for key, values in tests.items()
    )


def refusal(call: Call, role_grants: list[Grant]) -> list[str]:
    """Each permission of one call the grants refuse: denied explicitly, or allowed by none."""
    refused = []
    for action, resource, context in authorisations(call):
        applying = [g for g in role_grants if g.applies(action, resource, context)]
        if any(g.effect == "Deny" for g in applying):
            refused.append(f"{action} on {resource} ({call.service}:{call.operation}): denied")
        elif not any(g.effect == "Allow" for g in applying):
            refused.append(f"{action} on {resource} ({call.service}:{call.operation})")
    return refused


def key_policy_documents(template: Mapping[str, Any], role: str) -> list[dict[str, Any]]:
    """What the template's KMS keys' policies let `role` (a logical id) do, as documents of
    statements on each key's ARN: a key policy that names a role grants it without any identity
    policy (the webhook secrets' key: template.yaml WebhookSecretsKey)."""
    documents = []
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::KMS::Key":
            continue
        statements = [
            {**statement, "Resource": {"Fn::GetAtt": f"{logical_id}.Arn"}}
            for statement in resource["Properties"]["KeyPolicy"]["Statement"]
            if statement["Effect"] == "Allow"
            and statement["Principal"].get("AWS") == {"Fn::GetAtt": f"{role}.Arn"}
        ]
        if statements:
            documents.append({"Statement": statements})
    return documents


def denied(calls: list[Call], role_grants: list[Grant]) -> list[str]:
    """Each permission a call needed that the grants refuse, as "action on resource (operation)"
    (": denied" when an explicit Deny refused it)."""
    return sorted({line for call in calls for line in refusal(call, role_grants)})


def denied_by_resource_policy(
    calls: list[Call], policy_grants: list[Grant], principal: str
) -> list[str]:
    """Each permission of the calls a resource policy (a bucket's) denies `principal` outright.
    (Its Allows are not needed by a role of the same account that its own policy allows.)"""
    refused = set()
    for call in calls:
        for action, resource, context in authorisations(call):
            asked = context | {"aws:PrincipalArn": [principal]}
            if any(
                g.effect == "Deny" and g.applies(action, resource, asked) for g in policy_grants
            ):
                refused.add(f"{action} on {resource} ({call.service}:{call.operation}): denied")
    return sorted(refused)
