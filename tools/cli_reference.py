"""Writes the reference half of docs/CLI.md: the `--help` of every `filejobs` command.

    .venv/bin/python tools/cli_reference.py           # writes it
    .venv/bin/python tools/cli_reference.py --check   # exits 1 when the committed one differs

docs/CLI.md is two parts. Above MARKER, the hand-written guide (install, targets, the IAM
policy, completion, exit codes), kept as it is. Below it, for `filejobs` and then every command
and sub-command in the order the parser registers them, a heading and its `--help` exactly as
the CLI prints it, at a fixed width: the reference cannot say what the CLI does not do, and
tests/unit/test_cli_reference.py fails when the two drift (a new option, a changed help text).
The parser is the project's own (`filejobs_cli.main.parser`, the dev tools' `dev`, `invoke` and
`token` included, as `make install` has them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filejobs_dev.generated_files import write_or_check

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "CLI.md"
MARKER = (
    "<!-- Everything below is written by tools/cli_reference.py from the CLI's --help: "
    "edit the help texts, then run it. -->"
)
WIDTH = 100  # argparse wraps help to the terminal's width: a fixed one keeps the file stable
_INTRO = """## Reference

Every command's `--help`, as `filejobs` prints it. The target options (`--stack-name`,
`--api-url`, `--as`, `--profile`, `--region`) are the same on every command that talks to a
stack: see [Targets](#targets) above."""


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("filejobs",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """The parser and every sub-command's, depth first, in the order they were added."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*path, name))


@contextmanager
def fixed_width() -> Iterator[None]:
    """argparse wraps help to $COLUMNS (and colours it on a terminal from Python 3.14 on)."""
    saved = {name: os.environ.get(name) for name in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS=str(WIDTH), NO_COLOR="1")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def reference() -> str:
    from filejobs_cli.main import parser  # noqa: PLC0415 (the project's venv has it)

    sections = [_INTRO]
    with fixed_width():
        for path, command in commands(parser()):
            sections.append(
                f"### {' '.join(path)}\n\n```text\n{command.format_help().rstrip()}\n```"
            )
    return "\n\n".join(sections) + "\n"


def document(current: str) -> str:
    """`current` with everything below MARKER written anew (MARKER appended if missing)."""
    head, found, _ = current.partition(MARKER)
    if not found:
        head = current.rstrip("\n") + "\n\n"
    return f"{head}{MARKER}\n\n{reference()}"


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument(
        "--check", action="store_true", help="exit 1 when docs/CLI.md differs from what it writes"
    )
    arguments = options.parse_args(argv)
    return write_or_check(
        {DOCUMENT: document(DOCUMENT.read_text())},
        check=arguments.check,
        remedy="run .venv/bin/python tools/cli_reference.py",
    )


if __name__ == "__main__":
    sys.exit(main())
