"""Page tokens: where a listing stopped, as an opaque string the caller sends back.

A token is base64url of JSON naming the listing it continues (its scope: caller, tenant,
filters) and the cursor where the last page ended. With a secret it is signed (HMAC-SHA256);
without one it is still bound to its scope, and a tenant's listing reads only that tenant's
partitions whatever a token says, so a forged token can reorder a tenant's own jobs at worst,
never show another tenant's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from filejobs.domain.messages import is_uuid
from filejobs.ports import PageCursor
from filejobs.services.errors import MalformedRequestError

MAX_TOKEN_LENGTH = 2048


class PageTokens:
    def __init__(self, secret: bytes | None) -> None:
        self._secret = secret

    def encode(self, cursor: PageCursor, scope: dict[str, Any]) -> str:
        payload = json.dumps(
            {"scope": scope, "after": [cursor.range_value, cursor.id]},
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        token = _b64encode(payload)
        if self._secret is not None:
            token += "." + _b64encode(_sign(self._secret, payload))
        return token

    def decode(self, token: str, scope: dict[str, Any]) -> PageCursor:
        """The cursor of a token this listing (the same scope) gave out; anything else is
        refused as malformed."""
        invalid = MalformedRequestError("next_token is not valid for this listing")
        if len(token) > MAX_TOKEN_LENGTH:
            raise invalid
        body, _, signature = token.partition(".")
        try:
            payload = _b64decode(body)
            if self._secret is not None and not hmac.compare_digest(
                _b64decode(signature), _sign(self._secret, payload)
            ):
                raise invalid
            data = json.loads(payload)
        except (ValueError, binascii.Error):
            raise invalid from None
        if not isinstance(data, dict) or data.get("scope") != scope:
            raise invalid
        after = data.get("after")
        if not (
            isinstance(after, list)
            and len(after) == 2
            and all(isinstance(part, str) for part in after)
            and is_uuid(after[1])
        ):
            raise invalid
        return PageCursor(after[0], after[1])


def _sign(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
