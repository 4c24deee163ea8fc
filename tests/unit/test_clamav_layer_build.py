"""The ClamAV layer's build (layers/clamav/debs.py): pinned packages, verified downloads, and the
two checks that keep a binary from another distribution from breaking on Lambda (every library
it loads is shipped; nothing needs a newer glibc than the runtime's).

The ELF readers run on this machine's own Debian clamscan and its libraries (x86_64): the
format is the same as the layer's arm64 files, and `make template` runs the built arm64 layer
under qemu.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import shutil
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST_CLAMSCAN = Path("/usr/bin/clamscan")
needs_host_clamscan = pytest.mark.skipif(
    not HOST_CLAMSCAN.exists(), reason="clamscan is not installed (make system-deps)"
)


def _load_debs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clamav_debs", ROOT / "layers/clamav/debs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


debs = _load_debs()


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("1.0~rc1", "1.0"),
        ("1.0", "1.0-1"),
        ("1.0", "1.0+b1"),
        ("2.36-9+deb12u7", "2.36-9+deb12u14"),
        ("3.0.22-1~deb12u2", "3.0.22-1"),
        ("9.9", "10.2.1-6"),
        ("2.0", "1:1.2"),
        ("1.0", "1.0a"),
    ],
)
def test_versions_follow_dpkgs_order(older: str, newer: str) -> None:
    assert debs.compare_versions(older, newer) < 0
    assert debs.compare_versions(newer, older) > 0
    assert debs.compare_versions(newer, newer) == 0


def test_packages_txt_names_a_release_per_package_and_refuses_an_unknown_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # given a package list with a default-release package, a pinned one and a comment
    listing = tmp_path / "packages.txt"
    listing.write_text("# comment\nclamav\nlibxml2@bullseye  # why\n")
    monkeypatch.setattr(debs, "PACKAGE_LIST", listing)
    # then each package maps to its release
    assert debs.wanted_packages() == {"clamav": "bookworm", "libxml2": "bullseye"}
    # and a release the script does not know is refused by name
    listing.write_text("libxml2@sid\n")
    with pytest.raises(debs.BuildError, match="unknown Debian release in 'libxml2@sid'"):
        debs.wanted_packages()


def test_the_lock_pins_every_listed_package_by_sha256() -> None:
    locked = {package.name: package for package in debs.locked_packages()}
    assert set(locked) == set(debs.wanted_packages())
    for package in locked.values():
        assert len(package.sha256) == 64
        assert package.url.startswith("http://deb.debian.org/")
        assert package.url.endswith("_arm64.deb")


def _deb(files: dict[str, bytes]) -> bytes:
    """A Debian package: an `ar` archive of debian-binary, control.tar.xz and data.tar.xz."""

    def tar(members: dict[str, bytes]) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(f"./{name}")
                info.size, info.mode = len(data), 0o755
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    members = {
        "debian-binary": b"2.0\n",
        "control.tar.xz": tar({"control": b"Package: hello\n"}),
        "data.tar.xz": tar(files),
    }
    out = bytearray(b"!<arch>\n")
    for name, data in members.items():
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        out += data + (b"\n" if len(data) % 2 else b"")
    return bytes(out)


def test_a_package_is_unpacked_without_dpkg(tmp_path: Path) -> None:
    deb = tmp_path / "hello.deb"
    deb.write_bytes(_deb({"usr/bin/hello": b"#!/bin/sh\n", "usr/share/doc/hello/README": b"hi"}))
    debs.unpack(deb, tmp_path / "root")
    assert (tmp_path / "root/usr/bin/hello").read_bytes() == b"#!/bin/sh\n"
    assert (tmp_path / "root/usr/share/doc/hello/README").read_bytes() == b"hi"


def test_a_file_that_is_not_a_package_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.deb"
    bogus.write_bytes(b"<html>404</html>")
    with pytest.raises(debs.BuildError, match=r"bogus.deb is not a Debian package"):
        debs.unpack(bogus, tmp_path / "root")


def test_a_download_is_kept_only_when_its_digest_matches_the_lock(tmp_path: Path) -> None:
    # given a package served from a local file, and the cache empty
    served = tmp_path / "served.deb"
    served.write_bytes(_deb({"usr/bin/hello": b"x"}))
    digest = hashlib.sha256(served.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    cache.mkdir()
    tampered = debs.LockedPackage("hello", "1.0-1", served.as_uri(), "0" * 64)
    # when its digest differs from the lock, then the build stops and keeps nothing
    with pytest.raises(debs.BuildError, match="SHA-256"):
        debs.download(tampered, cache)
    assert list(cache.iterdir()) == []
    # when it matches, then it is cached, and the cached copy is used while it still matches
    good = debs.LockedPackage("hello", "1.0-1", served.as_uri(), digest)
    cached = debs.download(good, cache)
    served.unlink()
    assert debs.download(good, cache) == cached


@needs_host_clamscan
def test_the_elf_reader_lists_what_clamscan_loads_and_the_glibc_it_needs() -> None:
    assert {"libclamav.so.12", "libc.so.6"} <= set(debs.needed(HOST_CLAMSCAN))
    versions = debs.glibc_versions(HOST_CLAMSCAN)
    assert (2, 2, 5) in versions or (2, 17) in versions  # the base version of x86_64 / arm64
    assert max(versions) <= (2, 36)  # this machine's glibc: it runs here


def _sysroot_with_host_clamscan(tmp_path: Path) -> Path:
    """clamscan and the libraries it loads, laid out as the layer's Debian packages have them."""
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    shutil.copy(HOST_CLAMSCAN, root / "usr/bin/clamscan")
    libraries = root / debs.LIBRARY_DIRS[0]
    libraries.mkdir(parents=True)
    for host_dir in (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu")):
        for library in host_dir.glob("lib*.so*"):
            if not (libraries / library.name).exists():
                (libraries / library.name).symlink_to(library)
    return root


@needs_host_clamscan
def test_the_layer_takes_exactly_the_library_closure_and_names_a_missing_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given clamscan beside every library of this machine (whose loader has its x86_64 name)
    root = _sysroot_with_host_clamscan(tmp_path)
    glibc = debs.GLIBC_LIBRARIES | {"ld-linux-x86-64.so.2"}
    monkeypatch.setattr(debs, "GLIBC_LIBRARIES", glibc)
    # when its closure is taken, then libclamav and its own dependencies are in, glibc is not
    closure = debs.library_closure([root / "usr/bin/clamscan"], root)
    assert {"libclamav.so.12", "libxml2.so.2", "libpcre2-8.so.0"} <= set(closure)
    assert not set(closure) & debs.GLIBC_LIBRARIES
    assert "libcurl.so.4" not in closure  # freshclam's, not clamscan's
    # when a library it loads is missing, then the build says which one
    (root / debs.LIBRARY_DIRS[0] / "libmspack.so.0").unlink()
    with pytest.raises(debs.BuildError, match=r"libmspack.so.0 is needed but no locked package"):
        debs.library_closure([root / "usr/bin/clamscan"], root)


@needs_host_clamscan
def test_a_file_needing_a_newer_glibc_than_lambdas_fails_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a runtime older than what this machine's clamscan was built against
    monkeypatch.setattr(debs, "RUNTIME_GLIBC", (2, 2))
    with pytest.raises(debs.BuildError, match=r"clamscan needs GLIBC_2\.\d+; Lambda's runtime"):
        debs.check_glibc(HOST_CLAMSCAN)
    # and with Lambda's glibc it passes (Debian 12 builds ClamAV against glibc <= 2.34)
    monkeypatch.setattr(debs, "RUNTIME_GLIBC", (2, 34))
    debs.check_glibc(HOST_CLAMSCAN)
