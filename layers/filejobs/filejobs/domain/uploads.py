"""Signed uploads from a browser, the pure part: which key an upload gets, how large it may be, for
how long the grant holds, and the metadata it carries (`POST /uploads`, services/uploads.py).

The server chooses the key, never the browser: `uploads/{tenant}/{folder}{yyyy}/{mm}/{uuid}/{name}`.

- `uploads/{tenant}/` is where the ingest finds the upload's tenant (domain/ingest.py), so a
  grant can only ever add to its own tenant's uploads;
- the random folder makes every grant's key new: two people uploading `photo.jpg` at once never
  overwrite each other, and a grant cannot be pointed at an existing object;
- the year and month keep a tenant's uploads listable by period (GET /files?prefix=) without a
  folder of millions of keys;
- the caller's optional `folder` comes first, so a preset bound to `uploads/{tenant}/avatars/`
  applies to uploads granted for folder `avatars/`;
- the browser's file name ends the key, made safe (`safe_name`: the same rules as the CLI's
  `filejobs upload`), so a listing and a download read as the person named the file.

The grant is bound to that exact key (not a prefix): one signed form writes one object.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from filejobs.domain.presets import METADATA_KEY as PRESET_METADATA_KEY
from filejobs.domain.presets import NAME_PATTERN as PRESET_NAME_PATTERN
from filejobs.domain.quotas import UNLIMITED
from filejobs.domain.tenant_prefixes import UPLOAD_PREFIX, FieldError

# How long a grant holds: long enough for a slow phone to send a large photo, short enough that
# a leaked form is soon useless. The upper bound stays within the API function's own temporary
# credentials, which sign the form and end the grant with them.
DEFAULT_EXPIRY = timedelta(minutes=15)
MIN_EXPIRY = timedelta(minutes=1)
MAX_EXPIRY = timedelta(hours=1)
# A tenant without a file-size limit (0) still gets a bound: S3's largest single POST, 5 GB.
MAX_POST_BYTES = 5 * 1000**3
# The caller's own metadata (x-amz-meta-*): S3 allows 2 KB of user metadata in all; the preset's
# name takes its share, the rest is the caller's. The entries' bounds keep any request within
# MAX_METADATA_BYTES on their own (10 x (40 + 112) = 1,520), so what the API's schema says a
# request may hold is exactly what is taken.
MAX_METADATA_ENTRIES = 10
MAX_METADATA_BYTES = 1536
MAX_METADATA_NAME_CHARS = 40
METADATA_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,39}$"
_METADATA_NAME = re.compile(METADATA_NAME_PATTERN)
MAX_METADATA_VALUE_CHARS = 112
# S3 sends metadata as HTTP headers: printable ASCII only.
METADATA_VALUE_PATTERN = r"^[ -~]*$"
# Metadata names the service reads itself (the preset's) are not the caller's to set directly.
RESERVED_METADATA_PREFIX = "filejobs-"
# A folder is 1 to 5 segments of letters, digits, '.', '_' and '-', each ending in '/'.
FOLDER_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9._-]{0,62}/){1,5}$"
_FOLDER = re.compile(FOLDER_PATTERN)
_PRESET_NAME = re.compile(PRESET_NAME_PATTERN)
MAX_CONTENT_TYPE_CHARS = 255
CONTENT_TYPE_PATTERN = r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$"
_CONTENT_TYPE = re.compile(CONTENT_TYPE_PATTERN)

# --- the file name, as the CLI makes it (cli/filejobs_cli/upload_keys.py `safe_name`) ----------
MAX_NAME_BYTES = 200
MAX_EXTENSION_CHARS = 16
FALLBACK_STEM = "file"
_KEPT_CATEGORIES = ("L", "M", "N")
_RUNS = re.compile(r"[-_]{2,}")
_DOTS = re.compile(r"\.{2,}")
_EXTENSION = re.compile(rf"\.[A-Za-z0-9]{{1,{MAX_EXTENSION_CHARS}}}$")


class UploadRequestError(FieldError):
    """A grant that cannot be made as asked: `field` names what is wrong, the message why."""


@dataclass(frozen=True)
class UploadRequest:
    """What the caller asks a grant for; every field optional."""

    filename: str | None = None
    folder: str | None = None
    content_type: str | None = None
    preset: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    expires_in: timedelta = DEFAULT_EXPIRY


@dataclass(frozen=True)
class UploadGrant:
    """What a signed upload allows: one object at `key`, at most `max_bytes`, until
    `expires_at`, with exactly this content type (None: the browser's choice) and metadata."""

    tenant: str
    key: str
    max_bytes: int
    expires_at: datetime
    content_type: str | None
    metadata: dict[str, str]
    preset: str | None


def checked(request: UploadRequest) -> UploadRequest:
    """The request, or UploadRequestError naming the first field that cannot be granted."""
    if request.folder is not None and not _FOLDER.fullmatch(request.folder):
        raise UploadRequestError(
            "folder", "1 to 5 names of letters, digits, '.', '_' or '-', each ending in '/'"
        )
    if request.folder is not None and any(p in {".", ".."} for p in request.folder.split("/")):
        raise UploadRequestError("folder", "no '.' or '..' segment")
    if request.preset is not None and not _PRESET_NAME.fullmatch(request.preset):
        raise UploadRequestError("preset", "a preset's name (lower-case letters, digits, - and _)")
    if request.content_type is not None and not _CONTENT_TYPE.fullmatch(request.content_type):
        raise UploadRequestError("content_type", "a media type such as image/jpeg")
    if not MIN_EXPIRY <= request.expires_in <= MAX_EXPIRY:
        low, high = int(MIN_EXPIRY.total_seconds()), int(MAX_EXPIRY.total_seconds())
        raise UploadRequestError("expires_in", f"seconds from {low} to {high}")
    _check_metadata(request.metadata)
    return request


def _check_metadata(metadata: dict[str, str]) -> None:
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise UploadRequestError("metadata", f"at most {MAX_METADATA_ENTRIES} entries")
    for name, value in metadata.items():
        where = f"metadata.{name[:40]}"
        if not _METADATA_NAME.fullmatch(name):
            raise UploadRequestError(where, "names are lower-case letters, digits and '-'")
        if name.startswith(RESERVED_METADATA_PREFIX):
            raise UploadRequestError(where, f"'{RESERVED_METADATA_PREFIX}' names are the service's")
        if len(value) > MAX_METADATA_VALUE_CHARS or not (value.isascii() and value.isprintable()):
            raise UploadRequestError(
                where, f"printable ASCII of at most {MAX_METADATA_VALUE_CHARS} characters"
            )


def grant(
    tenant: str,
    request: UploadRequest,
    *,
    max_file_bytes: int,
    now: datetime,
    unique: uuid.UUID | None = None,
) -> UploadGrant:
    """The grant for a checked request: its key, its size bound (the tenant's file-size limit,
    else MAX_POST_BYTES) and its expiry."""
    limit = MAX_POST_BYTES if max_file_bytes == UNLIMITED else min(max_file_bytes, MAX_POST_BYTES)
    metadata = dict(request.metadata)
    if request.preset is not None:
        metadata[PRESET_METADATA_KEY] = request.preset
    return UploadGrant(
        tenant=tenant,
        key=upload_key(tenant, request.folder or "", request.filename, now, unique or uuid.uuid4()),
        max_bytes=limit,
        expires_at=now + request.expires_in,
        content_type=request.content_type,
        metadata=metadata,
        preset=request.preset,
    )


def upload_key(
    tenant: str, folder: str, filename: str | None, now: datetime, unique: uuid.UUID
) -> str:
    name = safe_name(filename or "")
    return f"{UPLOAD_PREFIX}{tenant}/{folder}{now:%Y}/{now:%m}/{unique}/{name}"


def safe_name(name: str) -> str:
    """A file name as a key's last segment: Unicode letters, marks and digits kept (NFC), with
    '.', '_' and '-'; white space becomes '-', anything else '_', runs of them one; no '..', no
    leading '.', '-' or '_'; at most MAX_NAME_BYTES of UTF-8 with the extension kept; "file"
    when nothing is left."""
    text = unicodedata.normalize("NFC", name)
    cleaned = "".join(_character(c) for c in text)
    stem, extension = _split(_DOTS.sub(".", _RUNS.sub(_collapse, cleaned)))
    return _bounded(stem.strip(".-_") or FALLBACK_STEM, extension)


def _character(c: str) -> str:
    if c in "._-":
        return c
    if c.isspace():
        return "-"
    if unicodedata.category(c)[0] in _KEPT_CATEGORIES:
        return c
    return "_"


def _collapse(run: re.Match[str]) -> str:
    return "-" if "-" in run.group() else "_"


def _split(name: str) -> tuple[str, str]:
    found = _EXTENSION.search(name)
    if found is None or found.start() == 0:
        return name, ""
    return name[: found.start()], found.group()


def _bounded(stem: str, extension: str) -> str:
    room = MAX_NAME_BYTES - len(extension.encode())
    encoded = stem.encode()
    if len(encoded) > room:
        stem = encoded[:room].decode(errors="ignore").rstrip(".-_") or FALLBACK_STEM
    return stem + extension
