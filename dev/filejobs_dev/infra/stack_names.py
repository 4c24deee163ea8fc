"""Which stack names the template can be deployed under.

The uploads bucket is named after the stack (`{stack}-uploads-{account}-{region}`: template.yaml
names it explicitly, since its notification's queue policy must name the bucket before the
bucket exists), and S3 takes only lower-case letters, digits and hyphens, at most 63 characters
in all. CloudFormation accepts names S3 does not (capitals, 128 characters), and the deploy
would then fail minutes in, at the bucket, and roll back. `make deploy` asks here first; the
local stack does too, so a name that works locally works on AWS.
"""

from __future__ import annotations

import re

# "-uploads-" + a 12-digit account + "-" + the longest region name AWS has had (14 characters,
# ap-southeast-5), so a name that fits fits in every region of every account.
BUCKET_NAME_MAX = 63
LONGEST_REGION = 14
_BUCKET_SUFFIX = len("-uploads-") + 12 + 1 + LONGEST_REGION
MAX_STACK_NAME = BUCKET_NAME_MAX - _BUCKET_SUFFIX
_STACK_NAME = re.compile(r"[a-z][a-z0-9-]*")


def stack_name_problem(name: str) -> str | None:
    """Why `name` cannot be this template's stack name, in one sentence; None if it can."""
    if not name:
        return "the stack name is empty"
    if len(name) > MAX_STACK_NAME:
        return (
            f"stack name {name!r} is {len(name)} characters; at most {MAX_STACK_NAME} fit in the "
            "uploads bucket's name ({stack}-uploads-{account}-{region}, 63 at most)"
        )
    if not _STACK_NAME.fullmatch(name):
        return (
            f"stack name {name!r} must start with a lower-case letter and hold only lower-case "
            "letters, digits and '-': the uploads bucket is named after it, and S3 takes no other"
        )
    reserved = next((prefix for prefix in _RESERVED_PREFIXES if name.startswith(prefix)), None)
    if reserved is not None:
        return f"stack name {name!r} starts with {reserved!r}, which S3 reserves for its own names"
    return None


# Bucket names S3 refuses by their start (its naming rules); the stack name opens the bucket's.
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
