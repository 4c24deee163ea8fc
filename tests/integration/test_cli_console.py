"""Specification: `filejobs search`, `filejobs bulk` and `filejobs failures` on a running stack:
the console's powers from the command line (docs/CONSOLE.md). The CLI runs as a user runs it,
as a process in the stack's project, judged by its output and exit status.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from filejobs.domain.failures import group_of
from filejobs.domain.job import JobType
from tests.integration.test_cli import cli
from tests.localstack import RunningStack, running_stack

TENANT = "cli-bulk"
# A PNG signature over bytes no decoder reads: sniffed as an image, refused by the thumbnailer.
CORRUPT_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"not an image at all " * 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


@pytest.fixture(scope="module")
def failed_thumbnails(
    stack: RunningStack, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("corrupt")
    paths = []
    for n in range(3):
        path = folder / f"broken-{n}.png"
        path.write_bytes(CORRUPT_PNG)
        paths.append(str(path))
    uploaded = cli(
        "upload", *paths, "--tenant", TENANT, "--timeout", "150", cwd=stack.root, timeout=180
    )
    assert uploaded.returncode in (0, 1), uploaded.stderr
    found = cli(
        "search", "--tenant", TENANT, "--status", "failed", "--type", "thumbnail_generation",
        "--json", cwd=stack.root,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    jobs: list[dict[str, Any]] = json.loads(found.stdout)["jobs"]
    return jobs


def group_id(jobs: list[dict[str, Any]]) -> str:
    groups = {group_of(JobType(j["job_type"]), j["error_message"]).id for j in jobs}
    assert len(groups) == 1, groups
    return groups.pop()


def test_search_finds_the_failed_thumbnails_as_a_table_and_as_json(
    stack: RunningStack, failed_thumbnails: list[dict[str, Any]]
) -> None:
    # given three corrupt PNGs whose thumbnails failed for good
    assert len(failed_thumbnails) == 3
    # when they are searched for by the error text, as a table
    table = cli("search", "--tenant", TENANT, "--error", "image", cwd=stack.root)
    # then each is a row with its id and status
    assert table.returncode == 0, table.stderr
    for job in failed_thumbnails:
        assert job["id"] in table.stdout
    assert table.stdout.splitlines()[0].split()[:4] == ["JOB", "TENANT", "TYPE", "STATUS"]


def test_search_by_prefix_lists_the_files(
    stack: RunningStack, failed_thumbnails: list[dict[str, Any]]
) -> None:
    listed = cli(
        "search", "--tenant", TENANT, "--prefix", f"uploads/{TENANT}/broken-", "--json",
        cwd=stack.root,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    keys = sorted(f["key"] for f in json.loads(listed.stdout)["files"])
    assert keys == [f"uploads/{TENANT}/broken-{n}.png" for n in range(3)]


def test_a_bulk_retry_of_a_group_is_counted_first_then_followed_to_its_end(
    stack: RunningStack, failed_thumbnails: list[dict[str, Any]]
) -> None:
    group = group_id(failed_thumbnails)
    # when the group's retry is dry-run
    dry = cli(
        "bulk", "retry", "--group", group, "--reason", "decoder fixed", "--dry-run", cwd=stack.root
    )
    # then it says how many jobs and changes nothing
    assert dry.returncode == 0, dry.stderr
    assert "would retry 3 jobs" in dry.stdout
    still = cli("search", "--tenant", TENANT, "--group", group, "--json", cwd=stack.root)
    assert len(json.loads(still.stdout)["jobs"]) == 3
    # when it is run for real, without a terminal to confirm on
    refused = cli("bulk", "retry", "--group", group, "--reason", "decoder fixed", cwd=stack.root)
    assert refused.returncode != 0 and "--yes" in refused.stderr
    run = cli(
        "bulk", "retry", "--group", group, "--reason", "decoder fixed", "--yes",
        cwd=stack.root, timeout=180,
    )  # fmt: skip
    # then it starts one operation and follows it to succeeded: every job changed
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert "started (Idempotency-Key" in run.stdout
    assert "succeeded: 3/3 processed, 3 changed, 0 skipped, 0 errors" in run.stdout
    # and the audit list shows who, why and what (the operator's, spanning every tenant)
    listed = cli("bulk", "list", "--json", cwd=stack.root)
    [operation] = json.loads(listed.stdout)["operations"]
    assert operation["created_by"] == "api:operator" and operation["tenant"] is None
    assert (operation["action"], operation["reason"]) == ("retry", "decoder fixed")
    assert operation["filter"] == {"group": group}
    status = cli("bulk", "status", operation["id"], cwd=stack.root)
    assert status.returncode == 0 and operation["id"] in status.stdout


def test_a_bulk_action_without_a_reason_or_a_filter_is_a_usage_error(stack: RunningStack) -> None:
    no_reason = cli("bulk", "cancel", "--tenant", TENANT, cwd=stack.root)
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    no_filter = cli("bulk", "cancel", "--reason", "why", cwd=stack.root)
    assert no_filter.returncode != 0 and "give a filter" in no_filter.stderr
    bad_time = cli("search", "--since", "yesterday", cwd=stack.root)
    assert bad_time.returncode == 2 and "ISO 8601" in bad_time.stderr
