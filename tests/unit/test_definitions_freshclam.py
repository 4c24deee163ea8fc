"""Specification: how the updater drives freshclam (processors/scan/freshclam.py): the config it
writes for each kind of mirror, what it makes of freshclam's output, and CVD headers.

The outputs below are freshclam 1.4.6's own (`--stdout`), recorded against local/mirror.py; the
integration tests run the real freshclam against it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from filejobs.domain.definitions import Source
from filejobs.processors.scan.freshclam import (
    CvdHeaderError,
    Freshclam,
    FreshclamStatus,
    MirrorSettings,
    SettingsError,
    classify,
    parse_cvd_header,
    program_environment,
    read_cvd_header,
    render_config,
)

DATADIR = Path("/tmp/filejobs-definitions-x/freshclam")


def directives(config: str) -> list[str]:
    return [line for line in config.splitlines() if line and not line.startswith("#")]


def test_the_official_mirror_with_every_official_database() -> None:
    config = directives(render_config(MirrorSettings(), DATADIR, "sbx_user1051"))
    assert config[:2] == [f"DatabaseDirectory {DATADIR}", "DatabaseOwner sbx_user1051"]
    assert "DatabaseMirror database.clamav.net" in config
    assert "Bytecode yes" in config
    assert not [line for line in config if line.startswith(("ExcludeDatabase", "PrivateMirror"))]
    # one run, in the foreground, no log file, no syslog, no clamd to tell, loads tested
    assert {"Foreground yes", "LogSyslog no", "TestDatabases yes", "ScriptedUpdates yes"} <= set(
        config
    )
    assert {"ConnectTimeout 30", "ReceiveTimeout 300", "Checks 12"} <= set(config)
    assert not [line for line in config if line.startswith(("UpdateLogFile", "NotifyClamd"))]


def test_a_private_mirror_with_some_official_databases_and_custom_urls() -> None:
    settings = MirrorSettings.parse(
        "https://clamav-mirror.example.com",
        " daily, main ,daily",
        "https://rules.example.com/house.ndb,https://rules.example.com/phish.ldb",
    )
    config = directives(render_config(settings, DATADIR, None))
    assert "PrivateMirror https://clamav-mirror.example.com" in config
    assert not [line for line in config if line.startswith(("DatabaseMirror", "DatabaseOwner"))]
    assert [line for line in config if line.startswith("ExcludeDatabase")] == [
        "ExcludeDatabase bytecode"
    ]
    assert "Bytecode no" in config
    assert [line for line in config if line.startswith("DatabaseCustomURL")] == [
        "DatabaseCustomURL https://rules.example.com/house.ndb",
        "DatabaseCustomURL https://rules.example.com/phish.ldb",
    ]
    assert settings.official_databases == ("daily", "main")


def test_a_mirror_of_custom_databases_only() -> None:
    # what the local stack runs: its mirror on 127.0.0.1, OfficialDatabases empty
    settings = MirrorSettings.parse(
        "http://127.0.0.1:8765", "", "http://127.0.0.1:8765/filejobs.hdb", loopback_http=True
    )
    config = directives(render_config(settings, DATADIR, "root"))
    assert [line for line in config if line.startswith("ExcludeDatabase")] == [
        "ExcludeDatabase main",
        "ExcludeDatabase daily",
        "ExcludeDatabase bytecode",
    ]
    assert {"Bytecode no", "PrivateMirror http://127.0.0.1:8765", "DatabaseOwner root"} <= set(
        config
    )
    assert "DatabaseCustomURL http://127.0.0.1:8765/filejobs.hdb" in config


def test_where_each_database_came_from_follows_the_settings() -> None:
    settings = MirrorSettings.parse("", "main,daily", "https://x.example/house.ndb")
    assert settings.source_of("daily.cld") is Source.OFFICIAL
    assert settings.source_of("main.cvd") is Source.OFFICIAL
    assert settings.source_of("bytecode.cvd") is None  # not asked for
    assert settings.source_of("house.ndb") is Source.CUSTOM_URL
    assert settings.source_of("freshclam.dat") is None


@pytest.mark.parametrize(
    ("mirror", "official", "custom", "complaint"),
    [
        ("", "main,weekly", "", "unknown official databases: weekly"),
        ("mirror.example.com\nDatabaseOwner root", "", "", "must be a URL or host name"),
        ("ftp://mirror.example.com", "", "", "must be https://"),
        ("http://mirror.example.com", "", "", "must be https://"),
        ("mirror.example.com", "", "", "must be an https:// URL"),
        ("", "", "https://x.example/house.txt", "does not name a ClamAV database"),
        ("", "", "https://x.example/rules.yar", "does not name a ClamAV database"),
        ("", "", "gopher://x.example/house.ndb", "must be https://"),
        ("", "", "http://x.example/house.ndb", "must be https://"),
        ("", "", "file:///tmp/house.ndb", "must be https://"),
        # loopback http is the local stack's alone (MirrorSettings.loopback_http)
        ("http://127.0.0.1:8765", "", "", "(http://127.0.0.1 only in the local stack)"),
        ("", "", "http://localhost:8765/a.ndb", "(http://127.0.0.1 only in the local stack)"),
        # a custom source adds detections, never takes one away nor reconfigures the engine
        ("", "", "https://x.example/house.ign2", "house.ign2 is a .ign2 file, which turns"),
        ("", "", "https://x.example/house.fp", "a custom source may add detections only"),
        ("", "", "https://x.example/house.cfg", "a custom source may add detections only"),
        ("", "", "https://x.example/house.cud", "house.cud is a database container"),
        ("", "", "https://x.example/daily.cvd", "is named as an official database"),
        ("", "", "https://a.example/x.ndb,https://b.example/x.ndb", "end in the same name: x.ndb"),
        ("", "", "https://x.example/a b.ndb", "spaces or control characters"),
        ("", "", "https://x.example/%7Ehouse.ndb", "does not end in a plain file name"),
    ],
)
def test_settings_freshclam_cannot_be_given_are_refused(
    mirror: str, official: str, custom: str, complaint: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        MirrorSettings.parse(mirror, official, custom)
    assert complaint in str(refused.value)


def test_freshclam_runs_without_credentials_with_its_own_libraries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = tmp_path / "opt" / "clamav"
    (layer / "lib").mkdir(parents=True)
    (layer / "bin").mkdir()
    bundle = tmp_path / "ca.pem"
    bundle.write_text("certificates")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "role-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "role-token")
    monkeypatch.setenv("CURL_CA_BUNDLE", str(bundle))
    home = tmp_path / "home"
    environment = program_environment(str(layer / "bin" / "freshclam"), home)
    assert set(environment) == {"PATH", "HOME", "TMPDIR", "TZ", "CURL_CA_BUNDLE", "LD_LIBRARY_PATH"}
    assert environment["LD_LIBRARY_PATH"] == str(layer / "lib")
    assert (environment["HOME"], environment["TMPDIR"], environment["TZ"]) == (
        str(home),
        str(home),
        "UTC",
    )
    # a program found on PATH gets no library path; a CA bundle that is not there is not passed
    monkeypatch.setenv("CURL_CA_BUNDLE", "/etc/pki/tls/certs/ca-bundle.crt-missing")
    assert set(program_environment("freshclam", home)) == {"PATH", "HOME", "TMPDIR", "TZ"}


# --- what freshclam printed ----------------------------------------------------------------------

UPDATED = """\
ClamAV update process started at Tue Dec  1 19:14:29 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
Testing database: '/tmp/fx/db/tmp.bcf834cddc/clamav-749d.tmp-filejobs-local.hdb' ...
Database test passed.
filejobs-local.hdb updated (version: custom database, sigs: 2)
filejobs-local.ndb is up-to-date (version: custom database)
"""
UP_TO_DATE = """\
ClamAV update process started at Tue Dec  1 19:14:31 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
filejobs-local.hdb is up-to-date (version: custom database)
filejobs-local.ndb is up-to-date (version: custom database)
"""
RATE_LIMITED = """\
ClamAV update process started at Tue Dec  1 19:14:35 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
WARNING: Can't download filejobs-local.hdb from http://127.0.0.1:8799/filejobs-local.hdb
WARNING: FreshClam received error code 429 from the ClamAV Content Delivery Network (CDN).
This means that you have been rate limited by the CDN.
 1. Run FreshClam no more than once an hour to check for updates.
