"""How document_preview starts soffice (filejobs.processors.office `convert_to_pdf`): the import
filter of the file's content type and no other, a profile of its own per job with links never
updated, HOME and TMPDIR in a private directory under the decoding process's temporary one (and
nothing written elsewhere), and soffice.bin restarted when a fresh profile asks for it (exit 81).

soffice here is a stand-in script that records what it was given and writes a PDF; the real
conversions are tests/integration/test_office_preview.py's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

from filejobs.domain.content import OFFICE_DOCUMENTS
from filejobs.domain.retry import PermanentError
from filejobs.processors import office
from filejobs.processors.office_runtime import OfficeProgram

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
OOR = "{http://openoffice.org/2001/registry}"

# Records its arguments (one a line), its environment and its profile's settings, then writes
# DOCUMENT.pdf into --outdir. With $RESTART_ONCE, exits 81 the first time, as soffice.bin does
# on a fresh profile.
STAND_IN = """#!/bin/sh
n=$(ls "$RECORD" | wc -l)
mkdir "$RECORD/$n"
printf '%s\\n' "$@" > "$RECORD/$n/argv"
env > "$RECORD/$n/environment"
for arg; do
  case "$arg" in -env:UserInstallation=file://*) profile="${arg#-env:UserInstallation=file://}";;
  esac
  [ "$previous" = "--outdir" ] && out="$arg"
  previous="$arg"
done
cp "$profile/user/registrymodifications.xcu" "$RECORD/$n/settings.xcu"
echo "$profile" > "$RECORD/$n/profile"
[ -n "$RESTART_ONCE" ] && [ "$n" = 0 ] && exit 81
printf '%%PDF-1.4 stand-in' > "$out/document.pdf"
"""


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The decoding process's own temporary directory (the sandbox gives each one its own)."""
    private = tmp_path / "private"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    return private


@pytest.fixture
def record(tmp_path: Path) -> Path:
    folder = tmp_path / "record"
    folder.mkdir()
    return folder


def stand_in(tmp_path: Path, record: Path, **environment: str) -> OfficeProgram:
    script = tmp_path / "soffice"
    script.write_text(STAND_IN)
    script.chmod(0o755)
    return OfficeProgram((str(script),), {"RECORD": str(record), **environment})


def converted(tmp_path: Path, program: OfficeProgram, content_type: str, name: str = "a") -> Path:
    document = tmp_path / f"{name}.bin"
    document.write_bytes(b"bytes")
    return office.convert_to_pdf(
        document, tmp_path / f"out-{name}", program, content_type=content_type
    )


def argv_of(record: Path, run: int = 0) -> list[str]:
    return (record / str(run) / "argv").read_text().splitlines()


def environment_of(record: Path, run: int = 0) -> dict[str, str]:
    lines = (record / str(run) / "environment").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_every_office_type_the_product_accepts_is_read_by_its_own_import_filter(
    tmp_path: Path, private_tmp: Path, record: Path
) -> None:
    program = stand_in(tmp_path, record)
    for run, content_type in enumerate(sorted(OFFICE_DOCUMENTS)):
        converted(tmp_path, program, content_type, name=str(run))
        (named,) = [arg for arg in argv_of(record, run) if arg.startswith("--infilter=")]
        assert named == f"--infilter={office.IMPORT_FILTERS[content_type.lower()]}"
    assert office.IMPORT_FILTERS["application/msword"] == "MS Word 97"
    assert office.IMPORT_FILTERS[DOCX] == "MS Word 2007 XML"


def test_a_type_without_an_import_filter_is_refused_before_soffice_starts(
    tmp_path: Path, private_tmp: Path, record: Path
) -> None:
    with pytest.raises(PermanentError, match=r"no LibreOffice import filter .* text/html"):
        converted(tmp_path, stand_in(tmp_path, record), "text/html")
    assert list(record.iterdir()) == []


def test_each_job_gets_a_profile_of_its_own_under_the_private_tmp_removed_after_it(
    tmp_path: Path, private_tmp: Path, record: Path
) -> None:
    program = stand_in(tmp_path, record)
    converted(tmp_path, program, DOCX, name="first")
    converted(tmp_path, program, DOCX, name="second")
    profiles = [Path((record / str(run) / "profile").read_text().strip()) for run in (0, 1)]
    # then each job had its own profile, inside the decoding process's temporary directory
    assert profiles[0] != profiles[1]
    assert all(profile.is_relative_to(private_tmp) for profile in profiles)
    # which was also soffice's HOME and TMPDIR (and its working directory's parent)
    for run, profile in enumerate(profiles):
        environment = environment_of(record, run)
        assert environment["HOME"] == environment["TMPDIR"] == str(profile.parent)
    # and nothing of either is left behind
    assert list(private_tmp.iterdir()) == []


def test_the_profile_never_updates_links_and_keeps_macros_and_the_network_off(
    tmp_path: Path, private_tmp: Path, record: Path
) -> None:
    converted(tmp_path, stand_in(tmp_path, record), DOCX)
    settings = ElementTree.parse(record / "0/settings.xcu").getroot()
    values = {
        (item.get(f"{OOR}path"), prop.get(f"{OOR}name")): prop.findtext("value")
        for item in settings
        for prop in item
    }
    # Writer's links: 0 is never; Calc's: 1 is never
    assert values[("/org.openoffice.Office.Writer/Content/Update", "Link")] == "0"
    assert values[("/org.openoffice.Office.Calc/Content/Update", "Link")] == "1"
    scripting = "/org.openoffice.Office.Common/Security/Scripting"
    assert values[(scripting, "BlockUntrustedRefererLinks")] == "true"
    assert values[(scripting, "DisableMacrosExecution")] == "true"
    assert values[("/org.openoffice.Inet/Settings", "ooInetHTTPSProxyPort")] == "9"


def test_soffice_asking_to_be_restarted_on_its_fresh_profile_is_started_again(
    tmp_path: Path, private_tmp: Path, record: Path
) -> None:
    pdf = converted(tmp_path, stand_in(tmp_path, record, RESTART_ONCE="1"), DOCX)
    assert pdf.read_bytes().startswith(b"%PDF-")
    # the same command again, its profile (settings kept) moved to a new path: in the sandbox
    # soffice cannot remove its first run's single-instance pipe, named after the profile's URL
    first, second = argv_of(record, 0), argv_of(record, 1)
    changed = [(a, b) for a, b in zip(first, second, strict=True) if a != b]
    assert [a.split("=", 1)[0] for a, _b in changed] == ["-env:UserInstallation"]
    moved = Path((record / "1" / "profile").read_text().strip())
    assert moved == Path((record / "0" / "profile").read_text().strip()).with_name(
        "profile-restarted"
    )
    assert (record / "0" / "settings.xcu").read_text() == (
        record / "1" / "settings.xcu"
    ).read_text()
