"""Office documents to PDF: the document_preview converter against `soffice --convert-to pdf` run
per file, cold and warm, on a 10-page DOCX and a 3-sheet XLSX (LibreOffice writes both here,
from flat OpenDocument: tools/samples.py `office_document`).

- soffice per file (the baseline): `soffice --headless --convert-to pdf --outdir D FILE`, as one
  would script it. Cold: a profile LibreOffice has never started with (its first start builds
  it); warm: the same profile again.
- ours: `processors/office.py` `convert_to_pdf`: the same soffice with the converter's flags
  (the import filter of the content type) and a profile of its own made for each job (macros
  off, links never updated, every fetch to a dead proxy), so every conversion is a first start:
  "cold" and "warm" are two runs of the same thing, their difference is noise and page cache.
- ours, whole preview (warm): `office_preview`: the conversion, then page 1 rendered by PDFium
  and encoded as WebP, what the sandboxed task returns.

Runs are interleaved (baseline, ours, preview, then again) so machine noise hits all alike;
medians are printed with each one's ratio to the baseline measured in the same run.

    .venv/bin/python bench/office_conversion.py [--runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))
sys.path.insert(0, str(ROOT / "tools"))

from samples import office_document  # noqa: E402 (tools/ is not a package)

from filejobs.processors import office  # noqa: E402
from filejobs.processors.office_runtime import soffice  # noqa: E402

OPENXML = "application/vnd.openxmlformats-officedocument"
DOCUMENTS = {
    "10-page DOCX": ("docx", 10, f"{OPENXML}.wordprocessingml.document"),
    "3-sheet XLSX": ("xlsx", 3, f"{OPENXML}.spreadsheetml.sheet"),
}


def seconds(action: Callable[[], object]) -> float:
    begin = time.perf_counter()
    action()
    return time.perf_counter() - begin


def baseline(document: Path, profile: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(  # noqa: S603 (soffice and our own files)
        [*soffice().argv, f"-env:UserInstallation={profile.as_uri()}", "--headless",
         "--convert-to", "pdf", "--outdir", str(out), str(document)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip


def ours(document: Path, out: Path, content_type: str) -> None:
    shutil.rmtree(out, ignore_errors=True)
    office.convert_to_pdf(document, out, soffice(), content_type=content_type)


def measure(document: Path, content_type: str, scratch: Path, runs: int) -> dict[str, float]:
    """Median seconds of each contender, cold and warm."""
    times: dict[str, list[float]] = {
        name: []
        for name in ("baseline cold", "baseline warm", "ours cold", "ours warm", "preview warm")
    }
    for run in range(runs):
        fresh = scratch / f"profile-{run}"
        for state in ("cold", "warm"):  # a profile soffice never started with, then again
            took = seconds(partial(baseline, document, fresh, scratch / "b"))
            times[f"baseline {state}"].append(took)
        for state in ("cold", "warm"):  # each with a profile of its own, made for the job
            took = seconds(partial(ours, document, scratch / "o", content_type))
            times[f"ours {state}"].append(took)
        times["preview warm"].append(
            seconds(lambda: office.office_preview(document, content_type, soffice()))
        )
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    version = subprocess.run(  # noqa: S603 (soffice itself)
        [*soffice().argv, "--version"], capture_output=True, text=True, check=False
    )
    print(f"{soffice().argv[0]}: {version.stdout.strip()}")
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="office-bench-") as folder:
        scratch = Path(folder)
        for label, (kind, parts, content_type) in DOCUMENTS.items():
            document = scratch / f"document.{kind}"
            document.write_bytes(office_document(kind, parts))
            figures[label] = measure(document, content_type, scratch, arguments.runs)
    print(f"\nmedians of {arguments.runs} runs, seconds (ratio: over soffice per file, same state)")
    print(f"{'document':<14} {'':<6} {'soffice per file':>17} {'ours':>14} {'whole preview':>15}")
    for label, medians in figures.items():
        for state in ("cold", "warm"):
            base, mine = medians[f"baseline {state}"], medians[f"ours {state}"]
            preview = (
                f"{medians['preview warm']:>6.2f} ({medians['preview warm'] / base:.2f}x)"
                if state == "warm"
                else ""
            )
            print(
                f"{label:<14} {state:<6} {base:>17.2f} {mine:>6.2f} ({mine / base:.2f}x) {preview}"
            )
    if arguments.json:
        arguments.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
