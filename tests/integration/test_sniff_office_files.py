"""Documents LibreOffice itself writes are sniffed as what they are, within the read budget.

Skipped where LibreOffice is not installed; tests/unit/test_sniff_containers.py specifies the same
formats on packages written by `zipfile` and compound files written by hand. Each format is
converted once per session, from a small text, CSV or flat ODF presentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from filejobs.domain.byte_ranges import MAX_EXTRA_READS, BytesRanges
from filejobs.domain.content import SNIFF_BYTES, Sniffed, job_types_for, sniff
from filejobs.domain.job import JobType
from tests.content_samples import GENUINE_FORMATS, genuine_office_file, soffice

pytestmark = pytest.mark.skipif(soffice() is None, reason="LibreOffice is not installed")

OPENXML = "application/vnd.openxmlformats-officedocument"
EXPECTED = {
    "doc": "application/msword",
    "xls": "application/vnd.ms-excel",
    "ppt": "application/vnd.ms-powerpoint",
    "docx": f"{OPENXML}.wordprocessingml.document",
    "xlsx": f"{OPENXML}.spreadsheetml.sheet",
    "pptx": f"{OPENXML}.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "epub": "application/epub+zip",
    "rtf": "application/rtf",
}


@pytest.fixture(scope="session")
def office_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("office")


def test_every_format_converted_has_its_expectation() -> None:
    assert set(EXPECTED) == set(GENUINE_FORMATS)


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_a_document_libreoffice_wrote_is_sniffed_as_what_it_is(
    office_directory: Path, target: str
) -> None:
    data = genuine_office_file(office_directory, target).read_bytes()
    ranges = BytesRanges(data)
    assert sniff(data[:SNIFF_BYTES], ranges) == Sniffed(EXPECTED[target])
    assert len(ranges.reads) <= MAX_EXTRA_READS
    assert JobType.DOCUMENT_PREVIEW in job_types_for(EXPECTED[target])
