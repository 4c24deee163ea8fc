"""Specification: the virus_scan processor gives every upload a verdict, from every engine.

Real inputs end to end: uploads in moto S3 (the `media` bench), YARA with the shipped rules, and
ClamAV's real `clamscan` with signature files written here. No signature database can be
downloaded in a test, so the .hdb/.hsb files below list the MD5/SHA-256 of EICAR and of files of
the `clamav-testfiles` package (ClamAV's own test files are only detected by the official
database otherwise). The ClamAV cases skip only when clamscan is not installed. What a verdict
does (record, tag, quarantine) is tests/integration/test_virus_scan_use_case.py's.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.job import JobType
from filejobs.domain.objects import ObjectLocation
from filejobs.domain.retry import ErrorKind, TransientError, classify
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.scan.engines import (
    ClamAvScanner,
    Scanner,
    ScanResult,
    Upload,
    Verdict,
    YaraScanner,
)
from filejobs.processors.scan.isolated import SandboxedYara
from filejobs.processors.scan.processor import VirusScanProcessor
from filejobs.processors.scan.sealed import SealedFile
from tests.encrypted_media import encrypted_pdf, encrypted_zip
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


def scan(media: MediaBench, engines: list[Scanner], name: str, body: bytes) -> tuple[Work, Any]:
    work = media.work_for(JobType.VIRUS_SCAN, name, body)
    return work, VirusScanProcessor(media.s3, engines)(work)


@needs_clamscan
def test_eicar_is_found_by_both_engines(media: MediaBench, both: list[Scanner]) -> None:
    # Given EICAR uploaded as acme's eicar.com
    work, result = scan(media, both, "eicar.com", EICAR)
    # Then both engines name it, each with its version for the verdict's record
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["yara"]["signatures"] == ["EICAR_Test_File"]
    assert result["engines"]["clamav"]["signatures"] == ["Filejobs.Test.EICAR.UNOFFICIAL"]
    assert result["signatures"] == ["EICAR_Test_File", "Filejobs.Test.EICAR.UNOFFICIAL"]
    # And the processor only read: the upload is neither tagged nor moved yet
    assert tags(media, work) == {}
    assert media.s3.head_object(**ObjectLocation.of(work.job).request())["ContentLength"] == 68


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
    _, result = scan(media, both, name, body)
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["yara"]["infected"] and result["engines"]["clamav"]["infected"]
    assert result["scanned_files"] >= 2


@needs_clamscan
def test_a_clean_text_is_clean_by_both_engines(media: MediaBench, both: list[Scanner]) -> None:
    _, result = scan(media, both, "notes.txt", b"Meeting at noon.\n")
    assert result["verdict"] == "CLEAN"
    assert {n: e["verdict"] for n, e in result["engines"].items()} == {
        "yara": "CLEAN",
        "clamav": "CLEAN",
    }
    assert result["signatures"] == [] and result["unscannable_reason"] is None


@needs_clamscan
def test_an_empty_file_is_clean(media: MediaBench, both: list[Scanner]) -> None:
    _, result = scan(media, both, "empty.bin", b"")
    assert result["verdict"] == "CLEAN"


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
    _, result = scan(media, engines, name, sample.read_bytes())
    # Then the clam.exe inside is found by its MD5
    assert result["verdict"] == "INFECTED"
    assert result["signatures"] == ["Filejobs.Test.ClamExe.UNOFFICIAL"]


@needs_clamscan
def test_a_zip_bomb_is_unscannable_with_a_readable_reason(
    media: MediaBench, both: list[Scanner]
) -> None:
    # Given 200 MiB of zeros deflated to a small zip
    bomb = zipped("zeros.bin", bytes(200 * MiB))
    work = media.work_for(JobType.VIRUS_SCAN, "invoice.zip", bomb)
    # When scanned, the verdict is UNSCANNABLE, saying why in words (never CLEAN)
    result = VirusScanProcessor(media.s3, both)(work)
    assert result["verdict"] == "UNSCANNABLE"
    reason = result["unscannable_reason"]
    assert "yara: invoice.zip!zeros.bin: expands to more than 100 times" in reason
    assert "a likely zip bomb" in reason
    assert "clamav: clamav stopped at a limit: Heuristics.Limits.Exceeded" in reason


def test_a_file_over_the_scan_limit_is_unscannable_without_being_downloaded(
    media: MediaBench, yara_engine: YaraScanner
) -> None:
    work = media.work_for(JobType.VIRUS_SCAN, "backup.tar", b"x" * 4096)
    read: list[str] = []
    real_get = media.s3.get_object

    def counting_get(**request: Any) -> Any:
        read.append(request["Key"])
        return real_get(**request)

    media.s3.get_object = counting_get  # type: ignore[method-assign]
    result = VirusScanProcessor(media.s3, [yara_engine], max_bytes=1024)(work)
    assert result["verdict"] == "UNSCANNABLE"
    assert result["unscannable_reason"] == "the file is 4096 bytes; the scan reads at most 1024"
    assert read == []


@needs_clamscan
def test_password_protected_files_are_unscannable_with_their_reason_never_clean(
    media: MediaBench, both: list[Scanner], tmp_path: Path
) -> None:
    # Given an encrypted PDF and a password-protected zip, harmless or not: nobody can tell
    uploads = {
        "statement.pdf": (encrypted_pdf(b"quarterly figures", b"secret"), "Encrypted.PDF"),
        "payroll.zip": (encrypted_zip(tmp_path, "eicar.com", EICAR), "Encrypted.Zip"),
    }
    for name, (body, alert) in uploads.items():
        if body is None:
            continue  # zip is not installed
        # When scanned, the verdict is UNSCANNABLE, saying why (GuardDuty's UNSUPPORTED)
        _, result = scan(media, both, name, body)
        assert result["verdict"] == "UNSCANNABLE", name
        reason = result["unscannable_reason"]
        assert f"clamav: encrypted, its content cannot be scanned: Heuristics.{alert}" in reason
    # and the zip's encrypted member is named by the archive walk too
    if uploads["payroll.zip"][0] is not None:
        _, result = scan(media, both, "payroll.zip", uploads["payroll.zip"][0])
        assert (
            "yara: payroll.zip!eicar.com: encrypted, cannot be scanned"
            in (result["unscannable_reason"])
        )


def test_every_engine_reads_the_sealed_upload_which_nothing_can_rewrite(
    media: MediaBench, yara_engine: YaraScanner
) -> None:
    attempts: dict[str, str] = {}

    class Implant:
        """An engine run first that tries to change what the next engine scans."""

        name = "implant"

        def scan(self, upload: Upload) -> ScanResult:
            assert isinstance(upload, SealedFile) and upload.sealed
            # reopen the upload for writing, as any process of our user could through /proc
            writer = os.open(upload.path, os.O_WRONLY)
            try:
                os.write(writer, b"harmless now\n")
                attempts["reopen"] = "written"
            except PermissionError:  # EPERM: the memfd is sealed against writing
                attempts["reopen"] = "refused"
            finally:
                os.close(writer)
            # or rewrite whatever the download left in the workspace
            leftovers = [p for p in upload.scratch.rglob("*") if p.is_file()]
            for leftover in leftovers:
                leftover.write_bytes(b"harmless now\n")
            attempts["files in the workspace"] = str(len(leftovers))
            return ScanResult(engine=self.name, infected=False, scanned_files=1)

    # Given EICAR uploaded, scanned by the implant then by YARA
    _, result = scan(media, [Implant(), yara_engine], "eicar.com", EICAR)
    # Then nothing could be changed: no path holds the upload, the descriptor refuses writes
    assert attempts == {"reopen": "refused", "files in the workspace": "0"}
    # and YARA still saw EICAR
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["yara"]["signatures"] == ["EICAR_Test_File"]


@pytest.mark.parametrize("in_memory_max_bytes", [16, 1024 * MiB])
def test_sandboxed_yara_reads_the_sealed_upload_in_memory_or_from_its_nameless_file(
    media: MediaBench, yara_engine: YaraScanner, in_memory_max_bytes: int
) -> None:
    # an upload too large to hold in memory is an O_TMPFILE in the worker's workspace, which
    # the sandbox's jobs may not reopen (Landlock hides the workspace): read by its descriptor
    work = media.work_for(JobType.VIRUS_SCAN, "eicar.zip", zipped("eicar.com", EICAR))
    processor = VirusScanProcessor(
        media.s3, [SandboxedYara(yara_engine)], in_memory_max_bytes=in_memory_max_bytes
    )
    result = processor(work)
    assert result["verdict"] == "INFECTED" and result["engines"]["yara"]["scanned_files"] == 2


def test_a_corrupt_zip_is_scanned_as_bytes(media: MediaBench, yara_engine: YaraScanner) -> None:
    junk = b"PK\x03\x04" + bytes(range(256)) * 64
    _, result = scan(media, [yara_engine], "broken.zip", junk)
    assert result["verdict"] == "CLEAN"


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
        VirusScanProcessor(media.s3, engines)(work)
    assert classify(failed.value) is ErrorKind.TRANSIENT


@needs_clamscan
def test_an_infection_wins_over_another_engines_failure(
    media: MediaBench, yara_engine: YaraScanner, tmp_path: Path
) -> None:
    empty = tmp_path / "no-definitions"
    empty.mkdir()
    _, result = scan(media, [yara_engine, ClamAvScanner(empty)], "e.com", EICAR)
    assert result["verdict"] == "INFECTED"
    assert result["engines"]["clamav"]["verdict"] == "ERROR"


def test_a_cancelled_job_stops_before_scanning(media: MediaBench, yara_engine: YaraScanner) -> None:
    stopped = [False]

    class Tripwire:
        """A real engine that cancels the job once it has scanned."""

        name = "tripwire"

        def scan(self, upload: Upload) -> ScanResult:
            stopped[0] = True
            return yara_engine.scan(upload)

    work = media.work_for(JobType.VIRUS_SCAN, "n.txt", b"x", should_stop=lambda: stopped[0])
    processor = VirusScanProcessor(media.s3, [Tripwire(), yara_engine])
    with pytest.raises(StopRequested):
        processor(work)


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


def test_clamscan_runs_with_no_network_socket(tmp_path: Path) -> None:
    # Given a clamscan that tries to reach the Runtime API before it scans (as one taken over
    # by a hostile file might), recording what the kernel said
    seen = tmp_path / "said"
    program = tmp_path / "clamscan"
    program.write_text(
        f"#!{sys.executable}\n"
        "import errno, socket\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 9001), timeout=1)\n"
        "    said = 'connected'\n"
        "except OSError as error:\n"
        "    said = errno.errorcode.get(error.errno, str(error))\n"
        f"open({str(seen)!r}, 'w').write(said)\n"
    )
    program.chmod(0o755)
    target = tmp_path / "upload.bin"
    target.write_bytes(b"anything")
    # When it scans, the filter refuses the socket itself (not a refused connection)
    assert ClamAvScanner(tmp_path, str(program)).scan(target).verdict is Verdict.CLEAN
    assert seen.read_text() == "EACCES"
