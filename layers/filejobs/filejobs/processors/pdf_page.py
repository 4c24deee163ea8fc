"""A PDF's first page as a preview: rendered by PDFium, its long edge about 1024 px, encoded as
WebP, with its counts. The document preview renders PDFs with it (processors/document.py), and
the office converter the PDF LibreOffice made of a document (processors/office.py); both run it
in the decoder sandbox.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pypdfium2 as pdfium  # type: ignore[import-untyped]
from PIL import Image

from filejobs.domain.retry import PermanentError

PDF_LONG_EDGE = 1024
WEBP_QUALITY = 85
WEBP_METHOD = 2  # libwebp effort 0-6: 2 is about twice as fast as the default 4
# The output a page-1 preview is stored as (a PDF's, an office document's).
PDF_PREVIEW = "preview-page1.webp"


@dataclass(frozen=True)
class Preview:
    image: Image.Image
    facts: dict[str, Any]


def render_pdf_first_page(path: Path | BinaryIO, long_edge: int = PDF_LONG_EDGE) -> Preview:
    """Page 1 of the PDF at `path` (a path or an open file), scaled so its long edge is
    `long_edge` px; its page count."""
    try:
        document = pdfium.PdfDocument(str(path) if isinstance(path, Path) else path)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise PermanentError(
                "the PDF is encrypted (password-protected): it cannot be previewed"
            ) from error
        raise PermanentError(f"not a readable PDF: {error}") from error
    try:
        page_count = len(document)
        if page_count == 0:
            raise PermanentError("the PDF has no pages")
        try:
            page = document[0]
        except pdfium.PdfiumError as error:
            # A page tree that names a page which is not there (or is no page) opens as a
            # document and fails only here: corrupt input, not a transient error to retry.
            raise PermanentError(f"the PDF's first page cannot be loaded: {error}") from error
        try:
            width_pt, height_pt = page.get_size()
            if min(width_pt, height_pt) <= 0:
                raise PermanentError("the PDF's first page has no area")
            scale = long_edge / max(width_pt, height_pt)
            bitmap = page.render(scale=scale, draw_annots=True)
            image: Image.Image = bitmap.to_pil().convert("RGB")
        except pdfium.PdfiumError as error:
            raise PermanentError(f"the PDF's first page cannot be rendered: {error}") from error
        finally:
            page.close()
    finally:
        document.close()
    facts = {
        "page_count": page_count,
        "page_width_pt": round(float(width_pt), 2),
        "page_height_pt": round(float(height_pt), 2),
    }
    return Preview(image, facts)


def encode_webp(image: Image.Image, quality: int = WEBP_QUALITY) -> bytes:
    out = io.BytesIO()
    image.save(out, format="WEBP", quality=quality, method=WEBP_METHOD)
    return out.getvalue()
