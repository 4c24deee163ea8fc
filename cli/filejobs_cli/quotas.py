"""`filejobs quotas show|set TENANT`: a tenant's quotas (GET/PUT /tenants/{tenant}/quotas).

    filejobs quotas show acme [--json]
    filejobs quotas set acme --files-per-day 500 --max-file-bytes 0   # 0: unlimited
    filejobs quotas set acme --default files-per-day                  # back to the stack's
    filejobs quotas set acme --rescans-per-day 500 --max-running-operations 1

Setting is an operator's (the local stack's own token, or the operator role with --stack-name);
a tenant may show its own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import ApiClient, HttpError, Target, UsageError, add_target_options
from filejobs_cli.commands import targeted

# The API's field for each option (--files-per-day N -> files_per_day).
QUOTAS = (
    "files_per_day",
    "bytes_per_day",
    "max_file_bytes",
    "max_in_flight_jobs",
    "rescans_per_day",
    "rescans_per_file_per_day",
    "operations_per_day",
    "max_running_operations",
)
QUOTA_HELP = {
    "files_per_day": "uploads accepted per UTC day (0: unlimited)",
    "bytes_per_day": "bytes of uploads accepted per UTC day (0: unlimited)",
    "max_file_bytes": "the largest upload accepted, in bytes (0: unlimited)",
    "max_in_flight_jobs": "jobs pending or running at once (0: unlimited)",
    "rescans_per_day": "rescans (single or bulk) per UTC day (0: unlimited)",
    "rescans_per_file_per_day": "rescans of one file per UTC day (0: unlimited)",
    "operations_per_day": "bulk operations started per UTC day (0: unlimited)",
    "max_running_operations": "bulk operations running at once (0: unlimited)",
}
MAX_VALUE = 2**53 - 1  # the API's largest (what every JSON client reads exactly)
# Any tenant the API knows (domain/keys.py TENANT_PATTERN), not only those `upload` makes.
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    quotas_ = commands.add_parser("quotas", help="a tenant's quotas: show or set them")
    actions = quotas_.add_subparsers(dest="action", required=True)

    show_ = actions.add_parser("show", help="the quotas in force, the defaults, today's usage")
    show_.add_argument("tenant", type=tenant_argument, help="whose quotas")
    show_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    show_.set_defaults(run=targeted(show, project_root))

    set_ = actions.add_parser("set", help="set a tenant's own quotas (operators); 0: unlimited")
    set_.add_argument("tenant", type=tenant_argument, help="whose quotas")
    for name in QUOTAS:
        set_.add_argument(
            f"--{option(name)}", dest=name, type=quota_value, metavar="N", help=QUOTA_HELP[name]
        )
    set_.add_argument(
        "--default",
        action="append",
        default=[],
        choices=[option(name) for name in QUOTAS],
        metavar="QUOTA",
        help="put this quota back to the stack's default (repeatable)",
    )
    set_.add_argument("--json", action="store_true", help="the API's answer as it is")
    set_.set_defaults(run=targeted(set_quotas, project_root, check_change))

    for parser in (show_, set_):
        add_target_options(parser)


def tenant_argument(value: str) -> str:
    if not _TENANT.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"tenant must be 1-63 letters, digits, '-' or '_', not starting with '-' or '_'; "
            f"got {value!r}"
        )
    return value


def option(name: str) -> str:
    return name.replace("_", "-")


def quota_value(value: str) -> int:
    if not value.isascii() or not value.isdigit() or int(value) > MAX_VALUE:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 0 (unlimited) to {MAX_VALUE}, got {value!r}"
        )
    return int(value)


def change_of(arguments: argparse.Namespace) -> dict[str, int | None]:
    """The PUT body: each quota given, and null for each put back to its default."""
    change: dict[str, int | None] = {
        name: value for name in QUOTAS if (value := getattr(arguments, name)) is not None
    }
    for name in arguments.default:
        change[name.replace("-", "_")] = None
    return change


def check_change(arguments: argparse.Namespace) -> None:
    given = {name for name in QUOTAS if getattr(arguments, name) is not None}
    reset = {name.replace("-", "_") for name in arguments.default}
    if not given and not reset:
        options = ", ".join(f"--{option(name)}" for name in QUOTAS)
        raise UsageError(f"quotas set: give at least one of {options} or --default QUOTA")
    both = sorted(given & reset)
    if both:
        raise UsageError(f"quotas set: --{option(both[0])} is both given and put back to default")


def show(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    report = _call(ApiClient(target).get(f"/tenants/{arguments.tenant}/quotas"))
    print(json.dumps(report, indent=2) if arguments.json else render(report), file=out)
    return 0


def set_quotas(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    path = f"/tenants/{arguments.tenant}/quotas"
    try:
        # Absolute values: setting them twice sets them once (safe to send again).
        report = ApiClient(target).request("PUT", path, body=change_of(arguments), repeatable=True)
    except HttpError as error:
        if error.status == 403:
            raise UsageError(
                f"quotas set: {error.message} (use an operator's credentials)"
            ) from None
        raise
    shown = _call(report)
    print(json.dumps(shown, indent=2) if arguments.json else render(shown), file=out)
    return 0


def _call(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise UsageError("the API answered with something that is not a tenant's quotas")
    return answer


def render(report: dict[str, Any]) -> str:
    """The quotas as a small table: in force, default, the tenant's own; then today's usage."""
    usage = report.get("usage") or {}
    started = "".join(
        f", {usage[kind]} {kind}" for kind in ("rescans", "operations") if kind in usage
    )
    lines = [
        f"tenant {report.get('tenant')}: today ({usage.get('day')} UTC) "
        f"{usage.get('files')} files, {usage.get('bytes')} bytes accepted{started}",
        f"{'quota':<26} {'in force':>20} {'default':>20} {'own':>20}",
    ]
    own = report.get("overrides") or {}
    for name in QUOTAS:
        if name not in report["limits"]:
            continue  # a stack older than this command has no such quota
        lines.append(
            f"{name:<26} {_shown(report['limits'].get(name)):>20} "
            f"{_shown(report['defaults'].get(name)):>20} "
            f"{_shown(own.get(name), absent='-'):>20}"
        )
    return "\n".join(lines)


def _shown(value: object, absent: str = "?") -> str:
    if value is None:
        return absent
    return "unlimited" if value == 0 else str(value)
