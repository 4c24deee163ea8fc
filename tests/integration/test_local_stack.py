"""Specification: `filejobs dev` runs the whole system on this machine, driven by the template.

The stack runs as a user starts it (`filejobs dev`, a process of its own with moto server and one
process per function event source), and is driven only through its public faces: the S3 API at
`endpoint_url`, the HTTP API at `api_url`, and `.filejobs/local.json`.
"""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest
from PIL import Image

from filejobs_dev.infra.template import function_definitions, load_template
from filejobs_dev.local.launch import processes
from tests.localstack import ROOT, RunningStack, running_stack

# What `sam local invoke` runs in its container: the function's handler, called once on an event.
SAM_LIKE_INVOKE = """
import importlib, json, sys, types
module, _, name = sys.argv[1].rpartition(".")
handler = getattr(importlib.import_module(module), name)
event = json.load(sys.stdin)
context = types.SimpleNamespace(
    function_name="ApiFunction", memory_limit_in_mb=512, aws_request_id="sam-local",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:ApiFunction",
    get_remaining_time_in_millis=lambda: 30000,
)
print(json.dumps(handler(event, context)))
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # Nothing here waits on the sweep or another schedule: they keep the template's rates.
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


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


def test_the_files_holding_the_stack_s_tokens_are_readable_by_their_user_alone(
    stack: RunningStack,
) -> None:
    # local.json holds the operator's token and the secret that signs tenants' tokens
    for name in ("local.json", "sam-env.json"):
        mode = stat.S_IMODE((stack.root / ".filejobs" / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))


def test_an_upload_with_any_s3_client_is_processed_to_the_end(stack: RunningStack) -> None:
    # when a PNG is put under uploads/{tenant}/ with a plain S3 client
    key = "uploads/acme/photo.png"
    stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=png())
    # then every job it got reaches completed, through the real handlers
    stored = stack.settled(key)
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


def test_a_tenant_token_sees_its_own_files_only(stack: RunningStack) -> None:
    # given a file of acme and a token for globex, minted by the CLI
    key = "uploads/acme/private.png"
    stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=png())
    acme_file = stack.settled(key)
    minted = subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", "token", "--tenant", "globex"],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    globex = minted.stdout.strip()
    # when globex asks for acme's file, then it does not exist for globex
    status, body = stack.api(f"/files/{acme_file['id']}", token=globex)
    assert status == 404, body
    # and acme's own token finds it
    acme = subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", "token", "--tenant", "acme"],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    assert stack.api(f"/files/{acme_file['id']}", token=acme)[0] == 200


def test_invoke_runs_one_function_on_an_event_file_against_the_stack(
    stack: RunningStack,
) -> None:
    # when the sweep is invoked once on the sample schedule event, as `sam local invoke` would
    result = subprocess.run(
        [
            sys.executable, "-m", "filejobs_cli.main", "invoke", "SweepFunction",
            "-e", str(ROOT / "events" / "sweep_schedule.json"),
        ],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    # then it ran against the stack's tables and printed the handler's answer
    assert result.returncode == 0, result.stderr
    assert '"sweep finished"' in result.stdout + result.stderr
    # and an unknown function is refused by name
    unknown = subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", "invoke", "NoSuchFunction"],
        cwd=stack.root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unknown.returncode != 0
    assert "no function 'NoSuchFunction'" in unknown.stderr


def test_sam_local_gets_an_env_vars_file_that_points_every_function_at_the_stack(
    stack: RunningStack,
) -> None:
    document = json.loads((stack.root / ".filejobs" / "sam-env.json").read_text())
    functions = function_definitions(load_template(ROOT / "template.yaml"))
    # SAM overrides only the variables a function declares: the file sets exactly those
    assert set(document) == set(functions)
    for name, variables in document.items():
        assert set(variables) == set(functions[name].environment), name
        assert variables["FILEJOBS_ENDPOINT_URL"] == stack.config["endpoint_url"]
        assert variables["JOBS_TABLE_NAME"] == stack.config["table_name"]
    # and a handler that sees those variables alone, as in SAM's container, serves the stack
    key = "uploads/acme/sam-local.png"
    stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=png())
    job = next(job for job in stack.settled(key)["jobs"] if job["job_type"] == "virus_scan")
    event = json.loads((ROOT / "events" / "api_get_job.json").read_text())
    event["path"] = event["requestContext"]["path"] = f"/jobs/{job['id']}"
    event["pathParameters"] = {"job_id": job["id"]}
    container = {
        "PATH": os.environ["PATH"],
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": stack.config["region"],
        "AWS_REGION": stack.config["region"],
        "POWERTOOLS_TRACE_DISABLED": "true",
        **document["ApiFunction"],
    }
    api = functions["ApiFunction"]
    answered = subprocess.run(
        [sys.executable, "-c", SAM_LIKE_INVOKE, api.handler], input=json.dumps(event),
        env=container, cwd=stack.root / api.code_uri, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert answered.returncode == 0, answered.stderr
    response = json.loads(answered.stdout.strip().splitlines()[-1])
    assert response["statusCode"] == 200, response
    assert json.loads(response["body"])["status"] == "completed"


def test_the_stack_answers_once_every_function_host_serves(stack: RunningStack) -> None:
    # given the stack's function hosts (one-off invocations aside)
    hosts = [
        pid
        for pid, parent, command in processes()
        if parent == stack.process.pid
        and b"filejobs_dev.local.host" in command
        and b"invoke" not in command.split(b"\0")
    ]
    assert len(hosts) >= len(function_definitions(load_template(ROOT / "template.yaml")))
    # then each had imported its handler and marked itself ready before the API first answered
    # (on a small machine a host takes seconds to import: uploads made meanwhile would wait)
    ready = stack.root / ".filejobs" / "hosts-ready"
    for pid in hosts:
        marker = ready / str(pid)
        assert marker.exists(), pid
        assert marker.stat().st_mtime <= stack.up_at, pid


def test_ctrl_c_stops_everything_cleanly(stack: RunningStack) -> None:
    # when the stack is interrupted (last: the other tests share it)
    stack.process.send_signal(signal.SIGINT)
    # then it exits 0 within its grace period and takes local.json and sam-env.json with it
    assert stack.process.wait(timeout=40) == 0
    assert not (stack.root / ".filejobs" / "local.json").exists()
    assert not (stack.root / ".filejobs" / "sam-env.json").exists()
    assert not (stack.root / ".filejobs" / "hosts-ready").exists()
