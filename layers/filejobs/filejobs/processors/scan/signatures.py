"""How scan definitions reach the engines: synced from an S3 prefix into a local cache.

Production definitions are delivered through S3, never fetched by the workers from the
internet. An updater (freshclam on a schedule, for instance a small container task or a Lambda
with the ClamAV tools, plus whoever curates YARA rules) writes the definition files under one
prefix of a definitions bucket: ClamAV databases (`main.cvd`, `daily.cld`, `bytecode.cvd`, and
unofficial `.hdb/.hsb/.ndb/.ldb` files) and extra YARA rules (`.yar`). Each virus-scan worker
syncs that prefix into a cache directory before scanning (on Lambda, under /tmp, which survives
between invocations of a warm instance).

The sync is by checksum: a manifest in the cache remembers each file's ETag and size, so an
unchanged file is never downloaded again, a changed one is replaced atomically (written beside it,
then renamed), and one deleted from the bucket is deleted from the cache. A single-part upload's
ETag is its MD5 and is verified after download; a multipart ETag is only compared.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from filejobs.domain.retry import TransientError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

SIGNATURE_SUFFIXES = frozenset({".hdb", ".hsb", ".ndb", ".ldb", ".cvd", ".cld", ".yar"})
MANIFEST = ".manifest.json"
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class SyncReport:
    downloaded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


class SignatureSync:
    """Keeps `cache_dir` equal to the signature files directly under s3://bucket/prefix."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str, cache_dir: Path) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._prefix = prefix if not prefix or prefix.endswith("/") else f"{prefix}/"
        self.cache_dir = cache_dir

    def sync(self) -> SyncReport:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        known = self._manifest()
        remote = self._listing()
        report = SyncReport()
        current: dict[str, dict[str, object]] = {}
        for name, (etag, size) in sorted(remote.items()):
            entry: dict[str, object] = {"etag": etag, "size": size}
            local = self.cache_dir / name
            if known.get(name) == entry and local.is_file() and local.stat().st_size == size:
                report.unchanged.append(name)
            else:
                self._download(name, etag, local)
                report.downloaded.append(name)
            current[name] = entry
        for name in sorted(set(known) - set(remote)):
            (self.cache_dir / name).unlink(missing_ok=True)
            report.removed.append(name)
        self._write_manifest(current)
        return report

    def _listing(self) -> dict[str, tuple[str, int]]:
        """name -> (ETag, size) of the signature files directly under the prefix."""
        found: dict[str, tuple[str, int]] = {}
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=self._prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                name = item["Key"][len(self._prefix) :]
                if "/" in name or Path(name).suffix.lower() not in SIGNATURE_SUFFIXES:
                    continue
                found[name] = (item["ETag"].strip('"'), int(item["Size"]))
        return found

    def _download(self, name: str, etag: str, local: Path) -> None:
        partial = local.with_name(f".{name}.partial")
        md5 = hashlib.md5(usedforsecurity=False)
        body = self._s3.get_object(Bucket=self._bucket, Key=f"{self._prefix}{name}")["Body"]
        try:
            with partial.open("wb") as out:
                for piece in iter(lambda: body.read(CHUNK), b""):
                    md5.update(piece)
                    out.write(piece)
        finally:
            body.close()
        if "-" not in etag and md5.hexdigest() != etag:
            partial.unlink(missing_ok=True)
            raise TransientError(f"signature file {name} changed or broke while downloading")
        os.replace(partial, local)

    def _manifest(self) -> dict[str, dict[str, object]]:
        try:
            loaded = json.loads((self.cache_dir / MANIFEST).read_text())
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: everything is downloaded again
        return loaded if isinstance(loaded, dict) else {}

    def _write_manifest(self, entries: dict[str, dict[str, object]]) -> None:
        partial = self.cache_dir / f"{MANIFEST}.partial"
        partial.write_text(json.dumps(entries, indent=1, sort_keys=True))
        os.replace(partial, self.cache_dir / MANIFEST)
