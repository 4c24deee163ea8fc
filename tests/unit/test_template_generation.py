"""template.yaml is generated from a row per job type (tools/template.py, infra/template/): the
committed file is what the table gives, and a new row brings every resource and list entry its
type needs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.job import JobType
from filejobs.domain.scanning import GATED_JOB_TYPES
from filejobs_dev.infra.template import load_template

# tools/ is a folder of scripts, not a package: its modules import (and mypy checks them) by name.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import template as generator

ROWS = generator.load_rows()

# A seventh type as docs/ADDING_A_JOB_TYPE.md adds it: nothing but its row.
IMAGE_OCR_ROW = """
- type: image_ocr
  gated: true
  layers: [ImagingLayer]
  memory: 1536
  timeout: 60
  ephemeral_storage: 1024
"""
UNGATED_ROW = """
- type: checksum_audit
  gated: false
  memory: 256
  timeout: 30
  files_table_grant: |
    - Sid: FilesTableReadWrite
      Effect: Allow
      Action: [dynamodb:GetItem, dynamodb:UpdateItem]
      Resource: !GetAtt FilesTable.Arn
"""


def test_the_committed_template_is_what_the_table_generates() -> None:
    assert generator.TEMPLATE.read_text() == generator.render(), (
        "template.yaml differs from infra/template/: run .venv/bin/python tools/template.py"
    )


def test_the_table_has_a_row_per_job_type_in_the_enums_order() -> None:
    assert [row.type for row in ROWS] == [job_type.value for job_type in JobType]


def test_a_row_is_gated_exactly_when_its_type_waits_for_the_scans_verdict() -> None:
    gated = {row.type for row in ROWS if row.gated}
    assert gated == {job_type.value for job_type in GATED_JOB_TYPES}


def generated_with(tmp_path: Path, extra_row: str) -> dict[str, Any]:
    """The template generated from today's sources with one more row."""
    sources = tmp_path / "template"
    shutil.copytree(generator.SOURCES, sources)
    table = sources / "job_types.yaml"
    table.write_text(table.read_text() + extra_row)
    written = tmp_path / "template.yaml"
    written.write_text(generator.render(sources))
    return load_template(written)


def statement(resources: dict[str, Any], role: str, sid: str) -> dict[str, Any]:
    for policy in resources[role]["Properties"]["Policies"]:
        for found in policy["PolicyDocument"]["Statement"]:
            if found.get("Sid") == sid:
                return dict(found)
    raise AssertionError(f"{role} has no statement {sid}")


def names(value: list[Any]) -> list[str]:
    """The logical ids a list of `!GetAtt X.Arn` / `!Ref X` names, in order."""
    found = []
    for item in value:
        target = item.get("Fn::GetAtt") or item.get("Ref")
        found.append(target.split(".")[0] if isinstance(target, str) else target[0])
    return found


def test_a_new_row_brings_its_queues_their_alarm_its_worker_and_its_role(tmp_path: Path) -> None:
    resources = generated_with(tmp_path, IMAGE_OCR_ROW)["Resources"]

    for lane in ("ImageOcrQueue", "ImageOcrHighQueue", "ImageOcrLowQueue"):
        queue = resources[lane]["Properties"]
        assert queue["VisibilityTimeout"] == 360  # 6 x the worker's 60 s
        assert names([queue["RedrivePolicy"]["deadLetterTargetArn"]]) == ["ImageOcrDeadLetterQueue"]
    assert resources["ImageOcrDeadLetterQueueAlarm"]["Type"] == "AWS::CloudWatch::Alarm"

    worker = resources["ImageOcrWorker"]["Properties"]
    assert (worker["MemorySize"], worker["Timeout"]) == (1536, 60)
    assert worker["EphemeralStorage"] == {"Size": 1024}
    assert worker["Layers"] == [{"Ref": "ImagingLayer"}]
    assert worker["Environment"]["Variables"]["JOB_TYPE"] == "image_ocr"
    assert names([event["Properties"]["Queue"] for event in worker["Events"].values()]) == [
        "ImageOcrQueue",
        "ImageOcrHighQueue",
        "ImageOcrLowQueue",
    ]
    log_group = resources["ImageOcrWorkerLogGroup"]["Properties"]["LogGroupName"]
    assert log_group == {"Fn::Sub": "/aws/lambda/${AWS::StackName}/image-ocr-worker"}

    # Gated: it only reads the files table, and only the uploads the scan passed.
    files = statement(resources, "ImageOcrWorkerRole", "FilesTableRead")
    assert files["Action"] == "dynamodb:GetItem"
    assert "Condition" in statement(resources, "ImageOcrWorkerRole", "ReadUploads")


