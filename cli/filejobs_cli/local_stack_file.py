"""The local stack's contract with its clients: where `filejobs dev` writes what it serves
(`.filejobs/local.json`: endpoints, region, API URL and token, resources) and the credentials the
emulator takes. The CLI reads it to target the local stack; the dev tools write it."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

CONFIG_PATH = Path(".filejobs") / "local.json"
# Credentials for the emulator only: moto accepts any; real ones must never be sent to it.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}

# A local API token scoped to one tenant (`--as tenant:NAME` on the local stack), made as the
# stack's own `filejobs token` makes it (filejobs_dev/local/tokens.py): the HMAC-SHA256 of the
# tenant under `token_secret` from local.json.
TENANT_TOKEN_PREFIX = "ft1"  # noqa: S105 (a format tag, not a secret)


def tenant_token(secret: str, tenant: str) -> str:
    digest = hmac.new(secret.encode(), f"tenant:{tenant}".encode(), hashlib.sha256).digest()
    signature = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return f"{TENANT_TOKEN_PREFIX}.{tenant}.{signature}"
