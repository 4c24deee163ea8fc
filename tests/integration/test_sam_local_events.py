"""Specification: `sam local` against a running `filejobs dev`, short of SAM's container (no Docker
here): the env file `sam local` reads, the local-caller switch it turns on, and the events
`filejobs events` writes, each run through `filejobs invoke` (the same handler, the same
environment plus what SAM's container adds) and doing its real thing on the stack. The static
samples of events/ are answered or refused cleanly on a stack that has none of their ids.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from filejobs_cli.main import main as filejobs_main
from filejobs_dev.infra.template import function_definitions, load_template
from tests.localstack import ROOT, RunningStack, running_stack

FUNCTIONS = function_definitions(load_template(ROOT / "template.yaml"))

# What `sam local invoke` runs in its container: the function's handler, called once on an event.
SAM_LIKE_INVOKE = """
import importlib, json, sys, types
module, _, name = sys.argv[1].rpartition(".")
handler = getattr(importlib.import_module(module), name)
context = types.SimpleNamespace(
    function_name="ApiFunction", memory_limit_in_mb=512, aws_request_id="sam-local",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:ApiFunction",
    get_remaining_time_in_millis=lambda: 30000,
)
print(json.dumps(handler(json.load(sys.stdin), context)))
"""


@dataclass(frozen=True)
class Invoked:
    returncode: int
    answer: dict[str, Any] | None
    output: str  # the function's logs and the CLI's messages

    @property
    def body(self) -> dict[str, Any]:
        assert self.answer is not None, self.output
        return dict(json.loads(self.answer["body"]))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


@pytest.fixture(scope="module")
def written(stack: RunningStack) -> dict[str, Path]:
    """`filejobs events` run once on the stack: each file's name (without .json), its path."""
    ran = subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", "events"],
        cwd=stack.root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    paths = [stack.root / line for line in ran.stdout.split()]
    assert paths and all(path.parent == stack.root / "events" / "local" for path in paths)
    return {path.stem: path for path in paths}


def invoke(
    stack: RunningStack, function: str, event: Path, capfd: pytest.CaptureFixture[str]
) -> Invoked:
    """`filejobs invoke FUNCTION -e EVENT` on the stack; the answer is the indented JSON it
    prints last (the function's own log lines are one line each)."""
    returncode, stdout, stderr = filejobs(stack.root, ["invoke", function, "-e", str(event)], capfd)
    return invoked(returncode, stdout, stderr)


def invoked(returncode: int, stdout: str, stderr: str) -> Invoked:
    lines = stdout.splitlines()
    starts = [n for n, line in enumerate(lines) if line == "{"]
    answer = json.loads("\n".join(lines[starts[-1] :])) if starts else None
    return Invoked(returncode, answer, stdout + stderr)


