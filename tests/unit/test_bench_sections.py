"""Specification: a bench given `--json PATH` writes its figures as a report section.

The report renderer (make bench) concatenates these sections into docs/BENCHMARKS.md: each
section names itself, carries its rows as numbers and as markdown under its table's header, its
targets with their outcome, how to run it again and when it ran. The hashing bench stands for
the processor benches here, on 8 MiB: a few seconds. The preview bundle's benches (image bundle,
document pages, video storyboard) take tens of seconds a run: their sections are checked as
made from given figures, by the function each bench writes its section with.
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
from typing import Any

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


def bench_section(script: str, argv: list[str], call: str) -> dict[str, Any]:
    """The section bench/{script}.py's `section` makes of the figures in `call` (no measuring),
    as the bench ran with `argv`: in a fresh interpreter, where its imports resolve as under
    `make bench`."""
    code = (
        "import json, sys\n"
        "sys.path.insert(0, 'bench')\n"
        f"import {script}\n"
        f"sys.argv = ['bench/{script}.py', *{argv!r}]\n"
        f"print(json.dumps({script}.{call}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    section: dict[str, Any] = json.loads(run.stdout)
    assert set(section) == {"section", "rows", "markdown_rows", "targets", "command", "measured_at"}
    assert section["section"] == "processors"
    header = bench_common().PROCESSOR_TABLE_HEADER
    assert section["markdown_rows"]
    assert all(len(cells(row)) == len(cells(header[0])) for row in section["markdown_rows"])
    assert section["command"].endswith(" ".join([f"bench/{script}.py", *argv]))
    return section


def test_the_image_bundle_bench_judges_the_bundle_and_pyvips() -> None:
    # Given a bundle at 1.4x the thumbnails' time, and pyvips twice as slow as the thumbnails
    medians = {
        "thumbnails alone": 0.100,
        "thumbnails + facts": 0.140,
        "pyvips (3 sizes)": 0.200,
    }
    section = bench_section(
        "image_bundle", ["--rounds", "1"], f"section({medians!r}, 3.5, 0.5, 40.0, 'now')"
    )

    # Then the bundle missed its 1.3x and the thumbnails met pyvips, in the targets and the rows
    bundle, vips = section["targets"]
    assert (bundle["target"], bundle["value"], bundle["met"]) == ("<= 1.3x", 1.4, False)
    assert (vips["target"], vips["value"], vips["met"]) == (">= 1.0x", 2.0, True)
    first, second = (cells(row) for row in section["markdown_rows"])
    assert first[1] == "`bench/image_bundle.py --rounds 1`"
    assert "**missed**" in first[5] and first[6] == "40 MiB"
    assert second[:2] == ["same, the thumbnails alone (128, 256, 512 px from one decode)", "same"]
    assert "2.00x pyvips" in second[4] and "met" in second[5] and "missed" not in second[5]
    rows = section["rows"]
    assert rows[0]["bundle_vs_thumbnails"] == 1.4 and rows[1]["vs_pyvips"] == 2.0


def test_the_image_bundle_bench_without_pyvips_says_so() -> None:
    medians = {"thumbnails alone": 0.100, "thumbnails + facts": 0.120}
    section = bench_section("image_bundle", [], f"section({medians!r}, 3.5, 0.5, 40.0, 'now')")

    (bundle,) = section["targets"]
    assert bundle["met"] is True
    second = cells(section["markdown_rows"][1])
    assert second[3] == "pyvips: not installed" and second[5].endswith("not measured")


def test_the_document_pages_bench_judges_the_docx_and_reports_the_pdf() -> None:
    # Given ten DOCX pages at 2.5x its first (one conversion, renders), the PDF's at 8x
    call = "section(document_pages.Pages(1.0, 2.5), document_pages.Pages(0.06, 0.48), 'now')"
    section = bench_section("document_pages", ["--runs", "1"], call)

    # Then only the DOCX has a target, missed; the PDF's row reports its ratio
    (docx,) = section["targets"]
    assert (docx["target"], docx["value"], docx["met"]) == ("<= 2x", 2.5, False)
    docx_row, pdf_row = (cells(row) for row in section["markdown_rows"])
    assert docx_row[2:5] == ["2500 ms", "its first page alone 1000 ms",
                             "2.50x the time (167 ms per later page)"]  # fmt: skip
    assert "**missed**" in docx_row[5]
    assert pdf_row[4] == "8.00x the time (47 ms per later page)" and "missed" not in pdf_row[5]
    assert [row["what"] for row in section["rows"]] == ["document_pages_docx", "document_pages_pdf"]


def test_the_video_storyboard_bench_reports_the_extra_seconds_without_a_target() -> None:
    # Given the poster alone in 0.2 s and the previews in 3.2 s (CPU 0.2 and 4.6)
    made = {"storyboard": {"tiles": 60}, "animation": {"start_seconds": 5.0, "end_seconds": 8.0}}
    call = f"section({{'poster': (0.2, 0.2), 'previews': (3.2, 4.6)}}, {made!r}, 60, 'now')"
    section = bench_section("video_storyboard", ["--runs", "1"], call)

    # Then there is no target, and the row says what the previews add
    assert section["targets"] == []
    (row,) = (cells(row) for row in section["markdown_rows"])
    assert row[0].startswith("video poster + storyboard (60 tiles) + 3.0 s animation")
    assert row[2:5] == ["3.20 s (4.60 s CPU)", "the poster alone 0.20 s (0.20 s CPU)",
                        "+3.00 s, 16.0x the time"]  # fmt: skip
    (figures,) = section["rows"]
    assert figures["extra_wall_s"] == 3.0 and figures["storyboard_tiles"] == 60
