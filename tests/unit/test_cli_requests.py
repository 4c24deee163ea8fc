"""Specification: `filejobs request FILE_ID JOB_TYPE`, before and after it talks to a stack:
the body it sends for options, a delay or a time and max retries, and how it shows the job."""

from __future__ import annotations

import argparse
import io
from typing import Any, ClassVar

import pytest

from filejobs_cli import requests
from filejobs_cli.client import HttpError, Target, UsageError
from filejobs_cli.main import parser

FILE_ID = "0b0f8a4e-6d1c-4a8e-9f3b-2c7d5e1a9b40"


def parsed(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["request", FILE_ID, *argv])


def test_options_given_one_by_one_are_read_as_json_lists_or_text() -> None:
    arguments = parsed(
        "thumbnail_generation", "--option", "sizes=128,512", "--option", "format=jpeg"
    )
    assert requests.body_of(arguments) == {
        "job_type": "thumbnail_generation",
        "input_data": {"sizes": [128, 512], "format": "jpeg"},
    }
    one = parsed("thumbnail_generation", "--option", "sizes=128,")
    assert requests.body_of(one)["input_data"] == {"sizes": [128]}
    level = parsed("compression", "--option", "level=9", "--option", "algorithm=gzip")
    assert requests.body_of(level)["input_data"] == {"level": 9, "algorithm": "gzip"}


def test_options_as_json_with_one_more_on_top() -> None:
    arguments = parsed(
        "compression", "--options", '{"algorithm": "gzip", "level": 9}', "--option", "level=1"
    )
    assert requests.body_of(arguments)["input_data"] == {"algorithm": "gzip", "level": 1}


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("90", 90), ("90s", 90), ("10m", 600), ("2h", 7200), ("30d", 2_592_000)],
)
def test_a_delay_is_sent_in_seconds(given: str, seconds: int) -> None:
    body = requests.body_of(parsed("virus_scan", "--delay", given, "--max-retries", "1"))
    assert body == {"job_type": "virus_scan", "delay_seconds": seconds, "max_retries": 1}


def test_a_time_is_sent_as_written() -> None:
    body = requests.body_of(parsed("virus_scan", "--at", "2026-12-24T18:00:00Z"))
    assert body == {"job_type": "virus_scan", "run_at": "2026-12-24T18:00:00Z"}


@pytest.mark.parametrize(
    "argv",
    [
        ["virus_scan", "--delay", "31d"],
        ["virus_scan", "--delay", "ten minutes"],
        ["virus_scan", "--delay", "-5"],
        ["virus_scan", "--at", "2026-12-24T18:00:00"],  # no offset
        ["virus_scan", "--at", "tomorrow"],
        ["virus_scan", "--delay", "10m", "--at", "2026-12-24T18:00:00Z"],  # not both
        ["thumbnail_generation", "--option", "sizes"],
        ["compression", "--options", "[1]"],
        ["ocr"],
    ],
)
def test_a_bad_argument_is_a_usage_error_before_any_request(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parsed(*argv)
    assert exit_.value.code == 2


class Answering:
    """An API client that answers a POST as the API does, and keeps what was sent."""

    sent: ClassVar[list[tuple[str, Any, dict[str, str]]]] = []
    answer: ClassVar[Any] = None

    def __init__(self, target: Target) -> None:
        self.target = target

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        Answering.sent.append((path, body, headers or {}))
        if isinstance(Answering.answer, Exception):
            raise Answering.answer
        return Answering.answer


def test_a_delayed_job_is_shown_with_when_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "ApiClient", Answering)
    Answering.sent, Answering.answer = (
        [],
        {
            "id": "5e0b1c9e-1d7a-4f0e-8a43-4f5d2b9c8e11",
            "job_type": "virus_scan",
            "status": "scheduled",
            "attempt": 0,
            "retry_count": 0,
            "max_retries": 1,
            "scheduled_at": "2026-12-24T18:00:00+00:00",
            "next_retry_at": "2026-12-24T18:00:00+00:00",
            "options": {},
        },
    )
    out = io.StringIO()
    arguments = parsed("virus_scan", "--at", "2026-12-24T18:00:00Z", "--idempotency-key", "k1")
    assert requests.request(arguments, target=None, out=out) == 0  # type: ignore[arg-type]
    [(path, body, headers)] = Answering.sent
    assert (path, headers) == (f"/files/{FILE_ID}/jobs", {"Idempotency-Key": "k1"})
    assert body["run_at"] == "2026-12-24T18:00:00Z"
    shown = out.getvalue()
    assert "status:   scheduled (attempt 0, retries 0/1)" in shown
    assert "starts:   2026-12-24T18:00:00+00:00" in shown
    assert "key:      k1" in shown


def test_a_refused_option_is_shown_as_the_api_says_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "ApiClient", Answering)
    message = "input_data.sizes[0]: must be an integer from 16 to 4096 pixels; got 8"
    Answering.sent, Answering.answer = [], HttpError(422, "unprocessable", message)
    arguments = parsed("thumbnail_generation", "--option", "sizes=8,")
    with pytest.raises(UsageError) as refused:
        requests.request(arguments, target=None, out=io.StringIO())  # type: ignore[arg-type]
    assert refused.value.message == f"request refused: {message}"
