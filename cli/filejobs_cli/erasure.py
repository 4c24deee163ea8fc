"""Erasing for good: one upload, or a whole tenant (a customer leaving).

    filejobs delete FILE_ID [--yes] [--json]
    filejobs erase --tenant T --reason TEXT [--yes] [--wait] [--json]

`delete` erases one upload (DELETE /files/{id}): every version of its key, its outputs, jobs and
record; it prints the erasure's audit record. `erase` erases a tenant as a tracked operation
(POST /tenants/{tenant}/erasure, an operator's only): it asks the API for the dry run first and
says how many files it would erase; it starts only with --yes or once confirmed on a terminal;
with --wait it follows the operation to its end and prints what it removed. Neither can be undone.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import ApiClient, Target, UsageError, add_target_options
from filejobs_cli.commands import targeted, uuid_argument
from filejobs_cli.console import OperationDisplay, follow, reason_argument
from filejobs_cli.quotas import tenant_argument


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    """Adds delete and erase to the `filejobs` command."""
    delete_ = commands.add_parser(
        "delete", help="erase one upload for good: its versions, outputs, jobs and record"
    )
    delete_.add_argument("file_id", type=uuid_argument, metavar="FILE_ID", help="the file's id")
    delete_.add_argument("--yes", action="store_true", help="erase without asking")
    delete_.add_argument("--json", action="store_true", help="the audit record as JSON")
    delete_.set_defaults(run=targeted(delete, project_root, check_confirmable("delete")))

    erase_ = commands.add_parser(
        "erase", help="erase a whole tenant for good, as a tracked operation (operators)"
    )
    erase_.add_argument("--tenant", required=True, type=tenant_argument, help="the tenant to erase")
    erase_.add_argument(
        "--reason", required=True, type=reason_argument, metavar="TEXT",
        help="why (kept in the operation's audit record)",
    )  # fmt: skip
    erase_.add_argument("--yes", action="store_true", help="start without asking")
    erase_.add_argument("--wait", action="store_true", help="follow it to its end")
    erase_.add_argument("--json", action="store_true", help="the operation's JSON on stdout")
    erase_.set_defaults(run=targeted(erase, project_root, check_confirmable("erase")))

    for parser in (delete_, erase_):
        add_target_options(parser)


def check_confirmable(command: str) -> Callable[[argparse.Namespace], None]:
    def check(arguments: argparse.Namespace, stdin: TextIO | None = None) -> None:
        if not arguments.yes and not (stdin or sys.stdin).isatty():
            raise UsageError(
                f"{command}: not asking for confirmation without a terminal; give --yes"
            )

    return check


def delete(
    arguments: argparse.Namespace,
    target: Target,
    out: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Erases one upload, once confirmed: 0 and its audit record printed."""
    out, stdin = out or sys.stdout, stdin or sys.stdin
    question = f"erase file {arguments.file_id} and every version of its key, for good?"
    if not arguments.yes and not asked(question, stdin, out):
        print("not confirmed: nothing erased", file=out)
        return 1
    record = ApiClient(target).request("DELETE", f"/files/{arguments.file_id}")
    print(json.dumps(record, indent=2) if arguments.json else erasure_lines(record), file=out)
    return 0


def erasure_lines(record: Mapping[str, Any]) -> str:
    files = ", ".join(str(f) for f in record.get("file_ids") or [])
    return "\n".join(
        [
            f"erased {files} of tenant {record.get('tenant')}",
            f"  by {record.get('erased_by')} at {record.get('erased_at')}",
            f"  {record.get('versions_deleted')} versions, {record.get('outputs_deleted')} "
            f"outputs, {record.get('jobs_erased')} jobs",
        ]
    )


def erase(
    arguments: argparse.Namespace,
    target: Target,
    out: TextIO | None = None,
    stdin: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Dry run, then (confirmed) start, then (--wait) follow: 0 when it started, or with --wait
    when it succeeded with no errors."""
    out, stdin, err = out or sys.stdout, stdin or sys.stdin, err or sys.stderr
    # With --json stdout holds one JSON document; what a person reads goes to stderr.
    say = err if arguments.json else out
    api = ApiClient(target)
    path = f"/tenants/{arguments.tenant}/erasure"
    body = {"reason": arguments.reason}
    preview = api.post(path, {**body, "dry_run": True}, repeatable=True)
    count = f"{'' if preview.get('exact', True) else 'at least '}{preview.get('files')} files"
    print(
        f"would erase tenant {arguments.tenant}: {count}, its schedules, webhooks, presets, "
        "quota overrides, and every object left under its prefixes",
        file=say,
        flush=True,
    )
    question = f"erase tenant {arguments.tenant} ({count}) for good, reason {arguments.reason!r}?"
    if not arguments.yes and not asked(question, stdin, say):
        print("not confirmed: nothing erased", file=say)
        return 1
    key = str(uuid.uuid4())
    print(f"Idempotency-Key: {key}", file=say, flush=True)
    operation: dict[str, Any] = api.post(path, body, headers={"Idempotency-Key": key})
    operation_id = str(operation.get("id"))
    print(f"operation {operation_id} started", file=say, flush=True)
    if arguments.wait:
        operation = follow(api, operation, OperationDisplay(say))
        print(removed_line(operation.get("removed") or {}), file=say)
    else:
        print(f"follow it with: filejobs bulk status {operation_id}", file=say)
    if arguments.json:
        print(json.dumps(operation, indent=2), file=out)
    if not arguments.wait:
        return 0
    return 0 if operation.get("status") == "succeeded" and not operation.get("errors") else 1


def removed_line(removed: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in removed.items())
    return f"removed: {shown or 'nothing'}"


def asked(question: str, stdin: TextIO, say: TextIO) -> bool:
    print(f"{question} [y/N] ", end="", file=say, flush=True)
    return stdin.readline().strip().lower() in {"y", "yes"}
