"""Specification: the definitions updater (services/definitions.py) publishes what the mirror
serves, proved, as immutable sets, and backs off when the mirror refuses.

Real parts end to end: freshclam and clamscan (Debian's ClamAV 1.4.6) against local/mirror.py
on 127.0.0.1, serving databases written here; moto's S3 for the signatures bucket. Only the
clock is faked (the backoff's waits), started at the real time: freshclam's conditional fetches
compare the mirror's real file times with it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from mypy_boto3_s3 import S3Client

from filejobs.adapters.definitions import DefinitionsStore, RollbackError
from filejobs.domain.definitions import Backoff, DefinitionsManifest, Engine, Source, new_set_id
from filejobs.ports import BACKOFF_STATE
from filejobs.processors.scan.engines import YaraScanner
from filejobs.processors.scan.freshclam import Freshclam, MirrorSettings, SetVerifier
from filejobs.services.definitions import DefinitionsUpdater, UpdateStatus
from filejobs_dev.local.mirror import (
    BODY_DATABASE,
    HASH_DATABASE,
    DefinitionsMirror,
    add_hash_signature,
    build_local_databases,
)
from tests.conftest import FakeClock

pytestmark = pytest.mark.skipif(
    shutil.which("freshclam") is None or shutil.which("clamscan") is None,
    reason="ClamAV is not installed (apt-get install clamav clamav-freshclam)",
)
BUCKET = "signatures-bucket"
# A file nothing detects until the mirror publishes a signature for it.
SAMPLE = b"a file the first scan passed, and a later signature names\n"


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[DefinitionsMirror]:
    directory = tmp_path / "mirror"
    build_local_databases(directory)
    # Served files last changed yesterday: a conditional fetch of an unchanged file gets 304.
    yesterday = time.time() - 86400
    for path in directory.iterdir():
        os.utime(path, (yesterday, yesterday))
    with DefinitionsMirror(directory) as running:
        yield running


@pytest.fixture
def s3(aws: None) -> S3Client:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def store(s3: S3Client) -> DefinitionsStore:
    return DefinitionsStore(s3, BUCKET, "signatures/")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC).replace(microsecond=0))


def updater(
    store: DefinitionsStore,
    mirror: DefinitionsMirror,
    clock: FakeClock,
    *,
    keep: int = 3,
    custom_urls: list[str] | None = None,
) -> DefinitionsUpdater:
    settings = MirrorSettings(
        private_mirror=mirror.url,
        official_databases=(),
        custom_urls=tuple(mirror.database_urls() if custom_urls is None else custom_urls),
        loopback_http=True,  # the local mirror, on 127.0.0.1
        max_attempts=1,
    )
    freshclam = Freshclam("freshclam", settings, timeout_seconds=60)
    return DefinitionsUpdater(store, freshclam, SetVerifier("clamscan"), clock=clock, keep=keep)


def signed(mirror: DefinitionsMirror, clock: FakeClock, data: bytes, name: str) -> None:
    """A new signature on the mirror, a second after the test's now (the mirror's clock is the
    test's: freshclam asks whether files changed since the updater's last check)."""
    add_hash_signature(mirror.directory, data, name, modified_at=clock.now.timestamp() + 1)


def current(store: DefinitionsStore) -> DefinitionsManifest:
    manifest = store.current().manifest
    assert manifest is not None
    return manifest


def keys(s3: S3Client, prefix: str = "signatures/") -> list[str]:
    listing = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def clamscan(database: Path, sample: Path) -> str:
    run = subprocess.run(
        ["clamscan", "--no-summary", "--stdout", f"--database={database}", str(sample)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return run.stdout.strip()


def test_a_first_run_publishes_the_mirrors_databases_as_a_set(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    # When the updater runs against a mirror serving two custom databases
    report = updater(store, mirror, clock).run()
    # Then it published a set named after the second it was published in
    assert report.status is UpdateStatus.PUBLISHED, report.reason
    set_id = new_set_id(clock.now)
    assert (report.set_id, report.age) == (set_id, timedelta(0))
    manifest = current(store)
    assert manifest.set_id == set_id
    assert (manifest.published_at, manifest.checked_at) == (clock.now, clock.now)
    assert manifest.engine.startswith("ClamAV 1.")
    assert (manifest.previous, manifest.rolled_back_from) == ((), None)
    # holding exactly the mirror's files, with their digests and sizes
    for entry in manifest.files:
        served = (mirror.directory / entry.name).read_bytes()
        assert (entry.engine, entry.source) == (Engine.CLAMAV, Source.CUSTOM_URL)
        assert (entry.sha256, entry.size) == (hashlib.sha256(served).hexdigest(), len(served))
        assert (entry.version, entry.build_time) == (None, None)  # no CVD header
        published = s3.get_object(
            Bucket=BUCKET, Key=f"signatures/sets/{set_id}/clamav/{entry.name}"
        )
        assert published["Body"].read() == served
    assert sorted(f.name for f in manifest.files) == [HASH_DATABASE, BODY_DATABASE]
    # proved on EICAR and a clean file before it was made current
    assert manifest.verification == {
        "eicar": "Filejobs.Local.EICAR.UNOFFICIAL FOUND",
        "clean": "OK",
    }
    # and freshclam's own state is kept for the next run, as is the set's own manifest
    assert keys(s3) == [
        "signatures/manifest.json",
        f"signatures/sets/{set_id}/clamav/{HASH_DATABASE}",
        f"signatures/sets/{set_id}/clamav/{BODY_DATABASE}",
        f"signatures/sets/{set_id}/manifest.json",
        "signatures/state/freshclam.dat",
    ]
    assert store.set_manifest(set_id) == manifest


def test_a_run_with_nothing_new_only_moves_checked_at(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    # Given a published set
    assert updater(store, mirror, clock).run().status is UpdateStatus.PUBLISHED
    first, objects = current(store), keys(s3, "signatures/sets/")
    asked = len(mirror.served)
    # When the updater runs again two hours later, the mirror unchanged
    checked = clock.advance(timedelta(hours=2))
    report = updater(store, mirror, clock).run()
    # Then the set is unchanged, confirmed now, and nothing else was written
    assert report.status is UpdateStatus.UNCHANGED, report.reason
    assert (report.set_id, report.age) == (first.set_id, timedelta(0))
    assert current(store) == DefinitionsManifest(**{**first.__dict__, "checked_at": checked})
    assert keys(s3, "signatures/sets/") == objects
    # and freshclam only asked whether each file changed since it last had it (304: no download)
    again = mirror.served[asked:]
    assert [s.status for s in again] == [304, 304]
    assert all(s.if_modified_since for s in again)


def test_a_new_signature_publishes_a_new_set_and_old_ones_are_pruned_beyond_keep(
    store: DefinitionsStore,
    mirror: DefinitionsMirror,
    clock: FakeClock,
    s3: S3Client,
    tmp_path: Path,
) -> None:
    sample = tmp_path / "sample.txt"
    sample.write_bytes(SAMPLE)
    first = updater(store, mirror, clock, keep=2).run()
    assert first.status is UpdateStatus.PUBLISHED
    # When the mirror publishes a signature for a file the first set passed
    signed(mirror, clock, SAMPLE, "Filejobs.Local.Sample")
    clock.advance(timedelta(hours=2))
    second = updater(store, mirror, clock, keep=2).run()
    # Then a new set is current, the first kept for a rollback
    assert second.status is UpdateStatus.PUBLISHED, second.reason
    assert second.set_id != first.set_id
    manifest = current(store)
    assert (manifest.set_id, manifest.previous) == (second.set_id, (first.set_id,))
    # and scanning with it finds the file (a rescan would now)
    assert first.set_id is not None
    old = store.fetch(store.set_manifest(first.set_id) or manifest, tmp_path / "old")
    new = store.fetch(manifest, tmp_path / "new")
    assert clamscan(old.clamav_dir, sample).endswith(": OK")
    assert clamscan(new.clamav_dir, sample).endswith(": Filejobs.Local.Sample.UNOFFICIAL FOUND")
    # When one more arrives, with two sets kept, the oldest is deleted from the bucket
    signed(mirror, clock, b"yet another\n", "Filejobs.Local.Another")
    clock.advance(timedelta(hours=2))
    third = updater(store, mirror, clock, keep=2).run()
    assert third.status is UpdateStatus.PUBLISHED
    assert third.pruned == (first.set_id,)
    assert store.sets() == [second.set_id, third.set_id]
    assert current(store).previous == (second.set_id,)
    assert not keys(s3, f"signatures/sets/{first.set_id}/")


def test_a_rollback_makes_the_previous_set_current_and_it_is_not_republished(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock
) -> None:
    # Given a first set, then a second after a new signature
    first = updater(store, mirror, clock).run()
    with pytest.raises(RollbackError, match="has no previous set to roll back to"):
        store.rollback()
    signed(mirror, clock, SAMPLE, "Filejobs.Local.Sample")
    clock.advance(timedelta(hours=1))
    second = updater(store, mirror, clock).run()
    # When an operator rolls back (the new signature raised false alarms, say)
    restored = store.rollback()
    # Then the first set is current again, saying which it replaced
    assert (restored.set_id, restored.rolled_back_from) == (first.set_id, second.set_id)
    assert current(store) == restored
    assert restored.previous == ()
    # and the next run, the mirror serving the same, does not publish it again
    clock.advance(timedelta(hours=2))
    again = updater(store, mirror, clock).run()
    assert again.status is UpdateStatus.SKIPPED
    assert f"still serves set {second.set_id}, which was rolled back from" in again.reason
    assert current(store).set_id == first.set_id
    # When the mirror serves something else, that is published over the first set
    signed(mirror, clock, b"a fixed signature\n", "Filejobs.Local.Fixed")
    clock.advance(timedelta(hours=2))
    fixed = updater(store, mirror, clock).run()
    assert fixed.status is UpdateStatus.PUBLISHED
    assert current(store).previous == (first.set_id,)
    assert fixed.set_id is not None and second.set_id is not None and fixed.set_id > second.set_id
    assert second.set_id not in store.sets()  # the set rolled back from is pruned


def test_a_refusing_mirror_backs_the_updater_off_and_nothing_is_published(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock
) -> None:
    # Given a published set, then a new signature on a mirror that now answers 429
    published = updater(store, mirror, clock).run()
    signed(mirror, clock, SAMPLE, "Filejobs.Local.Sample")
    mirror.refuse(429, retry_after=60)
    clock.advance(timedelta(minutes=1))
    # When the updater runs, it fails saying why, and backs off an hour
    refused = updater(store, mirror, clock).run()
    assert refused.status is UpdateStatus.FAILED
    assert refused.reason.startswith("the mirror rate-limited us (429)")
    assert refused.set_id == published.set_id  # the current set stays current
    backoff = Backoff.from_json(store.read_state(BACKOFF_STATE) or b"")
    assert (backoff.refusals, backoff.status, backoff.until) == (
        1,
        429,
        clock.now + timedelta(hours=1),
    )
    # Then the runs within that hour do not ask the mirror at all
    asked = len(mirror.served)
    for _ in range(2):
        clock.advance(timedelta(minutes=20))
        skipped = updater(store, mirror, clock).run()
        assert skipped.status is UpdateStatus.SKIPPED
        assert "backing off from the mirror until" in skipped.reason
    assert len(mirror.served) == asked
    # When the hour has passed and the mirror answers 403, the wait doubles at least, and
    # freshclam's own cool-down after a 403 (a day) is honoured
    mirror.refuse(403)
    clock.advance(timedelta(minutes=21))
    blocked = updater(store, mirror, clock).run()
    assert blocked.status is UpdateStatus.FAILED
    assert "blocked us (403)" in blocked.reason
    backoff = Backoff.from_json(store.read_state(BACKOFF_STATE) or b"")
    assert backoff.refusals == 2 and backoff.until is not None
    assert abs(backoff.until - (datetime.now(UTC) + timedelta(hours=24))) < timedelta(minutes=2)
    assert current(store).set_id == published.set_id
    # When the mirror serves again after the backoff, the new set is published, the slate clean
    mirror.clear_refusals()
    clock.now = backoff.until - timedelta(minutes=1)
    assert updater(store, mirror, clock).run().status is UpdateStatus.SKIPPED
    clock.now = backoff.until + timedelta(minutes=1)
    recovered = updater(store, mirror, clock).run()
    assert recovered.status is UpdateStatus.PUBLISHED, recovered.reason
    assert Backoff.from_json(store.read_state(BACKOFF_STATE) or b"") == Backoff()


def test_a_database_that_does_not_load_is_not_published(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock
) -> None:
    # Given a mirror serving a hash database with a broken line
    with (mirror.directory / HASH_DATABASE).open("a") as database:
        database.write("this is not:a signature\n")
    # When the updater runs, freshclam's own load test refuses it, and nothing is published
    report = updater(store, mirror, clock).run()
    assert report.status is UpdateStatus.FAILED
    assert report.reason.startswith("freshclam failed (8):")
    assert "Malformed database" in report.reason
    assert (report.set_id, store.current().manifest, store.sets()) == (None, None, [])


def test_a_set_that_does_not_detect_eicar_is_not_published(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock
) -> None:
    # Given a mirror whose only database the updater is told about misses EICAR
    body_only = [url for url in mirror.database_urls() if url.endswith(BODY_DATABASE)]
    report = updater(store, mirror, clock, custom_urls=body_only).run()
    # Then the set is refused by the verification, with what clamscan said
    assert report.status is UpdateStatus.FAILED
    assert report.reason == (
        "the new set was not published: the set does not detect EICAR (clamscan: OK)"
    )
    assert store.current().manifest is None and store.sets() == []


def test_a_curated_database_that_does_not_load_fails_the_run(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    # Given a published set, then an operator's database that freshclam never tests
    published = updater(store, mirror, clock).run()
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/clamav/house.hdb", Body=b"not:a:sig:x\n")
    # When the updater runs, clamscan cannot load the new set: it is not published
    clock.advance(timedelta(hours=1))
    report = updater(store, mirror, clock).run()
    assert report.status is UpdateStatus.FAILED
    assert report.reason.startswith("the new set was not published: the set does not load")
    assert "Malformed database" in report.reason
    assert (current(store).set_id, store.sets()) == (published.set_id, [published.set_id])


def test_a_curated_allow_list_is_never_published(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    # Given a published set, then an .ign2 under custom/clamav/ naming the set's EICAR signature
    published = updater(store, mirror, clock).run()
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/clamav/quiet.ign2", Body=b"Local.EICAR\n")
    # When the updater runs, the set that would carry it is refused, saying why
    clock.advance(timedelta(hours=1))
    report = updater(store, mirror, clock).run()
    assert report.status is UpdateStatus.FAILED
    assert "quiet.ign2 is a .ign2 file, which turns detections off" in report.reason
    assert (current(store).set_id, store.sets()) == (published.set_id, [published.set_id])


def test_curated_files_join_every_set_and_yara_rules_stay_out_of_clamavs_folder(
    store: DefinitionsStore,
    mirror: DefinitionsMirror,
    clock: FakeClock,
    s3: S3Client,
    tmp_path: Path,
) -> None:
    # Given an operator's hash database and YARA rule under signatures/custom/
    marked = SAMPLE + b"HOUSE-MARKER-7\n"
    hashes = (
        f"{hashlib.md5(marked, usedforsecurity=False).hexdigest()}:{len(marked)}:House.Sample\n"
    )
    rule = b'rule House_Marker { strings: $m = "HOUSE-MARKER-7" condition: $m }\n'
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/clamav/house.hdb", Body=hashes.encode())
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/yara/house.yar", Body=rule)
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/yara/README.md", Body=b"not a rule")
    # When the updater runs
    report = updater(store, mirror, clock).run()
    # Then the set holds them, each where its engine loads it, marked as curated
    assert report.status is UpdateStatus.PUBLISHED, report.reason
    manifest = current(store)
    curated = {(f.path, f.source) for f in manifest.files if f.source is Source.CURATED}
    assert curated == {("clamav/house.hdb", Source.CURATED), ("yara/house.yar", Source.CURATED)}
    assert f"signatures/sets/{manifest.set_id}/yara/house.yar" in keys(s3)
    # and a worker's copy scans with both
    local = store.fetch(manifest, tmp_path / "cache")
    assert sorted(p.name for p in local.clamav_dir.iterdir()) == [
        HASH_DATABASE,
        BODY_DATABASE,
        "house.hdb",
    ]
    sample = tmp_path / "sample.txt"
    sample.write_bytes(marked)
    assert clamscan(local.clamav_dir, sample).endswith("House.Sample.UNOFFICIAL FOUND")
    yara = YaraScanner.with_rules_in(local.yara_dir)
    assert "House_Marker" in yara.scan(sample).signatures


def test_a_curated_yara_rule_that_does_not_compile_fails_the_run(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    s3.put_object(
        Bucket=BUCKET, Key="signatures/custom/yara/broken.yar", Body=b"rule Broken { condition: }"
    )
    report = updater(store, mirror, clock).run()
    assert report.status is UpdateStatus.FAILED
    assert "the set's YARA rules do not compile" in report.reason
    assert store.sets() == []


def test_with_yara_alone_a_set_holds_the_curated_rules_and_the_mirror_is_not_asked(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    # Given ScanEngines yara, an operator's rule and database
    rule = b'rule House_Marker { strings: $m = "HOUSE-MARKER-7" condition: $m }\n'
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/yara/house.yar", Body=rule)
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/clamav/house.hdb", Body=b"x:1:y\n")
    yara_only = DefinitionsUpdater(store, None, SetVerifier(None), clock=clock)
    # When it runs
    report = yara_only.run()
    # Then the set holds the rule only, proved by YARA (its shipped rules find EICAR)
    assert report.status is UpdateStatus.PUBLISHED, report.reason
    manifest = current(store)
    assert [f.path for f in manifest.files] == ["yara/house.yar"]
    assert manifest.verification == {"eicar": "EICAR_Test_File FOUND", "clean": "OK"}
    assert manifest.engine.startswith("YARA ")
    assert mirror.served == []


def test_an_unreadable_manifest_is_replaced_by_a_new_set(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    s3.put_object(Bucket=BUCKET, Key="signatures/manifest.json", Body=b'{"format": 1}')
    report = updater(store, mirror, clock).run()
    assert report.status is UpdateStatus.PUBLISHED
    assert current(store).set_id == report.set_id


def test_the_scratch_space_is_removed_after_each_run(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    settings = MirrorSettings(
        mirror.url, (), tuple(mirror.database_urls()), loopback_http=True, max_attempts=1
    )
    run = DefinitionsUpdater(
        store,
        Freshclam("freshclam", settings),
        SetVerifier("clamscan"),
        clock=clock,
        scratch_root=scratch,
    )
    assert run.run().status is UpdateStatus.PUBLISHED
    mirror.refuse(403, count=5)
    assert run.run().status is UpdateStatus.FAILED
    # nothing is left behind, the EICAR file the verification wrote included
    assert list(scratch.iterdir()) == []


def test_a_current_set_damaged_in_the_bucket_is_replaced(
    store: DefinitionsStore,
    mirror: DefinitionsMirror,
    clock: FakeClock,
    s3: S3Client,
    tmp_path: Path,
) -> None:
    # Given a published set one of whose objects was overwritten (workers refuse to fetch it)
    first = updater(store, mirror, clock).run()
    key = f"signatures/sets/{first.set_id}/clamav/{HASH_DATABASE}"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"overwritten\n")
    # When the updater runs, the mirror serving what the manifest names
    clock.advance(timedelta(hours=1))
    report = updater(store, mirror, clock).run()
    # Then the set is published anew (not just confirmed), and the damaged one is no rollback
    assert report.status is UpdateStatus.PUBLISHED, report.reason
    assert report.pruned == (first.set_id,)
    replaced = current(store)
    assert replaced.previous == () and replaced.set_id != first.set_id
    assert store.fetch(replaced, tmp_path / "cache").manifest == replaced  # whole again


def test_a_curated_file_whose_name_cannot_be_published_fails_the_run(
    store: DefinitionsStore, mirror: DefinitionsMirror, clock: FakeClock, s3: S3Client
) -> None:
    s3.put_object(Bucket=BUCKET, Key="signatures/custom/yara/house rules.yar", Body=b"rule A {}")
    report = updater(store, mirror, clock).run()
    assert report.status is UpdateStatus.FAILED
    assert report.reason == (
        "the new set was not published: file name 'house rules.yar' is not a plain file name"
    )


def test_with_yara_alone_and_no_curated_rule_there_is_nothing_to_fail_on(
    store: DefinitionsStore, clock: FakeClock, s3: S3Client
) -> None:
    yara_only = DefinitionsUpdater(store, None, SetVerifier(None), clock=clock)
    # Nothing to publish is no failure (no alarm for a stack that chose YARA and curates nothing)
    skipped = yara_only.run()
    assert skipped.status is UpdateStatus.SKIPPED
    assert "holds no rule to publish" in skipped.reason
    # and rules published once are withdrawn by an empty set when their files are removed
    key = "signatures/custom/yara/house.yar"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b'rule H { strings: $m = "H-7" condition: $m }\n')
    assert yara_only.run().status is UpdateStatus.PUBLISHED
    s3.delete_object(Bucket=BUCKET, Key=key)
    clock.advance(timedelta(minutes=5))
    withdrawn = yara_only.run()
    assert withdrawn.status is UpdateStatus.PUBLISHED
    assert current(store).files == ()
