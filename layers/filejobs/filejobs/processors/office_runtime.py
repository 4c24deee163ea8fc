"""Where LibreOffice's `soffice` is, how it is started, and the environment it runs with.

- **On Lambda** it comes from the LibreOffice layer (layers/libreoffice): too big for a function's
  250 MB unpacked, the layer holds it as one archive (`/opt/libreoffice/libreoffice.tar.zst`)
  with a manifest (`layer.json`: version, digest, unpacked size, what to start) and a list of
  every file of the tree with its size and SHA-256 (`tree.json`). The first conversion in an
  execution environment unpacks it under /tmp (the function's EphemeralStorage), once; every
  later one reuses it. The tree is Debian 12's LibreOffice with Debian 12's glibc and that
  glibc's own dynamic loader: soffice.bin is started through the loader
  (`lib/ld-linux-aarch64.so.1 --library-path lib program/soffice.bin`), so it runs on the
  layer's glibc 2.36 and libraries while the worker keeps Lambda's (2.34); nothing soffice
  starts inherits the layer's libraries. Its fonts have a fontconfig file of their own (Lambda
  has no /etc/fonts).
- **Locally** it is Debian's (`libreoffice-*-nogui`, installed by `make system-deps`), found on
  PATH.
- FILEJOBS_SOFFICE names a program to run instead of either.

The unpacked tree is run only as the layer built it. Once unpacked (or found unpacked by an
earlier process of the environment) every file is hashed against tree.json; before each later
conversion every file's size, mtime, ctime and inode are compared with what they were then, and
the tree must hold no other file: a write, a chmod, a replaced or an added file (an .xcd the
configuration would load, a library) changes one of them (ctime cannot be set back). After the
decoder sandbox was recycled (a decoder crashed, broke a limit or timed out: sandbox/recycling.py)
every file is hashed again before the next conversion. A tree that differs is removed and
unpacked again from the read-only layer. `verify_unpacked(full=True)` hashes every file again
on demand.

On a fresh profile soffice.bin exits asking to be restarted (exit 81): the caller restarts it,
as Debian's launcher (oosplash, not in the layer) would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from filejobs.config import LIBREOFFICE_LAYER_DIR, ConfigurationError, OfficeSettings
from filejobs.processors.sandbox import recycling

# Where Lambda mounts a layer's libreoffice/ folder; FILEJOBS_LIBREOFFICE_LAYER names another.
LAYER_DIR = LIBREOFFICE_LAYER_DIR
MANIFEST = "layer.json"
MANIFEST_KEYS = ("libreoffice", "archive", "sha256", "unpacked_bytes", "tree", "loader", "program")
# The layer's fontconfig file, with this mark where the unpacked tree's path goes.
FONTS_CONF_TEMPLATE = "fonts.conf.in"
FONTS_CONF = "fontconfig/fonts.conf"
TREE_MARK = "@LIBREOFFICE_HOME@"
# Room left on /tmp beyond the unpacked tree: the profile, a document, its PDF.
HEADROOM_BYTES = 64 * 1024 * 1024
CHUNK = 1024 * 1024

# A file's identity as stat gives it: size, mtime, ctime, inode. Any write, chmod, utime or
# replacement changes one, and the ctime it sets cannot be set back by the writer.
Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class OfficeProgram:
    """soffice's argv prefix and the environment it needs beside the caller's own."""

    argv: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    version: str | None = None  # "LibreOffice 7.4.7", where known


@dataclass(frozen=True)
class _Tree:
    """An unpacked tree this process verified: its files' stamps then, and how to hash it."""

    expected: Mapping[str, tuple[int, str]]  # tree.json's: path -> (size, sha256)
    stamps: Mapping[str, Stamp]
    recycles: int = 0  # the sandbox's recycling.generation() when it was verified


# home -> the tree found there as verified by this process.
_VERIFIED: dict[Path, _Tree] = {}


