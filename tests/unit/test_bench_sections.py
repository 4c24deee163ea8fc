"""Specification: a bench given `--json PATH` writes its figures as a report section.

The report renderer (make bench) concatenates these sections into docs/BENCHMARKS.md: each
section names itself, carries its rows as numbers and as markdown under its table's header, its
targets with their outcome, how to run it again and when it ran. The hashing bench stands for
the processor benches here, on 8 MiB: a few seconds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def bench_common() -> ModuleType:
    """bench/common.py, loaded by path (bench/ is no package; its scripts import it as common)."""
    return load_script(BENCH / "common.py", "bench_common_under_test")


def cells(row: str) -> list[str]:
    """A markdown table row's cells (an escaped `\\|` stays inside its cell)."""
    assert row.startswith("|") and row.endswith("|"), row
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row[1:-1])]


@pytest.mark.skipif(
    not (shutil.which("sha256sum") and shutil.which("openssl")),
    reason="the hashing bench's baselines (sha256sum, openssl) are not on PATH",
)
def test_the_hashing_bench_writes_its_processors_row(tmp_path: Path) -> None:
    # when the bench runs briefly with --json
    out = tmp_path / "sections" / "hashing.json"
    run = subprocess.run(
        [
            sys.executable,
            str(BENCH / "hashing.py"),
            "--runs",
            "1",
            "--mib",
            "8",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    # then it still prints its figures, and writes the section (its folder made)
    assert "SHA-256 of 8 MiB" in run.stdout
    section = json.loads(out.read_text())
    assert set(section) == {
        "section",
        "rows",
        "markdown_rows",
        "targets",
        "command",
        "measured_at",
    }
    assert section["section"] == "processors"
    # with its figures as plain numbers
    (row,) = section["rows"]
    assert row["mib"] == 8
    assert all(row[key] > 0 for key in ("ours_mib_per_s", "openssl_mib_per_s", "vs_openssl"))
    # and one markdown row, with the Processors table's columns
    header = bench_common().PROCESSOR_TABLE_HEADER
    (markdown,) = section["markdown_rows"]
    assert len(cells(markdown)) == 7 == len(cells(header[0])) == len(cells(header[1]))
    assert cells(markdown)[:2] == [
        "SHA-256 of 8 MiB, streamed",
        "`bench/hashing.py --runs 1 --mib 8`",
    ]
    # and its target, judged from the numbers
    (target,) = section["targets"]
    assert set(target) == {"name", "target", "value", "met"}
    assert target["met"] is (target["value"] >= 0.8)
    assert ("missed" in cells(markdown)[5]) is not target["met"]
    # and how to run it again (without --json), and when, in UTC
    assert section["command"].endswith("bench/hashing.py --runs 1 --mib 8")
    assert datetime.fromisoformat(section["measured_at"]).utcoffset() is not None


def test_a_section_goes_nowhere_without_a_path(tmp_path: Path) -> None:
    common = bench_common()
    common.write_section(None, {"section": "processors"})
    common.write_section(tmp_path / "a" / "b.json", {"section": "cold_start"})
    assert json.loads((tmp_path / "a" / "b.json").read_text()) == {"section": "cold_start"}
    assert len(cells(common.COLD_START_TABLE_HEADER[0])) == 5
