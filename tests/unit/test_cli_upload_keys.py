"""Specification: `filejobs upload` takes any file name and makes of it a key the ingest and the
API take (and a person can read); `--key` names the object exactly, checked, not changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from filejobs.domain.ingest import tenant_of
from filejobs.domain.tenant_prefixes import prefix_problem
from filejobs_cli.errors import UsageError
from filejobs_cli.main import main
from filejobs_cli.upload_keys import MAX_NAME_BYTES, chosen_name, safe_name, upload_key


@pytest.mark.parametrize(
    ("name", "key_name"),
    [
        ("photo.png", "photo.png"),
        ("My Photo.jpg", "My-Photo.jpg"),
        ("My Photo (2).jpg", "My-Photo-2.jpg"),
        ("Résumé.pdf", "Résumé.pdf"),
        ("Re\u0301sume\u0301.pdf", "Résumé.pdf"),  # macOS writes names decomposed: the same key
        ("Счёт №7.pdf", "Счёт-7.pdf"),
        ("名前 写真.HEIC", "名前-写真.HEIC"),
        ("../../etc/passwd", "etc_passwd"),
        ("a..b...c.txt", "a.b.c.txt"),
        ("-rf .txt", "rf.txt"),
        (".bashrc", "bashrc"),
        ("???.txt", "file.txt"),
        ("tab\there\nnewline\x00nul.csv", "tab-here-newline_nul.csv"),
        ("archive.tar.gz", "archive.tar.gz"),
    ],
)
def test_a_file_name_becomes_a_readable_safe_key_name(name: str, key_name: str) -> None:
    assert safe_name(name) == key_name


def test_a_long_name_is_cut_in_its_stem_keeping_its_extension() -> None:
    made = safe_name("é" * 300 + ".jpeg")
    assert made.endswith(".jpeg")
    assert len(made.encode()) <= MAX_NAME_BYTES
    made.encode().decode()  # cut on a character boundary: still UTF-8


@given(st.text(min_size=1, max_size=300))
def test_any_name_makes_a_key_the_ingest_and_the_api_take(name: str) -> None:
    made = safe_name(name)
    key = upload_key("acme", "", made)
    # the ingest's own rule: uploads/{tenant}/{a name, not a folder}
    assert tenant_of(key) == "acme"
    # a prefix of the tenant's that presets and schedules accept (printable, bounded)
    assert prefix_problem("acme", key) is None
    # never a path trick, a hidden name, an option, or a control character
    assert "/" not in made and "\\" not in made and ".." not in made
    assert made[0] not in ".-_" and made[-1] not in ".-_"
    assert len(made.encode()) <= MAX_NAME_BYTES
    # and a key made from a key is itself
    assert safe_name(made) == made


@pytest.mark.parametrize(
    "chosen", ["", "/abs.txt", "folder/", "a/../b.txt", "a//b.txt", "./a.txt", "bell\x07.txt"]
)
def test_a_chosen_key_that_is_not_a_plain_relative_name_is_refused(chosen: str) -> None:
    with pytest.raises(UsageError, match="--key"):
        chosen_name(chosen)


def test_a_chosen_key_is_taken_as_written() -> None:
    assert chosen_name("contracts/2026/Q1 report.pdf") == "contracts/2026/Q1 report.pdf"


def test_two_files_that_would_make_one_key_are_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a b.txt", "a-b.txt"):
        (tmp_path / name).write_text("x")
    code = main(["upload", str(tmp_path / "a b.txt"), str(tmp_path / "a-b.txt")])
    assert code == 2
    assert "would both be uploaded as uploads/demo/a-b.txt" in capsys.readouterr().err


def test_a_key_is_chosen_for_one_file_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("x")
    code = main(["upload", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--key", "c.txt"])
    assert code == 2
    assert "--key names one file's object" in capsys.readouterr().err
