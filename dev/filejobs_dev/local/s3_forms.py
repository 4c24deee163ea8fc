"""Browser uploads to the local stack's buckets as S3 takes them (moto_fixes.py applies this).

`POST /uploads` hands a browser a presigned POST (a form with a signed policy); the page posts
the file straight to the uploads bucket, from another origin. moto server, as released:

- answers the form's POST without any CORS header, so the browser hides S3's answer from the
  page (a `fetch` fails) however the bucket's CORS rules read;
- ignores the policy: any key, any size, any extra field (a `tagging` of scan-status, another
  tenant's key) is stored, so nothing the API binds into the form would be held locally.

Now a form POST is held to its policy as S3 holds it: the policy must be there and unexpired,
each condition (`eq`, `starts-with`, `{"field": value}`, `content-length-range`) must hold for
the form's fields and the file's length, and every field but the exempt ones (`policy`, the
signature, `file`, `x-ignore-*`) must be named by a condition. A refusal is S3's 403
AccessDenied ("Invalid according to Policy") or 400 EntityTooLarge/EntityTooSmall. Its answer,
accepted or refused, carries the bucket's CORS headers for a matching origin, as S3's does.

Not emulated: the policy's signature (moto checks no signature anywhere), `success_action_*`
beyond moto's own, and the policy's `bucket` condition against anything but the bucket posted to.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

# The fields S3 does not require a policy condition for.
_EXEMPT = frozenset({"policy", "x-amz-signature", "signature", "awsaccesskeyid", "file"})
_IGNORED_PREFIX = "x-ignore-"


class FormRefusedError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def refusal_of(
    fields: Mapping[str, str], bucket: str, length: int, now: datetime
) -> FormRefusedError | None:
    """Why S3 would refuse this form (its fields, the file's length), or None."""
    encoded = next((v for k, v in fields.items() if k.lower() == "policy"), None)
    if encoded is None:
        return FormRefusedError(
            403, "AccessDenied", "Bucket POST must contain a field named 'policy'"
        )
    try:
        policy = json.loads(base64.b64decode(encoded))
        expiration = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
        conditions = list(policy.get("conditions", []))
    except (ValueError, KeyError, TypeError):
        return FormRefusedError(400, "InvalidPolicyDocument", "Invalid Policy: Invalid JSON.")
    if expiration <= now:
        return FormRefusedError(403, "AccessDenied", "Invalid according to Policy: Policy expired.")
    values = {name.lower(): value for name, value in fields.items()}
    values["bucket"] = bucket
    named: set[str] = set()
    for condition in conditions:
        problem = _failed(condition, values, length, named)
        if problem is not None:
            return problem
    for name in values:
        if name in _EXEMPT or name.startswith(_IGNORED_PREFIX) or name == "bucket":
            continue
        if name not in named:
            return _invalid(f"Extra input fields: {name}")
    return None


def _failed(
    condition: Any, values: Mapping[str, str], length: int, named: set[str]
) -> FormRefusedError | None:
    if isinstance(condition, dict):
        ((name, expected),) = condition.items()
        return _compare("eq", f"${name}", str(expected), values, named)
    operator, *rest = condition
    if operator == "content-length-range":
        low, high = int(rest[0]), int(rest[1])
        if length > high:
            return FormRefusedError(
                400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size"
            )
        if length < low:
            return FormRefusedError(
                400,
                "EntityTooSmall",
                "Your proposed upload is smaller than the minimum allowed size",
            )
        return None
    return _compare(str(operator), str(rest[0]), str(rest[1]), values, named)


def _compare(
    operator: str, field: str, expected: str, values: Mapping[str, str], named: set[str]
) -> FormRefusedError | None:
    name = field.removeprefix("$").lower()
    named.add(name)
    actual = values.get(name, "")
    holds = actual == expected if operator == "eq" else actual.startswith(expected)
    if holds:
        return None
    return _invalid(f'Policy Condition failed: ["{operator}", "${name}", "{expected}"]')


def _invalid(detail: str) -> FormRefusedError:
    return FormRefusedError(403, "AccessDenied", f"Invalid according to Policy: {detail}")


def _error_body(refusal: FormRefusedError) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{refusal.code}</Code><Message>{refusal.message}</Message></Error>"
    )


def _held_to_policy(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def post(self: Any, request: Any, bucket_name: str) -> Any:
        form = getattr(self, "form_data", None) or {}
        if "key" not in form:  # not a browser form (DeleteObjects, ...): moto's own
            return original(self, request, bucket_name)
        cors = self._get_cors_headers_other()
        body = self.raw_body if isinstance(self.raw_body, bytes) else str(self.body).encode()
        refusal = refusal_of(dict(form.items()), bucket_name, len(body), datetime.now(UTC))
        if refusal is not None:
            return refusal.status, {**cors, "Content-Type": "application/xml"}, _error_body(refusal)
        status, headers, answer = original(self, request, bucket_name)
        return status, {**cors, **headers}, answer

    post._filejobs_fixed = True  # type: ignore[attr-defined]
    return post


def apply() -> None:
    from moto.s3.responses import S3Response  # noqa: PLC0415 (the local stack's alone)

    if getattr(S3Response._bucket_response_post, "_filejobs_fixed", False):
        return
    S3Response._bucket_response_post = _held_to_policy(S3Response._bucket_response_post)  # type: ignore[method-assign]
