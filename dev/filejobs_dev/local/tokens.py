"""Bearer tokens of the local stack's API.

The stack's `api_token` is an operator's (every tenant). `filejobs token --tenant T` mints a
token scoped to tenant T: `ft1.<tenant>.<HMAC-SHA256 of the tenant under the stack's secret>`.
The secret lives in `.filejobs/local.json` beside the operator token (mode 600): whoever can
read one can read the other, so tenant tokens add no exposure. A new `filejobs dev` makes a new
secret, and with it every earlier token invalid.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

PREFIX = "ft1"
# As access.py accepts them: the tenants of upload keys.
TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class TokenError(ValueError):
    """A tenant no token can be made for."""


def mint(secret: str, tenant: str) -> str:
    if not TENANT.match(tenant):
        raise TokenError(f"not a tenant name: {tenant!r} (letters, digits, - and _)")
    return f"{PREFIX}.{tenant}.{_signature(secret, tenant)}"


def tenant_of(secret: str, token: str) -> str | None:
    """The tenant a token was minted for under `secret`; None for anything else."""
    prefix, _, rest = token.partition(".")
    tenant, _, signature = rest.rpartition(".")
    if prefix != PREFIX or not TENANT.match(tenant):
        return None
    if not hmac.compare_digest(signature, _signature(secret, tenant)):
        return None
    return tenant


def _signature(secret: str, tenant: str) -> str:
    digest = hmac.new(secret.encode(), f"tenant:{tenant}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
