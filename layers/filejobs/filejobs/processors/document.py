"""document_preview: images of a document's first pages, as WebP, with its counts.

The job's `pages` option (domain/job_options.py: 1 to 20, default 3) says how many pages, from
the first, are rendered; a document with fewer has them all. Page 1 is also the `preview`
(what clients read since the first release): one image, named by both.

A PDF's pages are rendered by PDFium, each with its long edge about 1024 px; an office document
is converted to PDF by LibreOffice once (processors/office.py), then rendered as a PDF is; a
multi-page TIFF (a scan) has its frames read by Pillow's TIFF reader, one by one, each within
the pixel budget, scaled to the same long edge. Plain text, Markdown, CSV/TSV and JSON get one
typeset page: the first 64 KiB of the file, JSON pretty-printed, a table's columns aligned, long
lines wrapped, what does not fit cut off.

Page 1 comes from the first sandbox call (with the conversion, for an office document), and
each later page from a call of its own, on the same file (the converted PDF for an office
document): the job's progress moves page by page, and a cancelled job stops between pages. A
later page that cannot be rendered is skipped and named in `skipped_pages` (processors/
pdf_page.py says why); page 1 that cannot be fails the job, for good.

The content type is the one ingest sniffed (job input_data), else sniffed here from the head.
Text that is not valid UTF-8 is decoded with replacement characters: it never fails the job.

PDFium, Pillow's TIFF reader, the text decoders and the typesetting run in the decoder sandbox
(processors/sandbox), through `decode_pdf_preview`, `decode_tiff_pages` and
`decode_text_preview`: the worker downloads and uploads, and never parses the file in the
process that holds the function's credentials.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import string
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, cast

import pypdfium2 as pdfium  # type: ignore[import-untyped]
from PIL import Image, ImageDraw, ImageFont, UnidentifiedImageError

from filejobs.config import OfficeSettings
from filejobs.domain.content import OFFICE_DOCUMENTS
from filejobs.domain.job_options import OPTIONS, OptionError
from filejobs.domain.job_values import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors.base import StopRequested, Work, short_error
from filejobs.processors.pdf_page import (
    PDF_LONG_EDGE,
    Pages,
    Preview,
    RenderedPage,
    decoded_pages,
    encode_webp,
    is_page_name,
    ordinal,
    page_name,
    render_pdf_first_page,
    render_pdf_pages,
)
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

    from filejobs.processors.office_runtime import OfficeProgram

MAX_PDF_BYTES = 500_000_000
TEXT_HEAD_BYTES = 64 * 1024
# What one preview may use in the sandbox: a page bitmap is a few MB, but PDFium holds the
# document's objects (fonts, images, streams) while it renders.
LIMITS: Final = DecoderLimits(memory_bytes=2048 * MiB, cpu_seconds=30, wall_seconds=90)

PDF = "application/pdf"
TIFF = "image/tiff"
TEXT_PREVIEW = "preview.webp"
# The pages after the first, all of them: past this, the rest are not rendered (and said so).
# A page takes well under a second; this bounds a document whose every page is slow within the
# worker's own time limit (DocumentPreviewWorker's 120 s, the conversion's 60 s before it).
LATER_PAGES_SECONDS: Final = 45.0
# A TIFF page (a scan) is decoded whole before it is scaled: its declared size is what it costs.
# 50 MP (what a thumbnail may decode) holds an A3 page scanned at 400 dpi, A4 at 600 dpi.
MAX_SCAN_PIXELS: Final = 50_000_000
# Pillow's own bomb check, on the first frame alone, is replaced by ours on every page's size.
Image.MAX_IMAGE_PIXELS = None
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


# --- TIFF scans ----------------------------------------------------------------------------


def render_tiff_pages(
    source: Path | BinaryIO,
    numbers: Sequence[int],
    long_edge: int = PDF_LONG_EDGE,
    max_pixels: int = MAX_SCAN_PIXELS,
) -> Pages:
    """Pages `numbers` (1-based) of the multi-page TIFF at `source`, read by Pillow's TIFF
    reader alone, frame by frame, each within `max_pixels` and scaled to `long_edge` px on its
    long edge (never enlarged); the page count."""
    try:
        with Image.open(source, formats=["TIFF"]) as tiff:
            pages = Pages(_frames(tiff))
            for number in numbers:
                if number > pages.count:
                    continue
                try:
                    image = _tiff_page(tiff, number, long_edge, max_pixels)
                except PermanentError as error:
                    pages.skip(number, error)
                    continue
                pages.rendered.append(RenderedPage(number, image))
                if number == 1:
                    pages.facts = {"page_width_px": tiff.width, "page_height_px": tiff.height}
            return pages
    except UnidentifiedImageError:
        raise PermanentError("not a readable TIFF") from None
    except _TIFF_BROKEN as error:
        raise PermanentError(f"not a readable TIFF: {short_error(error)}") from None


# Pillow's ways of saying "this file is broken": truncated, bad header, bad tag, bad offsets.
_TIFF_BROKEN = (OSError, SyntaxError, ValueError, EOFError, IndexError, KeyError, TypeError)


def _frames(tiff: Image.Image) -> int:
    count = int(getattr(tiff, "n_frames", 1))
    if count < 1:
        raise PermanentError("the TIFF has no pages")
    return count


def _tiff_page(tiff: Image.Image, number: int, long_edge: int, max_pixels: int) -> Image.Image:
    """Frame `number` decoded (its declared size checked first) and scaled, on white, RGB."""
    try:
        tiff.seek(number - 1)
        width, height = tiff.size
        if width <= 0 or height <= 0:
            raise PermanentError(f"the TIFF's {ordinal(number)} declares no pixels")
        if width * height > max_pixels:
            raise PermanentError(
                f"the TIFF's {ordinal(number)} declares {width} x {height} pixels "
                f"({width * height / 1e6:.1f} MP), all of which would be decoded: "
                f"document_preview decodes at most {max_pixels / 1e6:g} MP a page"
            )
        tiff.load()
        page = _on_white(tiff)
    except _TIFF_BROKEN as error:
        raise PermanentError(
            f"the TIFF's {ordinal(number)} cannot be decoded: {short_error(error)}"
        ) from None
    if max(page.size) > long_edge:
        scale = long_edge / max(page.size)
        size = (max(1, round(page.width * scale)), max(1, round(page.height * scale)))
        page = page.resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0)
    return page


def _on_white(frame: Image.Image) -> Image.Image:
    """The frame in 8-bit RGB: 16-bit and float grey scaled down, transparency on white."""
    mode = frame.mode
    if mode.startswith("I") or mode == "F":
        wide = frame.convert("F")
        _, high = cast("tuple[float, float]", wide.getextrema())
        scale = 255 / 65535 if high > 255 else 1.0  # 16-bit samples, else already 0..255
        return wide.point(lambda value: value * scale).convert("L").convert("RGB")
    if mode in ("RGBA", "LA", "PA") or "transparency" in frame.info:
        rgba = frame.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return frame.convert("RGB")  # 1, L, P, CMYK, YCbCr, LAB: one conversion each


# --- the sandbox's tasks -----------------------------------------------------------------------


def warm_up() -> None:
    """In the sandbox's zygote, before the first job: PDFium, Pillow's TIFF reader, the
    typesetting font and the WebP encoder used once, so their first-use setup is not redone in
    every job's process."""
    blank = pdfium.PdfDocument.new()
    try:
        blank.new_page(200, 100).close()
        saved = io.BytesIO()
        blank.save(saved)
    finally:
        blank.close()
    saved.seek(0)
    encode_webp(render_pdf_first_page(saved, long_edge=32).image)
    scan = io.BytesIO()
    Image.new("L", (40, 30), 128).save(scan, format="TIFF", compression="tiff_deflate")
    scan.seek(0)
    render_tiff_pages(scan, [1], long_edge=32)
    # Every printable ASCII glyph rendered once: FreeType caches them in the zygote for all.
    sample = "\n".join(string.printable[i : i + 20] for i in range(0, 95, 20)).encode()
    encode_webp(render_text_preview(sample, "text/plain", truncated=False).image)
    encode_webp(render_text_preview(b"a,b\n1,2\n", "text/csv", truncated=False).image)


