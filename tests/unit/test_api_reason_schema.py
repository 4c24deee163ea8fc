"""The OpenAPI document describes a reason exactly as the API checks it: a client that follows
the schema is never refused (schemathesis' "schema-valid request rejected"), and every reason
the schema allows is one the API stores."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import filejobs.api_docs
from filejobs.api.parsing import cancel_job
from filejobs.services.errors import RequestRefusedError

DOCUMENT = json.loads((Path(filejobs.api_docs.__file__).parent / "openapi.json").read_text())
REQUESTS = ("CancelRequest", "RescanRequest", "RescanFilesRequest")


def reason_schema(request: str) -> dict[str, Any]:
    schema: dict[str, Any] = DOCUMENT["components"]["schemas"][request]["properties"]["reason"]
    return schema


def schema_allows(schema: dict[str, Any], reason: str) -> bool:
    return (
        schema["minLength"] <= len(reason) <= schema["maxLength"]
        and re.search(schema["pattern"], reason) is not None
    )


def api_accepts(reason: str) -> bool:
    try:
        cancel_job("7aec8f38-afa3-53e9-b586-a72e90067462", json.dumps({"reason": reason}))
    except RequestRefusedError:
        return False
    return True


@pytest.mark.parametrize("request_name", REQUESTS)
def test_every_request_describes_the_reason_alike(request_name: str) -> None:
    assert reason_schema(request_name) == reason_schema("CancelRequest")


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=520))
@example("\r")
@example(" \u2028\x1c")
@example("\x1f")  # Python's white space, not ECMAScript's
@example("\ufeff")  # ECMAScript's white space, not Python's
@example("x" * 500)
@example("x" * 501)
def test_the_api_accepts_a_reason_exactly_when_the_schema_allows_it(reason: str) -> None:
    assert api_accepts(reason) == schema_allows(reason_schema("CancelRequest"), reason)


# ECMAScript's \s (JSON Schema patterns are ECMA-262 regular expressions): what a client that
# generates or checks reasons in JavaScript, or schemathesis, reads the pattern with.
_ECMA_WHITE_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def ecma_allows(schema: dict[str, Any], reason: str) -> bool:
    pattern = schema["pattern"].replace("\\s", _ECMA_WHITE_SPACE)
    return (
        schema["minLength"] <= len(reason) <= schema["maxLength"]
        and re.search(pattern, reason, flags=re.ASCII) is not None
    )


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40))
@example("\x1f")
@example("\x85")
@example("\ufeff")
@example("\u3000x")
def test_an_ecmascript_client_reads_the_pattern_as_the_api_checks_it(reason: str) -> None:
    assert ecma_allows(reason_schema("CancelRequest"), reason) == api_accepts(reason)
