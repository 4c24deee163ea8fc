"""The console's powers on the command line (docs/CONSOLE.md): search, failure groups, bulk actions.

    filejobs search --status failed --type thumbnail_generation [--error TEXT] [--all] [--json]
    filejobs search --prefix uploads/acme/avatars/ [--tenant acme]       # files under a prefix
    filejobs failures [--tenant T] [--type JOB_TYPE] [--json]
    filejobs bulk retry --group thumbnail_generation.3f2a9c1b7e4d5a60 --reason "fixed in v42"
    filejobs bulk cancel --tenant acme --status pending --reason "runaway" --dry-run
    filejobs bulk status OP_ID | filejobs bulk list [--tenant T]

A bulk action always asks the API for its dry run first (the count and a sample), then, after a
confirmation (or --yes), starts the operation under a new Idempotency-Key and follows its
progress to the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import ApiClient, Target, UsageError
from filejobs_cli.commands import (
    JOB_STATUSES,
    JOB_TYPES,
    PAGE_MAX,
    positive_int,
    targeted,
)
from filejobs_cli.progress import shorten
from filejobs_cli.quotas import tenant_argument

ACTIONS = ("retry", "cancel", "rescan", "delete")
FILTERS = ("tenant", "status", "job_type", "group", "error", "since", "until")
POLL_SECONDS = 1.0
SAMPLE_SHOWN = 5


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    search_ = commands.add_parser("search", help="find jobs by filter, or files by key prefix")
    _add_filters(search_)
    search_.add_argument("--prefix", help="list the files under this key prefix instead")
    search_.add_argument("--limit", type=positive_int, default=25, help="at most (default 25)")
    search_.add_argument("--all", action="store_true", help="every match, page after page")
    search_.add_argument("--json", action="store_true", help="the API's JSON")
    search_.set_defaults(run=targeted(search, project_root, check_search))

    failures_ = commands.add_parser("failures", help="the failed jobs, grouped by error")
    failures_.add_argument("--tenant", type=tenant_argument)
    failures_.add_argument("--type", dest="job_type", choices=JOB_TYPES)
    failures_.add_argument("--json", action="store_true", help="the API's JSON")
    failures_.set_defaults(run=targeted(failures, project_root))

    bulk_ = commands.add_parser("bulk", help="retry, cancel, rescan or delete jobs by filter")
    actions = bulk_.add_subparsers(dest="action", required=True)
    for action in ACTIONS:
        act_ = actions.add_parser(action, help=f"{action} every job the filter matches")
        _add_filters(act_)
        act_.add_argument("--reason", required=True, help="why (kept in the audit record)")
        act_.add_argument("--dry-run", action="store_true", help="count and show; change nothing")
        act_.add_argument("--yes", action="store_true", help="do not ask for confirmation")
        act_.add_argument("--no-wait", action="store_true", help="start it; do not follow it")
        act_.add_argument("--json", action="store_true", help="the API's JSON")
        act_.set_defaults(run=targeted(bulk, project_root, check_bulk))
    status_ = actions.add_parser("status", help="an operation's progress and result")
    status_.add_argument("operation_id")
    status_.add_argument("--json", action="store_true", help="the API's JSON")
    status_.set_defaults(run=targeted(operation_status, project_root))
    list_ = actions.add_parser("list", help="the operations, newest first (the audit list)")
    list_.add_argument("--tenant", type=tenant_argument)
    list_.add_argument("--limit", type=positive_int, default=25, help="at most (default 25)")
    list_.add_argument("--json", action="store_true", help="the API's JSON")
    list_.set_defaults(run=targeted(operations_list, project_root))


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", type=tenant_argument)
    parser.add_argument("--status", choices=JOB_STATUSES)
    parser.add_argument("--type", dest="job_type", choices=JOB_TYPES)
    parser.add_argument("--group", help="a failure group's id (filejobs failures)")
    parser.add_argument("--error", help="text the error message contains")
    parser.add_argument("--since", type=moment_argument, help="created at or after (ISO 8601)")
    parser.add_argument("--until", type=moment_argument, help="created before (ISO 8601)")


def moment_argument(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-12-04T12:00:00Z; got {value!r}"
        ) from None
    return value


def filter_of(arguments: argparse.Namespace) -> dict[str, str]:
    return {name: value for name in FILTERS if (value := getattr(arguments, name)) is not None}


def check_search(arguments: argparse.Namespace) -> None:
    if arguments.prefix is not None:
        extra = sorted(set(filter_of(arguments)) - {"tenant"})
        if extra:
            raise UsageError(f"search: --prefix lists files; --{extra[0]} filters jobs")


def check_bulk(arguments: argparse.Namespace) -> None:
    if not arguments.reason.strip():
        raise UsageError("bulk: --reason must say why (it is kept in the audit record)")
    if not filter_of(arguments):
        raise UsageError(
            "bulk: give a filter (--tenant, --status, --type, --group, --error, --since, --until)"
        )


# --- search ------------------------------------------------------------------------------------


def search(arguments: argparse.Namespace, target: Target, out: TextIO = sys.stdout) -> int:
    api = ApiClient(target)
    if arguments.prefix is not None:
        query = {"prefix": arguments.prefix, "tenant": arguments.tenant}
        files = list(_pages(api, "/files", query, "files", arguments.limit, arguments.all))
        if arguments.json:
            print(json.dumps({"files": files}, indent=2), file=out)
        else:
            print(render_files(files) if files else "no files", file=out)
        return 0
    jobs = list(_pages(api, "/jobs", filter_of(arguments), "jobs", arguments.limit, arguments.all))
    if arguments.json:
        print(json.dumps({"jobs": jobs}, indent=2), file=out)
    else:
        print(render_jobs(jobs) if jobs else "no jobs", file=out)
    return 0


def _pages(  # noqa: PLR0917 (a listing, its query, how much of it)
    api: ApiClient,
    path: str,
    query: Mapping[str, str | None],
    key: str,
    limit: int,
    every: bool,
) -> Iterator[dict[str, Any]]:
    """The listing's entries, following next_token until `limit` (or the end, with `every`)."""
    remaining, token = limit, None
    while every or remaining > 0:
        size = PAGE_MAX if every else min(remaining, PAGE_MAX)
        page = api.get(path, {**query, "limit": str(size), "next_token": token})
        batch = page.get(key) or []
        yield from batch if every else batch[:remaining]
        remaining -= len(batch)
        token = page.get("next_token")
        if not token:
            return


