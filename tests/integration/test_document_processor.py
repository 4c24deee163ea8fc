"""document_preview: an image of the first page of a real uploaded PDF, text, table or JSON.

Every input is made here: PDFs with Pillow, an encrypted PDF by hand (the PDF standard security
handler, revision 2: RC4 with a 40-bit key, computed below), text in code.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pypdfium2 as pdfium  # type: ignore[import-untyped]
import pytest
from PIL import Image

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested
from filejobs.processors.document import (
    PAGE_SIZE,
    TEXT_HEAD_BYTES,
    DocumentPreviewProcessor,
    render_text_preview,
)
from tests.encrypted_media import encrypted_page
from tests.processing import MediaBench

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


def pdf_of_pages(*pages: tuple[tuple[int, int], tuple[int, int, int]]) -> bytes:
    """A PDF with one page per (size in points, colour), made by Pillow at 72 dpi."""
    images = [Image.new("RGB", size, colour) for size, colour in pages]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=72.0)
    return out.getvalue()


# --- an encrypted PDF, by hand (tests/encrypted_media.py) -------------------------------------


def encrypted_pdf(user_password: bytes) -> bytes:
    """A one-page, all-blue PDF that opens only with `user_password` (40-bit RC4)."""
    return encrypted_page(b"0 0 1 rg 0 0 200 100 re f\n", (200, 100), user_password)


# --- helpers ----------------------------------------------------------------------------------


def near(pixel: object, expected: tuple[int, int, int], tolerance: int = 24) -> bool:
    assert isinstance(pixel, tuple)
    return all(abs(a - e) <= tolerance for a, e in zip(pixel, expected, strict=True))


def preview_of(media: MediaBench, result: dict[str, object]) -> Image.Image:
    preview = result["preview"]
    assert isinstance(preview, dict)
    image = Image.open(io.BytesIO(media.output(preview["key"])))
    assert image.format == "WEBP"
    assert image.size == (preview["width"], preview["height"])
    assert len(media.output(preview["key"])) == preview["bytes"]
    return image.convert("RGB")


def darkest(image: Image.Image, box: tuple[int, int, int, int]) -> int:
    """The darkest grey level (0 black, 255 white) inside `box`."""
    low, _ = image.convert("L").crop(box).getextrema()
    assert isinstance(low, int)
    return low


def inked_rows(image: Image.Image) -> list[int]:
    """The y of every pixel row with some dark ink on it."""
    grey = image.convert("L")
    return [y for y in range(grey.height) if darkest(grey, (0, y, grey.width, y + 1)) < 128]


# --- PDF --------------------------------------------------------------------------------------


def test_a_pdf_preview_is_its_first_page_with_the_long_edge_at_1024_px(media: MediaBench) -> None:
    # Given a 3-page PDF: a red landscape page, then green and blue ones
    body = pdf_of_pages(((400, 300), RED), ((300, 400), GREEN), ((300, 400), BLUE))
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "report.pdf", body)

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it counts the pages and shows page 1, red, 1024 px on its long edge
    assert result["content_type"] == "application/pdf"
    assert result["page_count"] == 3
    assert (result["page_width_pt"], result["page_height_pt"]) == (400, 300)
    preview = preview_of(media, result)
    assert preview.size == (1024, 768)
    assert near(preview.getpixel((512, 384)), RED)
    assert result["preview"]["key"].endswith("/document_preview/preview-page1.webp")


def test_a_portrait_pdf_page_is_1024_px_high(media: MediaBench) -> None:
    # Given a one-page blue PDF, A4 portrait (595 x 842 pt)
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "a4.pdf", pdf_of_pages(((595, 842), BLUE)))

    # When the processor runs, then the preview is 1024 px high at the page's aspect ratio
    result = DocumentPreviewProcessor(media.s3)(work)
    preview = preview_of(media, result)
    assert preview.height == 1024 and abs(preview.width - 1024 * 595 / 842) <= 1
    assert near(preview.getpixel((preview.width // 2, 512)), BLUE)


def test_the_hand_made_encrypted_pdf_is_really_encrypted(tmp_path: Path) -> None:
    # Given the encrypted PDF this module makes
    path = tmp_path / "locked.pdf"
    path.write_bytes(encrypted_pdf(b"s3cret"))

    # When PDFium opens it without its password, then it asks for one
    with pytest.raises(pdfium.PdfiumError) as refused:
        pdfium.PdfDocument(str(path))
    assert refused.value.err_code == pdfium.raw.FPDF_ERR_PASSWORD
    # And with its password, its (decrypted) page is blue
    document = pdfium.PdfDocument(str(path), password="s3cret")
    image = document[0].render(scale=1).to_pil().convert("RGB")
    assert near(image.getpixel((100, 50)), BLUE)
    document.close()


def test_a_password_protected_pdf_fails_permanently_as_encrypted(media: MediaBench) -> None:
    # Given an uploaded PDF that opens only with a password
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "locked.pdf", encrypted_pdf(b"s3cret"))

    # When the processor runs, then it fails for good, saying the PDF is encrypted
    with pytest.raises(PermanentError, match="encrypted"):
        DocumentPreviewProcessor(media.s3)(work)


@pytest.mark.parametrize(
    "body",
    [
        b"%PDF-1.7\n" + bytes(range(256)) * 16,
        pdf_of_pages(((400, 300), RED))[:40],
    ],
    ids=["garbage-after-header", "truncated"],
)
def test_a_corrupt_pdf_fails_permanently(media: MediaBench, body: bytes) -> None:
    # Given an upload that starts like a PDF but is none
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "broken.pdf", body)

    # When the processor runs, then it fails for good, saying so
    with pytest.raises(PermanentError, match="not a readable PDF"):
        DocumentPreviewProcessor(media.s3)(work)


# --- text -------------------------------------------------------------------------------------


def test_plain_text_is_typeset_on_a_page_and_its_lines_counted(media: MediaBench) -> None:
    # Given a short plain-text file of 5 lines
    body = "".join(f"line {n}: the quick brown fox\n" for n in range(5)).encode()
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "notes.txt", body)

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then a white page shows 5 lines of dark text at its top, and the lines are counted
    assert result["content_type"] == "text/plain"
    assert (result["lines"], result["encoding"], result["truncated"]) == (5, "utf-8", False)
    preview = preview_of(media, result)
    assert preview.size == PAGE_SIZE
    ink = inked_rows(preview)
    assert ink and ink[0] >= 32 and ink[-1] < 200  # five lines, near the top
    assert near(preview.getpixel((PAGE_SIZE[0] // 2, PAGE_SIZE[1] - 50)), (255, 255, 255))
    assert result["preview"]["key"].endswith("/document_preview/preview.webp")


def test_long_lines_wrap_and_a_long_text_fills_the_page(media: MediaBench) -> None:
    # Given Markdown with 152 lines, most much wider than the page (about 46 KB)
    body = "# Title\n\n" + "".join(f"- item {n} " + "word " * 60 + "\n" for n in range(150))
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "README.md", body.encode())

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it is previewed as Markdown, every line counted, the page filled to its bottom margin
    assert result["content_type"] == "text/markdown"
    assert (result["lines"], result["truncated"]) == (152, False)
    ink = inked_rows(preview_of(media, result))
    assert ink[-1] > PAGE_SIZE[1] - 80 and ink[-1] < PAGE_SIZE[1] - 32 + 4


def test_a_csv_table_is_shown_in_aligned_columns_and_its_rows_counted(media: MediaBench) -> None:
    # Given a CSV whose first column varies in width and whose last column is one letter
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["name", "X"])
    for name in ("a", "a much longer name", "mid length", "b"):
        writer.writerow([name, "X"])
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "table.csv", out.getvalue().encode())

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it counts 5 rows of 2 columns
    assert result["content_type"] == "text/csv"
    assert (result["rows"], result["columns"]) == (5, 2)
    # And the last column starts at the same x on every row: the columns are aligned
    preview = preview_of(media, result).convert("L")
    starts = set()
    for row in range(1, 5):
        band = preview.crop((0, 32 + row * 22 + 2, PAGE_SIZE[0], 32 + row * 22 + 16))
        inked = [x for x in range(band.width) if darkest(band, (x, 0, x + 1, band.height)) < 128]
        runs = [x for x in inked if x - 1 not in inked]
        starts.add(runs[-1])
    assert len(starts) == 1


def test_a_line_wider_than_the_page_wraps_onto_the_next_lines(media: MediaBench) -> None:
    # Given one line of text about five page widths wide
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "wide.txt", b"word " * 300)

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it is one line, shown on several (ink reaches below the fourth line of the page)
    assert result["lines"] == 1
    ink = inked_rows(preview_of(media, result))
    assert ink[-1] > 32 + 4 * 22
    # And no text runs into the right margin
    preview = preview_of(media, result)
    assert darkest(preview, (PAGE_SIZE[0] - 30, 0, PAGE_SIZE[0], PAGE_SIZE[1])) > 200


def test_a_file_of_one_endless_line_fills_the_page(media: MediaBench) -> None:
    # Given a 1 MB text without a single line break
    work = media.work_for(
        JobType.DOCUMENT_PREVIEW, "blob.txt", b"abc " * 250_000, {"content_type": "text/plain"}
    )

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then the first 64 KiB are shown wrapped down to the foot of the page; no whole line counted
    assert (result["truncated"], result["lines"]) == (True, 0)
    assert inked_rows(preview_of(media, result))[-1] > PAGE_SIZE[1] - 80


def test_a_tab_separated_table_is_split_on_tabs(media: MediaBench) -> None:
    # Given a TSV of 3 rows of 4 columns (commas inside its cells)
    body = b"".join(b"a,1\tb,2\tc\td\n" for _ in range(3))
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "table.tsv", body)

    # When the processor runs, then it counts the rows and columns between tabs
    result = DocumentPreviewProcessor(media.s3)(work)
    assert result["content_type"] == "text/tab-separated-values"
    assert (result["rows"], result["columns"]) == (3, 4)


def test_json_is_pretty_printed(media: MediaBench) -> None:
    # Given compact JSON on one line
    document = {"name": "report", "tags": ["a", "b"], "size": {"w": 1, "h": 2}}
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "data.json", json.dumps(document).encode())

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it shows the JSON indented, one member a line
    assert result["content_type"] == "application/json"
    assert result["lines"] == 1 and result["valid_json"] is True
    assert result["pretty_lines"] == len(json.dumps(document, indent=2).splitlines()) == 11
    assert len(inked_rows(preview_of(media, result))) > 11 * 8


def test_invalid_utf8_claiming_to_be_text_is_previewed_with_replacement_characters(
    media: MediaBench,
) -> None:
    # Given bytes that are not UTF-8, ingested as text/plain
    body = b"caf\xe9 \xc3\x28 ok\n" * 10 + b"\xff\xfe\xfd\n"
    work = media.work_for(
        JobType.DOCUMENT_PREVIEW, "latin1.txt", body, input_data={"content_type": "text/plain"}
    )

    # When the processor runs, then it previews them (never crashes) and counts their lines
    result = DocumentPreviewProcessor(media.s3)(work)
    assert (result["lines"], result["encoding"]) == (11, "utf-8")
    assert inked_rows(preview_of(media, result))


def test_utf16_text_with_a_byte_order_mark_is_decoded_as_utf16(media: MediaBench) -> None:
    # Given a UTF-16 text with its BOM
    body = "\ufeffhello\nwörld\n".encode("utf-16-le")
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "utf16.txt", body)

    # When the processor runs, then it reads two lines of UTF-16
    result = DocumentPreviewProcessor(media.s3)(work)
    assert (result["content_type"], result["encoding"], result["lines"]) == (
        "text/plain",
        "utf-16-le",
        2,
    )


def test_only_the_first_64_kib_of_a_large_text_is_read(media: MediaBench) -> None:
    # Given a 4 MB CSV of 100,000 rows (ingest sniffs its head as CSV)
    body = "".join(f"{n},{n * n},row-{n}\n" for n in range(200_000)).encode()
    assert len(body) > 60 * TEXT_HEAD_BYTES
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "big.csv", body)

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it says the preview is of a truncated head, and counts the whole rows in it
    head = body[:TEXT_HEAD_BYTES]
    assert result["truncated"] is True
    assert result["rows"] == head.count(b"\n") == result["lines"]
    assert result["columns"] == 3


def test_the_content_type_is_sniffed_when_the_job_does_not_carry_it(media: MediaBench) -> None:
    # Given a JSON upload whose job lost its content type
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "data.json", b'[1, 2, {"a": null}]')
    assert work.job.input_data is not None
    del work.job.input_data["content_type"]

    # When the processor runs, then it sniffs the head and previews JSON
    result = DocumentPreviewProcessor(media.s3)(work)
    assert (result["content_type"], result["valid_json"]) == ("application/json", True)


def test_an_unsupported_type_fails_permanently_naming_the_type(media: MediaBench) -> None:
    # Given a PNG sent to the document previewer
    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, format="PNG")
    work = media.work_for(JobType.DOCUMENT_PREVIEW, "image.png", out.getvalue())

    # When the processor runs, then it refuses, naming the type
    with pytest.raises(PermanentError, match="image/png"):
        DocumentPreviewProcessor(media.s3)(work)


def test_a_stop_request_while_typesetting_stops_the_job() -> None:
    # Given text to typeset and a stop signal that is on
    # When it is typeset, then it stops
    with pytest.raises(StopRequested):
        render_text_preview(b"one\ntwo\n", "text/plain", truncated=False, should_stop=lambda: True)
