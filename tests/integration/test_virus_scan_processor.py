"""Specification: the virus_scan job tags a clean upload and quarantines an infected one.

Real inputs end to end: uploads in moto S3 (the `media` bench), YARA with the shipped rules, and
ClamAV's real `clamscan` with signature files written here. No signature database can be
downloaded in a test, so the .hdb/.hsb files below list the MD5/SHA-256 of EICAR and of files of
the `clamav-testfiles` package (ClamAV's own test files are only detected by the official
database otherwise). The ClamAV cases skip only when clamscan is not installed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from filejobs.domain.job import JobType
from filejobs.domain.retry import ErrorKind, PermanentError, TransientError, classify
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.scan.engines import (
    ClamAvScanner,
    Scanner,
    ScanResult,
    Verdict,
    YaraScanner,
)
from filejobs.processors.scan.processor import VirusScanProcessor, default_engines
from filejobs.processors.scan.signatures import SignatureSync
from filejobs.processors.source import ObjectLocation
from tests.processing import MediaBench

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
TESTFILES = Path("/usr/share/clamav-testfiles")
MiB = 1024 * 1024

needs_clamscan = pytest.mark.skipif(
    shutil.which("clamscan") is None,
    reason="clamscan is not installed (apt-get install clamav clamav-testfiles)",
)


def zipped(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def hdb_line(data: bytes, name: str) -> str:
    """ClamAV's MD5 hash signature: md5:size:name."""
    return f"{hashlib.md5(data, usedforsecurity=False).hexdigest()}:{len(data)}:{name}\n"


