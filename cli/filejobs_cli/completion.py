"""`filejobs completion bash|zsh|tcsh`: the shell's completion script, written by shtab from the
parser itself, so it completes every command and option there is and never drifts.

    filejobs completion bash > ~/.local/share/bash-completion/completions/filejobs
    filejobs completion zsh > "${fpath[1]}/_filejobs"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

SHELLS = ("bash", "zsh", "tcsh")
# Arguments that name local paths: the shell completes them as files or folders.
_FILES = frozenset({"paths", "event"})
_FOLDERS = frozenset({"out", "definitions_mirror"})


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    whole: Callable[[], argparse.ArgumentParser],
) -> None:
    completion_ = commands.add_parser(
        "completion", help="print the shell completion script (bash, zsh or tcsh)"
    )
    completion_.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    completion_.set_defaults(run=lambda arguments: print_script(arguments.shell, whole()))


def print_script(shell: str, parser: argparse.ArgumentParser, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the stream of now, not of import time
    import shtab  # noqa: PLC0415 (only this command needs it)

    mark_paths(parser, {"file": shtab.FILE, "folder": shtab.DIRECTORY})
    out.write(shtab.complete(parser, shell=shell))
    return 0


def mark_paths(parser: argparse.ArgumentParser, kinds: dict[str, object]) -> None:
    """Tells shtab which arguments, in every command, are files and which are folders."""
    for action in parser._actions:
        if action.dest in _FILES:
            action.complete = kinds["file"]  # type: ignore[attr-defined]
        elif action.dest in _FOLDERS:
            action.complete = kinds["folder"]  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                mark_paths(child, kinds)
