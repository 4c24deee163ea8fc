"""The console in a real browser: Debian's chromium driven by Playwright (never Playwright's own
browser download), against `filejobs dev` started as a user starts it (tests/localstack.py).

axe-core comes from npm (`make axe`: .tools/axe, pinned in the Makefile) and is evaluated in the
page through the DevTools protocol, which the page's Content-Security-Policy does not govern: the
policy stays on, so a console that needed an inline script or a foreign origin fails here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, ViewportSize, sync_playwright

from tests.localstack import ROOT, RunningStack, running_stack

CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / ".tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
LAPTOP: ViewportSize = {"width": 1366, "height": 768}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # A failed record comes back after 5 s, not after the queues' minutes.
    with running_stack(tmp_path_factory.mktemp("console"), "--visibility-seconds", "5") as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "chromium is missing: make system-deps installs it (apt chromium)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@dataclass
class Problems:
    """What the page reported that a working console never does: a script error, a request
    its policy refused, a failed load of its own files."""

    seen: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        text = message.text
        if message.type == "error" and ("Content Security Policy" in text or "Refused" in text):
            self.seen.append(f"console: {text}")

    def page_error(self, error: Exception) -> None:
        self.seen.append(f"page error: {error}")


@dataclass
class Console:
    """One browser tab on the stack's console, signed in as the operator."""

    page: Page
    stack: RunningStack
    problems: Problems

    @property
    def url(self) -> str:
        return f"{self.stack.config['api_url']}/console"

    def sign_in(self, token: str | None = None) -> None:
        self.page.goto(f"{self.url}#token={token or self.stack.config['api_token']}")
        self.page.locator("main h1").wait_for()

    def open(self, view: str) -> None:
        """A view by its fragment (e.g. "overview", "jobs?status=failed"), as a link does."""
        self.page.evaluate("view => { window.location.hash = '#/' + view }", view)
        self.page.wait_for_load_state()

    def heading(self) -> str:
        return self.page.locator("main h1").inner_text()


@contextmanager
def watched_page(browser: Browser) -> Iterator[tuple[Page, Problems]]:
    """A laptop-sized tab of its own whose console errors and uncaught page errors are
    collected; a block that ends with any fails."""
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    problems = Problems()
    page.on("console", problems.console)
    page.on("pageerror", problems.page_error)
    try:
        yield page, problems
    finally:
        context.close()
    assert problems.seen == []


@pytest.fixture
def console(browser: Browser, stack: RunningStack) -> Iterator[Console]:
    with watched_page(browser) as (page, problems):
        yield Console(page, stack, problems)


# Every transition and finite animation of the page ended (an endless spinner is left to run).
SETTLED = """() => Promise.all(document.getAnimations()
  .filter((running) => running.effect?.getComputedTiming().endTime !== Infinity)
  .map((running) => running.finished.catch(() => undefined)))"""


def axe_violations(page: Page, *, impacts: tuple[str, ...] = ("serious", "critical")) -> list[str]:
    """axe-core's violations of the page once its transitions have ended, of the given impacts,
    one line each. Mid-transition colours are not what a reader is left with: a button fading
    from its disabled grey to its red has, for 120 ms, white text on pink, and on a loaded machine
    axe landed in those milliseconds (CI failed on #bulk-run's colour contrast)."""
    assert AXE.exists(), f"{AXE} is missing: make axe installs it"
    page.evaluate(SETTLED)
    page.evaluate(AXE.read_text() + "\n;void 0")
    found: dict[str, Any] = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['impact']} {v['id']}: {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
        for v in found["violations"]
        if v["impact"] in impacts
    ]


def screenshots() -> Path | None:
    """Where to save the console's screenshots (docs/console/, README.md shows the overview's):
    CONSOLE_SCREENSHOTS (make console-screenshots sets docs/console/), or nowhere."""
    folder = os.environ.get("CONSOLE_SCREENSHOTS")
    if not folder:
        return None
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(page: Page, name: str, *, full_page: bool = False) -> None:
    folder = screenshots()
    if folder is not None:
        page.screenshot(path=folder / f"{name}.png", full_page=full_page)
    else:
        page.screenshot(full_page=full_page)  # taken all the same: it must not fail


def body_overflows(page: Page) -> bool:
    """Whether the page itself scrolls sideways (a table scrolling in its own box is fine)."""
    overflow: bool = page.evaluate(
        "() => document.documentElement.scrollWidth > document.documentElement.clientWidth"
    )
    return overflow
