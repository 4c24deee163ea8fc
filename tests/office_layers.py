"""LibreOffice layers as /opt holds them (libreoffice/{libreoffice.tar.zst, layer.json}), made
by the layer build's own `write_archive` from a small tree: a launcher script where the layer's
`program/oosplash` is, and the fonts given. The tests of the worker's unpacking use them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
layer_build = load_script(ROOT / "layers/libreoffice/debs.py", "libreoffice_debs")


def office_layer(
    folder: Path, launcher: str, fonts: Iterable[tuple[str, bytes]], *, version: str = "7.0.4"
) -> Path:
    """The layer's libreoffice/ folder under folder/opt: its tree has `launcher` as the program
    soffice runs, each font (name, bytes) in fonts/, and the template of fonts.conf."""
    tree = folder / "tree"
    for part in ("program", "lib", "fonts", "fontconfig/conf.d"):
        (tree / part).mkdir(parents=True)
    layer_build.write_fonts_conf_template(tree)
    (tree / "program/oosplash").write_text(launcher)
    (tree / "program/oosplash").chmod(0o755)
    for name, data in fonts:
        (tree / "fonts" / name).write_bytes(data)
    layer = folder / "opt/libreoffice"
    layer.mkdir(parents=True)
    layer_build.write_archive(tree, layer, version=version)
    return layer
