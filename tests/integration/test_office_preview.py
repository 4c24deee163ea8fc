"""document_preview of office documents: LibreOffice converts them to PDF inside the decoder
sandbox, and page 1 is the preview. On documents LibreOffice itself writes (from flat
OpenDocument, once per session), through the processor and moto S3: the counts, the picture,
a corrupt document, a document that would fetch an image from the network, and the time limit."""

from __future__ import annotations

import http.server
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageStat

from filejobs.domain.job import JobType
from filejobs.domain.retry import PermanentError
from filejobs.processors import office, office_runtime
from filejobs.processors.document import DocumentPreviewProcessor
from filejobs.processors.office_runtime import OfficeProgram, soffice
from tests.office_layers import hand_over, office_layer
from tests.processing import MediaBench

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from samples import office_document

pytestmark = [
    pytest.mark.skipif(
        shutil.which("soffice") is None, reason="LibreOffice is not installed (make system-deps)"
    ),
    pytest.mark.slow,  # real LibreOffice conversions: about 3 s each
]

OPENXML = "application/vnd.openxmlformats-officedocument"
# LibreOffice left to its defaults, as a package installs it: its launcher (which restarts
# soffice.bin on a fresh profile itself).
_LAUNCHER = shutil.which("soffice") or "soffice"
# format -> (content type, parts written, the counts its preview must report)
DOCUMENTS: dict[str, tuple[str, int, dict[str, int]]] = {
    "docx": (f"{OPENXML}.wordprocessingml.document", 10, {"page_count": 10}),
    "xlsx": (f"{OPENXML}.spreadsheetml.sheet", 3, {"page_count": 3, "sheet_count": 3}),
    "pptx": (f"{OPENXML}.presentationml.presentation", 4, {"page_count": 4, "slide_count": 4}),
    "odt": ("application/vnd.oasis.opendocument.text", 2, {"page_count": 2}),
    "ods": ("application/vnd.oasis.opendocument.spreadsheet", 2, {"sheet_count": 2}),
    "doc": ("application/msword", 3, {"page_count": 3}),
    "rtf": ("application/rtf", 2, {"page_count": 2}),
    "epub": ("application/epub+zip", 2, {"chapter_count": 2}),
}


@pytest.fixture(scope="session")
def documents() -> dict[str, bytes]:
    return {kind: office_document(kind, parts) for kind, (_, parts, _) in DOCUMENTS.items()}


def previewed(media: MediaBench, name: str, body: bytes, content_type: str) -> dict[str, Any]:
    work = media.work_for(
        JobType.DOCUMENT_PREVIEW, name, body, input_data={"content_type": content_type}
    )
    return DocumentPreviewProcessor(media.s3)(work)


def picture(media: MediaBench, result: dict[str, Any]) -> Image.Image:
    import io  # noqa: PLC0415

    return Image.open(io.BytesIO(media.output(result["preview"]["key"]))).convert("L")


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_an_office_document_previews_as_its_first_page_with_its_counts(
    media: MediaBench, documents: dict[str, bytes], kind: str
) -> None:
    content_type, _, counts = DOCUMENTS[kind]
    result = previewed(media, f"document.{kind}", documents[kind], content_type)
    # then it says how many pages (sheets, slides) there are, and what converted it
    assert {name: result[name] for name in counts} == counts
    assert result["converter"].startswith("LibreOffice")
    # and page 1 is an image 1024 px on its long edge, with ink on it (not a blank page)
    image = picture(media, result)
    assert max(image.size) == 1024
    assert ImageStat.Stat(image).extrema[0][0] < 100  # some dark text
    assert result["preview"]["key"].endswith("/document_preview/preview-page1.webp")


def test_a_corrupt_document_fails_permanently_and_says_why(
    media: MediaBench, documents: dict[str, bytes]
) -> None:
    broken = documents["docx"][:300] + bytes(5000)
    with pytest.raises(PermanentError, match="LibreOffice could not"):
        previewed(media, "broken.docx", broken, DOCUMENTS["docx"][0])


