"""A stand-in for the stack's user pool on the local stack (`filejobs dev --parameter
ApiAuth=COGNITO`), and the router's check of its tokens as API Gateway's Cognito authorizer
makes it.

`StandInIssuer` serves, on 127.0.0.1, the parts of a Cognito user pool and its hosted pages
the console uses, at Cognito's paths: `/oauth2/authorize` (a minimal sign-in form; PKCE with
S256 required, the redirect URI one the client registered), `/oauth2/token` (an authorization
code, once, with the verifier whose SHA-256 is the code's challenge; or a refresh token),
`/oauth2/revoke`, `/logout`, and the issuer's `/.well-known/jwks.json` and
`openid-configuration`. Its ID tokens are RS256 JWTs with Cognito's claims: `iss`, `aud` (the
console's app client), `exp`, `token_use: id`, `cognito:username`, `cognito:groups` and
`custom:tenant`.

Who may sign in (`LocalDirectory`) are the local stack's token holders, so nothing new is kept:
`operator` with the stack's `api_token` (a member of ApiOperatorGroup), and a tenant's name
with the token `filejobs token --tenant NAME` prints (its `custom:tenant`).

`CognitoAuthorizer` checks a token as a REST API's Cognito authorizer does before the function
runs: its signature against the issuer's JWKS, its issuer, its expiry, and that it is an ID
token; the claims then reach the function as `requestContext.authorizer.claims`, every value a
string as API Gateway hands them over. Like API Gateway's, it takes an ID token of any app
client of the pool: the audience is the function's to check (filejobs.access, against the
stage's `consoleClientId`), which is what a deployed stack relies on. So the stand-in has a
second app client, `another_client_id`, standing for another app sharing the pool, whose ID
tokens the API must refuse.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from filejobs import console
from filejobs_dev.local import tokens

OPERATOR_USERNAME = "operator"
CODE_SECONDS = 300  # Cognito's authorization codes live five minutes
ID_TOKEN_SECONDS = 3600  # the template's IdTokenValidity
REFRESH_TOKEN_SECONDS = 8 * 3600  # the template's RefreshTokenValidity
ANOTHER_APP_PATH = "/another-app"
SCOPES = "openid email"
# RFC 7636: 43 to 128 characters of the unreserved set.
_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")


def challenge_of(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier: base64url(SHA-256(verifier)), unpadded."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verifier_matches(verifier: str, challenge: str) -> bool:
    """Whether `verifier` is a well-formed PKCE verifier whose S256 challenge is `challenge`."""
    if not _VERIFIER.match(verifier):
        return False
    return hmac.compare_digest(challenge_of(verifier), challenge)


@dataclass(frozen=True)
class Identity:
    username: str
    tenant: str | None = None
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class LocalDirectory:
    """The stand-in's users: the local stack's token holders (module docstring)."""

    api_token: str
    token_secret: str
    operator_group: str = "operators"

    def identity(self, username: str, password: str) -> Identity | None:
        if username == OPERATOR_USERNAME:
            if hmac.compare_digest(password.encode(), self.api_token.encode()):
                return Identity(username, groups=(self.operator_group,))
            return None
        if tokens.tenant_of(self.token_secret, password) == username:
            return Identity(username, tenant=username)
        return None


@dataclass(frozen=True)
class Grant:
    """What an authorization code stands for until it is exchanged, once."""

    identity: Identity
    client_id: str
    redirect_uri: str
    challenge: str
    expires_at: float


@dataclass(frozen=True)
class Session:
    """What a refresh token stands for until it expires or is revoked."""

    identity: Identity
    client_id: str
    expires_at: float


class TokenRequestError(ValueError):
    """A token request refused with an OAuth error code (`invalid_grant`, ...)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class StandInIssuer:
    """The user pool's hosted pages, token endpoint and issuer for one app client: the console,
    whose URL is its only callback and logout URL. A new key and client id per start, as a new
    local stack makes new tokens."""

    def __init__(
        self,
        directory: LocalDirectory,
        console_url: str,
        *,
        id_token_seconds: int = ID_TOKEN_SECONDS,
    ) -> None:
        self.directory = directory
        self.console_url = console_url
        self.id_token_seconds = id_token_seconds
        self.client_id = secrets.token_hex(13)  # 26 characters, as Cognito's client ids
        self.another_client_id = secrets.token_hex(13)
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key_id = secrets.token_hex(8)
        self._codes: dict[str, Grant] = {}
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # --- the issuer's side -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The issuer (`iss`) and the hosted pages' base URL: one origin here."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def console_origin(self) -> str:
        parts = urlsplit(self.console_url)
        return f"{parts.scheme}://{parts.netloc}"

    def stage_variables(self) -> dict[str, str]:
        """What the stack's Cognito API's stage hands the function (template.yaml's
        ConsoleApiStage Variables), naming this issuer and its client."""
        return {console.CLIENT_VARIABLE: self.client_id, console.SIGN_IN_URL_VARIABLE: self.url}

    @property
    def another_app_url(self) -> str:
        """The other app client's callback: a page of the stand-in itself."""
        return f"{self.url}{ANOTHER_APP_PATH}"

    def describe(self) -> dict[str, str]:
        """For `.filejobs/local.json`."""
        return {
            "issuer": self.url,
            "client_id": self.client_id,
            "console_url": self.console_url,
            "another_client_id": self.another_client_id,
            "another_app_url": self.another_app_url,
        }

    def jwks(self) -> dict[str, Any]:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.key_id, "use": "sig", "alg": "RS256"}]}

    def openid_configuration(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/oauth2/authorize",
            "token_endpoint": f"{self.url}/oauth2/token",
            "revocation_endpoint": f"{self.url}/oauth2/revoke",
            "end_session_endpoint": f"{self.url}/logout",
            "jwks_uri": f"{self.url}/.well-known/jwks.json",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def id_token(self, identity: Identity, client_id: str, now: float | None = None) -> str:
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            **self._common_claims(identity, issued),
            "aud": client_id,
            "token_use": "id",
            "auth_time": issued,
            "cognito:username": identity.username,
        }
        if identity.groups:
            claims["cognito:groups"] = list(identity.groups)
        if identity.tenant is not None:
            claims["custom:tenant"] = identity.tenant
        return self.sign(claims)

    def access_token(self, identity: Identity, client_id: str) -> str:
        return self.sign(
            {
                **self._common_claims(identity, int(time.time())),
                "client_id": client_id,
                "token_use": "access",
                "scope": SCOPES,
                "username": identity.username,
            }
        )

    def _common_claims(self, identity: Identity, issued: int) -> dict[str, Any]:
        """What both of a sign-in's tokens say: who, by whom, when, until when, which one."""
        return {
            "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.url}/{identity.username}")),
            "iss": self.url,
            "iat": issued,
            "exp": issued + self.id_token_seconds,
            "jti": str(uuid.uuid4()),
        }

    def sign(self, claims: Mapping[str, Any]) -> str:
        return jwt.encode(dict(claims), self.key, algorithm="RS256", headers={"kid": self.key_id})

    # --- the OAuth steps, each checked as the user pool checks it ----------------------------

    def registered(self, client_id: str, redirect_uri: str) -> bool:
        """Each client's one callback (and logout) URL, matched exactly: the console's for the
        console's client."""
        callbacks = {self.client_id: self.console_url, self.another_client_id: self.another_app_url}
        return callbacks.get(client_id) == redirect_uri

    def grant_code(
        self, identity: Identity, client_id: str, redirect_uri: str, challenge: str
    ) -> str:
        code = secrets.token_urlsafe(32)
        grant = Grant(identity, client_id, redirect_uri, challenge, time.time() + CODE_SECONDS)
        with self._lock:
            self._codes[code] = grant
        return code

    def exchange_code(self, fields: Mapping[str, str]) -> dict[str, Any]:
        """Tokens for an authorization code: used once (a second try finds nothing), by its
        client, with its redirect URI and the verifier whose challenge it carries."""
        with self._lock:
            grant = self._codes.pop(fields.get("code", ""), None)
        if grant is None or grant.expires_at < time.time():
            raise TokenRequestError("invalid_grant")
        if fields.get("client_id") != grant.client_id:
            raise TokenRequestError("invalid_client")
        if fields.get("redirect_uri") != grant.redirect_uri:
            raise TokenRequestError("invalid_grant")
        if not verifier_matches(fields.get("code_verifier", ""), grant.challenge):
            raise TokenRequestError("invalid_grant")
        refresh = secrets.token_urlsafe(48)
        with self._lock:
            self._sessions[refresh] = Session(
                grant.identity, grant.client_id, time.time() + REFRESH_TOKEN_SECONDS
            )
        return {**self._tokens(grant.identity, grant.client_id), "refresh_token": refresh}

    def refresh(self, fields: Mapping[str, str]) -> dict[str, Any]:
        with self._lock:
            session = self._sessions.get(fields.get("refresh_token", ""))
        if session is None or session.expires_at < time.time():
            raise TokenRequestError("invalid_grant")
        if fields.get("client_id") != session.client_id:
            raise TokenRequestError("invalid_client")
        return self._tokens(session.identity, session.client_id)

    def revoke(self, fields: Mapping[str, str]) -> None:
        with self._lock:
            session = self._sessions.get(fields.get("token", ""))
            if session is not None and session.client_id == fields.get("client_id"):
                del self._sessions[fields["token"]]

    def _tokens(self, identity: Identity, client_id: str) -> dict[str, Any]:
        return {
            "id_token": self.id_token(identity, client_id),
            "access_token": self.access_token(identity, client_id),
            "token_type": "Bearer",
            "expires_in": self.id_token_seconds,
        }

    # --- serving -----------------------------------------------------------------------------

    def start(self) -> StandInIssuer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        threading.Thread(target=self._server.serve_forever, name="issuer", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _handler(issuer: StandInIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(_IssuerHandler):
        pass

    Handler.issuer = issuer
    return Handler


class _IssuerHandler(BaseHTTPRequestHandler):
    issuer: StandInIssuer

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        if path == "/.well-known/jwks.json":
            self._json(200, self.issuer.jwks())
        elif path == "/.well-known/openid-configuration":
            self._json(200, self.issuer.openid_configuration())
        elif path == "/oauth2/authorize":
            self._authorize(params)
        elif path == "/logout":
            self._logout(params)
        elif path == ANOTHER_APP_PATH:
            self._page(200, "Another app", "<p>Signed in to another app of this user pool.</p>")
        else:
            self._page(404, "Not found", "<p>No such page.</p>")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        fields = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        if self.path == "/login":
            self._login(fields)
        elif self.path == "/oauth2/token":
            self._token(fields)
        elif self.path == "/oauth2/revoke":
            self.issuer.revoke(fields)
            self._json(200, {})
        else:
            self._json(404, {"error": "not_found"})

    def do_OPTIONS(self) -> None:
        # The console's token requests are CORS "simple" requests; a preflight gets its answer.
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "POST")
        self.send_header("Access-Control-Allow-Headers", "Content-Type")
        self.send_header("Content-Length", "0")
        self.end_headers()

    # --- the hosted pages --------------------------------------------------------------------

    def _authorize(self, params: dict[str, str]) -> None:
        # Never send anyone to a URL the client did not register: refused here, not redirected.
        if not self.issuer.registered(params.get("client_id", ""), params.get("redirect_uri", "")):
            self._page(400, "Sign-in refused", "<p>Unknown app client or redirect URI.</p>")
            return
        if params.get("response_type") != "code":
            self._back(params, error="unsupported_response_type")
        elif params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            self._back(params, error="invalid_request", description="PKCE (S256) is required")
        else:
            self._form(200, params, "")

    def _login(self, fields: dict[str, str]) -> None:
        if not self.issuer.registered(fields.get("client_id", ""), fields.get("redirect_uri", "")):
            self._page(400, "Sign-in refused", "<p>Unknown app client or redirect URI.</p>")
            return
        identity = self.issuer.directory.identity(
            fields.get("username", ""), fields.get("password", "")
        )
        if identity is None or not fields.get("code_challenge"):
            self._form(401, fields, "Incorrect username or password.")
            return
        code = self.issuer.grant_code(
            identity, fields["client_id"], fields["redirect_uri"], fields["code_challenge"]
        )
        self._back(fields, code=code)

    def _logout(self, params: dict[str, str]) -> None:
        if not self.issuer.registered(params.get("client_id", ""), params.get("logout_uri", "")):
            self._page(400, "Sign-out refused", "<p>Unknown app client or logout URI.</p>")
            return
        self._redirect(params["logout_uri"])

    def _back(self, params: dict[str, str], **answer: str) -> None:
        """To the client's redirect URI with `answer` (code, or error) and the state it sent."""
        if "error" in answer and "description" in answer:
            answer["error_description"] = answer.pop("description")
        state = params.get("state")
        query = urlencode({**answer, **({"state": state} if state else {})})
        self._redirect(f"{params['redirect_uri']}?{query}")

    def _form(self, status: int, params: dict[str, str], message: str) -> None:
        carried = ("client_id", "redirect_uri", "state", "code_challenge", "scope")
        hidden = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(params.get(name, ""))}">'
            for name in carried
        )
        alert = f'<p role="alert">{html.escape(message)}</p>' if message else ""
        body = (
            f'{alert}<form method="post" action="/login">{hidden}'
            '<p><label for="username">Username</label><br>'
            '<input id="username" name="username" autocomplete="username" required></p>'
            '<p><label for="password">Password</label><br>'
            '<input id="password" name="password" type="password" '
            'autocomplete="current-password" required></p>'
            '<p><button type="submit">Sign in</button></p></form>'
            "<p>The local stand-in for the stack's user pool: <code>operator</code> with the "
            "stack's <code>api_token</code> (.filejobs/local.json), or a tenant's name with "
            "<code>filejobs token --tenant NAME</code>.</p>"
        )
        self._page(status, "Sign in", body)

    # --- the token endpoint ------------------------------------------------------------------

    def _token(self, fields: dict[str, str]) -> None:
        try:
            grant_type = fields.get("grant_type")
            if grant_type == "authorization_code":
                answer = self.issuer.exchange_code(fields)
            elif grant_type == "refresh_token":
                answer = self.issuer.refresh(fields)
            else:
                raise TokenRequestError("unsupported_grant_type")
        except TokenRequestError as error:
            self._json(400, {"error": error.code})
            return
        self._json(200, answer)

    # --- answers -----------------------------------------------------------------------------

    def _cors(self) -> None:
        """Only the console's origin may read the token endpoint's answers from a page."""
        if self.headers.get("Origin") == self.issuer.console_origin:
            self.send_header("Access-Control-Allow-Origin", self.issuer.console_origin)
            self.send_header("Vary", "Origin")

    def _json(self, status: int, document: Any) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _page(self, status: int, title: str, content: str) -> None:
        body = (
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · '
            'local user pool</title><meta name="viewport" content="width=device-width">'
            f"</head><body><main><h1>{title}</h1>{content}</main></body></html>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header(
            "Content-Security-Policy",
            "default-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
            f"form-action 'self' {self.issuer.console_origin}",
        )
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


class CognitoAuthorizer:
    """A REST API's Cognito user pool authorizer, for the local router: an ID token of the
    issuer, signed by a key of its JWKS (fetched and cached as a verifier does), not expired;
    its claims as API Gateway hands them to the function. Of any app client of the pool, as
    API Gateway's: the function checks the audience (module docstring)."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self._keys = jwt.PyJWKClient(f"{issuer}/.well-known/jwks.json", lifespan=300)

    def authorize(self, header: str) -> dict[str, Any] | None:
        token = header.strip()
        if token[:7].lower() == "bearer ":
            token = token[7:].strip()
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"verify_aud": False, "require": ["exp", "iat", "iss", "token_use"]},
            )
        except jwt.PyJWTError:
            return None
        if claims.get("token_use") != "id":
            return None
        return {"claims": gateway_claims(claims)}


def gateway_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """Claims as a REST API's Cognito authorizer passes them on: every value a string, a list
    (the groups) joined with commas (filejobs.access reads it so)."""
    return {
        name: ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
        for name, value in claims.items()
    }
