"""`filejobs webhooks ...`: a tenant's signed webhook endpoints (docs/WEBHOOKS.md).

    filejobs webhooks add URL --event "Job Completed" [--event ...] [--tenant T] [--description D]
    filejobs webhooks list [--tenant T] [--json]
    filejobs webhooks show WEBHOOK_ID [--json]
    filejobs webhooks rotate WEBHOOK_ID [--overlap-hours 24]
    filejobs webhooks enable WEBHOOK_ID
    filejobs webhooks deliveries WEBHOOK_ID [--limit 25] [--json]
    filejobs webhooks resend WEBHOOK_ID DELIVERY_ID
    filejobs webhooks remove WEBHOOK_ID

`add` and `rotate` print the secret: the only time it is ever shown. A tenant manages its own
endpoints; an operator names the tenant (`--tenant`) to add or list.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from filejobs_cli.client import ApiClient, Target, UsageError, add_target_options
from filejobs_cli.commands import print_listing, targeted
from filejobs_cli.quotas import tenant_argument

# The event types an endpoint may want (filejobs/domain/webhooks.py EVENT_TYPES).
EVENT_TYPES = (
    "Job Completed",
    "Job Failed",
    "Job Cancelled",
    "File Quarantined",
    "Upload Rejected",
    "File Processed",
    "File Deleted",
)
_WEBHOOK_ID = re.compile(r"wh-[0-9a-f]{24}-[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
ID_HELP = "the endpoint's id (wh-...)"
_DELIVERY_ID = re.compile(r"dl-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{20}")


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    webhooks_ = commands.add_parser("webhooks", help="a tenant's signed webhook endpoints")
    actions = webhooks_.add_subparsers(dest="action", required=True)

    add_ = actions.add_parser("add", help="register an endpoint (prints its secret, once)")
    add_.add_argument("url", help="the https:// URL deliveries are POSTed to")
    add_.add_argument(
        "--event",
        dest="events",
        action="append",
        required=True,
        choices=EVENT_TYPES,
        metavar="EVENT_TYPE",
        help=f"an event type to receive (repeatable): {', '.join(EVENT_TYPES)}",
    )
    add_.add_argument("--tenant", type=tenant_argument, help="whose (operators)")
    add_.add_argument("--description", default="", help="a note kept with the endpoint")
    add_.add_argument("--json", action="store_true", help="the API's answer (with the secret)")
    add_.set_defaults(run=targeted(add, project_root))

    list_ = actions.add_parser("list", help="a tenant's endpoints")
    list_.add_argument("--tenant", type=tenant_argument, help="whose (operators)")
    list_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    list_.set_defaults(run=targeted(list_endpoints, project_root))

    show_ = actions.add_parser("show", help="one endpoint (never its secret)")
    show_.add_argument("webhook_id", type=webhook_id, help=ID_HELP)
    show_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    show_.set_defaults(run=targeted(show, project_root))

    rotate_ = actions.add_parser("rotate", help="a new secret; the old one kept for the overlap")
    rotate_.add_argument("webhook_id", type=webhook_id, help=ID_HELP)
    rotate_.add_argument(
        "--overlap-hours",
        type=overlap_hours,
        default=None,
        metavar="H",
        help="how long the old secret still signs too, 0-168 (default: the API's, 24)",
    )
    rotate_.add_argument("--json", action="store_true", help="the API's answer (with the secret)")
    rotate_.set_defaults(run=targeted(rotate, project_root))

    enable_ = actions.add_parser("enable", help="enable a disabled endpoint again")
    enable_.add_argument("webhook_id", type=webhook_id, help=ID_HELP)
    enable_.add_argument("--json", action="store_true", help="the API's answer as it is")
    enable_.set_defaults(run=targeted(enable, project_root))

    deliveries_ = actions.add_parser("deliveries", help="the delivery log, newest first")
    deliveries_.add_argument("webhook_id", type=webhook_id, help=ID_HELP)
    deliveries_.add_argument(
        "--limit", type=limit, default=25, metavar="N", help="at most N, 1-100 (default 25)"
    )
    deliveries_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    deliveries_.set_defaults(run=targeted(deliveries, project_root))

    resend_ = actions.add_parser("resend", help="send a delivery again (a new delivery)")
    resend_.add_argument("webhook_id", type=webhook_id, help=ID_HELP)
    resend_.add_argument("delivery_id", type=delivery_id, help="the delivery's id (dl-...)")
    resend_.add_argument("--json", action="store_true", help="the new delivery as the API says")
    resend_.set_defaults(run=targeted(resend, project_root))

    remove_ = actions.add_parser("remove", help="remove an endpoint")
    remove_.add_argument("webhook_id", type=webhook_id, help=ID_HELP)
    remove_.set_defaults(run=targeted(remove, project_root))

    for parser in (add_, list_, show_, rotate_, enable_, deliveries_, resend_, remove_):
        add_target_options(parser)


def webhook_id(value: str) -> str:
    if not _WEBHOOK_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(f"expected a webhook id (wh-...-TENANT), got {value!r}")
    return value


def delivery_id(value: str) -> str:
    if not _DELIVERY_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(f"expected a delivery id (dl-...), got {value!r}")
    return value


def overlap_hours(value: str) -> float:
    try:
        hours = float(value)
    except ValueError:
        hours = -1.0
    if not 0 <= hours <= 168:
        raise argparse.ArgumentTypeError(f"expected hours from 0 to 168, got {value!r}")
    return hours


def limit(value: str) -> int:
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= 100:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 100, got {value!r}")
    return int(value)


def _path(*parts: str) -> str:
    return "/webhooks" + "".join(f"/{quote(part, safe='')}" for part in parts)


def add(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    body: dict[str, Any] = {"url": arguments.url, "event_types": sorted(set(arguments.events))}
    if arguments.tenant:
        body["tenant"] = arguments.tenant
    if arguments.description:
        body["description"] = arguments.description
    made = _object(ApiClient(target).post("/webhooks", body))
    _print_made(made, arguments, out)
    return 0


def list_endpoints(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    found = _object(ApiClient(target).get("/webhooks", {"tenant": arguments.tenant}))
    print_listing(
        found, "webhooks", endpoint_line, out, as_json=arguments.json, empty="no webhook endpoints"
    )
    return 0


def endpoint_line(endpoint: dict[str, Any]) -> str:
    types = ", ".join(endpoint.get("event_types") or [])
    return f"{endpoint['id']}  {endpoint['status']:<8}  {endpoint['url']}  [{types}]"


def show(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    found = _object(ApiClient(target).get(_path(arguments.webhook_id)))
    print(json.dumps(found, indent=2) if arguments.json else render(found), file=out)
    return 0


def rotate(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    body = None if arguments.overlap_hours is None else {"overlap_hours": arguments.overlap_hours}
    made = _object(ApiClient(target).post(_path(arguments.webhook_id, "rotate"), body))
    _print_made(made, arguments, out)
    return 0


def _print_made(made: dict[str, Any], arguments: argparse.Namespace, out: TextIO) -> None:
    """An endpoint with its new secret: the API's JSON, or the endpoint then the secret."""
    if getattr(arguments, "json", False):
        print(json.dumps(made, indent=2), file=out)
        return
    print(render(made), file=out)
    print(_secret_notice(made), file=out)


