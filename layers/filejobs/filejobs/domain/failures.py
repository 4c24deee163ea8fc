"""Failure groups: failed jobs that failed the same way, whatever file or attempt they were.

A group is a job type plus the fingerprint of the error message: the message with what differs
from one job to the next (quoted names, paths, URLs, ids, hashes, numbers) replaced by
placeholders, so "cannot identify image file '/tmp/a/1.png'" and "cannot identify image file
'/tmp/b/77.png'" are one group. A group's id is short, stable and safe in a URL.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from filejobs.domain.job import JobType

# A fingerprint is computed from at most this much of a message (messages are capped anyway).
_MESSAGE_CHARS = 2000
# And is at most this long (it is stored and shown).
FINGERPRINT_CHARS = 300
_NO_MESSAGE = "<no message>"

# In order: each pattern's matches are replaced before the next pattern runs.
_VARIABLE_PARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE), "<url>"),
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`"), "<quoted>"),
    (
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
        "<id>",
    ),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\\/:'\"]+){2,}[\\/]?"), "<path>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE), "<hex>"),
    (re.compile(r"\b[0-9a-f]{16,}\b", re.IGNORECASE), "<hash>"),
    (re.compile(r"\b\d+x\d+\b"), "<n>x<n>"),
    # A number with its unit ("30.5s", "512MB"), never digits inside a word: "S3", "sha256" and
    # "x264" name things, they do not vary.
    (re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?:[A-Za-z]{1,3})?\b"), "<n>"),
    (re.compile(r"\s+"), " "),
)


@dataclass(frozen=True)
class FailureGroup:
    job_type: JobType
    fingerprint: str

    @property
    def id(self) -> str:
        digest = hashlib.sha256(self.fingerprint.encode()).hexdigest()[:16]
        return f"{self.job_type.value}.{digest}"


def fingerprint(message: str | None) -> str:
    """The error message with its variable parts replaced: the same for the same failure."""
    text = (message or "").strip()[:_MESSAGE_CHARS]
    for pattern, placeholder in _VARIABLE_PARTS:
        text = pattern.sub(placeholder, text)
    text = text.strip()
    return text[:FINGERPRINT_CHARS] if text else _NO_MESSAGE


def group_of(job_type: JobType, message: str | None) -> FailureGroup:
    return FailureGroup(job_type, fingerprint(message))


FAILURE_GROUP_PATTERN = "^(" + "|".join(t.value for t in JobType) + r")\.[0-9a-f]{16}$"
_GROUP_ID = re.compile(r"^(?P<type>[a-z_]+)\.(?P<digest>[0-9a-f]{16})$")


def parse_group_id(value: str) -> tuple[JobType, str] | None:
    """(job type, digest) of a well-formed group id; None otherwise."""
    match = _GROUP_ID.match(value)
    if match is None:
        return None
    try:
        return JobType(match["type"]), match["digest"]
    except ValueError:
        return None
