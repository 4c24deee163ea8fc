"""Specification: how the console signs in is the API's to say, from the stage that took the
request (template.yaml's ConsoleApiStage variables with ApiAuth=COGNITO): GET
/console/config.json answers public values only, the page's policy lets it reach the user
pool's sign-in origin and no other, and on that API an ID token is taken only when it was
issued to the console's app client.

Through the API's Lambda handler, against test_api.py's stack (moto tables and queues built from
template.yaml).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from filejobs import console
from filejobs.api.routes import console_page
from filejobs_dev.local.payloads import api_event
from functions.api import app as api_function
from tests.integration.test_api import (
    CONTEXT,
    Api,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.integration.test_api_requests import headers_of

CLIENT = "4example0console0client0id"
SIGN_IN = "https://filejobs-123456789012-6f0c6f20.auth.us-east-1.amazoncognito.com"
CONSOLE_STAGE = {console.CLIENT_VARIABLE: CLIENT, console.SIGN_IN_URL_VARIABLE: SIGN_IN}


@pytest.fixture
def api(stack: Api) -> Iterator[Api]:  # noqa: F811 (test_api's fixture)
    console_page._image_origin.cache_clear()  # the outputs bucket is this test's
    yield stack
    console_page._image_origin.cache_clear()


def request(
    path: str,
    stage_variables: dict[str, str] | None,
    claims: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One GET to the handler (on the `api` fixture's tables) as the stage with
    `stage_variables` hands it over, the Cognito authorizer's `claims` (if any) attached."""
    event = api_event(
        method="GET",
        resource=path,
        path=path,
        path_parameters={},
        query="",
        headers={"Accept": "application/json"},
        body=b"",
        authorizer={} if claims is None else {"claims": claims},
        stage="v1",
        stage_variables=stage_variables,
    )
    response: dict[str, Any] = api_function.handler(event, CONTEXT)
    return response


def connect_sources(page: dict[str, Any]) -> list[str]:
    policy = headers_of(page)["Content-Security-Policy"]
    return next(p.split()[1:] for p in policy.split(";") if p.split()[0] == "connect-src")


def test_on_the_cognito_api_the_page_is_told_the_pool_s_sign_in_and_may_reach_it(
    api: Api,
) -> None:
    # when the page's settings are asked for, with no caller, on the Cognito API's stage
    settings = request("/console/config.json", CONSOLE_STAGE)
    # then they name the sign-in origin and the app client, public values only, never cached
    assert settings["statusCode"] == 200
    assert json.loads(settings["body"]) == {
        "sign_in": "cognito",
        "client_id": CLIENT,
        "sign_in_url": SIGN_IN,
    }
    assert headers_of(settings)["Cache-Control"] == "no-store"
    # and the page may send requests to that origin (its token endpoint) besides its own
    assert connect_sources(request("/console", CONSOLE_STAGE)) == ["'self'", SIGN_IN]


def test_on_the_iam_api_the_page_takes_a_bearer_token_and_reaches_its_own_origin_only(
    api: Api,
) -> None:
    settings = request("/console/config.json", None)
    assert json.loads(settings["body"]) == {"sign_in": "token"}
    assert connect_sources(request("/console", None)) == ["'self'"]


@pytest.mark.parametrize(
    "sign_in_url",
    [
        "https://auth.example.com/oauth2",  # not a bare origin
        "javascript:alert(1)",
        "https://a.example; connect-src *",
        "",
    ],
)
def test_a_sign_in_url_that_is_not_a_bare_origin_is_never_offered_nor_allowed(
    api: Api, sign_in_url: str
) -> None:
    stage = {**CONSOLE_STAGE, console.SIGN_IN_URL_VARIABLE: sign_in_url}
    assert json.loads(request("/console/config.json", stage)["body"]) == {"sign_in": "token"}
    assert connect_sources(request("/console", stage)) == ["'self'"]


def id_token_claims(**values: str) -> dict[str, str]:
    """An ID token's claims as API Gateway's Cognito authorizer passes them on."""
    return {"sub": "5f0c", "token_use": "id", "iss": "https://cognito-idp.example", **values}


def test_on_the_cognito_api_only_an_id_token_of_the_console_s_client_is_a_caller(
    api: Api,
) -> None:
    # given an operator of the pool
    operator = {"cognito:groups": "operators"}
    # then its ID token for the console's client is taken
    ours = id_token_claims(aud=CLIENT, **operator)
    assert request("/openapi.json", CONSOLE_STAGE, ours)["statusCode"] == 200
    # and its ID token for another app client of the same pool is refused, as is an access token
    theirs = id_token_claims(aud="another0app0client0of0pool", **operator)
    access = id_token_claims(aud=CLIENT, token_use="access", **operator)
    for claims in (theirs, access):
        refused = request("/openapi.json", CONSOLE_STAGE, claims)
        assert refused["statusCode"] == 401
        assert json.loads(refused["body"])["error"]["code"] == "unauthorized"
