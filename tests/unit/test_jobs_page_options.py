"""docs/JOBS.md, "Requesting a job", says what the API does, to the letter: its curl and CLI
examples (docs/snippets/request_jobs_*.sh), run as written against a recorder, send requests the
API accepts, one of each job type; every option of every job type is in the page's table; the
example body is one the API accepts and the refusal shown is the one the API gives."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from filejobs.api import parsing
from filejobs.domain.job import JobType
from filejobs.domain.job_options import OPTIONS
from filejobs.services.errors import InvalidRequestError
from filejobs_cli import requests
from filejobs_cli.main import parser
from tests.doc_snippets import LOCAL, ROOT, Call, run, snippet

FILE_ID = "0b0f8a4e-6d1c-4a8e-9f3b-2c7d5e1a9b40"
IDS = {name: FILE_ID for name in ("IMAGE_ID", "FILE_ID", "VIDEO_ID", "PDF_ID")}
TYPES = sorted(t.value for t in JobType)


def section() -> str:
    text = (ROOT / "docs" / "JOBS.md").read_text()
    start = text.index("## Requesting a job: options, delays, attempts")
    return text[start : text.index("\n## ", start + 1)]


@pytest.fixture(scope="module")
def curl_calls(tmp_path_factory: pytest.TempPathFactory) -> list[Call]:
    folder = tmp_path_factory.mktemp("curl")
    return run(["local_api.sh", "request_jobs_curl.sh"], folder, IDS)


@pytest.fixture(scope="module")
def cli_calls(tmp_path_factory: pytest.TempPathFactory) -> list[Call]:
    return run(["request_jobs_cli.sh"], tmp_path_factory.mktemp("cli"), IDS)


def test_the_page_includes_both_examples_and_the_local_stack_s_settings() -> None:
    text = section()
    for name in ("local_api.sh", "request_jobs_curl.sh", "request_jobs_cli.sh"):
        assert f'--8<-- "docs/snippets/{name}"' in text, name


def test_the_curl_example_posts_one_request_of_each_type_as_the_operator(
    curl_calls: list[Call],
) -> None:
    assert {call.program for call in curl_calls} == {"curl"}
    assert sorted(json.loads(call.option("-d")[0])["job_type"] for call in curl_calls) == TYPES
    for call in curl_calls:
        assert call.option("-X") == ["POST"]
        assert call.url == f"{LOCAL['api_url']}/files/{FILE_ID}/jobs"
        assert f"Authorization: Bearer {LOCAL['api_token']}" in call.option("-H")


def test_each_curl_request_is_one_the_api_accepts(curl_calls: list[Call]) -> None:
    for call in curl_calls:
        parsing.request_job(FILE_ID, call.option("-d")[0], None)


def test_the_cli_example_sends_one_request_of_each_type_the_api_accepts(
    cli_calls: list[Call],
) -> None:
    sent = []
    for call in cli_calls:
        assert call.program == "filejobs" and call.argv[0] == "request"
        body = requests.body_of(parser().parse_args(call.argv))
        parsing.request_job(FILE_ID, json.dumps(body), None)
        sent.append(body["job_type"])
    assert sorted(sent) == TYPES


def test_every_option_is_in_the_table_and_the_refusal_shown_is_the_api_s() -> None:
    text = section()
    for options in OPTIONS.values():
        for option in options.options:
            assert f"| `{option.name}` |" in text, option.name
    assert '--8<-- "docs/snippets/job_refused.json"' in text
    shown = json.loads(snippet("job_refused.json"))
    body = {"job_type": "thumbnail_generation", "input_data": {"sizes": [128, 8000]}}
    with pytest.raises(InvalidRequestError) as refused:
        parsing.request_job(FILE_ID, json.dumps(body), None)
    assert shown == {"error": {"code": "unprocessable", "message": refused.value.message}}


def test_the_example_body_is_one_the_api_accepts_with_its_delay_and_budget() -> None:
    assert '--8<-- "docs/snippets/job_request.json"' in section()
    request = parsing.request_job(FILE_ID, snippet("job_request.json"), None)
    assert request.job_type is JobType.COMPRESSION
    assert request.input_data == {"algorithm": "gzip", "level": 9}
    assert (request.delay, request.max_retries) == (timedelta(seconds=600), 1)


def test_a_snippet_that_is_not_there_or_reads_an_unset_variable_fails_its_run(
    tmp_path: Path,
) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        run(["no_such_snippet.sh"], tmp_path)
    with pytest.raises(subprocess.CalledProcessError):
        run(["request_jobs_cli.sh"], tmp_path)  # $IMAGE_ID and the others unset
