"""document_preview: an image of a document's first page, as WebP, with its counts.

A PDF's first page is rendered by PDFium, its long edge about 1024 px. Plain text, Markdown,
CSV/TSV and JSON get a typeset page: the first 64 KiB of the file, JSON pretty-printed, a table's
columns aligned, long lines wrapped, what does not fit cut off.

The content type is the one ingest sniffed (job input_data), else sniffed here from the head.
Text that is not valid UTF-8 is decoded with replacement characters: it never fails the job.

PDFium, the text decoders and the typesetting run in the decoder sandbox (processors/sandbox),
through `decode_pdf_preview` and `decode_text_preview`: the worker downloads and uploads, and
never parses the file in the process that holds the function's credentials.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import string
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

import pypdfium2 as pdfium  # type: ignore[import-untyped]
from PIL import Image, ImageDraw, ImageFont

from filejobs.config import OfficeSettings
from filejobs.domain.content import OFFICE_DOCUMENTS
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.pdf_page import PDF_PREVIEW, Preview, encode_webp, render_pdf_first_page
from filejobs.processors.sandbox.client import Sandbox, shared_sandbox
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Decoded, Task
from filejobs.processors.source import (
    ObjectSource,
    content_type_of,
    downloaded,
    human_size,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MAX_PDF_BYTES = 500_000_000
TEXT_HEAD_BYTES = 64 * 1024
# What one preview may use in the sandbox: a page bitmap is a few MB, but PDFium holds the
# document's objects (fonts, images, streams) while it renders.
LIMITS: Final = DecoderLimits(memory_bytes=2048 * MiB, cpu_seconds=30, wall_seconds=90)

PDF = "application/pdf"
TEXT_PREVIEW = "preview.webp"
# Office documents, as content_type_of gives them (lower case: `...macroenabled.12`).
OFFICE_TYPES = frozenset(mime.lower() for mime in OFFICE_DOCUMENTS)
TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/csv", "text/tab-separated-values", "application/json"}
)

# The typeset page.
PAGE_SIZE = (800, 1000)
MARGIN = 32
FONT_SIZE = 14
LINE_GAP = 4
TAB = "    "
COLUMN_GAP = 16
MAX_COLUMN_WIDTH = 240  # px: a wide cell is cut, not every other column pushed off the page
ELLIPSIS = "…"
INK = (33, 33, 33)
RULE = (190, 190, 190)

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


# --- text --------------------------------------------------------------------------------------


def decode_text(data: bytes, truncated: bool) -> tuple[str, str]:
    """The text and its encoding: UTF-8 or UTF-16 by BOM, else UTF-8, bad bytes replaced.

    A multi-byte character cut off by the end of a truncated read is dropped, not replaced.
    """
    encoding = "utf-8"
    for bom, named in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], named
            break
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    return decoder.decode(data, final=not truncated), encoding


def _printable(line: str) -> str:
    """Tabs expanded; control characters (which draw nothing or garbage) shown as U+FFFD."""
    line = line.expandtabs(len(TAB))
    if line.isprintable():
        return line
    return "".join(c if unicodedata.category(c) != "Cc" else "\ufffd" for c in line)


@cache
def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=FONT_SIZE)


class _Page:
    """A page of lines drawn top to bottom; full once the next line would not fit."""

    def __init__(self) -> None:
        self.image = Image.new("RGB", PAGE_SIZE, "white")
        self.draw = ImageDraw.Draw(self.image)
        self.font = _font()
        ascent, descent = self.font.getmetrics() if hasattr(self.font, "getmetrics") else (11, 3)
        self.line_height = ascent + descent + LINE_GAP
        self.width = PAGE_SIZE[0] - 2 * MARGIN
        self.y = MARGIN
        self.widths: dict[str, float] = {}

    @property
    def full(self) -> bool:
        return self.y + self.line_height > PAGE_SIZE[1] - MARGIN

    def measure(self, text: str) -> float:
        # Per-character advances, cached: wrapping measures every character of every line.
        total = 0.0
        for char in text:
            width = self.widths.get(char)
            if width is None:
                width = self.widths[char] = float(self.font.getlength(char))
            total += width
        return total

    def fit(self, text: str, width: float) -> str:
        """`text` cut (with an ellipsis) to at most `width` px."""
        if self.measure(text) <= width:
            return text
        room = width - self.measure(ELLIPSIS)
        kept, used = [], 0.0
        for char in text:
            used += self.measure(char)
            if used > room:
                break
            kept.append(char)
        return "".join(kept) + ELLIPSIS

    def wrap(self, line: str, width: float) -> Iterator[str]:
        """`line` in pieces no wider than `width` px, broken at a space if one is near.

        Lazy, and each piece measures only its own characters: a 64 KiB line costs no more
        than the pieces the page has room for.
        """
        while True:
            used, cut = 0.0, None
            for index, char in enumerate(line):
                used += self.measure(char)
                if used > width:
                    cut = max(index, 1)
                    break
            if cut is None:
                yield line
                return
            space = line.rfind(" ", 0, cut)
            if space > cut // 2:
                cut = space + 1
            yield line[:cut].rstrip()
            line = line[cut:]

    def text(self, line: str, x: float = MARGIN) -> None:
        self.draw.text((x, self.y), line, fill=INK, font=self.font)

    def next_line(self) -> None:
        self.y += self.line_height

    def rule(self) -> None:
        y = self.y - LINE_GAP // 2
        self.draw.line((MARGIN, y, PAGE_SIZE[0] - MARGIN, y), fill=RULE)


def _typeset_lines(page: _Page, lines: Iterable[str], should_stop: Callable[[], bool]) -> None:
    for line in lines:
        if should_stop():
            raise StopRequested
        text = _printable(line)
        body = text.lstrip(" ")
        # The font is proportional: a leading space is drawn a digit wide, so indents show.
        indent = min((len(text) - len(body)) * page.measure("0"), page.width / 2)
        for piece in page.wrap(body, page.width - indent):
            if page.full:
                return
            page.text(piece, MARGIN + indent)
            page.next_line()


def _typeset_table(page: _Page, rows: Sequence[Sequence[str]]) -> None:
    visible = rows[: (PAGE_SIZE[1] - 2 * MARGIN) // page.line_height]
    cells = [[_printable(cell) for cell in row] for row in visible]
    columns = max((len(row) for row in cells), default=0)
    widths = [
        min(
            MAX_COLUMN_WIDTH,
            max((page.measure(row[c]) for row in cells if c < len(row)), default=0.0),
        )
        for c in range(columns)
    ]
    for number, row in enumerate(cells):
        if page.full:
            return
        x = float(MARGIN)
        for column, cell in enumerate(row):
            room = min(widths[column], PAGE_SIZE[0] - MARGIN - x)
            if page.measure(cell) > room and room <= page.measure(ELLIPSIS):
                break  # the page's right margin: no room left for even a cut cell
            page.text(page.fit(cell, room), x)
            x += widths[column] + COLUMN_GAP
        page.next_line()
        if number == 0:
            page.rule()  # under the header row


def render_text_preview(
    data: bytes,
    content_type: str,
    truncated: bool,
    should_stop: Callable[[], bool] = lambda: False,
) -> Preview:
    """A typeset page of text, Markdown, CSV/TSV or JSON `data` (the file's head)."""
    text, encoding = decode_text(data, truncated)
    lines = text.splitlines()
    whole = lines  # what is counted: a last line cut by the end of the read is not a line
    if truncated and lines and not text.endswith(("\n", "\r")):
        whole = lines[:-1]
    facts: dict[str, Any] = {"encoding": encoding, "truncated": truncated, "lines": len(whole)}
    page = _Page()
    if content_type in ("text/csv", "text/tab-separated-values"):
        delimiter = "\t" if content_type == "text/tab-separated-values" else ","
        try:
            rows = list(csv.reader(whole, delimiter=delimiter))
        except csv.Error as error:  # a NUL byte, or a field over csv's size limit
            raise PermanentError(f"not a readable {content_type} table: {error}") from error
        facts["rows"] = len(rows)
        facts["columns"] = max((len(row) for row in rows), default=0)
        _typeset_table(page, rows)
    else:
        if content_type == "application/json":
            try:
                pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except (ValueError, RecursionError):
                # Cut by the 64 KiB read, or not JSON after all; or nested deeper than json's
                # recursion goes ("[[[[..."): its RecursionError escaped and the job was
                # retried as transient. Shown as-is instead, like any JSON that does not parse.
                facts["valid_json"] = False
            else:
                facts["valid_json"] = True
                lines = pretty.splitlines()
                facts["pretty_lines"] = len(lines)
        _typeset_lines(page, lines, should_stop)
    return Preview(page.image, facts)


# --- the processor -----------------------------------------------------------------------------


def warm_up() -> None:
    """In the sandbox's zygote, before the first job: PDFium, the typesetting font and the
    WebP encoder used once, so their first-use setup is not redone in every job's process."""
    blank = pdfium.PdfDocument.new()
    try:
        blank.new_page(200, 100).close()
        saved = io.BytesIO()
        blank.save(saved)
    finally:
        blank.close()
    saved.seek(0)
    encode_webp(render_pdf_first_page(saved, long_edge=32).image)
    # Every printable ASCII glyph rendered once: FreeType caches them in the zygote for all.
    sample = "\n".join(string.printable[i : i + 20] for i in range(0, 95, 20)).encode()
    encode_webp(render_text_preview(sample, "text/plain", truncated=False).image)
    encode_webp(render_text_preview(b"a,b\n1,2\n", "text/csv", truncated=False).image)


def decode_pdf_preview(source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """The sandbox's task: page 1 of the open PDF as WebP (`preview-page1.webp`), its counts."""
    preview = render_pdf_first_page(source)
    return _decoded(preview, PDF_PREVIEW)


def decode_text_preview(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: the typeset page of the file's head (the open file holds it) as
    WebP (`preview.webp`)."""
    data = source.read(TEXT_HEAD_BYTES)
    preview = render_text_preview(data, options["content_type"], bool(options["truncated"]))
    return _decoded(preview, TEXT_PREVIEW)


def _decoded(preview: Preview, name: str) -> Decoded:
    image = preview.image
    facts = {**preview.facts, "preview_width": image.width, "preview_height": image.height}
    return Decoded(facts, {name: encode_webp(image)})


class DocumentPreviewProcessor:
    def __init__(
        self,
        s3: S3Client,
        max_pdf_bytes: int = MAX_PDF_BYTES,
        *,
        sandbox: Sandbox | None = None,
        limits: DecoderLimits = LIMITS,
        office: OfficeSettings | None = None,
    ) -> None:
        """`office`: where LibreOffice is (the worker's, from config.py; None: read when an
        office document comes)."""
        self._s3 = s3
        self._max_pdf_bytes = max_pdf_bytes
        self._sandbox = sandbox or shared_sandbox(__name__)
        self._limits = limits
        self._office_settings = office

    def __call__(self, work: Work) -> dict[str, Any]:
        source = ObjectSource(self._s3)
        content_type = content_type_of(work.job, source)
        limits = self._limits
        if content_type == PDF:
            local = downloaded(
                work, source, "document.pdf", max_bytes=self._max_pdf_bytes, until=0.5
            )
            work.log(f"read {human_size(local.stat().st_size)} {content_type}")
            task: Task = decode_pdf_preview
            name, options = PDF_PREVIEW, dict[str, Any]()
        elif content_type in OFFICE_TYPES:
            local, task, options, limits = self._office(work, source, content_type)
            name = PDF_PREVIEW
        elif content_type in TEXT_TYPES:
            head = source.head(work.job, TEXT_HEAD_BYTES + 1)
            local = work.workspace / "head.txt"
            local.write_bytes(head[:TEXT_HEAD_BYTES])
            truncated = len(head) > TEXT_HEAD_BYTES
            work.log(
                f"read the first {human_size(len(local.read_bytes()))} of the {content_type} text"
                + (" (the rest not typeset)" if truncated else "")
            )
            task, name = decode_text_preview, TEXT_PREVIEW
            options = {"content_type": content_type, "truncated": truncated}
        else:
            raise PermanentError(f"document_preview does not support {content_type} files")
        if work.should_stop():
            raise StopRequested
        converting = content_type in OFFICE_TYPES
        work.report_progress(0.5, "converting the document" if converting else "rendering")
        decoded = self._sandbox.decode(
            task,
            local,
            options=options,
            limits=limits,
            should_stop=work.should_stop,
            output_allowed=name.__eq__,
        )
        data = decoded.outputs.get(name)
        if data is None:
            raise PermanentError(f"the decoder returned no {name}")
        if work.should_stop():  # asked while the decoder finished: its preview is not written
            raise StopRequested
        work.report_progress(0.9, "writing the preview")
        key = work.outputs.put_bytes(name, data, "image/webp")
        facts = dict(decoded.result)
        width, height = facts.pop("preview_width", None), facts.pop("preview_height", None)
        pages = facts.get("page_count")
        if isinstance(pages, int):
            work.log(f"the document has {pages} page{'' if pages == 1 else 's'}")
        work.log(f"wrote {key}: {width}x{height} WebP, {human_size(len(data))}")
        return {
            **facts,
            "content_type": content_type,
            "preview": {"key": key, "width": width, "height": height, "bytes": len(data)},
        }

    def _office(
        self, work: Work, source: ObjectSource, content_type: str
    ) -> tuple[Path, Task, dict[str, Any], DecoderLimits]:
        """The document downloaded, and how the sandbox converts it: soffice is found (on
        Lambda, unpacked from its layer) here, by the worker, before any byte is parsed."""
        # Imported here: only an office document's preview loads the converter.
        from filejobs.processors import office, office_runtime  # noqa: PLC0415

        local = downloaded(work, source, "document", max_bytes=office.MAX_OFFICE_BYTES, until=0.4)
        work.log(f"read {human_size(local.stat().st_size)} {content_type}")
        program = office_runtime.soffice(self._office_settings)
        options = {
            "content_type": content_type,
            "soffice": list(program.argv),
            "environment": program.environment,
            "version": program.version,
        }
        return local, office.decode_office_preview, options, office.LIMITS
