"""Specification: an upload's bytes are counted on one line redrawn in place on a terminal and
not at all elsewhere; a download through a presigned URL is written whole or not at all."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from filejobs_cli.errors import CliError
from filejobs_cli.retries import RetryPolicy
from filejobs_cli.transfer import ByteProgress, download, human_bytes
from tests.loopback import QuietHandler, serving

MIB = 1024 * 1024


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bytes_sent_are_one_line_redrawn_in_place_on_a_terminal() -> None:
    screen, now = Terminal(), [0.0]
    progress = ByteProgress("photo.png", 10 * MIB, screen, clock=lambda: now[0])
    progress(MIB)
    now[0] = 0.1
    progress(MIB)  # within the redraw interval: not drawn
    now[0] = 0.5
    progress(3 * MIB)
    progress.finish()
    drawn = screen.getvalue()
    assert drawn.count("\r\x1b[2K") == 3  # the first, the later one, and the final count
    assert "photo.png: 1.0 MiB of 10.0 MiB (10%)" in drawn
    assert drawn.endswith("photo.png: 5.0 MiB of 10.0 MiB (50%)\n")


def test_nothing_is_drawn_where_no_one_watches() -> None:
    log = io.StringIO()
    progress = ByteProgress("photo.png", MIB, log)
    progress(MIB)
    progress.finish()
    assert log.getvalue() == ""


def test_sizes_read_as_people_write_them() -> None:
    assert [human_bytes(n) for n in (12, 1536, 5 * MIB, 3 * 1024 * MIB)] == [
        "12 B", "1.5 KiB", "5.0 MiB", "3.0 GiB",
    ]  # fmt: skip


class Served(QuietHandler):
    """/ok: the bytes; /gone: 404 (an expired or wrong URL); /cut: fewer bytes than announced."""

    def do_GET(self) -> None:
        if self.path.startswith("/ok"):
            self.send_body(200, b"x" * 3000)
        elif self.path.startswith("/cut"):
            self.send_response(200)
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b"x" * 100)
        else:
            self.send_body(404, b"")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(Served) as base:
        yield base


def test_a_download_is_written_whole(url: str, tmp_path: Path) -> None:
    assert download(f"{url}/ok?X-Amz-Signature=s", tmp_path / "thumb.webp") == 3000
    assert (tmp_path / "thumb.webp").read_bytes() == b"x" * 3000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thumb.webp"]


@pytest.mark.parametrize("path", ["/gone", "/cut"])
def test_a_failed_download_leaves_nothing_behind(url: str, tmp_path: Path, path: str) -> None:
    quick = RetryPolicy(attempts=2, sleep=lambda seconds: None)
    with pytest.raises(CliError, match=r"thumb\.webp"):
        download(f"{url}{path}", tmp_path / "thumb.webp", retry=quick)
    assert list(tmp_path.iterdir()) == []


def test_only_http_urls_are_followed(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="not an http"):
        download("file:///etc/passwd", tmp_path / "x")
