"""document_preview's pages: the first N pages of a PDF, an office document or a multi-page TIFF
scan, each a WebP image with its number, and the document's page count; page 1 is also the
preview, written once.

Every input is real and made here: PDFs by Pillow (one colour a page, so each image says which
page it is), one with a page overwritten in the middle and one whose page boxes declare a
kilometre; TIFFs by Pillow (frames of different modes and sizes), one with a frame whose header
declares 100 MP; a 10-page DOCX that LibreOffice writes from flat OpenDocument (tools/samples.py).
Each runs through the processor, its sandbox and moto S3.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from PIL import Image, TiffImagePlugin

from filejobs.api import parsing
from filejobs.domain.job import JobType
from filejobs.domain.job_options import OptionError, options_of
from filejobs.domain.retry import PermanentError
from filejobs.processors import document, office
from filejobs.processors.base import StopRequested
from filejobs.processors.document import DocumentPreviewProcessor
from filejobs.processors.office_runtime import soffice
from filejobs.processors.sandbox.client import shared_sandbox
from filejobs.services.errors import InvalidRequestError
from tests.fuzz.test_corrupt_media import PYTHON_NOISE, READABLE_LENGTH, mutations
from tests.integration.test_document_processor import near, pdf_of_pages
from tests.processing import MediaBench, ProgressReports, watched

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from samples import office_document

COLOURS = [(220, 30, 30), (30, 160, 30), (30, 30, 220), (230, 200, 20), (20, 200, 200)]
A4 = (595, 842)
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
needs_libreoffice = pytest.mark.skipif(
    shutil.which("soffice") is None, reason="LibreOffice is not installed (make system-deps)"
)


def five_page_pdf() -> bytes:
    return pdf_of_pages(*((A4, colour) for colour in COLOURS))


def preview_of(
    media: MediaBench, name: str, body: bytes, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    work = media.work_for(JobType.DOCUMENT_PREVIEW, name, body, options)
    return DocumentPreviewProcessor(media.s3)(work)


def image_of(media: MediaBench, output: dict[str, Any]) -> Image.Image:
    data = media.output(output["key"])
    image = Image.open(io.BytesIO(data))
    assert image.format == "WEBP" and output["format"] == "webp"
    assert image.size == (output["width"], output["height"])
    assert len(data) == output["bytes"]
    return image.convert("RGB")


def centre(image: Image.Image) -> object:
    return image.getpixel((image.width // 2, image.height // 2))


def written_keys(media: MediaBench) -> list[str]:
    listed = media.s3.list_objects_v2(Bucket=media.outputs).get("Contents", [])
    return sorted(item["Key"] for item in listed)


# --- PDF --------------------------------------------------------------------------------------


def test_a_pdf_has_its_first_three_pages_rendered_by_default(media: MediaBench) -> None:
    # Given a 5-page A4 PDF, each page a colour of its own, and no pages option
    result = preview_of(media, "report.pdf", five_page_pdf())

    # Then it counts 5 pages and renders the first 3, in order, each 1024 px high, its colour
    assert result["page_count"] == 5
    pages = result["pages"]
    assert [page["page"] for page in pages] == [1, 2, 3]
    for page, colour in zip(pages, COLOURS, strict=False):
        assert page["kind"] == "page"
        image = image_of(media, page)
        assert image.height == 1024 and abs(image.width - 1024 * 595 / 842) <= 1
        assert near(centre(image), colour)
        assert page["key"].endswith(f"/document_preview/preview-page{page['page']}.webp")


def test_page_one_is_the_preview_written_once(media: MediaBench) -> None:
    # Given a 5-page PDF previewed with its default 3 pages
    result = preview_of(media, "report.pdf", five_page_pdf())

    # Then the preview is page 1's object, as a preview, and only 3 images are written
    preview, first = result["preview"], result["pages"][0]
    assert preview == {**{k: v for k, v in first.items() if k != "page"}, "kind": "preview"}
    assert set(preview) == {"kind", "key", "width", "height", "bytes", "format"}
    keys = written_keys(media)
    assert len(keys) == 3 and all(re.search(r"/preview-page[123]\.webp$", key) for key in keys)


def test_asking_for_more_pages_than_the_pdf_has_renders_them_all(media: MediaBench) -> None:
    result = preview_of(media, "report.pdf", five_page_pdf(), {"pages": 20})
    assert result["page_count"] == 5
    assert [page["page"] for page in result["pages"]] == [1, 2, 3, 4, 5]
    assert near(centre(image_of(media, result["pages"][4])), COLOURS[4])


def test_a_one_page_pdf_has_one_page_which_is_the_preview(media: MediaBench) -> None:
    result = preview_of(media, "memo.pdf", pdf_of_pages((A4, COLOURS[2])), {"pages": 5})
    assert result["page_count"] == 1
    assert [page["page"] for page in result["pages"]] == [1]
    assert result["pages"][0]["key"] == result["preview"]["key"]
    assert "skipped_pages" not in result


def test_pages_1_renders_the_preview_alone(media: MediaBench) -> None:
    result = preview_of(media, "report.pdf", five_page_pdf(), {"pages": 1})
    assert (result["page_count"], len(result["pages"]), len(written_keys(media))) == (5, 1, 1)


def test_progress_moves_page_by_page(media: MediaBench) -> None:
    # Given a 5-page PDF, all pages asked for
    work, notes = watched(
        media.work_for(JobType.DOCUMENT_PREVIEW, "report.pdf", five_page_pdf(), {"pages": 5})
    )

    # When the processor runs
    DocumentPreviewProcessor(media.s3)(work)

    # Then it says which page it renders, each in turn, and the fraction only grows
    messages = [message for _, message in notes.reports]
    rendering = [m for m in messages if m and m.startswith("rendering page")]
    assert rendering == [f"rendering page {n} of 5" for n in range(2, 6)]
    fractions = [fraction for fraction, _ in notes.reports]
    assert fractions == sorted(fractions)


def test_a_job_cancelled_between_pages_stops_and_writes_nothing(media: MediaBench) -> None:
    # Given a 5-page PDF whose job is cancelled once page 3 is being rendered
    notes = ProgressReports()

    def cancelled() -> bool:
        return any(message == "rendering page 3 of 5" for _, message in notes.reports)

    work = media.work_for(
        JobType.DOCUMENT_PREVIEW, "report.pdf", five_page_pdf(), {"pages": 5}, cancelled
    )
    work = dataclasses.replace(work, notes=notes)

    # When the processor runs, then it stops before page 4, and no page is written
    with pytest.raises(StopRequested):
        DocumentPreviewProcessor(media.s3)(work)
    assert "rendering page 4 of 5" not in [message for _, message in notes.reports]
    assert written_keys(media) == []


def pdf_with_page_overwritten(number: int) -> bytes:
    """five_page_pdf() with page `number`'s object overwritten in place (same length: the
    cross-reference table stays right) by a number: the page tree names a page that is none."""
    body = five_page_pdf()
    kids = re.search(rb"/Kids \[([^\]]*)\]", body)
    assert kids is not None
    object_number = kids[1].split(b"R")[number - 1].split()[0]
    start = body.index(b"\n" + object_number + b" 0 obj")
    end = body.index(b"endobj", start)
    head = b"\n" + object_number + b" 0 obj "
    return body[:start] + head + b"42".rjust(end - start - len(head)) + body[end:]


def test_a_corrupt_page_in_the_middle_is_skipped_and_named(media: MediaBench) -> None:
    # Given a 5-page PDF whose page 3 is no page (its object overwritten), all pages asked for
    result = preview_of(media, "report.pdf", pdf_with_page_overwritten(3), {"pages": 5})

    # Then the job completes with the other four pages, each its own colour, and says why 3 is
    # missing: the pages that render are worth having, and no retry would render page 3
    assert result["page_count"] == 5
    assert [page["page"] for page in result["pages"]] == [1, 2, 4, 5]
    for page in result["pages"]:
        assert near(centre(image_of(media, page)), COLOURS[page["page"] - 1])
    assert result["skipped_pages"] == [
        {"page": 3, "reason": "the PDF's page 3 cannot be loaded: Failed to load page."}
    ]


def test_a_corrupt_first_page_still_fails_the_job_for_good(media: MediaBench) -> None:
    with pytest.raises(PermanentError, match="the PDF's first page cannot be loaded"):
        preview_of(media, "report.pdf", pdf_with_page_overwritten(1), {"pages": 5})


def test_every_page_has_the_same_pixel_budget_whatever_its_box_declares(
    media: MediaBench,
) -> None:
    # Given a PDF whose page 1 is A4, page 2 a page box of 1,440,000 x 720,000 pt (508 x 254 m),
    # page 3 one of 14,400 x 1,440,000 pt (a strip 100 times as tall as it is wide)
    images = [
        Image.new("RGB", (595, 842), COLOURS[0]),
        Image.new("RGB", (200, 100), COLOURS[1]),
        Image.new("RGB", (1, 100), COLOURS[2]),
    ]
    dpi = [72.0, 0.01, 0.005]
    pdfs = []
    for image, resolution in zip(images, dpi, strict=True):
        out = io.BytesIO()
        image.save(out, format="PDF", resolution=resolution)
        pdfs.append(out.getvalue())
    body = _concatenated(pdfs)

    # When all its pages are previewed
    result = preview_of(media, "huge.pdf", body, {"pages": 3})

    # Then each page is within 1024 px on its long edge, as page 1 is
    sizes = [(page["width"], page["height"]) for page in result["pages"]]
    assert sizes == [(724, 1024), (1024, 512), (11, 1024)]
    assert near(centre(image_of(media, result["pages"][1])), COLOURS[1])


def _concatenated(pdfs: list[bytes]) -> bytes:
    """One PDF of the pages of `pdfs` (each one page), merged by PDFium."""
    import pypdfium2 as pdfium  # type: ignore[import-untyped]  # noqa: PLC0415

    merged = pdfium.PdfDocument.new()
    for data in pdfs:
        merged.import_pages(pdfium.PdfDocument(data))
    out = io.BytesIO()
    merged.save(out)
    return out.getvalue()


def test_pages_past_the_time_budget_for_later_pages_are_not_rendered(tmp_path: Path) -> None:
    # Given a 5-page PDF and no time at all for the pages after the first
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(five_page_pdf())
    sandbox = shared_sandbox(document.__name__)

    # When its pages are rendered, then page 1 is, and the rest are not, said so once
    rendered = document.render_pages(
        sandbox, document.file_plan(pdf, document.PDF), 5, workspace=tmp_path, later_seconds=0
    )
    assert sorted(rendered.pages) == [1]
    assert rendered.skipped == [
        {
            "page": 2,
            "reason": "not rendered: the pages after the first took over 0 s",
            "stopped": True,
        }
    ]


# --- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 21, "3", 2.5, True, None])
def test_a_pages_option_out_of_bounds_or_not_an_integer_is_refused_by_the_api(
    value: object,
) -> None:
    body = {"job_type": "document_preview", "input_data": {"pages": value}}
    with pytest.raises(InvalidRequestError) as refused:
        parsing.request_job("0b0f8a4e-6d1c-4a8e-9f3b-2c7d5e1a9b40", json.dumps(body), None)
    shown = json.dumps(value) if not isinstance(value, str) else repr(value)
    assert refused.value.message == (
        f"input_data.pages: must be an integer from 1 to 20; got {shown}"
    )


def test_the_pages_option_s_definition_bounds_and_default() -> None:
    definition = options_of(JobType.DOCUMENT_PREVIEW)
    assert definition.read(None) == {"pages": 3}
    assert definition.read({"pages": 20.0}) == {"pages": 20}
    assert definition.check({"pages": 1}) == {"pages": 1}
    with pytest.raises(OptionError) as refused:
        definition.check({"pages": 21})
    assert (refused.value.field, refused.value.reason) == (
        "input_data.pages",
        "must be an integer from 1 to 20; got 21",
    )
    assert definition.schema()["properties"]["pages"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
        "default": 3,
        "description": definition.options[0].description,
    }


def test_a_stored_job_with_a_pages_option_now_refused_fails_readably(media: MediaBench) -> None:
    with pytest.raises(PermanentError, match=r"^bad option input_data.pages: must be an integer"):
        preview_of(media, "report.pdf", five_page_pdf(), {"pages": 0})


# --- TIFF scans -------------------------------------------------------------------------------


def three_page_tiff() -> bytes:
    """A scan of 3 pages: a 2000x1500 red RGB page, an 800x1000 bilevel (fax) page with a black
    band at its top, and a small 300x200 16-bit grey page, white."""
    fax = Image.new("1", (800, 1000), 1)
    fax.paste(0, (0, 0, 800, 200))
    pages = [Image.new("RGB", (2000, 1500), COLOURS[0]), fax, Image.new("I;16", (300, 200), 65535)]
    out = io.BytesIO()
    pages[0].save(
        out, format="TIFF", save_all=True, append_images=pages[1:], compression="tiff_deflate"
    )
    return out.getvalue()


def test_a_multi_page_tiff_scan_has_its_pages_rendered(media: MediaBench) -> None:
    # Given a 3-page TIFF of pages of different sizes and modes (ingest sniffs image/tiff)
    result = preview_of(media, "scan.tiff", three_page_tiff())

    # Then each frame is a page, scaled to 1024 px on its long edge (never enlarged), in colour
    assert result["content_type"] == "image/tiff"
    assert result["page_count"] == 3
    assert (result["page_width_px"], result["page_height_px"]) == (2000, 1500)
    first, fax, grey = (image_of(media, page) for page in result["pages"])
    assert first.size == (1024, 768) and near(centre(first), COLOURS[0])
    assert fax.size == (800, 1000)
    assert near(fax.getpixel((400, 100)), (0, 0, 0)) and near(centre(fax), (255, 255, 255))
    assert grey.size == (300, 200) and near(centre(grey), (255, 255, 255))
    assert result["preview"]["key"] == result["pages"][0]["key"]


def tiff_with_frame_declaring(body: bytes, frame: int, width: int, height: int) -> bytes:
    """`body` (a little-endian TIFF) with frame `frame`'s (0-based) ImageWidth and ImageLength
    changed to `width` x `height`, its pixels left as they are."""
    return tiff_with_frame_tags(body, frame, {256: width, 257: height})


def tiff_with_frame_tags(body: bytes, frame: int, values: dict[int, int]) -> bytes:
    """`body` (a little-endian TIFF) with the numeric tags of frame `frame` (0-based) that
    `values` names set to their values, nothing else changed."""
    data = bytearray(body)
    assert data[:4] == b"II*\x00"
    (offset,) = struct.unpack_from("<I", data, 4)
    for _ in range(frame):
        (count,) = struct.unpack_from("<H", data, offset)
        (offset,) = struct.unpack_from("<I", data, offset + 2 + 12 * count)
    (count,) = struct.unpack_from("<H", data, offset)
    for entry in range(count):
        at = offset + 2 + 12 * entry
        tag, kind = struct.unpack_from("<HH", data, at)
        if tag in values:
            struct.pack_into("<H" if kind == 3 else "<I", data, at + 8, values[tag])
    return bytes(data)


def test_each_tiff_page_is_shown_the_way_its_orientation_tag_says(media: MediaBench) -> None:
    # Given a scan of two pages stored 400x200 with a black band along their stored left edge,
    # page 1 tagged Orientation 6 (fed sideways: turn it a quarter clockwise), page 2 tagged 3
    # (Pillow's TIFF reader turns each frame as it loads it: this pins that it still does)
    page = Image.new("L", (400, 200), 255)
    page.paste(0, (0, 0, 50, 200))
    out = io.BytesIO()
    page.save(out, format="TIFF", save_all=True, append_images=[page.copy()], tiffinfo={274: 6})
    body = tiff_with_frame_tags(out.getvalue(), 1, {274: 3})

    result = preview_of(media, "fed-sideways.tiff", body)

    # Then page 1 shows upright, 200 wide and 400 high with its band along the top, as its
    # facts say; page 2 turned round, its band on the right
    assert (result["page_width_px"], result["page_height_px"]) == (200, 400)
    first, second = (image_of(media, shown) for shown in result["pages"])
    assert first.size == (200, 400)
    assert near(first.getpixel((100, 10)), (0, 0, 0))
    assert near(first.getpixel((100, 390)), (255, 255, 255))
    assert second.size == (400, 200)
    assert near(second.getpixel((390, 100)), (0, 0, 0))
    assert near(second.getpixel((10, 100)), (255, 255, 255))


def test_a_tiff_page_over_the_pixel_budget_is_skipped_before_it_is_decoded(
    media: MediaBench,
) -> None:
    # Given a 3-page scan whose page 2 declares 10,000 x 10,000 pixels (100 MP)
    body = tiff_with_frame_declaring(three_page_tiff(), 1, 10_000, 10_000)

    # Then pages 1 and 3 are rendered, page 2 is skipped, naming the budget
    result = preview_of(media, "scan.tiff", body)
    assert [page["page"] for page in result["pages"]] == [1, 3]
    assert result["skipped_pages"] == [
        {
            "page": 2,
            "reason": "the TIFF's page 2 declares 10000 x 10000 pixels (100.0 MP), all of which "
            "would be decoded: document_preview decodes at most 50 MP a page",
        }
    ]


def test_a_tiff_whose_first_page_is_over_the_budget_fails_for_good(media: MediaBench) -> None:
    body = tiff_with_frame_declaring(three_page_tiff(), 0, 10_000, 10_000)
    with pytest.raises(PermanentError, match="the TIFF's first page declares 10000 x 10000"):
        preview_of(media, "scan.tiff", body)


@pytest.mark.parametrize(
    "cut", [lambda b: b[:64], lambda b: b[:8] + bytes(len(b) - 8)], ids=["truncated", "zeroed"]
)
def test_a_corrupt_tiff_fails_for_good_saying_so(media: MediaBench, cut: Any) -> None:
    work = media.work_for(
        JobType.DOCUMENT_PREVIEW,
        "scan.tiff",
        cut(three_page_tiff()),
        {"content_type": "image/tiff"},
    )
    with pytest.raises(PermanentError, match="TIFF"):
        DocumentPreviewProcessor(media.s3)(work)


def test_a_later_tiff_page_whose_pixels_are_corrupt_is_skipped(media: MediaBench) -> None:
    # Given the scan with page 3's compressed pixels overwritten (its headers intact)
    body = three_page_tiff()
    scan = Image.open(io.BytesIO(body))
    assert isinstance(scan, TiffImagePlugin.TiffImageFile)
    scan.seek(2)
    for offset, length in zip(scan.tag_v2[273], scan.tag_v2[279], strict=True):  # its strips
        body = body[:offset] + b"\xff" * length + body[offset + length :]

    # Then pages 1 and 2 are rendered, and page 3 skipped with the decoder's reason
    result = preview_of(media, "scan.tiff", body)
    assert [page["page"] for page in result["pages"]] == [1, 2]
    assert result["skipped_pages"] == [
        {"page": 3, "reason": "the TIFF's page 3 cannot be decoded: decoder error -2"}
    ]


def test_a_tiff_whose_page_chain_loops_back_is_counted_once(media: MediaBench) -> None:
    # Given the scan with its last page's "next page" offset pointing back to its first: a
    # reader that follows the chain blindly never ends
    body = bytearray(three_page_tiff())
    (offset,) = struct.unpack_from("<I", body, 4)
    first = offset
    while True:
        (count,) = struct.unpack_from("<H", body, offset)
        (following,) = struct.unpack_from("<I", body, offset + 2 + 12 * count)
        if following == 0:
            struct.pack_into("<I", body, offset + 2 + 12 * count, first)
            break
        offset = following

    # Then it has its 3 pages, each once
    result = preview_of(media, "scan.tiff", bytes(body), {"pages": 20})
    assert result["page_count"] == 3
    assert [page["page"] for page in result["pages"]] == [1, 2, 3]


def test_a_mutated_tiff_scan_is_previewed_or_failed_for_good_saying_why(
    media: MediaBench,
) -> None:
    # Given seeded corruptions (tests/fuzz's: truncation, bit flips, zeroed runs, duplicated or
    # shuffled chunks, a garbage body) of an uncompressed 3-page scan whose pages are alike in
    # size, so a mutation lands on any page's pixels or headers; all pages asked for
    pages = [Image.new(mode, (120, 90), "white") for mode in ("RGB", "L", "1")]
    out = io.BytesIO()
    pages[0].save(out, format="TIFF", save_all=True, append_images=pages[1:])
    valid = out.getvalue()
    outcomes: list[str] = []

    @settings(
        deadline=None,
        database=None,
        max_examples=20,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @seed(48)
    @given(mutation=mutations(len(valid)))
    def each_mutant(mutation: Any) -> None:
        work = media.work_for(
            JobType.DOCUMENT_PREVIEW,
            "scan.tiff",
            mutation.apply(valid),
            {"content_type": "image/tiff", "pages": 3},
        )
        # Then each has page 1 and its count, or fails for good in the processor's own words
        try:
            result = DocumentPreviewProcessor(media.s3)(work)
        except PermanentError as error:
            message = str(error)
            assert message and len(message) <= READABLE_LENGTH, message
            assert not [noise for noise in PYTHON_NOISE if noise in message], message
            outcomes.append("failed")
            return
        assert result["pages"][0]["page"] == 1 and result["page_count"] >= 1
        outcomes.append("completed")

    each_mutant()
    assert len(outcomes) == 20
    print(
        f"[tiff pages] {outcomes.count('completed')} completed, {outcomes.count('failed')} failed"
    )


# --- text -------------------------------------------------------------------------------------


def test_a_text_file_has_one_page_its_typeset_preview(media: MediaBench) -> None:
    result = preview_of(media, "notes.txt", b"one\ntwo\n", {"pages": 5})
    assert "page_count" not in result
    assert result["pages"] == [
        {**{k: v for k, v in result["preview"].items()}, "kind": "page", "page": 1}
    ]
    assert result["preview"]["key"].endswith("/document_preview/preview.webp")


# --- office documents -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ten_page_docx() -> bytes:
    return office_document("docx", 10)


@needs_libreoffice
@pytest.mark.slow
def test_a_ten_page_docx_is_converted_once_and_its_ten_pages_rendered(
    media: MediaBench, ten_page_docx: bytes
) -> None:
    # Given a 10-page DOCX (LibreOffice wrote it), all 10 pages asked for
    work, notes = watched(
        media.work_for(
            JobType.DOCUMENT_PREVIEW,
            "report.docx",
            ten_page_docx,
            {"content_type": DOCX, "pages": 10},
        )
    )

    # When the processor runs
    result = DocumentPreviewProcessor(media.s3)(work)

    # Then it converted once, rendered pages 2 to 10 one by one from that PDF, and every page
    # is an A4 page with its heading's ink on it
    messages = [message for _, message in notes.reports]
    assert messages.count("converting the document") == 1
    assert [m for m in messages if m and m.startswith("rendering page")] == [
        f"rendering page {n} of 10" for n in range(2, 11)
    ]
    assert result["page_count"] == 10
    assert [page["page"] for page in result["pages"]] == list(range(1, 11))
    for page in result["pages"]:
        image = image_of(media, page).convert("L")
        assert image.height == 1024
        low, _ = image.getextrema()
        assert isinstance(low, int) and low < 128
    assert len(written_keys(media)) == 10


@needs_libreoffice
@pytest.mark.slow
def test_a_converted_pdf_too_large_to_send_back_has_its_pages_rendered_with_the_conversion(
    ten_page_docx: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a limit under any PDF's size on what the conversion sends back
    monkeypatch.setattr(office, "MAX_RETURNED_PDF_BYTES", 0)
    docx = tmp_path / "report.docx"
    docx.write_bytes(ten_page_docx)

    # When 4 pages are wanted, then the 4 are rendered with the conversion, and no PDF returned
    converted = office.convert_and_render(docx, DOCX, soffice(), wanted=4)
    assert converted.pdf is None
    assert [page.number for page in converted.pages.rendered] == [1, 2, 3, 4]
    assert converted.facts["page_count"] == 10
