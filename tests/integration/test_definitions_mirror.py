"""Specification: the local definitions mirror (local/mirror.py) serves a folder as freshclam
expects of a mirror (conditional and ranged GETs) and refuses on demand, as ClamAV's CDN does."""

from __future__ import annotations

import email.utils
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from filejobs_dev.local.mirror import (
    BODY_DATABASE,
    HASH_DATABASE,
    DefinitionsMirror,
    add_hash_signature,
    build_local_databases,
)

DAY = 86400


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[DefinitionsMirror]:
    directory = tmp_path / "mirror"
    build_local_databases(directory)
    (directory / "notes.txt").write_text("not a database")
    with DefinitionsMirror(directory) as running:
        yield running


def get(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers.items()), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers.items()), refused.read()


def test_it_serves_its_databases_with_their_modification_time(mirror: DefinitionsMirror) -> None:
    assert mirror.url.startswith("http://127.0.0.1:")
    assert mirror.database_urls() == [
        f"{mirror.url}/{HASH_DATABASE}",
        f"{mirror.url}/{BODY_DATABASE}",
    ]
    status, headers, body = get(f"{mirror.url}/{HASH_DATABASE}")
    assert (status, body) == (200, (mirror.directory / HASH_DATABASE).read_bytes())
    modified = int((mirror.directory / HASH_DATABASE).stat().st_mtime)
    assert headers["Last-Modified"] == email.utils.formatdate(modified, usegmt=True)
    # HEAD: the headers alone
    status, headers, body = get(f"{mirror.url}/{HASH_DATABASE}", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Length"] == str((mirror.directory / HASH_DATABASE).stat().st_size)


def test_a_conditional_get_of_an_unchanged_file_is_answered_304(mirror: DefinitionsMirror) -> None:
    path = mirror.directory / HASH_DATABASE
    os.utime(path, (path.stat().st_mtime - DAY, path.stat().st_mtime - DAY))
    since = email.utils.formatdate(path.stat().st_mtime + 1, usegmt=True)
    assert get(f"{mirror.url}/{HASH_DATABASE}", **{"If-Modified-Since": since})[0] == 304
    # until the file changes
    add_hash_signature(mirror.directory, b"new\n", "Local.New")
    status, _, body = get(f"{mirror.url}/{HASH_DATABASE}", **{"If-Modified-Since": since})
    assert status == 200 and b"Local.New" in body
    assert mirror.served[-1].if_modified_since == since


def test_a_range_is_served_as_asked(mirror: DefinitionsMirror) -> None:
    data = (mirror.directory / HASH_DATABASE).read_bytes()
    status, headers, body = get(f"{mirror.url}/{HASH_DATABASE}", Range="bytes=0-9")
    assert (status, body) == (206, data[:10])
    assert headers["Content-Range"] == f"bytes 0-9/{len(data)}"


def test_nothing_outside_its_folder_is_served(mirror: DefinitionsMirror, tmp_path: Path) -> None:
    (tmp_path / "secret.hdb").write_text("outside")
    for path in ("/../secret.hdb", "/%2e%2e/secret.hdb", "/.hidden", "/", "/missing.hdb"):
        assert get(f"{mirror.url}{path}")[0] == 404, path


def test_refusals_are_injected_for_a_number_of_requests_or_until_cleared(
    mirror: DefinitionsMirror,
) -> None:
    url = f"{mirror.url}/{HASH_DATABASE}"
    mirror.refuse(429, count=2, retry_after=3600)
    first, second, third = get(url), get(url), get(url)
    assert (first[0], first[1]["Retry-After"]) == (429, "3600")
    assert (second[0], third[0]) == (429, 200)
    mirror.refuse(403)
    assert [get(url)[0] for _ in range(3)] == [403, 403, 403]
    mirror.clear_refusals()
    assert get(url)[0] == 200
    assert [s.status for s in mirror.served] == [429, 429, 200, 403, 403, 403, 200]
    with pytest.raises(ValueError, match="429"):
        mirror.refuse(500)
