"""Specification: the definitions sets in S3 (adapters/definitions.py), as the scan workers read
them and the updater writes them.

A worker polls the manifest cheaply (a conditional GET), fetches exactly the set it names into
local folders, every byte checked against the manifest, and keeps no more than the set in use
and the one before. Real moto S3; real clamscan for the ClamAV case (skipped without it).
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from mypy_boto3_s3 import S3Client

from filejobs.adapters.definitions import DefinitionsStore, RollbackError
from filejobs.domain.definitions import (
    DatabaseFile,
    DefinitionsManifest,
    Engine,
    ManifestError,
    Source,
    engine_of,
)
from filejobs.domain.retry import ErrorKind, TransientError, classify
from filejobs.ports import LocalDefinitions, ManifestRead
from filejobs.processors.scan.engines import YaraScanner
from filejobs_dev.local.mirror import EICAR, hash_line
from tests.iam import recording_calls

BUCKET = "signatures-bucket"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
RULE = b'rule Filejobs_Marker { strings: $m = "FILEJOBS-MARKER-7" condition: $m }\n'


@pytest.fixture
def s3(aws: None) -> S3Client:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def store(s3: S3Client) -> DefinitionsStore:
    return DefinitionsStore(s3, BUCKET, "signatures")  # the trailing slash is added


def publish(
    store: DefinitionsStore,
    scratch: Path,
    set_id: str,
    files: dict[str, bytes],
    *,
    previous: tuple[str, ...] = (),
) -> DefinitionsManifest:
    """A set of `files` (by name) published as the updater does, after its own checks."""
    clamav_dir, yara_dir = scratch / set_id / "clamav", scratch / set_id / "yara"
    clamav_dir.mkdir(parents=True)
    yara_dir.mkdir(parents=True)
    entries = []
    for name, data in files.items():
        engine = engine_of(name)
        assert engine is not None
        (clamav_dir if engine is Engine.CLAMAV else yara_dir).joinpath(name).write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        entries.append(DatabaseFile(name, engine, digest, len(data), Source.CURATED))
    published = datetime.strptime(set_id, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    manifest = DefinitionsManifest(
        set_id=set_id,
        published_at=published,
        checked_at=published,
        engine="ClamAV 1.4.6",
        files=tuple(entries),
        previous=previous,
        verification={"eicar": "Test.EICAR FOUND", "clean": "OK"},
    )
    store.publish(manifest, clamav_dir, yara_dir)
    return manifest


def a_set(
    store: DefinitionsStore, tmp_path: Path, set_id: str = "20261201T080000Z"
) -> DefinitionsManifest:
    return publish(
        store,
        tmp_path / "published",
        set_id,
        {"eicar.hdb": hash_line(EICAR, "Delivered.EICAR").encode(), "marker.yar": RULE},
    )


def test_nothing_published_reads_as_no_manifest(store: DefinitionsStore) -> None:
    assert store.current() == ManifestRead(None, None, unchanged=False)


def test_the_manifest_is_polled_by_etag_and_downloaded_only_when_it_changed(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    published = a_set(store, tmp_path)
    # A worker reads it once, with its ETag
    first = store.current()
    assert first.manifest == published and first.etag and not first.unchanged
    # then asks with that ETag: unchanged, nothing downloaded
    again = store.current(if_none_match=first.etag)
    assert again == ManifestRead(None, first.etag, unchanged=True)
    # until the updater writes it (here: a confirmation by the mirror)
    touched = store.touch(published, published.checked_at + timedelta(hours=2))
    changed = store.current(if_none_match=first.etag)
    assert changed.manifest == touched and changed.etag != first.etag


def test_a_manifest_that_does_not_parse_is_an_error_not_a_guess(
    store: DefinitionsStore, s3: S3Client
) -> None:
    s3.put_object(Bucket=BUCKET, Key="signatures/manifest.json", Body=b'{"format": 1, "set_id"')
    with pytest.raises(ManifestError, match="the manifest is not JSON"):
        store.current()


def test_a_set_is_uploaded_whole_with_its_digests_and_the_manifest_last(
    s3: S3Client, store: DefinitionsStore, tmp_path: Path
) -> None:
    with recording_calls() as recorder:
        manifest = a_set(store, tmp_path)
    puts = [c.params for c in recorder.calls if c.operation == "PutObject"]
    assert [p["Key"] for p in puts] == [
        "signatures/sets/20261201T080000Z/clamav/eicar.hdb",
        "signatures/sets/20261201T080000Z/yara/marker.yar",
        "signatures/sets/20261201T080000Z/manifest.json",
        "signatures/manifest.json",  # last: the publication itself
    ]
    # each file with the SHA-256 S3 checks the received bytes against
    for put, entry in zip(puts, manifest.files, strict=False):
        assert base64.b64decode(put["ChecksumSHA256"]).hex() == entry.sha256


def test_a_fetched_set_is_ready_for_both_engines(store: DefinitionsStore, tmp_path: Path) -> None:
    manifest = a_set(store, tmp_path)
    local = store.fetch(manifest, tmp_path / "cache")
    assert local == LocalDefinitions(
        manifest,
        tmp_path / "cache" / manifest.set_id / "clamav",
        tmp_path / "cache" / manifest.set_id / "yara",
    )
    # ClamAV's folder holds its databases only; YARA's rules are beside it
    assert [p.name for p in local.clamav_dir.iterdir()] == ["eicar.hdb"]
    assert [p.name for p in local.yara_dir.iterdir()] == ["marker.yar"]
    # and the delivered rule is in force in a YARA engine built on the set
    sample = tmp_path / "m.txt"
    sample.write_bytes(b"xx FILEJOBS-MARKER-7 xx")
    assert YaraScanner.with_rules_in(local.yara_dir).scan(sample).signatures == ["Filejobs_Marker"]


@pytest.mark.skipif(shutil.which("clamscan") is None, reason="clamscan is not installed")
def test_clamav_reads_the_delivered_databases_from_the_fetched_set(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    local = store.fetch(a_set(store, tmp_path), tmp_path / "cache")
    sample = tmp_path / "e.com"
    sample.write_bytes(EICAR)
    scanned = subprocess.run(
        ["clamscan", "--no-summary", "--stdout", f"--database={local.clamav_dir}", str(sample)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert scanned.stdout.strip() == f"{sample}: Delivered.EICAR.UNOFFICIAL FOUND"


def test_a_complete_local_copy_is_reused_without_a_download(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    manifest = a_set(store, tmp_path)
    first = store.fetch(manifest, tmp_path / "cache")
    inode = (first.clamav_dir / "eicar.hdb").stat().st_ino
    # When fetched again (a rollback's manifest names the same set with other history)
    with recording_calls() as recorder:
        again = store.fetch(replace(manifest, previous=("20261130T080000Z",)), tmp_path / "cache")
    # Then nothing is downloaded, and the files are the same files
    assert recorder.calls == []
    assert (again.clamav_dir / "eicar.hdb").stat().st_ino == inode
    assert again.manifest.previous == ("20261130T080000Z",)


@pytest.mark.parametrize(
    ("engine", "name", "body"),
    [
        ("clamav", "implant.ign2", b"Delivered.EICAR\n"),  # an allow-list dropped beside it
        ("clamav", "eicar.hdb", hash_line(EICAR, "Delivered.EICAR").replace("Deliv", "Forge")),
        ("yara", "extra.yar", "rule Extra { condition: true }\n"),
    ],
    ids=["file added", "same-size file altered", "rule added"],
)
def test_a_local_copy_that_is_not_exactly_the_set_is_downloaded_again(
    store: DefinitionsStore, tmp_path: Path, engine: str, name: str, body: bytes | str
) -> None:
    # Given a fetched set, then a file added to it or one of its files altered in place
    manifest = a_set(store, tmp_path)
    local = store.fetch(manifest, tmp_path / "cache")
    target = tmp_path / "cache" / manifest.set_id / engine / name
    target.write_bytes(body if isinstance(body, bytes) else body.encode())
    # When fetched again, the copy is not reused: the set is downloaded, whole and alone
    with recording_calls() as recorder:
        again = store.fetch(manifest, tmp_path / "cache")
    assert sorted(c.params["Key"] for c in recorder.calls if c.operation == "GetObject") == [
        f"signatures/sets/{manifest.set_id}/clamav/eicar.hdb",
        f"signatures/sets/{manifest.set_id}/yara/marker.yar",
    ]
    assert [p.name for p in again.clamav_dir.iterdir()] == ["eicar.hdb"]
    assert [p.name for p in again.yara_dir.iterdir()] == ["marker.yar"]
    assert (again.clamav_dir / "eicar.hdb").read_text() == hash_line(EICAR, "Delivered.EICAR")
    assert again.clamav_dir == local.clamav_dir


@pytest.mark.parametrize(
    "tampered",
    [
        hash_line(EICAR, "Forged.EICAR").encode(),  # other bytes, another size
        hash_line(EICAR, "Delivered.EICAR")
        .encode()
        .replace(b"Delivered", b"Forgedxxx"),  # same size
    ],
    ids=["other size", "same size"],
)
def test_an_object_that_does_not_match_its_manifest_is_refused(
    store: DefinitionsStore, s3: S3Client, tmp_path: Path, tampered: bytes
) -> None:
    # Given a set whose database was replaced in the bucket after publication
    manifest = a_set(store, tmp_path)
    key = f"signatures/sets/{manifest.set_id}/clamav/eicar.hdb"
    s3.put_object(Bucket=BUCKET, Key=key, Body=tampered)
    # When a worker fetches it, the download is refused, as worth another try later
    cache = tmp_path / "cache"
    with pytest.raises(TransientError, match="does not match its manifest") as refused:
        store.fetch(manifest, cache)
    assert classify(refused.value) is ErrorKind.TRANSIENT
    # and nothing of it is left to be scanned with
    assert list(cache.iterdir()) == []


def test_a_set_missing_a_file_is_refused(
    store: DefinitionsStore, s3: S3Client, tmp_path: Path
) -> None:
    manifest = a_set(store, tmp_path)
    s3.delete_object(Bucket=BUCKET, Key=f"signatures/sets/{manifest.set_id}/yara/marker.yar")
    with pytest.raises(TransientError, match=r"lacks yara/marker\.yar"):
        store.fetch(manifest, tmp_path / "cache")


def test_only_the_set_in_use_and_the_one_before_are_kept_locally(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "not-ours.txt").write_text("someone else's")
    first = a_set(store, tmp_path, "20261201T080000Z")
    second = a_set(store, tmp_path, "20261201T100000Z")
    third = a_set(store, tmp_path, "20261201T120000Z")
    store.fetch(first, cache)
    store.fetch(second, cache)
    assert sorted(p.name for p in cache.iterdir()) == [first.set_id, second.set_id, "not-ours.txt"]
    store.fetch(third, cache)
    assert sorted(p.name for p in cache.iterdir()) == [second.set_id, third.set_id, "not-ours.txt"]
    # after a rollback to the second, the third (just before) stays, and nothing is downloaded
    with recording_calls() as recorder:
        store.fetch(second, cache)
    assert recorder.calls == []
    assert sorted(p.name for p in cache.iterdir()) == [second.set_id, third.set_id, "not-ours.txt"]


def test_prune_keeps_the_current_set_and_its_newest_previous_ones(
    store: DefinitionsStore, s3: S3Client, tmp_path: Path
) -> None:
    ids = ["20261201T080000Z", "20261201T100000Z", "20261201T120000Z", "20261201T140000Z"]
    # nothing is ever deleted without a current manifest
    for set_id in ids[:2]:
        a_set(store, tmp_path, set_id)
    s3.delete_object(Bucket=BUCKET, Key="signatures/manifest.json")
    assert store.prune(keep=1) == []
    a_set(store, tmp_path, ids[2])
    publish(store, tmp_path / "p", ids[3], {"x.hdb": b"x"}, previous=(ids[2], ids[1], ids[0]))
    assert store.prune(keep=2) == [ids[0], ids[1]]
    assert store.sets() == [ids[2], ids[3]]


def test_a_rollback_restores_the_previous_set_or_says_why_it_cannot(
    store: DefinitionsStore, s3: S3Client, tmp_path: Path
) -> None:
    with pytest.raises(RollbackError, match="no definitions are published"):
        store.rollback()
    first = a_set(store, tmp_path, "20261201T080000Z")
    with pytest.raises(RollbackError, match="has no previous set"):
        store.rollback()
    second = publish(
        store, tmp_path / "p", "20261201T100000Z", {"x.hdb": b"x"}, previous=(first.set_id,)
    )
    # When rolled back, the first set is current again, its files untouched, naming the second
    restored = store.rollback()
    assert restored == replace(first, rolled_back_from=second.set_id)
    assert store.current().manifest == restored
    # and the set rolled back from is kept while the manifest names it
    assert store.prune(keep=1) == []
    assert store.sets() == [first.set_id, second.set_id]
    # A rollback to a set whose files are gone is refused
    third = publish(
        store, tmp_path / "q", "20261201T120000Z", {"y.hdb": b"y"}, previous=(first.set_id,)
    )
    s3.delete_object(Bucket=BUCKET, Key=f"signatures/sets/{first.set_id}/clamav/eicar.hdb")
    with pytest.raises(RollbackError, match=f"{first.set_id} lacks clamav/eicar.hdb"):
        store.rollback()
    assert store.current().manifest == third


def test_the_updaters_state_and_the_curated_files(
    store: DefinitionsStore, s3: S3Client, tmp_path: Path
) -> None:
    assert store.read_state("freshclam.dat") is None
    store.write_state("freshclam.dat", b"FreshClamData\x01")
    assert store.read_state("freshclam.dat") == b"FreshClamData\x01"
    for key in ("custom/clamav/house.ndb", "custom/yara/house.yar", "custom/yara/notes.txt",
                "custom/clamav/old/stale.hdb", "custom/clamav/rules.yar"):  # fmt: skip
        s3.put_object(Bucket=BUCKET, Key=f"signatures/{key}", Body=b"x")
    curated = store.curated()
    # only files their engine loads, each in its engine's folder
    assert [(c.name, c.engine) for c in curated] == [
        ("house.ndb", Engine.CLAMAV),
        ("house.yar", Engine.YARA),
    ]
    assert store.download(curated[1], tmp_path).read_bytes() == b"x"
