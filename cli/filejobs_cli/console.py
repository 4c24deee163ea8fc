"""The console's powers on the command line (docs/CONSOLE.md): search, failure groups, bulk actions.

    filejobs search --status failed --type thumbnail_generation [--all] [--json]
    filejobs search --tenant acme --prefix uploads/acme/contracts/       # files, not jobs
    filejobs failures [--tenant T] [--type JOB_TYPE] [--json]
    filejobs bulk retry --group thumbnail_generation.3f2a9c1b7e4d5a60 --reason "fixed in v42"
    filejobs bulk status OP_ID  |  filejobs bulk list [--tenant T]

A bulk action always asks the API for its dry run first and says how many jobs it would change;
it starts only with --yes or once confirmed on a terminal, then follows the operation to its end.
Every argument is checked here, before any request.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import (
    ApiClient,
    CliError,
    HttpError,
    Target,
    UsageError,
    add_target_options,
)
from filejobs_cli.commands import PAGE_MAX, positive_int, targeted
from filejobs_cli.contract import JOB_STATUSES, JOB_TYPES
from filejobs_cli.progress import shorten
from filejobs_cli.quotas import tenant_argument

ACTIONS = ("retry", "cancel", "rescan", "delete")
FINISHED = frozenset({"succeeded", "failed"})
DEFAULT_LIMIT = 25
POLL_SECONDS = 1.0
SAMPLE_SHOWN = 5
MAX_FILTER_TEXT = 200  # the API's longest filter value (error text, and any other)
MAX_REASON = 500
MAX_KEY_BYTES = 1024
# The API's own patterns (filejobs.domain.failures and .operations; the CLI ships without them).
_GROUP = re.compile(r"(?P<type>[a-z_]+)\.[0-9a-f]{16}")
_OPERATION_ID = re.compile(r"op-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")
# The filter fields of GET /jobs and of an operation, in the order they are shown.
FILTER_FIELDS = ("tenant", "job_type", "status", "group", "error", "since", "until")


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    """Adds search, failures and bulk to the `filejobs` command."""
    search_ = commands.add_parser(
        "search", help="jobs by tenant, status, type, failure group, error text, time; or files"
    )
    add_filter_options(search_)
    search_.add_argument(
        "--prefix", metavar="KEY_PREFIX", type=prefix_argument,
        help="list the files under this key prefix instead of jobs (with --tenant)",
    )  # fmt: skip
    search_.add_argument(
        "--limit", type=positive_int, metavar="N", help=f"at most N rows (default {DEFAULT_LIMIT})"
    )
    search_.add_argument("--all", action="store_true", help="every match, page after page")
    search_.add_argument("--json", action="store_true", help="the rows as the API gives them")
    search_.set_defaults(run=targeted(search, project_root, check_search))

    failures_ = commands.add_parser("failures", help="failed jobs grouped by how they failed")
    failures_.add_argument("--tenant", type=tenant_argument, help="only this tenant's failures")
    failures_.add_argument(
        "--type", choices=JOB_TYPES, metavar="JOB_TYPE", help="only this job type's failures"
    )
    failures_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    failures_.set_defaults(run=targeted(failures, project_root))

    bulk_ = commands.add_parser("bulk", help="retry, cancel, rescan or delete jobs by filter")
    bulk_actions = bulk_.add_subparsers(dest="bulk", required=True)
    parsers = [failures_, search_]
    for action in ACTIONS:
        action_ = bulk_actions.add_parser(action, help=ACTION_HELP[action])
        action_.add_argument(
            "--reason", required=True, type=reason_argument, metavar="TEXT",
            help=f"why (kept in the audit record; 1-{MAX_REASON} characters)",
        )  # fmt: skip
        add_filter_options(action_)
        action_.add_argument("--dry-run", action="store_true", help="count, change nothing")
        action_.add_argument("--yes", action="store_true", help="start without asking")
        action_.add_argument("--no-wait", action="store_true", help="start, do not follow")
        action_.add_argument("--json", action="store_true", help="the API's JSON on stdout")
        action_.set_defaults(action=action, run=targeted(bulk, project_root, check_bulk))
        parsers.append(action_)

    status_ = bulk_actions.add_parser("status", help="an operation's progress")
    status_.add_argument(
        "operation_id", type=operation_id_argument, metavar="OP_ID", help="the operation's id"
    )
    status_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    status_.set_defaults(run=targeted(operation_status, project_root))

    list_ = bulk_actions.add_parser("list", help="the audit list of operations, newest first")
    list_.add_argument("--tenant", type=tenant_argument, help="only this tenant's operations")
    list_.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"at most N (default {DEFAULT_LIMIT})",
    )
    list_.add_argument("--json", action="store_true", help="the operations as the API gives them")
    list_.set_defaults(run=targeted(operation_list, project_root))

    for parser in (*parsers, status_, list_):
        add_target_options(parser)


ACTION_HELP = {
    "retry": "retry the failed or cancelled jobs a filter matches",
    "cancel": "cancel the pending, scheduled or running jobs a filter matches",
    "rescan": "scan again the files of the jobs a filter matches",
    "delete": "delete the finished jobs a filter matches",
}


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    """The filters of GET /jobs and of an operation's `filter`."""
    parser.add_argument("--tenant", type=tenant_argument, help="one tenant's jobs")
    parser.add_argument("--status", choices=JOB_STATUSES, help="jobs in this status")
    parser.add_argument(
        "--type", choices=JOB_TYPES, metavar="JOB_TYPE", dest="job_type", help="jobs of this type"
    )
    parser.add_argument("--group", type=group_argument, help="a failure group's id")
    parser.add_argument(
        "--error", type=error_argument, metavar="TEXT",
        help="text the error message contains (case-sensitive)",
    )  # fmt: skip
    parser.add_argument("--since", type=moment_argument, metavar="ISO", help="created at or after")
    parser.add_argument("--until", type=moment_argument, metavar="ISO", help="created before")


