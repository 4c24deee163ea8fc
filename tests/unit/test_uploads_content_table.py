"""docs/UPLOADS.md, "What happens to each upload", lists every content type the sniffer gives and
the jobs each gets, as `job_types_for` routes them today: a change to either without the page
fails here."""

from __future__ import annotations

import sys
from pathlib import Path

# tools/ is a folder of scripts, not a package: its modules import (and mypy checks them) by name.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from content_table import END, PAGE, START, render, with_table

from filejobs.domain.content import AUDIO_WITH_ART, SNIFFED_TYPES


def test_the_uploads_page_s_table_is_the_one_the_routing_gives() -> None:
    page = PAGE.read_text()
    assert with_table(page) == page, (
        "docs/UPLOADS.md is stale: run .venv/bin/python tools/content_table.py"
    )


def test_the_table_sits_in_the_section_on_what_happens_to_each_upload() -> None:
    page = PAGE.read_text()
    section = page.split("## What happens to each upload\n", 1)[1].split("\n## ", 1)[0]
    assert START in section and END in section


def test_the_table_names_every_sniffed_type_once_and_audio_with_art_once_more() -> None:
    table = render()
    for mime in SNIFFED_TYPES:
        assert table.count(f"`{mime}`") == 1 + (mime in AUDIO_WITH_ART), mime
