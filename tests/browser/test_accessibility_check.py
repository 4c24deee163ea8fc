"""The accessibility check itself: it judges what a reader is left with, not a frame in between."""

from __future__ import annotations

from playwright.sync_api import Browser

from tests.browser.conftest import axe_violations, watched_page

FADING_BUTTON = """<!doctype html><html lang="en"><head><title>fade</title><style>
  button { background: #e6e9ed; color: #4d5560; border: 1px solid #b5bcc5;
           transition: background-color 1500ms linear; }
  button.danger:enabled { background: #b3261e; color: #fff; }
</style></head><body><main><h1>Fade</h1>
<button id="run" class="danger" disabled>Run</button></main></body></html>"""


def test_a_colour_still_fading_in_is_judged_once_it_has_faded_in(browser: Browser) -> None:
    with watched_page(browser) as (page, _):
        page.set_content(FADING_BUTTON)
        # when a disabled grey button turns red with white text, and is checked at once
        page.evaluate("() => { document.getElementById('run').disabled = false }")
        # then the check waits for the fade: white on the final red passes, white on pink would not
        assert axe_violations(page) == []
        assert page.locator("#run").evaluate("b => getComputedStyle(b).backgroundColor") == (
            "rgb(179, 38, 30)"
        )
