"""First-page preview of a 20-page PDF: our core (pypdfium2 + Pillow) against pdftoppm (poppler).

Two 20-page Letter PDFs are made here: "text" (written by hand: Helvetica text, ruled boxes
and curves on every page, as a report is) and "scanned" (Pillow: a 300 dpi JPEG per page, as a
scanner makes). Our core is `render_pdf_first_page` + `encode_webp` on a local path, exactly
what DocumentPreviewProcessor runs after the download: page 1 at 1024 px on its long edge, WebP.

Each sample of every contender runs in a fresh process, interleaved so machine noise hits all
alike; medians are compared and each process's own peak RSS (wait4) is reported. Contenders:

- ours (cold): a fresh interpreter importing pypdfium2 and Pillow, then the core (a cold start).
- ours (warm): the core again in that same process: every invocation after the first.
- pdftoppm: `pdftoppm -f 1 -l 1 -r 72 -png in.pdf out`, as asked (612x792 px).
- pdftoppm 1024: `-scale-to 1024` instead of `-r 72`: the same size as ours (792x1024).

The parent imports nothing heavy: a child's peak RSS starts from its parent's at fork.
Target: ours faster than the CLI (both forms), cold and warm. With `--json PATH`, the figures
are also written there as two rows (text, scanned) of the report's Processors table
(bench/common.py).

    .venv/bin/python bench/pdf_preview.py [--runs 7] [--json PATH]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ColdWarm,
    fresh_process_main,
    interleaved,
    make_section,
    markdown_command,
    markdown_row,
    print_cold_warm,
    target,
    timed,
    utc_now,
    verdict,
    write_section,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "filejobs"))

PAGES = 20
LETTER = (612, 792)
WARM_REPS = 3
CLI = ("pdftoppm", "pdftoppm 1024")
WORDS = [
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
]


def text_pdf(pages: int = PAGES) -> bytes:
    """A report-like PDF: per page, a title, 45 lines of body text, boxes and a curve."""
    objects: list[bytes] = [b"", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for number in range(pages):
        lines = [b"BT /F1 20 Tf 56 740 Td (Quarterly report, page %d) Tj ET" % (number + 1)]
        for line in range(45):
            words = " ".join(WORDS[(line + i + number) % len(WORDS)] for i in range(14))
            lines.append(b"BT /F1 10 Tf 56 %d Td (%s) Tj ET" % (700 - line * 13, words.encode()))
        for box in range(6):
            lines.append(b"0.%d 0.4 0.8 rg %d 60 60 40 re f" % (box, 56 + box * 80))
            lines.append(b"0 0 0 RG 1 w %d 60 60 40 re S" % (56 + box * 80))
        lines.append(b"1 0 0 RG 2 w 56 120 m 200 200 400 40 556 120 c S")
        content = b"\n".join(lines)
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        content_ref = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R"
            b" /Resources << /Font << /F1 3 0 R >> >> >>" % (*LETTER, content_ref)
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def scanned_pdf(path: Path, pages: int = PAGES) -> None:
    """A scan-like PDF: one 300 dpi Letter JPEG (2550x3300) per page, text on a grey gradient."""
    from PIL import Image, ImageDraw  # noqa: PLC0415 (children only)

    background = Image.linear_gradient("L").resize((2550, 3300)).point(lambda v: 200 + v // 5)
    images = []
    for number in range(pages):
        page = background.convert("RGB")
        draw = ImageDraw.Draw(page)
        for line in range(60):
            words = " ".join(WORDS[(line + i + number) % len(WORDS)] for i in range(12))
            draw.text((150, 150 + line * 50), words, fill=(20, 20, 20), font_size=36)
        images.append(page)
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=300.0)


def child(source: Path, out: Path) -> None:
    """One fresh process: the core once cold, then WARM_REPS more; prints the warm timings."""
    from filejobs.processors.pdf_page import encode_webp, render_pdf_first_page  # noqa: PLC0415

    timings = []
    for _ in range(1 + WARM_REPS):
        begin = time.perf_counter()
        preview = render_pdf_first_page(source)
        out.write_bytes(encode_webp(preview.image))
        timings.append(time.perf_counter() - begin)
    print(json.dumps({"warm": timings[1:], "pages": preview.facts["page_count"]}))


def make(folder: Path) -> None:
    (folder / "text.pdf").write_bytes(text_pdf())
    scanned_pdf(folder / "scanned.pdf")


def bench(source: Path, scratch: Path, pdftoppm: str, runs: int) -> tuple[int, ColdWarm]:
    """Prints the figures of one PDF; returns its page count and them."""
    contenders = {
        "ours": [sys.executable, __file__, "--child", str(source), str(scratch / "ours.webp")],
        "pdftoppm": [
            *(pdftoppm, "-f", "1", "-l", "1", "-r", "72", "-png"),
            *(str(source), str(scratch / "poppler72")),
        ],
        "pdftoppm 1024": [
            *(pdftoppm, "-f", "1", "-l", "1", "-scale-to", "1024", "-png"),
            *(str(source), str(scratch / "poppler1024")),
        ],
    }
    samples = interleaved(contenders, runs)
    pages = json.loads(samples["ours"][-1].stdout)["pages"]
    size = source.stat().st_size / 1e6
    print(f"{source.name}: {pages} pages, {size:.1f} MB; {runs} runs")
    figures = print_cold_warm(samples, CLI)
    outputs = {p.name: p.stat().st_size for p in scratch.iterdir() if p.suffix in (".png", ".webp")}
    print(f"  outputs: {outputs}")
    return pages, figures


def run(runs: int, json_path: Path | None) -> None:
    measured_at = utc_now()
    pdftoppm = shutil.which("pdftoppm")
    if pdftoppm is None:
        raise SystemExit("pdftoppm is not on PATH (apt-get install -y poppler-utils)")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        timed([sys.executable, __file__, "--make", str(folder)])
        results = {}
        for name in ("text.pdf", "scanned.pdf"):
            out = folder / name.removesuffix(".pdf")
            out.mkdir()
            results[out.name] = bench(folder / name, out, pdftoppm, runs)
    rows: list[dict[str, Any]] = []
    markdown_rows: list[str] = []
    targets: list[dict[str, Any]] = []
    for kind, (pages, figures) in results.items():
        row, markdown, kind_targets = section_row(kind, pages, figures, first=not rows)
        rows.append(row)
        markdown_rows.append(markdown)
        targets.extend(kind_targets)
    write_section(json_path, make_section("processors", rows, markdown_rows, targets, measured_at))


def section_row(
    kind: str, pages: int, figures: ColdWarm, *, first: bool
) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """One PDF's row of the Processors table, its markdown (the first row in full, the next
    ones shortened, as the table reads) and its targets: faster than both forms of the CLI."""
    medians, peaks = figures
    cold, warm = medians["ours"], medians["ours (warm)"]
    at72, at1024 = (medians[name] for name in CLI)
    ours_peak, cli_peak = peaks["ours"], max(peaks[name] for name in CLI)
    # Our time over the CLI's (below 1: ours is faster); met when below 1 against both forms.
    worst = {"warm": max(warm / at72, warm / at1024), "cold": max(cold / at72, cold / at1024)}
    met = {mode: ratio < 1 for mode, ratio in worst.items()}
    row = {
        "what": f"pdf_first_page_{kind}",
        "pages": pages,
        "ours_warm_ms": round(warm * 1000, 1),
        "ours_cold_ms": round(cold * 1000, 1),
        "pdftoppm_72dpi_ms": round(at72 * 1000, 1),
        "pdftoppm_1024_ms": round(at1024 * 1000, 1),
        "warm_vs_pdftoppm_72dpi": round(warm / at72, 3),
        "warm_vs_pdftoppm_1024": round(warm / at1024, 3),
        "cold_vs_pdftoppm_72dpi": round(cold / at72, 3),
        "cold_vs_pdftoppm_1024": round(cold / at1024, 3),
        "ours_peak_mib": round(ours_peak, 1),
        "pdftoppm_peak_mib": round(cli_peak, 1),
    }
    what = f"{pages}-page text PDF" if kind == "text" else f"{pages} scanned JPEG pages"
    outcome = f"{verdict(met['warm'])} warm, {verdict(met['cold'])} cold"
    if first:
        cells = [
            f"PDF first page preview, {what}",
            markdown_command(),
            f"{warm * 1000:.0f} ms warm, {cold * 1000:.0f} ms cold",
            f"`pdftoppm -r 72` {at72 * 1000:.0f} ms; `-scale-to 1024` {at1024 * 1000:.0f} ms",
            f"{warm / at72:.2f}x / {warm / at1024:.2f}x the time warm;"
            f" {cold / at72:.2f}x / {cold / at1024:.2f}x cold",
            f"faster than the CLI: {outcome}",
        ]
    else:
        cells = [
            f"same, {what}",
            "same",
            f"{warm * 1000:.0f} ms warm, {cold * 1000:.0f} ms cold",
            f"{at72 * 1000:.0f} ms; {at1024 * 1000:.0f} ms",
            f"{warm / at72:.2f}x / {warm / at1024:.2f}x warm;"
            f" {cold / at72:.2f}x / {cold / at1024:.2f}x cold",
            outcome,
        ]
    cells.append(f"{ours_peak:.0f} MiB (pdftoppm {cli_peak:.0f})")
    targets = [
        target(
            f"PDF preview ({kind}) faster than pdftoppm, {mode} (our time / the CLI's,"
            " the higher of its two forms)",
            "< 1.0x",
            worst[mode],
            met[mode],
        )
        for mode in ("warm", "cold")
    ]
    return row, markdown_row(cells), targets


def main() -> None:
    fresh_process_main(__doc__, child, make, run)


if __name__ == "__main__":
    main()