def soffice(settings: OfficeSettings | None = None) -> OfficeProgram:
    """The soffice `settings` name (the function's, config.OfficeSettings, unless given)."""
    found = settings or OfficeSettings.from_env()
    if found.soffice:
        return OfficeProgram((found.soffice,))
    layer = found.layer
    if (layer / MANIFEST).is_file():
        return unpacked_layer(layer)
    installed = shutil.which("soffice")
    if not installed:
        raise ConfigurationError(
            "LibreOffice's soffice is not installed (make system-deps installs "
            "libreoffice-writer-nogui, -calc-nogui and -impress-nogui)"
        )
    return OfficeProgram((str(_program_behind(Path(installed))),))


def _program_behind(launcher: Path) -> Path:
    """soffice.bin beside the `soffice` a package installed, started directly as on Lambda: the
    caller does the restart on exit 81 itself, with a new profile path (oosplash, which the
    `soffice` script runs, restarts on the same path, where the sandbox leaves the first run's
    single-instance pipe in the way). The launcher itself when there is no soffice.bin beside it."""
    program = launcher.resolve().with_name("soffice.bin")
    return program if program.is_file() else launcher


def unpacked_layer(layer: Path, into: Path | None = None) -> OfficeProgram:
    """The layer's LibreOffice, unpacked under /tmp (or `into`) on the first call in this
    execution environment and verified against tree.json; every later call checks that the
    tree is still exactly what was verified (cheaply; every file hashed after the sandbox was
    recycled), and unpacks it again when it is not."""
    manifest = _manifest(layer)
    parent = into or Path(tempfile.gettempdir())
    home = parent / f"filejobs-libreoffice-{manifest['sha256'][:16]}"
    if not _still_verified(home):
        expected = _tree_manifest(layer / manifest["tree"])
        if home.exists() and _differences(home, _Tree(expected, {}), full=True):
            _remove(home)  # tampered with, or half-removed: never run
        if not home.exists():
            _unpack(layer / manifest["archive"], home, needs=int(manifest["unpacked_bytes"]))
            if problems := _differences(home, _Tree(expected, {}), full=True):
                _remove(home)
                raise ConfigurationError(
                    f"the LibreOffice layer's {manifest['archive']} does not unpack to what "
                    f"{manifest['tree']} lists ({problems[0]}): deploy the layer again"
                )
        _VERIFIED[home] = _Tree(expected, _stamps(home), recycling.generation())
    return OfficeProgram(
        (
            str(home / manifest["loader"]),
            "--library-path",
            str(home / "lib"),
            str(home / manifest["program"]),
        ),
        {"FONTCONFIG_FILE": str(home / FONTS_CONF)},
        f"LibreOffice {manifest['libreoffice']}",
    )


def _still_verified(home: Path) -> bool:
    """Whether this process verified the tree at home and it has not changed since: by its
    stamps, or by every file's digest once the sandbox was recycled (then verified anew)."""
    known = _VERIFIED.pop(home, None)
    if known is None:
        return False
    recycles = recycling.generation()
    full = known.recycles != recycles
    if _differences(home, known, full=full):
        return False
    _VERIFIED[home] = _Tree(known.expected, _stamps(home), recycles) if full else known
    return True


def verify_unpacked(*, full: bool = True) -> list[str]:
    """Every tree this process unpacked or verified, checked again (every file hashed, with
    full; else by its stamps); one that differs is removed, to be unpacked again from the layer
    by the next conversion. What differed, one line per tree: empty when nothing did."""
    found = []
    for home, tree in list(_VERIFIED.items()):
        if problems := _differences(home, tree, full=full):
            del _VERIFIED[home]
            _remove(home)
            found.append(f"{home}: {problems[0]} (and {len(problems) - 1} more)")
    return found


