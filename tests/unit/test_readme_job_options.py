"""README's "Requesting a job" section says what the API does, to the letter: every example
request is one the API accepts (the curl bodies and the CLI's alike), every option of every job
type is in its table, and the refusal it shows is the one the API gives."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from filejobs.api import parsing
from filejobs.domain.job import JobType
from filejobs.domain.job_options import OPTIONS
from filejobs.services.errors import InvalidRequestError
from filejobs_cli import requests
from filejobs_cli.main import parser

README = Path(__file__).resolve().parents[2] / "README.md"
FILE_ID = "0b0f8a4e-6d1c-4a8e-9f3b-2c7d5e1a9b40"


def section() -> str:
    text = README.read_text()
    start = text.index("## Requesting a job: options, delays, attempts")
    return text[start : text.index("\n## ", start + 1)]


def curl_bodies() -> list[str]:
    return re.findall(r"^job \"\$\w+\" +'(\{.*\})'$", section(), re.MULTILINE)


def cli_lines() -> list[str]:
    return re.findall(r"^filejobs request (.*)$", section(), re.MULTILINE)


def test_there_is_one_curl_and_one_cli_example_of_each_job_type() -> None:
    typed = [json.loads(body)["job_type"] for body in curl_bodies()]
    assert sorted(typed) == sorted(t.value for t in JobType)
    assert sorted(shlex.split(line)[1] for line in cli_lines()) == sorted(t.value for t in JobType)


@pytest.mark.parametrize("body", curl_bodies())
def test_each_curl_example_is_a_request_the_api_accepts(body: str) -> None:
    parsing.request_job(FILE_ID, body, None)


@pytest.mark.parametrize("line", cli_lines())
def test_each_cli_example_sends_a_request_the_api_accepts(line: str) -> None:
    argv = [FILE_ID if word.startswith("$") else word for word in shlex.split(line)]
    arguments = parser().parse_args(["request", *argv])
    parsing.request_job(FILE_ID, json.dumps(requests.body_of(arguments)), None)


def test_every_option_is_in_the_table_and_the_refusal_shown_is_the_api_s() -> None:
    text = section()
    for options in OPTIONS.values():
        for option in options.options:
            assert f"| `{option.name}` |" in text, option.name
    shown = json.loads(re.findall(r"^\{\"error\".*\}$", text, re.MULTILINE)[0])
    body = {"job_type": "thumbnail_generation", "input_data": {"sizes": [128, 8000]}}
    with pytest.raises(InvalidRequestError) as refused:
        parsing.request_job(FILE_ID, json.dumps(body), None)
    assert shown == {"error": {"code": "unprocessable", "message": refused.value.message}}
    example = re.findall(r"^```json\n(\{\"job_type\".*?\})\n```$", text, re.MULTILINE | re.DOTALL)
    parsing.request_job(FILE_ID, example[0], None)
