"""Every generated file (template.yaml, the OpenAPI document, docs tables) is written or checked
by one function: a check writes nothing and fails naming each file that drifted, or is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from filejobs_dev.generated_files import write_or_check

REMEDY = "run .venv/bin/python tools/x.py"


def test_written_files_then_pass_the_check(tmp_path: Path) -> None:
    files = {tmp_path / "a.json": "{}\n", tmp_path / "b.md": "# b\n"}
    assert write_or_check(files, check=False, remedy=REMEDY) == 0
    assert {path.read_text() for path in files} == {"{}\n", "# b\n"}
    assert write_or_check(files, check=True, remedy=REMEDY) == 0


def test_the_check_writes_nothing_and_names_each_drifted_or_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drifted, missing, current = tmp_path / "a.json", tmp_path / "b.md", tmp_path / "c.md"
    drifted.write_text("{ }\n")
    current.write_text("# c\n")
    files = {drifted: "{}\n", missing: "# b\n", current: "# c\n"}
    assert write_or_check(files, check=True, remedy=REMEDY) == 1
    assert drifted.read_text() == "{ }\n" and not missing.exists()
    said = capsys.readouterr().err.splitlines()
    assert said == [f"{drifted} differs from what it is generated from: {REMEDY}",
                    f"{missing} differs from what it is generated from: {REMEDY}"]  # fmt: skip
