"""`filejobs schedules`: recurring schedules (POST/GET/PATCH/DELETE /schedules).

    filejobs schedules add "avatars nightly" --cron "cron(0 3 * * ? *)" --timezone Europe/Paris \\
        --prefix uploads/acme/avatars/ --run thumbnail_generation --option sizes=64,256
    filejobs schedules add "contracts monthly" --cron "cron(0 2 1 * ? *)" \\
        --prefix uploads/acme/contracts/ --rescan
    filejobs schedules list [--tenant T] [--json]
    filejobs schedules show|pause|resume|remove SCHEDULE_ID

Each run is an operation over the files under the prefix: `filejobs bulk status OP_ID` follows
it (a schedule shows its last run's operation).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import ApiClient, Target, UsageError, add_target_options
from filejobs_cli.commands import print_listing, targeted
from filejobs_cli.contract import JOB_TYPES
from filejobs_cli.quotas import tenant_argument
from filejobs_cli.requests import option_argument

JSON_HELP = "the API's JSON as it is"
_SCHEDULE_ID = re.compile(r"sch-[0-9a-f]{16}")
# Every job type but the scan: the API refuses to run virus_scan on a schedule (422: "use the
# rescan action"), which --rescan asks for.
RESCANNED = "virus_scan"
RUNNABLE_JOB_TYPES = tuple(job_type for job_type in JOB_TYPES if job_type != RESCANNED)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    schedules_ = commands.add_parser("schedules", help="recurring schedules over a key prefix")
    actions = schedules_.add_subparsers(dest="action", required=True)

    add_ = actions.add_parser("add", help="a new schedule: rescan, or run a job, on a cron")
    add_.add_argument("name", help="a name to know it by")
    add_.add_argument("--cron", required=True, help='e.g. "cron(0 3 * * ? *)" (03:00 daily)')
    add_.add_argument("--timezone", default="UTC", help="IANA name (default UTC)")
    add_.add_argument("--prefix", required=True, help="an object key prefix: uploads/TENANT/...")
    what = add_.add_mutually_exclusive_group(required=True)
    what.add_argument("--rescan", action="store_true", help="scan every file again")
    what.add_argument(
        "--run",
        dest="job_type",
        choices=RUNNABLE_JOB_TYPES,
        metavar="JOB_TYPE",
        help="a new job on each",
    )
    add_.add_argument(
        "--option",
        action="append",
        default=[],
        type=option_argument,
        metavar="NAME=VALUE",
        help="an option of --run's jobs (repeatable), as `filejobs request` takes it",
    )
    add_.add_argument("--tenant", type=tenant_argument, help="operators: whose schedule")
    add_.add_argument("--json", action="store_true", help=JSON_HELP)
    add_.set_defaults(run=targeted(add, project_root, check_add))

    list_ = actions.add_parser("list", help="the schedules, with their next runs")
    list_.add_argument("--tenant", type=tenant_argument, help="only this tenant's (operators)")
    list_.add_argument("--json", action="store_true", help=JSON_HELP)
    list_.set_defaults(run=targeted(list_schedules, project_root))

    parsers = [add_, list_]
    for name, help_text in (
        ("show", "one schedule: next runs, last run's operation"),
        ("pause", "no run starts until resumed"),
        ("resume", "runs again from its next time"),
        ("remove", "remove it; its runs' operations stay in the audit list"),
    ):
        one = actions.add_parser(name, help=help_text)
        one.add_argument(
            "schedule_id", type=schedule_id_argument, help="the schedule's id (sch-...)"
        )
        one.add_argument("--json", action="store_true", help=JSON_HELP)
        one.set_defaults(run=targeted(ONE[name], project_root))
        parsers.append(one)
    for parser in parsers:
        add_target_options(parser)


def schedule_id_argument(value: str) -> str:
    if not _SCHEDULE_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(f"a schedule id is sch- and 16 hex digits; got {value!r}")
    return value


def check_add(arguments: argparse.Namespace) -> None:
    if arguments.option and not arguments.job_type:
        raise UsageError("schedules add: --option goes with --run JOB_TYPE")


def body_of(arguments: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": arguments.name,
        "expression": arguments.cron,
        "timezone": arguments.timezone,
        "prefix": arguments.prefix,
        "action": "run" if arguments.job_type else "rescan",
    }
    if arguments.job_type:
        body["job_type"] = arguments.job_type
        options = dict(arguments.option)
        if options:
            body["input_data"] = options
    if arguments.tenant:
        body["tenant"] = arguments.tenant
    return body


def add(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    made = ApiClient(target).request("POST", "/schedules", body=body_of(arguments))
    _print(made, arguments.json, out)
    return 0


def list_schedules(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    found = ApiClient(target).get("/schedules", {"tenant": arguments.tenant})
    print_listing(
        found, "schedules", summary_line, out, as_json=arguments.json, empty="no schedules"
    )
    return 0


def show(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    _print(ApiClient(target).get(f"/schedules/{arguments.schedule_id}"), arguments.json, out)
    return 0


def pause(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    return _set_enabled(arguments, target, out, enabled=False)


def resume(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    return _set_enabled(arguments, target, out, enabled=True)


def remove(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    ApiClient(target).request("DELETE", f"/schedules/{arguments.schedule_id}")
    print(f"removed {arguments.schedule_id}", file=out)
    return 0


ONE = {"show": show, "pause": pause, "resume": resume, "remove": remove}


def _set_enabled(
    arguments: argparse.Namespace, target: Target, out: TextIO, *, enabled: bool
) -> int:
    path = f"/schedules/{arguments.schedule_id}"
    # Paused or resumed is a state: asking twice is asking once (safe to send again).
    changed = ApiClient(target).request("PATCH", path, body={"enabled": enabled}, repeatable=True)
    _print(changed, arguments.json, out)
    return 0


def _print(schedule: Any, as_json: bool, out: TextIO) -> None:
    if not isinstance(schedule, dict):
        raise UsageError("the API answered with something that is not a schedule")
    print(json.dumps(schedule, indent=2) if as_json else "\n".join(details(schedule)), file=out)


def summary_line(schedule: dict[str, Any]) -> str:
    state = "" if schedule.get("enabled") else " (paused)"
    runs = schedule.get("next_runs") or []
    following = f", next {runs[0]}" if runs else ""
    return (
        f"{schedule.get('id')}  {schedule.get('tenant')}  {schedule.get('name')!r}: "
        f"{what_it_does(schedule)} {schedule.get('expression')} "
        f"{schedule.get('timezone')}{following}{state}"
    )


def what_it_does(schedule: dict[str, Any]) -> str:
    if schedule.get("action") == "run":
        return f"{schedule.get('job_type')} on {schedule.get('prefix')}"
    return f"rescan of {schedule.get('prefix')}"


def details(schedule: dict[str, Any]) -> list[str]:
    name, tenant = schedule.get("name"), schedule.get("tenant")
    lines = [
        f"schedule {schedule.get('id')} ({name!r}, tenant {tenant})",
        f"  does:      {what_it_does(schedule)}",
        f"  when:      {schedule.get('expression')} in {schedule.get('timezone')}"
        + ("" if schedule.get("enabled") else " (paused)"),
    ]
    if schedule.get("input_data"):
        lines.append(f"  options:   {json.dumps(schedule['input_data'], sort_keys=True)}")
    for run in schedule.get("next_runs") or []:
        lines.append(f"  next run:  {run}")
    lines.append(f"  runs:      {schedule.get('runs', 0)}")
    if schedule.get("last_run_at"):
        operation = schedule.get("last_operation_id")
        lines.append(f"  last run:  {schedule['last_run_at']} (operation {operation})")
    return lines
