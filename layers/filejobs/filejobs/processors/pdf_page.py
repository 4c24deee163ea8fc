"""A PDF's pages as previews: each rendered by PDFium, its long edge about 1024 px, encoded as
WebP, with the document's counts. The document preview renders PDFs with it
(processors/document.py), and the office converter the PDF LibreOffice made of a document
(processors/office.py); both run it in the decoder sandbox.

Every page has the same pixel budget: it is scaled to `PDF_LONG_EDGE` on its long edge whatever
size its page box declares (a page box a kilometre wide costs what an A4 page does), so one
bitmap is at most PDF_LONG_EDGE x PDF_LONG_EDGE pixels.

Page 1 is the preview: a document whose first page cannot be rendered fails, for good. A later
page that cannot be (a page tree naming an object that is not there, a page with no area) is
skipped and said so (`Pages.skipped`): the pages that render are still worth having, and no
retry would make the broken one render.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

import pypdfium2 as pdfium  # type: ignore[import-untyped]
from PIL import Image

from filejobs.domain.job_options import DOCUMENT_PREVIEW_MAX_PAGES
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import short_error
from filejobs.processors.sandbox.task import Decoded

PDF_LONG_EDGE = 1024
WEBP_QUALITY = 85
WEBP_METHOD = 2  # libwebp effort 0-6: 2 is about twice as fast as the default 4
_PAGE_NAME: Final = re.compile(r"preview-page([1-9][0-9]*)\.webp")


def page_name(number: int) -> str:
    """The output a page is stored as: `preview-page3.webp`."""
    return f"preview-page{number}.webp"


# The output a page-1 preview is stored as (a PDF's, an office document's, a TIFF's).
PDF_PREVIEW: Final = page_name(1)


def page_number(name: str) -> int | None:
    """The page whose output `name` is (`preview-page3.webp`: 3), None for any other name."""
    found = _PAGE_NAME.fullmatch(name)
    return int(found[1]) if found is not None and len(found[1]) <= 3 else None


def is_page_name(name: str, most: int = DOCUMENT_PREVIEW_MAX_PAGES) -> bool:
    """Whether `name` is the output of one of pages 1 to `most` (20: the most a job asks for)."""
    number = page_number(name)
    return number is not None and number <= most


@dataclass(frozen=True)
class Preview:
    image: Image.Image
    facts: dict[str, Any]


@dataclass(frozen=True)
class RenderedPage:
    number: int  # 1-based
    image: Image.Image

    @property
    def name(self) -> str:
        return page_name(self.number)


@dataclass
class Pages:
    """Pages of a document, rendered: its page count, the pages asked for that rendered, those
    skipped with the reason, and facts of its first page (when it was asked for)."""

    count: int
    rendered: list[RenderedPage] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {"page": n, "reason": text}
    facts: dict[str, Any] = field(default_factory=dict)

    def skip(self, number: int, error: PermanentError) -> None:
        """Page `number` (never the first: without it there is no preview) left out."""
        if number == 1:
            raise error
        self.skipped.append({"page": number, "reason": short_error(error)})


def ordinal(number: int) -> str:
    """How a message names a page: page 1 is "first page", as it always was."""
    return "first page" if number == 1 else f"page {number}"


def open_pdf(path: Path | BinaryIO) -> Any:
    """The PDF at `path` (a path or an open file) opened by PDFium; PermanentError when it is
    encrypted or not a PDF."""
    try:
        return pdfium.PdfDocument(str(path) if isinstance(path, Path) else path)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise PermanentError(
                "the PDF is encrypted (password-protected): it cannot be previewed"
            ) from error
        raise PermanentError(f"not a readable PDF: {error}") from error


def render_pdf_pages(
    path: Path | BinaryIO, numbers: Sequence[int], long_edge: int = PDF_LONG_EDGE
) -> Pages:
    """Pages `numbers` (1-based; those past the end are not there to render) of the PDF at
    `path`, each scaled so its long edge is `long_edge` px; the page count."""
    document = open_pdf(path)
    try:
        count = len(document)
        if count == 0:
            raise PermanentError("the PDF has no pages")
        pages = Pages(count)
        for number in numbers:
            if number > count:
                continue
            try:
                image, (width_pt, height_pt) = _render_page(document, number, long_edge)
            except PermanentError as error:
                pages.skip(number, error)
                continue
            pages.rendered.append(RenderedPage(number, image))
            if number == 1:
                pages.facts = {
                    "page_width_pt": round(width_pt, 2),
                    "page_height_pt": round(height_pt, 2),
                }
        return pages
    finally:
        document.close()


def _render_page(
    document: Any, number: int, long_edge: int
) -> tuple[Image.Image, tuple[float, float]]:
    try:
        page = document[number - 1]
    except pdfium.PdfiumError as error:
        # A page tree that names a page which is not there (or is no page) opens as a
        # document and fails only here: corrupt input, not a transient error to retry.
        raise PermanentError(f"the PDF's {ordinal(number)} cannot be loaded: {error}") from error
    try:
        width_pt, height_pt = (float(side) for side in page.get_size())
        if not (math.isfinite(width_pt) and math.isfinite(height_pt)):
            raise PermanentError(f"the PDF's {ordinal(number)} has no finite size")
        if min(width_pt, height_pt) <= 0:
            raise PermanentError(f"the PDF's {ordinal(number)} has no area")
        # The page's own size never decides the bitmap's: the long edge does (the pixel budget).
        scale = long_edge / max(width_pt, height_pt)
        bitmap = page.render(scale=scale, draw_annots=True)
        image: Image.Image = bitmap.to_pil().convert("RGB")
    except pdfium.PdfiumError as error:
        raise PermanentError(f"the PDF's {ordinal(number)} cannot be rendered: {error}") from error
    finally:
        page.close()
    return image, (width_pt, height_pt)


def render_pdf_first_page(path: Path | BinaryIO, long_edge: int = PDF_LONG_EDGE) -> Preview:
    """Page 1 of the PDF at `path` (a path or an open file), scaled so its long edge is
    `long_edge` px; its page count."""
    pages = render_pdf_pages(path, [1], long_edge)
    facts = {"page_count": pages.count, **pages.facts}
    return Preview(pages.rendered[0].image, facts)


def decoded_pages(
    pages: Pages, facts: dict[str, Any], more: dict[str, bytes] | None = None
) -> Decoded:
    """The sandbox's answer: `facts`, each rendered page's size and output name (`pages`), the
    pages skipped and why (`skipped_pages`); each page as WebP under its name, and `more`."""
    entries = [
        {"page": p.number, "name": p.name, "width": p.image.width, "height": p.image.height}
        for p in pages.rendered
    ]
    result = {**facts, "pages": entries, "skipped_pages": pages.skipped}
    outputs = {page.name: encode_webp(page.image) for page in pages.rendered}
    return Decoded(result, {**outputs, **(more or {})})


def encode_webp(image: Image.Image, quality: int = WEBP_QUALITY) -> bytes:
    out = io.BytesIO()
    image.save(out, format="WEBP", quality=quality, method=WEBP_METHOD)
    return out.getvalue()