def render_jobs(jobs: list[dict[str, Any]]) -> str:
    rows = [("JOB", "TENANT", "TYPE", "STATUS", "ATTEMPT", "CREATED", "ERROR")]
    rows += [
        (
            j.get("id", ""),
            j.get("tenant", ""),
            j.get("job_type", ""),
            j.get("status", ""),
            str(j.get("attempt", "")),
            (j.get("created_at") or "")[:19],
            shorten(j.get("error_message") or ""),
        )
        for j in jobs
    ]
    return _table(rows)


def render_files(files: list[dict[str, Any]]) -> str:
    rows = [("FILE", "KEY", "SIZE", "STATUS", "SCAN")]
    rows += [
        (
            f.get("id", ""),
            shorten(f.get("key", "")),
            str(f.get("size", "")),
            f.get("status", ""),
            f.get("scan_status") or "-",
        )
        for f in files
    ]
    return _table(rows)


# --- failure groups ----------------------------------------------------------------------------


def failures(arguments: argparse.Namespace, target: Target, out: TextIO = sys.stdout) -> int:
    answer = ApiClient(target).get(
        "/failures", {"tenant": arguments.tenant, "job_type": arguments.job_type}
    )
    groups = answer.get("groups") or []
    if arguments.json:
        print(json.dumps(answer, indent=2), file=out)
    else:
        print(render_groups(groups) if groups else "no failed jobs", file=out)
    return 0


def render_groups(groups: list[dict[str, Any]]) -> str:
    rows = [("GROUP", "COUNT", "FIRST SEEN", "LAST SEEN", "FINGERPRINT")]
    rows += [
        (
            g.get("id", ""),
            str(g.get("count", "")),
            (g.get("first_seen") or "")[:19],
            (g.get("last_seen") or "")[:19],
            shorten(g.get("fingerprint", "")),
        )
        for g in groups
    ]
    return _table(rows)


# --- bulk actions ------------------------------------------------------------------------------