def decode_pdf_preview(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: pages `options["pages"]` (default: page 1) of the open PDF as WebP
    (`preview-page1.webp`, `preview-page2.webp`...), its page count, page 1's size."""
    pages = render_pdf_pages(source, _asked(options))
    return decoded_pages(pages, {"page_count": pages.count, **pages.facts})


def decode_tiff_pages(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: pages `options["pages"]` (default: page 1) of the open TIFF as WebP,
    named as a PDF's pages are, its page count, page 1's size in pixels."""
    pages = render_tiff_pages(source, _asked(options))
    return decoded_pages(pages, {"page_count": pages.count, **pages.facts})


def _asked(options: dict[str, Any]) -> list[int]:
    return [int(number) for number in options.get("pages") or [1]]


def decode_text_preview(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: the typeset page of the file's head (the open file holds it) as
    WebP (`preview.webp`)."""
    data = source.read(TEXT_HEAD_BYTES)
    preview = render_text_preview(data, options["content_type"], bool(options["truncated"]))
    image = preview.image
    entry = {"page": 1, "name": TEXT_PREVIEW, "width": image.width, "height": image.height}
    return Decoded(
        {**preview.facts, "pages": [entry], "skipped_pages": []},
        {TEXT_PREVIEW: encode_webp(image)},
    )


# --- the processor -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How a document is previewed: the file in the workspace, the sandbox task that renders
    page 1 (converting the document first, for an office document), with its options and limits,
    and the task that renders each later page (None: the document has one page to show)."""

    local: Path
    first: Task
    options: dict[str, Any]
    limits: DecoderLimits
    allowed: frozenset[str] = frozenset()  # more output names `first` may answer with
    later: Task | None = decode_pdf_preview
    converting: bool = False


def file_plan(local: Path, content_type: str, limits: DecoderLimits = LIMITS) -> Plan:
    """A PDF's or a TIFF's: each page rendered from the file itself."""
    task = decode_pdf_preview if content_type == PDF else decode_tiff_pages
    return Plan(local, task, {"pages": [1]}, limits, later=task)


def text_plan(local: Path, content_type: str, *, truncated: bool, limits: DecoderLimits) -> Plan:
    options = {"content_type": content_type, "truncated": truncated}
    allowed = frozenset({TEXT_PREVIEW})
    return Plan(local, decode_text_preview, options, limits, allowed=allowed, later=None)


def office_plan(local: Path, content_type: str, wanted: int, program: OfficeProgram) -> Plan:
    """An office document's: converted by `program` and page 1 rendered in one sandbox call,
    which answers with the PDF too when pages up to `wanted` are after the first."""
    # Imported here: only an office document's preview loads the converter.
    from filejobs.processors import office  # noqa: PLC0415

    options = {
        "content_type": content_type,
        "soffice": list(program.argv),
        "environment": program.environment,
        "version": program.version,
        "pages": [1],
        "wanted": wanted,
    }
    allowed = frozenset({office.CONVERTED_PDF})
    return Plan(
        local, office.decode_office_preview, options, office.LIMITS, allowed, converting=True
    )


@dataclass
class Rendered:
    """What the sandbox has answered: each page's size and bytes, the facts of the first call,
    the pages skipped and why."""

    facts: dict[str, Any] = field(default_factory=dict)
    pages: dict[int, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def add(self, decoded: Decoded) -> None:
        result = dict(decoded.result)
        for entry in result.pop("pages", []):
            number, name = _checked_entry(entry)
            data = decoded.outputs.get(name)
            if data is None:
                raise PermanentError(f"the decoder returned no {name}")
            self.pages[number] = (entry, data)
        self.skipped.extend(result.pop("skipped_pages", []))
        if not self.facts:
            self.facts = result

    def done(self, number: int) -> bool:
        return number in self.pages or any(s.get("page") == number for s in self.skipped)

    @property
    def last_page(self) -> int:
        """The document's last page as far as it is counted (a book's: its first chapter's)."""
        count = self.facts.get("page_count", self.facts.get("first_chapter_page_count"))
        return count if isinstance(count, int) else 1


def _checked_entry(entry: object) -> tuple[int, str]:
    """A page the decoder says it rendered: its number, and its output's name, which must be
    that page's (the typeset text's, for page 1 of a text)."""
    number, name = (entry.get("page"), entry.get("name")) if isinstance(entry, dict) else (0, 0)
    if not (isinstance(number, int) and number > 0 and isinstance(name, str)):
        raise PermanentError("the decoder's answer is malformed (a page)")
    if name in (page_name(number), TEXT_PREVIEW if number == 1 else None):
        return number, name
    raise PermanentError("the decoder's answer is malformed (a page)")


def _no_progress(_fraction: float, _message: str | None = None) -> None:
    return


def render_pages(
    sandbox: Sandbox,
    plan: Plan,
    wanted: int,
    *,
    workspace: Path,
    should_stop: Callable[[], bool] = lambda: False,
    report_progress: Callable[[float, str | None], None] = _no_progress,
    limits: DecoderLimits = LIMITS,
    later_seconds: float = LATER_PAGES_SECONDS,
) -> Rendered:
    """The document's pages 1 to `wanted` (those it has), rendered in `sandbox` as `plan` says:
    page 1 by the first call (after the conversion, for an office document), each later page
    by a call of its own, on the file itself or the PDF the conversion answered with (written
    to `workspace`, never parsed here), under `limits` and within `later_seconds` in all. The
    core of the processor, without S3: the bench runs it."""
    rendered = Rendered()
    report_progress(0.5, "converting the document" if plan.converting else "rendering")
    first = sandbox.decode(
        plan.first,
        plan.local,
        options=plan.options,
        limits=plan.limits,
        should_stop=should_stop,
        output_allowed=lambda name: is_page_name(name, wanted) or name in plan.allowed,
    )
    rendered.add(first)
    source, later = _later_source(plan, first, workspace), plan.later
    last = min(wanted, rendered.last_page)
    todo = [n for n in range(2, last + 1) if not rendered.done(n)]  # some rendered with page 1
    if source is None or later is None or not todo:
        return rendered
    deadline = time.monotonic() + later_seconds
    for number in todo:
        if should_stop():
            raise StopRequested
        left = deadline - time.monotonic()
        if left <= 0:
            reason = f"not rendered: the pages after the first took over {later_seconds:g} s"
            rendered.skipped.append({"page": number, "reason": reason, "stopped": True})
            break
        report_progress(0.5 + 0.4 * (number - 1) / last, f"rendering page {number} of {last}")
        try:
            decoded = sandbox.decode(
                later,
                source,
                options={"pages": [number]},
                limits=replace(limits, wall_seconds=min(limits.wall_seconds, max(left, 1.0))),
                should_stop=should_stop,
                output_allowed=page_name(number).__eq__,
            )
        except PermanentError as error:
            # The decoder broke a limit or crashed on this page: the pages after it are not
            # tried (each could cost as much), the ones before it are kept.
            reason = short_error(error)
            rendered.skipped.append({"page": number, "reason": reason, "stopped": True})
            break
        rendered.add(decoded)
    return rendered


def _later_source(plan: Plan, first: Decoded, workspace: Path) -> Path | None:
    """Where pages after the first are rendered from: the file itself, or an office document's
    converted PDF as the sandbox answered it; None when the conversion sent none back (nothing
    more to render from it)."""
    if not plan.converting:
        return plan.local
    from filejobs.processors.office import CONVERTED_PDF  # noqa: PLC0415 (office only)

    pdf = first.outputs.get(CONVERTED_PDF)
    if pdf is None:
        return None
    converted = workspace / CONVERTED_PDF
    converted.write_bytes(pdf)
    return converted


def pages_option(input_data: dict[str, Any] | None) -> int:
    """How many pages the job asks for (its `pages` option, else 3), read by the definition the
    API checks requests with; PermanentError naming the option and why (a job stored before
    its options were checked: a retry cannot fix it)."""
    try:
        return int(OPTIONS[JobType.DOCUMENT_PREVIEW].read(input_data)["pages"])
    except OptionError as error:
        raise PermanentError(f"bad option {error}") from None


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
        wanted = pages_option(work.job.input_data)
        source = ObjectSource(self._s3)
        content_type = content_type_of(work.job, source)
        plan = self._plan(work, source, content_type, wanted)
        if work.should_stop():
            raise StopRequested
        rendered = render_pages(
            self._sandbox,
            plan,
            wanted,
            workspace=work.workspace,
            should_stop=work.should_stop,
            report_progress=work.report_progress,
            limits=self._limits,
        )
        if work.should_stop():  # asked while the decoder finished: its pages are not written
            raise StopRequested
        return _written(work, content_type, rendered)

    def _plan(self, work: Work, source: ObjectSource, content_type: str, wanted: int) -> Plan:
        """The file downloaded (a text's head), and how it is to be rendered."""
        if content_type in (PDF, TIFF):
            name = "document.pdf" if content_type == PDF else "scan.tiff"
            local = downloaded(work, source, name, max_bytes=self._max_pdf_bytes, until=0.5)
            work.log(f"read {human_size(local.stat().st_size)} {content_type}")
            return file_plan(local, content_type, self._limits)
        if content_type in OFFICE_TYPES:
            return self._office(work, source, content_type, wanted)
        if content_type in TEXT_TYPES:
            head = source.head(work.job, TEXT_HEAD_BYTES + 1)
            local = work.workspace / "head.txt"
            local.write_bytes(head[:TEXT_HEAD_BYTES])
            truncated = len(head) > TEXT_HEAD_BYTES
            work.log(
                f"read the first {human_size(len(local.read_bytes()))} of the {content_type} text"
                + (" (the rest not typeset)" if truncated else "")
            )
            return text_plan(local, content_type, truncated=truncated, limits=self._limits)
        raise PermanentError(f"document_preview does not support {content_type} files")

    def _office(self, work: Work, source: ObjectSource, content_type: str, wanted: int) -> Plan:
        """The document downloaded, and how the sandbox converts it: soffice is found (on
        Lambda, unpacked from its layer) here, by the worker, before any byte is parsed."""
        from filejobs.processors import office, office_runtime  # noqa: PLC0415

        local = downloaded(work, source, "document", max_bytes=office.MAX_OFFICE_BYTES, until=0.4)
        work.log(f"read {human_size(local.stat().st_size)} {content_type}")
        program = office_runtime.soffice(self._office_settings)
        return office_plan(local, content_type, wanted, program)


def _written(work: Work, content_type: str, rendered: Rendered) -> dict[str, Any]:
    """Every page written once (page 1 is also the preview); the job's result."""
    if 1 not in rendered.pages:
        raise PermanentError("the decoder returned no first page")
    work.report_progress(0.9, "writing the pages")
    facts = dict(rendered.facts)
    count = facts.get("page_count")
    if isinstance(count, int):
        work.log(f"the document has {count} page{'' if count == 1 else 's'}")
    for skipped in rendered.skipped:
        work.log(f"page {skipped['page']} skipped: {skipped['reason']}")
    pages = []
    for number in sorted(rendered.pages):
        entry, data = rendered.pages[number]
        key = work.outputs.put_bytes(str(entry["name"]), data, "image/webp")
        pages.append(
            {
                "kind": "page",
                "page": number,
                "key": key,
                "width": entry["width"],
                "height": entry["height"],
                "bytes": len(data),
                "format": "webp",
            }
        )
    preview = {key: value for key, value in pages[0].items() if key != "page"}
    work.log(_wrote_line(pages))
    result = {
        **facts,
        "content_type": content_type,
        "preview": {**preview, "kind": "preview"},
        "pages": pages,
    }
    if rendered.skipped:
        result["skipped_pages"] = rendered.skipped
    return result


def _wrote_line(pages: list[dict[str, Any]]) -> str:
    first = pages[0]
    line = f"wrote {first['key']}: {first['width']}x{first['height']} WebP, "
    line += human_size(first["bytes"])
    if len(pages) > 1:
        more = sum(page["bytes"] for page in pages[1:])
        line += f"; and pages {pages[1]['page']}-{pages[-1]['page']}, {human_size(more)}"
    return line
