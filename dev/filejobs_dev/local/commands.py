"""The `filejobs` commands that run the local stack: `dev` (the whole system on moto server),
`invoke` (one function of the running stack on an event, Docker-free, as `sam local invoke` runs
it), `events` (an event per function, with the running stack's ids, for `sam local invoke` and
`invoke`) and `token` (a bearer token of the running stack for one tenant). The CLI
(filejobs_cli) adds them when the dev tools are installed; the commands on files and jobs need
none of this.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from filejobs.domain.keys import is_tenant
from filejobs_cli.client import CliError
from filejobs_cli.local_stack_file import CONFIG_PATH
from filejobs_dev.local import tokens

if TYPE_CHECKING:
    from filejobs_dev.local.stack import LocalStack

# The stack's modules (moto, its server, the template's parser: 0.9 s of imports) are imported
# by the commands that run or read a stack (dev, invoke, events), inside them: every other
# command of the CLI registers these at start and would pay for them.


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    """Adds dev, invoke, events and token to the `filejobs` command."""
    dev_command = commands.add_parser("dev", help="run the whole system locally (moto server)")
    dev_command.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("FILEJOBS_WORKERS", "1")),
        help="pollers per SQS-triggered function (default 1)",
    )
    dev_command.add_argument("--api-port", type=int, default=3000, help="default 3000")
    dev_command.add_argument(
        "--emulator-port", type=int, default=4566, help="the AWS emulator's port (default 4566)"
    )
    dev_command.add_argument(
        "--stack-name",
        default="filejobs-local",
        help="names every resource, the metrics' namespace and the alarms, as the deployed "
        "stack's name does (default filejobs-local)",
    )
    dev_command.add_argument(
        "--shared-emulator",
        type=Path,
        metavar="LOCAL_JSON",
        help="make this stack on the emulator of the running local stack whose "
        ".filejobs/local.json this is (two stacks in one account; give each its own "
        "--stack-name and --api-port)",
    )
    dev_command.add_argument(
        "--baseline",
        action="store_true",
        help="run as before the local stack's throughput work (one moto server for every "
        "service, short polling): bench/local_stack.py's baseline, slower",
    )
    dev_command.add_argument(
        "--schedule-seconds",
        type=float,
        default=None,
        help="run schedules this often instead of the template's rate",
    )
    dev_command.add_argument(
        "--grace-seconds",
        type=float,
        default=30.0,
        help="how long Ctrl-C waits for running batches (default 30)",
    )
    dev_command.add_argument(
        "--function-workers",
        type=function_workers,
        action="append",
        metavar="FUNCTION=N",
        help="pollers (or schedule runners) for one function (its logical id), overriding "
        "--workers; repeatable",
    )
    dev_command.add_argument(
        "--parameter",
        type=parameter_override,
        action="append",
        metavar="NAME=VALUE",
        help="a template parameter's value instead of its default, as sam deploy's "
        "--parameter-overrides; repeatable",
    )
    dev_command.add_argument(
        "--environment",
        type=parameter_override,
        action="append",
        metavar="NAME=VALUE",
        help="a function environment variable's value instead of the template's, in every "
        "function that sets it (e.g. a shorter OUTPUTS_PURGE_DELAY_SECONDS); repeatable",
    )
    dev_command.add_argument(
        "--faults",
        type=Path,
        help="a JSON file of faults to inject (filejobs_dev/local/faults.py documents them)",
    )
    dev_command.add_argument(
        "--fault-log",
        type=Path,
        help="append a JSON line per injected fault to this file",
    )
    dev_command.add_argument(
        "--meter-log",
        type=Path,
        help="append a JSON line per AWS request, invocation and processor call of every "
        "function to this file (filejobs_dev/local/metering.py; bench/request_costs.py reads it)",
    )
    dev_command.add_argument(
        "--definitions-mirror",
        type=Path,
        metavar="DIR",
        help="serve this folder's ClamAV databases as the definitions mirror (default: "
        ".filejobs/mirror, made with test signatures when missing)",
    )
    dev_command.add_argument(
        "--visibility-seconds",
        type=int,
        help="hide received messages this long instead of the queues' visibility timeouts",
    )
    dev_command.add_argument(
        "--stream-batching-windows",
        action="store_true",
        help="let stream event sources gather records for their MaximumBatchingWindowInSeconds "
        "before they invoke, as Lambda does (default: invoke at once)",
    )
    dev_command.set_defaults(run=lambda arguments: dev(arguments, project_root()))
    invoke_command = commands.add_parser("invoke", help="invoke one function on an event file")
    invoke_command.add_argument("function", help="its logical id in template.yaml")
    invoke_command.add_argument("-e", "--event", help="the event file (default: {})")
    invoke_command.set_defaults(run=lambda arguments: invoke(arguments, project_root()))
    events_command = commands.add_parser(
        "events",
        help="write an event per function for `sam local invoke` (and `filejobs invoke`), with "
        "the running local stack's ids (uploads a sample image first)",
    )
    events_command.add_argument(
        "--out", type=Path, default=Path("events/local"), help="the folder (default events/local)"
    )
    events_command.add_argument(
        "--tenant", default="acme", help="whose sample it uploads and as whom the API events call"
    )
    events_command.set_defaults(run=lambda arguments: events(arguments, project_root()))
    token_command = commands.add_parser(
        "token", help="print a local API token scoped to one tenant (api_token is an operator's)"
    )
    token_command.add_argument("--tenant", required=True)
    token_command.set_defaults(run=lambda arguments: token(arguments, project_root()))


def function_workers(value: str) -> tuple[str, int]:
    name, _, count = value.partition("=")
    if not name or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"expected FUNCTION=N with N >= 1, got {value!r}")
    return name, int(count)


def parameter_override(value: str) -> tuple[str, str]:
    name, equals, setting = value.partition("=")
    if not name or not equals:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {value!r}")
    return name, setting


def dev(arguments: argparse.Namespace, root: Path) -> int:
    from filejobs_dev.local.faults import FaultConfigError  # noqa: PLC0415 (see the imports)
    from filejobs_dev.local.stack import (  # noqa: PLC0415
        StackConfigError,
        StackOptions,
        StackStartError,
        run,
    )

    options = StackOptions(
        project_root=root,
        emulator_port=arguments.emulator_port,
        api_port=arguments.api_port,
        workers=arguments.workers,
        workers_per_function=dict(arguments.function_workers or []),
        schedule_seconds=arguments.schedule_seconds,
        grace_seconds=arguments.grace_seconds,
        faults=arguments.faults.read_text() if arguments.faults else "",
        visibility_seconds=arguments.visibility_seconds,
        stream_batching_windows=arguments.stream_batching_windows,
        parameters=dict(arguments.parameter or []),
        environment=dict(arguments.environment or []),
        fault_log=arguments.fault_log,
        meter_log=arguments.meter_log,
        definitions_mirror=arguments.definitions_mirror,
        baseline=arguments.baseline,
        stack_name=arguments.stack_name,
        shared_emulator=arguments.shared_emulator,
    )
    try:
        return run(options)
    except FaultConfigError as error:
        raise SystemExit(f"filejobs: --faults: {error}") from None
    except (StackConfigError, StackStartError) as error:
        raise SystemExit(f"filejobs: {error}") from None


def invoke(arguments: argparse.Namespace, root: Path) -> int:
    """Runs one function once on an event, in a process set up as the stack's hosts are."""
    event = Path(arguments.event).resolve() if arguments.event else None
    command, environment = _invocation(root, arguments.function, event)
    return subprocess.run(command, env=environment, check=False).returncode  # noqa: S603


