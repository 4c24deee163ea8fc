"""`filejobs schedules`: what each command sends, checked before any request."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from filejobs_cli import schedules
from filejobs_cli.client import UsageError


def parse(*arguments: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    schedules.register(commands, lambda: Path("."))
    return parser.parse_args(["schedules", *arguments])


def test_add_with_run_sends_the_job_type_and_its_options() -> None:
    arguments = parse(
        "add", "avatars nightly", "--cron", "cron(0 3 * * ? *)", "--timezone", "Europe/Paris",
        "--prefix", "uploads/acme/avatars/", "--run", "thumbnail_generation",
        "--option", "sizes=64,256", "--option", "format=jpeg",
    )  # fmt: skip
    schedules.check_add(arguments)
    assert schedules.body_of(arguments) == {
        "name": "avatars nightly",
        "expression": "cron(0 3 * * ? *)",
        "timezone": "Europe/Paris",
        "prefix": "uploads/acme/avatars/",
        "action": "run",
        "job_type": "thumbnail_generation",
        "input_data": {"sizes": [64, 256], "format": "jpeg"},
    }
    assert callable(arguments.run)  # the command itself, not shadowed by --run


def test_add_with_rescan_sends_no_job_type_and_an_operator_names_the_tenant() -> None:
    arguments = parse(
        "add", "monthly", "--cron", "cron(0 2 1 * ? *)", "--prefix", "uploads/acme/contracts/",
        "--rescan", "--tenant", "acme",
    )  # fmt: skip
    assert schedules.body_of(arguments) == {
        "name": "monthly",
        "expression": "cron(0 2 1 * ? *)",
        "timezone": "UTC",
        "prefix": "uploads/acme/contracts/",
        "action": "rescan",
        "tenant": "acme",
    }


def test_options_without_a_job_and_malformed_ids_are_refused_before_any_request() -> None:
    arguments = parse(
        "add", "x", "--cron", "cron(0 2 1 * ? *)", "--prefix", "uploads/acme/", "--rescan",
        "--option", "sizes=64",
    )  # fmt: skip
    with pytest.raises(UsageError, match="--option goes with --run"):
        schedules.check_add(arguments)
    with pytest.raises(SystemExit):
        parse("show", "not-an-id")
    with pytest.raises(SystemExit):
        parse("add", "x", "--cron", "c", "--prefix", "p", "--rescan", "--run", "compression")


def test_a_schedule_is_shown_with_its_next_runs_and_last_operation() -> None:
    shown = {
        "id": "sch-0123456789abcdef", "tenant": "acme", "name": "nightly",
        "expression": "cron(0 3 * * ? *)", "timezone": "UTC", "action": "run",
        "job_type": "thumbnail_generation", "prefix": "uploads/acme/", "enabled": False,
        "input_data": {"sizes": [64]}, "next_runs": [], "runs": 2,
        "last_run_at": "2026-12-04T03:00:00+00:00", "last_operation_id": "op-1",
    }  # fmt: skip
    lines = schedules.details(shown)
    assert lines[0] == "schedule sch-0123456789abcdef ('nightly', tenant acme)"
    assert "  when:      cron(0 3 * * ? *) in UTC (paused)" in lines
    assert '  options:   {"sizes": [64]}' in lines
    assert lines[-1] == "  last run:  2026-12-04T03:00:00+00:00 (operation op-1)"
    assert schedules.summary_line(shown).endswith("(paused)")
