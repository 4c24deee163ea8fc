"""Specification: the console of a stack deployed with ApiAuth=COGNITO signs people in through
the user pool's hosted pages (authorization code with PKCE), in a real browser against the
local stack started as a user starts it: `filejobs dev --parameter ApiAuth=COGNITO`.

The local stack's stand-in issuer (filejobs_dev/local/issuer.py) plays the user pool on
127.0.0.1; its router checks ID tokens as API Gateway's Cognito authorizer does (signature,
issuer, expiry), and the API function, as deployed, checks their audience and reads the tenant
from `custom:tenant`, operators from `cognito:groups`. An operator sees every tenant, a tenant's
user only its own; signing out ends the session and revokes its refresh token; a tampered token
or one issued to another app client of the pool opens nothing.
"""

from __future__ import annotations

import base64
import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, Request, expect

from filejobs_cli.client import local_target
from filejobs_cli.console_proxy import ConsoleProxy
from filejobs_cli.credentials import Acting
from filejobs_dev.local import tokens
from filejobs_dev.local.issuer import challenge_of
from tests.browser.conftest import axe_violations, screenshot, watched_page
from tests.localstack import RunningStack, running_stack

TENANT, OTHER_TENANT = "acme", "globex"
SESSION_KEY = "filejobs.console.session"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # No test here waits on a schedule: the template's own rates.
    with running_stack(
        tmp_path_factory.mktemp("console-cognito"),
        "--parameter",
        "ApiAuth=COGNITO",
        schedule_seconds=None,
    ) as running:
        yield running


def jpeg(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 200), (40, shade, 200)).save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def uploaded(stack: RunningStack) -> dict[str, dict[str, Any]]:
    """One photo of each of two tenants, every job of each at its end."""
    keys = {tenant: f"uploads/{tenant}/photos/harbour.jpg" for tenant in (TENANT, OTHER_TENANT)}
    for shade, key in enumerate(keys.values()):
        s3 = stack.client("s3")
        s3.put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=jpeg(60 + 90 * shade))
    return {tenant: stack.settled(key, 120) for tenant, key in keys.items()}


class Tab:
    """One browser tab on the console of the stack, with the problems its page reports."""

    def __init__(self, page: Page, stack: RunningStack) -> None:
        self.page = page
        self.stack = stack
        self.token_requests: list[dict[str, str]] = []
        page.on("request", self._seen)

    @property
    def console_url(self) -> str:
        return f"{self.stack.config['api_url']}/console"

    @property
    def issuer(self) -> str:
        return str(self.stack.config["cognito"]["issuer"])

    def _seen(self, request: Request) -> None:
        if request.url == f"{self.issuer}/oauth2/token":
            fields = urllib.parse.parse_qs(request.post_data or "")
            self.token_requests.append({name: values[-1] for name, values in fields.items()})

    def sign_in(self, username: str, password: str) -> None:
        """Through the console's Sign in button and the user pool's own form."""
        self.page.goto(self.console_url)
        self.page.locator("#signin-start").click()
        self.page.wait_for_url(f"{self.issuer}/oauth2/authorize?**")
        self.page.fill("#username", username)
        self.page.fill("#password", password)
        self.page.locator("button[type=submit]").click()
        expect(self.page.locator("main h1")).to_have_text("Overview")

    def session(self) -> dict[str, Any] | None:
        stored = self.page.evaluate(f"() => window.sessionStorage.getItem('{SESSION_KEY}')")
        return None if stored is None else dict(json.loads(stored))

    def tenants_of_search(self, view: str) -> set[str]:
        """The tenants of the jobs a search view lists."""
        self.page.evaluate("view => { window.location.hash = view }", view)
        expect(self.page.locator("#results-page")).to_be_visible()
        cells = self.page.locator("#job-results tbody tr > :nth-child(2)").all_inner_texts()
        return set(cells)


@pytest.fixture
def tab(browser: Browser, stack: RunningStack) -> Iterator[Tab]:
    with watched_page(browser) as (page, _):
        yield Tab(page, stack)


def operator_password(stack: RunningStack) -> str:
    return str(stack.config["api_token"])


def tenant_password(stack: RunningStack, tenant: str) -> str:
    return tokens.mint(str(stack.config["token_secret"]), tenant)