def invoke_local(
    root: Path, function: str, event: dict[str, Any], log: IO[Any] | None = None
) -> dict[str, Any]:
    """The answer of one function of the running local stack to one event; its logs go to
    `log` (stderr unless told), as they would to CloudWatch."""
    with tempfile.TemporaryDirectory(prefix="filejobs-invoke-") as scratch:
        event_path, result = Path(scratch) / "event.json", Path(scratch) / "result.json"
        event_path.write_text(json.dumps(event))
        command, environment = _invocation(root, function, event_path)
        ran = subprocess.run(  # noqa: S603 (our own module, fixed arguments)
            [*command, "--result", str(result)],
            env=environment,
            stdout=log or sys.stderr,
            stderr=log or sys.stderr,
            check=False,
        )
        if ran.returncode != 0 or not result.is_file():
            raise CliError(f"{function} failed (exit {ran.returncode}); see its log")
        answer: dict[str, Any] = json.loads(result.read_text())
        return answer


def events(arguments: argparse.Namespace, root: Path) -> int:
    """Writes an event per function that does something real on the running local stack."""
    if not is_tenant(arguments.tenant):
        raise SystemExit(f"filejobs: not a tenant name: {arguments.tenant!r}")
    from filejobs_dev.local.sample_events import SampleError, write_events  # noqa: PLC0415

    stack, config = _running_stack(root)
    out = arguments.out if arguments.out.is_absolute() else Path.cwd() / arguments.out
    try:
        written = write_events(stack, config, out, arguments.tenant, sys.stderr)
    except SampleError as error:
        raise SystemExit(f"filejobs: {error}") from None
    for path in written:
        print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    return 0


