"""Specification: the `filejobs` command line explains itself. Every option and argument has
help, every command that prints data takes --json, `--version` says the installed version,
`completion` writes the shell's script from the parser; and the target comes from the command
line, else the environment, never from two places at once."""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from filejobs_cli import main as cli_main
from filejobs_cli.client import requested_acting, resolve_target, target_names
from filejobs_cli.completion import print_script
from filejobs_cli.credentials import Acting
from filejobs_cli.errors import UsageError
from filejobs_cli.local_stack_file import tenant_token
from filejobs_dev.local import tokens

# Commands that print no data of their own: they change something and say so, or are the
# completion script, a console served to the browser, or the local stack's.
WITHOUT_DATA = {
    ("console",),
    ("webhooks", "remove"),
    ("schedules", "remove"),
    ("presets", "remove"),
    ("completion",),
    ("console",),  # serves the console until stopped
    ("dev",),
    ("invoke",),
    ("token",),
}


def the_clis_own_parser(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser as the CLI alone builds it: the dev tools' commands are stand-ins it owns."""
    monkeypatch.setattr(cli_main, "local_commands", lambda: cli_main.WithoutDevTools("moto"))
    return cli_main.parser()


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and sub-command, with its path of names; leaves only."""
    children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not children:
        yield path, parser
    for action in children:
        for name, child in action.choices.items():
            yield from commands(child, (*path, name))


def test_every_option_and_argument_has_help(monkeypatch: pytest.MonkeyPatch) -> None:
    root = the_clis_own_parser(monkeypatch)
    missing = []
    for path, parser in [((), root), *commands(root)]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [
                    f"{' '.join(path)} {choice.dest} (the command)"
                    for choice in action._choices_actions
                    if not choice.help
                ]
            elif not action.help:
                missing.append(f"{' '.join(path)} {action.option_strings or action.dest}")
    assert missing == []


def test_every_command_that_prints_data_takes_json(monkeypatch: pytest.MonkeyPatch) -> None:
    without = [
        " ".join(path)
        for path, parser in commands(the_clis_own_parser(monkeypatch))
        if path not in WITHOUT_DATA and "--json" not in parser._option_string_actions
    ]
    assert without == []


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"filejobs {importlib.metadata.version('filejobs')}\n"


def test_only_version_looks_the_version_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # reading every installed distribution's metadata costs every command its start-up time
    def unread(*_: object) -> None:
        raise AssertionError("the distributions' metadata was read")

    monkeypatch.setattr(importlib.metadata, "packages_distributions", unread)
    arguments = the_clis_own_parser(monkeypatch).parse_args(["jobs", "--status", "failed"])
    assert arguments.command == "jobs"


def test_the_cli_starts_without_importing_the_local_stack() -> None:
    # moto, its server and the template's parser are 0.9 s of imports: only dev, invoke and
    # events need them, and import them when they run
    imported = subprocess.run(
        [sys.executable, "-c", (
            "import sys; from filejobs_cli import main; main.parser()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('moto', 'flask')"
            " or m == 'filejobs_dev.local.stack'))"
        )],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert imported.stdout.strip() == "[]"


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
def test_completion_is_written_from_the_parser(shell: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    assert print_script(shell, the_clis_own_parser(monkeypatch), out) == 0
    script = out.getvalue()
    # shtab's tcsh script completes the commands only; bash's and zsh's their options too
    words = ("upload", "webhooks") if shell == "tcsh" else ("upload", "--stack-name", "--as")
    for word in words:
        assert word in script, word


def test_the_completion_command_prints_a_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["completion", "bash"]) == 0
    assert "complete" in capsys.readouterr().out


def namespace(**given: str) -> argparse.Namespace:
    return argparse.Namespace(
        stack_name=given.get("stack_name"),
        api_url=given.get("api_url"),
        acting=given.get("acting"),
        profile=None,
        region=None,
    )


def test_the_command_line_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FILEJOBS_STACK", "from-env")
    assert target_names(namespace()) == ("from-env", None)
    assert target_names(namespace(api_url="https://x.example/v1")) == (None, "https://x.example/v1")
    monkeypatch.setenv("FILEJOBS_API_URL", "https://y.example/v1")
    with pytest.raises(UsageError, match="both set"):
        target_names(namespace())
    with pytest.raises(UsageError, match="not both"):
        target_names(namespace(stack_name="a", api_url="https://x.example/v1"))


def test_as_comes_from_the_command_line_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FILEJOBS_AS", "tenant:acme")
    assert requested_acting(namespace()) == Acting("acme")
    monkeypatch.setenv("FILEJOBS_AS", "root")
    with pytest.raises(UsageError, match="FILEJOBS_AS"):
        requested_acting(namespace())
    monkeypatch.delenv("FILEJOBS_AS")
    assert requested_acting(namespace()) is None


def test_as_is_refused_where_no_stack_names_the_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FILEJOBS_STACK", raising=False)
    arguments = namespace(api_url="https://x.example/v1")
    arguments.acting = Acting()
    with pytest.raises(UsageError, match="give --stack-name instead of --api-url"):
        resolve_target(arguments, Path.cwd)


@pytest.mark.parametrize("tenant", ["acme", "A_b-9", "x" * 63])
def test_a_local_tenant_token_is_the_one_the_local_stack_mints(tenant: str) -> None:
    assert tenant_token("a-secret", tenant) == tokens.mint("a-secret", tenant)
    assert tokens.tenant_of("a-secret", tenant_token("a-secret", tenant)) == tenant
