"""Specification: `filejobs upload-url`: the body it sends is one the API reads as asked, and its
curl line posts the form's fields in order with the file last.

(tests/browser/test_browser_upload.py and tests/integration/test_local_s3_forms.py post such
forms to the local stack.)
"""

from __future__ import annotations

import argparse
import json
import shlex
from datetime import timedelta

import pytest

from filejobs.api import parsing
from filejobs_cli import upload_urls
from filejobs_cli.main import parser

SIGNED = {
    "method": "POST",
    "url": "http://127.0.0.1:4566/filejobs-uploads",
    "fields": {
        "Content-Type": "image/jpeg",
        "key": "uploads/acme/2026/12/u/a b.jpg",
        "policy": "e30=",
    },
    "key": "uploads/acme/2026/12/u/a b.jpg",
    "max_bytes": 2000,
    "expires_at": "2026-12-05T10:15:00+00:00",
}


def parsed(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["upload-url", *argv])


def test_the_body_sent_is_what_the_api_reads() -> None:
    arguments = parsed(
        "--tenant", "acme", "--filename", "Harbour at dusk.jpg", "--folder", "avatars/",
        "--content-type", "image/jpeg", "--preset", "avatars", "--metadata", "album=2026",
        "--metadata", "by=me", "--expires-in", "600",
    )  # fmt: skip
    tenant, asked = parsing.upload_request(json.dumps(upload_urls.request_of(arguments)))
    assert tenant == "acme"
    assert (asked.filename, asked.folder, asked.content_type, asked.preset) == (
        "Harbour at dusk.jpg", "avatars/", "image/jpeg", "avatars",
    )  # fmt: skip
    assert asked.metadata == {"album": "2026", "by": "me"}
    assert asked.expires_in == timedelta(seconds=600)


def test_nothing_given_asks_for_the_api_s_defaults() -> None:
    assert upload_urls.request_of(parsed()) == {}


@pytest.mark.parametrize("value", ["59", "3601", "ten", "1e3"])
def test_an_expiry_the_api_would_refuse_is_refused_first(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        upload_urls.expires_in(value)


def test_the_curl_line_posts_the_fields_in_order_then_the_file() -> None:
    words = shlex.split(upload_urls.curl_command(SIGNED, "my photo.jpg"))
    forms = [words[i + 1] for i, word in enumerate(words) if word == "-F"]
    assert forms == [
        "Content-Type=image/jpeg",
        "key=uploads/acme/2026/12/u/a b.jpg",
        "policy=e30=",
        "file=@my photo.jpg",
    ]
    assert words[-1] == SIGNED["url"]


def test_the_form_is_shown_with_its_fields_in_order() -> None:
    shown = upload_urls.render(SIGNED).splitlines()
    assert shown[0] == "key:         uploads/acme/2026/12/u/a b.jpg"
    assert shown[-3:] == [
        "  Content-Type=image/jpeg",
        "  key=uploads/acme/2026/12/u/a b.jpg",
        "  policy=e30=",
    ]
