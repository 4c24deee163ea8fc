"""Specification: the definitions updater's Lambda handler (functions/definitions/app.py) on its
three kinds of event: EventBridge Scheduler's, CloudFormation's custom resource requests (the
answer PUT to a receiver on 127.0.0.1, as to CloudFormation's pre-signed URL), and manual
actions. Real freshclam and clamscan against local/mirror.py; moto's S3."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.adapters.definitions import RollbackError
from filejobs_dev.local.mirror import DefinitionsMirror, add_hash_signature, build_local_databases
from functions.definitions import app

pytestmark = pytest.mark.skipif(
    shutil.which("freshclam") is None or shutil.which("clamscan") is None,
    reason="ClamAV is not installed (apt-get install clamav clamav-freshclam)",
)
EVENTS = Path(__file__).resolve().parents[2] / "events"
BUCKET = "outputs-bucket"


@dataclass
class FakeContext:
    function_name: str = "filejobs-DefinitionsUpdater"
    memory_limit_in_mb: int = 3008
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:filejobs-DefinitionsUpdater"
    )
    aws_request_id: str = "8d1e5b0a-3c2f-4d6e-9a7b-1c2d3e4f5a6b"
    log_stream_name: str = "2026/12/01/[$LATEST]0123456789abcdef"


CONTEXT = cast(LambdaContext, FakeContext())


@dataclass
class Receiver:
    """CloudFormation's side of a custom resource: what was PUT to the response URL."""

    url: str
    answers: list[dict[str, Any]] = field(default_factory=list)
    content_types: list[str | None] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    received = Receiver("")

    class Answer(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            length = int(self.headers["Content-Length"])
            received.answers.append(json.loads(self.rfile.read(length)))
            received.content_types.append(self.headers.get("Content-Type"))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}/response?X-Amz-Signature=abc"
    yield received
    server.shutdown()
    server.server_close()


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[DefinitionsMirror]:
    build_local_databases(tmp_path / "mirror")
    with DefinitionsMirror(tmp_path / "mirror") as running:
        yield running


