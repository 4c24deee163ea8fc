"""Specification: `filejobs webhooks ...`: what it accepts, the request each action sends, and
what it prints (the secret only from add and rotate)."""

from __future__ import annotations

import argparse
import io
from typing import Any, ClassVar

import pytest

from filejobs_cli import webhooks
from filejobs_cli.main import parser

WEBHOOK = "wh-0123456789abcdef01234567-acme"
DELIVERY = "dl-20261204T120000Z-0123456789abcdef0123"
ENDPOINT: dict[str, Any] = {
    "id": WEBHOOK,
    "tenant": "acme",
    "url": "https://hooks.example.com/in",
    "event_types": ["File Processed", "Job Completed"],
    "status": "enabled",
    "secrets": [{"created_at": "2026-12-04T12:00:00+00:00", "expires_at": None}],
}


class FakeClient:
    sent: ClassVar[list[tuple[str, str, Any]]] = []
    answer: ClassVar[Any] = None

    def __init__(self, target: Any) -> None:
        pass

    def get(self, path: str, query: Any = None) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None, headers: Any = None) -> Any:
        return self.request("POST", path, body=body)

    def request(self, method: str, path: str, query: Any = None, body: Any = None) -> Any:
        FakeClient.sent.append((method, path, body if body is not None else query))
        return FakeClient.answer


@pytest.fixture(autouse=True)
def client(monkeypatch: pytest.MonkeyPatch) -> type[FakeClient]:
    FakeClient.sent = []
    monkeypatch.setattr(webhooks, "ApiClient", FakeClient)
    return FakeClient


def parsed(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["webhooks", *argv])


def run(command: Any, arguments: argparse.Namespace) -> str:
    out = io.StringIO()
    assert command(arguments, None, out) == 0
    return out.getvalue()


def test_add_sends_the_url_and_events_and_prints_the_secret_once() -> None:
    FakeClient.answer = {**ENDPOINT, "secret": "whsec_x"}
    arguments = parsed(
        "add", "https://hooks.example.com/in", "--event", "Job Completed",
        "--event", "File Processed", "--tenant", "acme",
    )  # fmt: skip
    printed = run(webhooks.add, arguments)
    assert FakeClient.sent == [
        (
            "POST",
            "/webhooks",
            {
                "url": "https://hooks.example.com/in",
                "event_types": ["File Processed", "Job Completed"],
                "tenant": "acme",
            },
        )
    ]
    assert printed.count("whsec_x") == 1 and WEBHOOK in printed


def test_an_unknown_event_type_or_id_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parsed("add", "https://h.example.com", "--event", "Job Done")
    with pytest.raises(SystemExit):
        parsed("show", "not-an-id")
    with pytest.raises(SystemExit):
        parsed("resend", WEBHOOK, "dl-bad")


def test_each_action_sends_its_request() -> None:
    FakeClient.answer = ENDPOINT
    run(webhooks.show, parsed("show", WEBHOOK))
    run(webhooks.rotate, parsed("rotate", WEBHOOK, "--overlap-hours", "2"))
    run(webhooks.enable, parsed("enable", WEBHOOK))
    run(webhooks.remove, parsed("remove", WEBHOOK))
    FakeClient.answer = {"id": DELIVERY, "resend_of": DELIVERY}
    run(webhooks.resend, parsed("resend", WEBHOOK, DELIVERY))
    assert FakeClient.sent == [
        ("GET", f"/webhooks/{WEBHOOK}", None),
        ("POST", f"/webhooks/{WEBHOOK}/rotate", {"overlap_hours": 2.0}),
        ("POST", f"/webhooks/{WEBHOOK}/enable", None),
        ("DELETE", f"/webhooks/{WEBHOOK}", None),
        ("POST", f"/webhooks/{WEBHOOK}/deliveries/{DELIVERY}/resend", None),
    ]


def test_show_never_prints_a_secret_and_deliveries_prints_the_log() -> None:
    FakeClient.answer = ENDPOINT
    assert "secret:" not in run(webhooks.show, parsed("show", WEBHOOK))
    FakeClient.answer = {
        "deliveries": [
            {
                "id": DELIVERY,
                "status": "retrying",
                "attempt": 2,
                "event_type": "Job Completed",
                "response_code": 503,
                "latency_ms": 41,
                "error": "HTTP 503",
                "next_attempt_at": "2026-12-04T12:05:00+00:00",
            }
        ],
        "next_token": None,
    }
    printed = run(webhooks.deliveries, parsed("deliveries", WEBHOOK, "--limit", "5"))
    assert FakeClient.sent[-1] == ("GET", f"/webhooks/{WEBHOOK}/deliveries", {"limit": "5"})
    assert "retrying" in printed and "HTTP 503" in printed and "41 ms" in printed
