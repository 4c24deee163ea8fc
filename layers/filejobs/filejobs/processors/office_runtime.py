"""Where LibreOffice's `soffice` is, and the environment it runs with.

- **On Lambda** it comes from the LibreOffice layer (layers/libreoffice): too big for a function's
  250 MB unpacked, the layer holds it as one archive (`/opt/libreoffice/libreoffice.tar.zst`)
  with a manifest (`layer.json`: version, digest, unpacked size). The first conversion in an
  execution environment unpacks it under /tmp (the function's EphemeralStorage), once; every
  later one reuses it. The unpacked tree carries its own libraries (`lib/`, named by
  LD_LIBRARY_PATH in soffice's environment only, never in the worker's) and fonts (`fonts/`,
  with a fontconfig file of its own: Lambda has no /etc/fonts).
- **Locally** it is Debian's (`libreoffice-*-nogui`, installed by `make system-deps`), found on
  PATH.
- FILEJOBS_SOFFICE names a program to run instead of either.

The program run is `oosplash`, the launcher Debian's `soffice` script runs: on a fresh profile
soffice.bin exits asking to be restarted (exit 81), and oosplash restarts it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from filejobs.config import ConfigurationError

# Where Lambda mounts a layer's libreoffice/ folder; FILEJOBS_LIBREOFFICE_LAYER names another.
LAYER_DIR = Path("/opt/libreoffice")
MANIFEST = "layer.json"
MANIFEST_KEYS = ("libreoffice", "archive", "sha256", "unpacked_bytes")
# The layer's fontconfig file, with this mark where the unpacked tree's path goes.
FONTS_CONF_TEMPLATE = "fonts.conf.in"
TREE_MARK = "@LIBREOFFICE_HOME@"
# Room left on /tmp beyond the unpacked tree: the profile, a document, its PDF.
HEADROOM_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class OfficeProgram:
    """soffice's argv prefix and the environment it needs beside the caller's own."""

    argv: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    version: str | None = None  # "LibreOffice 7.4.7.2", where known


def soffice() -> OfficeProgram:
    named = os.environ.get("FILEJOBS_SOFFICE")
    if named:
        return OfficeProgram((named,))
    layer = Path(os.environ.get("FILEJOBS_LIBREOFFICE_LAYER") or LAYER_DIR)
    if (layer / MANIFEST).is_file():
        return unpacked_layer(layer)
    installed = shutil.which("soffice")
    if not installed:
        raise ConfigurationError(
            "LibreOffice's soffice is not installed (make system-deps installs "
            "libreoffice-writer-nogui, -calc-nogui and -impress-nogui)"
        )
    return OfficeProgram((installed,))


@functools.cache
def unpacked_layer(layer: Path, into: Path | None = None) -> OfficeProgram:
    """The layer's LibreOffice, unpacked under /tmp (or `into`) on the first call in this
    execution environment (a later process finds it complete and unpacks nothing)."""
    manifest = _manifest(layer)
    parent = into or Path(tempfile.gettempdir())
    home = parent / f"filejobs-libreoffice-{manifest['sha256'][:16]}"
    if not (home / "program" / "oosplash").is_file():
        _unpack(layer / manifest["archive"], home, needs=int(manifest["unpacked_bytes"]))
    return OfficeProgram(
        (str(home / "program" / "oosplash"),),
        {
            "LD_LIBRARY_PATH": str(home / "lib"),
            "FONTCONFIG_FILE": str(home / "fontconfig" / "fonts.conf"),
        },
        f"LibreOffice {manifest['libreoffice']}",
    )


def _manifest(layer: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((layer / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"{layer / MANIFEST} is unreadable: {error!r}") from error
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ConfigurationError(f"{layer / MANIFEST} is unreadable: it has no {missing}")
    return manifest


def _unpack(archive: Path, home: Path, *, needs: int) -> None:
    """archive into home, whole or not at all: it is unpacked beside home and renamed into
    place once complete, so a process killed half-way (a timeout) leaves nothing a later one
    would take for LibreOffice."""
    free = shutil.disk_usage(home.parent).free
    if free < needs + HEADROOM_BYTES:
        raise ConfigurationError(
            f"LibreOffice needs {(needs + HEADROOM_BYTES) / 2**20:.0f} MiB of /tmp to unpack, "
            f"{free / 2**20:.0f} MiB is free: raise the function's EphemeralStorage"
        )
    partial = Path(tempfile.mkdtemp(prefix=f"{home.name}.partial-", dir=home.parent))
    try:
        _extract(archive, partial)
        _write_fonts_conf(home, partial)
        try:
            partial.rename(home)
        except OSError:  # another process of this environment unpacked it first
            if not (home / "program" / "oosplash").is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _extract(archive: Path, into: Path) -> None:
    try:
        with (
            archive.open("rb") as compressed,
            zstandard.ZstdDecompressor().stream_reader(compressed) as stream,
            tarfile.open(fileobj=stream, mode="r|") as tar,
        ):
            tar.extractall(into, filter="data")  # no member outside, no device, no setuid
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as error:
        raise ConfigurationError(
            f"the LibreOffice layer's {archive.name} is broken ({error}): deploy the layer again"
        ) from error


def _write_fonts_conf(home: Path, unpacked: Path) -> None:
    """fontconfig's file for the tree's fonts and rules, from the layer's template: it names
    where the tree will be (home), which fontconfig needs as an absolute path."""
    folder = unpacked / "fontconfig"
    template = (folder / FONTS_CONF_TEMPLATE).read_text()
    (folder / "fonts.conf").write_text(template.replace(TREE_MARK, str(home)))
