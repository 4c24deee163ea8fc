"""Specification: `filejobs quotas show|set` on a running local stack, and the stack holding a
tenant's uploads to the quota set so: the upload past it is recorded rejected, with the reason,
and gets no jobs. The CLI runs as a user runs it and is judged by its output and exit status.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.localstack import RunningStack, running_stack

TENANT = "cli-quota"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


def cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", *arguments],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_an_operator_sets_a_tenants_quota_and_shows_it(stack: RunningStack) -> None:
    # when the operator (the local stack's own token) sets two of a tenant's quotas
    done = cli(
        "quotas", "set", TENANT, "--files-per-day", "1", "--max-file-bytes", "0", cwd=stack.root
    )
    # then the CLI prints them in force, beside the defaults
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:]}
    assert lines["files_per_day"] == ["1", "10000", "1"]
    assert lines["max_file_bytes"] == ["unlimited", "1073741824", "unlimited"]
    assert lines["bytes_per_day"] == ["10737418240", "10737418240", "-"]
    # and show --json gives the API's answer
    shown = cli("quotas", "show", TENANT, "--json", cwd=stack.root)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["overrides"] == {"files_per_day": 1, "max_file_bytes": 0}


def test_set_without_a_quota_or_with_a_negative_one_is_a_usage_error(stack: RunningStack) -> None:
    nothing = cli("quotas", "set", TENANT, cwd=stack.root)
    negative = cli("quotas", "set", TENANT, "--files-per-day", "-1", cwd=stack.root)

    assert nothing.returncode == 2 and "give at least one of --files-per-day" in nothing.stderr
    assert negative.returncode == 2 and "expected a whole number" in negative.stderr


def test_the_upload_past_the_tenants_quota_is_rejected_with_the_reason(
    stack: RunningStack, tmp_path: Path
) -> None:
    # given the tenant may have one upload a day (the first test set it), and two text files
    assert cli("quotas", "set", TENANT, "--files-per-day", "1", cwd=stack.root).returncode == 0
    paths = []
    for name in ("q1.txt", "q2.txt"):
        (tmp_path / name).write_text(f"{name}\n")
        paths.append(str(tmp_path / name))
    # when both are uploaded
    done = cli("upload", *paths, "--tenant", TENANT, "--no-follow", cwd=stack.root)
    assert done.returncode == 0, done.stderr
    # then one is processed and the other is recorded rejected, with the reason and no jobs
    stored = [recorded(stack, f"uploads/{TENANT}/{name}") for name in ("q1.txt", "q2.txt")]
    assert sorted(s["status"] for s in stored) == ["active", "rejected"]
    refused = next(s for s in stored if s["status"] == "rejected")
    assert refused["jobs"] == []
    assert refused["status_reason"].startswith(
        f"tenant {TENANT} is over its 1 files per day quota (1 used on "
    )
    # and the tenant reads its day's usage
    shown = cli("quotas", "show", TENANT, "--json", cwd=stack.root)
    assert json.loads(shown.stdout)["usage"]["files"] == 1


def recorded(stack: RunningStack, key: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stored = stack.file_at(key)
        if stored is not None:
            return stored
        time.sleep(0.5)
    raise AssertionError(f"{key} was never recorded")
