"""Specification: the API function serves the console's shell (filejobs.console) to anyone, its
page under a policy of the API's own origin and the outputs' (where presigned URLs point), and
nothing but its three files.

Through the API's Lambda handler, against test_api.py's stack (moto tables and queues built from
template.yaml).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from filejobs import console
from filejobs.api.routes import console_page
from tests.integration.test_api import (
    Api,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.integration.test_api_requests import headers_of


@pytest.fixture
def api(stack: Api) -> Iterator[Api]:  # noqa: F811 (test_api's fixture)
    console_page._image_origin.cache_clear()  # the outputs bucket is this test's
    yield stack
    console_page._image_origin.cache_clear()


def test_the_page_is_served_without_a_caller_under_its_policy(api: Api) -> None:
    # when the page is asked for by a request without any identity
    page = api.raw("GET", "/console", who=None)
    # then it is the package's page, under the console's policy
    assert page["statusCode"] == 200
    headers = headers_of(page)
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert page["body"] == console.asset(console.PAGE)[1].decode()
    policy = headers["Content-Security-Policy"]
    img = next(p.split()[1:] for p in policy.split(";") if p.split()[0] == "img-src")
    # with images from the origin of the outputs bucket's presigned links, and no other
    assert img[:2] == ["'self'", "data:"] and len(img) == 3
    assert img[2].startswith("https://") and "/" not in img[2].removeprefix("https://")
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    ("name", "kind"), [("console.js", "text/javascript"), ("console.css", "text/css")]
)
def test_its_files_are_served_with_their_media_types(api: Api, name: str, kind: str) -> None:
    served = api.raw("GET", f"/console/{name}", who=None)
    assert served["statusCode"] == 200
    assert headers_of(served)["Content-Type"].split(";")[0] == kind


@pytest.mark.parametrize("name", ["__init__.py", "py.typed", "openapi.json", "%2e%2e"])
def test_no_other_file_is_served(api: Api, name: str) -> None:
    refused = api.raw("GET", f"/console/{name}", who=None)
    assert refused["statusCode"] == 404
    assert json.loads(refused["body"])["error"]["code"] == "not_found"
