"""Specification: `filejobs dev` runs the whole system on this machine, driven by the template.

The stack runs as a user starts it (`filejobs dev`, a process of its own with moto server and one
process per function event source), and is driven only through its public faces: the S3 API at
`endpoint_url`, the HTTP API at `api_url`, and `.filejobs/local.json`.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from PIL import Image

from filejobs.local.stack import free_port

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"completed", "failed", "cancelled"}


@dataclass
class RunningStack:
    process: subprocess.Popen[bytes]
    config: dict[str, Any]
    root: Path

    def client(self, service: str) -> Any:
        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.config["endpoint_url"],
            region_name=self.config["region"],
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def api(self, path: str, token: str | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.config["api_url"] + path,
            headers={"Authorization": f"Bearer {token or self.config['api_token']}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def file_with_jobs(self, key: str, settle_seconds: float = 60) -> dict[str, Any]:
        """The file at `key`, once every job of it is terminal."""
        deadline = time.monotonic() + settle_seconds
        bucket = self.config["uploads_bucket"]
        while time.monotonic() < deadline:
            status, found = self.api(f"/files?key={key}&bucket={bucket}")
            if status == 200:
                _, stored = self.api(f"/files/{found['files'][0]['id']}")
                jobs = stored["jobs"]
                if jobs and all(job["status"] in TERMINAL for job in jobs):
                    return dict(stored)
            time.sleep(0.5)
        raise AssertionError(f"{key}: jobs not terminal after {settle_seconds} s")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # The stack writes .filejobs/local.json into its project: run it in a copy of the project's
    # template and functions so the working tree is left alone.
    root = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "template.yaml", root / "template.yaml")
    shutil.copytree(ROOT / "functions", root / "functions")
    command = [
        sys.executable, "-m", "filejobs.cli.main", "dev",
        "--emulator-port", str(free_port()), "--api-port", str(free_port()),
        "--schedule-seconds", "2", "--grace-seconds", "20",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=root, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    config_path = root / ".filejobs" / "local.json"
    deadline = time.monotonic() + 60
    while not config_path.exists():
        assert process.poll() is None, "filejobs dev exited while starting"
        assert time.monotonic() < deadline, "filejobs dev did not start in 60 s"
        time.sleep(0.2)
    config = json.loads(config_path.read_text())
    running = RunningStack(process, config, root)
    while running.api("/health")[0] != 200:
        assert time.monotonic() < deadline, "the API did not answer in 60 s"
        time.sleep(0.2)
    yield running
    if process.poll() is None:
        process.kill()
        process.wait()


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (900, 600), (20, 120, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def test_local_json_says_where_everything_is(stack: RunningStack) -> None:
    for key in ("endpoint_url", "region", "api_url", "api_token", "uploads_bucket"):
        assert stack.config[key], key
    assert {"outputs_bucket", "table_name"} <= set(stack.config)
    assert stack.config["endpoint_url"].startswith("http://127.0.0.1:")
    assert stack.config["api_url"].startswith("http://127.0.0.1:")


def test_an_upload_with_any_s3_client_is_processed_to_the_end(stack: RunningStack) -> None:
    # when a PNG is put under uploads/{tenant}/ with a plain S3 client
    key = "uploads/acme/photo.png"
    stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=png())
    # then every job it got reaches completed, through the real handlers
    stored = stack.file_with_jobs(key)
    statuses = {job["job_type"]: job["status"] for job in stored["jobs"]}
    assert statuses == {
        "virus_scan": "completed",
        "thumbnail_generation": "completed",
        "deduplication_check": "completed",
    }
    assert stored["scan_status"] == "clean"
    # and the thumbnails are in the outputs bucket, outside the uploads prefix
    listing = stack.client("s3").list_objects_v2(
        Bucket=stack.config["outputs_bucket"], Prefix=f"derived/acme/{stored['id']}/"
    )
    names = sorted(item["Key"].rsplit("/", 1)[1] for item in listing.get("Contents", []))
    assert names == ["thumb-128.webp", "thumb-256.webp", "thumb-512.webp"]


def test_the_api_refuses_a_request_without_the_token(stack: RunningStack) -> None:
    status, body = stack.api("/health", token="wrong")
    assert status == 401
    assert body["error"]["message"] == "a valid bearer token is required"


def test_invoke_runs_one_function_on_an_event_file_against_the_stack(
    stack: RunningStack,
) -> None:
    # when the sweep is invoked once on the sample schedule event, as `sam local invoke` would
    result = subprocess.run(
        [
            sys.executable, "-m", "filejobs.cli.main", "invoke", "SweepFunction",
            "-e", str(ROOT / "events" / "sweep_schedule.json"),
        ],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    # then it ran against the stack's tables and printed the handler's answer
    assert result.returncode == 0, result.stderr
    assert '"sweep finished"' in result.stdout + result.stderr
    # and an unknown function is refused by name
    unknown = subprocess.run(
        [sys.executable, "-m", "filejobs.cli.main", "invoke", "NoSuchFunction"],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unknown.returncode != 0
    assert "no function 'NoSuchFunction'" in unknown.stderr


def test_ctrl_c_stops_everything_cleanly(stack: RunningStack) -> None:
    # when the stack is interrupted (last: the other tests share it)
    stack.process.send_signal(signal.SIGINT)
    # then it exits 0 within its grace period and takes its local.json with it
    assert stack.process.wait(timeout=40) == 0
    assert not (stack.root / ".filejobs" / "local.json").exists()
