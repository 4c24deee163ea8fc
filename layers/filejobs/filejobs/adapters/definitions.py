"""The virus scan's definitions in S3: immutable sets, one manifest saying which is current.

Layout under `s3://{bucket}/{prefix}` (prefix `signatures/`), a contract between the updater
(services/definitions.py) and the scan workers:

    sets/{set_id}/clamav/{file}    ClamAV databases of one publication, never changed after
    sets/{set_id}/yara/{file}      YARA rules of that publication (kept out of ClamAV's folder)
    sets/{set_id}/manifest.json    the set's manifest as published (what a rollback restores)
    custom/clamav/*, custom/yara/* databases and rules curated by operators: copied into every
                                   new set and verified with it
    manifest.json                  the current set; written last, by one PUT: that PUT is the
                                   publication, and workers read only files a manifest names
    state/freshclam.dat            freshclam's own state (its UUID, its cool-down)
    state/backoff.json             the updater's backoff from a refusing mirror

A worker polls `current(if_none_match=etag)` (a GET answered 304 while nothing changed), then
`fetch(manifest, cache_root)` gives it local directories of exactly that set, every byte checked
against the manifest's digests.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import time
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from filejobs.domain.definitions import (
    DatabaseFile,
    DefinitionsManifest,
    Engine,
    engine_of,
    is_set_id,
)
from filejobs.domain.retry import TransientError
from filejobs.ports import (
    CuratedFile,
    LocalDefinitions,
    ManifestRead,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MANIFEST = "manifest.json"
CHUNK = 1024 * 1024
# A staging folder of another fetch untouched this long is a crashed one's: removed.
STALE_STAGING_SECONDS = 3600.0
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class RollbackError(RuntimeError):
    """There is no set to roll back to (or it is not whole any more)."""


class DefinitionsStore:
    def __init__(self, s3: S3Client, bucket: str, prefix: str = "signatures/") -> None:
        self._s3 = s3
        self.bucket = bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else f"{prefix}/"

    # --- what workers read -------------------------------------------------------------------

    def current(self, if_none_match: str | None = None) -> ManifestRead:
        """The current manifest. With `if_none_match` (the ETag of the manifest in hand), an
        unchanged manifest is not downloaded again (`unchanged`). Raises ManifestError for a
        manifest that does not parse: scanning with it would be a guess."""
        request = {"Bucket": self.bucket, "Key": self._key(MANIFEST)}
        if if_none_match:
            request["IfNoneMatch"] = if_none_match
        try:
            response = self._s3.get_object(**request)  # type: ignore[arg-type]
        except ClientError as error:
            code = _code(error)
            if code in ("304", "NotModified"):
                return ManifestRead(None, if_none_match, unchanged=True)
            if code in _MISSING:
                return ManifestRead(None, None)
            raise
        body = response["Body"].read()
        return ManifestRead(DefinitionsManifest.from_json(body), response.get("ETag"))

    def fetch(self, manifest: DefinitionsManifest, cache_root: Path) -> LocalDefinitions:
        """The set `manifest` names, under `cache_root/{set_id}/{clamav,yara}/`.

        A local copy that is exactly the set (its files' SHA-256 checked, nothing more in its
        folders) is reused. Otherwise each file is streamed into a staging folder,
        its SHA-256 and size checked as it arrives (a mismatch raises TransientError: the file
        changed or broke on the way, and is never used), and the whole folder renamed into place,
        so a set folder is always complete. Then the folders of other sets are removed, except
        the one used just before (a scan still running may hold it).

        `cache_root` belongs to one process at a time: on Lambda, /tmp of one execution
        environment; on one machine shared by several, give each its own.
        """
        cache_root.mkdir(parents=True, exist_ok=True)
        final = cache_root / manifest.set_id
        if not _is_copy_of(final, manifest):
            self._download_set(manifest, cache_root, final)
        os.utime(final)  # last used: the copy "just before" is told by this
        _remove_other_sets(cache_root, keep=final)
        return LocalDefinitions(manifest, final / Engine.CLAMAV.value, final / Engine.YARA.value)

    def _download_set(self, manifest: DefinitionsManifest, cache_root: Path, final: Path) -> None:
        staging = cache_root / f".staging-{manifest.set_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            for engine in Engine:
                (staging / engine.value).mkdir(parents=True)
            for entry in manifest.files:
                self._download_file(manifest.set_id, entry, staging / entry.path)
            (staging / MANIFEST).write_text(manifest.to_json())
            if final.exists():
                if _is_copy_of(final, manifest):
                    return  # another fetch finished it first
                shutil.rmtree(final)
            staging.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _download_file(self, set_id: str, entry: DatabaseFile, target: Path) -> None:
        key = self._key(f"sets/{set_id}/{entry.path}")
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        except ClientError as error:
            if _code(error) in _MISSING:
                raise TransientError(f"definitions set {set_id} lacks {entry.path}") from error
            raise
        digest, size = hashlib.sha256(), 0
        partial = target.with_name(f".{target.name}.partial")
        try:
            with partial.open("wb") as out:
                for piece in iter(lambda: body.read(CHUNK), b""):
                    digest.update(piece)
                    size += len(piece)
                    if size > entry.size:
                        break  # longer than the manifest says: no need to read the rest
                    out.write(piece)
        finally:
            body.close()
        if size != entry.size or digest.hexdigest() != entry.sha256:
            partial.unlink(missing_ok=True)
            raise TransientError(
                f"definitions file {set_id}/{entry.path} does not match its manifest "
                f"(sha256 or size differs): refused"
            )
        partial.rename(target)

    # --- what the updater writes -------------------------------------------------------------

    def set_manifest(self, set_id: str) -> DefinitionsManifest | None:
        """The manifest a set was published with (None if that set is gone)."""
        body = self._read(f"sets/{set_id}/{MANIFEST}")
        return None if body is None else DefinitionsManifest.from_json(body)

    def publish(self, manifest: DefinitionsManifest, clamav_dir: Path, yara_dir: Path) -> None:
        """Uploads the set's files (each with its SHA-256, which S3 checks against the bytes it
        receives), the set's own copy of its manifest, and last the current manifest: until that
        PUT, no worker knows the set exists."""
        for entry in manifest.files:
            local = (clamav_dir if entry.engine is Engine.CLAMAV else yara_dir) / entry.name
            with local.open("rb") as data:
                self._s3.put_object(
                    Bucket=self.bucket,
                    Key=self._key(f"sets/{manifest.set_id}/{entry.path}"),
                    Body=data,
                    ChecksumSHA256=base64.b64encode(bytes.fromhex(entry.sha256)).decode(),
                )
        self._put_manifest(f"sets/{manifest.set_id}/{MANIFEST}", manifest)
        self._put_manifest(MANIFEST, manifest)

    def touch(self, manifest: DefinitionsManifest, checked_at: datetime) -> DefinitionsManifest:
        """The current set, confirmed by the mirror at `checked_at` (nothing else changes)."""
        touched = replace(manifest, checked_at=checked_at)
        self._put_manifest(MANIFEST, touched)
        return touched

    def sets(self) -> list[str]:
        """The ids of the sets in the bucket, oldest first."""
        found: set[str] = set()
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._key("sets/"), Delimiter="/"
        )
        for page in pages:
            for common in page.get("CommonPrefixes", []):
                name = common["Prefix"][len(self._key("sets/")) :].rstrip("/")
                if is_set_id(name):
                    found.add(name)
        return sorted(found)

    def prune(self, keep: int) -> list[str]:
        """Deletes the sets beyond the current one and its `keep - 1` newest previous ones
        (and the one a rollback left, while the current manifest names it). Nothing is deleted
        without a readable current manifest. Returns the deleted set ids."""
        if keep < 1:
            raise ValueError("keep at least the current set")
        manifest = self.current().manifest
        if manifest is None:
            return []
        kept = {manifest.set_id, *manifest.previous[: keep - 1]}
        if manifest.rolled_back_from:
            kept.add(manifest.rolled_back_from)
        deleted = [set_id for set_id in self.sets() if set_id not in kept]
        for set_id in deleted:
            self._delete_under(f"sets/{set_id}/")
        return deleted

    def rollback(self) -> DefinitionsManifest:
        """Makes the newest previous set current again, noting which set it replaced; refuses
        (RollbackError) when there is none, or when that set is not whole in the bucket."""
        current = self.current().manifest
        if current is None:
            raise RollbackError("no definitions are published: nothing to roll back")
        if not current.previous:
            raise RollbackError(f"set {current.set_id} has no previous set to roll back to")
        target_id = current.previous[0]
        target = self.set_manifest(target_id)
        if target is None:
            raise RollbackError(f"the previous set {target_id} is gone from the bucket")
        missing = [f.path for f in target.files if not self._exists(f"sets/{target_id}/{f.path}")]
        if missing:
            raise RollbackError(f"the previous set {target_id} lacks {', '.join(missing)}")
        restored = replace(target, previous=current.previous[1:], rolled_back_from=current.set_id)
        self._put_manifest(MANIFEST, restored)
        return restored

    # --- the updater's state, operators' files -----------------------------------------------

    def read_state(self, name: str) -> bytes | None:
        return self._read(f"state/{name}")

    def write_state(self, name: str, data: bytes) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=self._key(f"state/{name}"), Body=data)

    def curated(self) -> list[CuratedFile]:
        """The files under custom/clamav/ and custom/yara/ that their engine loads, by name."""
        files: list[CuratedFile] = []
        for engine in Engine:
            folder = self._key(f"custom/{engine.value}/")
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=folder
            )
            for page in pages:
                for item in page.get("Contents", []):
                    name = item["Key"][len(folder) :]
                    if "/" not in name and engine_of(name) is engine:
                        files.append(CuratedFile(item["Key"], name, engine, int(item["Size"])))
        return sorted(files, key=lambda f: (f.engine.value, f.name))

    def download(self, curated: CuratedFile, directory: Path) -> Path:
        target = directory / curated.name
        body = self._s3.get_object(Bucket=self.bucket, Key=curated.key)["Body"]
        try:
            with target.open("wb") as out:
                for piece in iter(lambda: body.read(CHUNK), b""):
                    out.write(piece)
        finally:
            body.close()
        return target

    # --- plumbing ----------------------------------------------------------------------------

    def _key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _put_manifest(self, name: str, manifest: DefinitionsManifest) -> None:
        self._s3.put_object(
            Bucket=self.bucket,
            Key=self._key(name),
            Body=manifest.to_json().encode(),
            ContentType="application/json",
            # Whoever reads it through a cache must ask again: it is the switch.
            CacheControl="no-cache",
        )

    def _read(self, name: str) -> bytes | None:
        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=self._key(name))
        except ClientError as error:
            if _code(error) in _MISSING:
                return None
            raise
        data: bytes = response["Body"].read()
        return data

    def _exists(self, name: str) -> bool:
        try:
            self._s3.head_object(Bucket=self.bucket, Key=self._key(name))
        except ClientError as error:
            if _code(error) in _MISSING:
                return False
            raise
        return True

    def _delete_under(self, folder: str) -> None:
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._key(folder)
        )
        for page in pages:
            for item in page.get("Contents", []):
                self._s3.delete_object(Bucket=self.bucket, Key=item["Key"])


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _is_copy_of(folder: Path, manifest: DefinitionsManifest) -> bool:
    """Whether `folder` is exactly a local copy of the set: its engines' folders hold the
    manifest's files, each with its SHA-256, and nothing else (clamd loads every database file
    in its folder: one dropped there, an `.ign2` say, would be loaded with the set)."""
    try:
        local = DefinitionsManifest.from_json((folder / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return False
    if local.set_id != manifest.set_id or not local.same_files(manifest.files):
        return False
    for engine in Engine:
        expected = {f.name: f for f in manifest.files if f.engine is engine}
        try:
            names = {entry.name for entry in os.scandir(folder / engine.value)}
        except OSError:
            return False
        if names != set(expected):
            return False
        if not all(_holds(folder / f.path, f) for f in expected.values()):
            return False
    return True


def _holds(path: Path, entry: DatabaseFile) -> bool:
    """Whether `path` is a plain file with exactly the bytes the manifest lists."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size != entry.size:
            return False
        with path.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest() == entry.sha256
    except OSError:
        return False


def _remove_other_sets(cache_root: Path, keep: Path) -> None:
    """Every other set's folder but the one used last before `keep`; crashed fetches' staging
    folders. Anything else in `cache_root` is not ours and stays."""
    others = sorted(
        (p for p in cache_root.iterdir() if p != keep and p.is_dir() and is_set_id(p.name)),
        key=_modified,
    )
    for folder in others[:-1]:
        shutil.rmtree(folder, ignore_errors=True)
    now = time.time()
    for staging in cache_root.glob(".staging-*"):
        if now - _modified(staging) > STALE_STAGING_SECONDS:
            shutil.rmtree(staging, ignore_errors=True)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # removed meanwhile (a fetch finishing): as good as new
        return time.time()
