"""Least privilege, reviewed: every role's permissions are a committed list
(docs/IAM_PERMISSIONS.md, written by tools/iam_permissions.py), so a new permission is a visible
diff; and the roles of the workers that decode untrusted bytes cannot write a file item (the scan
verdict lives there: a decoder exploit must not be able to set it back to clean); a write their
keys narrow to the table's index items (`phash#`: near duplicates) is not one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.infra.template import load_template
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
DECODING_WORKERS = (
    "ThumbnailGenerationWorker",
    "VideoThumbnailWorker",
    "DocumentPreviewWorker",
    "CompressionWorker",
)
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems", "*"}


TOOL = load_script(ROOT / "tools" / "iam_permissions.py", "iam_tool")


def test_the_committed_permissions_are_the_template_s() -> None:
    tool = TOOL
    assert tool.DOCUMENT.read_text(encoding="utf-8") == tool.render(load_template()), (
        "template.yaml's IAM changed: run .venv/bin/python tools/iam_permissions.py and commit "
        "the reviewed docs/IAM_PERMISSIONS.md with it"
    )


def test_a_new_permission_changes_the_committed_list() -> None:
    template = load_template()
    before = TOOL.render(template)
    role = template["Resources"]["ThumbnailGenerationWorkerRole"]["Properties"]
    statements = role["Policies"][0]["PolicyDocument"]["Statement"]
    statements.append({"Effect": "Allow", "Action": "s3:DeleteBucket", "Resource": "*"})
    assert "`s3:DeleteBucket` on `*`" in TOOL.render(template)
    assert "s3:DeleteBucket" not in before


def _grants(role: dict[str, Any], *, with_file_items: bool = False) -> list[tuple[str, Any]]:
    """(action, resource) of each statement; `with_file_items`: only of those that may reach a
    file's item (not narrowed to other items of the table by their keys)."""
    found = []
    for policy in role["Properties"].get("Policies", []):
        for statement in policy["PolicyDocument"]["Statement"]:
            if with_file_items and _only_other_items(statement):
                continue
            actions = statement["Action"]
            resources = statement.get("Resource", [])
            for action in actions if isinstance(actions, list) else [actions]:
                for resource in resources if isinstance(resources, list) else [resources]:
                    found.append((action, resource))
    return found


def _only_other_items(statement: dict[str, Any]) -> bool:
    """The statement holds only for items whose partition key starts with a prefix holding '#'
    (`phash#`: the near-duplicate index): a file's id is a UUID, which never does. Every key of
    the request must match (ForAllValues), or one file id among index keys would pass."""
    condition = statement.get("Condition", {})
    for operator in ("ForAllValues:StringLike", "ForAllValues:StringEquals"):
        patterns = condition.get(operator, {}).get("dynamodb:LeadingKeys")
        if patterns:
            prefixes = [str(p).split("*", 1)[0] for p in patterns]
            return all("#" in prefix for prefix in prefixes)
    return False


def _is_files_table(resource: Any) -> bool:
    return "FilesTable" in str(resource) or resource == "*"


@pytest.mark.parametrize("worker", DECODING_WORKERS)
def test_a_worker_that_decodes_untrusted_bytes_cannot_write_a_file_item(worker: str) -> None:
    role = load_template()["Resources"][f"{worker}Role"]
    writes = [
        (action, resource)
        for action, resource in _grants(role, with_file_items=True)
        if action.startswith("dynamodb:")
        and action.split(":", 1)[1] in WRITES
        and _is_files_table(resource)
    ]
    assert writes == []
    assert ("dynamodb:GetItem", {"Fn::GetAtt": "FilesTable.Arn"}) in _grants(role)  # the gate


@pytest.mark.parametrize(
    ("patterns", "narrowed"),
    [
        (["phash#*"], True),
        (["phash#*", "sha256#*"], True),
        (["phash#*", "*"], False),
        (["*"], False),
        (["0b0f8a4e-*"], False),
    ],
)
def test_a_write_narrowed_to_index_items_is_no_file_item_write(
    patterns: list[str], narrowed: bool
) -> None:
    statement = {"Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": patterns}}}
    assert _only_other_items(statement) is narrowed
    any_value = {"Condition": {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": patterns}}}
    assert _only_other_items(any_value) is False
