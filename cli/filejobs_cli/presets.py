"""`filejobs presets`: upload presets, what runs on a tenant's uploads (PUT/GET/DELETE /presets).

    filejobs presets set avatars --job virus_scan \\
        --job "thumbnail_generation sizes=512 format=webp priority=-1" \\
        --prefix uploads/acme/avatars/
    filejobs presets set contracts --job virus_scan --job deduplication_check \\
        --job "document_preview" --prefix uploads/acme/contracts/
    filejobs presets set archive --store-only --prefix uploads/acme/archive/
    filejobs presets set quick --scan-only --tenant-default
    filejobs presets list [--tenant T] [--json]
    filejobs presets show NAME [--version N] [--json]
    filejobs presets remove NAME

An upload can also name a preset itself: `aws s3 cp f s3://bucket/uploads/acme/f \\
--metadata filejobs-preset=avatars`.
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
from filejobs_cli.quotas import tenant_argument
from filejobs_cli.requests import option_argument

NAME_HELP = "the preset's name"
JSON_HELP = "the API's JSON as it is"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_JOB_TYPE = re.compile(r"[a-z][a-z_]{0,63}")


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    presets_ = commands.add_parser("presets", help="upload presets: which jobs run on uploads")
    actions = presets_.add_subparsers(dest="action", required=True)

    set_ = actions.add_parser("set", help="create a preset, or save its next version")
    set_.add_argument("name", type=name_argument, help=NAME_HELP)
    what = set_.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--job",
        dest="jobs",
        action="append",
        type=job_argument,
        metavar='"JOB_TYPE [NAME=VALUE ...] [priority=N]"',
        help="a job uploads get (repeatable), with its options, as `filejobs request` takes them",
    )
    what.add_argument("--scan-only", action="store_true", help="the virus scan and nothing else")
    what.add_argument("--store-only", action="store_true", help="store uploads, run nothing")
    set_.add_argument(
        "--prefix",
        dest="prefixes",
        action="append",
        default=[],
        help="bind to uploads under this key prefix, uploads/TENANT/... (repeatable)",
    )
    set_.add_argument(
        "--tenant-default", action="store_true", help="the tenant's uploads that no prefix binds"
    )
    set_.add_argument("--description", default="", help="a note kept with the preset")
    set_.add_argument("--tenant", type=tenant_argument, help="operators: whose preset")
    set_.add_argument("--json", action="store_true", help=JSON_HELP)
    set_.set_defaults(run=targeted(put, project_root))

    list_ = actions.add_parser("list", help="the presets, with their jobs and bindings")
    list_.add_argument("--tenant", type=tenant_argument, help="operators: whose presets")
    list_.add_argument("--json", action="store_true", help=JSON_HELP)
    list_.set_defaults(run=targeted(list_presets, project_root))

    show_ = actions.add_parser("show", help="a preset: its current version, or --version N")
    show_.add_argument("name", type=name_argument, help=NAME_HELP)
    show_.add_argument("--version", type=int, help="an earlier version (default: the current)")
    show_.add_argument("--tenant", type=tenant_argument, help="operators: whose preset")
    show_.add_argument("--json", action="store_true", help=JSON_HELP)
    show_.set_defaults(run=targeted(show, project_root))

    remove_ = actions.add_parser("remove", help="later uploads no longer get it")
    remove_.add_argument("name", type=name_argument, help=NAME_HELP)
    remove_.add_argument("--tenant", type=tenant_argument, help="operators: whose preset")
    remove_.set_defaults(run=targeted(remove, project_root))

    for parser in (set_, list_, show_, remove_):
        add_target_options(parser)


def name_argument(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"a preset name is 1-63 lower-case letters, digits, '-' or '_'; got {value!r}"
        )
    return value


def job_argument(text: str) -> dict[str, Any]:
    """ "thumbnail_generation sizes=512 format=webp priority=5" -> a preset's job."""
    job_type, *settings = text.split()
    if not _JOB_TYPE.fullmatch(job_type or ""):
        raise argparse.ArgumentTypeError(f"a job type comes first, e.g. virus_scan; got {text!r}")
    job: dict[str, Any] = {"job_type": job_type}
    options = dict(option_argument(setting) for setting in settings)
    if "priority" in options:
        job["priority"] = options.pop("priority")
    if options:
        job["options"] = options
    return job


def body_of(arguments: argparse.Namespace) -> dict[str, Any]:
    jobs = (
        []
        if arguments.store_only
        else [{"job_type": "virus_scan"}]
        if arguments.scan_only
        else arguments.jobs
    )
    return {
        "jobs": jobs,
        "prefixes": arguments.prefixes,
        "tenant_default": arguments.tenant_default,
        "description": arguments.description,
    }


def put(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    path = f"/presets/{arguments.name}{_tenant_query(arguments)}"
    _print(ApiClient(target).request("PUT", path, body=body_of(arguments)), arguments.json, out)
    return 0


def list_presets(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    found = ApiClient(target).get("/presets", {"tenant": arguments.tenant})
    print_listing(found, "presets", summary_line, out, as_json=arguments.json, empty="no presets")
    return 0


def show(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    version = None if arguments.version is None else str(arguments.version)
    query = {"tenant": arguments.tenant, "version": version}
    found = ApiClient(target).get(f"/presets/{arguments.name}", query)
    _print(found, arguments.json, out)
    return 0


def remove(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    ApiClient(target).request("DELETE", f"/presets/{arguments.name}{_tenant_query(arguments)}")
    print(f"removed preset {arguments.name}", file=out)
    return 0


def _tenant_query(arguments: argparse.Namespace) -> str:
    return f"?tenant={arguments.tenant}" if arguments.tenant else ""


def _print(preset: Any, as_json: bool, out: TextIO) -> None:
    if not isinstance(preset, dict):
        raise UsageError("the API answered with something that is not a preset")
    print(json.dumps(preset, indent=2) if as_json else "\n".join(details(preset)), file=out)


def what_it_runs(preset: dict[str, Any]) -> str:
    jobs = preset.get("jobs") or []
    return ", ".join(job.get("job_type", "?") for job in jobs) or "nothing (store only)"


def where_it_applies(preset: dict[str, Any]) -> str:
    places = list(preset.get("prefixes") or [])
    if preset.get("tenant_default"):
        places.append("the tenant's other uploads")
    return ", ".join(places) or f"uploads naming it (x-amz-meta-filejobs-preset: {preset['name']})"


def summary_line(preset: dict[str, Any]) -> str:
    return (
        f"{preset.get('name')} v{preset.get('version')}  {preset.get('tenant')}: "
        f"{what_it_runs(preset)} on {where_it_applies(preset)}"
    )


def details(preset: dict[str, Any]) -> list[str]:
    lines = [
        f"preset {preset.get('name')} v{preset.get('version')} (tenant {preset.get('tenant')})"
    ]
    if preset.get("description"):
        lines.append(f"  about:    {preset['description']}")
    lines.append(f"  applies:  {where_it_applies(preset)}")
    jobs = preset.get("jobs") or []
    if not jobs:
        lines.append("  jobs:     none: uploads are stored, nothing runs")
    for job in jobs:
        options = job.get("options") or {}
        shown = f" {json.dumps(options, sort_keys=True)}" if options else ""
        lines.append(f"  job:      {job.get('job_type')}{shown} priority {job.get('priority', 0)}")
    lines.append(f"  saved:    {preset.get('updated_at')} by {preset.get('updated_by')}")
    return lines
