"""`filejobs upload-url`: a signed upload (POST /uploads), printed as the API's JSON, for a browser
or any HTTP client to post one file with, straight to the uploads bucket.

    filejobs upload-url --tenant acme --filename "Harbour at dusk.jpg" --preset avatars \\
        --metadata album=holidays --expires-in 600
    filejobs upload-url --tenant acme --filename a.jpg --curl   # and a curl line that posts it
    filejobs upload-url --tenant acme --json                    # the API's answer as it is

A tenant's credentials sign into its own uploads (no --tenant needed); an operator names one.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import ApiClient, Target, UsageError, add_target_options
from filejobs_cli.commands import targeted
from filejobs_cli.quotas import tenant_argument

MIN_EXPIRES_IN, MAX_EXPIRES_IN = 60, 3600


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    command = commands.add_parser(
        "upload-url",
        help="a signed upload (a presigned POST) for a browser to post one file with",
    )
    command.add_argument("--tenant", type=tenant_argument, help="whose uploads (operators)")
    command.add_argument("--filename", help="the file's name, made safe at the key's end")
    command.add_argument(
        "--folder", help="a folder under the tenant's uploads (avatars/), for prefix presets"
    )
    command.add_argument("--content-type", help="the only content type the form accepts")
    command.add_argument("--preset", help="the upload preset its jobs come from")
    command.add_argument(
        "--metadata",
        action="append",
        default=[],
        type=metadata_entry,
        metavar="NAME=VALUE",
        help="x-amz-meta-NAME the file is stored with (repeatable)",
    )
    command.add_argument(
        "--expires-in",
        type=expires_in,
        metavar="SECONDS",
        help=f"how long the form holds ({MIN_EXPIRES_IN}-{MAX_EXPIRES_IN}; 900 by default)",
    )
    command.add_argument(
        "--curl",
        action="store_true",
        help="also print (to stderr) a curl command that posts a file with the form",
    )
    command.add_argument("--json", action="store_true", help="the API's JSON as it is")
    add_target_options(command)
    command.set_defaults(run=targeted(upload_url, project_root))


def metadata_entry(value: str) -> tuple[str, str]:
    name, equals, text = value.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {value!r}")
    return name, text


def expires_in(value: str) -> int:
    if (
        not value.isascii()
        or not value.isdigit()
        or not MIN_EXPIRES_IN <= int(value) <= MAX_EXPIRES_IN
    ):
        raise argparse.ArgumentTypeError(
            f"expected seconds from {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN}, got {value!r}"
        )
    return int(value)


def request_of(arguments: argparse.Namespace) -> dict[str, Any]:
    """The POST /uploads body: each option given, and nothing else (the API's defaults)."""
    body: dict[str, Any] = {
        name: value
        for name in ("tenant", "filename", "folder", "content_type", "preset", "expires_in")
        if (value := getattr(arguments, name)) is not None
    }
    if arguments.metadata:
        body["metadata"] = dict(arguments.metadata)
    return body


def curl_command(signed: dict[str, Any], path: str = "FILE") -> str:
    """A curl line that posts a file with the form: its fields in order, the file last."""
    words = ["curl", "--fail-with-body"]
    for name, value in signed["fields"].items():
        words += ["-F", f"{name}={value}"]
    words += ["-F", f"file=@{path}", signed["url"]]
    return " ".join(shlex.quote(word) for word in words)


def render(signed: dict[str, Any]) -> str:
    """The form as a person reads it: what it writes, its bounds, then its fields in order."""
    lines = [
        f"key:         {signed['key']}",
        f"max bytes:   {signed['max_bytes']}",
        f"expires at:  {signed['expires_at']}",
        f"post to:     {signed['url']}",
        "fields (in this order, then the file as the last field, file):",
    ]
    lines += [f"  {name}={value}" for name, value in signed["fields"].items()]
    return "\n".join(lines)


def upload_url(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    # Each call signs a new key: sending it again only makes an unused form.
    signed = ApiClient(target).post("/uploads", body=request_of(arguments), repeatable=True)
    if not isinstance(signed, dict) or "fields" not in signed:
        raise UsageError("the API answered with something that is not a signed upload")
    print(json.dumps(signed, indent=2) if arguments.json else render(signed), file=out)
    if arguments.curl:
        print(curl_command(signed), file=sys.stderr)
    return 0
