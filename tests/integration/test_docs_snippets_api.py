"""The manual's schedule and preset requests (docs/snippets/schedule_request.sh, presets.sh), run as
written against a recorder with the local stack's operator token, then sent to the status API's
handler on moto tables, queues and EventBridge Scheduler built from template.yaml, as the operator
that token names: each is accepted, and does what its page says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from filejobs import runtime
from tests.doc_snippets import LOCAL, Call, run
from tests.integration.test_api import ACME, OPERATOR, Api, stack  # noqa: F401


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture)
    runtime.reset()
    runtime.tables()
    return stack


def sent(api: Api, call: Call) -> tuple[int, Any]:
    """The recorded curl request, answered by the API's handler for the caller its token names."""
    assert f"Authorization: Bearer {LOCAL['api_token']}" in call.option("-H")
    url = urlsplit(call.url)
    assert f"{url.scheme}://{url.netloc}" == LOCAL["api_url"]
    query = dict(parse_qsl(url.query)) or None
    (method,) = call.option("-X")
    (body,) = call.option("-d")
    return api.call(method, url.path, who=OPERATOR, query=query, body=body)


def test_the_schedule_example_makes_the_nightly_thumbnail_schedule_of_acme(
    api: Api, tmp_path: Path
) -> None:
    (request,) = run(["local_api.sh", "schedule_request.sh"], tmp_path)
    status, made = sent(api, request)
    assert status == 201, made
    assert made["tenant"] == "acme" and made["prefix"] == "uploads/acme/avatars/"
    assert (made["expression"], made["timezone"]) == ("cron(0 3 * * ? *)", "Europe/Paris")
    listed = api.call("GET", "/schedules", who=ACME)[1]["schedules"]
    assert [schedule["id"] for schedule in listed] == [made["id"]]


def test_the_preset_example_saves_the_avatars_preset_of_acme(api: Api, tmp_path: Path) -> None:
    request, *_ = run(["local_api.sh", "presets.sh"], tmp_path)
    status, saved = sent(api, request)
    assert status in {200, 201}, saved
    status, shown = api.call("GET", "/presets/avatars", who=ACME)
    assert status == 200, shown
    assert shown["prefixes"] == ["uploads/acme/avatars/"]
    assert [job["job_type"] for job in shown["jobs"]] == ["virus_scan", "thumbnail_generation"]
    assert shown["jobs"][1]["options"] == {"sizes": [512], "format": "webp"}


def test_without_the_tenant_the_operator_s_requests_are_refused_naming_it(api: Api) -> None:
    # why the examples name the tenant: the token they use is the operator's
    schedule = {
        "name": "avatars nightly",
        "expression": "cron(0 3 * * ? *)",
        "action": "rescan",
        "prefix": "uploads/acme/avatars/",
    }
    status, refused = api.call("POST", "/schedules", who=OPERATOR, body=json.dumps(schedule))
    assert status == 422 and refused["error"]["message"].startswith("tenant: ")
    preset = {"jobs": [{"job_type": "virus_scan"}], "prefixes": ["uploads/acme/avatars/"]}
    status, refused = api.call("PUT", "/presets/avatars", who=OPERATOR, body=json.dumps(preset))
    assert status == 422 and refused["error"]["message"].startswith("tenant: ")
