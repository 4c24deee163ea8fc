"""Specification: on the local stack, an operator erases a whole tenant ("a customer leaving")
with `filejobs erase --tenant T --yes --wait`, and nothing of it is left but the audit records.

Driven as an operator drives it: uploads as any S3 client makes them, the tenant's settings made
through the HTTP API, then the CLI against the stack. The test prints how long the erasure took
(files, seconds), the figure the closing note of this work quotes.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from filejobs_dev.local import tokens
from tests.localstack import TERMINAL, RunningStack, running_stack

LEAVING, STAYING = "leaving", "staying"
FILES = 6


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


def cli(*arguments: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", *arguments],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def png(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 240), (20, shade, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def processed(stack: RunningStack, tenant: str, count: int, seconds: float = 120) -> list[str]:
    """The ids of the tenant's `count` files, once every job of each is done."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        status, page = stack.api(f"/files?tenant={tenant}&prefix=uploads/{tenant}/")
        ids = [f["id"] for f in page.get("files", [])] if status == 200 else []
        views = [stack.api(f"/files/{file_id}")[1] for file_id in ids]
        done = [v for v in views if v["jobs"] and all(j["status"] in TERMINAL for j in v["jobs"])]
        if len(done) == count:
            return ids
        time.sleep(0.5)
    raise TimeoutError(f"{tenant}'s {count} uploads not processed after {seconds} s")


def versions_under(stack: RunningStack, bucket: str, prefix: str) -> list[str]:
    listed = stack.client("s3").list_object_versions(Bucket=bucket, Prefix=prefix)
    return [e["Key"] for e in (*listed.get("Versions", []), *listed.get("DeleteMarkers", []))]


def items_of(stack: RunningStack, table: str, tenant: str) -> list[dict[str, Any]]:
    """Every item of `table` that names the tenant: its `tenant` attribute, or in its key."""
    return [
        item
        for item in stack.scan(table)
        if item.get("tenant", {}).get("S") == tenant
        or any(tenant in str(item.get(k, {}).get("S", "")).split("#") for k in ("id", "pk"))
    ]


def test_an_operator_erases_a_tenant_and_leaves_only_its_audit_records(
    stack: RunningStack,
) -> None:
    s3, uploads = stack.client("s3"), stack.config["uploads_bucket"]
    outputs = stack.config["outputs_bucket"]
    # given a leaving tenant's uploads (one key twice), one of a staying tenant's
    for n in range(FILES - 1):
        s3.put_object(Bucket=uploads, Key=f"uploads/{LEAVING}/photo-{n}.png", Body=png(10 * n))
    s3.put_object(Bucket=uploads, Key=f"uploads/{LEAVING}/photo-0.png", Body=png(99))
    s3.put_object(Bucket=uploads, Key=f"uploads/{STAYING}/photo.png", Body=png(50))
    leaving = processed(stack, LEAVING, FILES)
    staying = processed(stack, STAYING, 1)
    # and the leaving tenant's settings: a schedule, a webhook endpoint, a preset, a quota
    settings = [
        ("POST", "/schedules", {"name": "nightly", "expression": "cron(0 3 * * ? *)",
                                "action": "rescan", "prefix": f"uploads/{LEAVING}/",
                                "tenant": LEAVING}),
        ("POST", "/webhooks", {"url": "https://hooks.example.com/filejobs",
                               "event_types": ["Job Completed"], "tenant": LEAVING}),
        ("PUT", f"/presets/thumbs?tenant={LEAVING}",
         {"jobs": [{"job_type": "virus_scan"}], "prefixes": [f"uploads/{LEAVING}/x/"]}),
        ("PUT", f"/tenants/{LEAVING}/quotas", {"files_per_day": 1000}),
    ]  # fmt: skip
    for method, path, body in settings:
        status, answer = stack.api(path, method=method, body=body)
        assert status in (200, 201), (path, answer)
    # and a tenant may not erase itself
    own = tokens.mint(stack.config["token_secret"], LEAVING)
    refused, _ = stack.api(
        f"/tenants/{LEAVING}/erasure", method="POST", body={"reason": "mine"}, token=own
    )
    assert refused == 403

    # when the operator erases the tenant, without being asked, and follows it to its end
    started = time.monotonic()
    ran = cli(
        "erase", "--tenant", LEAVING, "--reason", "contract ended", "--yes", "--wait", "--json",
        cwd=stack.root,
    )  # fmt: skip
    took = time.monotonic() - started
    print(f"filejobs erase --tenant {LEAVING}: {FILES} files, {took:.1f} s")

    # then the operation succeeded, with its progress and what it removed
    assert ran.returncode == 0, ran.stderr
    assert f"would erase tenant {LEAVING}: {FILES} files" in ran.stderr
    operation = json.loads(ran.stdout)
    assert operation["status"] == "succeeded" and operation["action"] == "erase"
    assert operation["matched"] == FILES
    assert operation["processed"] == FILES and operation["errors"] == 0
    assert operation["changed"] == FILES - 1  # two versions of one key went as one upload
    removed = operation["removed"]
    assert removed["upload_versions"] == FILES
    assert (removed["schedules"], removed["webhook_endpoints"], removed["presets"]) == (1, 1, 1)
    assert removed["quota_overrides"] == 1 and removed["usage_days"] >= 1
    # and nothing of the tenant is left in the buckets
    assert versions_under(stack, uploads, f"uploads/{LEAVING}/") == []
    assert versions_under(stack, outputs, f"derived/{LEAVING}/") == []
    # nor in the tables, but its audit records (and the operation itself)
    assert items_of(stack, stack.config["files_table"], LEAVING) == []
    assert items_of(stack, stack.config["table_name"], LEAVING) == []
    assert all(stack.api(f"/files/{file_id}")[0] == 404 for file_id in leaving)
    status, schedules = stack.api(f"/schedules?tenant={LEAVING}")
    assert status == 200 and schedules["schedules"] == []
    status, hooks = stack.api(f"/webhooks?tenant={LEAVING}")
    assert status == 200 and hooks["webhooks"] == []
    audit = [
        json.loads(item["record"]["S"])
        for item in stack.scan(ops_table(stack))
        if item["pk"]["S"] == f"erasures#{LEAVING}"
    ]
    assert len(audit) == FILES - 1
    assert sorted(f for record in audit for f in record["file_ids"]) == sorted(leaving)
    assert {record["operation_id"] for record in audit} == {operation["id"]}
    assert "uploads/" not in json.dumps(audit) and "photo" not in json.dumps(audit)
    # and the staying tenant is untouched
    assert stack.api(f"/files/{staying[0]}")[0] == 200
    assert versions_under(stack, uploads, f"uploads/{STAYING}/") == [f"uploads/{STAYING}/photo.png"]


def ops_table(stack: RunningStack) -> str:
    resources = stack.config["resources"]
    name: str = resources["refs"]["OpsTable"]
    return name
