"""The API's CORS (UploadsAllowedOrigins, as API_ALLOWED_ORIGINS): each listed origin, and only
those, is answered by name, on a preflight and on every answer, a refusal's included; with none
listed, no CORS header at all. The resolver reads its origins as the function starts: each case
runs the real handler in a process of its own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.fresh_process import in_fresh_process

ROOT = Path(__file__).resolve().parents[2]
APP, ADMIN = "https://app.example.com", "https://admin.example.com"


def answers(origins: str, requests: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """(status, CORS headers) of an unidentified caller's `requests` (method, origin) to
    /uploads, the function started with API_ALLOWED_ORIGINS=`origins`."""
    os.environ["API_ALLOWED_ORIGINS"] = origins
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    from functions.api import app as api  # noqa: PLC0415 (after the environment is set)

    event = json.loads((ROOT / "events" / "api_get_job.json").read_text())
    event["requestContext"].pop("authorizer", None)
    event["requestContext"]["identity"] = {}
    arn = "arn:aws:lambda:us-east-1:123456789012:function:api"
    context = SimpleNamespace(
        function_name="api", memory_limit_in_mb=128, invoked_function_arn=arn, aws_request_id="r"
    )
    found = []
    for method, origin in requests:
        event.update(httpMethod=method, path="/uploads", resource="/uploads", body=None)
        event["headers"] = {"Origin": origin}
        event["multiValueHeaders"] = {"Origin": [origin]}
        answer = api.handler(event, context)
        headers = answer.get("multiValueHeaders") or {}
        cors = {k: v[0] for k, v in headers.items() if k.startswith("Access-Control")}
        found.append({"status": answer["statusCode"], "cors": cors})
    return found


def test_the_listed_origins_are_answered_by_name_and_no_other() -> None:
    asked = [("OPTIONS", ADMIN), ("OPTIONS", "https://evil.example.com"), ("POST", APP)]
    preflight, foreign, refused = in_fresh_process(
        answers, origins=f"{APP}, {ADMIN}", requests=asked
    )
    assert preflight["status"] == 204
    assert preflight["cors"]["Access-Control-Allow-Origin"] == ADMIN
    assert "POST" in preflight["cors"]["Access-Control-Allow-Methods"]
    assert "Authorization" in preflight["cors"]["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Origin" not in foreign["cors"]
    # a refusal (no caller identity) is readable by the page: it can show why
    assert refused["status"] == 401 and refused["cors"]["Access-Control-Allow-Origin"] == APP


def test_without_origins_the_api_sends_no_cors_header() -> None:
    (preflight, refused) = in_fresh_process(
        answers, origins="", requests=[("OPTIONS", APP), ("POST", APP)]
    )
    assert preflight["cors"] == {} and preflight["status"] == 404
    assert refused["cors"] == {} and refused["status"] == 401