def bulk(arguments: argparse.Namespace, target: Target, out: TextIO = sys.stdout) -> int:
    api = ApiClient(target)
    request = {
        "action": arguments.action,
        "filter": filter_of(arguments),
        "reason": arguments.reason,
    }
    preview = api.post("/operations", {**request, "dry_run": True})
    if arguments.json and arguments.dry_run:
        print(json.dumps(preview, indent=2), file=out)
        return 0
    print(describe_preview(preview), file=out)
    if arguments.dry_run or preview.get("matched") == 0:
        return 0
    if not arguments.yes and not _confirmed(arguments.action, preview):
        print("not started", file=out)
        return 1
    key = str(uuid.uuid4())
    operation = api.post("/operations", request, headers={"Idempotency-Key": key})
    print(f"operation {operation['id']} started (Idempotency-Key {key})", file=out)
    if arguments.no_wait:
        return 0
    final = follow(api, operation["id"], out)
    if arguments.json:
        print(json.dumps(final, indent=2), file=out)
    return 0 if final.get("status") == "succeeded" and not final.get("errors") else 1


def describe_preview(preview: dict[str, Any]) -> str:
    matched = preview.get("matched", 0)
    count = f"{matched}" if preview.get("exact", True) else f"at least {matched}"
    lines = [f"would {preview.get('action')} {count} jobs"]
    sample = preview.get("sample") or []
    if sample:
        shown = ", ".join(j.get("id", "") for j in sample[:SAMPLE_SHOWN])
        more = "" if len(sample) <= SAMPLE_SHOWN else ", ..."
        lines.append(f"for example: {shown}{more}")
    return "\n".join(lines)


def _confirmed(action: str, preview: dict[str, Any]) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("bulk: not a terminal to confirm on; add --yes to start it as it is")
    answer = input(f"{action} {preview.get('matched')} jobs? [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


def follow(
    api: ApiClient,
    operation_id: str,
    out: TextIO,
    *,
    poll: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The operation's progress, shown as it moves (one line rewritten on a terminal), to its
    end; the operation as it ended."""
    live = out.isatty()
    shown = ""
    while True:
        operation: dict[str, Any] = api.get(f"/operations/{operation_id}")
        line = progress_line(operation)
        if line != shown:
            print(("\r" + line) if live else line, end="" if live else "\n", file=out, flush=True)
            shown = line
        if operation.get("status") != "running":
            if live:
                print(file=out)
            if operation.get("error"):
                print(f"error: {operation['error']}", file=out)
            return operation
        sleep(poll)


def progress_line(operation: dict[str, Any]) -> str:
    return (
        f"{operation.get('status')}: {operation.get('processed', 0)}/{operation.get('matched', 0)}"
        f" processed, {operation.get('changed', 0)} changed, {operation.get('skipped', 0)} "
        f"skipped, {operation.get('errors', 0)} errors"
    )


def operation_status(
    arguments: argparse.Namespace, target: Target, out: TextIO = sys.stdout
) -> int:
    operation = ApiClient(target).get(f"/operations/{arguments.operation_id}")
    if arguments.json:
        print(json.dumps(operation, indent=2), file=out)
        return 0
    print(render_operations([operation]), file=out)
    print(progress_line(operation), file=out)
    return 0


def operations_list(arguments: argparse.Namespace, target: Target, out: TextIO = sys.stdout) -> int:
    query = {"tenant": arguments.tenant}
    found = list(
        _pages(ApiClient(target), "/operations", query, "operations", arguments.limit, False)
    )
    if arguments.json:
        print(json.dumps({"operations": found}, indent=2), file=out)
    else:
        print(render_operations(found) if found else "no operations", file=out)
    return 0


def render_operations(operations: list[dict[str, Any]]) -> str:
    rows = [
        ("OPERATION", "ACTION", "BY", "CREATED", "STATUS", "CHANGED/MATCHED", "FILTER", "REASON")
    ]
    rows += [
        (
            o.get("id", ""),
            o.get("action", ""),
            o.get("created_by", ""),
            (o.get("created_at") or "")[:19],
            o.get("status", ""),
            f"{o.get('changed', 0)}/{o.get('matched', 0)}",
            shorten(json.dumps(o.get("filter") or {}, sort_keys=True)),
            shorten(o.get("reason", "")),
        )
        for o in operations
    ]
    return _table(rows)


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
