"""Read template.yaml and create its resources elsewhere (moto, the local stack).

The template is the single source of truth: tests and the local stack build their tables from
it, so a key or index changed there is changed everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

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


class _CloudFormationLoader(yaml.SafeLoader):
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
    """template.yaml at the project root (this file lives in layers/filejobs/filejobs/infra)."""
    return Path(__file__).resolve().parents[4] / "template.yaml"


def load_template(path: Path | None = None) -> dict[str, Any]:
    text = (path or default_template_path()).read_text(encoding="utf-8")
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