def _running_stack(root: Path) -> tuple[LocalStack, dict[str, Any]]:
    """The running local stack of `root`, as its local.json describes it."""
    from filejobs_dev.local.resources import Resources  # noqa: PLC0415 (see the imports)
    from filejobs_dev.local.stack import LocalStack, StackOptions  # noqa: PLC0415

    config_path = root / CONFIG_PATH
    if not config_path.is_file():
        raise SystemExit("filejobs: the local stack is not running (start it with `filejobs dev`)")
    config: dict[str, Any] = json.loads(config_path.read_text())
    stack = LocalStack(StackOptions(project_root=root, region=config["region"]))
    stack.endpoint_url = config["endpoint_url"]
    stack.endpoints = dict(config.get("endpoints") or {})
    stack.resources = Resources.from_json(config["resources"])
    return stack, config


def _invocation(root: Path, function: str, event: Path | None) -> tuple[list[str], dict[str, str]]:
    config_path = root / CONFIG_PATH
    stack, _ = _running_stack(root)
    if function not in stack.functions:
        known = ", ".join(sorted(stack.functions))
        raise SystemExit(f"filejobs: no function {function!r} (one of: {known})")
    command = [
        sys.executable, "-m", "filejobs_dev.local.host", "--config", str(config_path),
        "--function", function, "--source", "invoke",
        *(["--event", str(event)] if event else []),
    ]  # fmt: skip
    return command, stack.sam_local_environment(function)


def token(arguments: argparse.Namespace, root: Path) -> int:
    """Prints a bearer token of the running local stack scoped to one tenant."""
    config_path = root / CONFIG_PATH
    if not config_path.is_file():
        raise SystemExit("filejobs: the local stack is not running (start it with `filejobs dev`)")
    secret = json.loads(config_path.read_text()).get("token_secret")
    if not secret:
        raise SystemExit(f"filejobs: {config_path} has no token secret (restart `filejobs dev`)")
    try:
        print(tokens.mint(str(secret), arguments.tenant))
    except tokens.TokenError as error:
        raise SystemExit(f"filejobs: {error}") from None
    return 0


def invoker(project_root: Callable[[], Path]) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """Runs a function of the running local stack on an event (the CLI's local target)."""
    return lambda function, event: invoke_local(project_root(), function, event)