# --- argument validation (argparse `type=` functions: a bad value exits 2) --------------------


def group_argument(value: str) -> str:
    match = _GROUP.fullmatch(value)
    if match is None or match["type"] not in JOB_TYPES:
        raise argparse.ArgumentTypeError(
            f"expected a failure group's id, JOB_TYPE.<16 hex digits> "
            f"(`filejobs failures` lists them), got {value!r}"
        )
    return value


def error_argument(value: str) -> str:
    if not 0 < len(value) <= MAX_FILTER_TEXT:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_FILTER_TEXT} characters of text")
    return value


def reason_argument(value: str) -> str:
    if not value.strip() or len(value) > MAX_REASON:
        raise argparse.ArgumentTypeError(f"a reason is 1 to {MAX_REASON} characters, not blank")
    return value


def moment_argument(value: str) -> str:
    """An ISO 8601 time, sent as UTC (a time without a zone is taken as UTC, as the API does)."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time, e.g. 2026-12-04T12:00:00Z, got {value!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def prefix_argument(value: str) -> str:
    if not value or len(value.encode("utf-8", errors="replace")) > MAX_KEY_BYTES:
        raise argparse.ArgumentTypeError(f"a key prefix is 1 to {MAX_KEY_BYTES} bytes")
    return value


def operation_id_argument(value: str) -> str:
    if not _OPERATION_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"expected an operation id like op-20261204T120000Z-5f3c2a1b, got {value!r}"
        )
    return value


def filter_of(arguments: argparse.Namespace) -> dict[str, str]:
    """The filter fields given, as GET /jobs and POST /operations name them."""
    return {
        name: value for name in FILTER_FIELDS if (value := getattr(arguments, name)) is not None
    }


def check_filter(command: str, arguments: argparse.Namespace) -> None:
    """What the API would refuse in any filter, refused here first."""
    if arguments.group is not None:
        group_type = arguments.group.split(".", 1)[0]
        if arguments.job_type not in (None, group_type):
            raise UsageError(f"{command}: --group is a {group_type} group, not --type's")
        if arguments.status not in (None, "failed"):
            raise UsageError(f"{command}: a failure group holds failed jobs only (--status)")
    if (
        arguments.since
        and arguments.until
        and datetime.fromisoformat(arguments.since) >= datetime.fromisoformat(arguments.until)
    ):
        raise UsageError(f"{command}: --since must be before --until")


def check_search(arguments: argparse.Namespace) -> None:
    if arguments.all and arguments.limit is not None:
        raise UsageError("search: give --limit or --all, not both")
    if arguments.prefix is not None:
        given = [f"--{n.replace('_', '-')}" for n in FILTER_FIELDS[1:] if getattr(arguments, n)]
        if given:
            raise UsageError(f"search: --prefix lists files; {given[0]} filters jobs")
        if arguments.tenant is None:
            raise UsageError("search: --prefix lists one tenant's files: give --tenant")
        return
    check_filter("search", arguments)
    if arguments.tenant is None and arguments.status is None and arguments.group is None:
        # The API's rule for an operator (the local stack's caller), as for `filejobs jobs`.
        raise UsageError(
            "search: give --tenant, --status or --group "
            "(an operator searches one tenant, one status or one failure group)"
        )


def check_bulk(arguments: argparse.Namespace, stdin: TextIO | None = None) -> None:
    check_filter(f"bulk {arguments.action}", arguments)
    if arguments.tenant is None and arguments.status is None and arguments.group is None:
        raise UsageError(
            f"bulk {arguments.action}: give --tenant, --status or --group "
            "(an action across tenants names a status or a failure group)"
        )
    if arguments.dry_run or arguments.yes:
        return
    if not (stdin or sys.stdin).isatty():
        raise UsageError(
            f"bulk {arguments.action}: not asking for confirmation without a terminal; "
            "give --yes to start it, or --dry-run to count only"
        )


# --- search ---------------------------------------------------------------------------------


def search(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    check_search(arguments)
    limit = None if arguments.all else (arguments.limit or DEFAULT_LIMIT)
    render: Callable[[Sequence[Mapping[str, Any]]], list[str]]
    if arguments.prefix is not None:
        query = {"prefix": arguments.prefix, "tenant": arguments.tenant}
        rows, render = "files", render_files
        listing = Listing(ApiClient(target), "/files", rows, query, limit)
    else:
        rows, render = "jobs", render_jobs
        listing = Listing(ApiClient(target), "/jobs", rows, filter_of(arguments), limit)
    found = list(listing)
    if arguments.json:
        print(json.dumps({rows: found, "next_token": listing.next_token}, indent=2), file=out)
        return 0
    print("\n".join(render(found)) if found else f"no {rows}", file=out)
    if listing.next_token:
        print(f"(more: --limit N for more than {limit}, or --all)", file=out)
    return 0


class Listing:
    """The rows of a paged listing, page after page, `limit` at most (None: every one).

    A page may come back short, or empty, with a next_token (a search reads a bounded number
    of index pages per request): the listing goes on while there is one.
    """

    def __init__(
        self,
        api: ApiClient,
        path: str,
        rows: str,
        query: Mapping[str, str | None],
        limit: int | None,
    ) -> None:
        self.api, self.path, self.rows, self.query, self.limit = api, path, rows, query, limit
        self.next_token: str | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        remaining = self.limit
        while remaining is None or remaining > 0:
            size = PAGE_MAX if remaining is None else min(remaining, PAGE_MAX)
            page = self.api.get(
                self.path, {**self.query, "limit": str(size), "next_token": self.next_token}
            )
            if not isinstance(page, dict):
                raise CliError(f"the API answered GET {self.path} with something not a page")
            batch = list(page.get(self.rows) or [])[:size]
            yield from batch
            if remaining is not None:
                remaining -= len(batch)
            self.next_token = page.get("next_token") or None
            if self.next_token is None:
                return


def render_jobs(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    return table(
        ("ID", "TENANT", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "ERROR"),
        [
            (
                str(j.get("id")),
                str(j.get("tenant")),
                str(j.get("job_type")),
                str(j.get("status")),
                str(attempts_of(j)),
                when(j.get("created_at")),
                shorten(str(j.get("error_message") or ""), 60),
            )
            for j in jobs
        ],
    )


def attempts_of(job: Mapping[str, Any]) -> int:
    """How many times the job ran: its attempts recorded, else its attempt number."""
    attempts = job.get("attempts")
    if isinstance(attempts, list):
        return len(attempts)
    return int(job.get("attempt") or 0)


def render_files(files: Sequence[Mapping[str, Any]]) -> list[str]:
    return table(
        ("ID", "KEY", "SIZE", "STATUS", "SCAN"),
        [
            (
                str(f.get("id")),
                shorten(str(f.get("key")), 60),
                str(f.get("size")),
                str(f.get("status")),
                str(f.get("scan_status") or "-"),
            )
            for f in files
        ],
    )


# --- failures --------------------------------------------------------------------------------


def failures(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    query = {"tenant": arguments.tenant, "job_type": arguments.type}
    try:
        answer = ApiClient(target).get("/failures", query)
    except HttpError as error:
        if route_missing(error):
            raise CliError(
                f"{target.description} has no GET /failures: its API is older than this CLI"
            ) from None
        raise
    if not isinstance(answer, dict) or not isinstance(answer.get("groups"), list):
        raise CliError("the API answered GET /failures with something not failure groups")
    if arguments.json:
        print(json.dumps(answer, indent=2), file=out)
    else:
        groups = answer["groups"]
        print("\n".join(render_failures(groups)) if groups else "no failed jobs", file=out)
    return 0


def route_missing(error: HttpError) -> bool:
    """Whether the answer says the API has no such route: the API function's own 404, the local
    stack's front, or API Gateway's answer to a path it has no resource for."""
    return (
        error.status == 404 and error.message in {"no such route", "no route for /failures"}
    ) or (error.status == 403 and error.message.endswith("Missing Authentication Token"))


def render_failures(groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per group, largest first as the API orders them."""
    return table(
        ("GROUP", "TYPE", "COUNT", "FIRST SEEN", "LAST SEEN", "FINGERPRINT", "SAMPLE ERROR"),
        [
            (
                str(g.get("id")),
                str(g.get("job_type")),
                str(g.get("count")),
                when(g.get("first_seen")),
                when(g.get("last_seen")),
                shorten(str(g.get("fingerprint") or ""), 48),
                shorten(str((g.get("sample") or {}).get("error_message") or ""), 48),
            )
            for g in groups
        ],
    )