def _differences(home: Path, tree: _Tree, *, full: bool) -> list[str]:
    """How the tree under home differs from what it must be: the files tree.json lists and
    fonts.conf written for home, nothing else; then, with full, their sizes and digests, else
    each file's stamp as this process recorded it."""
    entries = _entries(home)
    present, wanted = set(entries), {*tree.expected, FONTS_CONF}
    problems = [f"{path}: not the layer's" for path in sorted(present - wanted)]
    problems += [f"{path}: missing" for path in sorted(wanted - present)]
    if problems:
        return problems
    if full:
        return _content_differences(home, tree.expected)
    return [
        f"{path}: changed since it was verified"
        for path, stamp in sorted(tree.stamps.items())
        if _stamp(entries[path]) != stamp
    ]


def _content_differences(home: Path, expected: Mapping[str, tuple[int, str]]) -> list[str]:
    problems = [
        f"{path}: not the bytes the layer holds"
        for path, (size, digest) in sorted(expected.items())
        if (home / path).lstat().st_size != size or _sha256(home / path) != digest
    ]
    fonts_conf = (home / FONTS_CONF_TEMPLATE_PATH).read_text().replace(TREE_MARK, str(home))
    if not problems and (home / FONTS_CONF).read_text() != fonts_conf:
        problems.append(f"{FONTS_CONF}: not written for this tree")
    return problems


def forget_verified() -> None:
    """Forgets which trees this process verified, as a new process starts (tests, benches)."""
    _VERIFIED.clear()


# The template's place in the tree: fonts.conf is written from it, for the tree's own path.
FONTS_CONF_TEMPLATE_PATH = f"fontconfig/{FONTS_CONF_TEMPLATE}"


def _entries(home: Path) -> dict[str, os.stat_result]:
    """Every entry under home that is not a directory (a link to one counts as an entry), by
    its path relative to home, with its lstat; nothing if home is missing. A folder that cannot
    be listed lists nothing: its files count as missing. (os.scandir and strings: pathlib's
    objects cost ten times the system calls for the tree's ~1,900 files.)"""
    found: dict[str, os.stat_result] = {}
    pending = [("", str(home))]
    while pending:
        prefix, folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((f"{prefix}{entry.name}/", entry.path))
                    else:
                        found[prefix + entry.name] = entry.stat(follow_symlinks=False)
        except OSError:
            continue
    return found


def _stamp(info: os.stat_result) -> Stamp:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def _stamps(home: Path) -> dict[str, Stamp]:
    return {path: _stamp(info) for path, info in _entries(home).items()}


def _sha256(path: Path) -> str:
    if path.is_symlink() or not path.is_file():
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _remove(home: Path) -> None:
    """home out of the way at once (renamed), then deleted: a process starting soffice meanwhile
    finds no tree rather than half of one."""
    doomed = Path(tempfile.mkdtemp(prefix=f"{home.name}.removed-", dir=home.parent))
    with contextlib.suppress(FileNotFoundError):
        home.rename(doomed / "tree")
    for folder, directories, _files_here in os.walk(doomed):
        for name in directories:  # a tree made unwritable must still go
            with_write = Path(folder) / name
            if not with_write.is_symlink():
                with_write.chmod(0o700)
    shutil.rmtree(doomed, ignore_errors=True)


def _manifest(layer: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((layer / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"{layer / MANIFEST} is unreadable: {error!r}") from error
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ConfigurationError(f"{layer / MANIFEST} is unreadable: it has no {missing}")
    return manifest


def _tree_manifest(path: Path) -> dict[str, tuple[int, str]]:
    try:
        files = json.loads(path.read_text())["files"]
        return {name: (int(size), str(digest)) for name, (size, digest) in files.items()}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigurationError(f"{path} is unreadable: {error!r}") from error


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
            if not home.is_dir():
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
    template = (unpacked / FONTS_CONF_TEMPLATE_PATH).read_text()
    (unpacked / FONTS_CONF).write_text(template.replace(TREE_MARK, str(home)))
