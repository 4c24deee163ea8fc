"""`filejobs presets`: what each command sends, checked before any request, and how a preset
reads in a terminal."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from filejobs_cli import presets


def parse(*arguments: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    presets.register(commands, lambda: Path("."))
    return parser.parse_args(["presets", *arguments])


def test_set_sends_each_job_with_its_options_and_priority_and_the_bindings() -> None:
    arguments = parse(
        "set", "avatars", "--job", "virus_scan",
        "--job", "thumbnail_generation sizes=256,512 format=webp priority=5",
        "--prefix", "uploads/acme/avatars/", "--prefix", "uploads/acme/team/",
        "--description", "profile pictures",
    )  # fmt: skip
    assert presets.body_of(arguments) == {
        "jobs": [
            {"job_type": "virus_scan"},
            {
                "job_type": "thumbnail_generation",
                "options": {"sizes": [256, 512], "format": "webp"},
                "priority": 5,
            },
        ],
        "prefixes": ["uploads/acme/avatars/", "uploads/acme/team/"],
        "tenant_default": False,
        "description": "profile pictures",
    }


def test_scan_only_and_store_only_are_spelled_out() -> None:
    scan = parse("set", "quick", "--scan-only", "--tenant-default")
    assert presets.body_of(scan)["jobs"] == [{"job_type": "virus_scan"}]
    assert presets.body_of(scan)["tenant_default"] is True
    store = parse("set", "archive", "--store-only", "--prefix", "uploads/acme/archive/")
    assert presets.body_of(store)["jobs"] == []


@pytest.mark.parametrize(
    "arguments",
    [
        ("set", "Avatars", "--scan-only"),  # upper case: not a preset name
        ("set", "avatars"),  # neither jobs nor scan/store only
        ("set", "avatars", "--scan-only", "--store-only"),
        ("set", "avatars", "--job", "sizes=64"),  # no job type first
        ("set", "avatars", "--job", "thumbnail_generation sizes"),  # not NAME=VALUE
    ],
)
def test_malformed_commands_are_refused_before_any_request(arguments: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit):
        parse(*arguments)


def test_a_preset_reads_as_what_it_runs_and_where() -> None:
    shown = {
        "tenant": "acme",
        "name": "avatars",
        "version": 3,
        "jobs": [
            {"job_type": "virus_scan", "options": {}, "priority": 0},
            {"job_type": "thumbnail_generation", "options": {"sizes": [512]}, "priority": 5},
        ],
        "prefixes": ["uploads/acme/avatars/"],
        "tenant_default": False,
        "description": "",
        "updated_at": "2026-12-04T12:00:00+00:00",
        "updated_by": "api:tenant:acme",
    }
    assert presets.summary_line(shown) == (
        "avatars v3  acme: virus_scan, thumbnail_generation on uploads/acme/avatars/"
    )
    assert '  job:      thumbnail_generation {"sizes": [512]} priority 5' in presets.details(shown)
    store_only = {**shown, "jobs": [], "prefixes": []}
    assert presets.summary_line(store_only).endswith(
        "nothing (store only) on uploads naming it (x-amz-meta-filejobs-preset: avatars)"
    )