def started(stack: RunningStack, function: str, event: Path) -> subprocess.Popen[str]:
    """`filejobs invoke FUNCTION -e EVENT` in a process of its own, its output its own: for an
    invocation that mostly waits, while others run."""
    return subprocess.Popen(
        [sys.executable, "-m", "filejobs_cli.main", "invoke", function, "-e", str(event)],
        cwd=stack.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finished(process: subprocess.Popen[str]) -> Invoked:
    stdout, stderr = process.communicate(timeout=300)
    return invoked(process.returncode, stdout, stderr)


def filejobs(
    root: Path, arguments: list[str], capfd: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """The CLI run inside `root` as `filejobs ARGUMENTS`: its exit status, stdout and stderr.

    Its `main` runs in this process; the function's host is still its own process, started by
    `filejobs invoke` as always, its output captured at the file descriptors it inherits. An
    interpreter started for the CLI itself cost 1.2 s per invocation (the CLI's imports
    and its parser), a quarter of the 4.9 s each took here."""
    capfd.readouterr()  # what was written before is not this command's
    with contextlib.chdir(root):
        try:
            returncode = filejobs_main(arguments)
        except SystemExit as stop:
            returncode = exit_status(stop)
    stdout, stderr = capfd.readouterr()
    return returncode, stdout, stderr


def exit_status(stop: SystemExit) -> int:
    """The status the interpreter exits with on `stop`: a message goes to stderr, status 1."""
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


def event_of(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_the_env_file_turns_the_local_caller_header_on_for_the_api_alone(
    stack: RunningStack,
) -> None:
    document = json.loads((stack.root / ".filejobs" / "sam-env.json").read_text())
    assert set(document) == set(FUNCTIONS)
    for name, variables in document.items():
        # every variable the function declares (SAM overrides no other), on this stack
        assert set(variables) == set(FUNCTIONS[name].environment), name
        assert "AWS_SAM_LOCAL" not in variables  # SAM's own, never the file's
    assert document["ApiFunction"]["FILEJOBS_LOCAL_CALLERS"] == "header"


def test_an_api_event_is_answered_in_sam_s_container_and_only_there(
    stack: RunningStack, written: dict[str, Path]
) -> None:
    # given the handler in an environment like SAM's container: the env file's variables alone
    document = json.loads((stack.root / ".filejobs" / "sam-env.json").read_text())
    container = {
        "PATH": os.environ["PATH"],
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": stack.config["region"],
        "AWS_REGION": stack.config["region"],
        "POWERTOOLS_TRACE_DISABLED": "true",
        **document["ApiFunction"],
    }
    event = written["ApiFunction-get-file"].read_text()
    api = FUNCTIONS["ApiFunction"]

    def status(environment: dict[str, str]) -> int:
        answered = subprocess.run(
            [sys.executable, "-c", SAM_LIKE_INVOKE, api.handler], input=event, env=environment,
            cwd=stack.root / api.code_uri, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert answered.returncode == 0, answered.stderr
        return int(json.loads(answered.stdout.strip().splitlines()[-1])["statusCode"])

    # then with SAM's AWS_SAM_LOCAL the header's tenant is the caller
    assert status({**container, "AWS_SAM_LOCAL": "true"}) == 200
    # and without it (as in AWS), or with the template's own value of the switch, no one is
    assert status(container) == 401
    assert status({**container, "AWS_SAM_LOCAL": "true", "FILEJOBS_LOCAL_CALLERS": ""}) == 401


def test_filejobs_events_writes_an_event_per_function_each_doing_its_real_thing(
    stack: RunningStack, written: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    # an event for every function that does something on a PNG (no video, no document) and
    # needs no record the stack makes only on request (an operation)
    made = {name.split("-")[0] for name in written}
    assert {
        "ApiFunction", "IngestRouterFunction", "IngestFunction", "VirusScanWorker",
        "ThumbnailGenerationWorker", "DeduplicationCheckWorker", "CompressionWorker",
        "EventsFunction", "StatsFunction", "WebhooksFunction", "SweepFunction", "RescanPolicy",
        "DefinitionsUpdater", "FileRemovalsFunction",
    } <= made <= set(FUNCTIONS)  # fmt: skip
    assert not made & {"VideoThumbnailWorker", "DocumentPreviewWorker", "OperationsFunction"}
    file_id = event_of(written["ApiFunction-get-file"])["pathParameters"]["file_id"]
    _, sample = stack.api(f"/files/{file_id}")
    assert sample["key"].startswith("uploads/acme/sam-local/sample-")

    # the API: the real file, its job, the tenant's jobs, and a cancel, as the header's tenant
    got = invoke(stack, "ApiFunction", written["ApiFunction-get-file"], capfd)
    assert got.answer is not None and got.answer["statusCode"] == 200, got.output
    assert (got.body["id"], got.body["scan_status"]) == (file_id, "clean")
    job_id = event_of(written["ApiFunction-get-job"])["pathParameters"]["job_id"]
    got = invoke(stack, "ApiFunction", written["ApiFunction-get-job"], capfd)
    assert got.answer is not None and got.answer["statusCode"] == 200, got.output
    assert (got.body["id"], got.body["status"]) == (job_id, "completed")
    got = invoke(stack, "ApiFunction", written["ApiFunction-list-jobs"], capfd)
    assert got.answer is not None and got.answer["statusCode"] == 200, got.output
    listed = got.body["jobs"]
    assert job_id in {job["id"] for job in listed}
    assert {job["tenant"] for job in listed} == {"acme"}
    to_cancel = event_of(written["ApiFunction-cancel-job"])["pathParameters"]["job_id"]
    assert stack.api(f"/jobs/{to_cancel}")[1]["status"] == "pending"
    got = invoke(stack, "ApiFunction", written["ApiFunction-cancel-job"], capfd)
    assert got.answer is not None and got.answer["statusCode"] == 200, got.output
    assert (got.body["status"], got.body["cancelled_by"]) == ("cancelled", "api:tenant:acme")

    # each worker runs the pending job its message names, to the end
    for worker in ("VirusScanWorker", "ThumbnailGenerationWorker", "DeduplicationCheckWorker",
                   "CompressionWorker"):  # fmt: skip
        message = json.loads(event_of(written[worker])["Records"][0]["body"])
        assert stack.api(f"/jobs/{message['job_id']}")[1]["status"] == "pending", worker
        got = invoke(stack, worker, written[worker], capfd)
        assert got.answer == {"batchItemFailures": []}, got.output
        assert stack.api(f"/jobs/{message['job_id']}")[1]["status"] == "completed", worker

    # the upload's notification: routed under its tenant; ingested as S3's redelivery, which
    # records nothing twice
    got = invoke(stack, "IngestRouterFunction", written["IngestRouterFunction"], capfd)
    assert got.answer == {"batchItemFailures": []}, got.output
    assert '"tenants":{"acme":1}' in got.output
    got = invoke(stack, "IngestFunction", written["IngestFunction"], capfd)
    assert got.answer == {"batchItemFailures": []}, got.output
    query = f"/files?key={sample['key']}&bucket={stack.config['uploads_bucket']}"
    assert [found["id"] for found in stack.api(query)[1]["files"]] == [file_id]

    # the stream's record of the scan's completion announced; the stats find it counted
    got = invoke(stack, "EventsFunction", written["EventsFunction"], capfd)
    assert got.answer == {"batchItemFailures": []}, got.output
    assert '"detail_type":"Job Completed"' in got.output and job_id in got.output
    got = invoke(stack, "StatsFunction", written["StatsFunction"], capfd)
    assert got.returncode == 0 and got.answer is not None and "state" in got.answer, got.output
    got = invoke(stack, "WebhooksFunction", written["WebhooksFunction"], capfd)
    assert got.answer == {"batchItemFailures": []}, got.output
    assert '"message":"event fanned out"' in got.output

    # the delete marker over the third sample: followed again, the file found deleted already
    record = event_of(written["FileRemovalsFunction"])["Records"][0]
    [removal] = json.loads(record["body"])["Records"]
    assert removal["eventName"] == "ObjectRemoved:DeleteMarkerCreated"
    got = invoke(stack, "FileRemovalsFunction", written["FileRemovalsFunction"], capfd)
    assert got.answer == {"batchItemFailures": []}, got.output
    assert '"message":"removal followed"' in got.output
    removed_key = urllib.parse.unquote_plus(removal["s3"]["object"]["key"])
    query = f"/files?key={removed_key}&bucket={stack.config['uploads_bucket']}"
    [removed] = stack.api(query)[1]["files"]
    assert removed["status"] == "deleted"

    # and the schedules' functions run on the stack's tables, mirror and policy
    got = invoke(stack, "SweepFunction", written["SweepFunction"], capfd)
    assert got.answer is not None and got.answer["errors"] == 0, got.output
    got = invoke(stack, "DefinitionsUpdater", written["DefinitionsUpdater"], capfd)
    assert got.answer is not None and got.answer["status"] in ("unchanged", "updated"), got.output
    got = invoke(stack, "RescanPolicy", written["RescanPolicy"], capfd)
    assert got.returncode == 0 and got.answer is not None, got.output


STATIC = {
    "api_": "ApiFunction",
    "definitions_": "DefinitionsUpdater",
    "events_": "EventsFunction",
    "ingest_": "IngestFunction",
    "operations_": "OperationsFunction",
    "sweep_": "SweepFunction",
    "webhooks_": "WebhooksFunction",
    "worker_": "VirusScanWorker",
}


def function_of(sample: Path) -> str:
    """The function a static sample of events/ is for, by its name's prefix."""
    return next(f for prefix, f in STATIC.items() if sample.name.startswith(prefix))


def test_every_static_sample_event_names_a_function_of_the_template() -> None:
    for path in sorted((ROOT / "events").glob("*.json")):
        assert function_of(path) in FUNCTIONS, path.name


def test_the_static_samples_are_answered_or_refused_cleanly_where_their_ids_do_not_exist(
    stack: RunningStack, capfd: pytest.CaptureFixture[str]
) -> None:
    samples = {path.stem: path for path in sorted((ROOT / "events").glob("*.json"))}
    # The custom resource's sample spends 14 s idle between its four attempts to answer
    # CloudFormation (2 + 4 + 8 s): it runs in its own process while the others run one by
    # one, all but the other run of the same updater, kept until it is done.
    creating = started(stack, "DefinitionsUpdater", samples.pop("definitions_cfn_create"))
    last = samples.pop("definitions_schedule")
    answers = {}
    try:
        for name, path in samples.items():
            answers[name] = invoke(stack, function_of(path), path, capfd)
    finally:
        answers["definitions_cfn_create"] = finished(creating)
    answers["definitions_schedule"] = invoke(stack, function_of(last), last, capfd)
    # the API: ids no one has are not found (as tenant acme, their authorizer context)
    for name, expected in (("api_get_job", 404), ("api_cancel_job", 404), ("api_list_jobs", 200)):
        answer = answers[name].answer
        assert answer is not None and answer["statusCode"] == expected, answers[name].output
    # an object, or a job, that is not there: the record is given back for SQS to retry
    for name in ("ingest_s3_upload", "events_job_completed"):
        answer = answers[name].answer
        assert answer is not None and len(answer["batchItemFailures"]) == 1, answers[name].output
    # a notification's test event, an operation or webhook event of no one: taken and dropped
    for name in ("ingest_s3_test_event", "operations_page", "webhooks_bus_event",
                 "worker_job_message"):  # fmt: skip
        assert answers[name].answer == {"batchItemFailures": []}, answers[name].output
    for name in ("sweep_schedule", "definitions_schedule"):
        assert answers[name].returncode == 0 and answers[name].answer is not None, name
    # the deploy-time custom resource answers CloudFormation at its ResponseURL, which is
    # nothing here: it says so and fails, as Lambda would report it
    create = answers["definitions_cfn_create"]
    assert create.returncode != 0
    assert "answering CloudFormation failed" in create.output
