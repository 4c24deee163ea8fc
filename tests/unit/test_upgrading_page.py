"""docs/UPGRADING.md's table of the tables, their global secondary indexes and what happens to
each when replaced or removed is template.yaml's, so the page that tells an operator how to
stage index changes names the indexes a stack really has."""

from __future__ import annotations

import re
from pathlib import Path

from filejobs_dev.infra.template import load_template, resources_of_type

PAGE = Path(__file__).resolve().parents[2] / "docs" / "UPGRADING.md"


def page_rows() -> dict[str, tuple[list[str], str]]:
    text = PAGE.read_text()
    start = text.index("<!-- indexes: checked against template.yaml")
    table = text[start : text.index("<!-- indexes: end -->", start)]
    rows: dict[str, tuple[list[str], str]] = {}
    for line in table.splitlines()[3:]:
        name, indexes, kept = (cell.strip() for cell in line.strip("|").split("|"))
        policy = re.search(r"`(Retain|Delete)`", kept)
        assert policy is not None, line
        rows[name.strip("`")] = (re.findall(r"`([a-z_]+)`", indexes), policy[1])
    return rows


def template_rows() -> dict[str, tuple[list[str], str]]:
    tables = resources_of_type(load_template(), "AWS::DynamoDB::Table")
    return {
        name: (
            [index["IndexName"] for index in table["Properties"].get("GlobalSecondaryIndexes", [])],
            table["UpdateReplacePolicy"],
        )
        for name, table in tables.items()
    }


def test_the_page_names_every_table_its_indexes_and_its_replace_policy() -> None:
    assert page_rows() == template_rows()


def test_every_table_says_what_a_replacement_does_to_it() -> None:
    for name, table in resources_of_type(load_template(), "AWS::DynamoDB::Table").items():
        assert table["UpdateReplacePolicy"] == table["DeletionPolicy"], name
