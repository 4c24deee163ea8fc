"""Recurring schedules (POST/GET/PATCH/DELETE /schedules), on moto tables, queues and EventBridge
Scheduler built from template.yaml: a schedule is validated, armed in the stack's schedule group
with its cron, time zone and a message naming it; the local scheduler fires its runs at their
times; each run is an operation over the files under its prefix, started once however many times
the run is delivered; a paused or removed schedule starts nothing; a tenant sees only its own.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from filejobs.domain.job import JobType
from filejobs.domain.schedules import MAX_SCHEDULES_PER_TENANT
from filejobs_dev.local.scheduler import LocalScheduler
from tests.integration.test_api import ACME, GLOBEX, OPERATOR, Api, ingested, stack  # noqa: F401
from tests.integration.test_bulk_operations import call, drain, sqs_record
from tests.listing import jobs_of_file

NIGHTLY = "cron(0 3 * * ? *)"
AVATARS = "uploads/acme/avatars/"


@pytest.fixture
def api(stack: Api, monkeypatch: pytest.MonkeyPatch) -> Api:  # noqa: F811 (test_api's fixture)
    # the operations function's environment is the API's for what both read (the same stack)
    monkeypatch.setenv("OPERATION_RATE", "50")
    runtime.reset()
    runtime.tables()
    return stack


def nightly_thumbnails(api: Api, **changes: Any) -> tuple[int, Any]:
    body = {
        "name": "avatars nightly",
        "expression": NIGHTLY,
        "timezone": "Europe/Paris",
        "action": "run",
        "prefix": AVATARS,
        "job_type": "thumbnail_generation",
        "input_data": {"sizes": [64]},
        **changes,
    }
    return call(api, "POST", "/schedules", ACME, {k: v for k, v in body.items() if v is not None})


def group_name() -> str:
    return runtime.settings().require_scheduler()[0]


def armed(schedule_id: str) -> dict[str, Any]:
    found = boto3.client("scheduler").get_schedule(Name=schedule_id, GroupName=group_name())
    return dict(found)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def fire(api: Api, at: datetime) -> list[tuple[str, datetime]]:
    """The local scheduler, first looking now, then again at `at`; then the operations run."""
    sqs = boto3.client("sqs")
    url = api.queue_urls["OperationsQueue"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    clock = Clock(datetime.now(UTC))
    scheduler = LocalScheduler(
        boto3.client("scheduler"),
        sqs,
        [group_name()],
        {arn["Attributes"]["QueueArn"]: url},
        clock=clock,
    )
    assert scheduler.tick() == []  # first seen now: its runs from here on
    clock.now = at
    fired = scheduler.tick()
    drain(api)
    return fired


def test_a_schedule_is_armed_in_eventbridge_scheduler_with_its_cron_and_message(api: Api) -> None:
    # when acme schedules thumbnails again for its avatars every night at 03:00 in Paris
    status, made = nightly_thumbnails(api)
    # then it is recorded, with its next runs at 03:00 Paris time (02:00 UTC in winter)
    assert status == 201, made
    assert (made["tenant"], made["action"], made["job_type"]) == (
        "acme",
        "run",
        "thumbnail_generation",
    )
    assert made["enabled"] is True and made["runs"] == 0
    assert len(made["next_runs"]) == 3
    first = datetime.fromisoformat(made["next_runs"][0])
    assert first.astimezone(UTC).hour in (1, 2)  # 03:00 in Paris, summer or winter
    # and armed in the stack's group, its runs sent to the operations queue naming it
    schedule = armed(made["id"])
    assert schedule["ScheduleExpression"] == NIGHTLY
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert schedule["State"] == "ENABLED"
    assert schedule["Target"]["Arn"] == runtime.settings().operations_queue_arn
    run = json.loads(schedule["Target"]["Input"])["schedule_run"]
    assert run == {
        "tenant": "acme",
        "schedule_id": made["id"],
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"expression": "cron(0 * * * ? *)"}, "expression"),  # hourly: closer than 23 h
        ({"expression": "cron(0 3 L * ? *)"}, "expression"),
        ({"expression": "rate(1 day)"}, "expression"),
        ({"expression": "cron(0 3 * * * *)"}, "expression"),  # both day fields
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"prefix": "uploads/globex/"}, "prefix"),
        ({"job_type": None}, "job_type"),
        ({"job_type": "virus_scan"}, "job_type"),
        ({"action": "rescan"}, "job_type"),  # a rescan takes no job_type
        ({"input_data": {"sizes": [8000]}}, "input_data.sizes[0]"),
        ({"prefix": None}, "prefix"),  # (schemathesis: a null where text is required)
        ({"timezone": ""}, "timezone"),
        ({"input_data": {"quality": 5}}, "input_data.quality"),
    ],
)
def test_a_schedule_that_cannot_run_as_asked_is_refused_naming_the_field(
    api: Api, changes: dict[str, Any], field: str
) -> None:
    status, body = nightly_thumbnails(api, **changes)
    assert status == 422, body
    assert body["error"]["message"].startswith(f"{field}:"), body
    # and nothing was recorded or armed
    assert call(api, "GET", "/schedules", ACME)[1] == {"schedules": []}
    listed = boto3.client("scheduler").list_schedules(GroupName=group_name())
    assert listed["Schedules"] == []


def test_a_run_is_an_operation_over_the_files_under_the_prefix_started_once(api: Api) -> None:
    # given acme's avatars (two PNGs and a text file) and a photo elsewhere
    avatars = [ingested("acme", f"avatars/{n}.png") for n in range(2)]
    elsewhere = ingested("acme", "photos/holiday.png")
    _, made = nightly_thumbnails(api)
    # when the scheduler reaches the next run
    next_run = datetime.fromisoformat(made["next_runs"][0])
    fired = fire(api, next_run + timedelta(seconds=1))
    # then one run was sent, and its operation gave each avatar a new thumbnail job
    assert fired == [(made["id"], next_run)]
    _, schedule = call(api, "GET", f"/schedules/{made['id']}", ACME)
    assert schedule["runs"] == 1
    assert schedule["last_run_at"] == next_run.isoformat()
    _, operation = call(api, "GET", f"/operations/{schedule['last_operation_id']}", ACME)
    assert operation["status"] == "succeeded"
    assert operation["schedule_id"] == made["id"]
    assert operation["files"] == {
        "tenant": "acme",
        "prefix": AVATARS,
        "job_type": "thumbnail_generation",
        "options": {"sizes": [64]},
    }
    assert (operation["processed"], operation["changed"]) == (2, 2)
    for plan in avatars:
        thumbnails = [
            j for j in jobs_of_file(plan.file.id) if j.job_type is JobType.THUMBNAIL_GENERATION
        ]
        assert len(thumbnails) == 2  # ingest's and the run's
        run_job = next(j for j in thumbnails if j.triggered_by == f"schedule:{made['id']}")
        assert run_job.input_data is not None and run_job.input_data["sizes"] == [64]
        # a backfill of the prefix: in the type's low lane, behind the tenant's new uploads
        assert run_job.priority < 0
        # named among the file's jobs, and not counted among its API jobs
        stored = FileRepository().get(plan.file.id)
        assert stored is not None and run_job.id in stored.job_ids
    assert len(jobs_of_file(elsewhere.file.id)) == len(elsewhere.jobs)
    # when the scheduler delivers the same run again
    url = api.queue_urls["OperationsQueue"]
    again = armed(made["id"])["Target"]["Input"].replace(
        "<aws.scheduler.scheduled-time>", next_run.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    boto3.client("sqs").send_message(QueueUrl=url, MessageBody=again)
    drain(api)
    # then no second operation and no second job
    _, schedule = call(api, "GET", f"/schedules/{made['id']}", ACME)
    assert schedule["runs"] == 1
    _, listed = call(api, "GET", "/operations", ACME)
    assert [o["id"] for o in listed["operations"]] == [schedule["last_operation_id"]]
    assert sum(len(jobs_of_file(p.file.id)) for p in avatars) == 2 * (len(avatars[0].jobs) + 1)


def test_a_rescan_schedule_rescans_every_file_under_its_prefix(api: Api) -> None:
    contracts = [ingested("acme", f"contracts/{n}.png") for n in range(3)]
    status, made = call(
        api, "POST", "/schedules", ACME,
        {"name": "monthly rescan", "expression": "cron(0 2 1 * ? *)", "action": "rescan",
         "prefix": "uploads/acme/contracts/"},
    )  # fmt: skip
    assert status == 201, made
    fire(api, datetime.fromisoformat(made["next_runs"][0]) + timedelta(minutes=1))
    for plan in contracts:
        scans = [j for j in jobs_of_file(plan.file.id) if j.job_type is JobType.VIRUS_SCAN]
        assert len(scans) == 2


def test_a_paused_schedule_starts_nothing_and_a_removed_one_is_disarmed(api: Api) -> None:
    ingested("acme", "avatars/a.png")
    _, made = nightly_thumbnails(api)
    # when acme pauses it
    status, paused = call(api, "PATCH", f"/schedules/{made['id']}", ACME, {"enabled": False})
    # then the scheduler holds it disabled, and a run delivered anyway is dropped
    assert status == 200 and paused["enabled"] is False and paused["next_runs"] == []
    assert armed(made["id"])["State"] == "DISABLED"
    run = json.loads(armed(made["id"])["Target"]["Input"])
    run["schedule_run"]["scheduled_time"] = "2030-01-01T02:00:00Z"
    answer = _run(json.dumps(run))
    assert answer["batchItemFailures"] == []
    assert call(api, "GET", "/operations", ACME)[1]["operations"] == []
    # when it is resumed then removed
    assert call(api, "PATCH", f"/schedules/{made['id']}", ACME, {"enabled": True})[0] == 200
    assert armed(made["id"])["State"] == "ENABLED"
    response = api.raw("DELETE", f"/schedules/{made['id']}", who=ACME)
    assert response["statusCode"] == 204
    # then it is gone from the record and from the scheduler; a late run is dropped
    assert call(api, "GET", f"/schedules/{made['id']}", ACME)[0] == 404
    listed = boto3.client("scheduler").list_schedules(GroupName=group_name())
    assert listed["Schedules"] == []
    assert _run(json.dumps(run))["batchItemFailures"] == []
    assert call(api, "GET", "/operations", ACME)[1]["operations"] == []


def test_a_tenant_sees_and_changes_only_its_own_schedules(api: Api) -> None:
    _, made = nightly_thumbnails(api)
    assert call(api, "GET", f"/schedules/{made['id']}", GLOBEX)[0] == 404
    assert call(api, "PATCH", f"/schedules/{made['id']}", GLOBEX, {"enabled": False})[0] == 404
    assert api.raw("DELETE", f"/schedules/{made['id']}", who=GLOBEX)["statusCode"] == 404
    assert call(api, "GET", "/schedules", GLOBEX)[1] == {"schedules": []}
    assert call(api, "GET", "/schedules?tenant=acme", GLOBEX)[0] == 404
    # an operator sees every tenant's, or one's, and makes one for a tenant it names
    assert [s["id"] for s in call(api, "GET", "/schedules", OPERATOR)[1]["schedules"]] == [
        made["id"]
    ]
    status, body = call(
        api, "POST", "/schedules", OPERATOR,
        {"name": "x", "expression": NIGHTLY, "action": "rescan", "prefix": "uploads/globex/"},
    )  # fmt: skip
    assert status == 422 and body["error"]["message"].startswith("tenant:")
    status, body = call(
        api, "POST", "/schedules", OPERATOR,
        {"name": "x", "expression": NIGHTLY, "action": "rescan", "prefix": "uploads/globex/",
         "tenant": "globex"},
    )  # fmt: skip
    assert status == 201 and body["tenant"] == "globex"


def test_a_tenant_has_a_bounded_number_of_schedules(api: Api) -> None:
    for n in range(MAX_SCHEDULES_PER_TENANT):
        assert nightly_thumbnails(api, name=f"s{n}")[0] == 201
    status, body = nightly_thumbnails(api, name="one too many")
    assert status == 409, body


def _run(body: str) -> dict[str, Any]:
    from functions.operations import app as operations_function  # noqa: PLC0415
    from tests.integration.test_api import CONTEXT  # noqa: PLC0415

    return dict(operations_function.handler({"Records": [sqs_record(body)]}, CONTEXT))
