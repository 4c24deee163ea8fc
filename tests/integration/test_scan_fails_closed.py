"""Specification: the virus scan fails closed (processors/scan/current.py).

With ClamAV configured, no scan answers unless ClamAV can vouch: definitions missing, too old,
unreadable or unloadable make the scan retry (DefinitionsUnavailableError, minutes later) and
never answer CLEAN from YARA alone. Real pieces: the definitions store on moto S3 (published as
the updater publishes), the real clamd (Debian's), YARA with the shipped rules.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest

from filejobs.adapters.definitions import DefinitionsStore
from filejobs.domain.definitions import DatabaseFile, DefinitionsManifest, Engine, Source
from filejobs.domain.retry import ErrorKind, classify
from filejobs.processors.scan.clamd import shared_daemon
from filejobs.processors.scan.current import (
    RETRY_AFTER,
    CurrentEngines,
    DefinitionsUnavailableError,
    EngineSettings,
)

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
CLAMD = shutil.which("clamd") or "/usr/sbin/clamd"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.skipif(not Path(CLAMD).exists(), reason="clamd is not installed")


class Clock:
    def __init__(self) -> None:
        self.now = NOW
        self.ticks = 0.0

    def wall(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.ticks


@pytest.fixture
def store(aws: None) -> DefinitionsStore:
    bucket = f"outputs-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return DefinitionsStore(boto3.client("s3"), bucket, "signatures/")


@pytest.fixture(autouse=True)
def no_clamd_left() -> Iterator[None]:
    yield
    daemon = shared_daemon()
    if daemon is not None:
        daemon.stop()


def publish(
    store: DefinitionsStore,
    tmp_path: Path,
    set_id: str,
    *,
    checked_at: datetime = NOW,
    clamav: dict[str, bytes] | None = None,
) -> DefinitionsManifest:
    folder = tmp_path / f"publish-{set_id}"
    clamav_dir, yara_dir = folder / "clamav", folder / "yara"
    clamav_dir.mkdir(parents=True)
    yara_dir.mkdir()
    if clamav is None:
        md5 = hashlib.md5(EICAR, usedforsecurity=False).hexdigest()
        clamav = {"local.hdb": f"{md5}:{len(EICAR)}:Test.EICAR\n".encode()}
    files = []
    for name, body in clamav.items():
        (clamav_dir / name).write_bytes(body)
        files.append(
            DatabaseFile(
                name, Engine.CLAMAV, hashlib.sha256(body).hexdigest(), len(body), Source.CUSTOM_URL
            )
        )
    manifest = DefinitionsManifest(
        set_id=set_id,
        published_at=checked_at,
        checked_at=checked_at,
        engine="ClamAV 1.4.6",
        files=tuple(files),
    )
    store.publish(manifest, clamav_dir, yara_dir)
    return manifest


def engines(
    store: DefinitionsStore | None, tmp_path: Path, clock: Clock, *, clamav: bool = True
) -> CurrentEngines:
    settings = EngineSettings(use_clamav=clamav, clamd=CLAMD, max_age=timedelta(hours=48))
    return CurrentEngines(
        store, tmp_path / "cache", settings, clock=clock.wall, monotonic=clock.monotonic
    )


def scan(current: CurrentEngines, tmp_path: Path, body: bytes) -> dict[str, bool]:
    path = tmp_path / f"sample-{uuid.uuid4().hex[:6]}"
    path.write_bytes(body)
    return {engine.name: engine.scan(path).infected for engine in current().engines}


def test_with_nothing_published_the_scan_refuses_to_answer(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    current = engines(store, tmp_path, Clock())
    with pytest.raises(DefinitionsUnavailableError, match="no ClamAV definitions") as refused:
        current()
    # a transient failure, retried no sooner than minutes later: never a YARA-only CLEAN
    assert classify(refused.value) is ErrorKind.TRANSIENT
    assert refused.value.retry_after == RETRY_AFTER


def test_once_a_set_is_published_both_engines_scan_with_it(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    clock = Clock()
    current = engines(store, tmp_path, clock)
    with pytest.raises(DefinitionsUnavailableError):
        current()
    # the next scan looks again at once (no waiting for the refresh interval without a set)
    publish(store, tmp_path, "20261201T110000Z")
    found = current()
    assert [e.name for e in found.engines] == ["yara", "clamav"]
    assert found.definitions_version == "20261201T110000Z"
    assert found.versions["clamav"].startswith("ClamAV ")
    assert found.definitions is not None and found.definitions["set_id"] == "20261201T110000Z"
    assert scan(current, tmp_path, EICAR) == {"yara": True, "clamav": True}
    assert scan(current, tmp_path, b"plain text\n") == {"yara": False, "clamav": False}


def test_definitions_older_than_the_limit_are_refused(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    clock = Clock()
    publish(store, tmp_path, "20261128T000000Z", checked_at=NOW - timedelta(hours=49))
    with pytest.raises(DefinitionsUnavailableError, match=r"49\.0 h old, past the 48\.0 h"):
        engines(store, tmp_path, clock)()


def test_a_set_clamd_cannot_load_is_refused_with_clamds_reason(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    publish(store, tmp_path, "20261201T110000Z", clamav={"broken.ndb": b"not:a:valid signature\n"})
    with pytest.raises(DefinitionsUnavailableError, match="clamd could not load") as refused:
        engines(store, tmp_path, Clock())()
    assert "broken.ndb" in str(refused.value) or "Malformed" in str(refused.value)


def test_a_manifest_that_cannot_be_understood_is_refused(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    boto3.client("s3").put_object(
        Bucket=store.bucket, Key="signatures/manifest.json", Body=b'{"format": 99}'
    )
    with pytest.raises(DefinitionsUnavailableError, match="manifest cannot be used"):
        engines(store, tmp_path, Clock())()


def test_a_new_set_is_picked_up_at_the_next_refresh_and_loaded_into_clamd(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    clock = Clock()
    publish(store, tmp_path, "20261201T110000Z")
    current = engines(store, tmp_path, clock)
    assert scan(current, tmp_path, b"new threat of december\n") == {"yara": False, "clamav": False}
    first_pid = shared_daemon().pid  # type: ignore[union-attr]
    threat = b"new threat of december\n"
    md5 = hashlib.md5(threat, usedforsecurity=False).hexdigest()
    eicar = hashlib.md5(EICAR, usedforsecurity=False).hexdigest()
    # (every set finds EICAR, as the updater proves: clamd's canary needs it)
    signatures = f"{md5}:{len(threat)}:Test.December\n{eicar}:{len(EICAR)}:Test.EICAR\n"
    publish(store, tmp_path, "20261201T113000Z", clamav={"local.hdb": signatures.encode()})
    # before the refresh interval the set in hand is kept (one manifest read per interval)
    assert current().definitions_version == "20261201T110000Z"
    # but a rescan looks for the newest at once (it is asked for because definitions changed)
    assert current(newest=True).definitions_version == "20261201T113000Z"
    clock.ticks += 301
    refreshed = current()
    assert refreshed.definitions_version == "20261201T113000Z"
    assert scan(current, tmp_path, threat) == {"yara": False, "clamav": True}
    assert shared_daemon().pid != first_pid  # type: ignore[union-attr]


def test_yara_alone_is_a_choice_and_then_needs_no_clamav_definitions(tmp_path: Path) -> None:
    current = engines(None, tmp_path, Clock(), clamav=False)
    found = current()
    assert [e.name for e in found.engines] == ["yara"]
    assert found.definitions_version is None
    assert scan(current, tmp_path, EICAR) == {"yara": True}


def test_a_set_whose_bytes_do_not_match_its_manifest_is_refused(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    publish(store, tmp_path, "20261201T110000Z")
    # someone (or something) changed a file of the set after it was published
    boto3.client("s3").put_object(
        Bucket=store.bucket,
        Key="signatures/sets/20261201T110000Z/clamav/local.hdb",
        Body=b"44d88612fea8a8f36de82e1278abb02f:68:Tampered\n",
    )
    with pytest.raises(DefinitionsUnavailableError, match="could not be fetched whole"):
        engines(store, tmp_path, Clock())()


def test_an_allow_list_dropped_beside_the_set_is_never_loaded_and_the_set_fetched_again(
    store: DefinitionsStore, tmp_path: Path
) -> None:
    # Given a worker scanning with the current set
    publish(store, tmp_path, "20261201T110000Z")
    current = engines(store, tmp_path, Clock())
    assert scan(current, tmp_path, EICAR) == {"yara": True, "clamav": True}
    clamav_dir = tmp_path / "cache" / "20261201T110000Z" / "clamav"
    # When an implant drops an .ign2 naming EICAR's signature into the set's folder, and
    # rewrites the set's own database so that it finds nothing
    (clamav_dir / "implant.ign2").write_text("Test.EICAR\n")
    (clamav_dir / "local.hdb").write_text(f"{'0' * 32}:{len(EICAR)}:Test.EICAR\n")
    # Then EICAR is still INFECTED: the folder is not the set any more, so the set is
    # fetched again from the bucket (checked against its manifest) before clamd loads it
    assert scan(current, tmp_path, EICAR) == {"yara": True, "clamav": True}
    assert sorted(p.name for p in clamav_dir.iterdir()) == ["local.hdb"]