def enable(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    found = _object(ApiClient(target).post(_path(arguments.webhook_id, "enable")))
    shown = json.dumps(found, indent=2) if getattr(arguments, "json", False) else render(found)
    print(shown, file=out)
    return 0


def deliveries(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    query = {"limit": str(arguments.limit)}
    page = _object(ApiClient(target).get(_path(arguments.webhook_id, "deliveries"), query))
    print_listing(
        page, "deliveries", delivery_line, out, as_json=arguments.json, empty="no deliveries"
    )
    return 0


def resend(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    path = _path(arguments.webhook_id, "deliveries", arguments.delivery_id, "resend")
    again = _object(ApiClient(target).post(path))
    if getattr(arguments, "json", False):
        print(json.dumps(again, indent=2), file=out)
    else:
        print(f"queued {again['id']} (a resend of {again.get('resend_of')})", file=out)
    return 0


def remove(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    ApiClient(target).request("DELETE", _path(arguments.webhook_id))
    print(f"removed {arguments.webhook_id}", file=out)
    return 0


def _object(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise UsageError("the API answered with something that is not a webhook's")
    return answer


def _secret_notice(made: dict[str, Any]) -> str:
    return (
        f"secret: {made.get('secret')}\n"
        "(shown this once: store it now; it signs Filejobs-Signature, see docs/WEBHOOKS.md)"
    )


def render(endpoint: dict[str, Any]) -> str:
    lines = [
        f"webhook {endpoint.get('id')} ({endpoint.get('status')})",
        f"  tenant       {endpoint.get('tenant')}",
        f"  url          {endpoint.get('url')}",
        f"  events       {', '.join(endpoint.get('event_types') or [])}",
    ]
    if endpoint.get("description"):
        lines.append(f"  description  {endpoint['description']}")
    for secret in endpoint.get("secrets") or []:
        ends = secret.get("expires_at") or "until rotated"
        lines.append(f"  secret       made {secret.get('created_at')}, valid {ends}")
    if endpoint.get("failing_since"):
        lines.append(f"  failing since {endpoint['failing_since']}")
    if endpoint.get("disabled_reason"):
        lines.append(f"  disabled     {endpoint.get('disabled_at')}: {endpoint['disabled_reason']}")
    return "\n".join(lines)


def delivery_line(delivery: dict[str, Any]) -> str:
    code = delivery.get("response_code")
    latency = delivery.get("latency_ms")
    parts = [
        str(delivery.get("id")),
        f"{delivery.get('status'):<9}",
        f"attempt {delivery.get('attempt')}",
        str(delivery.get("event_type")),
        "-" if code is None else f"HTTP {code}",
        "-" if latency is None else f"{latency} ms",
    ]
    if delivery.get("error"):
        parts.append(str(delivery["error"]))
    if delivery.get("next_attempt_at"):
        parts.append(f"next {delivery['next_attempt_at']}")
    return "  ".join(parts)
