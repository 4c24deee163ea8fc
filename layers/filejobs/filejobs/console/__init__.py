"""The operator console's shell: one HTML page, its scripts and its stylesheet (docs/CONSOLE.md).

Package data of the filejobs layer, served by the API function at `/console` and
`/console/{asset}` on the API's own origin. The shell holds no data: every piece of it comes from
the API routes, which identify their caller as every route does. Nothing is loaded from another
origin, and nothing runs inline: the page's Content-Security-Policy allows the API's own origin
alone, and images from the outputs bucket's (the presigned URLs of thumbnails and previews).

How the page signs in is the API's to say (`config.json`, public values only): on the stack's
Cognito API (ApiAuth=COGNITO) its stage variables name the user pool's sign-in domain and the
console's app client, and the page signs in there (authorization code with PKCE: oauth.js), its
policy then also letting it reach that domain's token endpoint; anywhere else it takes a bearer
token (the local stack's, or `filejobs console`'s proxy secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from urllib.parse import urlsplit

PAGE = "index.html"
# Not a file: how the page signs in, from the API's stage (sign_in_settings).
CONFIG = "config.json"
# Every file the console serves, with its media type: no other name is ever read.
ASSETS: dict[str, str] = {
    PAGE: "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "oauth.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# The stage variables of the stack's Cognito API (template.yaml's ConsoleApiStage) read here.
CLIENT_VARIABLE = "consoleClientId"
SIGN_IN_URL_VARIABLE = "consoleSignInUrl"
# scheme://host[:port], nothing more: what a policy's source list may name.
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?$")


class UnknownAssetError(LookupError):
    """A name that is not one of the console's files."""


@cache
def asset(name: str) -> tuple[str, bytes]:
    """The media type and bytes of one of the console's files; any other name is refused, so a
    path never reaches the package's other files."""
    content_type = ASSETS.get(name)
    if content_type is None:
        raise UnknownAssetError(name)
    return content_type, resources.files(__name__).joinpath(name).read_bytes()


def origin_of(url: str) -> str | None:
    """The origin (scheme://host[:port]) of a URL, e.g. a presigned output link; None when it
    has none a policy could name."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    return origin if _ORIGIN.match(origin) else None


def sign_in_settings(stage_variables: Mapping[str, str] | None) -> dict[str, str]:
    """How the page signs in (`config.json`): through the user pool whose sign-in origin and app
    client the API's stage names, or, on a stage that names none, with a bearer token. Public
    values only: what the browser shows in its address bar while signing in."""
    variables = stage_variables or {}
    client = variables.get(CLIENT_VARIABLE) or ""
    origin = sign_in_origin(variables)
    if not client or origin is None:
        return {"sign_in": "token"}
    return {"sign_in": "cognito", "client_id": client, "sign_in_url": origin}


def sign_in_origin(stage_variables: Mapping[str, str] | None) -> str | None:
    """The user pool's sign-in origin the stage names, when it is a bare http(s) origin."""
    url = (stage_variables or {}).get(SIGN_IN_URL_VARIABLE) or ""
    origin = origin_of(url)
    return origin if origin is not None and url.rstrip("/") == origin else None


def console_policy(image_origin: str | None, sign_in: str | None = None) -> str:
    """The page's Content-Security-Policy: scripts, styles and requests to its own origin only;
    images also from `image_origin` (where the presigned output URLs point: S3, or the local
    stack's emulator) and data: URLs; requests also to `sign_in`, the user pool's sign-in
    origin (its token endpoint). Anything but a bare http(s) origin is left out."""
    images = "'self' data:"
    if image_origin is not None and _ORIGIN.match(image_origin):
        images += f" {image_origin}"
    connect = "'self'"
    if sign_in is not None and _ORIGIN.match(sign_in):
        connect += f" {sign_in}"
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        f"img-src {images}; connect-src {connect}; font-src 'self'; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
