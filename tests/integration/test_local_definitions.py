"""Specification: `filejobs dev` comes up with published definitions, from a mirror of its own.

The stack serves a ClamAV definitions mirror on 127.0.0.1 (`.filejobs/mirror`, made with test
databases), points the template's definitions parameters at it, and runs the
ScanDefinitionsOnDeploy custom resource's function once before starting the function hosts, as
CloudFormation does during a deploy: the first scan finds a set already published. One stack
start, driven through its public faces (local.json, the S3 API, the CLI).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.mirror import HASH_DATABASE, add_hash_signature
from tests.localstack import RunningStack, running_stack

pytestmark = pytest.mark.skipif(
    shutil.which("freshclam") is None or shutil.which("clamscan") is None,
    reason="ClamAV is not installed (apt-get install clamav clamav-freshclam)",
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # An updater every minute, so that the stack's --schedule-seconds (2) runs it every 2 s (it
    # speeds up only the schedules of five minutes or less).
    schedule = "DefinitionsUpdateSchedule=rate(1 minute)"
    with running_stack(tmp_path_factory.mktemp("project"), "--parameter", schedule) as running:
        yield running


def manifest(stack: RunningStack) -> dict[str, Any]:
    body = stack.client("s3").get_object(
        Bucket=stack.config["outputs_bucket"], Key="signatures/manifest.json"
    )["Body"]
    loaded: dict[str, Any] = json.loads(body.read())
    return loaded


def test_the_stack_starts_with_a_set_published_from_its_own_mirror(stack: RunningStack) -> None:
    # local.json says where the mirror is
    url, directory = (
        stack.config["definitions_mirror_url"],
        Path(stack.config["definitions_mirror_dir"]),
    )
    assert url.startswith("http://127.0.0.1:")
    assert directory == stack.root / ".filejobs" / "mirror"
    # and the set published before the hosts started holds what the mirror serves, proved
    current = manifest(stack)
    assert sorted(f["name"] for f in current["files"]) == sorted(
        p.name for p in directory.iterdir() if p.suffix in (".hdb", ".ndb")
    )
    assert {f["source"] for f in current["files"]} == {"custom_url"}
    assert current["verification"] == {
        "eicar": "Filejobs.Local.EICAR.UNOFFICIAL FOUND",
        "clean": "OK",
    }
    assert current["engine"].startswith("ClamAV ")


def test_a_new_signature_on_the_mirror_is_published_by_the_schedule(stack: RunningStack) -> None:
    # Given the set the stack started with
    first = manifest(stack)
    # When the mirror publishes a signature (the updater runs every 2 s here)
    add_hash_signature(
        Path(stack.config["definitions_mirror_dir"]), b"flagged later\n", "Filejobs.Local.Later"
    )
    # Then a new set is current, keeping the first for a rollback
    deadline = time.monotonic() + 30
    while (current := manifest(stack))["set_id"] == first["set_id"]:
        assert time.monotonic() < deadline, "no new set within 30 s"
        time.sleep(0.5)
    assert current["previous"][0] == first["set_id"]
    database = next(f for f in current["files"] if f["name"] == HASH_DATABASE)
    assert database["size"] > next(f for f in first["files"] if f["name"] == HASH_DATABASE)["size"]


def test_operators_ask_the_updater_for_its_status_through_the_cli(
    stack: RunningStack, tmp_path: Path
) -> None:
    request = tmp_path / "status.json"
    request.write_text('{"action": "status"}')
    result = subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", "invoke", "DefinitionsUpdater",
         "-e", str(request)],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout[result.stdout.index("{\n") :])
    assert status["status"] == "current"
    assert status["set_id"] == manifest(stack)["set_id"]
    assert status["stale"] is False
