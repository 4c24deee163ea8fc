"""document_preview's pages: what ten pages cost against one, for a 10-page DOCX and a 10-page
PDF.

The work measured is the processor's core after the download (`document.render_pages`, what
DocumentPreviewProcessor runs between reading the object and writing the pages): through the
decoder sandbox, as the worker runs it. For the DOCX, one sandbox call converts it with
LibreOffice and renders page 1 (and, with pages=10, answers with the PDF), then each later page
is rendered by a call of its own from that PDF; for the PDF, each page is a call of its own on
the file. The DOCX is written here by LibreOffice from flat OpenDocument (tools/samples.py
`office_document`), the PDF by bench/pdf_preview.py's `text_pdf` (a report's text, boxes and
curves on each page).

pages=1 and pages=10 run interleaved, round by round, so machine noise hits both alike; medians
are compared. Target (issue 48): ten pages of the DOCX cost at most 2x its first page (one
conversion, many renders). The PDF's ratio is reported, with no target: its pages are all the
work there is. With `--json PATH`, the figures are also written there as two rows (DOCX, PDF)
of the report's Processors table (bench/common.py).

    .venv/bin/python bench/document_pages.py [--runs 5] [--pdf-runs 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from common import (
    add_json_argument,
    make_section,
    markdown_command,
    markdown_row,
    target,
    utc_now,
    verdict,
    write_section,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))
sys.path.insert(0, str(ROOT / "tools"))

from pdf_preview import text_pdf  # noqa: E402
from samples import office_document  # noqa: E402

from filejobs.processors import document  # noqa: E402
from filejobs.processors.office_runtime import soffice  # noqa: E402
from filejobs.processors.sandbox.client import Sandbox  # noqa: E402

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PAGES = 10
GOAL_RATIO = 2.0


class Pages(NamedTuple):
    """Median seconds of a document_preview core with one page and with all PAGES."""

    one: float
    all: float

    @property
    def ratio(self) -> float:
        return self.all / self.one

    @property
    def each_later_page(self) -> float:
        return (self.all - self.one) / (PAGES - 1)


def preview(sandbox: Sandbox, plan: document.Plan, wanted: int, scratch: Path) -> float:
    """Seconds of one document_preview core with `wanted` pages; checks it rendered them."""
    with tempfile.TemporaryDirectory(dir=scratch) as workspace:
        begin = time.perf_counter()
        rendered = document.render_pages(sandbox, plan, wanted, workspace=Path(workspace))
        took = time.perf_counter() - begin
    assert sorted(rendered.pages) == list(range(1, wanted + 1)), sorted(rendered.pages)
    return took


def medians(contenders: dict[str, Callable[[], float]], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, run in contenders.items():
            times[name].append(run())
    return {name: statistics.median(values) for name, values in times.items()}


def compare(
    label: str, sandbox: Sandbox, plans: dict[int, document.Plan], runs: int, scratch: Path
) -> Pages:
    contenders: dict[str, Callable[[], float]] = {
        f"pages={wanted}": partial(preview, sandbox, plan, wanted, scratch)
        for wanted, plan in plans.items()
    }
    found = medians(contenders, runs)
    pages = Pages(found["pages=1"], found[f"pages={PAGES}"])
    print(
        f"{label:<13} pages=1 {pages.one * 1000:8.0f} ms   pages={PAGES} {pages.all * 1000:8.0f} ms"
        f"   ratio {pages.ratio:5.2f}x   each later page {pages.each_later_page * 1000:5.0f} ms"
    )
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds for the DOCX")
    parser.add_argument("--pdf-runs", type=int, default=15, help="rounds for the PDF")
    add_json_argument(parser)
    arguments = parser.parse_args()
    if arguments.runs < 1 or arguments.pdf_runs < 1:
        parser.error("--runs and --pdf-runs must be at least 1")
    measured_at = utc_now()
    sandbox = Sandbox([document.__name__])
    try:
        with tempfile.TemporaryDirectory(prefix="document-pages-") as folder:
            scratch = Path(folder)
            docx, pdf = scratch / "report.docx", scratch / "report.pdf"
            docx.write_bytes(office_document("docx", PAGES))
            pdf.write_bytes(text_pdf(PAGES))
            program = soffice()
            office = {n: document.office_plan(docx, DOCX, n, program) for n in (1, PAGES)}
            pdfs = {n: document.file_plan(pdf, document.PDF) for n in (1, PAGES)}
            preview(sandbox, pdfs[1], 1, scratch)  # the zygote's start, apart
            print(f"medians of {arguments.runs} (DOCX) and {arguments.pdf_runs} (PDF) rounds")
            docx_pages = compare("10-page DOCX", sandbox, office, arguments.runs, scratch)
            pdf_pages = compare("10-page PDF", sandbox, pdfs, arguments.pdf_runs, scratch)
    finally:
        sandbox.close()
    met = verdict(docx_pages.ratio <= GOAL_RATIO)
    print(
        f"target: DOCX pages={PAGES} / pages=1 <= {GOAL_RATIO:g}x: {docx_pages.ratio:.2f}x, {met}"
    )
    write_section(arguments.json, section(docx_pages, pdf_pages, measured_at))


def section(docx: Pages, pdf: Pages, measured_at: str) -> dict[str, Any]:
    """Two rows of the Processors table: the DOCX's ten pages against its first (target <= 2x),
    then the PDF's (no target: reported)."""
    met = docx.ratio <= GOAL_RATIO
    rows = [
        {
            "what": f"document_pages_{kind}",
            "pages": PAGES,
            "first_page_ms": round(pages.one * 1000, 1),
            "all_pages_ms": round(pages.all * 1000, 1),
            "all_vs_first": round(pages.ratio, 3),
            "each_later_page_ms": round(pages.each_later_page * 1000, 1),
        }
        for kind, pages in (("docx", docx), ("pdf", pdf))
    ]
    markdown_rows = [
        markdown_row(
            [
                f"document preview, all {PAGES} pages of a {PAGES}-page DOCX (one LibreOffice"
                " conversion, then a render per page, in the sandbox)",
                markdown_command(),
                f"{docx.all * 1000:.0f} ms",
                f"its first page alone {docx.one * 1000:.0f} ms",
                f"{docx.ratio:.2f}x the time ({docx.each_later_page * 1000:.0f} ms per later page)",
                f"<= {GOAL_RATIO:g}x the first page: {verdict(met)}",
                "",
            ]
        ),
        markdown_row(
            [
                f"same, a {PAGES}-page text PDF",
                "same",
                f"{pdf.all * 1000:.0f} ms",
                f"{pdf.one * 1000:.0f} ms",
                f"{pdf.ratio:.2f}x the time ({pdf.each_later_page * 1000:.0f} ms per later page)",
                "none: every page is a render",
                "",
            ]
        ),
    ]
    targets = [
        target(
            f"document preview: {PAGES} pages of a {PAGES}-page DOCX over its first page alone",
            f"<= {GOAL_RATIO:g}x",
            docx.ratio,
            met,
        )
    ]
    return make_section("processors", rows, markdown_rows, targets, measured_at)


if __name__ == "__main__":
    main()
