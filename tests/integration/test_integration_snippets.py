"""docs/INTEGRATION.md's backends, run as a reader runs them: the Python one and the Node.js one
(node, no package) sign their POST /uploads with SigV4 as API Gateway checks it (tests/sigv4.py,
botocore's own signer), send a body the API parses, and accept exactly the webhooks the service
signs (domain/webhooks.py). The page's code and the Python backend run end to end in
tests/browser/test_browser_upload.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from filejobs.api import parsing
from filejobs.domain import webhooks
from tests.loopback import QuietHandler, serving
from tests.scripts import load_script
from tests.sigv4 import signature_holds, signed_by

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = ROOT / "docs" / "snippets"
NODE = shutil.which("node")
KEY_ID, SECRET, SESSION = "AKIDINTEGRATION", "integration-secret", "integration-session"
REGION = "eu-west-1"
SIGNED = {"method": "POST", "url": "https://bucket", "fields": {"key": "uploads/acme/k"}}
backend = load_script(SNIPPETS / "upload_backend.py", "upload_backend_snippet_api")

needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


class Gateway(QuietHandler):
    """POST /v1/uploads as API Gateway's IAM auth takes it: refused (403) unless signed by the
    known key; what it received is kept."""

    received: list[dict[str, Any]] = []  # noqa: RUF012 (one server per test)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = dict(self.headers.items())
        # self.headers reads names in any case (Node sends them in lower case)
        signed = signed_by(self.headers.get("Authorization", ""))
        holds = (
            signed is not None
            and signed.key == KEY_ID
            and signed.region == REGION
            and signed.service == "execute-api"
            and signature_holds(
                signed,
                method="POST",
                url=f"http://{self.headers['Host']}{self.path}",
                headers=headers,
                body=body,
                secret=SECRET,
                token=SESSION,
            )
        )
        Gateway.received.append({"path": self.path, "body": body, "signed": holds})
        if holds:
            self.answer_json(200, SIGNED)
        else:
            self.answer_json(403, {"message": "The request signature we calculated does not match"})


@pytest.fixture
def gateway() -> Iterator[str]:
    Gateway.received = []
    with serving(Gateway) as url:
        yield f"{url}/v1"


def node(script: str) -> Any:
    assert NODE is not None
    module = (SNIPPETS / "upload_backend.mjs").as_uri()
    program = f"import * as backend from {json.dumps(module)};\n{script}"
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def parsed(body: bytes) -> tuple[str | None, Any]:
    return parsing.upload_request(body.decode())


@needs_node
def test_the_node_backend_mints_an_upload_signed_as_api_gateway_checks_it(gateway: str) -> None:
    credentials = {"accessKeyId": KEY_ID, "secretAccessKey": SECRET, "sessionToken": SESSION}
    answer = node(
        f"const call = backend.filejobsApi({{apiUrl: {json.dumps(gateway)}, region: "
        f"{json.dumps(REGION)}, credentials: {json.dumps(credentials)}}});\n"
        "const signed = await backend.mintUpload(call, 'Harbour at dusk.jpg', 'image/jpeg');\n"
        "console.log(JSON.stringify(signed));"
    )
    assert answer == SIGNED
    (received,) = Gateway.received
    assert received["signed"] and received["path"] == "/v1/uploads"
    tenant, asked = parsed(received["body"])
    assert tenant is None and asked.filename == "Harbour at dusk.jpg"
    assert asked.content_type == "image/jpeg"


@needs_node
def test_a_node_signature_with_another_secret_is_refused(gateway: str) -> None:
    credentials = {"accessKeyId": KEY_ID, "secretAccessKey": "wrong", "sessionToken": SESSION}
    answer = node(
        f"const call = backend.filejobsApi({{apiUrl: {json.dumps(gateway)}, region: "
        f"{json.dumps(REGION)}, credentials: {json.dumps(credentials)}}});\n"
        "try { await backend.mintUpload(call, 'a.jpg'); console.log('null'); }\n"
        "catch (error) { console.log(JSON.stringify(error.message)); }"
    )
    assert answer.startswith("POST /uploads: 403")


def test_the_python_backend_mints_an_upload_signed_as_api_gateway_checks_it(
    gateway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    api = backend.FilejobsApi(gateway, region=REGION)
    assert backend.mint_upload(api, "a b.png", "image/png") == SIGNED
    (received,) = Gateway.received
    assert received["signed"]
    _, asked = parsed(received["body"])
    assert asked.filename == "a b.png" and asked.content_type == "image/png"


def delivery(secret: str, *, age: int = 0) -> tuple[str, str]:
    body = json.dumps({"id": "e-1", "type": "File Processed", "data": {"id": "f"}})
    return webhooks.signature_header([secret], int(time.time()) - age, body), body


@needs_node
def test_both_backends_accept_the_service_s_webhook_signature_and_nothing_else() -> None:
    header, body = delivery("whsec_one")
    _, stale_body = stale = delivery("whsec_one", age=600)
    cases = [
        (header, body, "whsec_one", True),
        (header, body + " ", "whsec_one", False),  # the body changed
        (header, body, "whsec_two", False),  # another endpoint's secret
        (stale[0], stale_body, "whsec_one", False),  # replayed after 10 minutes
    ]
    checks = json.dumps([[h, b, s] for h, b, s, _ in cases])
    from_node = node(
        f"const cases = {checks};\n"
        "console.log(JSON.stringify(cases.map(([h, b, s]) => "
        "backend.verifyFilejobsSignature(h, Buffer.from(b), s))));"
    )
    from_python = [backend.verify_filejobs_signature(h, b.encode(), s) for h, b, s, _ in cases]
    expected = [ok for *_, ok in cases]
    assert from_node == expected
    assert from_python == expected