# --- bulk actions ----------------------------------------------------------------------------


def bulk(
    arguments: argparse.Namespace,
    target: Target,
    out: TextIO | None = None,
    stdin: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Dry run, then (confirmed) start, then follow: 0 when it succeeded with no errors."""
    out = out or sys.stdout
    check_bulk(arguments, stdin)
    stdin, err = stdin or sys.stdin, err or sys.stderr
    # With --json stdout holds one JSON document; what a person reads goes to stderr.
    say = err if arguments.json else out
    api = ApiClient(target)
    action = arguments.action
    body = {"action": action, "filter": filter_of(arguments), "reason": arguments.reason}
    # A dry run changes nothing: safe to send again.
    dry_run = api.post("/operations", {**body, "dry_run": True}, repeatable=True)
    preview = _object(dry_run, "a dry run")
    print("\n".join(dry_run_lines(action, preview)), file=say, flush=True)
    if arguments.dry_run:
        if arguments.json:
            print(json.dumps(preview, indent=2), file=out)
        return 0
    if preview.get("matched") == 0 and preview.get("exact", True):
        print(f"nothing to {action}: no job matches", file=say)
        return 0
    if not arguments.yes and not confirmed(action, preview, arguments.reason, stdin, say):
        print("not confirmed: nothing changed", file=say)
        return 1
    key = str(uuid.uuid4())
    print(f"Idempotency-Key: {key}", file=say, flush=True)
    started = api.post("/operations", body, headers={"Idempotency-Key": key})
    operation = _object(started, "an operation")
    operation_id = str(operation.get("id"))
    print(f"operation {operation_id} started", file=say, flush=True)
    if not arguments.no_wait:
        operation = follow(api, operation, OperationDisplay(say))
    elif not arguments.json:
        print(f"follow it with: filejobs bulk status {operation_id}", file=say)
    if arguments.json:
        print(json.dumps(operation, indent=2), file=out)
    if arguments.no_wait:
        return 0
    return 0 if operation.get("status") == "succeeded" and not operation.get("errors") else 1


def dry_run_lines(action: str, preview: Mapping[str, Any]) -> list[str]:
    matched = preview.get("matched")
    count = f"{matched} job{'' if matched == 1 else 's'}"
    if not preview.get("exact", True):
        count = f"at least {count}"
    what = f"the files of {count}" if action == "rescan" else count
    lines = [f"would {action} {what} ({filter_text(preview.get('filter') or {})})"]
    sample = list(preview.get("sample") or [])[:SAMPLE_SHOWN]
    lines.extend(
        f"  e.g. {j.get('id')}  {j.get('tenant')}  {j.get('job_type')}  {j.get('status')}"
        for j in sample
    )
    return lines


def confirmed(
    action: str, preview: Mapping[str, Any], reason: str, stdin: TextIO, say: TextIO
) -> bool:
    exact = "" if preview.get("exact", True) else "at least "
    print(
        f"{action} {exact}{preview.get('matched')} jobs, reason {reason!r}? [y/N] ",
        end="",
        file=say,
        flush=True,
    )
    answer = stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


@dataclass
class OperationDisplay:
    """An operation's progress: one line redrawn in place on a terminal, else a line a change."""

    stream: TextIO
    shown: str = ""

    def show(self, operation: Mapping[str, Any]) -> None:
        line = progress_line(operation)
        if self.stream.isatty():
            self.stream.write(f"\r\x1b[2K{line}")
        elif line != self.shown:
            self.stream.write(line + "\n")
        self.shown = line
        self.stream.flush()

    def end(self) -> None:
        if self.stream.isatty() and self.shown:
            self.stream.write("\n")
            self.stream.flush()


def follow(api: ApiClient, operation: dict[str, Any], display: OperationDisplay) -> dict[str, Any]:
    """Polls the operation every POLL_SECONDS until it succeeded or failed."""
    operation_id = str(operation.get("id"))
    try:
        while True:
            display.show(operation)
            if operation.get("status") in FINISHED:
                break
            time.sleep(POLL_SECONDS)
            operation = _object(api.get(f"/operations/{operation_id}"), "an operation")
    except KeyboardInterrupt:
        display.end()
        raise CliError(
            f"interrupted; operation {operation_id} goes on (filejobs bulk status {operation_id})",
            exit_code=130,
        ) from None
    except CliError as error:
        display.end()
        raise CliError(
            f"{error.message} (operation {operation_id} goes on: "
            f"filejobs bulk status {operation_id})",
            error.exit_code,
        ) from None
    display.end()
    if operation.get("error"):
        print(f"operation {operation_id}: {operation['error']}", file=display.stream)
    return operation


def progress_line(operation: Mapping[str, Any]) -> str:
    return (
        f"{operation.get('id')}: {operation.get('status')}, "
        f"{operation.get('processed')}/{operation.get('matched')} processed, "
        f"{operation.get('changed')} changed, {operation.get('skipped')} skipped, "
        f"{operation.get('errors')} errors"
    )


def operation_status(
    arguments: argparse.Namespace, target: Target, out: TextIO | None = None
) -> int:
    out = out or sys.stdout
    answer = _object(ApiClient(target).get(f"/operations/{arguments.operation_id}"), "an operation")
    print(json.dumps(answer, indent=2) if arguments.json else render_operation(answer), file=out)
    return 0


def render_operation(operation: Mapping[str, Any]) -> str:
    lines = [
        f"operation {operation.get('id')}",
        f"  action:   {operation.get('action')}",
        f"  status:   {operation.get('status')}"
        + (f" (finished {when(operation['finished_at'])})" if operation.get("finished_at") else ""),
        f"  filter:   {filter_text(operation.get('filter') or {})}",
        f"  reason:   {operation.get('reason')}",
        f"  by:       {operation.get('created_by')} at {when(operation.get('created_at'))}",
        f"  progress: {operation.get('processed')}/{operation.get('matched')} processed, "
        f"{operation.get('changed')} changed, {operation.get('skipped')} skipped, "
        f"{operation.get('errors')} errors",
    ]
    if operation.get("error"):
        lines.append(f"  error:    {operation['error']}")
    return "\n".join(lines)


def operation_list(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    listing = Listing(
        ApiClient(target), "/operations", "operations", {"tenant": arguments.tenant},
        arguments.limit,
    )  # fmt: skip
    found = list(listing)
    if arguments.json:
        document = {"operations": found, "next_token": listing.next_token}
        print(json.dumps(document, indent=2), file=out)
    else:
        print("\n".join(render_operations(found)) if found else "no operations", file=out)
    return 0


def render_operations(operations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The audit list: what, by whom, when, on what, how far, and why (last: it is free text)."""
    return table(
        ("ID", "ACTION", "WHO", "WHEN", "STATUS", "DONE", "CHANGED", "SKIPPED", "ERRORS",
         "FILTER", "REASON"),
        [
            (
                str(o.get("id")),
                str(o.get("action")),
                str(o.get("created_by")),
                when(o.get("created_at")),
                str(o.get("status")),
                f"{o.get('processed')}/{o.get('matched')}",
                str(o.get("changed")),
                str(o.get("skipped")),
                str(o.get("errors")),
                shorten(filter_text(o.get("filter") or {}), 48),
                shorten(str(o.get("reason") or ""), 48),
            )
            for o in operations
        ],
    )  # fmt: skip


# --- rendering helpers -----------------------------------------------------------------------


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A header and one line per row, columns aligned, the last one left ragged."""
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in [header, *rows]
    ]


def when(value: Any) -> str:
    """An ISO time as `2026-12-04 12:00:00` UTC (to the second), or '-'."""
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def filter_text(wanted: Mapping[str, Any]) -> str:
    shown = [f"{name}={wanted[name]}" for name in FILTER_FIELDS if wanted.get(name) is not None]
    shown += [f"{k}={v}" for k, v in sorted(wanted.items()) if k not in FILTER_FIELDS]
    return ", ".join(shown) or "every job"


def _object(answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise CliError(f"the API answered with something that is not {what}")
    return answer
