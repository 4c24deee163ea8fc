"""LibreOffice layers as /opt holds them (libreoffice/{libreoffice.tar.zst, layer.json, tree.json}),
made by the layer build's own `write_archive` from a small tree: a script where the layer's
loader (`lib/ld-linux-aarch64.so.1`) is, a placeholder `program/soffice.bin`, and the fonts
given. The worker starts `LOADER --library-path LIB program/soffice.bin ARGS...`, so the script
gets those; `hand_over` is a loader script that runs another soffice with ARGS alone. The tests
of the worker's unpacking use them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
layer_build = load_script(ROOT / "infra/layers/libreoffice/debs.py", "libreoffice_debs")


def hand_over(soffice: Path | str, *, before: str = "") -> str:
    """A loader script that drops `--library-path LIB PROGRAM` and runs soffice with the rest,
    after the shell lines `before`."""
    return f'#!/bin/sh\n{before}\nshift 3\nexec {soffice} "$@"\n'


def office_layer(
    folder: Path, loader: str, fonts: Iterable[tuple[str, bytes]], *, version: str = "7.4.7"
) -> Path:
    """The layer's libreoffice/ folder under folder/opt: its tree has `loader` (a script) as the
    loader soffice is started through, each font (name, bytes) in fonts/, and the template of
    fonts.conf."""
    tree = folder / "tree"
    for part in ("program", "lib", "fonts", "fontconfig/conf.d"):
        (tree / part).mkdir(parents=True)
    layer_build.write_fonts_conf_template(tree)
    (tree / layer_build.LOADER).write_text(loader)
    (tree / layer_build.LOADER).chmod(0o755)
    (tree / layer_build.PROGRAM).write_bytes(b"\x7fELF soffice.bin stand-in")
    for name, data in fonts:
        (tree / "fonts" / name).write_bytes(data)
    layer = folder / "opt/libreoffice"
    layer.mkdir(parents=True)
    layer_build.write_archive(tree, layer, version=version)
    return layer
