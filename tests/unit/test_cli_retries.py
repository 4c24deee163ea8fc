"""Specification: the CLI sends a request again when the answer says it was not processed (429),
or when it may have been lost (502, 503, 504) and sending it twice does nothing twice; it waits
capped exponential backoff with full jitter, never less than Retry-After.

Against a real HTTP server on 127.0.0.1 that answers from a script; the waits are recorded, not
slept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from filejobs_cli.client import ApiClient, BearerAuth, HttpError, Target
from filejobs_cli.retries import RetryPolicy, retry_after_seconds
from tests.loopback import QuietHandler, serving


class Scripted(QuietHandler):
    """Answers each request with the next (status, headers) of `script`; then 200 {"ok": n}."""

    script: list[tuple[int, dict[str, str]]] = []  # noqa: RUF012 (set per test)
    seen: list[tuple[str, str | None]] = []  # noqa: RUF012

    def do_GET(self) -> None:
        self.answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer()

    def answer(self) -> None:
        Scripted.seen.append((self.command, self.headers.get("Idempotency-Key")))
        status, headers = Scripted.script.pop(0) if Scripted.script else (200, {})
        body = (
            json.dumps({"ok": len(Scripted.seen)})
            if status == 200
            else json.dumps({"error": {"code": "busy", "message": f"answered {status}"}})
        ).encode()
        self.send_body(status, body, headers)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(Scripted) as base:
        yield base


class Waits:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)


def client(url: str, waits: Waits, jitter: float = 1.0) -> ApiClient:
    target = Target("a test API", url, BearerAuth("t"), lambda: None, None)
    return ApiClient(target, retry=RetryPolicy(sleep=waits, random=lambda: jitter))


@pytest.fixture(autouse=True)
def fresh() -> None:
    Scripted.script, Scripted.seen = [], []


def test_a_get_answered_503_then_200_is_sent_again_after_a_growing_wait(url: str) -> None:
    Scripted.script = [(503, {}), (502, {}), (504, {})]
    waits = Waits()
    assert client(url, waits).get("/jobs") == {"ok": 4}
    assert len(Scripted.seen) == 4
    assert waits.slept == [0.5, 1.0, 2.0]  # base * 2^(attempt-1) at full jitter 1.0


def test_the_wait_is_full_jitter_under_a_cap() -> None:
    policy = RetryPolicy(random=lambda: 0.25)
    assert [policy.backoff(n) for n in (1, 2, 3)] == [0.125, 0.25, 0.5]
    assert RetryPolicy(random=lambda: 1.0).backoff(10) == 20.0  # capped


def test_it_gives_up_after_five_attempts_with_the_apis_last_words(url: str) -> None:
    Scripted.script = [(503, {})] * 6
    with pytest.raises(HttpError, match="answered 503"):
        client(url, Waits()).get("/jobs")
    assert len(Scripted.seen) == 5


def test_a_post_that_may_have_been_processed_is_not_sent_twice(url: str) -> None:
    Scripted.script = [(503, {})]
    with pytest.raises(HttpError):
        client(url, Waits()).post("/jobs/x/cancel", {"reason": "r"})
    assert len(Scripted.seen) == 1


def test_a_post_with_an_idempotency_key_is_sent_again_with_the_same_key(url: str) -> None:
    Scripted.script = [(502, {})]
    answer = client(url, Waits()).post("/operations", {}, headers={"Idempotency-Key": "k-1"})
    assert answer == {"ok": 2}
    assert Scripted.seen == [("POST", "k-1"), ("POST", "k-1")]


def test_a_throttled_post_was_not_processed_and_is_sent_again(url: str) -> None:
    Scripted.script = [(429, {"Retry-After": "3"})]
    waits = Waits()
    assert client(url, waits, jitter=0.0).post("/webhooks", {}) == {"ok": 2}
    assert waits.slept == [3.0]  # Retry-After, though the jitter drew 0


def test_a_retry_after_beyond_the_longest_wait_is_reported_not_waited_for(url: str) -> None:
    Scripted.script = [(429, {"Retry-After": "3600"})]
    waits = Waits()
    with pytest.raises(HttpError):
        client(url, waits).get("/jobs")
    assert waits.slept == []


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds(None, now) is None
