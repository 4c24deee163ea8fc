"""The operator console's shell: one HTML page, its script and its stylesheet (docs/CONSOLE.md).

Package data of the filejobs layer, served by the API function at `/console` and
`/console/{asset}` on the API's own origin. The shell holds no data: every piece of it comes from
the API routes, which identify their caller as every route does. Nothing is loaded from another
origin, and nothing runs inline: the page's Content-Security-Policy allows the API's own origin
alone, and images from the outputs bucket's (the presigned URLs of thumbnails and previews).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from urllib.parse import urlsplit

PAGE = "index.html"
# Every file the console serves, with its media type: no other name is ever read.
ASSETS: dict[str, str] = {
    PAGE: "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
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


def console_policy(image_origin: str | None) -> str:
    """The page's Content-Security-Policy: scripts, styles and requests to its own origin only;
    images also from `image_origin` (where the presigned output URLs point: S3, or the local
    stack's emulator) and data: URLs. Anything but a bare http(s) origin is left out."""
    images = "'self' data:"
    if image_origin is not None and _ORIGIN.match(image_origin):
        images += f" {image_origin}"
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        f"img-src {images}; connect-src 'self'; font-src 'self'; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
