"""Object keys for uploads: any file name in, a key the ingest and the API take out.

The ingest takes any key `uploads/{tenant}/{name}` whose name is not empty and does not end in
'/' (filejobs/domain/ingest.py `tenant_of`); the API finds files by keys of at most 1,024
characters of UTF-8 text (api/parsing.py), S3 takes keys of at most 1,024 bytes, and a preset's
or a schedule's prefix must be printable text (domain/tenant_prefixes.py). A key made here is
all of that, and more, so that it reads well in a listing, a URL and a shell:

- Unicode letters, marks and digits are kept (NFC: a name typed on macOS, which writes file
  names decomposed, makes the same key as on Linux), with '.', '_' and '-';
- white space becomes '-', anything else (punctuation, symbols, '/', '\\', control
  characters) '_'; runs of them become one; '.' runs become one '.', so never '..';
- no leading '.', '-' or '_' (no hidden name, nothing a shell takes for an option);
- at most MAX_NAME_BYTES of UTF-8, cut inside the stem on a character boundary so the
  extension stays; a name with nothing left is "file" (with its extension).

`--key` names the object exactly instead: it is checked, not changed.
"""

from __future__ import annotations

import re
import unicodedata

from filejobs_cli.errors import UsageError

UPLOADS = "uploads/"
MAX_KEY_BYTES = 1024  # S3's longest key
# A name's share of the key: uploads/ + a 63-character tenant + / leaves room for folders.
MAX_NAME_BYTES = 200
MAX_EXTENSION_CHARS = 16
FALLBACK_STEM = "file"
_KEPT_CATEGORIES = ("L", "M", "N")
_RUNS = re.compile(r"[-_]{2,}")
_DOTS = re.compile(r"\.{2,}")
_EXTENSION = re.compile(rf"\.[A-Za-z0-9]{{1,{MAX_EXTENSION_CHARS}}}$")


def safe_name(name: str) -> str:
    """A file name as a key's last segment (see the module's rules)."""
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
    """A run of separators is one: '-' when it held a space (a word break), else '_'."""
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
        # Cut on a character boundary: a key is UTF-8.
        stem = encoded[:room].decode(errors="ignore").rstrip(".-_") or FALLBACK_STEM
    return stem + extension


def upload_key(tenant: str, folder: str, name: str) -> str:
    """uploads/{tenant}/{folder}{name}, refused when longer than S3 allows."""
    key = f"{UPLOADS}{tenant}/{folder}{name}"
    if len(key.encode()) > MAX_KEY_BYTES:
        raise UsageError(
            f"the key {key[:60]!r}... is longer than S3's {MAX_KEY_BYTES} bytes: "
            "a shorter --folder or --key"
        )
    return key


def chosen_name(value: str) -> str:
    """A --key: a name, or folders and a name, under the tenant's uploads, taken as written
    when the ingest and the API take it."""
    problem = _problem(value)
    if problem:
        raise UsageError(f"--key {value!r}: {problem}")
    return value


def _problem(value: str) -> str | None:  # noqa: PLR0911 (one answer per rule)
    if not value:
        return "empty"
    if not value.isprintable():
        return "it holds control or other non-printable characters"
    if value.startswith("/"):
        return "it starts with '/' (it is relative to the tenant's uploads)"
    if value.endswith("/"):
        return "it names a folder, not a file"
    if any(part in {"", ".", ".."} for part in value.split("/")):
        return "it holds an empty, '.' or '..' segment"
    if len(value.encode()) > MAX_KEY_BYTES - len(UPLOADS) - 64:
        return "it is too long for an S3 key under uploads/TENANT/"
    return None
