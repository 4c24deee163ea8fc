"""`filejobs dev` started from a program (the demo, benchmarks, end-to-end tests) and reached
only through its public faces: the S3 API at `endpoint_url`, the HTTP API at `api_url`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import boto3
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from filejobs_cli.local_stack_file import CONFIG_PATH, LOCAL_CREDENTIALS
from filejobs_dev.local.stack import free_port

TERMINAL = frozenset({"completed", "failed", "cancelled"})
# How long a stopping stack may take: its hosts' grace (30 s by default), then their kill.
STOP_SECONDS = 90


def project_copy(project: Path, scratch: Path) -> Path:
    """The template and the functions of `project`, all a stack needs, under `scratch`: a stack
    started there writes its .filejobs/local.json there, away from a `make dev` of the project."""
    root = scratch / "project"
    root.mkdir()
    shutil.copy(project / "template.yaml", root / "template.yaml")
    shutil.copytree(project / "functions", root / "functions")
    return root


def endpoint_for(config: dict[str, Any], service: str) -> str:
    """Where the local stack serves `service` (a botocore name), from its local.json."""
    served_apart: dict[str, str] = config.get("endpoints") or {}
    return served_apart.get(service) or str(config["endpoint_url"])


def _peak_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class LaunchError(RuntimeError):
    """The stack did not come up."""


def _retried[T](read: Callable[[], T]) -> T:
    """`read`, tried again from the start when the emulator, busy serving every function host,
    drops its connection now and then."""
    for attempt in range(1, 6):
        try:
            return read()
        except (ConnectionClosedError, EndpointConnectionError, ReadTimeoutError):
            if attempt == 5:
                raise
            time.sleep(2 * attempt)
    raise AssertionError("unreachable")


# A job not yet at its end; a file item (the files table holds other records besides).
_ACTIVE = {
    "FilterExpression": "NOT #status IN (:completed, :failed, :cancelled)",
    "ExpressionAttributeNames": {"#status": "status"},
    "ExpressionAttributeValues": {f":{status}": {"S": status} for status in sorted(TERMINAL)},
}
_HAS_STATUS = {
    "FilterExpression": "attribute_exists(#status)",
    "ExpressionAttributeNames": {"#status": "status"},
}


@dataclass(frozen=True)
class Progress:
    files: int  # recorded
    jobs: int  # made
    active: int  # not terminal


@dataclass
class LaunchedStack:
    process: subprocess.Popen[bytes]
    config: dict[str, Any]
    root: Path
    up_at: float = 0.0  # epoch seconds its API first answered

    def client(self, service: str) -> Any:
        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=endpoint_for(self.config, service),
            region_name=self.config["region"],
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def scan(self, table: str, **parameters: Any) -> list[dict[str, Any]]:
        """Every item of `table`, as DynamoDB's JSON."""

        def every_page() -> list[dict[str, Any]]:
            pages = (
                self.client("dynamodb")
                .get_paginator("scan")
                .paginate(TableName=table, **parameters)
            )
            return [item for page in pages for item in page["Items"]]

        return _retried(every_page)

    def count(self, table: str, **parameters: Any) -> int:
        """How many items of `table` a scan with `parameters` (a filter) matches. Only the count
        is answered, which the emulator works out without copying an item (moto_speedups.py): a
        tool that asks every few seconds while the stack works adds little to its load."""

        def counted() -> int:
            pages = (
                self.client("dynamodb")
                .get_paginator("scan")
                .paginate(TableName=table, Select="COUNT", **parameters)
            )
            return sum(page["Count"] for page in pages)

        return _retried(counted)

    def progress(self) -> Progress:
        """Files recorded, jobs made and jobs still active. The totals are the tables' item
        counts, which moto works out as it is asked (DynamoDB refreshes them every few hours:
        this reads the local stack only)."""
        dynamodb = self.client("dynamodb")
        jobs_table, files_table = self.config["table_name"], self.config["files_table"]
        made = _retried(lambda: dynamodb.describe_table(TableName=jobs_table))
        return Progress(
            files=self.count(files_table, **_HAS_STATUS),
            jobs=int(made["Table"].get("ItemCount", 0)),
            active=self.count(jobs_table, **_ACTIVE),
        )

    def peak_memory_mb(self) -> float:
        """The emulator's peak resident memory (VmHWM): the stack process's (S3, SQS and
        EventBridge run in it) plus its DynamoDB emulator's."""
        return sum(_peak_mb(pid) for pid in (self.process.pid, *self.emulator_pids()))

    def emulator_pids(self) -> list[int]:
        """The stack's emulator processes (emulator.py), by their command line."""
        return [
            pid
            for pid, parent, command in processes()
            if parent == self.process.pid and b"filejobs_dev.local.emulator" in command
        ]

    def api(
        self, path: str, *, method: str = "GET", body: Any = None, token: str | None = None
    ) -> tuple[int, Any]:
        """One request to the HTTP API: its status and decoded JSON body."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 (the stack's loopback URL)
            self.config["api_url"] + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {token or self.config['api_token']}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def file_at(self, key: str) -> dict[str, Any] | None:
        """The newest file recorded for `key` in the uploads bucket, with its jobs."""
        bucket = self.config["uploads_bucket"]
        status, found = self.api(f"/files?key={key}&bucket={bucket}")
        if status != 200:
            return None
        _, stored = self.api(f"/files/{found['files'][0]['id']}")
        return dict(stored)

    def settled(self, key: str, seconds: float = 60) -> dict[str, Any]:
        """The file at `key` once every one of its jobs is terminal."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            stored = self.file_at(key)
            if stored and stored["jobs"] and all(j["status"] in TERMINAL for j in stored["jobs"]):
                return stored
            time.sleep(0.3)
        raise TimeoutError(f"{key}: jobs not terminal after {seconds} s")


