"""README.md is the front page, not the manual: at most 250 lines, and every relative link in it
(pages, files, images) names a file of the repository and, when it names an anchor, a heading of
that file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250
# [text](target) and ![alt](target), outside code; a target has no spaces.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def without_fences(markdown: str) -> str:
    return re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)


def relative_links(markdown: str) -> list[str]:
    """Each link target that is not a URL, once, outside code (fenced or inline)."""
    text = re.sub(r"`[^`\n]*`", "", without_fences(markdown))
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    return list(dict.fromkeys(targets))


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub (and mkdocs' toc) give the headings of a Markdown file."""
    headings = re.findall(r"^#{1,6} +(.+?) *#*$", without_fences(markdown), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in headings}


def test_the_readme_is_at_most_250_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines: move the detail to docs/"


@pytest.mark.parametrize("target", relative_links(README.read_text()))
def test_each_relative_link_names_a_file_and_its_anchor(target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (ROOT / path).resolve() if path else README
    assert file.is_file(), f"README.md links to {target}, which is not a file"
    assert file.is_relative_to(ROOT), target
    if anchor:
        assert anchor in anchors(file.read_text()), f"{path or 'README.md'} has no #{anchor}"


def test_the_readme_links_every_page_of_the_manual() -> None:
    linked = {target.partition("#")[0] for target in relative_links(README.read_text())}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert pages - {"docs/index.md"} <= linked


def test_links_are_found_outside_code_only_and_anchors_read_as_github_makes_them() -> None:
    text = "[a](x.md#b) `[c](y.md)`\n```\n[d](z.md)\n```\n![e](p.png) [f](https://h/)\n"
    assert relative_links(text) == ["x.md#b", "p.png"]
    assert anchors("## What happens to each upload\n### `make dev`: the stack\n") == {
        "what-happens-to-each-upload",
        "make-dev-the-stack",
    }
