"""docs/BENCHMARKS.md is rendered from the sections the benches write (bench/report.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def render(sections: Mapping[str, Mapping[str, object]], tmp_path: Path) -> str:
    folder = tmp_path / "sections"
    folder.mkdir()
    for name, section in sections.items():
        (folder / f"{name}.json").write_text(json.dumps(section))
    out = tmp_path / "BENCHMARKS.md"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "report.py"), "render",
         "--sections", str(folder), "--out", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out.read_text()


def test_every_target_is_listed_first_and_a_missed_one_stands_out(tmp_path: Path) -> None:
    # Given a sweep section that met its target and a requests section that missed one
    sweep = {
        "section": "sweep",
        "header": ["| finished | items read |", "| --- | --- |"],
        "markdown_rows": ["| 1,000 | 100 |", "| 100,000 | 100 |"],
        "targets": [{"name": "sweep read ratio", "target": "<= 1.2", "value": 1.0, "met": True}],
        "command": ".venv/bin/python bench/sweep_scaling.py",
        "measured_at": "2026-11-30T14:00:00+00:00",
    }
    requests = {
        "section": "requests",
        "markdown": ["### Happy path", "", "| group | per |", "| --- | --- |", "| ingest | file |"],
        "targets": [{"name": "reads per job", "target": "0", "value": 1.2, "met": False}],
        "command": ".venv/bin/python bench/request_costs.py",
        "measured_at": "2026-11-30T13:00:00+00:00",
    }

    # When the document is rendered
    document = render({"sweep_scaling": sweep, "request_costs": requests}, tmp_path)

    # Then the targets open it, the missed one in bold
    targets = document.split("## Targets", 1)[1].split("\n## ", 1)[0]
    assert "| reads per job | 0 | 1.2 | **missed** |" in targets
    assert "| sweep read ratio | <= 1.2 | 1.0 | met |" in targets
    # and each section follows in its order, with its table, its command and its notes
    assert document.index("## AWS requests per file") < document.index("## The sweep against")
    assert "| 100,000 | 100 |" in document and "| ingest | file |" in document
    assert "Measured 2026-11-30T14:00:00+00:00 by `.venv/bin/python bench/sweep_scaling.py`." in (
        document
    )
    assert (ROOT / "bench" / "notes" / "sweep.md").read_text().strip() in document


def test_a_bench_that_did_not_run_is_said_to_be_unmeasured(tmp_path: Path) -> None:
    document = render({}, tmp_path)

    cold_start = document.split("## Cold start of the handlers", 1)[1].split("\n## ", 1)[0]
    assert "Not measured in this run." in cold_start
    # the built sizes come from `make template`, not from a bench: they are always there
    built = document.split("## Built sizes", 1)[1]
    assert "Not measured" not in built and "| video_thumbnail |" in built


def test_the_scanning_bench_is_run_and_gets_its_section(tmp_path: Path) -> None:
    # Given the section bench/scanning.py writes (its own tables, as "markdown")
    scanning = {
        "section": "scanning",
        "rows": [],
        "markdown": ["| what | clamscan per job | warm clamd |", "| --- | --- | --- |",
                     "| 1 MB file | 0.900 s | 0.040 s |"],
        "targets": [{"name": "ClamAV warm scan: speed-up over clamscan per job",
                     "target": ">= 20x", "value": 22.5, "met": True}],
        "command": ".venv/bin/python bench/scanning.py",
        "measured_at": "2026-11-30T15:00:00+00:00",
    }  # fmt: skip

    document = render({"scanning": scanning}, tmp_path)

    # Then it has its section after the processors', with its table, target and notes
    body = document.split("## Virus scanning: clamscan per job against a warm clamd", 1)[1]
    assert document.index("## Processors") < document.index("## Virus scanning")
    assert "| 1 MB file | 0.900 s | 0.040 s |" in body.split("\n## ", 1)[0]
    assert "| ClamAV warm scan: speed-up over clamscan per job | >= 20x | 22.5 | met |" in document
    assert (ROOT / "bench" / "notes" / "scanning.md").read_text().strip() in document
    # and `make bench` (report.py run) runs it, into that section
    listed = subprocess.run(
        [sys.executable, "-c",
         "import report; print([(b.name, b.section, b.argv) for b in report.BENCHES])"],
        cwd=ROOT / "bench", check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert "('scanning', 'scanning', ('bench/scanning.py',))" in listed


def processors_section(what: str, targets: list[dict[str, object]]) -> dict[str, object]:
    return {
        "section": "processors",
        "rows": [{"what": what}],
        "markdown_rows": [f"| {what} | `bench/{what}.py` | 1 s | 2 s | 0.5x | | |"],
        "targets": targets,
        "command": f".venv/bin/python bench/{what}.py",
        "measured_at": "2026-12-06T01:00:00+00:00",
    }


def test_the_preview_bundle_benches_are_run_into_the_processors_table(tmp_path: Path) -> None:
    # Given `make bench`'s benches, in the order they run and render
    listed = subprocess.run(
        [sys.executable, "-c",
         "import report; print('\\n'.join(f'{b.name} {b.section}' for b in report.BENCHES))"],
        cwd=ROOT / "bench", check=True, capture_output=True, text=True,
    ).stdout.split("\n")  # fmt: skip
    names = [line.split()[0] for line in listed if line]
    # then each preview bundle bench is one of them, in the Processors section, right after the
    # bench of its format's first output
    for first, bundle in (
        ("thumbnails", "image_bundle"),
        ("video_frames", "video_storyboard"),
        ("pdf_preview", "document_pages"),
    ):
        assert f"{bundle} processors" in listed
        assert names.index(bundle) == names.index(first) + 1

    # and their sections (the storyboard's without a target) are rendered as the table's rows,
    # in that order, their targets (only theirs) opening the document
    bundle_target = {"name": "image bundle over thumbnails", "target": "<= 1.3x", "value": 1.1,
                     "met": True}  # fmt: skip
    sections = {
        "document_pages": processors_section("document_pages", []),
        "video_storyboard": processors_section("video_storyboard", []),
        "image_bundle": processors_section("image_bundle", [bundle_target]),
    }
    document = render(sections, tmp_path)

    targets = document.split("## Targets", 1)[1].split("\n## ", 1)[0]
    assert targets.count("\n| ") == 3  # the header, its rule and the one target
    assert "| image bundle over thumbnails | <= 1.3x | 1.1 | met |" in targets
    processors = document.split("## Processors", 1)[1].split("\n## ", 1)[0]
    table = [line for line in processors.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| what | command | ours |")
    assert [row.split(" | ")[0] for row in table[2:]] == [
        "| image_bundle",
        "| video_storyboard",
        "| document_pages",
    ]