def processes() -> Iterator[tuple[int, int, bytes]]:
    """(pid, parent pid, command line) of every process readable here, from /proc."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes()
            parent = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        yield int(proc.name), parent, command


@contextmanager
def launched(
    root: Path,
    *options: str,
    output: IO[bytes] | None = None,
    start_seconds: float = 180,
) -> Iterator[LaunchedStack]:
    """`filejobs dev` for the project at `root`, on free loopback ports; stopped on exit if it is
    still running, as Ctrl-C stops it: its function hosts are stopped and waited for (killed
    after its grace), so none outlives the block and writes into a folder the caller removes."""
    command = [
        sys.executable, "-m", "filejobs_cli.main", "dev",
        "--emulator-port", str(free_port()), "--api-port", str(free_port()), *options,
    ]  # fmt: skip
    process = subprocess.Popen(  # noqa: S603 (our own CLI)
        command,
        cwd=root,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=output,
        stderr=subprocess.STDOUT if output is not None else None,
    )
    try:
        yield _ready(process, root, start_seconds)
    finally:
        if process.poll() is None:
            # Killing the stack itself would orphan its hosts, which run on until they notice.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _ready(process: subprocess.Popen[bytes], root: Path, seconds: float) -> LaunchedStack:
    config_path = root / CONFIG_PATH
    deadline = time.monotonic() + seconds
    while not config_path.exists():
        if process.poll() is not None:
            raise LaunchError(f"filejobs dev exited with {process.returncode} while starting")
        if time.monotonic() > deadline:
            raise LaunchError(f"filejobs dev did not start in {seconds:.0f} s")
        time.sleep(0.2)
    stack = LaunchedStack(process, json.loads(config_path.read_text()), root)
    while True:
        try:
            if stack.api("/health")[0] == 200:
                stack.up_at = time.time()
                return stack
        except OSError:
            pass  # the router is not listening yet
        if time.monotonic() > deadline:
            raise LaunchError(f"the API did not answer in {seconds:.0f} s")
        time.sleep(0.2)
