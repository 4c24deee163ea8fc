"""The local stack's S3 holds a browser's form upload to its signed policy and answers it with the
bucket's CORS headers (dev/filejobs_dev/local/s3_forms.py), as S3 does: the forms are the API's
own (adapters/s3.py S3UploadSigner), posted to moto server behind the local stack's front."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import requests

from filejobs_cli.local_stack_file import LOCAL_CREDENTIALS
from filejobs_dev.local.stack import free_port
from tests.fresh_process import in_fresh_process

ORIGIN = "http://127.0.0.1:8123"
BUCKET = "forms-uploads"


def forms_posted(*, fixed: bool = True) -> dict[str, Any]:
    """Forms of one grant (a 10-byte bound, preset metadata) posted as a browser on ORIGIN
    would: S3's status and CORS origin for each, and the keys stored."""
    from filejobs.adapters.s3 import S3UploadSigner  # noqa: PLC0415
    from filejobs.domain.uploads import UploadRequest, grant  # noqa: PLC0415
    from filejobs_dev.local import moto_fixes  # noqa: PLC0415
    from filejobs_dev.local.front import moto_front  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    front = moto_front("127.0.0.1", free_port())
    try:
        s3 = boto3.Session(
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        ).client("s3", endpoint_url=f"http://127.0.0.1:{front.server_address[1]}")
        s3.create_bucket(Bucket=BUCKET)
        rule: Any = {
            "AllowedMethods": ["POST"],
            "AllowedOrigins": [ORIGIN],
            "AllowedHeaders": ["*"],
        }
        s3.put_bucket_cors(Bucket=BUCKET, CORSConfiguration={"CORSRules": [rule]})
        asked = UploadRequest(filename="a.txt", preset="avatars")
        made = grant("acme", asked, max_file_bytes=10, now=datetime.now(UTC))
        form = S3UploadSigner(lambda: s3, BUCKET).sign(made)
        tag = "<Tag><Key>scan-status</Key><Value>clean</Value></Tag>"
        tagging = f"<Tagging><TagSet>{tag}</TagSet></Tagging>"

        def post(fields: dict[str, str], data: bytes) -> dict[str, Any]:
            answer = requests.post(
                form.url,
                data=fields,
                files={"file": ("a.txt", data)},
                headers={"Origin": ORIGIN},
                timeout=10,
            )
            return {
                "status": answer.status_code,
                "origin": answer.headers.get("Access-Control-Allow-Origin"),
            }

        posted = {
            "fits": post(form.fields, b"hello"),
            "too_large": post(form.fields, b"hello world"),
            "other_key": post({**form.fields, "key": "uploads/other/a.txt"}, b"hello"),
            "tagged": post({**form.fields, "tagging": tagging}, b"hello"),
            "other_preset": post({**form.fields, "x-amz-meta-filejobs-preset": "x"}, b"hello"),
            "no_policy": post({"key": made.key}, b"hello"),
        }
        stored = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
        head: dict[str, Any] = (
            dict(s3.head_object(Bucket=BUCKET, Key=made.key)) if made.key in stored else {}
        )
        return {
            "posted": posted,
            "stored": stored,
            "key": made.key,
            "metadata": head.get("Metadata", {}),
        }
    finally:
        front.stop()


def test_a_form_upload_is_held_to_its_policy_and_answered_with_cors() -> None:
    result = in_fresh_process(forms_posted)
    posted = result["posted"]
    # the form as signed stores the file, and the page may read the answer
    assert posted["fits"] == {"status": 204, "origin": ORIGIN}
    # what the policy does not allow is refused, each answer readable by the page
    assert posted["too_large"] == {"status": 400, "origin": ORIGIN}
    for refused in ("other_key", "tagged", "other_preset", "no_policy"):
        assert posted[refused] == {"status": 403, "origin": ORIGIN}, refused
    # and exactly the granted key was written, with the preset the grant named
    assert result["stored"] == [result["key"]]
    assert result["metadata"] == {"filejobs-preset": "avatars"}


def test_moto_as_released_stores_any_form_and_hides_its_answer() -> None:
    # the gap the fix closes (this fails once moto holds forms to their policy: drop the fix)
    result = in_fresh_process(forms_posted, fixed=False)
    posted = result["posted"]
    assert posted["fits"] == {"status": 204, "origin": None}
    assert posted["too_large"]["status"] == 204
    assert posted["tagged"]["status"] == 204
    assert "uploads/other/a.txt" in result["stored"]


def test_an_expired_form_is_refused() -> None:
    from filejobs_dev.local.s3_forms import refusal_of  # noqa: PLC0415

    policy = {
        "expiration": (datetime.now(UTC) - timedelta(seconds=1)).isoformat(),
        "conditions": [],
    }
    encoded = base64.b64encode(json.dumps(policy).encode()).decode()
    refusal = refusal_of({"policy": encoded}, BUCKET, 1, datetime.now(UTC))
    assert refusal is not None and refusal.status == 403 and "expired" in refusal.message
