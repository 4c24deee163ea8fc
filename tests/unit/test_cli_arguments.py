"""Specification: what the `filejobs` CLI accepts before it talks to any stack."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from filejobs_cli.client import UsageError, http_error
from filejobs_cli.commands import (
    file_summary,
    output_path,
    outputs_of,
    tenant_argument,
)
from filejobs_cli.main import main
from filejobs_cli.upload_keys import safe_name, upload_key

FILE_ID = "0c535fa5-a5ec-5dfe-88d6-630684923320"


@pytest.mark.parametrize("tenant", ["demo", "acme-2", "a", "0x"])
def test_a_tenant_is_lowercase_letters_digits_and_hyphens(tenant: str) -> None:
    assert tenant_argument(tenant) == tenant


@pytest.mark.parametrize("tenant", ["Acme", "-acme", "acme-", "a_b", "a/b", "", "x" * 64])
def test_other_tenants_are_refused(tenant: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        tenant_argument(tenant)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    # when the tenant is invalid, the id is no UUID, or a listing has no filter
    for argv in (
        ["upload", "x.png", "--tenant", "Bad"],
        ["status", "not-an-id"],
        ["jobs", "--limit", "0", "--tenant", "demo"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2, argv
    # then an operator listing with neither tenant nor status is refused before any request
    assert main(["jobs"]) == 2
    assert "give --tenant or --status" in capsys.readouterr().err


def test_an_upload_of_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["upload", str(tmp_path / "nope.png")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_an_upload_key_is_under_the_tenants_prefix() -> None:
    assert upload_key("demo", "", safe_name("photo.png")) == "uploads/demo/photo.png"
    assert upload_key("demo", "avatars/", safe_name("my photo.png")) == (
        "uploads/demo/avatars/my-photo.png"
    )
    with pytest.raises(UsageError, match="longer than S3"):
        upload_key("demo", "deep/" * 203, "photo.png")


def test_outputs_land_under_the_out_folder(tmp_path: Path) -> None:
    path = output_path(tmp_path, FILE_ID, "thumbnail_generation", "thumb-128.webp")
    assert path == tmp_path.resolve() / FILE_ID / "thumbnail_generation" / "thumb-128.webp"


@pytest.mark.parametrize(
    ("file_id", "job_type", "name"),
    [
        (FILE_ID, "thumbnail_generation", "../escape"),
        (FILE_ID, "thumbnail_generation", "a/b.webp"),
        (FILE_ID, "thumbnail_generation", ".hidden"),
        (FILE_ID, "../../etc", "x"),
        ("../x", "thumbnail_generation", "x"),
    ],
)
def test_names_that_would_escape_the_out_folder_are_refused(
    tmp_path: Path, file_id: str, job_type: str, name: str
) -> None:
    with pytest.raises(Exception, match="refusing"):
        output_path(tmp_path, file_id, job_type, name)


def test_get_takes_the_outputs_the_api_links_for_completed_jobs_only(tmp_path: Path) -> None:
    # given a file answer whose completed job links two outputs and whose failed job links one
    url = "https://outputs.example/derived/demo/x?X-Amz-Signature=abc"
    stored: dict[str, Any] = {
        "id": FILE_ID,
        "jobs": [
            {"job_type": "thumbnail_generation", "status": "completed", "outputs": [
                {"name": "thumb-128.webp", "url": url}, {"name": "thumb-256.webp", "url": url},
            ]},
            {"job_type": "compression", "status": "failed", "outputs": [{"name": "x", "url": url}]},
        ],
    }  # fmt: skip
    # then each completed output goes to OUT/FILE_ID/JOB_TYPE/NAME, through the API's URL
    found = outputs_of(stored, tmp_path)
    assert [(o.job_type, o.name, o.url) for o in found] == [
        ("thumbnail_generation", "thumb-128.webp", url),
        ("thumbnail_generation", "thumb-256.webp", url),
    ]
    assert found[0].path == tmp_path.resolve() / FILE_ID / "thumbnail_generation" / "thumb-128.webp"
    # and an output name that would escape the folder is refused
    escaping = {
        **stored,
        "jobs": [{**stored["jobs"][0], "outputs": [{"name": "../x", "url": url}]}],
    }
    with pytest.raises(Exception, match="refusing"):
        outputs_of(escaping, tmp_path)


def test_an_http_error_says_the_apis_message() -> None:
    error = http_error(409, b'{"error": {"code": "conflict", "message": "it is completed"}}')
    assert (error.status, error.code, error.message) == (409, "conflict", "it is completed")
    assert http_error(502, b"<html>").message == "the API answered HTTP 502"
    assert http_error(403, b'{"message": "Forbidden"}').message.endswith(": Forbidden")


def test_a_files_summary_says_when_and_with_what_its_verdict_was_given() -> None:
    stored = {
        "id": "f", "bucket": "b", "key": "uploads/acme/x.exe", "tenant": "acme", "size": 68,
        "content_type": "text/plain", "status": "quarantined", "status_reason": "Eicar",
        "scan_status": "infected", "jobs": [],
        "scan": {
            "verdict": "infected", "scanned_at": "2026-12-01T08:00:00+00:00", "job_id": "j",
            "engines": {"clamav": "ClamAV 1.4.6", "yara": "4.5.4"},
            "definitions_version": "20261201T070000Z", "signatures": ["Eicar"], "reason": None,
        },
    }  # fmt: skip
    [scan_line] = [line for line in file_summary(stored) if line.strip().startswith("scan:")]
    assert scan_line == (
        "  scan:     infected (2026-12-01T08:00:00+00:00, definitions 20261201T070000Z,"
        " clamav ClamAV 1.4.6, yara 4.5.4: Eicar)"
    )
    # and a file from before verdicts were recorded shows its status alone
    older = {**stored, "scan": None}
    assert "  scan:     infected" in file_summary(older)


def test_a_files_summary_lists_its_bundle_a_line_each() -> None:
    stored = {
        "id": "f", "bucket": "b", "key": "uploads/acme/report.pdf", "tenant": "acme",
        "size": 9000, "content_type": "application/pdf", "status": "active",
        "scan_status": "clean", "jobs": [],
        "outputs": [
            {"kind": "page", "page": 2, "format": "webp", "width": 1024, "height": 1325,
             "bytes": 51204, "name": "preview-page2.webp", "start_seconds": None},
            {"kind": "animation", "page": None, "format": "webp", "width": 320, "height": 180,
             "bytes": 90210, "start_seconds": 2.0, "end_seconds": 5.0,
             "key": "derived/acme/f/video_thumbnail/animation.webp"},
            {"kind": "storyboard_index", "format": "vtt", "bytes": 1299, "name": "storyboard.vtt"},
        ],
    }  # fmt: skip
    lines = file_summary(stored)
    assert lines[lines.index("  outputs (3; `filejobs get` downloads them):") + 1 :] == [
        "    page 2             webp  1024x1325     51,204 B  preview-page2.webp",
        "    animation 2-5 s    webp  320x180       90,210 B  animation.webp",
        "    storyboard_index   vtt                  1,299 B  storyboard.vtt",
    ]