class Recorder(http.server.BaseHTTPRequestHandler):
    paths: list[str] = []  # noqa: RUF012 (the server's one handler class records for the test)

    def do_GET(self) -> None:
        Recorder.paths.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def recorder() -> Iterator[tuple[int, list[str]]]:
    Recorder.paths = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], Recorder.paths
    server.shutdown()


def linked_image_document(port: int) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?><office:document '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" '
        'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
        'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">'
        "<office:body><office:text><text:p>Tracked: "
        '<draw:frame draw:name="pixel" text:anchor-type="as-char" svg:width="4cm" '
        'svg:height="3cm"><draw:image xlink:href="http://127.0.0.1:'
        f'{port}/tracker.png" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/>'
        "</draw:frame></text:p></office:text></office:body></office:document>"
    )


def write_odt(path: Path, flat: str) -> None:
    """A flat OpenDocument text as the packaged .odt uploads are (the writer8 filter's)."""
    import zipfile  # noqa: PLC0415

    content = flat.replace("<office:document ", "<office:document-content ", 1).replace(
        "</office:document>", "</office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
        '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
        '<manifest:file-entry manifest:full-path="/" manifest:media-type='
        '"application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path='
        '"content.xml" manifest:media-type="text/xml"/></manifest:manifest>'
    )
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        package.writestr("META-INF/manifest.xml", manifest)
        package.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)


