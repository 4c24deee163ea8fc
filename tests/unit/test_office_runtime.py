"""Where document_preview finds LibreOffice (filejobs.processors.office_runtime): on Lambda, the
LibreOffice layer's archive unpacked under /tmp once per execution environment, whole or not at
all; locally, Debian's soffice on PATH; FILEJOBS_SOFFICE before either.

The layers here are made by the layer build's own write_archive, from small trees."""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from filejobs.config import ConfigurationError
from filejobs.processors import office_runtime
from tests.office_layers import office_layer


@pytest.fixture(autouse=True)
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """/tmp of the execution environment, and no LibreOffice found any other way."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("FILEJOBS_SOFFICE", raising=False)
    monkeypatch.setattr(office_runtime, "LAYER_DIR", tmp_path / "no-layer")
    office_runtime.unpacked_layer.cache_clear()
    yield tmp
    office_runtime.unpacked_layer.cache_clear()


def make_layer(tmp_path: Path) -> Path:
    """A layer whose launcher does nothing, with one font."""
    return office_layer(tmp_path, "#!/bin/sh\n", [("Sans.ttf", b"\0" * 10)])


def test_the_layer_is_unpacked_under_tmp_and_soffice_runs_with_its_libraries_and_fonts(
    tmp_path: Path, scratch_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    program = office_runtime.soffice()
    (home,) = scratch_tmp.iterdir()
    # then the launcher of the unpacked tree runs, named with its version
    assert program.argv == (str(home / "program/oosplash"),)
    assert program.version == "LibreOffice 7.0.4"
    # with the tree's libraries and a fontconfig file naming the tree's fonts, nothing else's
    assert program.environment["LD_LIBRARY_PATH"] == str(home / "lib")
    fonts_conf = Path(program.environment["FONTCONFIG_FILE"])
    conf = fonts_conf.read_text()
    assert f"<dir>{home / 'fonts'}</dir>" in conf
    assert f"<cachedir>{home / 'fontcache'}</cachedir>" in conf
    assert (home / "fonts/Sans.ttf").is_file()
    # and nothing half-made is left beside it
    assert [path.name for path in scratch_tmp.iterdir()] == [home.name]


def test_a_later_process_of_the_environment_reuses_the_unpacked_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = make_layer(tmp_path)
    monkeypatch.setenv("FILEJOBS_LIBREOFFICE_LAYER", str(layer))
    first = office_runtime.soffice()
    office_runtime.unpacked_layer.cache_clear()  # as a new process would start

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
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    assert office_runtime.soffice().argv == ("/usr/bin/soffice",)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigurationError, match="soffice is not installed"):
        office_runtime.soffice()
