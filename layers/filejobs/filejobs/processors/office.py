"""Office documents to PDF with LibreOffice, for document_preview: Word, Excel, PowerPoint (OOXML
and 97-2003), OpenDocument, RTF and EPUB.

`decode_office_preview` is a decoder-sandbox task (processors/sandbox): it runs in the process
forked per job, with no AWS credentials, no capabilities and `no_new_privs`, under the job's
rlimits, and there it starts `soffice --headless --convert-to pdf` on a private copy of the
file, then renders the PDF's pages as a PDF's are (processors/pdf_page.py). soffice
inherits all of it (the limits, the empty environment); what the sandbox cannot give it, the
profile does:

- **macros off**: the profile sets the macro security level to "very high" and turns macro
  execution off, so neither a document's Basic nor its event handlers run (a test opens a
  document whose on-load macro would write a file);
- **the filter its content type names, and no other**: soffice is told which import filter
  reads the file (`--infilter`, IMPORT_FILTERS: one for every office type the product
  accepts), so a file is parsed as what the sniffer accepted it as, never by whichever of
  LibreOffice's ~150 filters its bytes look like (a file that is not what its type says fails);
- **no fetching**: links are never updated (Writer's and Calc's `Update/Link` set to never);
  links to untrusted places are blocked (`BlockUntrustedRefererLinks`); every HTTP(S) and FTP
  fetch LibreOffice makes goes to a proxy at 127.0.0.1:9 (discard: nothing listens), as do
  curl's through `*_proxy`; and the layer's LibreOffice has no WebDAV/HTTP or FTP content
  provider at all (infra/layers/libreoffice/debs.py DROPPED). A document's external image is drawn
  as its placeholder, never fetched (a test serves one on 127.0.0.1 and sees no request).
  These are LibreOffice's own settings: what keeps a compromised soffice off the network is
  the decoder sandbox's business (processors/sandbox);
- **a fresh profile per job**: made for each conversion in a private directory under the
  decoding process's own temporary directory (`tempfile.gettempdir()`), which is also soffice's
  HOME and TMPDIR, and removed with it; no job sees a profile another job's document could
  have changed. soffice writes nowhere else but one place it chooses itself: its
  single-instance pipe, a Unix socket LibreOffice makes in /tmp whenever /tmp is writable
  (`/tmp/OSL_PIPE_<uid>_SingleOfficeIPC_<hash of the profile's URL>`, sal's PIPEDEFAULTPATH;
  removed at exit), which it cannot start without;
- **a time limit per file**: soffice runs in a session of its own; past `OFFICE_SECONDS` the
  whole group is killed and the job fails, permanently, naming the limit.

A document LibreOffice cannot open (corrupt, password-protected, not what its bytes claim)
converts to nothing: a permanent failure that says so. The page count is the PDF's; a
spreadsheet's sheets and a presentation's slides are counted from the PDF (one page a slide)
and, for OOXML and ODF workbooks, from the workbook itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Final
from urllib.parse import unquote, urlparse

from filejobs.domain.content import EPUB, OOXML_DOCUMENTS, RTF
from filejobs.domain.retry import PermanentError
from filejobs.processors.office_runtime import OfficeProgram
from filejobs.processors.pdf_page import Pages, Preview, decoded_pages, render_pdf_pages
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Decoded

OFFICE_SECONDS: Final = 60
_OPENXML = "application/vnd.openxmlformats-officedocument"
# soffice under the job's rlimits: it maps a few hundred MB of libraries (address space, not
# memory), opens many files (fonts, its registry), and writes the PDF and its profile.
LIMITS: Final = DecoderLimits(
    memory_bytes=4096 * MiB,
    cpu_seconds=OFFICE_SECONDS,
    open_files=1024,
    file_bytes=512 * MiB,
    wall_seconds=OFFICE_SECONDS + 30,
)
MAX_OFFICE_BYTES: Final = 100_000_000
# The PDF a document converts to goes back to the worker when pages after the first are wanted:
# the worker has each rendered in a sandbox call of its own (its progress reported, a stop heard
# between pages), from the one conversion. A PDF larger than this (the reply carries it base64,
# within DecoderLimits.reply_bytes) is not sent: its pages are rendered here, in this call.
MAX_RETURNED_PDF_BYTES: Final = 32 * MiB
CONVERTED_PDF: Final = "converted.pdf"
# The name soffice sees: it detects the format from the bytes, and the extension settles a tie.
# By the content type in lower case, as the processor has it.
_EXTENSIONS = {
    **{mime: ".docx" for mime in OOXML_DOCUMENTS if "wordprocessingml" in mime or "word" in mime},
    **{mime: ".xlsx" for mime in OOXML_DOCUMENTS if "spreadsheetml" in mime or "excel" in mime},
    **{
        mime: ".pptx"
        for mime in OOXML_DOCUMENTS
        if "presentationml" in mime or "powerpoint" in mime
    },
    "application/vnd.oasis.opendocument.text": ".odt",
    "application/vnd.oasis.opendocument.spreadsheet": ".ods",
    "application/vnd.oasis.opendocument.presentation": ".odp",
    "application/vnd.oasis.opendocument.graphics": ".odg",
    EPUB: ".epub",
    "application/msword": ".doc",
    "application/vnd.ms-excel": ".xls",
    "application/vnd.ms-powerpoint": ".ppt",
    RTF: ".rtf",
}
EXTENSIONS: Final = {mime.lower(): extension for mime, extension in _EXTENSIONS.items()}
# The import filter for each office type the product accepts (domain/content.py's
# OFFICE_DOCUMENTS), by LibreOffice's filter names (its share/registry/*.xcd): soffice skips its
# type detection and reads the file with this filter only. EPUB is read as its first chapter's
# XHTML by Writer (first_chapter).
_IMPORT_FILTERS = {
    f"{_OPENXML}.wordprocessingml.document": "MS Word 2007 XML",
    f"{_OPENXML}.wordprocessingml.template": "MS Word 2007 XML Template",
    "application/vnd.ms-word.document.macroEnabled.12": "MS Word 2007 XML VBA",
    f"{_OPENXML}.spreadsheetml.sheet": "Calc MS Excel 2007 XML",
    f"{_OPENXML}.spreadsheetml.template": "Calc MS Excel 2007 XML Template",
    "application/vnd.ms-excel.sheet.macroEnabled.12": "Calc MS Excel 2007 VBA XML",
    f"{_OPENXML}.presentationml.presentation": "Impress MS PowerPoint 2007 XML",
    # A slideshow is a presentation that opens playing: the presentation filter reads it, so
    # nothing is asked to start a show.
    f"{_OPENXML}.presentationml.slideshow": "Impress MS PowerPoint 2007 XML",
    f"{_OPENXML}.presentationml.template": "Impress MS PowerPoint 2007 XML Template",
    "application/vnd.ms-powerpoint.presentation.macroEnabled.12": (
        "Impress MS PowerPoint 2007 XML VBA"
    ),
    "application/vnd.oasis.opendocument.text": "writer8",
    "application/vnd.oasis.opendocument.spreadsheet": "calc8",
    "application/vnd.oasis.opendocument.presentation": "impress8",
    "application/vnd.oasis.opendocument.graphics": "draw8",
    EPUB: "HTML (StarWriter)",
    "application/msword": "MS Word 97",
    "application/vnd.ms-excel": "MS Excel 97",
    "application/vnd.ms-powerpoint": "MS PowerPoint 97",
    RTF: "Rich Text Format",
}
IMPORT_FILTERS: Final = {mime.lower(): name for mime, name in _IMPORT_FILTERS.items()}
_DEAD_PROXY = "127.0.0.1:9"
# soffice.bin's exit status asking to be started again (a fresh profile): oosplash restarts it
# on a desktop; the layer starts soffice.bin itself, so the worker does.
_RESTART = 81
_PROFILE_OPTION = "-env:UserInstallation="
_SHEET_PART = re.compile(r"^xl/worksheets/sheet\d+\.xml$")
_ODF_TABLE = re.compile(rb"<table:table[\s>]")
_MAX_CONTENT_XML = 64 * MiB
MAX_EPUB_METADATA = 4 * MiB  # container.xml and the package document
MAX_EPUB_MEMBERS = 10_000
MAX_EPUB_UNPACKED = 256 * MiB


@dataclass(frozen=True)
class Converted:
    """A document converted once: the pages rendered of it, its counts, and the PDF when the
    worker is to have the later pages rendered from it (else None)."""

    pages: Pages
    facts: dict[str, Any]
    pdf: bytes | None = None


def office_preview(source: Path, content_type: str, program: OfficeProgram) -> Preview:
    """Page 1 of the document converted to PDF, with its counts (pages, and sheets or slides;
    an EPUB's chapters)."""
    converted = convert_and_render(source, content_type, program, wanted=1)
    return Preview(converted.pages.rendered[0].image, converted.facts)


def convert_and_render(
    source: Path, content_type: str, program: OfficeProgram, *, wanted: int
) -> Converted:
    """The document converted to PDF once, page 1 rendered, and its counts. When pages after
    the first are `wanted` (up to page `wanted`) and the document has them, the PDF is
    returned for the worker to render them from, or, larger than MAX_RETURNED_PDF_BYTES,
    they are rendered here."""
    with tempfile.TemporaryDirectory(prefix="office-") as scratch:
        work = Path(scratch)
        document = work / f"document{EXTENSIONS.get(content_type, '')}"
        shutil.copyfile(source, document)
        counts: dict[str, int] = {}
        if content_type == EPUB:
            # LibreOffice reads no EPUB: its first chapter is XHTML, which Writer/Web reads.
            document, chapters = first_chapter(document, work / "book")
            counts["chapter_count"] = chapters
        pdf = convert_to_pdf(document, work / "out", program, content_type=content_type)
        pages = render_pdf_pages(pdf, [1])
        returned = None
        last = min(wanted, pages.count)
        if last > 1 and pdf.stat().st_size <= MAX_RETURNED_PDF_BYTES:
            returned = pdf.read_bytes()
        elif last > 1:
            later = render_pdf_pages(pdf, range(2, last + 1))
            pages.rendered.extend(later.rendered)
            pages.skipped.extend(later.skipped)
        if content_type != EPUB:
            counts = _parts(document, content_type, pages.count)
    facts = {
        "page_count": pages.count,
        **pages.facts,
        **counts,
        "converter": program.version or "LibreOffice",
    }
    if content_type == EPUB:  # a book reflows: its pages are its first chapter's here
        facts["first_chapter_page_count"] = facts.pop("page_count")
    return Converted(pages, facts, returned)


def first_chapter(book: Path, into: Path) -> tuple[Path, int]:
    """The EPUB's first chapter (the first document of its spine), unpacked with the book's
    other files under `into` so its images and styles are found; and how many chapters there
    are. PermanentError for a book that is not a readable EPUB."""
    try:
        with zipfile.ZipFile(book) as archive:
            opf_path = _epub_package_path(archive)
            opf = _read_member(archive, opf_path)
            spine = _spine_documents(opf)
            if not spine:
                raise PermanentError("the EPUB's spine lists no chapter: nothing to preview")
            _unpack_safely(archive, into)
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as error:
        raise PermanentError(f"not a readable EPUB: {error}") from error
    folder = PurePosixPath(opf_path).parent
    chapter = (into / folder / spine[0]).resolve()
    if not chapter.is_relative_to(into.resolve()) or not chapter.is_file():
        raise PermanentError("the EPUB's first chapter is not in the book")
    return chapter, len(spine)


def _epub_package_path(archive: zipfile.ZipFile) -> str:
    container = _read_member(archive, "META-INF/container.xml")
    found = re.search(r'full-path\s*=\s*"([^"]{1,1024})"', container)
    if found is None:
        raise PermanentError("the EPUB's container names no package document")
    return found[1]


def _spine_documents(opf: str) -> list[str]:
    """The hrefs of the spine's items, in reading order."""
    hrefs = {}
    for item in re.findall(r"<(?:\w+:)?item\b([^>]{1,4096})>", opf):
        ident, href = re.search(r'\bid="([^"]+)"', item), re.search(r'\bhref="([^"]+)"', item)
        if ident and href:
            hrefs[ident[1]] = unquote(href[1])
    order = re.findall(r'<(?:\w+:)?itemref\b[^>]*\bidref="([^"]+)"', opf)
    return [hrefs[ref] for ref in order if ref in hrefs]


def _read_member(archive: zipfile.ZipFile, name: str) -> str:
    info = archive.getinfo(name)
    if info.file_size > MAX_EPUB_METADATA:
        raise PermanentError(f"the EPUB's {name} is larger than {MAX_EPUB_METADATA} bytes")
    return archive.read(info).decode("utf-8")


def _unpack_safely(archive: zipfile.ZipFile, into: Path) -> None:
    """Every member under `into`, none outside it, within the book's size and count limits."""
    members = archive.infolist()
    total = sum(info.file_size for info in members)
    if len(members) > MAX_EPUB_MEMBERS or total > MAX_EPUB_UNPACKED:
        raise PermanentError(
            f"the EPUB unpacks to {len(members)} files and {total} bytes: more than the "
            f"{MAX_EPUB_MEMBERS} files or {MAX_EPUB_UNPACKED // MiB} MiB document_preview unpacks"
        )
    root = into.resolve()
    for info in members:
        target = (root / info.filename).resolve()
        if not target.is_relative_to(root):
            raise PermanentError(f"the EPUB's member {info.filename[:80]!r} points outside it")
        if info.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(info) as member, target.open("wb") as out:
            shutil.copyfileobj(member, out)


def convert_to_pdf(
    document: Path, out_dir: Path, program: OfficeProgram, *, content_type: str
) -> Path:
    """`document` converted by soffice into `out_dir`, read by the import filter of its content
    type (IMPORT_FILTERS), with a profile of its own; PermanentError when it cannot be."""
    import_filter = IMPORT_FILTERS.get(content_type.lower())
    if import_filter is None:
        raise PermanentError(f"no LibreOffice import filter is allowed for {content_type}")
    out_dir.mkdir()
    # Writer/Web's own PDF export leaves page 1 blank: an EPUB's XHTML is exported by Writer's.
    export = "pdf:writer_pdf_Export" if content_type == EPUB else "pdf"
    with tempfile.TemporaryDirectory(prefix="soffice-") as private:
        home = Path(private)
        profile = _profile(home / "profile")
        argv = [
            *program.argv,
            f"{_PROFILE_OPTION}{profile.as_uri()}",
            "--headless",
            "--invisible",
            "--nologo",
            "--nodefault",
            "--nolockcheck",
            "--norestore",
            f"--infilter={import_filter}",
            "--convert-to",
            export,
            "--outdir",
            str(out_dir),
            str(document),
        ]
        _run(argv, program, home)
    found = sorted(out_dir.glob("*.pdf"))
    if not found or found[0].stat().st_size == 0:
        raise PermanentError(
            "LibreOffice could not open the document (corrupt, password-protected, or not "
            "the kind of document its content type says): no preview"
        )
    return found[0]


def _run(argv: list[str], program: OfficeProgram, home: Path) -> None:
    """soffice run to its end, restarted once if it asks (exit 81), with home as its HOME,
    TMPDIR and working directory."""
    for _attempt in range(2):
        returncode, errors = _run_once(argv, program, home)
        if returncode != _RESTART:
            break
        argv = _with_profile_moved(argv)
    if returncode != 0:
        said = errors.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise PermanentError(
            f"LibreOffice could not convert the document (exit {returncode}: {said[0][:200]})"
        )


def _with_profile_moved(argv: list[str]) -> list[str]:
    """`argv` with its profile moved to a new path, for the restart soffice asks for on a fresh
    profile. The single-instance pipe's name is a hash of the profile's URL, and in the sandbox
    soffice may make its pipe in /tmp but not remove it: restarted on the same URL it would find
    its own dead pipe in the way and exit 1."""
    return [
        _moved_profile(argument) if argument.startswith(_PROFILE_OPTION) else argument
        for argument in argv
    ]


def _moved_profile(option: str) -> str:
    profile = Path(unquote(urlparse(option[len(_PROFILE_OPTION) :]).path))
    restarted = profile.rename(profile.with_name(f"{profile.name}-restarted"))
    return f"{_PROFILE_OPTION}{restarted.as_uri()}"


def _run_once(argv: list[str], program: OfficeProgram, home: Path) -> tuple[int, bytes]:
    environment = {
        "PATH": "/usr/bin:/bin",
        # Where soffice (and fontconfig's cache, under $HOME/.cache) may write: the job's own
        # directory under the decoding process's temporary one.
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "SAL_USE_VCLPLUGIN": "svp",  # headless rendering: no X, no desktop integration
        **{name: f"http://{_DEAD_PROXY}" for name in ("http_proxy", "https_proxy", "ftp_proxy")},
        **{name.upper(): f"http://{_DEAD_PROXY}" for name in ("http_proxy", "https_proxy")},
        "no_proxy": "",
        **program.environment,
    }
    process = subprocess.Popen(  # noqa: S603 (argv is ours: soffice, its options, our path)
        argv,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=home,
    )
    try:
        _, errors = process.communicate(timeout=OFFICE_SECONDS)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise PermanentError(
            f"LibreOffice took longer than {OFFICE_SECONDS} s (document_preview's limit per "
            "file) to convert the document"
        ) from None
    finally:
        _kill_group(process)  # a helper process soffice left behind goes with it
    return process.returncode, errors


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _profile(profile: Path) -> Path:
    """A LibreOffice profile at `profile` (the job's own), with the settings that keep macros
    off, links unfollowed and the network away."""
    settings = profile / "user" / "registrymodifications.xcu"
    settings.parent.mkdir(parents=True)
    settings.write_text(_registry())
    return profile


def _registry() -> str:
    items = [
        ("/org.openoffice.Office.Common/Security/Scripting", "MacroSecurityLevel", "int", "3"),
        ("/org.openoffice.Office.Common/Security/Scripting", "DisableMacrosExecution", "boolean",
         "true"),
        ("/org.openoffice.Office.Common/Security/Scripting", "BlockUntrustedRefererLinks",
         "boolean", "true"),
        # Links (to other files, DDE, OLE links, linked sections and images) never updated:
        # Writer's 0 is never (1 asks, 2 always), Calc's 1 is never (0 always, 2 asks).
        ("/org.openoffice.Office.Writer/Content/Update", "Link", "int", "0"),
        ("/org.openoffice.Office.Calc/Content/Update", "Link", "int", "1"),
        ("/org.openoffice.Office.Common/Misc", "FirstRun", "boolean", "false"),
        ("/org.openoffice.Office.Common/Misc", "UseSystemFileDialog", "boolean", "false"),
        ("/org.openoffice.Office.Common/Save/Document", "CreateBackup", "boolean", "false"),
        ("/org.openoffice.Office.Recovery/AutoSave", "Enabled", "boolean", "false"),
        ("/org.openoffice.Office.Recovery/RecoveryInfo", "Enabled", "boolean", "false"),
        ("/org.openoffice.Office.Update/Update", "AutoCheckEnabled", "boolean", "false"),
        ("/org.openoffice.Office.Jobs/Jobs/org.openoffice.Office.Jobs:Job['UpdateCheck']"
         "/Arguments", "AutoCheckEnabled", "boolean", "false"),
        ("/org.openoffice.Inet/Settings", "ooInetProxyType", "int", "1"),
        ("/org.openoffice.Inet/Settings", "ooInetHTTPProxyName", "string", "127.0.0.1"),
        ("/org.openoffice.Inet/Settings", "ooInetHTTPProxyPort", "int", "9"),
        ("/org.openoffice.Inet/Settings", "ooInetHTTPSProxyName", "string", "127.0.0.1"),
        ("/org.openoffice.Inet/Settings", "ooInetHTTPSProxyPort", "int", "9"),
        ("/org.openoffice.Inet/Settings", "ooInetFTPProxyName", "string", "127.0.0.1"),
        ("/org.openoffice.Inet/Settings", "ooInetFTPProxyPort", "int", "9"),
        ("/org.openoffice.Inet/Settings", "ooInetNoProxy", "string", ""),
    ]  # fmt: skip
    body = "\n".join(
        f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse">'
        f"<value>{value}</value></prop></item>"
        for path, name, _kind, value in items
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
        f"{body}\n</oor:items>\n"
    )


def _parts(document: Path, content_type: str, pages: int) -> dict[str, int]:
    """Sheets of a workbook, slides of a presentation (one PDF page each)."""
    extension = EXTENSIONS.get(content_type)
    if extension in {".pptx", ".odp", ".ppt"}:
        return {"slide_count": pages}
    sheets = _sheets(document, extension)
    return {} if sheets is None else {"sheet_count": sheets}


def _sheets(document: Path, extension: str | None) -> int | None:
    try:
        with zipfile.ZipFile(document) as workbook:
            if extension == ".xlsx":
                return sum(1 for name in workbook.namelist() if _SHEET_PART.match(name))
            if extension == ".ods":
                with workbook.open("content.xml") as content:
                    return len(_ODF_TABLE.findall(content.read(_MAX_CONTENT_XML)))
    except (zipfile.BadZipFile, KeyError, OSError):
        return None  # LibreOffice read it: the count is a nicety, not worth failing for
    return None


def decode_office_preview(source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """The sandbox's task: the open document converted by soffice (named by `options`), page 1
    as WebP (`preview-page1.webp`) and its counts; with pages up to `options["wanted"]`, the
    PDF (`converted.pdf`) the worker renders them from, or those pages (convert_and_render)."""
    program = OfficeProgram(
        tuple(options["soffice"]), dict(options.get("environment") or {}), options.get("version")
    )
    with tempfile.NamedTemporaryFile(prefix="upload-", delete=True) as copy:
        shutil.copyfileobj(source, copy)
        copy.flush()
        converted = convert_and_render(
            Path(copy.name), options["content_type"], program, wanted=int(options.get("wanted", 1))
        )
    more = {CONVERTED_PDF: converted.pdf} if converted.pdf is not None else None
    return decoded_pages(converted.pages, converted.facts, more)
