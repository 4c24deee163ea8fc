"""Where document_preview finds LibreOffice (filejobs.processors.office_runtime): on Lambda, the
LibreOffice layer's archive unpacked under /tmp once per execution environment, whole or not at
all, started through the layer's own loader, and never run once it differs from the layer's
list of files; locally, Debian's soffice on PATH; FILEJOBS_SOFFICE before either.

The layers here are made by the layer build's own write_archive, from small trees."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from filejobs.config import ConfigurationError
from filejobs.processors import office_runtime
from filejobs.processors.sandbox import recycling
from tests.office_layers import office_layer


@pytest.fixture(autouse=True)
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """/tmp of the execution environment, and no LibreOffice found any other way."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("FILEJOBS_SOFFICE", raising=False)
    monkeypatch.setattr(office_runtime, "LAYER_DIR", tmp_path / "no-layer")
    office_runtime.forget_verified()
    yield tmp
    office_runtime.forget_verified()


def make_layer(tmp_path: Path) -> Path:
    """A layer whose launcher does nothing, with one font."""
    return office_layer(tmp_path, "#!/bin/sh\n", [("Sans.ttf", b"\0" * 10)])


def test_the_layer_is_unpacked_under_tmp_and_soffice_starts_through_the_layers_own_loader(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    program = office_runtime.soffice()
    (home,) = scratch_tmp.iterdir()
    # then soffice.bin of the unpacked tree is started by the tree's loader (its glibc) with
    # the tree's libraries, by the loader's option: nothing soffice starts inherits them
    assert program.argv == (
        str(home / "lib/ld-linux-aarch64.so.1"),
        "--library-path",
        str(home / "lib"),
        str(home / "program/soffice.bin"),
    )
    assert program.version == "LibreOffice 7.4.7"
    assert "LD_LIBRARY_PATH" not in program.environment
    # with a fontconfig file naming the tree's fonts, its cache in soffice's HOME, not the tree
    fonts_conf = Path(program.environment["FONTCONFIG_FILE"])
    conf = fonts_conf.read_text()
    assert f"<dir>{home / 'fonts'}</dir>" in conf
    assert '<cachedir prefix="xdg">fontconfig</cachedir>' in conf
    assert (home / "fonts/Sans.ttf").is_file()
    # and nothing half-made is left beside it
    assert [path.name for path in scratch_tmp.iterdir()] == [home.name]


def test_a_later_process_of_the_environment_reuses_the_unpacked_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    first = office_runtime.soffice()
    office_runtime.forget_verified()  # as a new process would start

    def no_unpacking(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("unpacked again")

    monkeypatch.setattr(tarfile, "open", no_unpacking)
    assert office_runtime.soffice() == first


def test_too_little_tmp_space_is_a_configuration_error_naming_ephemeral_storage(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    manifest = json.loads((layer / "layer.json").read_text())
    manifest["unpacked_bytes"] = 2**60  # more than any disk
    (layer / "layer.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match=r"MiB of /tmp to unpack.*EphemeralStorage"):
        office_runtime.soffice()
    assert list(scratch_tmp.iterdir()) == []


def test_a_broken_archive_leaves_nothing_a_later_process_would_take_for_libreoffice(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    archive = layer / "libreoffice.tar.zst"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(ConfigurationError, match=r"libreoffice.tar.zst is broken .*deploy"):
        office_runtime.soffice()
    assert list(scratch_tmp.iterdir()) == []


def test_an_unreadable_manifest_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    (layer / "layer.json").write_text('{"archive": "libreoffice.tar.zst"}')
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    with pytest.raises(ConfigurationError, match=r"layer.json is unreadable"):
        office_runtime.soffice()


def test_filejobs_soffice_wins_over_the_layer_and_path_is_the_last_resort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(make_layer(tmp_path)))
    monkeypatch.setenv("FILEJOBS_SOFFICE", "/opt/custom/soffice")
    assert office_runtime.soffice().argv == ("/opt/custom/soffice",)
    monkeypatch.delenv("FILEJOBS_SOFFICE")
    monkeypatch.delenv("FILEJOBS_LIBREOFFICE_LAYER")
    # the installed launcher's soffice.bin, run directly (office.py restarts it on a new profile)
    launcher = tmp_path / "program/soffice"
    launcher.parent.mkdir()
    launcher.write_text("#!/bin/sh\n")
    monkeypatch.setattr(shutil, "which", lambda name: str(launcher))
    assert office_runtime.soffice().argv == (str(launcher),)
    (tmp_path / "program/soffice.bin").write_bytes(b"\x7fELF")
    assert office_runtime.soffice().argv == (str(tmp_path / "program/soffice.bin"),)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigurationError, match="soffice is not installed"):
        office_runtime.soffice()


# --- the unpacked tree is run only as the layer built it -----------------------------------------


def _unpacked(tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(make_layer(tmp_path)))
    office_runtime.soffice()
    (home,) = scratch_tmp.iterdir()
    return home


def _tampered_with(home: Path, how: str) -> Path:
    """The tree changed as a compromised decoder could: the loader rewritten in place (size
    and mtime restored), a configuration file added, the loader replaced by another file."""
    loader = home / "lib/ld-linux-aarch64.so.1"
    if how == "rewritten":
        before = loader.stat()
        loader.write_bytes(bytes(byte ^ 1 for byte in loader.read_bytes()))  # same size
        os.utime(loader, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif how == "added":
        (home / "program/evil.xcd").write_text("<oor:data/>")
    else:
        replacement = home / "lib/replacement"
        replacement.write_bytes(loader.read_bytes())
        replacement.replace(loader)
    return loader


@pytest.mark.parametrize("how", ["rewritten", "added", "replaced"])
def test_a_tree_changed_after_it_was_verified_is_unpacked_again_before_soffice_runs(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    home = _unpacked(tmp_path, scratch_tmp, monkeypatch)
    loader = home / "lib/ld-linux-aarch64.so.1"
    original = loader.read_bytes()
    _tampered_with(home, how)
    # when the next conversion asks for soffice in the same process
    office_runtime.soffice()
    # then the tree is the layer's again: the tampered one was removed, nothing else is left
    assert loader.read_bytes() == original
    assert not (home / "program/evil.xcd").exists()
    assert [path.name for path in scratch_tmp.iterdir()] == [home.name]


def test_a_tree_found_tampered_by_a_new_process_is_hashed_and_unpacked_again(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _unpacked(tmp_path, scratch_tmp, monkeypatch)
    loader = home / "lib/ld-linux-aarch64.so.1"
    original = loader.read_bytes()
    _tampered_with(home, "rewritten")
    office_runtime.forget_verified()  # a new process: no stamps of its own, only tree.json
    office_runtime.soffice()
    assert loader.read_bytes() == original


def test_the_sandbox_can_ask_for_every_file_to_be_hashed_again_after_a_crash(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _unpacked(tmp_path, scratch_tmp, monkeypatch)
    assert office_runtime.verify_unpacked(full=True) == []
    _tampered_with(home, "rewritten")
    (problem,) = office_runtime.verify_unpacked(full=True)
    assert "lib/ld-linux-aarch64.so.1: " in problem
    assert not home.exists()  # removed: the next conversion unpacks it again
    office_runtime.soffice()
    assert office_runtime.verify_unpacked(full=True) == []


def test_an_archive_that_unpacks_to_other_files_than_its_list_is_never_run(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    listed = json.loads((layer / "tree.json").read_text())
    listed["files"]["lib/ld-linux-aarch64.so.1"][1] = "0" * 64
    (layer / "tree.json").write_text(json.dumps(listed))
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    with pytest.raises(ConfigurationError, match=r"does not unpack to what tree.json lists"):
        office_runtime.soffice()
    assert list(scratch_tmp.iterdir()) == []


def test_after_the_sandbox_is_recycled_every_file_is_hashed_again_before_the_next_conversion(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _unpacked(tmp_path, scratch_tmp, monkeypatch)
    hashed: list[Path] = []
    sha256 = office_runtime._sha256

    def noting(path: Path) -> str:
        hashed.append(path)
        return sha256(path)

    monkeypatch.setattr(office_runtime, "_sha256", noting)
    # a conversion in a quiet environment checks stamps only
    office_runtime.soffice()
    assert hashed == []
    # after a decoder crashed (the sandbox recycled), the next one hashes every listed file once
    recycling.recycled("a decoder crashed")
    office_runtime.soffice()
    listed = json.loads((tmp_path / "opt/libreoffice/tree.json").read_text())["files"]
    assert sorted(str(path.relative_to(home)) for path in hashed) == sorted(listed)
    hashed.clear()
    office_runtime.soffice()
    assert hashed == []
