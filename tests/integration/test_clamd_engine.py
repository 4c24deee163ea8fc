"""Specification: ClamAV as a warm clamd, fed each file by descriptor (processors/scan/clamd.py).

Real inputs: Debian's /usr/sbin/clamd with signature files written here (no database can be
downloaded in a test): EICAR by MD5 (.hdb), a second marker by SHA-256 (.hsb) and a byte pattern
(.ndb). Each clamd start with these tiny databases takes tens of milliseconds. Everything skips
only when /usr/sbin/clamd is missing (and the bench's smoke run when clamscan is).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from filejobs.domain.definitions import DatabaseFile, Engine, Source
from filejobs.processors.scan import clamd
from filejobs.processors.scan.clamd import (
    SUN_PATH_MAX,
    CanaryMissedError,
    ClamdDaemon,
    ClamdDefinitions,
    ClamdError,
    ClamdScanner,
    ClamdVersion,
    ClamLimits,
    DefinitionsTamperedError,
    exchange,
    parse_reply,
    warm_clamav,
)
from filejobs.processors.scan.engines import ClamAvScanner, Verdict
from tests.encrypted_media import encrypted_pdf, encrypted_zip

CLAMD = "/usr/sbin/clamd"
EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
# Found by its SHA-256 (.hsb), and a byte pattern found anywhere in a file (.ndb).
HASHED = b"filejobs: a file known by its SHA-256 only\n"
MARKER = b"filejobs-body-signature-marker-0123456789"
MiB = 1024 * 1024

pytestmark = pytest.mark.skipif(
    not Path(CLAMD).exists(), reason="clamd is not installed (apt-get install clamav-daemon)"
)


def write_database(directory: Path, eicar_name: str = "Filejobs.Test.EICAR") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    md5 = hashlib.md5(EICAR, usedforsecurity=False).hexdigest()
    (directory / "test.hdb").write_text(f"{md5}:{len(EICAR)}:{eicar_name}\n")
    sha = hashlib.sha256(HASHED).hexdigest()
    (directory / "test.hsb").write_text(f"{sha}:{len(HASHED)}:Filejobs.Test.Hashed\n")
    (directory / "test.ndb").write_text(f"Filejobs.Test.Marker:0:*:{MARKER.hex()}\n")
    return directory


def zipped(*members: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, killed but not reaped, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def clamd_children() -> set[int]:
    """The live clamd processes this test process started (the module's shared one too)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm, rest = (entry / "stat").read_text().split(") ", 1)
        except OSError:
            continue
        ours = comm.endswith("(clamd") and int(rest.split()[1]) == os.getpid()
        if ours and running(int(entry.name)):
            found.add(int(entry.name))
    return found


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_database(tmp_path_factory.mktemp("clamdb"))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, database: Path) -> Iterator[ClamdDaemon]:
    """One clamd for the tests that only scan: started once."""
    started = ClamdDaemon(CLAMD, ClamLimits(), run_dir=tmp_path_factory.mktemp("run"))
    started.ensure(database)
    yield started
    started.stop()


@pytest.fixture
def scanner(daemon: ClamdDaemon, database: Path) -> ClamdScanner:
    return ClamdScanner(daemon, database)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[ClamdDaemon]:
    """A daemon of the test's own (short timeouts), stopped after it."""
    made = ClamdDaemon(
        CLAMD,
        run_dir=tmp_path / "run",
        command_timeout_seconds=0.5,
        stop_grace_seconds=0.2,
    )
    yield made
    made.stop()


def test_eicar_a_hash_and_a_body_signature_are_found_and_a_clean_file_passes(
    scanner: ClamdScanner, tmp_path: Path
) -> None:
    files = {
        "eicar.com": EICAR,
        "hashed.txt": HASHED,
        "marked.bin": os.urandom(4096) + MARKER + os.urandom(4096),
        "clean.txt": b"nothing to see here\n" * 1000,
    }
    results = {}
    for name, body in files.items():
        (tmp_path / name).write_bytes(body)
        results[name] = scanner.scan(tmp_path / name)

    assert results["eicar.com"].signatures == ["Filejobs.Test.EICAR.UNOFFICIAL"]
    assert results["hashed.txt"].signatures == ["Filejobs.Test.Hashed.UNOFFICIAL"]
    assert results["marked.bin"].signatures == ["Filejobs.Test.Marker.UNOFFICIAL"]
    for name in ("eicar.com", "hashed.txt", "marked.bin"):
        assert results[name].verdict is Verdict.INFECTED and not results[name].errors, name
    clean = results["clean.txt"]
    assert clean.verdict is Verdict.CLEAN
    assert (clean.signatures, clean.errors, clean.refusals, clean.scanned_files) == ([], [], [], 1)
    assert scanner.name == "clamav"
    assert scanner.version == "ClamAV 1.4.6" or (scanner.version or "").startswith("ClamAV ")
    assert scanner.load_seconds is not None and 0 < scanner.load_seconds < 30


