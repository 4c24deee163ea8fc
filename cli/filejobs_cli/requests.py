"""`filejobs request FILE_ID JOB_TYPE`: a job of a type on a file (POST /files/{id}/jobs), with
its options, a delay or a time, and its attempt budget.

    filejobs request FILE_ID thumbnail_generation --option sizes=128,512 --option format=jpeg
    filejobs request FILE_ID compression --options '{"algorithm": "gzip", "level": 9}'
    filejobs request FILE_ID virus_scan --delay 10m --max-retries 1
    filejobs request FILE_ID compression --at 2026-12-24T18:00:00Z

`--option NAME=VALUE` (repeatable) reads VALUE as JSON when it is JSON (128, "x", [128],
true), as a list when it holds a comma (each item the same way: sizes=128,512 is [128, 512],
sizes=128, is [128]), else as text (format=jpeg). `--options JSON` gives them all at once;
`--option` adds to it. The API checks them against the job type's definition (docs/JOBS.md, Job
options) and answers what is wrong, field first. The CLI knows no option itself: the API is
the one judge.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import ApiClient, HttpError, Target, UsageError, add_target_options
from filejobs_cli.commands import job_summary, targeted, uuid_argument
from filejobs_cli.contract import JOB_TYPES

_DELAY = re.compile(r"(?P<number>[0-9]{1,7})(?P<unit>[smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DELAY_SECONDS = 30 * 86400  # the API's bound (domain/delays.py)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    request_ = commands.add_parser(
        "request", help="request a job of a type on a file: options, a delay, max retries"
    )
    request_.add_argument("file_id", type=uuid_argument, help="the file's id")
    request_.add_argument("job_type", choices=JOB_TYPES, help="the type of the job to run")
    request_.add_argument(
        "--option",
        action="append",
        default=[],
        type=option_argument,
        metavar="NAME=VALUE",
        help="one option (repeatable): sizes=128,512 format=jpeg algorithm=gzip level=9",
    )
    request_.add_argument(
        "--options", type=options_argument, metavar="JSON", help="every option, as a JSON object"
    )
    when = request_.add_mutually_exclusive_group()
    when.add_argument(
        "--delay",
        type=delay_argument,
        metavar="DURATION",
        help="start it this long from now: 90, 90s, 10m, 2h, 7d (at most 30 days)",
    )
    when.add_argument(
        "--at",
        type=time_argument,
        metavar="TIME",
        help="start it at this time: RFC 3339 with its offset, 2026-12-24T18:00:00Z",
    )
    request_.add_argument(
        "--max-retries", type=int, metavar="N", help="retries after a failed attempt (1-25)"
    )
    request_.add_argument("--priority", type=int, help="-100..0 (above 0: an operator's)")
    request_.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="the same key again answers the same job (default: a new one each time)",
    )
    request_.add_argument("--json", action="store_true", help="the API's answer as it is")
    request_.set_defaults(run=targeted(request, project_root))
    add_target_options(request_)


# --- arguments -------------------------------------------------------------------------------


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def option_argument(text: str) -> tuple[str, Any]:
    """NAME=VALUE: VALUE as JSON if it is, a list when it holds a comma, else text."""
    name, equals, raw = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, e.g. sizes=128,512; got {text!r}")
    value = _value(raw)
    if isinstance(value, str) and "," in raw:
        # "128," is a list of one
        value = [_value(part.strip()) for part in raw.split(",") if part.strip()]
    return name.strip(), value


def options_argument(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of options; got {text!r}")
    return value


def delay_argument(text: str) -> int:
    """90, 90s, 10m, 2h, 7d -> seconds."""
    found = _DELAY.fullmatch(text.strip())
    seconds = None if found is None else int(found["number"]) * _UNITS[found["unit"]]
    if seconds is None or seconds > MAX_DELAY_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a duration of at most 30 days: 90, 90s, 10m, 2h or 7d; got {text!r}"
        )
    return seconds


def time_argument(text: str) -> str:
    """An RFC 3339 time with its offset, passed on as written (the API judges the rest)."""
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time with its UTC offset, e.g. 2026-12-24T18:00:00Z; "
            f"got {text!r}"
        )
    return text


def body_of(arguments: argparse.Namespace) -> dict[str, Any]:
    """The POST body the arguments ask for."""
    body: dict[str, Any] = {"job_type": arguments.job_type}
    options = {**(arguments.options or {}), **dict(arguments.option)}
    if options:
        body["input_data"] = options
    if arguments.delay is not None:
        body["delay_seconds"] = arguments.delay
    if arguments.at is not None:
        body["run_at"] = arguments.at
    if arguments.max_retries is not None:
        body["max_retries"] = arguments.max_retries
    if arguments.priority is not None:
        body["priority"] = arguments.priority
    return body


# --- the command -----------------------------------------------------------------------------


def request(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    key = arguments.idempotency_key or str(uuid.uuid4())
    try:
        job = ApiClient(target).post(
            f"/files/{arguments.file_id}/jobs", body_of(arguments), {"Idempotency-Key": key}
        )
    except HttpError as error:
        if error.status in (404, 409, 422):
            raise UsageError(f"request refused: {error.message}") from None
        raise
    if arguments.json:
        print(json.dumps(job, indent=2), file=out)
        return 0
    print("\n".join(job_summary(job)), file=out)
    print(f"  key:      {key} (the same key again answers this job)", file=out)
    return 0