def test_a_new_row_joins_every_list_of_the_job_types(tmp_path: Path) -> None:
    template = generated_with(tmp_path, IMAGE_OCR_ROW)
    resources = template["Resources"]

    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["QUEUE_URL_IMAGE_OCR_LOW"] == {"Ref": "ImageOcrLowQueue"}
    sweep = resources["SweepFunction"]["Properties"]["Environment"]["Variables"]
    assert sweep["DEAD_LETTER_QUEUE_URL_IMAGE_OCR"] == {"Ref": "ImageOcrDeadLetterQueue"}
    released = statement(resources, "VirusScanWorkerRole", "ReleaseJobsOfCleanFile")
    assert "ImageOcrHighQueue" in names(released["Resource"])
    enqueued = statement(resources, "IngestFunctionRole", "EnqueueJobs")
    assert names(enqueued["Resource"])[-3:] == [
        "ImageOcrQueue",
        "ImageOcrHighQueue",
        "ImageOcrLowQueue",
    ]

    # The queues' policy names its senders in alphabetical order, the new role among them.
    sends = resources["JobQueuesPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    senders = names(sends["Condition"]["ArnNotEquals"]["aws:PrincipalArn"])
    assert "ImageOcrWorkerRole" in senders
    assert senders == sorted(senders)

    backlog = resources["JobsBacklogAlarm"]["Properties"]["Metrics"]
    assert backlog[-1]["Expression"] == "MAX([q0,q1,q2,q3,q4,q5,q6]) / 60"
    assert backlog[-2]["Id"] == "q6"


def test_only_an_ungated_types_worker_reads_uploads_before_the_verdict(tmp_path: Path) -> None:
    resources = generated_with(tmp_path, UNGATED_ROW)["Resources"]

    policy = resources["UploadsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    unscanned = next(found for found in policy if found["Sid"] == "ReadOnlyWhatTheScanPassed")
    assert "ChecksumAuditWorkerRole" in names(
        unscanned["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    )
    assert "Condition" not in statement(resources, "ChecksumAuditWorkerRole", "ReadUploads")
    released = statement(resources, "VirusScanWorkerRole", "ReleaseJobsOfCleanFile")
    assert "ChecksumAuditQueue" not in names(released["Resource"])
    worker = resources["ChecksumAuditWorker"]["Properties"]
    assert "Layers" not in worker and "EphemeralStorage" not in worker


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ("gated: false", "an ungated type names its files_table_grant"),
        ("gated: true, files_table_grant: x", "a gated type only reads the files table"),
    ],
)
def test_only_an_ungated_row_says_what_it_may_do_with_the_files_table(
    tmp_path: Path, fields: str, refusal: str
) -> None:
    table = tmp_path / "job_types.yaml"
    table.write_text(f"- {{type: checksum_audit, memory: 256, timeout: 30, {fields}}}\n")
    with pytest.raises(ValueError, match=f"checksum_audit: {refusal}"):
        generator.load_rows(table)


def test_the_check_fails_naming_the_command_that_regenerates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = tmp_path / "template.yaml"
    edited.write_text(generator.render().replace("MemorySize: 3008", "MemorySize: 4096"))
    monkeypatch.setattr(generator, "TEMPLATE", edited)
    monkeypatch.setattr(sys, "argv", ["template.py", "--check"])

    assert generator.main() == 1
    assert "run .venv/bin/python tools/template.py" in capsys.readouterr().err