def api_status(stack: RunningStack, path: str, authorization: str) -> int:
    request = urllib.request.Request(
        f"{stack.config['api_url']}{path}", headers={"Authorization": authorization}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


# --- before anyone signs in -------------------------------------------------------------------


def test_the_page_learns_from_the_api_to_sign_in_with_the_user_pool(tab: Tab) -> None:
    cognito = tab.stack.config["cognito"]
    # when the page's settings and the page itself are asked for, with no token
    with urllib.request.urlopen(f"{tab.console_url}/config.json") as answer:
        settings = json.loads(answer.read())
    with urllib.request.urlopen(tab.console_url) as answer:
        policy = answer.headers["Content-Security-Policy"]
    # then they name the pool's sign-in origin and the console's app client, nothing secret
    assert settings == {
        "sign_in": "cognito",
        "client_id": cognito["client_id"],
        "sign_in_url": cognito["issuer"],
    }
    # and the page may reach that origin (its token endpoint), and only it besides its own
    connect = next(p for p in policy.split(";") if p.strip().startswith("connect-src"))
    assert connect.split()[1:] == ["'self'", cognito["issuer"]]
    assert "default-src 'self'" in policy and "unsafe" not in policy
    # and the page offers to sign in there, with no violation axe-core calls serious
    tab.page.goto(tab.console_url)
    expect(tab.page.locator("main h1")).to_have_text("Sign in")
    expect(tab.page.locator("#signin-start")).to_be_visible()
    assert axe_violations(tab.page) == []
    screenshot(tab.page, "sign-in-user-pool-laptop")


# --- signing in -------------------------------------------------------------------------------


def test_an_operator_signs_in_through_the_user_pool_and_sees_every_tenant(
    tab: Tab, uploaded: dict[str, dict[str, Any]]
) -> None:
    # given jobs of two tenants, when the operator signs in on the pool's form
    tab.sign_in("operator", operator_password(tab.stack))
    # then the code was exchanged once, with a PKCE verifier whose challenge was sent
    [exchanged] = tab.token_requests
    assert exchanged["grant_type"] == "authorization_code"
    assert len(exchanged["code_verifier"]) >= 43
    # and the address bar keeps neither the code nor the state
    assert "code=" not in tab.page.url and "state=" not in tab.page.url
    # and the tokens are in this tab's session storage, nowhere else
    session = tab.session()
    assert session is not None and session["id_token"] and session["refresh_token"]
    assert tab.page.evaluate("() => window.localStorage.length") == 0
    assert tab.page.context.cookies(tab.stack.config["api_url"]) == []
    expect(tab.page.locator("#who")).to_have_text("Signed in as operator (operators)")
    # and every tenant's jobs are listed
    assert tab.tenants_of_search("#/jobs?status=completed") == {TENANT, OTHER_TENANT}


def test_a_tenant_s_user_sees_only_its_own_tenant(
    tab: Tab, uploaded: dict[str, dict[str, Any]]
) -> None:
    tab.sign_in(TENANT, tenant_password(tab.stack, TENANT))
    expect(tab.page.locator("#who")).to_have_text(f"Signed in as {TENANT} (tenant {TENANT})")
    assert tab.tenants_of_search("#/jobs?status=completed") == {TENANT}
    # and the other tenant's file answers as a file that does not exist
    other = uploaded[OTHER_TENANT]["id"]
    tab.page.evaluate("view => { window.location.hash = view }", f"#/file/{other}")
    expect(tab.page.locator(".error-box")).to_contain_text("404")


def test_signing_out_ends_the_session_and_revokes_its_refresh_token(tab: Tab) -> None:
    tab.sign_in(TENANT, tenant_password(tab.stack, TENANT))
    session = tab.session()
    assert session is not None
    # when the user signs out
    tab.page.locator("#sign-out").click()
    # then the console, back from the pool's sign-out, asks to sign in again
    expect(tab.page.locator("main h1")).to_have_text("Sign in")
    expect(tab.page.locator("main [role=alert]")).to_have_text("Signed out.")
    expect(tab.page.locator("#sign-out")).to_be_hidden()
    assert tab.session() is None
    # and the refresh token no longer renews anything
    renew = urllib.parse.urlencode(
        {
            "grant_type": "refresh_token",
            "client_id": tab.stack.config["cognito"]["client_id"],
            "refresh_token": session["refresh_token"],
        }
    ).encode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{tab.issuer}/oauth2/token", data=renew)
    assert refused.value.code == 400
    # and signing in again asks for the password again
    tab.page.locator("#signin-start").click()
    expect(tab.page.locator("#password")).to_be_visible()


def test_an_id_token_about_to_expire_is_renewed_without_signing_in_again(tab: Tab) -> None:
    tab.sign_in("operator", operator_password(tab.stack))
    first = tab.session()
    assert first is not None
    # given the ID token is, as far as the page knows, a few seconds from its end
    soon = {**first, "expires_at": int(time.time()) + 5}
    tab.page.evaluate(
        "([key, value]) => window.sessionStorage.setItem(key, value)",
        [SESSION_KEY, json.dumps(soon)],
    )
    # when the reader opens another view
    tab.page.evaluate("() => { window.location.hash = '#/operations' }")
    # then the page renewed it with the refresh token, and the view shows the API's answer
    expect(tab.page.locator("main h1")).to_have_text("Operations")
    expect(tab.page.locator("#operation-list")).to_be_visible()
    assert [r["grant_type"] for r in tab.token_requests] == ["authorization_code", "refresh_token"]
    renewed = tab.session()
    assert renewed is not None and renewed["id_token"] != first["id_token"]
    assert renewed["expires_at"] > soon["expires_at"]


def test_a_sign_in_answer_this_tab_did_not_ask_for_is_refused(tab: Tab) -> None:
    # when the console is opened with a code and a state it never sent (another page's round
    # trip, or a forged link)
    tab.page.goto(f"{tab.console_url}?code=stolen-or-forged&state=not-this-tab-s")
    # then nothing is exchanged, and the reader is asked to sign in
    expect(tab.page.locator("main [role=alert]")).to_contain_text("not for this tab")
    assert tab.token_requests == []
    assert tab.session() is None
    assert "code=" not in tab.page.url


# --- what the API refuses -----------------------------------------------------------------------


def tampered(token: str, **claims: Any) -> str:
    """`token` with its claims changed and its signature kept (no longer theirs)."""
    header, payload, signature = token.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    changed = base64.urlsafe_b64encode(json.dumps({**decoded, **claims}).encode())
    return f"{header}.{changed.rstrip(b'=').decode()}.{signature}"


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def id_token_of_another_app(stack: RunningStack, username: str, password: str) -> str:
    """An ID token the same pool issued to its other app client (another app sharing it),
    through the same hosted pages, as that app would get it."""
    cognito = stack.config["cognito"]
    verifier = "another-app-" + "v" * 40
    fields = {
        "client_id": cognito["another_client_id"],
        "redirect_uri": cognito["another_app_url"],
        "state": "theirs",
        "code_challenge": challenge_of(verifier),
        "username": username,
        "password": password,
    }
    opener = urllib.request.build_opener(NoRedirects)
    with pytest.raises(urllib.error.HTTPError) as redirected:
        opener.open(f"{cognito['issuer']}/login", urllib.parse.urlencode(fields).encode())
    location = redirected.value.headers["Location"]
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["code"][0]
    exchange = {
        "grant_type": "authorization_code",
        "client_id": cognito["another_client_id"],
        "code": code,
        "redirect_uri": cognito["another_app_url"],
        "code_verifier": verifier,
    }
    with urllib.request.urlopen(
        f"{cognito['issuer']}/oauth2/token", urllib.parse.urlencode(exchange).encode()
    ) as answer:
        return str(json.loads(answer.read())["id_token"])


def test_a_tampered_token_or_one_issued_to_another_app_client_is_refused_401(tab: Tab) -> None:
    tab.sign_in(TENANT, tenant_password(tab.stack, TENANT))
    session = tab.session()
    assert session is not None
    genuine = str(session["id_token"])
    # given the tenant's own ID token works, sent as the Cognito authorizer takes it
    assert api_status(tab.stack, "/jobs", genuine) == 200
    # then the same token with its tenant claim changed (its signature no longer matches) and
    # with the operators group added are refused
    other_tenant = tampered(genuine, **{"custom:tenant": OTHER_TENANT})
    operator = tampered(genuine, **{"cognito:groups": ["operators"]})
    assert api_status(tab.stack, "/jobs", other_tenant) == 401
    assert api_status(tab.stack, "/overview", operator) == 401
    # and an operator's genuine ID token issued to another app client of the same pool is
    # refused too: the gateway's authorizer lets it through, the function checks its audience
    foreign = id_token_of_another_app(tab.stack, "operator", operator_password(tab.stack))
    assert api_status(tab.stack, "/overview", foreign) == 401
    # while the local stack's bearer tokens (standing for SigV4 callers) still work beside it
    assert api_status(tab.stack, "/overview", f"Bearer {operator_password(tab.stack)}") == 200


# --- `filejobs console`: the console through the signing proxy ---------------------------------


def test_filejobs_console_opens_the_console_signed_in_through_its_proxy(
    tab: Tab, uploaded: dict[str, dict[str, Any]]
) -> None:
    # given the proxy `filejobs console --as tenant:acme` serves, on this stack (its bearer
    # tokens stand for SigV4 here: the proxy signs as its target signs)
    proxy = ConsoleProxy(local_target(tab.stack.root, Acting(TENANT))).start()
    try:
        # when the browser opens its one-time link
        tab.page.goto(proxy.handoff_url)
        # then the console is signed in with the proxy's secret, which the link did not carry
        expect(tab.page.locator("main h1")).to_have_text("Overview")
        stored = tab.page.evaluate("() => window.sessionStorage.getItem('filejobs.console.token')")
        assert stored == proxy.secret and proxy.secret not in proxy.handoff_url
        assert "handoff" not in tab.page.url
        # and it reads the API as the tenant, through the proxy
        assert tab.tenants_of_search("#/jobs?status=completed") == {TENANT}
        # and the link, used, opens nothing in another tab
        again = tab.page.context.new_page()
        again.goto(proxy.handoff_url)
        expect(again.locator("main [role=alert]")).to_contain_text("used already")
    finally:
        proxy.stop()