@pytest.fixture(scope="module")
def clam_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ClamAV database of our own: EICAR by SHA-256 (.hsb), and clam.exe by MD5 (.hdb)."""
    database = tmp_path_factory.mktemp("clamdb")
    sha = hashlib.sha256(EICAR).hexdigest()
    (database / "filejobs-test.hsb").write_text(f"{sha}:{len(EICAR)}:Filejobs.Test.EICAR\n")
    if TESTFILES.is_dir():
        clam_exe = (TESTFILES / "clam.exe").read_bytes()
        (database / "clamav-testfiles.hdb").write_text(hdb_line(clam_exe, "Filejobs.Test.ClamExe"))
    return database


@pytest.fixture(scope="module")
def yara_engine() -> YaraScanner:
    return YaraScanner.with_rules_in()


@pytest.fixture
def both(yara_engine: YaraScanner, clam_db: Path) -> list[Scanner]:
    if shutil.which("clamscan") is None:
        pytest.skip("clamscan is not installed (apt-get install clamav clamav-testfiles)")
    # Small ClamAV limits, so a bomb in these tests is refused quickly by ClamAV too.
    return [yara_engine, ClamAvScanner(clam_db, max_filesize=64 * MiB, max_scansize=64 * MiB)]


def tags(media: MediaBench, work: Work) -> dict[str, str]:
    location = ObjectLocation.of(work.job)
    found = media.s3.get_object_tagging(**location.request())["TagSet"]
    return {tag["Key"]: tag["Value"] for tag in found}


def version_exists(media: MediaBench, work: Work) -> bool:
    try:
        media.s3.head_object(**ObjectLocation.of(work.job).request())
    except ClientError:
        return False
    return True


def scan(media: MediaBench, engines: list[Scanner], name: str, body: bytes) -> tuple[Work, Any]:
    work = media.work_for(JobType.VIRUS_SCAN, name, body)
    return work, VirusScanProcessor(media.s3, engines, media.quarantine)(work)


@needs_clamscan
def test_eicar_is_found_by_both_engines_and_quarantined(
    media: MediaBench, both: list[Scanner]
) -> None:
    # Given EICAR uploaded as acme's eicar.com
    work, result = scan(media, both, "eicar.com", EICAR)
    job = work.job
    # Then both engines name it
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["yara"]["signatures"] == ["EICAR_Test_File"]
    assert result["engines"]["clamav"]["signatures"] == ["Filejobs.Test.EICAR.UNOFFICIAL"]
    assert result["signatures"] == ["EICAR_Test_File", "Filejobs.Test.EICAR.UNOFFICIAL"]
    # And it now lives in the quarantine bucket under tenant and file id, tagged INFECTED
    key = f"quarantine/acme/{job.file_id}/eicar.com"
    assert result["quarantine_key"] == key
    copy = media.s3.get_object(Bucket=media.quarantine, Key=key)
    assert copy["Body"].read() == EICAR
    assert copy["Metadata"]["source-version"] == ObjectLocation.of(job).version_id
    quarantine_tags = media.s3.get_object_tagging(Bucket=media.quarantine, Key=key)["TagSet"]
    assert quarantine_tags == [{"Key": "scan-status", "Value": "INFECTED"}]
    # And the uploaded version is gone from the uploads bucket
    assert not version_exists(media, work)
    versions = media.s3.list_object_versions(Bucket=media.uploads, Prefix="uploads/acme/eicar")
    assert versions.get("Versions", []) == []


@needs_clamscan
@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("eicar.zip", zipped("eicar.com", EICAR)),
        ("twice.zip", zipped("eicar.zip", zipped("eicar.com", EICAR))),
        ("eicar.tar.gz.bin", gzip.compress(zipped("eicar.com", EICAR))),
    ],
)
def test_eicar_inside_archives_is_found_by_both_engines(
    media: MediaBench, both: list[Scanner], name: str, body: bytes
) -> None:
    work, result = scan(media, both, name, body)
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["yara"]["infected"] and result["engines"]["clamav"]["infected"]
    assert result["scanned_files"] >= 2
    assert not version_exists(media, work)
    assert result["quarantine_key"] == f"quarantine/acme/{work.job.file_id}/{name}"


@needs_clamscan
def test_a_clean_text_is_tagged_clean_keeping_its_other_tags(
    media: MediaBench, both: list[Scanner]
) -> None:
    # Given a plain text whose uploader tagged it already
    work = media.work_for(JobType.VIRUS_SCAN, "notes.txt", b"Meeting at noon.\n")
    location = ObjectLocation.of(work.job)
    media.s3.put_object_tagging(
        **location.request(), Tagging={"TagSet": [{"Key": "team", "Value": "sales"}]}
    )
    # When scanned
    result = VirusScanProcessor(media.s3, both, media.quarantine)(work)
    # Then it is CLEAN by both engines, tagged so, still in place, and nothing is quarantined
    assert result["verdict"] == "CLEAN"
    assert {n: e["verdict"] for n, e in result["engines"].items()} == {
        "yara": "CLEAN",
        "clamav": "CLEAN",
    }
    assert result["quarantine_key"] is None and result["signatures"] == []
    assert tags(media, work) == {"team": "sales", "scan-status": "CLEAN"}
    assert version_exists(media, work)
    assert media.s3.list_objects_v2(Bucket=media.quarantine).get("KeyCount") == 0


@needs_clamscan
def test_an_empty_file_is_clean(media: MediaBench, both: list[Scanner]) -> None:
    work, result = scan(media, both, "empty.bin", b"")
    assert result["verdict"] == "CLEAN"
    assert tags(media, work) == {"scan-status": "CLEAN"}


@needs_clamscan
@pytest.mark.parametrize(
    "name", ["clam.exe", "clam.zip", "clam.tar.gz", "clam.7z", "clam.exe.bz2", "clam.cab"]
)
def test_clamav_test_files_are_found_through_our_hash_signature(
    media: MediaBench, clam_db: Path, name: str
) -> None:
    # Given one of ClamAV's own test files (clam.exe, or an archive holding it)
    sample = TESTFILES / name
    assert sample.is_file(), f"{sample} is missing: apt-get install clamav-testfiles"
    engines: list[Scanner] = [ClamAvScanner(clam_db)]
    # When ClamAV scans it with our database
    work, result = scan(media, engines, name, sample.read_bytes())
    # Then the clam.exe inside is found by its MD5, and the upload is quarantined
    assert result["verdict"] == "INFECTED"
    assert result["signatures"] == ["Filejobs.Test.ClamExe.UNOFFICIAL"]
    assert not version_exists(media, work)


@needs_clamscan
def test_a_zip_bomb_is_refused_for_good_with_a_readable_reason(
    media: MediaBench, both: list[Scanner]
) -> None:
    # Given 200 MiB of zeros deflated to a small zip
    bomb = zipped("zeros.bin", bytes(200 * MiB))
    work = media.work_for(JobType.VIRUS_SCAN, "invoice.zip", bomb)
    # When scanned, the job fails for good, saying why in words
    with pytest.raises(PermanentError) as refused:
        VirusScanProcessor(media.s3, both, media.quarantine)(work)
    message = str(refused.value)
    assert message.startswith("the file could not be scanned in full: ")
    assert "yara: invoice.zip!zeros.bin: expands to more than 100 times" in message
    assert "a likely zip bomb" in message
    assert "clamav: clamav stopped at a limit: Heuristics.Limits.Exceeded" in message
    assert classify(refused.value) is ErrorKind.PERMANENT
    # And the upload is neither tagged nor moved
    assert tags(media, work) == {}
    assert version_exists(media, work)


def test_a_corrupt_zip_is_scanned_as_bytes(media: MediaBench, yara_engine: YaraScanner) -> None:
    junk = b"PK\x03\x04" + bytes(range(256)) * 64
    work, result = scan(media, [yara_engine], "broken.zip", junk)
    assert result["verdict"] == "CLEAN"
    assert tags(media, work) == {"scan-status": "CLEAN"}


@needs_clamscan
def test_a_failing_engine_is_retried_not_trusted(
    media: MediaBench, yara_engine: YaraScanner, tmp_path: Path
) -> None:
    # Given ClamAV pointed at a database directory with no definitions in it
    empty = tmp_path / "no-definitions"
    empty.mkdir()
    engines: list[Scanner] = [yara_engine, ClamAvScanner(empty)]
    work = media.work_for(JobType.VIRUS_SCAN, "notes.txt", b"plain\n")
    # When scanned, the attempt fails as transient (YARA's clean verdict alone is not enough)
    with pytest.raises(TransientError, match=r"clamav: clamscan failed \(2\)") as failed:
        VirusScanProcessor(media.s3, engines, media.quarantine)(work)
    assert classify(failed.value) is ErrorKind.TRANSIENT
    assert tags(media, work) == {}


@needs_clamscan
def test_an_infection_wins_over_another_engines_failure(
    media: MediaBench, yara_engine: YaraScanner, tmp_path: Path
) -> None:
    empty = tmp_path / "no-definitions"
    empty.mkdir()
    work, result = scan(media, [yara_engine, ClamAvScanner(empty)], "e.com", EICAR)
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["clamav"]["verdict"] == "ERROR"
    assert not version_exists(media, work)


def test_a_retry_after_the_quarantine_reports_it_again(
    media: MediaBench, yara_engine: YaraScanner
) -> None:
    # Given an attempt that quarantined EICAR (and whose result was then lost)
    processor = VirusScanProcessor(media.s3, [yara_engine], media.quarantine)
    work = media.work_for(JobType.VIRUS_SCAN, "eicar.com", EICAR)
    first = processor(work)
    # When the job runs again, its version is gone from the uploads bucket
    again = processor(work)
    # Then the quarantine is reported again rather than failing the job
    assert again["verdict"] == "INFECTED"
    assert again["quarantine_key"] == first["quarantine_key"]
    assert again["signatures"] == ["EICAR_Test_File"]


def test_a_cancelled_job_stops_before_scanning(media: MediaBench, yara_engine: YaraScanner) -> None:
    stopped = [False]

    class Tripwire:
        """A real engine that cancels the job once it has scanned."""

        name = "tripwire"

        def scan(self, path: Path) -> ScanResult:
            stopped[0] = True
            return yara_engine.scan(path)

    work = media.work_for(JobType.VIRUS_SCAN, "n.txt", b"x", should_stop=lambda: stopped[0])
    processor = VirusScanProcessor(media.s3, [Tripwire(), yara_engine], media.quarantine)
    with pytest.raises(StopRequested):
        processor(work)
    assert tags(media, work) == {}


def test_signatures_sync_downloads_new_files_and_skips_unchanged_ones(
    media: MediaBench, tmp_path: Path
) -> None:
    # Given a definitions prefix with a YARA rule, an .hdb, and files that are no signatures
    bucket = f"definitions-{media.uploads}"
    media.s3.create_bucket(Bucket=bucket)
    rule = b'rule Filejobs_Marker { strings: $m = "FILEJOBS-MARKER-7" condition: $m }\n'
    put = media.s3.put_object
    put(Bucket=bucket, Key="av/current/marker.yar", Body=rule)
    put(Bucket=bucket, Key="av/current/eicar.hdb", Body=hdb_line(EICAR, "S3.EICAR").encode())
    put(Bucket=bucket, Key="av/current/README.txt", Body=b"not a signature")
    put(Bucket=bucket, Key="av/current/old/stale.hdb", Body=b"a sub-folder is not synced")
    cache = tmp_path / "signatures"
    sync = SignatureSync(media.s3, bucket, "av/current", cache)

    # When synced for the first time, both signature files are downloaded
    first = sync.sync()
    assert first.downloaded == ["eicar.hdb", "marker.yar"]
    assert (cache / "marker.yar").read_bytes() == rule
    before = (cache / "marker.yar").stat()

    # When synced again with nothing changed, nothing is downloaded or rewritten
    second = sync.sync()
    assert (second.downloaded, second.unchanged) == ([], ["eicar.hdb", "marker.yar"])
    assert (cache / "marker.yar").stat().st_ino == before.st_ino

    # When one file changes and one is withdrawn, only the change is fetched
    put(Bucket=bucket, Key="av/current/marker.yar", Body=rule.replace(b"-7", b"-8"))
    media.s3.delete_object(Bucket=bucket, Key="av/current/eicar.hdb")
    third = sync.sync()
    assert (third.downloaded, third.unchanged, third.removed) == (["marker.yar"], [], ["eicar.hdb"])
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == ["marker.yar"]

    # And the synced rule is in force in the engines built on the cache
    engines = default_engines(cache, clamscan=None)
    _, result = scan(media, engines, "m.txt", b"xx FILEJOBS-MARKER-8 xx")
    assert result["signatures"] == ["Filejobs_Marker"]
    assert result["verdict"] == Verdict.INFECTED.value


@needs_clamscan
def test_clamav_reads_its_definitions_from_the_synced_cache(
    media: MediaBench, tmp_path: Path
) -> None:
    # Given an .hdb delivered through the definitions bucket (next to a YARA rule)
    bucket = f"definitions-{media.uploads}"
    media.s3.create_bucket(Bucket=bucket)
    body = hdb_line(EICAR, "Delivered.EICAR").encode()
    media.s3.put_object(Bucket=bucket, Key="av/eicar.hdb", Body=body)
    media.s3.put_object(
        Bucket=bucket,
        Key="av/marker.yar",
        Body=b'rule Filejobs_Marker { strings: $m = "FILEJOBS-MARKER" condition: $m }\n',
    )
    cache = tmp_path / "signatures"
    SignatureSync(media.s3, bucket, "av/", cache).sync()
    # When both default engines scan EICAR
    _, result = scan(media, default_engines(cache), "e.com", EICAR)
    # Then ClamAV names the delivered signature (and loads the .yar beside it without failing)
    assert "Delivered.EICAR.UNOFFICIAL" in result["engines"]["clamav"]["signatures"]
    assert result["engines"]["yara"]["signatures"] == ["EICAR_Test_File"]


def test_clamscan_runs_without_the_workers_credentials_and_with_its_own_libraries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a clamscan shipped with its libraries, as the ClamAV layer lays it out (a script
    # standing in for the binary records the environment it was started with)
    home = tmp_path / "clamav"
    (home / "lib").mkdir(parents=True)
    (home / "bin").mkdir()
    seen = tmp_path / "environment"
    program = home / "bin" / "clamscan"
    program.write_text(f'#!/bin/sh\nenv > "{seen}"\nexit 0\n')
    program.chmod(0o755)
    # and a worker whose environment holds its role's credentials, as Lambda's does
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "role-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "role-token")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/var/lang/lib")
    target = tmp_path / "upload.bin"
    target.write_bytes(b"anything")
    # When it scans a file
    result = ClamAvScanner(tmp_path, str(program)).scan(target)
    # Then clamscan saw no credentials, and only its own libraries on the library path
    environment = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert not {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & set(environment)
    assert environment["LD_LIBRARY_PATH"] == str(home / "lib")
    assert result.verdict is Verdict.CLEAN
