"""Specification: the local stack's stand-in user pool (filejobs_dev/local/issuer.py) checks each
OAuth step as Cognito does (PKCE with S256, a code used once by its client with its redirect URI
and verifier, registered redirect URIs only), and the router's Cognito authorizer takes exactly
the ID tokens API Gateway's would: signed by the pool's key, of its issuer, not expired."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from filejobs.access import Caller, caller_from
from filejobs.config import CallerSettings
from filejobs_dev.local import issuer as issuer_module
from filejobs_dev.local import tokens
from filejobs_dev.local.issuer import (
    CognitoAuthorizer,
    LocalDirectory,
    StandInIssuer,
    TokenRequestError,
    challenge_of,
    verifier_matches,
)

API_TOKEN = "the-stack-s-api-token"
SECRET = "the-stack-s-token-secret"
CONSOLE = "http://127.0.0.1:3999/console"
VERIFIER = "v" * 43


@pytest.fixture(scope="module")
def issuer() -> Iterator[StandInIssuer]:
    running = StandInIssuer(LocalDirectory(API_TOKEN, SECRET, "operators"), CONSOLE).start()
    yield running
    running.stop()


def acme() -> issuer_module.Identity:
    return issuer_module.Identity("acme", tenant="acme")


def code_for(issuer: StandInIssuer, verifier: str = VERIFIER) -> str:
    return issuer.grant_code(acme(), issuer.client_id, CONSOLE, challenge_of(verifier))


def exchange(issuer: StandInIssuer, code: str, **changed: str) -> dict[str, Any]:
    fields = {
        "grant_type": "authorization_code",
        "client_id": issuer.client_id,
        "code": code,
        "redirect_uri": CONSOLE,
        "code_verifier": VERIFIER,
        **changed,
    }
    return issuer.exchange_code(fields)


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def get(url: str) -> tuple[int, dict[str, str], str]:
    """One GET, redirects not followed: (status, headers, body)."""
    opener = urllib.request.build_opener(NoRedirects)
    try:
        with opener.open(url) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def post(url: str, fields: dict[str, str], origin: str | None = None) -> tuple[int, Any, Any]:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode())
    if origin:
        request.add_header("Origin", origin)
    opener = urllib.request.build_opener(NoRedirects)
    try:
        with opener.open(request) as answer:
            return answer.status, answer.headers, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


# --- PKCE (RFC 7636) --------------------------------------------------------------------------


def test_the_s256_challenge_is_rfc_7636_s_own_example() -> None:
    # RFC 7636, appendix B
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert challenge_of(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert verifier_matches(verifier, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")


@pytest.mark.parametrize(
    "verifier",
    # too short, too long, not of the unreserved characters, empty
    ["v" * 42, "v" * 129, "v" * 42 + "!", "v" * 42 + " ", ""],
)
def test_a_malformed_verifier_never_matches(verifier: str) -> None:
    assert not verifier_matches(verifier, challenge_of(verifier))


def test_a_code_is_exchanged_once_with_its_verifier(issuer: StandInIssuer) -> None:
    code = code_for(issuer)
    answer = exchange(issuer, code)
    claims = jwt.decode(answer["id_token"], options={"verify_signature": False})
    assert claims["custom:tenant"] == "acme" and claims["aud"] == issuer.client_id
    assert answer["refresh_token"] and answer["token_type"] == "Bearer"
    with pytest.raises(TokenRequestError, match="invalid_grant"):
        exchange(issuer, code)  # used: gone


@pytest.mark.parametrize(
    "changed",
    [
        {"code_verifier": "w" * 43},  # another verifier: the code's thief has not the verifier
        {"redirect_uri": "http://127.0.0.1:3999/elsewhere"},
        {"client_id": "another-client"},
    ],
)
def test_a_code_with_another_verifier_client_or_redirect_is_refused_and_spent(
    issuer: StandInIssuer, changed: dict[str, str]
) -> None:
    code = code_for(issuer)
    with pytest.raises(TokenRequestError):
        exchange(issuer, code, **changed)
    # and the code is spent: no second guess with the right values
    with pytest.raises(TokenRequestError, match="invalid_grant"):
        exchange(issuer, code)


def test_a_code_older_than_five_minutes_is_refused(
    issuer: StandInIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = code_for(issuer)
    later = time.time() + issuer_module.CODE_SECONDS + 1
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(TokenRequestError, match="invalid_grant"):
        exchange(issuer, code)


def test_a_refresh_token_renews_the_id_token_until_revoked(issuer: StandInIssuer) -> None:
    refresh = exchange(issuer, code_for(issuer))["refresh_token"]
    renewed = issuer.refresh({"client_id": issuer.client_id, "refresh_token": refresh})
    assert jwt.decode(renewed["id_token"], options={"verify_signature": False})["iss"] == issuer.url
    with pytest.raises(TokenRequestError):
        issuer.refresh({"client_id": "another-client", "refresh_token": refresh})
    issuer.revoke({"client_id": issuer.client_id, "token": refresh})
    with pytest.raises(TokenRequestError, match="invalid_grant"):
        issuer.refresh({"client_id": issuer.client_id, "refresh_token": refresh})


# --- the hosted pages ---------------------------------------------------------------------------


def authorize_url(issuer: StandInIssuer, **changed: str) -> str:
    params = {
        "response_type": "code",
        "client_id": issuer.client_id,
        "redirect_uri": CONSOLE,
        "state": "st4te",
        "code_challenge": challenge_of(VERIFIER),
        "code_challenge_method": "S256",
        "scope": "openid email",
        **changed,
    }
    return f"{issuer.url}/oauth2/authorize?{urllib.parse.urlencode(params)}"


def test_the_sign_in_form_carries_the_request_and_signs_a_tenant_in(
    issuer: StandInIssuer,
) -> None:
    status, headers, form = get(authorize_url(issuer))
    assert status == 200 and 'name="password"' in form
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    # when the tenant signs in with its local token as password
    fields = {
        "client_id": issuer.client_id,
        "redirect_uri": CONSOLE,
        "state": "st4te",
        "code_challenge": challenge_of(VERIFIER),
        "username": "acme",
        "password": tokens.mint(SECRET, "acme"),
    }
    status, answer, _ = post(f"{issuer.url}/login", fields)
    # then back to the console with a code and the state it sent
    assert status == 302
    location = urllib.parse.urlsplit(answer["Location"])
    back = urllib.parse.parse_qs(location.query)
    assert f"{location.scheme}://{location.netloc}{location.path}" == CONSOLE
    assert back["state"] == ["st4te"] and back["code"]
    tokens_answer = exchange(issuer, back["code"][0])
    claims = jwt.decode(tokens_answer["id_token"], options={"verify_signature": False})
    assert claims["custom:tenant"] == "acme" and "cognito:groups" not in claims


def test_a_wrong_password_is_answered_with_the_form_again(issuer: StandInIssuer) -> None:
    fields = {
        "client_id": issuer.client_id,
        "redirect_uri": CONSOLE,
        "code_challenge": challenge_of(VERIFIER),
        "username": "acme",
        "password": tokens.mint(SECRET, "globex"),  # another tenant's token
    }
    status, _, page = post(f"{issuer.url}/login", fields)
    assert status == 401 and "Incorrect username or password." in page


@pytest.mark.parametrize(
    "changed",
    [{"redirect_uri": "https://attacker.example/steal"}, {"client_id": "no-such-client"}],
)
def test_an_unregistered_client_or_redirect_uri_is_refused_there_never_redirected_to(
    issuer: StandInIssuer, changed: dict[str, str]
) -> None:
    status, headers, _ = get(authorize_url(issuer, **changed))
    assert status == 400 and "Location" not in headers


@pytest.mark.parametrize(
    "changed",
    [{"code_challenge_method": "plain"}, {"code_challenge": ""}, {"response_type": "token"}],
)
def test_a_request_without_pkce_s256_or_for_another_flow_goes_back_with_an_error(
    issuer: StandInIssuer, changed: dict[str, str]
) -> None:
    status, headers, _ = get(authorize_url(issuer, **changed))
    assert status == 302
    back = urllib.parse.parse_qs(urllib.parse.urlsplit(headers["Location"]).query)
    assert back["error"] and back["state"] == ["st4te"] and "code" not in back


def test_only_the_console_s_origin_may_read_token_answers(issuer: StandInIssuer) -> None:
    fields = {"grant_type": "refresh_token", "client_id": issuer.client_id, "refresh_token": "x"}
    _, headers, _ = post(f"{issuer.url}/oauth2/token", fields, origin="http://127.0.0.1:3999")
    assert headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:3999"
    _, headers, _ = post(f"{issuer.url}/oauth2/token", fields, origin="http://evil.example")
    assert headers["Access-Control-Allow-Origin"] is None


def test_sign_out_goes_back_to_a_registered_logout_uri_only(issuer: StandInIssuer) -> None:
    query = urllib.parse.urlencode({"client_id": issuer.client_id, "logout_uri": CONSOLE})
    status, headers, _ = get(f"{issuer.url}/logout?{query}")
    assert (status, headers["Location"]) == (302, CONSOLE)
    query = urllib.parse.urlencode(
        {"client_id": issuer.client_id, "logout_uri": "https://x.example"}
    )
    assert get(f"{issuer.url}/logout?{query}")[0] == 400


# --- who may sign in ---------------------------------------------------------------------------


def test_the_directory_is_the_local_stack_s_token_holders() -> None:
    directory = LocalDirectory(API_TOKEN, SECRET, "filejobs-admins")
    operator = directory.identity("operator", API_TOKEN)
    assert operator is not None and operator.tenant is None
    assert operator.groups == ("filejobs-admins",)
    tenant = directory.identity("acme", tokens.mint(SECRET, "acme"))
    assert tenant is not None and tenant.tenant == "acme" and tenant.groups == ()
    assert directory.identity("globex", tokens.mint(SECRET, "acme")) is None
    assert directory.identity("acme", API_TOKEN) is None
    assert directory.identity("operator", tokens.mint(SECRET, "operator")) is None
    assert directory.identity("acme", tokens.mint("another-stack", "acme")) is None


# --- the router's Cognito authorizer -------------------------------------------------------------


def tampered(token: str, **claims: Any) -> str:
    """`token` with its claims changed and its signature kept (no longer theirs)."""
    header, payload, signature = token.split(".")
    padded = payload + "=" * (-len(payload) % 4)
    changed = {**json.loads(base64.urlsafe_b64decode(padded)), **claims}
    encoded = base64.urlsafe_b64encode(json.dumps(changed).encode()).rstrip(b"=").decode()
    return f"{header}.{encoded}.{signature}"


def test_an_id_token_of_the_pool_gives_its_claims_as_api_gateway_passes_them(
    issuer: StandInIssuer,
) -> None:
    operator = issuer_module.Identity("operator", groups=("operators", "auditors"))
    found = CognitoAuthorizer(issuer.url).authorize(issuer.id_token(operator, issuer.client_id))
    assert found is not None
    claims = found["claims"]
    assert claims["cognito:groups"] == "operators,auditors"
    assert all(isinstance(value, str) for value in claims.values())
    # and the function reads an operator from them
    assert caller_from(
        {"requestContext": {"authorizer": found}}, CallerSettings.from_env({})
    ) == Caller(None, True)


def test_the_authorizer_refuses_what_api_gateway_s_refuses(issuer: StandInIssuer) -> None:
    authorizer = CognitoAuthorizer(issuer.url)
    good = issuer.id_token(acme(), issuer.client_id)
    assert authorizer.authorize(good) is not None
    assert authorizer.authorize(f"Bearer {good}") is not None
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = jwt.decode(good, options={"verify_signature": False})
    refused = {
        "a tenant claim changed": tampered(good, **{"custom:tenant": "globex"}),
        "signed by another key": jwt.encode(
            claims, other_key, algorithm="RS256", headers={"kid": issuer.key_id}
        ),
        "expired": issuer.id_token(acme(), issuer.client_id, now=time.time() - 7200),
        "another issuer": issuer.sign({**claims, "iss": "http://127.0.0.1:1/other"}),
        "an access token": issuer.access_token(acme(), issuer.client_id),
        "unsigned": jwt.encode(claims, key="", algorithm="none"),
        "not a JWT": tokens.mint(SECRET, "acme"),
        "nothing": "",
    }
    for why, token in refused.items():
        assert authorizer.authorize(token) is None, why


def test_like_api_gateway_s_it_takes_any_client_of_the_pool_leaving_the_audience_to_the_function(
    issuer: StandInIssuer,
) -> None:
    # given an ID token the pool issued to another app client
    found = CognitoAuthorizer(issuer.url).authorize(
        issuer.id_token(acme(), issuer.another_client_id)
    )
    assert found is not None and found["claims"]["aud"] == issuer.another_client_id
    # then the function, told the console's client by the stage, refuses it
    event = {"requestContext": {"authorizer": found}, "stageVariables": issuer.stage_variables()}
    assert caller_from(event, CallerSettings.from_env({})) is None