WARNING: You are on cool-down until after: 2026-12-01 20:14:35
"""
BLOCKED = """\
ClamAV update process started at Tue Dec  1 19:19:54 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
WARNING: Can't download filejobs-local.hdb from http://127.0.0.1:8799/filejobs-local.hdb
WARNING: FreshClam received error code 403 from the ClamAV Content Delivery Network (CDN).
This could mean several things:
WARNING: You are on cool-down until after: 2026-12-02 19:19:54
WARNING: fc_download_url_databases: fc_download_url_database failed: Forbidden; Blocked by CDN (17)
ERROR: Database update process failed: Forbidden; Blocked by CDN
ERROR: Update failed.
"""
STILL_COOLING = """\
ClamAV update process started at Tue Dec  1 19:14:59 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
WARNING: FreshClam previously received error code 429 or 403 from the ClamAV Content Delivery Network (CDN).
WARNING: You are still on cool-down until after: 2026-12-01 23:14:46
filejobs-local.hdb is up-to-date (version: custom database)
"""  # noqa: E501 (freshclam's line as it prints it)
MALFORMED = """\
ClamAV update process started at Tue Dec  1 19:29:21 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
Testing database: '/tmp/fx/db/tmp.5bf3427185/clamav-4a75.tmp-filejobs-local.hdb' ...
WARNING: [LibClamAV] cli_loadhash: Problem parsing database at line 3
WARNING: [LibClamAV] Can't load /tmp/fx/db/tmp.5bf3427185/clamav-4a75.tmp-filejobs-local.hdb: Malformed database
ERROR: Failed to load new database: Malformed database
WARNING: Database load exited with "Test failed"
ERROR: Database test FAILED.
Unexpected error when attempting to update from custom database URL: http://127.0.0.1:8799/filejobs-local.hdb
WARNING: fc_download_url_databases: fc_download_url_database failed: Test failed (8)
ERROR: Database update process failed: Test failed
ERROR: Update failed.
"""  # noqa: E501
NOT_FOUND = """\
ClamAV update process started at Tue Dec  1 19:14:53 2026
WARNING: DNS Update Info disabled. Falling back to HTTP mode.
WARNING: downloadFile: file not found: http://127.0.0.1:8799/missing.ndb
ERROR: Can't download missing.ndb from http://127.0.0.1:8799/missing.ndb
Update failed for custom database URL: http://127.0.0.1:8799/missing.ndb
WARNING: fc_download_url_databases: fc_download_url_database failed: HTTP GET failed (11)
ERROR: Database update process failed: HTTP GET failed
ERROR: Update failed.
"""


def test_a_run_that_replaced_a_database_updated() -> None:
    result = classify(0, UPDATED)
    assert result.status is FreshclamStatus.UPDATED
    assert result.updated == ("filejobs-local.hdb",)
    assert result.reason == ""


def test_a_run_the_mirror_answered_304_to_is_up_to_date() -> None:
    result = classify(0, UP_TO_DATE)
    assert (result.status, result.updated) == (FreshclamStatus.UP_TO_DATE, ())


def test_a_429_is_a_refusal_although_freshclam_exits_0() -> None:
    result = classify(0, RATE_LIMITED)
    assert result.status is FreshclamStatus.REFUSED
    assert result.http_status == 429
    assert result.cool_down_until == datetime(2026, 12, 1, 20, 14, 35, tzinfo=UTC)
    assert result.reason == (
        "the mirror rate-limited us (429); cool-down until 2026-12-01T20:14:35Z"
    )


def test_a_403_is_a_refusal() -> None:
    result = classify(17, BLOCKED)
    assert (result.status, result.http_status) == (FreshclamStatus.REFUSED, 403)
    assert result.cool_down_until == datetime(2026, 12, 2, 19, 19, 54, tzinfo=UTC)
    assert "blocked us (403)" in result.reason


def test_freshclams_standing_cool_down_is_a_refusal_too() -> None:
    result = classify(0, STILL_COOLING)
    assert (result.status, result.http_status) == (FreshclamStatus.REFUSED, None)
    assert result.cool_down_until == datetime(2026, 12, 1, 23, 14, 46, tzinfo=UTC)
    assert "refused us before" in result.reason


def test_a_database_that_does_not_load_fails_naming_the_cause() -> None:
    result = classify(8, MALFORMED)
    assert result.status is FreshclamStatus.FAILED
    assert result.reason == (
        "freshclam failed (8): [LibClamAV] cli_loadhash: Problem parsing database at line 3"
        " | Failed to load new database: Malformed database"
        " | Database update process failed: Test failed"
    )


def test_a_missing_database_fails_naming_its_url() -> None:
    result = classify(11, NOT_FOUND)
    assert result.status is FreshclamStatus.FAILED
    assert result.reason == (
        "freshclam failed (11): downloadFile: file not found: http://127.0.0.1:8799/missing.ndb"
        " | Can't download missing.ndb from http://127.0.0.1:8799/missing.ndb"
        " | Database update process failed: HTTP GET failed"
    )


def test_a_failure_with_no_message_says_its_exit_status() -> None:
    assert classify(62, "").reason == "freshclam failed (62): exit status 62"


# --- CVD headers ---------------------------------------------------------------------------------


def cvd_header(fields: str) -> bytes:
    return fields.encode().ljust(512, b" ")


def test_a_cvd_header_gives_version_signatures_and_build_time() -> None:
    # daily.cvd as ClamAV publishes it: the build time string has '-' for ':'
    head = cvd_header(
        "ClamAV-VDB:01 Dec 2026 07-46 +0000:27460:2070000:90:"
        "0123456789abcdef0123456789abcdef:AbCdEf0123:raynman:1796111160"
    )
    header = parse_cvd_header(head + b"\x1f\x8b gzip body follows")
    assert (header.version, header.signatures, header.functionality_level) == (27460, 2070000, 90)
    assert header.builder == "raynman"
    assert header.build_time == datetime(2026, 12, 1, 7, 46, tzinfo=UTC)


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"\x1f\x8b not a header", "no ClamAV-VDB header"),
        (b"ClamAV-VDB:short", "a header of 16 bytes"),
        (cvd_header("ClamAV-VDB:01 Dec 2026:27460:2070000:90"), "a header of 5 fields"),
        (cvd_header("ClamAV-VDB:t:v27460:2070000:90:m:d:b:1796111160"), "unreadable numbers"),
        (cvd_header("ClamAV-VDB:t:27460:2070000:90:m:d:b:yesterday"), "unreadable numbers"),
    ],
)
def test_a_header_that_is_not_clamavs_is_refused(data: bytes, complaint: str) -> None:
    with pytest.raises(CvdHeaderError, match=complaint):
        parse_cvd_header(data)


def test_only_containers_have_headers(tmp_path: Path) -> None:
    daily = tmp_path / "daily.cld"
    daily.write_bytes(cvd_header("ClamAV-VDB:t:27461:2070001:90:m:d:b:1796111160") + b"body")
    hashes = tmp_path / "house.hdb"
    hashes.write_text("44d88612fea8a8f36de82e1278abb02f:68:Eicar\n")
    broken = tmp_path / "bytecode.cvd"
    broken.write_bytes(b"truncated")
    header = read_cvd_header(daily)
    assert header is not None and header.version == 27461
    assert read_cvd_header(hashes) is None
    with pytest.raises(CvdHeaderError, match=r"bytecode\.cvd: no ClamAV-VDB header"):
        read_cvd_header(broken)


def test_a_freshclam_that_is_not_there_fails_the_run_saying_so(tmp_path: Path) -> None:
    # the layer's path on a machine without the layer
    result = Freshclam("/opt/clamav/bin/freshclam-absent", MirrorSettings()).run(
        tmp_path / "db", tmp_path / "home"
    )
    assert result.status is FreshclamStatus.FAILED
    assert result.reason.startswith("freshclam could not run: [Errno 2]")


def test_a_freshclam_that_hangs_is_stopped(tmp_path: Path) -> None:
    hanging = tmp_path / "freshclam"
    # a child of its own holding the output open, as freshclam's database tests do
    hanging.write_text("#!/bin/sh\nsleep 30 &\nsleep 30\n")
    hanging.chmod(0o755)
    freshclam = Freshclam(str(hanging), MirrorSettings(), timeout_seconds=0.5)
    started = time.monotonic()
    result = freshclam.run(tmp_path / "db", tmp_path / "home")
    assert time.monotonic() - started < 10
    assert (result.status, result.reason) == (
        FreshclamStatus.FAILED,
        "freshclam timed out after 0.5 seconds",
    )
