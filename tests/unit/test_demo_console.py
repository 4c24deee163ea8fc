"""make demo's console link: the operator's URL printed, a browser opened only for someone at a
terminal with a display."""

from __future__ import annotations

import io
import runpy
import webbrowser
from pathlib import Path
from typing import Any

import pytest

DEMO = Path(__file__).resolve().parents[2] / "tools" / "demo.py"


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    return runpy.run_path(str(DEMO))


def test_the_url_signs_the_operator_in_through_its_fragment(demo: dict[str, Any]) -> None:
    config = {"api_url": "http://127.0.0.1:3000", "api_token": "abc_DEF-1"}
    assert demo["console_url"](config) == "http://127.0.0.1:3000/console#token=abc_DEF-1"


@pytest.mark.parametrize(("display", "terminal"), [(None, True), (":0", False), (None, False)])
def test_no_browser_is_opened_without_a_display_and_a_terminal(
    demo: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    display: str | None,
    terminal: bool,
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    if display:
        monkeypatch.setenv("DISPLAY", display)
    monkeypatch.setattr(demo["sys"], "platform", "linux")
    stdin = io.StringIO()
    stdin.isatty = lambda: terminal  # type: ignore[method-assign]
    monkeypatch.setattr(demo["sys"], "stdin", stdin)

    def refuse(*_: Any) -> bool:
        raise AssertionError("a browser was opened")

    monkeypatch.setattr(webbrowser, "open", refuse)
    demo["show_console"]("http://127.0.0.1:3000/console#token=t")
    assert "operator console: http://127.0.0.1:3000/console#token=t" in capsys.readouterr().out


def test_with_both_it_opens_the_page_and_waits_for_enter(
    demo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(demo["sys"], "platform", "linux")
    stdin = io.StringIO("\n")
    stdin.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(demo["sys"], "stdin", stdin)
    opened: list[str] = []

    def browser(url: str) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(webbrowser, "open", browser)
    demo["show_console"]("http://127.0.0.1:3000/console#token=t")
    assert opened == ["http://127.0.0.1:3000/console#token=t"]
