"""Webhook signing secrets sealed with the stack's KMS key (template.yaml WebhookSecretsKey).

Direct Encrypt and Decrypt: a secret is 49 bytes, far under KMS's 4 KB, so there is no data key
to keep. Every ciphertext is bound to its endpoint by the encryption context (the tenant and the
endpoint id): a sealed secret copied into another endpoint's item, or another tenant's, does not
open. The key's policy lets the API function's role seal (a new or rotated secret) and the
webhooks function's role open, and no one else use it; an operator with OpsTable's items in hand
(a backup, an export, a table read) holds no usable secret.

Opening is cached for the life of the environment: a ciphertext always opens to the same
plaintext, so a warm webhooks function asks KMS once per secret, not once per delivery. The cache
holds only what this environment's deliveries opened, and is bounded.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

# Secrets opened in this environment: (ciphertext, context) -> plaintext. A warm environment sees
# the secrets of the endpoints it delivered to; past this many, it starts again (a Decrypt each).
_OPENED: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
OPENED_LIMIT = 4096


class KmsSecretCipher:
    def __init__(self, client: Any, key_arn: str) -> None:  # a boto3 KMS client
        self._client, self._key = client, key_arn

    def seal(self, plaintext: str, context: Mapping[str, str]) -> str:
        answer = self._client.encrypt(
            KeyId=self._key, Plaintext=plaintext.encode(), EncryptionContext=dict(context)
        )
        return base64.b64encode(bytes(answer["CiphertextBlob"])).decode("ascii")

    def open(self, sealed: str, context: Mapping[str, str]) -> str:
        cached = (sealed, tuple(sorted(context.items())))
        if cached in _OPENED:
            return _OPENED[cached]
        # KeyId pins the key: a ciphertext made under any other key is refused, not opened.
        answer = self._client.decrypt(
            KeyId=self._key,
            CiphertextBlob=base64.b64decode(sealed),
            EncryptionContext=dict(context),
        )
        plaintext = bytes(answer["Plaintext"]).decode()
        if len(_OPENED) >= OPENED_LIMIT:
            _OPENED.clear()
        _OPENED[cached] = plaintext
        return plaintext


def forget_opened() -> None:
    """Empties this environment's cache (the tests, between stacks)."""
    _OPENED.clear()