@pytest.fixture
def environment(
    aws: None, mirror: DefinitionsMirror, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """The updater's environment as the template sets it, pointed at the local mirror."""
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    settings = {
        "SIGNATURES_BUCKET": BUCKET,
        "SIGNATURES_PREFIX": "signatures/",
        "FRESHCLAM": "freshclam",
        "CLAMSCAN": "clamscan",
        "DEFINITIONS_MIRROR": mirror.url,
        "OFFICIAL_DATABASES": "",
        "DEFINITIONS_CUSTOM_URLS": ",".join(mirror.database_urls()),
        "SCAN_ENGINES": "clamav+yara",
        "MAX_DEFINITIONS_AGE_HOURS": "48",
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    # moto in this process, not an endpoint override: the mirror's plain http on 127.0.0.1 is
    # allowed as the local stack allows it
    monkeypatch.setattr(app, "local_mirror_allowed", lambda env: True)
    runtime.reset()
    yield
    runtime.reset()


def event(name: str, **changes: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    loaded.update(changes)
    return loaded


def metrics(output: str) -> dict[str, float]:
    """The metrics Powertools flushed (embedded metric format lines on stdout)."""
    found: dict[str, float] = {}
    for line in output.splitlines():
        if '"_aws"' not in line:
            continue
        document = json.loads(line)
        for definition in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            value = document[definition["Name"]]
            found[definition["Name"]] = value[0] if isinstance(value, list) else value
    return found


def manifest() -> dict[str, Any] | None:
    s3 = boto3.client("s3")
    try:
        body = s3.get_object(Bucket=BUCKET, Key="signatures/manifest.json")["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    loaded: dict[str, Any] = json.loads(body)
    return loaded


def test_the_schedule_runs_an_update_and_reports_its_metrics(
    environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    result = app.handler(event("definitions_schedule.json"), CONTEXT)
    assert result["status"] == "published", result
    assert manifest() is not None and result["set_id"] == manifest()["set_id"]  # type: ignore[index]
    reported = metrics(capsys.readouterr().out)
    assert reported["DefinitionsPublished"] == 1
    assert (reported["DefinitionsUpdateFailed"], reported["DefinitionsUpdateSkipped"]) == (0, 0)
    assert 0 <= reported["DefinitionsAgeHours"] < 0.1


def test_cloudformation_is_answered_success_with_the_set_it_published(
    environment: None, receiver: Receiver, mirror: DefinitionsMirror
) -> None:
    # When CloudFormation creates the custom resource
    create = event("definitions_cfn_create.json", ResponseURL=receiver.url)
    app.handler(create, CONTEXT)
    # Then it is told SUCCESS, with the set in Data, by one PUT signed without a content type
    [answer] = receiver.answers
    published = manifest()
    assert published is not None
    assert answer == {
        "Status": "SUCCESS",
        "Reason": "definitions published",
        "PhysicalResourceId": "filejobs-scan-definitions",
        "StackId": create["StackId"],
        "RequestId": create["RequestId"],
        "LogicalResourceId": "ScanDefinitionsOnDeploy",
        "NoEcho": False,
        "Data": {"status": "published", "set_id": published["set_id"], "reason": ""},
    }
    assert receiver.content_types == [""]
    # When a later deploy changes the mirror settings (an Update), the same resource answers
    update = {**create, "RequestType": "Update", "PhysicalResourceId": "filejobs-scan-definitions"}
    app.handler(update, CONTEXT)
    assert receiver.answers[1]["Status"] == "SUCCESS"
    assert receiver.answers[1]["PhysicalResourceId"] == "filejobs-scan-definitions"
    assert receiver.answers[1]["Data"]["status"] == "unchanged"


def test_a_mirror_outage_does_not_fail_the_deploy(
    environment: None,
    receiver: Receiver,
    mirror: DefinitionsMirror,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a mirror that blocks us
    mirror.refuse(403)
    # When CloudFormation creates the resource, the deploy goes on: SUCCESS, saying what failed
    app.handler(event("definitions_cfn_create.json", ResponseURL=receiver.url), CONTEXT)
    [answer] = receiver.answers
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"]["status"] == "failed"
    assert answer["Data"]["set_id"] == ""
    assert "the mirror blocked us (403)" in answer["Data"]["reason"]
    # and the failure is counted for its alarm, nothing published
    assert metrics(capsys.readouterr().out)["DefinitionsUpdateFailed"] == 1
    assert manifest() is None


def test_bad_settings_fail_the_deploy_saying_which(
    environment: None, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFICIAL_DATABASES", "main,weekly")
    app.handler(event("definitions_cfn_create.json", ResponseURL=receiver.url), CONTEXT)
    [answer] = receiver.answers
    assert answer["Status"] == "FAILED"
    assert answer["Reason"] == (
        "bad configuration: unknown official databases: weekly (one of main, daily, bytecode)"
    )
    assert answer["PhysicalResourceId"] == "filejobs-scan-definitions"


def test_an_error_of_the_code_fails_the_deploy_without_a_traceback(
    environment: None, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(settings: app.UpdaterSettings) -> Any:
        raise RuntimeError("internal detail at /var/task/secret.py")

    monkeypatch.setattr(app, "updater", broken)
    app.handler(event("definitions_cfn_create.json", ResponseURL=receiver.url), CONTEXT)
    [answer] = receiver.answers
    assert answer["Status"] == "FAILED"
    assert answer["Reason"] == (
        "the definitions updater failed (RuntimeError); "
        "see its log stream 2026/12/01/[$LATEST]0123456789abcdef"
    )
    assert "Traceback" not in json.dumps(answer) and "secret" not in json.dumps(answer)


def test_a_delete_does_nothing_and_never_blocks_the_stacks_deletion(
    environment: None, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFICIAL_DATABASES", "not,even,valid")
    delete = event(
        "definitions_cfn_create.json",
        RequestType="Delete",
        ResponseURL=receiver.url,
        PhysicalResourceId="filejobs-scan-definitions",
    )
    app.handler(delete, CONTEXT)
    [answer] = receiver.answers
    assert (answer["Status"], answer["Data"]["status"]) == ("SUCCESS", "skipped")
    assert manifest() is None


def test_manual_actions_update_report_and_roll_back(
    environment: None, mirror: DefinitionsMirror
) -> None:
    # Before anything is published, the status says so and a rollback is refused
    assert app.handler({"action": "status"}, CONTEXT)["status"] == "none"
    with pytest.raises(RollbackError, match="no definitions are published"):
        app.handler({"action": "rollback"}, CONTEXT)
    # An update, then another after a new signature
    first = app.handler({"action": "update"}, CONTEXT)
    add_hash_signature(mirror.directory, b"new sample\n", "Filejobs.Local.New")
    second = app.handler({"action": "update"}, CONTEXT)
    assert (first["status"], second["status"]) == ("published", "published")
    status = app.handler({"action": "status"}, CONTEXT)
    assert status["status"] == "current"
    assert (status["set_id"], status["previous"]) == (second["set_id"], [first["set_id"]])
    assert status["stale"] is False and status["backoff"]["refusals"] == 0
    assert set(status["files"]) == {"filejobs-local.hdb", "filejobs-local.ndb"}
    # A rollback makes the first current again
    rolled = app.handler({"action": "rollback"}, CONTEXT)
    assert rolled["status"] == "rolled_back"
    assert (rolled["set_id"], rolled["rolled_back_from"]) == (first["set_id"], second["set_id"])


@pytest.mark.parametrize(
    ("request_", "complaint"),
    [
        ({"action": "explode"}, "unknown action 'explode': one of update, rollback, status"),
        ({}, "not an event this function handles"),
        ({"detail-type": "Object Created"}, "not an event this function handles"),
    ],
)
def test_an_unknown_request_is_refused_clearly(
    environment: None, request_: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(app.UnknownActionError, match=complaint):
        app.handler(request_, CONTEXT)
    assert manifest() is None