def test_the_same_file_gets_the_same_verdict_from_clamscan(
    scanner: ClamdScanner, database: Path, tmp_path: Path
) -> None:
    # The warm engine is a drop-in for clamscan: same definitions, same names.
    if shutil.which("clamscan") is None:
        pytest.skip("clamscan is not installed")
    for name, body in (("eicar.com", EICAR), ("clean.txt", b"hello\n")):
        (tmp_path / name).write_bytes(body)
        warm, cold = scanner.scan(tmp_path / name), ClamAvScanner(database).scan(tmp_path / name)
        assert (warm.verdict, warm.signatures) == (cold.verdict, cold.signatures), name


@pytest.mark.parametrize(
    "body",
    [zipped(("eicar.com", EICAR)), zipped(("inner.zip", zipped(("eicar.com", EICAR))))],
    ids=["zip", "zip-in-zip"],
)
def test_eicar_inside_archives_is_found(scanner: ClamdScanner, tmp_path: Path, body: bytes) -> None:
    (tmp_path / "upload.zip").write_bytes(body)
    result = scanner.scan(tmp_path / "upload.zip")
    assert result.verdict is Verdict.INFECTED
    assert result.signatures == ["Filejobs.Test.EICAR.UNOFFICIAL"]


def test_files_past_a_limit_are_refusals_never_detections_nor_clean(
    tmp_path: Path, database: Path
) -> None:
    limits = ClamLimits(max_filesize=1 * MiB, max_scansize=1 * MiB, max_files=5)
    small = ClamdDaemon(CLAMD, limits, run_dir=tmp_path / "run")
    try:
        scanner = ClamdScanner(small, database)
        uploads = {
            # 16 MiB of zeros, 16 KiB zipped: a small zip bomb
            "bomb.zip": (zipped(("zeros.bin", bytes(16 * MiB))), "MaxScanSize"),
            "big.bin": (os.urandom(2 * MiB), "MaxFileSize"),
            "many.zip": (zipped(*((f"m{n}.txt", b"%d" % n) for n in range(20))), "MaxFiles"),
        }
        for name, (body, limit) in uploads.items():
            (tmp_path / name).write_bytes(body)
            result = scanner.scan(tmp_path / name)
            assert not result.infected and result.signatures == [], name
            assert result.refusals == [
                f"clamav stopped at a limit: Heuristics.Limits.Exceeded.{limit}"
            ], name
            assert result.verdict is Verdict.ERROR and not result.errors, name
        # and under the limits the same engine still finds EICAR
        (tmp_path / "eicar.zip").write_bytes(zipped(("eicar.com", EICAR)))
        assert scanner.scan(tmp_path / "eicar.zip").infected
    finally:
        small.stop()


