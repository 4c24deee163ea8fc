"""Specification: the console's shell (filejobs.console) serves its three files and nothing
else, loads nothing from another origin, runs nothing inline, and its policy names exactly the
origin images may come from."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from filejobs import console

ROOT = Path(__file__).resolve().parents[2]


def test_each_asset_is_served_with_its_media_type() -> None:
    for name, kind in console.ASSETS.items():
        content_type, body = console.asset(name)
        assert content_type == kind and body, name


@pytest.mark.parametrize(
    "name", ["__init__.py", "../api_docs/openapi.json", "console.js/", "", "INDEX.HTML", "%2e%2e"]
)
def test_any_other_name_is_refused(name: str) -> None:
    with pytest.raises(console.UnknownAssetError):
        console.asset(name)


def test_the_assets_ship_as_package_data() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = declared["package-data"]["filejobs"]
    assert {f"console/{name}" for name in console.ASSETS} <= set(data)


def test_the_page_runs_nothing_inline_and_loads_nothing_from_elsewhere() -> None:
    page = console.asset(console.PAGE)[1].decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), "an inline script"
    assert "<style" not in page and " style=" not in page, "an inline style"
    assert not re.search(r"\bon[a-z]+=", page), "an inline event handler"
    for name in console.ASSETS:
        text = console.asset(name)[1].decode()
        # no CDN, no third party: the only absolute URL is the SVG namespace's name
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert urls == set(), (name, urls)
    for referenced in re.findall(r'(?:src|href)="console/([^"]+)"', page):
        assert referenced in console.ASSETS


def test_the_policy_allows_this_origin_and_the_outputs_origin_alone() -> None:
    policy = console.console_policy("http://127.0.0.1:4566")
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["img-src"] == "'self' data: http://127.0.0.1:4566"
    assert directives["connect-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


@pytest.mark.parametrize(
    "origin",
    [None, "*", "https:", "http://a.example; script-src *", "javascript:alert(1)", "'self'"],
)
def test_an_origin_that_is_not_a_bare_origin_is_left_out(origin: str | None) -> None:
    img = next(p for p in console.console_policy(origin).split(";") if "img-src" in p)
    assert img.strip() == "img-src 'self' data:"


def test_the_origin_of_a_presigned_url() -> None:
    url = "https://outputs.s3.us-east-1.amazonaws.com/derived/a/b.webp?X-Amz-Signature=1"
    assert console.origin_of(url) == "https://outputs.s3.us-east-1.amazonaws.com"
    assert console.origin_of("http://127.0.0.1:4566/bucket/derived/x") == "http://127.0.0.1:4566"
    assert console.origin_of("file:///etc/passwd") is None
