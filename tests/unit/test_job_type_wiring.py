"""Every job type has everything docs/ADDING_A_JOB_TYPE.md lists: a missing piece fails here with
a message naming the step of the document that adds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

import filejobs.api_docs
from filejobs.config import dead_letter_url_variable, queue_url_variable
from filejobs.domain import content
from filejobs.domain.job import JobType
from filejobs.domain.job_options import OPTIONS
from filejobs.domain.messages import Lane
from filejobs.domain.scanning import GATED_JOB_TYPES
from filejobs.processors.registry import ScanSettings, processor_for
from filejobs_cli.contract import JOB_TYPES as CLI_JOB_TYPES
from filejobs_dev.infra.template import load_template

DOC = "docs/ADDING_A_JOB_TYPE.md"
STEPS = {
    1: "its JobType value",
    2: "its processor module",
    3: "its registry entry",
    4: "which files get it",
    5: "its queues, their alarm and its log group",
    6: "its worker",
    7: "its worker's role",
    8: "the template's lists of every job type's queues",
    9: "the CLI and the OpenAPI document",
}
TEMPLATE = load_template()
RESOURCES: dict[str, dict[str, Any]] = TEMPLATE["Resources"]
OPENAPI = json.loads((Path(filejobs.api_docs.__file__).parent / "openapi.json").read_text())


def step(number: int, job_type: JobType) -> str:
    return f"{job_type.value}: see step {number} of {DOC} ({STEPS[number]})"


def pascal(job_type: JobType) -> str:
    """The name of its resources: thumbnail_generation -> ThumbnailGeneration."""
    return "".join(part.title() for part in job_type.value.split("_"))


# The queue of each lane (domain/messages.py lane_of): its resource's suffix after the type's name.
LANE_SUFFIXES = {Lane.NORMAL: "", Lane.HIGH: "High", Lane.LOW: "Low"}


def lanes(job_type: JobType) -> set[str]:
    return {f"{pascal(job_type)}{suffix}Queue" for suffix in LANE_SUFFIXES.values()}


def targets(value: Any) -> set[str]:
    """The logical ids of `!GetAtt X.Arn` / `!Ref X` in a value or a list of them."""
    found: set[str] = set()
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict) and "Fn::GetAtt" in item:
            target = item["Fn::GetAtt"]
            found.add(target.partition(".")[0] if isinstance(target, str) else target[0])
        elif isinstance(item, dict) and "Ref" in item:
            found.add(item["Ref"])
    return found


def resource(logical_id: str, kind: str, message: str) -> dict[str, Any]:
    assert logical_id in RESOURCES, f"{message}: no {logical_id} in template.yaml"
    found = RESOURCES[logical_id]
    assert found["Type"] == kind, f"{message}: {logical_id} is a {found['Type']}, not a {kind}"
    return found


def statement(role: str, sid: str, message: str) -> dict[str, Any]:
    properties = RESOURCES[role]["Properties"]
    for policy in properties.get("Policies", []):
        for found in policy["PolicyDocument"]["Statement"]:
            if found.get("Sid") == sid:
                return cast("dict[str, Any]", found)
    raise AssertionError(f"{message}: {role} has no statement {sid}")


EVERY_TYPE = pytest.mark.parametrize("job_type", list(JobType), ids=str)


@EVERY_TYPE
def test_its_processor_is_a_module_of_the_processors_package_built_by_the_registry(
    job_type: JobType,
) -> None:
    s3 = cast("Any", object())  # the processors keep their client for later
    if job_type is JobType.VIRUS_SCAN:
        processor = processor_for(job_type, s3, ScanSettings(quarantine_bucket="q", clamd=None))
    else:
        try:
            processor = processor_for(job_type, s3, None)
        except ValueError as error:  # the registry's last resort is the virus scan's
            raise AssertionError(f"{step(3, job_type)}: processor_for has no branch") from error
    assert callable(processor), step(3, job_type)
    module = getattr(processor, "__module__", type(processor).__module__)
    assert module.startswith("filejobs.processors."), f"{step(2, job_type)}: from {module}"
    assert job_type in OPTIONS, f"{step(2, job_type)}: no OptionSet in domain/job_options.py"


@EVERY_TYPE
def test_some_files_get_it(job_type: JobType) -> None:
    planned = set(content._EVERY_FILE) | {rule for rule, _ in content._RULES}
    assert job_type in planned, f"{step(4, job_type)}: no rule of domain/content.py plans it"


@EVERY_TYPE
def test_it_has_three_lanes_a_dead_letter_queue_its_alarm_and_a_log_group(
    job_type: JobType,
) -> None:
    message, name = step(5, job_type), pascal(job_type)
    dead_letters = f"{name}DeadLetterQueue"
    resource(dead_letters, "AWS::SQS::Queue", message)
    for lane in sorted(lanes(job_type)):
        queue = resource(lane, "AWS::SQS::Queue", message)["Properties"]
        redrive = queue["RedrivePolicy"]["deadLetterTargetArn"]
        assert targets(redrive) == {dead_letters}, f"{message}: {lane} redrives elsewhere"
        assert isinstance(queue["VisibilityTimeout"], int), f"{message}: VisibilityTimeout"
    alarm = resource(f"{name}DeadLetterQueueAlarm", "AWS::CloudWatch::Alarm", message)
    watched = alarm["Properties"]["Dimensions"][0]["Value"]
    assert targets(watched) == {dead_letters}, f"{message}: its alarm watches another queue"
    resource(f"{name}WorkerLogGroup", "AWS::Logs::LogGroup", message)


@EVERY_TYPE
def test_its_worker_runs_the_shared_code_for_its_type_on_its_own_lanes(
    job_type: JobType,
) -> None:
    message, name = step(6, job_type), pascal(job_type)
    worker = resource(f"{name}Worker", "AWS::Serverless::Function", message)["Properties"]
    assert worker["CodeUri"] == "functions/worker", message
    assert worker["Environment"]["Variables"]["JOB_TYPE"] == job_type.value, message
    assert targets(worker["Role"]) == {f"{name}WorkerRole"}, message
    assert targets(worker["LoggingConfig"]["LogGroup"]) == {f"{name}WorkerLogGroup"}, message
    events = {key: targets(event["Properties"]["Queue"]) for key, event in worker["Events"].items()}
    assert events == {
        "NormalLane": {f"{name}Queue"},
        "HighLane": {f"{name}HighQueue"},
        "LowLane": {f"{name}LowQueue"},
    }, message
    # AWS's advice for an SQS event source: a visibility of 6x the function's timeout
    for lane in sorted(lanes(job_type)):
        visibility = RESOURCES[lane]["Properties"]["VisibilityTimeout"]
        assert visibility == 6 * worker["Timeout"], (
            f"{step(5, job_type)}: VisibilityTimeout {visibility} s, not 6 x its worker's"
            f" {worker['Timeout']} s"
        )


@EVERY_TYPE
def test_its_workers_role_may_consume_and_requeue_its_lanes_and_write_its_logs(
    job_type: JobType,
) -> None:
    message, name = step(7, job_type), pascal(job_type)
    role = f"{name}WorkerRole"
    resource(role, "AWS::IAM::Role", message)
    for sid in ("ConsumeEventSourceQueues", "RequeueOwnLanes"):
        granted = targets(statement(role, sid, message)["Resource"])
        assert granted == lanes(job_type), f"{message}: {sid} names {sorted(granted)}"
    logs = targets(statement(role, "WriteOwnLogs", message)["Resource"])
    assert logs == {f"{name}WorkerLogGroup"}, message


@EVERY_TYPE
def test_every_function_knows_its_queue_urls(job_type: JobType) -> None:
    message = f"{step(8, job_type)}: Globals.Function.Environment"
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    for lane, suffix in LANE_SUFFIXES.items():
        name = queue_url_variable(job_type, lane)
        assert name in variables, f"{message} has no {name}"
        assert variables[name] == {"Ref": f"{pascal(job_type)}{suffix}Queue"}, message


@EVERY_TYPE
def test_the_sweep_requeues_its_jobs_and_reviews_its_dead_letters(job_type: JobType) -> None:
    message, dead_letters = step(8, job_type), f"{pascal(job_type)}DeadLetterQueue"
    variables = RESOURCES["SweepFunction"]["Properties"]["Environment"]["Variables"]
    name = dead_letter_url_variable(job_type)
    assert variables.get(name) == {"Ref": dead_letters}, f"{message}: SweepFunction's {name}"
    requeue = targets(statement("SweepFunctionRole", "RequeueJobs", message)["Resource"])
    assert lanes(job_type) <= requeue, f"{message}: SweepFunctionRole RequeueJobs"
    review = targets(statement("SweepFunctionRole", "ReviewDeadLetters", message)["Resource"])
    assert dead_letters in review, f"{message}: SweepFunctionRole ReviewDeadLetters"


@EVERY_TYPE
@pytest.mark.parametrize(
    ("role", "sid"),
    [("IngestFunctionRole", "EnqueueJobs"), ("ApiFunctionRole", "DispatchRetriedJobs")],
)
def test_ingest_and_the_api_may_send_its_jobs(job_type: JobType, role: str, sid: str) -> None:
    message = step(8, job_type)
    granted = targets(statement(role, sid, message)["Resource"])
    assert lanes(job_type) <= granted, f"{message}: {role} {sid}"


@EVERY_TYPE
def test_the_scan_may_release_it_when_it_waits_for_the_verdict(job_type: JobType) -> None:
    message = f"{step(8, job_type)}: VirusScanWorkerRole ReleaseJobsOfCleanFile"
    released = targets(
        statement("VirusScanWorkerRole", "ReleaseJobsOfCleanFile", message)["Resource"]
    )
    if job_type in GATED_JOB_TYPES:
        assert lanes(job_type) <= released, f"{message} (it is in GATED_JOB_TYPES)"
    else:
        assert not lanes(job_type) & released, f"{message} (it is not in GATED_JOB_TYPES)"


@EVERY_TYPE
def test_the_cli_and_the_openapi_document_know_it(job_type: JobType) -> None:
    message = step(9, job_type)
    assert job_type.value in CLI_JOB_TYPES, (
        f"{message}: JOB_TYPES of filejobs_cli/contract.py (tools/openapi.py writes it)"
    )
    request = OPENAPI["components"]["schemas"]["JobRequest"]["discriminator"]["mapping"]
    assert job_type.value in request, f"{message}: run tools/openapi.py"
