"""An app's page uploads a photo straight to the uploads bucket and shows its thumbnail, in a real
browser (Debian's chromium), against `filejobs dev` started with UploadsAllowedOrigins naming the
app's origin, as docs/INTEGRATION.md walks through it.

The app is the manual's own code: its backend (docs/snippets/upload_backend.py) mints the signed
upload through the stack's API as the tenant and hears the signed `File Processed` webhook; its
page (docs/snippets/upload_page.js, loaded by upload_app/index.html) posts the file across origins
(the page on one port of 127.0.0.1, the emulated bucket on another), so the bucket's CORS rule is
what lets it read S3's answer. A page on an origin the stack does not name cannot.

INTEGRATION_SCREENSHOT=docs/integration-upload.png saves the processed page's screenshot there.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, FilePayload, Page

from filejobs_dev.local import tokens
from filejobs_dev.local.stack import free_port
from tests.browser.conftest import LAPTOP
from tests.browser.test_console import photo
from tests.localstack import ROOT, RunningStack, running_stack
from tests.loopback import QuietHandler
from tests.scripts import load_script

TENANT = "acme"
PAGE = Path(__file__).with_name("upload_app") / "index.html"
PAGE_SCRIPT = ROOT / "docs" / "snippets" / "upload_page.js"
backend = load_script(ROOT / "docs" / "snippets" / "upload_backend.py", "upload_backend_snippet")
PROCESSED_SECONDS = 150


@dataclass
class App:
    """The app's backend: its origin, and what it heard from filejobs."""

    origin: str
    api: Any  # the snippet's FilejobsApi, as the tenant
    secret: str = ""
    processed: dict[str, dict[str, Any]] = field(default_factory=dict)  # by key
    refused_webhooks: int = 0


def app_handler(app: App) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/":
                self.send_body(200, PAGE.read_bytes(), {"Content-Type": "text/html"})
            elif url.path == "/upload_page.js":
                self.send_body(200, PAGE_SCRIPT.read_bytes(), {"Content-Type": "text/javascript"})
            elif url.path == "/api/uploads/processed":
                key = parse_qs(url.query).get("key", [""])[0]
                found = app.processed.get(key)
                self.answer_json(200 if found else 404, found or {"processed": False})
            else:
                self.send_body(404, b"")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/api/uploads":
                asked = json.loads(body)
                signed = backend.mint_upload(app.api, asked["filename"], asked["content_type"])
                self.answer_json(200, signed)
            elif self.path == "/webhooks":
                try:
                    done = backend.processed_upload(app.api, dict(self.headers), body, app.secret)
                except ValueError:
                    app.refused_webhooks += 1
                    self.send_body(401, b"")
                    return
                if done is not None:
                    app.processed[done["key"]] = done
                self.send_body(204, b"")
            else:
                self.send_body(404, b"")

    return Handler


def serve_app(app: App, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), app_handler(app))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def app_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, app_port: int) -> Iterator[RunningStack]:
    origin = f"UploadsAllowedOrigins=http://127.0.0.1:{app_port}"
    with running_stack(tmp_path_factory.mktemp("uploads"), "--parameter", origin) as running:
        yield running


@pytest.fixture(scope="module")
def app(stack: RunningStack, app_port: int) -> Iterator[App]:
    token = tokens.mint(stack.config["token_secret"], TENANT)
    made = App(
        f"http://127.0.0.1:{app_port}", backend.FilejobsApi(stack.config["api_url"], token=token)
    )
    server = serve_app(made, app_port)
    hook = {"url": f"{made.origin}/webhooks", "event_types": ["File Processed"]}
    status, registered = stack.api("/webhooks", method="POST", body=hook, token=token)
    assert status == 201, registered
    made.secret = registered["secret"]
    try:
        yield made
    finally:
        server.shutdown()
        server.server_close()


def open_app(browser: Browser, origin: str) -> tuple[Page, list[dict[str, Any]]]:
    """The app's page in a tab of its own, with each response to a POST noted."""
    page = browser.new_context(viewport=LAPTOP).new_page()
    posts: list[dict[str, Any]] = []
    page.on(
        "response",
        lambda r: (
            posts.append({"url": r.url, "status": r.status, "headers": r.headers})
            if r.request.method == "POST"
            else None
        ),
    )
    page.goto(f"{origin}/")
    return page, posts


def test_a_page_uploads_a_photo_to_the_bucket_and_shows_its_thumbnail(
    browser: Browser, stack: RunningStack, app: App
) -> None:
    page, posts = open_app(browser, app.origin)
    try:
        # when a person picks a photo
        picked: FilePayload = {
            "name": "Harbour at dusk.jpg",
            "mimeType": "image/jpeg",
            "buffer": photo(),
        }
        page.set_input_files("#photo", files=[picked])
        # then the thumbnail shows once the file is processed
        page.wait_for_function(
            "() => document.getElementById('thumbnail').naturalWidth > 0",
            timeout=PROCESSED_SECONDS * 1000,
        )
        assert page.locator("#status").inner_text() == "Processed."
        if shot := os.environ.get("INTEGRATION_SCREENSHOT"):
            page.screenshot(path=ROOT / shot)
    finally:
        page.context.close()
    # and the file went straight to the bucket, on another origin, which let the page read it
    bucket = [
        p for p in posts if urlsplit(p["url"]).port == urlsplit(stack.config["endpoint_url"]).port
    ]
    assert [p["status"] for p in bucket] == [204]
    assert bucket[0]["headers"]["access-control-allow-origin"] == app.origin
    # and it is the tenant's upload under a key the server chose, named as the person named it
    (key,) = app.processed
    assert key.startswith(f"uploads/{TENANT}/") and key.endswith("/Harbour-at-dusk.jpg")
    stored = stack.client("s3").head_object(Bucket=stack.config["uploads_bucket"], Key=key)
    assert stored["ContentType"] == "image/jpeg"
    # and the backend heard of it by the signed webhook, every delivery checked
    assert app.processed[key]["outputs"]["thumbnail_generation"]
    assert app.refused_webhooks == 0


def test_a_page_on_another_origin_cannot_read_the_bucket_s_answer(
    browser: Browser, stack: RunningStack, app: App
) -> None:
    # given the same app served on an origin the stack does not name
    other = App(f"http://127.0.0.1:{free_port()}", app.api, app.secret)
    server = serve_app(other, int(urlsplit(other.origin).port or 0))
    page, _ = open_app(browser, other.origin)
    try:
        picked: FilePayload = {
            "name": "elsewhere.jpg",
            "mimeType": "image/jpeg",
            "buffer": photo(320, 200),
        }
        page.set_input_files("#photo", files=[picked])
        # then the browser refuses the page S3's answer
        page.wait_for_function(
            "() => document.getElementById('status').textContent.startsWith('Failed')",
            timeout=30_000,
        )
        assert "Failed to fetch" in page.locator("#status").inner_text()
    finally:
        page.context.close()
        server.shutdown()
        server.server_close()


def preflight(stack: RunningStack, origin: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(
        stack.config["api_url"] + "/uploads",
        method="OPTIONS",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-amz-date",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers.items())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items())


def test_the_api_answers_a_preflight_unsigned_for_the_named_origins_only(
    stack: RunningStack, app: App
) -> None:
    status, headers = preflight(stack, app.origin)
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == app.origin
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert "Authorization" in headers["Access-Control-Allow-Headers"]
    _, elsewhere = preflight(stack, "http://127.0.0.1:1")
    assert "Access-Control-Allow-Origin" not in elsewhere
