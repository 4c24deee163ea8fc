"""The API's one error shape names its code from one list, and the OpenAPI document a client
reads names every code the API can answer (a 429 once answered `too_many_requests`, a code the
document's enum did not have, and schemathesis caught it on POST /operations)."""

from __future__ import annotations

import json
from pathlib import Path

from filejobs.api.rendering import ErrorCode, error_body, status_of
from filejobs.services.errors import RequestRefusedError

OPENAPI = Path(__file__).resolve().parents[2] / "layers/filejobs/filejobs/api_docs/openapi.json"


def documented_codes() -> list[str]:
    error = json.loads(OPENAPI.read_text())["components"]["schemas"]["Error"]
    codes: list[str] = error["properties"]["error"]["properties"]["code"]["enum"]
    return codes


def every_refusal() -> list[type[RequestRefusedError]]:
    found, waiting = [], [RequestRefusedError]
    while waiting:
        kind = waiting.pop()
        found.append(kind)
        waiting.extend(kind.__subclasses__())
    return found


def test_every_refusal_answers_a_code_the_document_names() -> None:
    refusals = every_refusal()
    assert len(refusals) > 7  # the seven statuses' classes and the refusals built on them
    for kind in refusals:
        status, code = status_of(kind.__new__(kind))
        assert code in documented_codes(), f"{kind.__name__} answers {status} {code}"


def test_the_document_names_exactly_the_codes_the_api_has() -> None:
    assert documented_codes() == [code.value for code in ErrorCode]


def test_a_code_is_written_as_its_plain_name() -> None:
    body = json.loads(error_body(ErrorCode.TOO_MANY_REQUESTS, "wait"))
    assert body == {"error": {"code": "too_many_requests", "message": "wait"}}
