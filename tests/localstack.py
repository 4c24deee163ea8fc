"""A running `filejobs dev`, started as a user starts it, for tests that drive the local stack
only through its public faces (S3 API, HTTP API, CLI, `.filejobs/local.json`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from filejobs.local.stack import free_port

ROOT = Path(__file__).resolve().parents[1]
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


@contextmanager
def running_stack(root: Path, *options: str) -> Iterator[RunningStack]:
    """`filejobs dev` in `root` (a copy of the project's template and functions is made there:
    the stack writes .filejobs/local.json into its project, and the working tree is left alone).
    """
    shutil.copy(ROOT / "template.yaml", root / "template.yaml")
    shutil.copytree(ROOT / "functions", root / "functions")
    command = [
        sys.executable, "-m", "filejobs.cli.main", "dev",
        "--emulator-port", str(free_port()), "--api-port", str(free_port()),
        "--schedule-seconds", "2", "--grace-seconds", "20", *options,
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
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
