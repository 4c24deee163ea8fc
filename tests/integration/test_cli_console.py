"""Specification: the console's powers on the command line (`filejobs search`, `filejobs bulk`)
against a running local stack: jobs that really failed are found by search, dry-run retried by
their failure group (a count, nothing changed), then retried (followed to the operation's end,
the jobs run again), and recorded in the audit list.

One local stack (`filejobs dev`) serves the whole module; the CLI runs as a user runs it, as a
process in the stack's project (stdin not a terminal), judged by its output and exit status.
`filejobs failures` is not run here: GET /failures is not in this stack's API yet
(tests/unit/test_cli_console.py renders its documented answer).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.failures import group_of
from filejobs.domain.job import JobType
from tests.localstack import TERMINAL, RunningStack, running_stack

TENANT = "console-test"
BROKEN = 3
FILE_LINE = re.compile(r"^(?P<path>.+): file (?P<id>[0-9a-f-]{36})$", re.MULTILINE)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # Nothing here waits on the sweep or another schedule: they keep the template's rates.
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


def cli(*arguments: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", *arguments],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@dataclass(frozen=True)
class Broken:
    """The thumbnails of files named .png whose bytes are no image: failed for good."""

    jobs: list[dict[str, Any]]
    group: str

    @property
    def ids(self) -> set[str]:
        return {j["id"] for j in self.jobs}


@pytest.fixture(scope="module")
def broken(stack: RunningStack, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    # given PNGs by their signature (so ingest plans a thumbnail) whose bytes after it are noise;
    # the noise starts with a zero chunk header: random bytes there read as a chunk named in
    # letters about once in 300 files, a "Truncated File Read" of another error group
    folder = tmp_path_factory.mktemp("broken")
    paths = []
    for n in range(BROKEN):
        path = folder / f"broken-{n}.png"
        path.write_bytes(PNG_SIGNATURE + bytes(8) + os.urandom(2048))  # each its own: no duplicates
        paths.append(str(path))
    uploaded = cli(
        "upload", *paths, "--tenant", TENANT, "--timeout", "150", cwd=stack.root, timeout=180
    )
    assert uploaded.returncode == 0, uploaded.stdout + uploaded.stderr
    file_ids = [m["id"] for m in FILE_LINE.finditer(uploaded.stdout)]
    assert len(file_ids) == BROKEN, uploaded.stdout
    jobs = [thumbnail_of(stack, file_id) for file_id in file_ids]
    # then each file's thumbnail failed at its first attempt, for good, the same way
    assert [(j["status"], len(j["attempts"])) for j in jobs] == [("failed", 1)] * BROKEN, jobs
    groups = {group_of(JobType.THUMBNAIL_GENERATION, j["error_message"]).id for j in jobs}
    assert len(groups) == 1, [j["error_message"] for j in jobs]
    return Broken(jobs, groups.pop())


def thumbnail_of(stack: RunningStack, file_id: str) -> dict[str, Any]:
    status, stored = stack.api(f"/files/{file_id}")
    assert status == 200, stored
    return next(j for j in stored["jobs"] if j["job_type"] == "thumbnail_generation")


def job(stack: RunningStack, job_id: str) -> dict[str, Any]:
    status, found = stack.api(f"/jobs/{job_id}")
    assert status == 200, found
    return dict(found)


def test_search_finds_the_failed_thumbnails(stack: RunningStack, broken: Broken) -> None:
    # when the failed thumbnails are searched
    found = cli("search", "--status", "failed", "--type", "thumbnail_generation", cwd=stack.root)
    # then they are a table: one line each, with the tenant, type, status, attempts and error
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0].split() == ["ID", "TENANT", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "ERROR"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == broken.ids
    for row in rows.values():
        assert row[1:5] == [TENANT, "thumbnail_generation", "failed", "1"]
    assert all("not an image" in line for line in lines[1:])
    # and by the failure group and error text as well, and by the files' key prefix
    by_group = cli("search", "--group", broken.group, "--error", "not an image", cwd=stack.root)
    assert {line.split()[0] for line in by_group.stdout.splitlines()[1:]} == broken.ids
    files = cli(
        "search", "--tenant", TENANT, "--prefix", f"uploads/{TENANT}/broken-", cwd=stack.root
    )
    assert files.returncode == 0, files.stderr
    keys = [line.split()[1] for line in files.stdout.splitlines()[1:]]
    assert keys == [f"uploads/{TENANT}/broken-{n}.png" for n in range(BROKEN)]


def test_a_dry_run_of_a_groups_retry_counts_and_changes_nothing(
    stack: RunningStack, broken: Broken
) -> None:
    # when the group's retry is dry-run
    dry = cli(
        "bulk", "retry", "--group", broken.group, "--reason", "dry run first", "--dry-run",
        cwd=stack.root,
    )  # fmt: skip
    # then it prints the count and sample ids of the group's jobs
    assert dry.returncode == 0, dry.stdout + dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == f"would retry {BROKEN} jobs (group={broken.group})"
    assert {line.split()[1] for line in lines[1:]} == broken.ids
    # and nothing changed: the jobs are failed still, and no operation was recorded
    assert {job(stack, job_id)["status"] for job_id in broken.ids} == {"failed"}
    listed = cli("bulk", "list", cwd=stack.root)
    assert listed.returncode == 0 and listed.stdout.strip() == "no operations", listed.stdout


def test_a_bulk_retry_without_a_reason_or_confirmation_is_a_usage_error(
    stack: RunningStack, broken: Broken
) -> None:
    # when the reason is left out
    no_reason = cli("bulk", "retry", "--group", broken.group, cwd=stack.root)
    # then argparse says it is required, exit 2
    assert no_reason.returncode == 2
    assert "the following arguments are required: --reason" in no_reason.stderr
    # and without a terminal to confirm on, or --yes, it is refused before anything is asked
    unconfirmed = cli("bulk", "retry", "--group", broken.group, "--reason", "r", cwd=stack.root)
    assert unconfirmed.returncode == 2
    assert "give --yes to start it, or --dry-run" in unconfirmed.stderr
    assert unconfirmed.stdout == ""
    assert "Traceback" not in no_reason.stderr + unconfirmed.stderr
    assert {job(stack, job_id)["status"] for job_id in broken.ids} == {"failed"}


def test_a_groups_retry_with_yes_runs_to_success_and_the_jobs_run_again(
    stack: RunningStack, broken: Broken
) -> None:
    # when the group is retried with --yes
    done = cli(
        "bulk", "retry", "--group", broken.group, "--reason", "decoder fixed", "--yes",
        cwd=stack.root, timeout=180,
    )  # fmt: skip
    # then it dry-ran, printed its key, started and followed the operation to success
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith(f"would retry {BROKEN} jobs (group={broken.group})\n")
    assert re.search(r"^Idempotency-Key: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-", out, re.M)
    started = re.search(r"^operation (?P<id>op-\S+) started$", out, re.MULTILINE)
    assert started is not None, out
    operation_id = started["id"]
    progress = [line for line in out.splitlines() if line.startswith(f"{operation_id}: ")]
    assert progress[-1] == (
        f"{operation_id}: succeeded, {BROKEN}/{BROKEN} processed, {BROKEN} changed, "
        "0 skipped, 0 errors"
    )
    assert len(progress) == len(set(progress))  # a line a change, not a poll
    assert "\x1b[" not in out
    # and every job of the group ran again (its bytes are still no image: failed again)
    again = settled_again(stack, broken.ids)
    assert {j["status"] for j in again} <= TERMINAL
    assert all(len(j["attempts"]) == 2 for j in again), again
    # and the audit list and the operation's status show who, why and how far
    listed = cli("bulk", "list", cwd=stack.root)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(operation_id))
    cells = row.split()
    assert cells[1:3] == ["retry", "api:operator"]
    assert cells[5:7] == ["succeeded", f"{BROKEN}/{BROKEN}"]
    assert f"group={broken.group}" in row and row.endswith("decoder fixed")
    shown = cli("bulk", "status", operation_id, cwd=stack.root)
    assert shown.returncode == 0, shown.stderr
    assert "  status:   succeeded (finished " in shown.stdout
    assert "  reason:   decoder fixed" in shown.stdout
    assert f"  progress: {BROKEN}/{BROKEN} processed, {BROKEN} changed" in shown.stdout


def settled_again(
    stack: RunningStack, job_ids: set[str], seconds: float = 120
) -> list[dict[str, Any]]:
    """The jobs once each has run a second time and ended."""
    deadline = time.monotonic() + seconds
    while True:
        jobs = [job(stack, job_id) for job_id in sorted(job_ids)]
        if all(j["status"] in TERMINAL and len(j["attempts"]) >= 2 for j in jobs):
            return jobs
        if time.monotonic() >= deadline:
            raise AssertionError(f"the retried jobs did not run again: {jobs}")
        time.sleep(0.5)
