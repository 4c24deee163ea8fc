"""Specification: `make delete` (tools/deploy.py delete) deletes a stack whose buckets hold
objects: CloudFormation deletes no such bucket, so the tool empties them (every version and
delete marker) once the operator typed the stack's name, runs `sam delete`, and names the
tables the stack keeps. Without the confirmation nothing is deleted."""

from __future__ import annotations

import json
import runpy
import stat
from pathlib import Path

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = runpy.run_path(str(ROOT / "tools" / "deploy.py"), run_name="deploy")
Environment = DEPLOY["Environment"]
delete = DEPLOY["delete"]
DeployError: type[Exception] = DEPLOY["DeployError"]
STACK = "filejobs-doomed"

# A stand-in for the stack: two buckets (one versioned, as the uploads bucket is) and a table.
TEMPLATE = {
    "Resources": {
        "UploadsBucket": {
            "Type": "AWS::S3::Bucket",
            "Properties": {"VersioningConfiguration": {"Status": "Enabled"}},
        },
        "OutputsBucket": {"Type": "AWS::S3::Bucket"},
        "JobsTable": {
            "Type": "AWS::DynamoDB::Table",
            "DeletionPolicy": "Retain",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
                "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            },
        },
    }
}


@pytest.fixture
def stack(aws: None) -> dict[str, str]:
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
    resources = cloudformation.describe_stack_resources(StackName=STACK)["StackResources"]
    names = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
    s3 = boto3.client("s3")
    s3.put_bucket_versioning(
        Bucket=names["UploadsBucket"], VersioningConfiguration={"Status": "Enabled"}
    )
    for version in (b"one", b"two"):
        s3.put_object(Bucket=names["UploadsBucket"], Key="uploads/acme/a.txt", Body=version)
    s3.delete_object(Bucket=names["UploadsBucket"], Key="uploads/acme/a.txt")  # a delete marker
    s3.put_object(Bucket=names["OutputsBucket"], Key="derived/acme/x/thumb.webp", Body=b"x")
    return names


def fake_sam(tmp_path: Path) -> tuple[str, Path]:
    """A `sam` that records its arguments instead of reaching AWS."""
    record = tmp_path / "sam-calls.txt"
    script = tmp_path / "sam"
    script.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), record


def versions(bucket: str) -> int:
    answer = boto3.client("s3").list_object_versions(Bucket=bucket)
    return len(answer.get("Versions", [])) + len(answer.get("DeleteMarkers", []))


def test_the_buckets_are_emptied_once_the_stack_s_name_is_typed_then_sam_deletes_it(
    stack: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sam, record = fake_sam(tmp_path)
    asked: list[str] = []

    def operator(prompt: str) -> str:
        asked.append(prompt)
        return STACK

    # when the operator deletes the environment's stack and types its name
    delete(Environment("default", STACK, "us-east-1", None), sam, yes=False, ask=operator)
    # then it was shown what the buckets hold before it was asked
    shown = capsys.readouterr().out
    assert f"s3://{stack['UploadsBucket']}: 3 object versions and delete markers" in shown
    assert f"s3://{stack['OutputsBucket']}: 1 object versions" in shown
    assert asked == [f"Type {STACK} to empty these buckets for good and delete the stack: "]
    # and every version and delete marker is gone, then sam deleted the stack, unprompted
    assert versions(stack["UploadsBucket"]) == versions(stack["OutputsBucket"]) == 0
    assert record.read_text().split() == ["delete", "--config-env", "default", "--no-prompts"]
    # and the table it keeps is named
    assert f"DynamoDB table {stack['JobsTable']}" in shown


def test_without_the_stack_s_name_nothing_is_deleted(stack: dict[str, str], tmp_path: Path) -> None:
    sam, record = fake_sam(tmp_path)
    with pytest.raises(DeployError, match="not confirmed: nothing was deleted"):
        delete(Environment("default", STACK, "us-east-1", None), sam, yes=False, ask=lambda _: "y")
    assert versions(stack["UploadsBucket"]) == 3
    assert not record.exists()


def test_a_stack_that_does_not_exist_is_said_so(aws: None, tmp_path: Path) -> None:
    sam, record = fake_sam(tmp_path)
    with pytest.raises(DeployError, match="stack filejobs-nowhere does not exist"):
        delete(Environment("default", "filejobs-nowhere", "us-east-1", None), sam, yes=True)
    assert not record.exists()