def test_a_malformed_database_fails_the_start_with_clamds_reason(
    fresh: ClamdDaemon, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.hdb").write_text("not-a-hash:zz:Broken\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    before = clamd_children()

    with pytest.raises(ClamdError, match="Malformed database"):
        fresh.ensure(broken)
    with pytest.raises(ClamdError, match="No supported database files found"):
        fresh.ensure(empty)
    # nothing left running, and a scan says why it could not scan instead of raising
    assert fresh.pid is None and clamd_children() == before
    result = ClamdScanner(fresh, broken).scan(Path(__file__))
    assert result.verdict is Verdict.ERROR and not result.infected
    assert "Malformed database" in result.errors[0]


def test_the_daemon_is_reused_then_restarted_for_another_set_of_definitions(
    fresh: ClamdDaemon, tmp_path: Path
) -> None:
    first = write_database(tmp_path / "first")
    second = write_database(tmp_path / "second", eicar_name="Filejobs.Second.EICAR")
    (tmp_path / "eicar.com").write_bytes(EICAR)
    (tmp_path / "late.txt").write_bytes(b"a signature that arrives later\n")

    # Given a clamd serving the first directory, several scans use that one process
    scanner = ClamdScanner(fresh, first)
    pid = fresh.ensure(first).pid
    for _ in range(3):
        assert scanner.scan(tmp_path / "eicar.com").infected
        assert fresh.pid == pid
    # When another directory is asked for, clamd is restarted with it
    after = ClamdScanner(fresh, second).scan(tmp_path / "eicar.com")
    assert after.signatures == ["Filejobs.Second.EICAR.UNOFFICIAL"]
    second_pid = fresh.pid
    assert second_pid not in (None, pid) and not running(pid)
    # When a set that adds a definition file to that directory is given, the next scan loads it
    assert ClamdScanner(fresh, second).scan(tmp_path / "late.txt").verdict is Verdict.CLEAN
    late_md5 = hashlib.md5(b"a signature that arrives later\n", usedforsecurity=False)
    (second / "late.hdb").write_text(f"{late_md5.hexdigest()}:31:Filejobs.Late\n")
    late = ClamdScanner(fresh, ClamdDefinitions.as_found(second))
    assert late.scan(tmp_path / "late.txt").signatures == ["Filejobs.Late.UNOFFICIAL"]
    assert fresh.pid not in (None, second_pid)


def ign2_allowing_eicar(directory: Path, name: str = "implant.ign2") -> Path:
    """What an implant drops beside the definitions: an ignore list naming EICAR's signature
    (clamd loads every database-suffixed file of its DatabaseDirectory)."""
    (directory / name).write_text("Filejobs.Test.EICAR\n")
    return directory / name


def test_the_ign2_it_is_meant_to_stop_does_turn_eicar_off_in_a_bare_clamd(
    database: Path, tmp_path: Path
) -> None:
    # The attack is real: with the .ign2 loaded, clamscan passes EICAR
    poisoned = tmp_path / "poisoned"
    shutil.copytree(database, poisoned)
    ign2_allowing_eicar(poisoned)
    (tmp_path / "eicar.com").write_bytes(EICAR)
    assert ClamAvScanner(poisoned, "clamscan").scan(tmp_path / "eicar.com").verdict is (
        Verdict.CLEAN
    )


def test_a_file_dropped_beside_the_definitions_is_never_loaded(
    fresh: ClamdDaemon, tmp_path: Path
) -> None:
    # Given a clamd serving exactly a set of definitions
    directory = write_database(tmp_path / "set")
    definitions = ClamdDefinitions.as_found(directory)
    scanner = ClamdScanner(fresh, definitions)
    (tmp_path / "eicar.com").write_bytes(EICAR)
    assert scanner.scan(tmp_path / "eicar.com").infected
    pid = fresh.ensure(definitions).pid
    # When an .ign2 allow-listing EICAR is dropped into its directory
    ign2_allowing_eicar(directory)
    # Then the next scan does not load it: clamd is not restarted with it, EICAR never passes
    refused = scanner.scan(tmp_path / "eicar.com")
    assert refused.verdict is Verdict.ERROR and not refused.infected
    assert "not in its set: implant.ign2" in refused.errors[0]
    assert fresh.pid is None and not running(pid)
    with pytest.raises(DefinitionsTamperedError, match=re.escape("not in its set: implant.ign2")):
        fresh.ensure(definitions)
    # And once the directory is the set again, EICAR is INFECTED as before
    (directory / "implant.ign2").unlink()
    assert scanner.scan(tmp_path / "eicar.com").signatures == ["Filejobs.Test.EICAR.UNOFFICIAL"]


@pytest.mark.parametrize("drop", ["IMPLANT.IGN2", ".hidden.fp", "local.cfg", "notes.txt"])
def test_any_entry_not_in_the_set_refuses_the_start(
    fresh: ClamdDaemon, tmp_path: Path, drop: str
) -> None:
    # libclamav matches suffixes without case, and what it loads may grow: exactly the set
    directory = write_database(tmp_path / "set")
    definitions = ClamdDefinitions.as_found(directory)
    (directory / drop).write_text("Filejobs.Test.EICAR\n")
    with pytest.raises(DefinitionsTamperedError, match=f"not in its set: {re.escape(drop)}"):
        fresh.ensure(definitions)
    assert fresh.pid is None


def test_an_altered_definition_file_is_refused_even_with_its_old_times(
    fresh: ClamdDaemon, tmp_path: Path
) -> None:
    directory = write_database(tmp_path / "set")
    definitions = ClamdDefinitions.as_found(directory)
    pid = fresh.ensure(definitions).pid
    # an implant rewrites test.hdb to name another hash, then sets its mtime back
    target = directory / "test.hdb"
    info = target.stat()
    target.write_text(f"{'0' * 32}:{len(EICAR)}:Filejobs.Test.EICAR\n")
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    with pytest.raises(DefinitionsTamperedError, match=re.escape("altered: test.hdb")):
        fresh.ensure(definitions)
    assert fresh.pid is None and not running(pid)


def test_a_change_while_clamd_loads_refuses_the_load(fresh: ClamdDaemon, tmp_path: Path) -> None:
    # Given a directory that passes its check, then gains an .ign2 before clamd has read it
    directory = write_database(tmp_path / "set")

    class RacedDefinitions(ClamdDefinitions):
        def check(self) -> None:
            super().check()
            ign2_allowing_eicar(self.directory)

    raced = RacedDefinitions(directory, ClamdDefinitions.as_found(directory).files)
    before = clamd_children()
    with pytest.raises(DefinitionsTamperedError, match="changed while clamd loaded them"):
        fresh.ensure(raced)
    assert fresh.pid is None and clamd_children() == before


def test_definitions_are_checked_against_their_manifests_digests(tmp_path: Path) -> None:
    directory = write_database(tmp_path / "set")
    body = (directory / "test.hdb").read_bytes()
    entry = DatabaseFile(
        "test.hdb", Engine.CLAMAV, hashlib.sha256(body).hexdigest(), len(body), Source.CURATED
    )
    only_hdb = ClamdDefinitions.of_set(directory, [entry])
    # the .hsb and .ndb written beside it are not the manifest's: refused
    with pytest.raises(
        DefinitionsTamperedError, match=re.escape("not in its set: test.hsb, test.ndb")
    ):
        only_hdb.check()
    (directory / "test.hsb").unlink()
    (directory / "test.ndb").unlink()
    only_hdb.check()
    (directory / "test.hdb").unlink()
    with pytest.raises(DefinitionsTamperedError, match=re.escape("missing: test.hdb")):
        only_hdb.check()


def test_a_killed_clamd_never_yields_a_false_clean_and_is_restarted(
    fresh: ClamdDaemon, database: Path, tmp_path: Path
) -> None:
    (tmp_path / "eicar.com").write_bytes(EICAR)
    scanner = ClamdScanner(fresh, database)
    first = fresh.ensure(database).pid

    # When clamd is killed (OOM killer, say), the scan right after is a detection (clamd was
    # restarted in time) or an engine error, never clean
    os.kill(first, signal.SIGKILL)
    right_after = scanner.scan(tmp_path / "eicar.com")
    assert right_after.infected or right_after.errors, right_after
    # and the next one has a new clamd that finds it
    assert scanner.scan(tmp_path / "eicar.com").infected
    assert fresh.pid not in (None, first)


def test_a_clamd_that_dies_mid_scan_is_an_engine_error_and_the_next_scan_restarts_it(
    fresh: ClamdDaemon, database: Path, tmp_path: Path
) -> None:
    (tmp_path / "eicar.com").write_bytes(EICAR)
    scanner = ClamdScanner(fresh, database, timeout_seconds=10)
    pid = fresh.ensure(database).pid
    assert scanner.scan(tmp_path / "eicar.com").infected  # clamd logs it, naming the file
    # Given a scan waiting on a clamd that cannot answer yet (stopped)...
    os.kill(pid, signal.SIGSTOP)
    results = []
    waiting = threading.Thread(target=lambda: results.append(scanner.scan(tmp_path / "eicar.com")))
    waiting.start()
    time.sleep(0.3)
    # ...when clamd dies, the scan ends at once as an engine error that says so
    os.kill(pid, signal.SIGKILL)
    waiting.join(timeout=5)
    (result,) = results
    assert not result.infected and result.verdict is Verdict.ERROR and result.refusals == []
    assert "clamd" in result.errors[0]
    # quoting clamd's last words, but never its detections (another job's file name)
    assert "FOUND" not in result.errors[0] and str(tmp_path) not in result.errors[0]
    assert scanner.scan(tmp_path / "eicar.com").infected
    assert fresh.pid not in (None, pid)


def test_a_clamd_that_stops_answering_times_out_and_is_replaced(
    fresh: ClamdDaemon, database: Path, tmp_path: Path
) -> None:
    (tmp_path / "eicar.com").write_bytes(EICAR)
    scanner = ClamdScanner(fresh, database, timeout_seconds=0.5)
    pid = fresh.ensure(database).pid
    os.kill(pid, signal.SIGSTOP)  # hung: alive, answering nothing

    began = time.monotonic()
    hung = scanner.scan(tmp_path / "eicar.com")
    assert time.monotonic() - began < 3
    assert hung.verdict is Verdict.ERROR and not hung.infected
    assert "did not answer" in hung.errors[0]
    # The next scan finds it does not answer PING either, kills it and starts another
    assert scanner.scan(tmp_path / "eicar.com").infected
    assert fresh.pid not in (None, pid) and not running(pid)


def test_a_load_past_its_timeout_fails_and_leaves_no_clamd(database: Path, tmp_path: Path) -> None:
    impatient = ClamdDaemon(CLAMD, run_dir=tmp_path / "run", load_timeout_seconds=0.001)
    before = clamd_children()
    with pytest.raises(ClamdError, match=r"did not answer within 0.001 s"):
        impatient.ensure(database)
    assert impatient.pid is None and clamd_children() == before


@pytest.mark.parametrize(
    ("program", "reason"),
    [("/bin/false", "exited with status 1 while loading"), ("/nonexistent/clamd", "could not run")],
)
def test_a_clamd_that_cannot_start_says_why(
    database: Path, tmp_path: Path, program: str, reason: str
) -> None:
    with pytest.raises(ClamdError, match=reason):
        ClamdDaemon(program, run_dir=tmp_path / "run").ensure(database)


def test_a_run_directory_that_is_not_a_private_directory_of_ours_is_refused(
    database: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)  # planted in a shared /tmp, say
    (tmp_path / "file").write_text("")
    with pytest.raises(ClamdError, match="not a directory of ours"):
        ClamdDaemon(CLAMD, run_dir=tmp_path / "link").ensure(database)
    # and a scan that cannot prepare one is an engine error, not an exception
    blocked = ClamdScanner(ClamdDaemon(CLAMD, run_dir=tmp_path / "file" / "run"), database)
    result = blocked.scan(Path(__file__))
    assert (
        result.verdict is Verdict.ERROR
        and "run directory could not be prepared" in (result.errors[0])
    )


def test_clamd_gets_no_aws_credentials_and_its_own_libraries(
    database: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a worker's environment with credentials, and clamd laid out as in the ClamAV layer
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "secret-" + name.lower())
    monkeypatch.setenv("QUARANTINE_BUCKET", "worker-setting")
    layer = tmp_path / "opt" / "clamav"
    (layer / "bin").mkdir(parents=True)
    (layer / "lib").mkdir()
    (layer / "bin" / "clamd").symlink_to(CLAMD)
    layered = ClamdDaemon(str(layer / "bin" / "clamd"), run_dir=tmp_path / "run")
    try:
        # When it starts
        pid = layered.ensure(database).pid
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        seen = dict(item.decode().split("=", 1) for item in environ if item)
    finally:
        layered.stop()
    # Then it sees only PATH, TMPDIR and LD_LIBRARY_PATH=<layer>/lib: no secret
    assert set(seen) == {"PATH", "TMPDIR", "LD_LIBRARY_PATH"}
    assert seen["LD_LIBRARY_PATH"] == str(layer / "lib")
    assert not any("secret" in value for value in seen.values())


def test_its_configuration_and_files_are_private_and_hardened(daemon: ClamdDaemon) -> None:
    config = daemon.config_path.read_text().splitlines()
    for line in (
        "Foreground yes",
        "LocalSocketMode 600",
        "SelfCheck 0",
        "ConcurrentDatabaseReload no",
        "ExitOnOOM yes",
        "AlertExceedsMax yes",
        "AlertEncrypted yes",
        "AlertEncryptedArchive yes",
        "AlertEncryptedDoc yes",
        "DisableCache yes",
        "LogSyslog no",
        f"LocalSocket {daemon.socket_path}",
        f"MaxFileSize {512 * MiB}",
        "MaxRecursion 3",
        "MaxScanTime 120000",
    ):
        assert line in config
    keys = {line.split()[0] for line in config if line and not line.startswith("#")}
    assert not keys & {"TCPSocket", "TCPAddr", "User", "LogFile", "PidFile", "VirusEvent"}
    assert stat.S_IMODE(daemon.socket_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((daemon.run_dir / "tmp").stat().st_mode) == 0o700


def test_a_socket_path_of_107_bytes_works_and_one_of_108_is_refused_up_front(
    database: Path, tmp_path: Path
) -> None:
    # "/clamd.sock" is 11 bytes; the run directory is padded to reach the limit exactly
    pad = SUN_PATH_MAX - len(os.fsencode(tmp_path)) - len("/") - len("/clamd.sock")
    assert pad > 0, "the test's temporary directory is already too long"
    longest = ClamdDaemon(CLAMD, run_dir=tmp_path / ("d" * pad))
    assert len(os.fsencode(longest.socket_path)) == 107
    try:
        assert longest.ensure(database).pid > 0
        assert exchange(longest.socket_path, b"PING", 5) == "PONG"
    finally:
        longest.stop()
    with pytest.raises(ValueError, match="108 bytes, over the 107"):
        ClamdDaemon(CLAMD, run_dir=tmp_path / ("d" * (pad + 1)))


def test_stop_ends_clamd_and_removes_its_files(database: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    stopping = ClamdDaemon(CLAMD, run_dir=run)
    pid = stopping.ensure(database).pid
    stopping.stop()
    assert not running(pid) and stopping.pid is None and stopping.status is None
    assert not run.exists()
    stopping.stop()  # twice is harmless


def test_concurrent_scans_share_one_clamd_and_all_get_their_verdict(
    fresh: ClamdDaemon, database: Path, tmp_path: Path
) -> None:
    (tmp_path / "eicar.com").write_bytes(EICAR)
    (tmp_path / "clean.txt").write_bytes(b"clean\n")
    scanner = ClamdScanner(fresh, database)
    verdicts: list[tuple[str, Verdict]] = []
    before = clamd_children()

    def scan_both() -> None:
        for _ in range(25):
            for name in ("eicar.com", "clean.txt"):
                verdicts.append((name, scanner.scan(tmp_path / name).verdict))

    # the first scans of every thread race to start clamd: only one is started
    threads = [threading.Thread(target=scan_both) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(verdicts) == 200
    assert {v for name, v in verdicts if name == "eicar.com"} == {Verdict.INFECTED}
    assert {v for name, v in verdicts if name == "clean.txt"} == {Verdict.CLEAN}
    assert clamd_children() - before == {fresh.pid}


def test_warm_clamav_keeps_one_clamd_per_process(database: Path, tmp_path: Path) -> None:
    try:
        first = warm_clamav(CLAMD, database)
        again = warm_clamav(CLAMD, database)
        assert first.daemon is again.daemon and again.daemon.pid == first.daemon.pid
        assert again.daemon.run_dir.name == f"filejobs-clamd-{os.getpid()}"
        pid = first.daemon.pid
        assert pid is not None
        # other limits need another configuration: the old clamd is stopped
        tighter = warm_clamav(CLAMD, database, ClamLimits(max_filesize=MiB, max_scansize=MiB))
        assert tighter.daemon.pid not in (None, pid) and not running(pid)
        assert clamd.shared_daemon() is tighter.daemon
    finally:
        daemon = clamd.shared_daemon()
        if daemon is not None:
            daemon.stop()


def test_a_worker_that_exits_leaves_no_clamd_behind(database: Path) -> None:
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from filejobs.processors.scan.clamd import warm_clamav
        scanner = warm_clamav({CLAMD!r}, Path({str(database)!r}))
        print(scanner.daemon.pid, flush=True)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    pid = int(run.stdout.strip())
    deadline = time.monotonic() + 5
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid)


def test_a_worker_killed_outright_takes_its_clamd_with_it(database: Path) -> None:
    # A worker that dies without running a finalizer (SIGKILL, an out-of-memory kill, the chaos
    # run's injected crash, os._exit) must not leave clamd holding the database in memory.
    script = textwrap.dedent(
        f"""
        import os, threading
        from pathlib import Path
        from filejobs.processors.scan.clamd import warm_clamav
        # started from a thread that ends before the worker does, as any handler thread may
        def start():
            scanner = warm_clamav({CLAMD!r}, Path({str(database)!r}))
            print(scanner.daemon.pid, flush=True)
        starter = threading.Thread(target=start)
        starter.start(); starter.join()
        os._exit(3)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 3, run.stderr
    pid = int(run.stdout.strip())
    deadline = time.monotonic() + 5
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid)


def test_a_forked_child_neither_uses_nor_stops_its_parents_clamd(database: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys, warnings
        from pathlib import Path
        from filejobs.processors.scan import clamd
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with the output thread
        scanner = clamd.warm_clamav({CLAMD!r}, Path({str(database)!r}))
        pid = scanner.daemon.pid
        child = os.fork()
        if child == 0:
            forgotten = clamd.shared_daemon() is None and scanner.daemon.pid is None
            sys.exit(0 if forgotten else 3)  # a normal exit: atexit and finalizers run
        _, status = os.waitpid(child, 0)
        print(os.waitstatus_to_exitcode(status), scanner.daemon.pid == pid, flush=True)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "True"]


def test_exchange_gives_up_on_a_silent_server_and_a_closed_connection(tmp_path: Path) -> None:
    # A stand-in for clamd: answers one connection with silence, the next by hanging up.
    path = tmp_path / "fake.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(2)
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            exchange(path, b"PING", 0.3)
        assert 0.25 < time.monotonic() - began < 2
        silent, _ = server.accept()
        silent.close()

        def hang_up() -> None:
            connection, _ = server.accept()
            connection.recv(100)
            connection.sendall(b"PON")  # half an answer, then gone
            connection.close()

        thread = threading.Thread(target=hang_up)
        thread.start()
        with pytest.raises(ConnectionError, match="mid-answer"):
            exchange(path, b"PING", 5)
        thread.join()


@pytest.mark.parametrize(
    ("reply", "verdict", "signatures", "refusals", "errors"),
    [
        ("fd[11]: OK", Verdict.CLEAN, [], [], []),
        ("fd[11]: Win.Test.EICAR_HDB-1 FOUND", Verdict.INFECTED, ["Win.Test.EICAR_HDB-1"], [], []),
        (
            "fd[11]: Heuristics.Limits.Exceeded.MaxScanTime FOUND",
            Verdict.ERROR,
            [],
            ["clamav stopped at a limit: Heuristics.Limits.Exceeded.MaxScanTime"],
            [],
        ),
        (
            "fd[11]: lstat() failed: Permission denied. ERROR",
            Verdict.ERROR,
            [],
            [],
            ["clamd: fd[11]: lstat() failed: Permission denied. ERROR"],
        ),
        ("COMMAND READ TIMED OUT", Verdict.ERROR, [], [], ["clamd: COMMAND READ TIMED OUT"]),
        ("", Verdict.ERROR, [], [], ["clamd gave an empty answer"]),
        ("OK", Verdict.ERROR, [], [], ["clamd: OK"]),
    ],
)
def test_clamd_answers_are_read_strictly(
    reply: str,
    verdict: Verdict,
    signatures: list[str],
    refusals: list[str],
    errors: list[str],
) -> None:
    result = parse_reply(reply)
    assert (result.verdict, result.signatures, result.refusals, result.errors) == (
        verdict,
        signatures,
        refusals,
        errors,
    )


def test_versions_are_parsed_with_and_without_the_official_database() -> None:
    local = ClamdVersion.parse("ClamAV 1.4.6")
    assert (local.engine, local.database, local.database_date) == ("ClamAV 1.4.6", None, None)
    official = ClamdVersion.parse("ClamAV 1.4.6/27452/Mon Dec  9 09:34:27 2024")
    assert official.engine == "ClamAV 1.4.6" and official.database == 27452
    assert official.database_date is not None and official.database_date.isoformat() == (
        "2024-12-09T09:34:27"
    )
    assert official.text == "ClamAV 1.4.6/27452/Mon Dec  9 09:34:27 2024"
    with pytest.raises(ValueError, match="not a clamd version"):
        ClamdVersion.parse("UNKNOWN COMMAND")


@pytest.mark.parametrize(
    "limits",
    [
        {"max_filesize": MiB, "max_scansize": 2 * MiB},  # a member over MaxFileSize, silently
        {"max_filesize": 0, "max_scansize": 0},  # 0 is "no limit" to clamd
        {"max_files": 0},
        {"scan_timeout_seconds": 0},
        {"max_filesize": 4096 * MiB, "max_scansize": MiB},
    ],
)
def test_limits_that_would_let_a_file_through_unscanned_are_refused(
    limits: dict[str, int],
) -> None:
    with pytest.raises(ValueError, match=r"max_scansize|limit|sizes"):
        ClamLimits(**limits)


@pytest.mark.skipif(shutil.which("clamscan") is None, reason="clamscan is not installed")
def test_the_scanning_bench_runs_small_and_writes_its_section(tmp_path: Path) -> None:
    # bench/scanning.py on a tiny database, so that it cannot rot between `make bench` runs
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "scanning.json"
    run = subprocess.run(
        [sys.executable, str(root / "bench" / "scanning.py"),
         "--hash-signatures", "2000", "--body-signatures", "200", "--runs", "1",
         "--warm-scans", "2", "--cache", str(tmp_path / "clamdb"), "--json", str(out)],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    printed = dict(
        line.split(": ", 1) for line in run.stdout.splitlines() if line.startswith("warm ")
    )
    assert 0 < float(printed["warm scan seconds per 1 MB file"]) < 0.5
    assert float(printed["warm speed-up over clamscan per job"]) > 0
    assert "LINEAR EXTRAPOLATION to 9,000,000" in run.stdout
    section = json.loads(out.read_text())
    assert section["section"] == "scanning"
    assert [t["target"] for t in section["targets"]] == ["<= 0.5", ">= 20x"]
    assert section["rows"][1]["signatures"] == 2201 and section["rows"][0]["signatures"] == 551
    assert any("linear extrapolation, not measured" in line for line in section["markdown"])
    # and each database is cached under its parameters, for the next run to reuse
    assert {p.name for p in (tmp_path / "clamdb").iterdir()} == {
        "v1-h500-b50-s1",
        "v1-h2000-b200-s1",
    }


# A stand-in clamd for what a real one cannot be made to do: it speaks clamd's protocol on the
# LocalSocket of the configuration it is given, and answers FILDES by what it is told to be.
FAKE_CLAMD = """#!{python}
import os, socket, sys
config = sys.argv[1].split("=", 1)[1]
path = next(l.split(" ", 1)[1] for l in open(config).read().splitlines()
            if l.startswith("LocalSocket "))
honest_scans = {honest_scans}  # FILDES answered truthfully before it answers OK to everything
{extra}
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(8)
scans = 0
while True:
    connection, _ = server.accept()
    command = b""
    while not command.endswith(b"\\0"):
        command += connection.recv(1)
    if command == b"zPING\\0":
        connection.sendall(b"PONG\\0")
    elif command == b"zVERSION\\0":
        connection.sendall(b"ClamAV 1.4.6\\0")
    elif command == b"zFILDES\\0":
        _, (fd,), _, _ = socket.recv_fds(connection, 1, 1)
        data = os.pread(fd, 1 << 20, 0)
        scans += 1
        infected = b"EICAR-STANDARD-ANTIVIRUS-TEST-FILE" in data and scans <= honest_scans
        answer = b"fd[9]: Fake.EICAR FOUND\\0" if infected else b"fd[9]: OK\\0"
        connection.sendall(answer)
    connection.close()
"""


def fake_clamd(tmp_path: Path, honest_scans: int, extra: str = "") -> str:
    program = tmp_path / "fake-clamd"
    program.write_text(
        FAKE_CLAMD.format(python=sys.executable, honest_scans=honest_scans, extra=extra)
    )
    program.chmod(0o755)
    return str(program)


def test_a_clamd_that_answers_ok_to_everything_is_never_trusted(
    database: Path, tmp_path: Path
) -> None:
    # Given a "clamd" that answers OK to everything from its first scan (taken over, or broken)
    liar = ClamdDaemon(fake_clamd(tmp_path, honest_scans=0), run_dir=tmp_path / "run")
    before = clamd_children()
    # Then it is refused at its start: it misses the EICAR canary, and is stopped
    with pytest.raises(CanaryMissedError, match="did not find the EICAR canary"):
        liar.ensure(database)
    assert liar.pid is None and clamd_children() == before
    # and a scan through it is an engine error (retried), never a clean verdict
    (tmp_path / "clean.txt").write_bytes(b"nothing to see\n")
    result = ClamdScanner(liar, database).scan(tmp_path / "clean.txt")
    assert result.verdict is Verdict.ERROR and "EICAR canary" in result.errors[0]


def test_a_clamd_that_turns_to_answering_ok_is_caught_at_its_first_false_clean(
    database: Path, tmp_path: Path
) -> None:
    # Given a "clamd" honest for its first 3 scans (the start's canary, one upload, a canary),
    # then answering OK to everything
    (tmp_path / "clean.txt").write_bytes(b"nothing to see\n")
    (tmp_path / "eicar.com").write_bytes(EICAR)
    turncoat = ClamdDaemon(fake_clamd(tmp_path, honest_scans=3), run_dir=tmp_path / "run")
    try:
        scanner = ClamdScanner(turncoat, database)
        # its clean answer is vouched for by the canary found right after it
        assert scanner.scan(tmp_path / "clean.txt").verdict is Verdict.CLEAN
        first = turncoat.pid
        # When it turns, its next OK (to EICAR itself) is not believed: the canary it misses
        # right after makes the scan an engine error, and that process is stopped
        turned = scanner.scan(tmp_path / "eicar.com")
        assert turned.verdict is Verdict.ERROR and "missed the EICAR canary" in turned.errors[0]
        assert turncoat.pid is None and first is not None and not running(first)
    finally:
        turncoat.stop()


def test_clamd_runs_confined_alone_in_its_session(database: Path, tmp_path: Path) -> None:
    confined = ClamdDaemon(CLAMD, run_dir=tmp_path / "run")
    try:
        pid = confined.ensure(database).pid
        status = dict(
            line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        # a seccomp filter (mode 2) it cannot shed (no_new_privs), and a session it leads
        assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1"
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid
    finally:
        confined.stop()


def test_a_clamd_can_open_no_network_socket_and_leaves_no_process_behind(
    database: Path, tmp_path: Path
) -> None:
    # Given a "clamd" that tries to reach the network and to leave a process behind it
    report = tmp_path / "report.txt"
    extra = textwrap.dedent(
        f"""
        import errno, signal, time
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9001))
            said = "connected"
        except OSError as error:
            said = errno.errorcode.get(error.errno, str(error.errno))
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open({str(report)!r}, "w").write(said + " " + str(os.getpid()))
            while True:
                time.sleep(1)
        """
    )
    hostile = ClamdDaemon(fake_clamd(tmp_path, 100, extra), run_dir=tmp_path / "run")
    hostile.ensure(database)
    deadline = time.monotonic() + 5
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    said, child = report.read_text().split()
    # Then its TCP socket was refused by the filter
    assert said == "EACCES"
    assert running(int(child))
    # And when it stops, what it forked goes with it
    hostile.stop()
    deadline = time.monotonic() + 5
    while running(int(child)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not running(int(child))


def test_password_protected_content_is_a_refusal_with_its_reason_never_clean(
    scanner: ClamdScanner, tmp_path: Path
) -> None:
    # Given a real encrypted PDF (readers open it with its password only) and ZipCrypto zip
    uploads = {
        "statement.pdf": (encrypted_pdf(b"hello", b"secret"), "Heuristics.Encrypted.PDF"),
        "payroll.zip": (encrypted_zip(tmp_path, "eicar.com", EICAR), "Heuristics.Encrypted.Zip"),
    }
    for name, (body, alert) in uploads.items():
        if body is None:
            continue  # zip is not installed
        (tmp_path / name).write_bytes(body)
        result = scanner.scan(tmp_path / name)
        # Then clamd cannot vouch for them: a refusal naming why, neither clean nor a detection
        assert result.refusals == [f"encrypted, its content cannot be scanned: {alert}"], name
        assert result.verdict is Verdict.ERROR and not result.infected and not result.errors
    # While a PDF encrypted only against editing (no password to open) is read and passes
    (tmp_path / "open.pdf").write_bytes(encrypted_pdf(b"hello", b""))
    assert scanner.scan(tmp_path / "open.pdf").verdict is Verdict.CLEAN
