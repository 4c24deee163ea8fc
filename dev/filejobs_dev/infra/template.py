"""Read template.yaml and create its resources elsewhere (moto, the local stack).

The template is the single source of truth: tests and the local stack build their tables, queues
and buckets from it, so a key, an index, a timeout or a redrive policy changed there is changed
everywhere.
"""

from __future__ import annotations

import copy
import functools
import json
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import (
        CreateBucketConfigurationTypeDef,
        NotificationConfigurationTypeDef,
        QueueConfigurationTypeDef,
        ServerSideEncryptionRuleTypeDef,
    )
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

# Properties of AWS::DynamoDB::Table that CreateTable takes as they are.
_CREATE_TABLE_KEYS = (
    "AttributeDefinitions",
    "KeySchema",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "BillingMode",
    "SSESpecification",
    "StreamSpecification",
)


# libyaml's parser where PyYAML was built with it: a tenth of the pure-Python one's time.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _CloudFormationLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that keeps CloudFormation short-form tags (!Ref, !Sub, ...) as plain data."""


def _intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _intrinsic)


def default_template_path() -> Path:
    """template.yaml at the project root (this file lives in dev/filejobs_dev/infra)."""
    return Path(__file__).resolve().parents[3] / "template.yaml"


def load_template(path: Path | None = None) -> dict[str, Any]:
    """The template as data: a copy of its own, so a caller may change it freely.

    Parsed once per version of the file (a test suite builds its tables from it hundreds of
    times); a changed file is parsed again.
    """
    source = (path or default_template_path()).resolve()
    stat = source.stat()
    return copy.deepcopy(_parsed(source, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parsed(source: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    text = source.read_text(encoding="utf-8")
    template: dict[str, Any] = yaml.load(text, Loader=_CloudFormationLoader)  # noqa: S506
    return template


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") == resource_type
    }


def table_definitions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """CreateTable arguments (without TableName) per logical id of each DynamoDB table."""
    tables = resources_of_type(template, "AWS::DynamoDB::Table")
    return {logical_id: _create_table_args(r["Properties"]) for logical_id, r in tables.items()}


def _create_table_args(properties: dict[str, Any]) -> dict[str, Any]:
    args = {key: properties[key] for key in _CREATE_TABLE_KEYS if key in properties}
    if "SSESpecification" in args:
        # CloudFormation says SSEEnabled where the CreateTable API says Enabled.
        sse = dict(args["SSESpecification"])
        sse["Enabled"] = sse.pop("SSEEnabled", False)
        args["SSESpecification"] = sse
    if "StreamSpecification" in args:
        # CloudFormation enables the stream by giving a view type; the API wants it said.
        args["StreamSpecification"] = {"StreamEnabled": True, **args["StreamSpecification"]}
    return args


def ttl_attribute(template: dict[str, Any], logical_id: str) -> str | None:
    spec = template["Resources"][logical_id]["Properties"].get("TimeToLiveSpecification")
    if not spec or not spec.get("Enabled"):
        return None
    name: str = spec["AttributeName"]
    return name


def create_tables(
    client: DynamoDBClient,
    table_names: dict[str, str],
    template: dict[str, Any] | None = None,
) -> None:
    """Create each table of the template under the name `table_names[logical_id]`."""
    template = template or load_template()
    for logical_id, definition in table_definitions(template).items():
        if logical_id not in table_names:
            continue
        name = table_names[logical_id]
        client.create_table(TableName=name, **definition)
        client.get_waiter("table_exists").wait(TableName=name)
        ttl = ttl_attribute(template, logical_id)
        if ttl:
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": ttl, "Enabled": True},
            )


# ---------------------------------------------------------------------------------------------
# Event buses


def create_event_buses(
    client: EventBridgeClient,
    bus_names: dict[str, str],
    template: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Create each AWS::Events::EventBus under `bus_names[logical_id]`; its ARN by logical id."""
    template = template or load_template()
    arns: dict[str, str] = {}
    for logical_id in resources_of_type(template, "AWS::Events::EventBus"):
        if logical_id in bus_names:
            arns[logical_id] = client.create_event_bus(Name=bus_names[logical_id])["EventBusArn"]
    return arns


def create_secrets(
    client: Any, secret_names: Mapping[str, str], template: dict[str, Any] | None = None
) -> dict[str, str]:
    """Create each AWS::SecretsManager::Secret under `secret_names[logical_id]`, its value made
    as its GenerateSecretString asks (that many letters and digits); its ARN (a secret's Ref)
    by logical id."""
    template = template or load_template()
    arns: dict[str, str] = {}
    for logical_id, secret in resources_of_type(template, "AWS::SecretsManager::Secret").items():
        if logical_id not in secret_names:
            continue
        generate = secret.get("Properties", {}).get("GenerateSecretString", {})
        length = int(generate.get("PasswordLength", 32))  # CloudFormation's default
        alphabet = string.ascii_letters + string.digits
        value = "".join(secrets.choice(alphabet) for _ in range(length))
        answer = client.create_secret(Name=secret_names[logical_id], SecretString=value)
        arns[logical_id] = str(answer["ARN"])
    return arns


# ---------------------------------------------------------------------------------------------
# Queues

# Properties of AWS::SQS::Queue that CreateQueue takes as attributes (as strings).
_QUEUE_ATTRIBUTE_KEYS = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "SqsManagedSseEnabled",
)


def _getatt(value: Any) -> tuple[str, str] | None:
    """(logical id, attribute) of `!GetAtt X.Attr` or `Fn::GetAtt: [X, Attr]`, else None."""
    if not isinstance(value, dict) or set(value) != {"Fn::GetAtt"}:
        return None
    target = value["Fn::GetAtt"]
    if isinstance(target, str):
        logical_id, _, attribute = target.partition(".")
        return logical_id, attribute
    if isinstance(target, list) and len(target) == 2:
        return str(target[0]), str(target[1])
    return None


def _ref(value: Any) -> str:
    """X of `!Ref X`."""
    if not isinstance(value, dict) or set(value) != {"Ref"}:
        raise ValueError(f"expected a Ref to a resource of the template, got {value!r}")
    return str(value["Ref"])


def _resolve_arn(value: Any, arns: Mapping[str, str], what: str) -> Any:
    """An ARN for `!GetAtt X.Arn` when `arns` knows X; a literal ARN as it is; else `value`."""
    target = _getatt(value)
    if target is None:
        return value
    logical_id, attribute = target
    if attribute != "Arn":
        raise ValueError(f"{what}: expected !GetAtt {logical_id}.Arn, got .{attribute}")
    return arns.get(logical_id, value)


def _attribute_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _redrive_policy(properties: dict[str, Any]) -> dict[str, Any] | None:
    policy = properties.get("RedrivePolicy")
    if policy is None:
        return None
    parsed: dict[str, Any] = json.loads(policy) if isinstance(policy, str) else dict(policy)
    return parsed


def dead_letter_queues(template: dict[str, Any]) -> dict[str, str]:
    """Logical id of each queue with a redrive policy -> logical id of its dead-letter queue."""
    result: dict[str, str] = {}
    for logical_id, resource in resources_of_type(template, "AWS::SQS::Queue").items():
        policy = _redrive_policy(resource.get("Properties", {}))
        if policy is None:
            continue
        target = _getatt(policy.get("deadLetterTargetArn"))
        if target is None:
            raise ValueError(f"{logical_id}: deadLetterTargetArn must be !GetAtt <queue>.Arn")
        result[logical_id] = target[0]
    return result


def _queue_attributes(properties: dict[str, Any], queue_arns: Mapping[str, str]) -> dict[str, str]:
    attributes = {
        key: _attribute_string(properties[key])
        for key in _QUEUE_ATTRIBUTE_KEYS
        if key in properties
    }
    policy = _redrive_policy(properties)
    if policy is not None:
        policy["deadLetterTargetArn"] = _resolve_arn(
            policy.get("deadLetterTargetArn"), queue_arns, "RedrivePolicy"
        )
        attributes["RedrivePolicy"] = json.dumps(policy, sort_keys=True)
    return attributes


def queue_definitions(
    template: dict[str, Any], queue_arns: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """CreateQueue `Attributes` (all strings) per logical id of each SQS queue.

    A RedrivePolicy's `deadLetterTargetArn: !GetAtt X.Arn` becomes `queue_arns[X]`; without that
    ARN it stays the intrinsic (JSON-encoded), which is how `create_queues` knows to create X first.
    """
    arns = queue_arns or {}
    return {
        logical_id: _queue_attributes(resource.get("Properties", {}), arns)
        for logical_id, resource in resources_of_type(template, "AWS::SQS::Queue").items()
    }


def queue_arns(sqs_client: SQSClient, queue_urls: Mapping[str, str]) -> dict[str, str]:
    """The ARN of each queue in `queue_urls` (logical id -> URL), by logical id."""
    result: dict[str, str] = {}
    for logical_id, url in queue_urls.items():
        attributes = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        result[logical_id] = attributes["Attributes"]["QueueArn"]
    return result


def create_queues(
    sqs_client: SQSClient,
    names: Mapping[str, str],
    template: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Create each queue of the template named in `names` (logical id -> queue name).

    Dead-letter queues are created before the queues that redrive to them, so every RedrivePolicy
    names a real ARN. Returns the URL of each created queue, by logical id.
    """
    template = template or load_template()
    queues = resources_of_type(template, "AWS::SQS::Queue")
    unknown = sorted(set(names) - set(queues))
    if unknown:
        raise ValueError(f"not SQS queues of the template: {unknown}")
    redrives_to = dead_letter_queues(template)
    urls: dict[str, str] = {}
    arns: dict[str, str] = {}

    def create(logical_id: str, chain: tuple[str, ...]) -> None:
        if logical_id in urls:
            return
        if logical_id in chain:
            raise ValueError(f"redrive cycle: {' -> '.join((*chain, logical_id))}")
        dead_letter_queue = redrives_to.get(logical_id)
        if dead_letter_queue is not None:
            if dead_letter_queue not in names:
                raise ValueError(f"{logical_id} redrives to {dead_letter_queue}: name it too")
            create(dead_letter_queue, (*chain, logical_id))
        attributes = _queue_attributes(queues[logical_id].get("Properties", {}), arns)
        url = sqs_client.create_queue(
            QueueName=names[logical_id],
            Attributes=cast("dict[QueueAttributeNameType, str]", attributes),
        )
        urls[logical_id] = url["QueueUrl"]
        arns.update(queue_arns(sqs_client, {logical_id: urls[logical_id]}))

    for logical_id in names:
        create(logical_id, ())
    return urls


# ---------------------------------------------------------------------------------------------
# Buckets


def _queue_notifications(
    logical_id: str, configuration: dict[str, Any], queue_arns: Mapping[str, str]
) -> NotificationConfigurationTypeDef:
    unsupported = sorted(set(configuration) - {"QueueConfigurations"})
    if unsupported:
        raise NotImplementedError(f"{logical_id}: only QueueConfigurations, not {unsupported}")
    queues: list[QueueConfigurationTypeDef] = []
    for entry in configuration.get("QueueConfigurations", []):
        arn = _resolve_arn(entry["Queue"], queue_arns, f"{logical_id} notification")
        if not isinstance(arn, str):
            raise ValueError(f"{logical_id}: no ARN given for notification queue {entry['Queue']}")
        queue: QueueConfigurationTypeDef = {"QueueArn": arn, "Events": [entry["Event"]]}
        rules = entry.get("Filter", {}).get("S3Key", {}).get("Rules", [])
        if rules:
            queue["Filter"] = {
                "Key": {"FilterRules": [{"Name": r["Name"], "Value": r["Value"]} for r in rules]}
            }
        queues.append(queue)
    return {"QueueConfigurations": queues}


def _encryption_rule(rule: dict[str, Any]) -> ServerSideEncryptionRuleTypeDef:
    """CloudFormation says ServerSideEncryptionByDefault where PutBucketEncryption says Apply..."""
    api_rule: ServerSideEncryptionRuleTypeDef = {}
    if "ServerSideEncryptionByDefault" in rule:
        api_rule["ApplyServerSideEncryptionByDefault"] = rule["ServerSideEncryptionByDefault"]
    if "BucketKeyEnabled" in rule:
        api_rule["BucketKeyEnabled"] = rule["BucketKeyEnabled"]
    return api_rule


def create_buckets(
    s3_client: S3Client,
    names: Mapping[str, str],
    queue_arns: Mapping[str, str],
    template: dict[str, Any] | None = None,
) -> None:
    """Create each bucket of the template named in `names` (logical id -> bucket name).

    Applies the bucket's ownership controls, public access block, default encryption, versioning
    and its QueueConfigurations notifications, with `!GetAtt Q.Arn` resolved through `queue_arns`
    (logical id -> ARN). Bucket policies, logging and lifecycle rules are not applied. moto sends
    an `s3:TestEvent` to each notified queue as the notification is saved, as S3 does.
    """
    template = template or load_template()
    buckets = resources_of_type(template, "AWS::S3::Bucket")
    unknown = sorted(set(names) - set(buckets))
    if unknown:
        raise ValueError(f"not S3 buckets of the template: {unknown}")
    region = s3_client.meta.region_name
    for logical_id, name in names.items():
        properties: dict[str, Any] = buckets[logical_id].get("Properties", {})
        if region == "us-east-1":
            s3_client.create_bucket(Bucket=name)
        else:
            location = cast("CreateBucketConfigurationTypeDef", {"LocationConstraint": region})
            s3_client.create_bucket(Bucket=name, CreateBucketConfiguration=location)
        if "OwnershipControls" in properties:
            s3_client.put_bucket_ownership_controls(
                Bucket=name, OwnershipControls=properties["OwnershipControls"]
            )
        if "PublicAccessBlockConfiguration" in properties:
            s3_client.put_public_access_block(
                Bucket=name,
                PublicAccessBlockConfiguration=properties["PublicAccessBlockConfiguration"],
            )
        if "BucketEncryption" in properties:
            rules = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            s3_client.put_bucket_encryption(
                Bucket=name,
                ServerSideEncryptionConfiguration={"Rules": [_encryption_rule(r) for r in rules]},
            )
        if "VersioningConfiguration" in properties:
            status = properties["VersioningConfiguration"]["Status"]
            s3_client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": status})
        if "NotificationConfiguration" in properties:
            s3_client.put_bucket_notification_configuration(
                Bucket=name,
                NotificationConfiguration=_queue_notifications(
                    logical_id, properties["NotificationConfiguration"], queue_arns
                ),
            )


# ---------------------------------------------------------------------------------------------
# Functions

# What Lambda (and so SAM) uses when neither the function nor Globals says.
_DEFAULT_TIMEOUT = 3
_DEFAULT_MEMORY = 128
_DEFAULT_EPHEMERAL_STORAGE = 512


@dataclass(frozen=True)
class FunctionSpec:
    """An AWS::Serverless::Function with the template's Globals.Function applied.

    `environment` values that are intrinsics (`!Ref JobsTable`) stay as the intrinsic dict
    (`{"Ref": "JobsTable"}`): whoever runs the function resolves them. `events` holds
    (event type, properties) in template order. `policies` are the documents of the function's
    role: its inline policies and the template's managed policies it attaches.
    """

    code_uri: str
    handler: str
    environment: dict[str, Any]
    timeout: int
    memory: int
    events: list[tuple[str, dict[str, Any]]]
    ephemeral_storage: int = _DEFAULT_EPHEMERAL_STORAGE
    reserved_concurrency: int | None = None
    role: str | None = None
    policies: list[dict[str, Any]] = field(default_factory=list)
    # Logical ids of the template's layers, Globals' first (the order Lambda stacks them in /opt).
    layers: list[str] = field(default_factory=list)
    architecture: str = "x86_64"


def function_definitions(template: dict[str, Any]) -> dict[str, FunctionSpec]:
    """A FunctionSpec per logical id of each AWS::Serverless::Function."""
    defaults: dict[str, Any] = template.get("Globals", {}).get("Function", {})
    functions = resources_of_type(template, "AWS::Serverless::Function")
    return {
        logical_id: _function_spec(template, defaults, resource.get("Properties", {}))
        for logical_id, resource in functions.items()
    }


def role_policies(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The policy documents of an AWS::IAM::Role of the template (inline and managed)."""
    resources = template.get("Resources", {})
    properties = resources[role].get("Properties", {})
    documents = [policy["PolicyDocument"] for policy in properties.get("Policies", [])]
    for managed in properties.get("ManagedPolicyArns", []):
        logical_id = managed.get("Ref") if isinstance(managed, dict) else None
        if logical_id is None or logical_id not in resources:
            raise ValueError(f"{role} attaches {managed!r}, which the template does not define")
        documents.append(resources[logical_id]["Properties"]["PolicyDocument"])
    return documents


def _function_spec(
    template: dict[str, Any], defaults: dict[str, Any], properties: dict[str, Any]
) -> FunctionSpec:
    def setting(key: str, default: Any = None) -> Any:
        # SAM Globals: a scalar set on the function replaces the global one.
        return properties.get(key, defaults.get(key, default))

    environment = {
        **defaults.get("Environment", {}).get("Variables", {}),
        **properties.get("Environment", {}).get("Variables", {}),
    }
    events = [
        (event["Type"], dict(event.get("Properties", {})))
        for event in properties.get("Events", {}).values()
    ]
    storage = setting("EphemeralStorage", {}).get("Size", _DEFAULT_EPHEMERAL_STORAGE)
    reserved = properties.get("ReservedConcurrentExecutions")
    role = _getatt(properties.get("Role"))
    # SAM Globals: a list set on the function is added to the global one, not put in its place.
    layers = [_ref(layer) for layer in [*defaults.get("Layers", []), *properties.get("Layers", [])]]
    (architecture,) = setting("Architectures", ["x86_64"])
    role_id = None if role is None else role[0]
    return FunctionSpec(
        code_uri=str(setting("CodeUri")),
        handler=str(setting("Handler")),
        environment=environment,
        timeout=int(setting("Timeout", _DEFAULT_TIMEOUT)),
        memory=int(setting("MemorySize", _DEFAULT_MEMORY)),
        events=events,
        ephemeral_storage=int(storage),
        reserved_concurrency=None if reserved is None else int(reserved),
        role=role_id,
        layers=layers,
        architecture=str(architecture),
        policies=[] if role_id is None else role_policies(template, role_id),
    )
