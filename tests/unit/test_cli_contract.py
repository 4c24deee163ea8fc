"""Specification: the job types and statuses are written once, in the API's contract, and the CLI
offers what the contract says.

The chain: the runtime's enums (domain/job.py) -> the committed OpenAPI document's
`components.schemas.JobType` and `JobStatus` (tools/openapi.py; the document's drift is
tests/integration/test_api_requests.py's) -> cli/filejobs_cli/contract.py, written by the same
tool from the document, since the CLI installs without the runtime -> every CLI option that takes
a job type or a status."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filejobs.domain.job import JobStatus, JobType
from filejobs_cli import contract
from filejobs_cli.main import parser
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
TOOL = load_script(ROOT / "tools" / "openapi.py", "openapi_tool")
DOCUMENT: dict[str, Any] = json.loads(TOOL.DOCUMENT.read_text())
SCHEMAS: dict[str, Any] = DOCUMENT["components"]["schemas"]
RUNTIME_TYPES = tuple(t.value for t in JobType)
RUNTIME_STATUSES = tuple(s.value for s in JobStatus)
JOB_TYPE_REF = {"$ref": "#/components/schemas/JobType"}
JOB_STATUS_REF = {"$ref": "#/components/schemas/JobStatus"}


def lists_in(value: Any) -> Iterator[list[Any]]:
    """Every JSON array in the document, nested ones included."""
    if isinstance(value, list):
        yield value
        for item in value:
            yield from lists_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from lists_in(item)


def choices_offered(values: tuple[str, ...]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(command, option) -> its choices, for every option of the CLI that offers one of values."""
    found: dict[tuple[str, str], tuple[str, ...]] = {}

    def walk(command: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, (*path, name))
            elif action.choices and set(action.choices) & set(values):
                option = action.option_strings[0] if action.option_strings else action.dest
                found[" ".join(path), option] = tuple(action.choices)

    walk(parser(), ())
    return found


# --- the document names them once -------------------------------------------------------------


def test_the_document_lists_the_runtimes_job_types_and_statuses() -> None:
    assert tuple(SCHEMAS["JobType"]["enum"]) == RUNTIME_TYPES
    assert tuple(SCHEMAS["JobStatus"]["enum"]) == RUNTIME_STATUSES


def test_the_document_writes_each_list_once() -> None:
    arrays = [tuple(found) for found in lists_in(DOCUMENT)]
    assert arrays.count(RUNTIME_TYPES) == 1
    assert arrays.count(RUNTIME_STATUSES) == 1


def test_the_job_view_filters_and_requests_refer_to_the_one_list() -> None:
    job = SCHEMAS["Job"]["properties"]
    assert (job["job_type"], job["status"]) == (JOB_TYPE_REF, JOB_STATUS_REF)
    job_filter = SCHEMAS["JobFilter"]["properties"]
    assert (job_filter["job_type"], job_filter["status"]) == (JOB_TYPE_REF, JOB_STATUS_REF)
    assert SCHEMAS["PresetJob"]["properties"]["job_type"] == JOB_TYPE_REF
    assert SCHEMAS["ScheduleRequest"]["properties"]["job_type"] == JOB_TYPE_REF


def test_the_query_parameters_refer_to_the_one_list() -> None:
    def parameter(path: str, name: str) -> Any:
        operation = DOCUMENT["paths"][path]["get"]
        return next(p["schema"] for p in operation["parameters"] if p["name"] == name)

    assert parameter("/jobs", "job_type") == JOB_TYPE_REF
    assert parameter("/jobs", "status") == JOB_STATUS_REF
    assert parameter("/files/{file_id}/jobs", "status") == JOB_STATUS_REF
    assert parameter("/failures", "job_type") == JOB_TYPE_REF


# --- the CLI's module is written from the document ----------------------------------------------


def test_the_cli_contract_is_what_the_tool_writes_from_the_committed_document() -> None:
    assert TOOL.CLI_CONTRACT.read_text() == TOOL.cli_contract(DOCUMENT), (
        "cli/filejobs_cli/contract.py drifted from openapi.json: run .venv/bin/python "
        "tools/openapi.py"
    )


def test_the_cli_contract_follows_the_document_not_the_runtime() -> None:
    # given a document that names one more job type than the runtime has
    grown = json.loads(json.dumps(DOCUMENT))
    grown["components"]["schemas"]["JobType"]["enum"].append("transcription")
    # when the module is written from it, then the module offers it too
    written: dict[str, Any] = {}
    exec(TOOL.cli_contract(grown), written)  # the tool's own output, nothing from outside
    assert written["JOB_TYPES"] == (*RUNTIME_TYPES, "transcription")
    assert written["JOB_STATUSES"] == RUNTIME_STATUSES


def test_the_cli_knows_every_job_type_and_status_the_runtime_has() -> None:
    assert contract.JOB_TYPES == RUNTIME_TYPES
    assert contract.JOB_STATUSES == RUNTIME_STATUSES


# --- every option of the CLI offers them all -----------------------------------------------------


def test_every_option_taking_a_job_type_offers_every_one() -> None:
    offered = choices_offered(RUNTIME_TYPES)
    assert {("jobs", "--type"), ("request", "job_type"), ("failures", "--type")} <= set(offered)
    # a schedule runs any type but the scan: the API answers 422 to it (use --rescan)
    assert offered.pop(("schedules add", "--run")) == tuple(
        t for t in RUNTIME_TYPES if t != JobType.VIRUS_SCAN
    )
    for option, choices in offered.items():
        assert choices == RUNTIME_TYPES, option


def test_every_option_taking_a_status_offers_every_one() -> None:
    offered = choices_offered(RUNTIME_STATUSES)
    assert {("jobs", "--status"), ("search", "--status")} <= set(offered)
    for option, choices in offered.items():
        assert choices == RUNTIME_STATUSES, option
