"""The `filejobs` command: files and jobs on a deployed stack or the local one; with the dev
tools installed (filejobs_dev), the local stack itself and Docker-free invocations of its functions.

filejobs dev [--workers N] [--api-port 3000] [--emulator-port 4566] [--schedule-seconds S]
             [--definitions-mirror DIR] [--stack-name NAME] [--shared-emulator LOCAL_JSON]
             [--baseline]
filejobs console [--stack-name S] [--as operator|tenant:NAME]   (a signing proxy on 127.0.0.1)
filejobs invoke FUNCTION -e events/x.json     (against the running local stack)
filejobs upload PATH... [--tenant T] [--folder F] [--key NAME] [--preset NAME]
                [--no-follow | --wait] [--timeout S] [--json]
filejobs upload-url [--tenant T] [--filename NAME] [--folder F] [--content-type TYPE]
                    [--preset NAME] [--metadata NAME=VALUE]... [--expires-in S] [--curl]
                    [--json]
filejobs status FILE_ID|JOB_ID [--json]
filejobs jobs [--status S] [--type T] [--tenant T] [--limit N] [--json]
filejobs request FILE_ID JOB_TYPE [--option NAME=VALUE]... [--options JSON]
                 [--delay 10m | --at TIME] [--max-retries N] [--priority N] [--json]
filejobs cancel JOB_ID [--reason R] [--json]  |  filejobs retry JOB_ID [--json]
filejobs get FILE_ID [--out DIR] [--json]
filejobs rescan FILE_ID... | --tenant T [--prefix P] [--dry-run]
filejobs backfill --bucket B [--prefix P] [--inventory s3://.../manifest.json] [--tenant T]
filejobs definitions status|update|rollback [--json]
filejobs completion bash|zsh|tcsh
filejobs quotas show TENANT [--json]
filejobs quotas set TENANT [--files-per-day N] [--bytes-per-day N] [--max-file-bytes N]
                    [--max-in-flight-jobs N] [--default QUOTA]...   (0: unlimited)
filejobs search [--tenant T] [--status S] [--type JOB_TYPE] [--group G] [--error TEXT]
                [--since ISO] [--until ISO] [--prefix KEY_PREFIX] [--limit N | --all] [--json]
filejobs failures [--tenant T] [--type JOB_TYPE] [--json]
filejobs bulk retry|cancel|rescan|delete --reason TEXT [filters as search] [--dry-run] [--yes]
                [--no-wait] [--json]
filejobs bulk status OP_ID [--json]  |  filejobs bulk list [--tenant T] [--limit N] [--json]
filejobs webhooks add URL --event TYPE... [--tenant T]  |  list [--tenant T]  |  show ID
filejobs webhooks rotate ID [--overlap-hours H]  |  enable ID  |  deliveries ID  |  remove ID
filejobs webhooks resend ID DELIVERY_ID
filejobs schedules add NAME --cron EXPR [--timezone TZ] --prefix P --rescan | --run JOB_TYPE
                   [--option NAME=VALUE]... [--tenant T]
filejobs schedules list [--tenant T] | show|pause|resume|remove SCHEDULE_ID   [--json]
filejobs presets set NAME --job "JOB_TYPE [NAME=VALUE]... [priority=N]"... | --scan-only |
                 --store-only [--prefix P]... [--tenant-default] [--tenant T]
filejobs presets list [--tenant T] | show NAME [--version N] | remove NAME   [--json]
filejobs delete FILE_ID [--yes] [--json]          (erases one upload for good)
filejobs erase --tenant T --reason TEXT [--yes] [--wait] [--json]   (a whole tenant; operators)

Commands on files and jobs go to the local stack (`.filejobs/local.json`) unless given
--stack-name NAME ($FILEJOBS_STACK) or --api-url URL ($FILEJOBS_API_URL): a deployed stack,
called as the operator or a tenant (--as, $FILEJOBS_AS) with the API role the CLI assumes
with your credentials (--profile; credentials.py, docs/CLI.md). `dev`, `invoke` and `token`
come from filejobs_dev.local.commands; without the dev tools they say how to get them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

from filejobs_cli import commands as commands_
from filejobs_cli import (
    completion,
    console,
    console_proxy,
    erasure,
    presets,
    quotas,
    requests,
    scanning,
    schedules,
    upload_urls,
    webhooks,
)
from filejobs_cli.client import CliError

# The commands that need the dev tools (moto, the template's parser), in the package that has them.
LOCAL_COMMANDS_MODULE = "filejobs_dev.local.commands"
LOCAL_COMMAND_NAMES = ("dev", "invoke", "token")


class LocalCommands(Protocol):
    def register(
        self,
        commands: argparse._SubParsersAction[argparse.ArgumentParser],
        project_root: Callable[[], Path],
    ) -> None: ...

    def invoker(
        self, project_root: Callable[[], Path]
    ) -> Callable[[str, dict[str, Any]], dict[str, Any]]: ...


class WithoutDevTools:
    """Stands in for the local commands where only the CLI is installed: each says what it needs."""

    def __init__(self, missing: str) -> None:
        self.message = (
            "filejobs {command}: the local stack needs the project's dev tools, and "
            f"{missing} is not installed (in a clone of the project: make install)"
        )

    def register(
        self,
        commands: argparse._SubParsersAction[argparse.ArgumentParser],
        project_root: Callable[[], Path],
    ) -> None:
        for name in LOCAL_COMMAND_NAMES:
            # Whatever follows is taken as is ("+" for options: "--workers" is no option here),
            # so the answer is what the command needs, not a complaint about its arguments.
            command = commands.add_parser(
                name, help="(needs the dev tools)", add_help=False, prefix_chars="+"
            )
            command.add_argument(
                "arguments", nargs="*", help="taken as they are (the dev tools read them)"
            )
            command.set_defaults(run=self._refuse(name))

    def invoker(
        self, project_root: Callable[[], Path]
    ) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
        def refuse(function: str, event: dict[str, Any]) -> dict[str, Any]:
            raise CliError(self.message.format(command=f"(invoking {function} locally)"))

        return refuse

    def _refuse(self, name: str) -> Callable[[argparse.Namespace], int]:
        def run(arguments: argparse.Namespace) -> int:
            raise SystemExit(self.message.format(command=name))

        return run


def local_commands() -> LocalCommands:
    try:
        return cast(LocalCommands, importlib.import_module(LOCAL_COMMANDS_MODULE))
    except ModuleNotFoundError as error:
        return WithoutDevTools(error.name or LOCAL_COMMANDS_MODULE)


def project_root() -> Path:
    """The nearest folder upwards holding template.yaml (the CLI runs from anywhere inside)."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "template.yaml").is_file():
            return folder
    raise SystemExit("filejobs: no template.yaml here or above; run it inside the project")


def version() -> str:
    """This CLI's version, from the metadata of the distribution that installed it
    (filejobs-cli alone, or the project's filejobs)."""
    for distribution in importlib.metadata.packages_distributions().get("filejobs_cli", []):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown (not installed)"


class PrintVersion(argparse.Action):
    """--version, the version looked up only when asked: finding the distribution reads every
    installed one's metadata (0.4 s here), which every other command would pay at start."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"filejobs {version()}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="filejobs", description=__doc__.split("\n\n")[0])
    root.add_argument("--version", action=PrintVersion, help="print the version")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    local = local_commands()
    local.register(commands, project_root)
    commands_.register(commands, project_root)
    requests.register(commands, project_root)
    scanning.register(commands, project_root, local.invoker(project_root))
    quotas.register(commands, project_root)
    upload_urls.register(commands, project_root)
    webhooks.register(commands, project_root)
    schedules.register(commands, project_root)
    presets.register(commands, project_root)
    erasure.register(commands, project_root)
    console.register(commands, project_root)
    console_proxy.register(commands, project_root)
    completion.register(commands, parser)
    return root


def main(argv: list[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    result: int = arguments.run(arguments)
    return result


if __name__ == "__main__":
    sys.exit(main())
