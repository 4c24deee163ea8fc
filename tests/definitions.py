"""Definitions sets for tests: published to S3 exactly as the definitions updater publishes them
(adapters/definitions.py), with ClamAV hash signatures the test chooses. No signature database
can be downloaded where the tests run; EICAR's signature is in every set, as it is in ClamAV's."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from filejobs.adapters.definitions import DefinitionsStore
from filejobs.domain.definitions import DatabaseFile, DefinitionsManifest, Engine, Source
from filejobs.domain.time import utcnow

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


def hash_signatures(signatures: dict[str, bytes]) -> bytes:
    """A ClamAV .hdb knowing each body by its MD5 (`md5:size:name` lines)."""
    lines = [
        f"{hashlib.md5(body, usedforsecurity=False).hexdigest()}:{len(body)}:{name}\n"
        for name, body in signatures.items()
    ]
    return "".join(lines).encode()


def publish_set(
    s3: Any,
    bucket: str,
    folder: Path,
    set_id: str,
    signatures: dict[str, bytes] | None = None,
    *,
    prefix: str = "signatures/",
) -> DefinitionsManifest:
    """A set with one .hdb of `signatures` (EICAR's always among them), made current."""
    database = hash_signatures({"Test.EICAR": EICAR, **(signatures or {})})
    clamav_dir, yara_dir = folder / set_id / "clamav", folder / set_id / "yara"
    clamav_dir.mkdir(parents=True)
    yara_dir.mkdir()
    (clamav_dir / "tests.hdb").write_bytes(database)
    entry = DatabaseFile(
        "tests.hdb",
        Engine.CLAMAV,
        hashlib.sha256(database).hexdigest(),
        len(database),
        Source.CUSTOM_URL,
    )
    now = utcnow()
    manifest = DefinitionsManifest(set_id, now, now, "ClamAV 1.4.6", (entry,))
    DefinitionsStore(s3, bucket, prefix).publish(manifest, clamav_dir, yara_dir)
    return manifest
