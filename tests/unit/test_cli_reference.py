"""Specification: docs/CLI.md's reference is the CLI's own --help of every command
(tools/cli_reference.py), so it cannot drift from what the CLI does; its hand-written guide,
above the marker, is kept as written."""

from __future__ import annotations

from pathlib import Path

from filejobs_cli.main import parser
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
TOOL = load_script(ROOT / "tools" / "cli_reference.py", "cli_reference_tool")
DOCUMENT = ROOT / "docs" / "CLI.md"


def test_the_reference_is_what_the_cli_prints_today() -> None:
    current = DOCUMENT.read_text()
    assert TOOL.document(current) == current, (
        "docs/CLI.md drifted from the CLI's --help: run .venv/bin/python tools/cli_reference.py"
    )


def test_every_command_has_its_section() -> None:
    text = DOCUMENT.read_text()
    for path, _ in TOOL.commands(parser()):
        assert f"\n### {' '.join(path)}\n" in text, path


def test_the_guide_is_kept_and_an_edited_reference_is_written_anew() -> None:
    guide = "# The CLI\n\nHand-written words.\n\n"
    written = TOOL.document(guide + TOOL.MARKER + "\n\n### filejobs\n\nstale help\n")
    assert written.startswith(guide + TOOL.MARKER)
    assert "stale help" not in written
    assert "### filejobs upload\n" in written
    # and a page without the marker gets it, under its text
    assert TOOL.document("# The CLI\n").startswith("# The CLI\n\n" + TOOL.MARKER)
