"""API Gateway's check of a SigV4 signature, for the tests' stand-in gateways (the CLI's and the
console proxy's requests): the Authorization header read, then the signature computed again from
the request as it was received, with botocore's own signer."""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/"
    r"aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?Signature=(?P<signature>[0-9a-f]+)"
)


@dataclass(frozen=True)
class SigV4Signature:
    """What an Authorization header says of its signature."""

    key: str  # the access key id
    region: str
    service: str
    headers: tuple[str, ...]  # the signed headers' names, lower case
    signature: str


def signed_by(authorization: str) -> SigV4Signature | None:
    """The header's signature, or None when it is no SigV4 signature."""
    found = _AUTHORIZATION.fullmatch(authorization.strip())
    if found is None:
        return None
    names = tuple(found["signed"].split(";"))
    return SigV4Signature(
        found["key"], found["region"], found["service"], names, found["signature"]
    )


def signature_holds(
    signed: SigV4Signature,
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    secret: str,
    token: str | None = None,
) -> bool:
    """Whether `signed` is the signature of this request under the key's secret (and session
    token), as API Gateway recomputes it from what it received."""
    received = {name.lower(): value for name, value in headers.items()}
    if any(name not in received for name in signed.headers):
        return False
    request = AWSRequest(
        method=method,
        url=url,
        data=body or None,
        headers={name: received[name] for name in signed.headers},
    )
    request.context["timestamp"] = received.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(signed.key, secret, token), signed.service, signed.region)
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    return hmac.compare_digest(expected, signed.signature)