def test_a_linked_image_is_never_fetched_though_libreoffice_would_fetch_it(
    recorder: tuple[int, list[str]], tmp_path: Path
) -> None:
    port, requests = recorder
    document = tmp_path / "tracked.odt"
    write_odt(document, linked_image_document(port))
    # given LibreOffice with a profile of its defaults fetches the image while converting
    bare = tmp_path / "bare"
    import subprocess  # noqa: PLC0415

    subprocess.run(
        [_LAUNCHER, f"-env:UserInstallation={bare.as_uri()}", "--headless",
         "--convert-to", "pdf", "--outdir", str(tmp_path / "bare-out"), str(document)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert requests == ["/tracker.png"]
    # when the converter's own profile converts it, then nothing is fetched, and it converts
    requests.clear()
    pdf = office.convert_to_pdf(
        document,
        tmp_path / "out",
        soffice(),
        content_type="application/vnd.oasis.opendocument.text",
    )
    assert pdf.stat().st_size > 0
    assert requests == []


def test_the_profile_turns_macros_off_and_sends_every_fetch_to_a_dead_proxy() -> None:
    settings = office._registry()
    for key, value in (
        ("MacroSecurityLevel", "3"),
        ("DisableMacrosExecution", "true"),
        ("BlockUntrustedRefererLinks", "true"),
        ("ooInetProxyType", "1"),
        ("ooInetHTTPSProxyPort", "9"),
    ):
        assert f'<prop oor:name="{key}" oor:op="fuse"><value>{value}</value>' in settings


def test_two_documents_converted_at_once_each_come_out_whole(
    documents: dict[str, bytes], tmp_path: Path
) -> None:
    # Two conversions sharing one profile interfered (a profile per user once): each has its own.
    def convert(kind: str) -> bytes:
        source = tmp_path / f"document.{kind}"
        source.write_bytes(documents[kind])
        content_type = DOCUMENTS[kind][0]
        pdf = office.convert_to_pdf(source, tmp_path / kind, soffice(), content_type=content_type)
        return pdf.read_bytes()

    # when a 10-page document and a 4-slide presentation are converted at the same time
    with ThreadPoolExecutor(max_workers=2) as pool:
        docx, pptx = pool.map(convert, ["docx", "pptx"])
    # then each is its own whole PDF
    assert docx.startswith(b"%PDF") and pptx.startswith(b"%PDF")
    assert pdf_pages(docx) == 10 and pdf_pages(pptx) == 4


def pdf_pages(pdf: bytes) -> int:
    import pypdfium2  # type: ignore[import-untyped]  # noqa: PLC0415

    return len(pypdfium2.PdfDocument(pdf))


def test_a_conversion_past_the_time_limit_fails_permanently_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # given soffice that never finishes (a stand-in that sleeps), and a limit of one second
    hanging = tmp_path / "soffice"
    hanging.write_text("#!/bin/sh\nsleep 60\n")
    hanging.chmod(0o755)
    monkeypatch.setattr(office, "OFFICE_SECONDS", 1)
    document = tmp_path / "a.odt"
    document.write_bytes(b"anything")
    with pytest.raises(PermanentError, match=r"longer than 1 s \(document_preview's limit"):
        office.convert_to_pdf(
            document,
            tmp_path / "out",
            OfficeProgram((str(hanging),)),
            content_type="application/vnd.oasis.opendocument.text",
        )


def test_the_layer_s_unpacked_libreoffice_converts_inside_the_sandbox_with_its_environment(
    media: MediaBench,
    documents: dict[str, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The path a Lambda conversion takes: the layer's archive unpacked under /tmp, soffice.bin
    started through the tree's loader in the sandbox with the tree's fontconfig file. The tree's
    loader here hands over to this machine's LibreOffice (the layer's own is arm64: `make
    template` runs it under qemu), noting the arguments and environment it was given."""
    # The sandbox lets soffice write only in its job's directory: the loader checks how it was
    # started itself, and refuses to convert (exit 3, its reasons on stderr) when it is wrong.
    checks = """home=$(cd "$(dirname "$0")/.." && pwd)
problems=""
[ "$1 $2 $3" = "--library-path $home/lib $home/program/soffice.bin" ] || problems="$problems argv;"
[ -z "${LD_LIBRARY_PATH+set}" ] || problems="$problems LD_LIBRARY_PATH set;"
[ "$FONTCONFIG_FILE" = "$home/fontconfig/fonts.conf" ] || problems="$problems fonts.conf;"
[ "$http_proxy" = "http://127.0.0.1:9" ] || problems="$problems http_proxy;"
env | grep -q "^AWS_" && problems="$problems AWS variables;"
[ -z "$problems" ] || { echo "started wrong:$problems" >&2; exit 3; }"""
    # soffice.bin, as on Lambda (the `soffice` script's oosplash restarts on the same profile)
    installed = Path(shutil.which("soffice") or "").resolve().with_name("soffice.bin")
    dejavu = Path("/usr/share/fonts/truetype/dejavu").glob("DejaVuSans*.ttf")
    layer = office_layer(
        tmp_path,
        hand_over(installed, before=checks),
        [(font.name, font.read_bytes()) for font in dejavu],
    )
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "lambda-tmp"))
    (tmp_path / "lambda-tmp").mkdir()
    office_runtime.forget_verified()
    try:
        content_type, _, counts = DOCUMENTS["docx"]
        result = previewed(media, "document.docx", documents["docx"], content_type)
    finally:
        office_runtime.forget_verified()
    # then the unpacked tree's LibreOffice made the preview, and said which it is
    assert result["page_count"] == counts["page_count"]
    assert result["converter"] == "LibreOffice 7.4.7"
    assert ImageStat.Stat(picture(media, result)).extrema[0][0] < 100
    # started by the tree's loader (its checks passed: given the tree's libraries and its
    # soffice.bin, the tree's fonts, no credentials, the dead proxy), from the tree unpacked
    (_home,) = (tmp_path / "lambda-tmp").glob("filejobs-libreoffice-*")


def test_a_file_that_is_not_what_its_content_type_says_is_not_read_by_another_filter(
    documents: dict[str, bytes], tmp_path: Path
) -> None:
    """soffice is told the import filter of the content type: an RTF sent as an OpenDocument
    text is refused, where LibreOffice's own type detection would have read it as RTF."""
    document = tmp_path / "document.odt"
    document.write_bytes(documents["rtf"])
    # given LibreOffice left to detect the type converts it (as RTF)
    import subprocess  # noqa: PLC0415

    bare = tmp_path / "bare"
    subprocess.run(
        [_LAUNCHER, f"-env:UserInstallation={bare.as_uri()}", "--headless",
         "--convert-to", "pdf", "--outdir", str(tmp_path / "detected"), str(document)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert (tmp_path / "detected/document.pdf").stat().st_size > 0
    # when the converter reads it with the OpenDocument filter its type names, then it fails
    with pytest.raises(PermanentError, match="LibreOffice could not"):
        office.convert_to_pdf(
            document, tmp_path / "out", soffice(), content_type=DOCUMENTS["odt"][0]
        )
