"""template.yaml is the single source of truth: the models and the template must agree."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from pynamodb.indexes import GlobalSecondaryIndex
from pynamodb.models import Model

from filejobs.data.models import FileModel, JobModel
from filejobs_dev.infra.template import load_template, table_definitions, ttl_attribute

MODELS: dict[str, type[Model]] = {"JobsTable": JobModel, "FilesTable": FileModel}


def _model_indexes(model: type[Model]) -> dict[str, GlobalSecondaryIndex[Any]]:
    return {
        index.Meta.index_name: index
        for index in vars(model).values()
        if isinstance(index, GlobalSecondaryIndex)
    }


def _key_schema(elements: list[dict[str, str]]) -> dict[str, str]:
    return {e["KeyType"]: e["AttributeName"] for e in elements}


@pytest.mark.parametrize("logical_id", sorted(MODELS))
def test_every_template_index_is_a_model_index_with_the_same_keys(logical_id: str) -> None:
    definition = table_definitions(load_template())[logical_id]
    model = MODELS[logical_id]
    indexes = _model_indexes(model)

    template_indexes = {i["IndexName"]: i for i in definition["GlobalSecondaryIndexes"]}
    assert set(template_indexes) == set(indexes)
    for name, spec in template_indexes.items():
        model_keys = {
            ("HASH" if a.is_hash_key else "RANGE"): a.attr_name
            for a in vars(type(indexes[name])).values()
            if getattr(a, "is_hash_key", False) or getattr(a, "is_range_key", False)
        }
        assert _key_schema(spec["KeySchema"]) == model_keys, name
        for attribute in spec["Projection"].get("NonKeyAttributes", []):
            assert attribute in model.get_attributes(), f"{name} projects unknown {attribute}"


@pytest.mark.parametrize("logical_id", sorted(MODELS))
def test_the_table_key_and_key_attribute_types_match_the_model(logical_id: str) -> None:
    definition = table_definitions(load_template())[logical_id]
    model = MODELS[logical_id]
    attributes = model.get_attributes()

    assert _key_schema(definition["KeySchema"]) == {"HASH": "id"}
    assert model._hash_keyname == "id"
    for attribute in definition["AttributeDefinitions"]:
        assert attributes[attribute["AttributeName"]].attr_type == attribute["AttributeType"]


def test_finished_jobs_expire_through_ttl_on_expires_at(tables: dict[str, str]) -> None:
    assert ttl_attribute(load_template(), "JobsTable") == "expires_at"
    described = boto3.client("dynamodb").describe_time_to_live(TableName=tables["JobsTable"])
    assert described["TimeToLiveDescription"]["AttributeName"] == "expires_at"
    assert "expires_at" in JobModel.get_attributes()


def test_tables_are_on_demand_encrypted_and_recoverable() -> None:
    for resource in (load_template()["Resources"][name]["Properties"] for name in MODELS):
        assert resource["BillingMode"] == "PAY_PER_REQUEST"
        assert resource["SSESpecification"]["SSEEnabled"] is True
        assert resource["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
