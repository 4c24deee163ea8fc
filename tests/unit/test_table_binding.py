"""The models' tables: each model says which of the two tables it is stored in (its Meta is that
table's), the table's name and region are written once, and the composition root binds every
model to the stack's table, in the region config.py read."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pynamodb.models import Model

from filejobs import runtime
from filejobs.data import models
from filejobs.data.models import (
    FILES_TABLE_MODELS,
    JOBS_TABLE_MODELS,
    InFilesTable,
    InJobsTable,
    JobModel,
    UsageModel,
    bind_tables,
)

TABLE_OF: dict[type[Model], type] = {
    **dict.fromkeys(JOBS_TABLE_MODELS, InJobsTable),
    **dict.fromkeys(FILES_TABLE_MODELS, InFilesTable),
}
BOUND = ("table_name", "region", "host", "max_pool_connections")


@pytest.fixture
def bindings_restored() -> Iterator[None]:
    """The models as they were: binding changes class attributes every later test reads."""
    saved = {model: {name: getattr(model.Meta, name) for name in BOUND} for model in TABLE_OF}
    yield
    for model, attributes in saved.items():
        meta: Any = model.Meta
        for name, value in attributes.items():
            setattr(meta, name, value)
        model._connection = None
    runtime.reset()


def test_every_model_is_bound_with_its_table() -> None:
    # a model bind_tables does not know keeps the table and region it was last given (the
    # private ones are bases: _Audited's fields, no table of their own)
    defined = {
        value
        for name, value in vars(models).items()
        if isinstance(value, type)
        and issubclass(value, Model)
        and not name.startswith("_")
        and value is not Model
    }
    assert defined == set(TABLE_OF)


def test_every_model_s_meta_is_the_meta_of_its_table() -> None:
    metas: dict[type[Model], Any] = {model: model.Meta for model in TABLE_OF}
    assert {model: meta.__mro__[1] for model, meta in metas.items()} == TABLE_OF


def test_a_table_s_name_and_region_are_written_once_in_the_models() -> None:
    tree = ast.parse(Path(models.__file__).read_text())
    assigned = [
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in {"table_name", "region"}
    ]
    assert sorted(assigned) == ["region", "region", "table_name", "table_name"]


@pytest.mark.usefixtures("bindings_restored")
def test_binding_points_each_model_at_its_table_s_name_region_and_endpoint() -> None:
    bind_tables(
        jobs_table="jobs-1", files_table="files-1", region="eu-west-1", endpoint_url="http://x"
    )
    assert {model: model.Meta.table_name for model in TABLE_OF} == {
        model: "jobs-1" if table is InJobsTable else "files-1" for model, table in TABLE_OF.items()
    }
    assert {(model.Meta.region, model.Meta.host) for model in TABLE_OF} == {
        ("eu-west-1", "http://x")
    }


@pytest.mark.usefixtures("bindings_restored")
def test_the_runtime_binds_the_tables_config_names_in_lambda_s_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBS_TABLE_NAME", "stack-jobs")
    monkeypatch.setenv("FILES_TABLE_NAME", "stack-files")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    runtime.reset()
    runtime.tables()
    assert JobModel.Meta.table_name == "stack-jobs"
    assert UsageModel.Meta.table_name == "stack-files"
    assert {model.Meta.region for model in TABLE_OF} == {"ap-south-1"}
