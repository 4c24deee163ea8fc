import hashlib
import hmac
import json
import time
import urllib.request
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest


class FilejobsApi:
    """The status API as your backend calls it: SigV4-signed with the credentials of the tenant
    role (a deployed stack), or with a bearer token (the local stack: `filejobs token`)."""

    def __init__(self, api_url: str, *, region: str | None = None, token: str | None = None):
        self.api_url, self.region, self.token = api_url.rstrip("/"), region, token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        else:
            headers = self._signed(method, self.api_url + path, data, headers)
        url = self.api_url + path  # your stack's ApiUrl: https, or the local stack's loopback
        request = urllib.request.Request(url, data, headers, method=method)  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            return json.loads(answer.read() or b"null")

    def _signed(self, method: str, url: str, data: bytes | None, headers: dict) -> dict:
        credentials = boto3.Session().get_credentials().get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        SigV4Auth(credentials, "execute-api", self.region).add_auth(request)
        return dict(request.headers.items())


def mint_upload(api: FilejobsApi, filename: str, content_type: str | None = None) -> dict:
    """A signed upload for the page: the form's url and fields, the key it writes, max_bytes."""
    asked = {"filename": filename, "expires_in": 600}
    if content_type:
        asked["content_type"] = content_type
    return api.call("POST", "/uploads", asked)


def verify_filejobs_signature(header: str, body: bytes, secret: str, tolerance: int = 300) -> bool:
    """True when some v1 of the Filejobs-Signature header signs `body` under `secret` and its
    timestamp is within `tolerance` seconds of now (docs/WEBHOOKS.md)."""
    timestamp, signatures = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or abs(time.time() - timestamp) > tolerance:
        return False
    signed = f"{timestamp}.".encode() + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, signature) for signature in signatures)


def processed_upload(api: FilejobsApi, headers: dict, body: bytes, secret: str) -> dict | None:
    """A `File Processed` webhook, checked on its raw body, turned into what the page shows:
    the upload's key and each completed job's outputs (presigned URLs). None for another event;
    ValueError for a delivery that is not the service's."""
    if not verify_filejobs_signature(headers.get("Filejobs-Signature", ""), body, secret):
        raise ValueError("not signed by filejobs")
    event = json.loads(body)
    if event["type"] != "File Processed":
        return None
    stored = api.call("GET", f"/files/{event['data']['id']}")
    outputs = {
        job["job_type"]: job.get("outputs", [])
        for job in stored["jobs"]
        if job["status"] == "completed"
    }
    return {"key": stored["key"], "file_id": stored["id"], "outputs": outputs}
