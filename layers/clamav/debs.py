"""ClamAV for Lambda from Debian's arm64 packages, pinned by SHA-256: no container, no compiler.

Lambda's python3.13 runtime runs on Amazon Linux 2023 (glibc 2.34) and ships no ClamAV. Debian
12 builds ClamAV against glibc <= 2.34, so its arm64 binaries run there once their libraries come
along. This script:

  lock     resolves the packages of `packages.txt` to exact versions, URLs and SHA-256 digests
           from the Debian indexes (security updates first) and writes `packages.lock`;
  install  downloads the locked packages (verifying each digest), unpacks them without dpkg, and
           copies `clamscan` into DEST/clamav/bin and exactly the libraries it loads (its
           DT_NEEDED closure) into DEST/clamav/lib;
  smoke    runs a built layer's arm64 clamscan under qemu-user on this machine, against a
           glibc from the locked `libc6` (used for nothing else), and checks that it finds EICAR
           with a signature written on the spot and passes a clean file.

`install` fails the build when a library is missing from the packages or any file needs a glibc
newer than Lambda's: the two ways a binary copied from another distribution breaks at run time.
glibc itself is never copied: it must match the runtime's dynamic loader.

The scanner runs the copied clamscan with LD_LIBRARY_PATH=/opt/clamav/lib (engines.py), so these
libraries never shadow the runtime's own for Python.

    python3.13 debs.py lock
    python3.13 debs.py install --dest "$ARTIFACTS_DIR"
    python3.13 debs.py smoke --layer BUILD_DIR/ClamAvLayer
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE_LIST = HERE / "packages.txt"
LOCK_FILE = HERE / "packages.lock"
ARCH = "arm64"
# Where Debian puts arm64 libraries (/lib for the packages not yet moved under /usr).
LIBRARY_DIRS = ("usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu")
PROGRAMS = ("usr/bin/clamscan",)
# The indexes `lock` reads for each Debian release, most preferred first: a security update wins
# over the point release. Packages come from bookworm unless packages.txt says `name@bullseye`.
RELEASES = {
    release: (
        ("http://deb.debian.org/debian-security", f"{release}-security"),
        ("http://deb.debian.org/debian", f"{release}-updates"),
        ("http://deb.debian.org/debian", release),
    )
    for release in ("bookworm", "bullseye")
}
DEFAULT_RELEASE = "bookworm"
# Amazon Linux 2023, the OS of Lambda's python3.13 runtime.
RUNTIME_GLIBC = (2, 34)
# Provided by the runtime's glibc; never copied (they must match its dynamic loader).
GLIBC_LIBRARIES = frozenset(
    {
        "ld-linux-aarch64.so.1",
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libresolv.so.2",
    }
)
# Locked for the smoke test's sysroot only: install never copies glibc into the layer.
SYSROOT_PACKAGE = "libc6"
QEMU = "qemu-aarch64-static"
EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str
    url: str
    sha256: str

    def line(self) -> str:
        return f"{self.name}\t{self.version}\t{self.url}\t{self.sha256}"

    @classmethod
    def parse(cls, line: str) -> LockedPackage:
        name, version, url, sha256 = line.split("\t")
        return cls(name, version, url, sha256)


class BuildError(Exception):
    """The layer cannot be built as locked (a digest, a missing library, a too-new glibc)."""


# --- lock ----------------------------------------------------------------------------------------


def wanted_packages() -> dict[str, str]:
    """package -> Debian release, from packages.txt (`name` or `name@release`)."""
    wanted: dict[str, str] = {}
    for line in PACKAGE_LIST.read_text().splitlines():
        entry = line.split("#")[0].strip()
        if entry:
            name, _, release = entry.partition("@")
            if (release or DEFAULT_RELEASE) not in RELEASES:
                raise BuildError(f"packages.txt: unknown Debian release in {entry!r}")
            wanted[name] = release or DEFAULT_RELEASE
    return wanted


def index_stanzas(mirror: str, suite: str) -> Iterator[dict[str, str]]:
    url = f"{mirror}/dists/{suite}/main/binary-{ARCH}/Packages.xz"
    # Plain HTTP is how Debian mirrors serve; what is installed is checked by its SHA-256.
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310
        text = lzma.decompress(response.read()).decode()
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ": " in line:
                key, value = line.split(": ", 1)
                fields[key] = value
        if "Package" in fields:
            yield fields


def lock() -> list[LockedPackage]:
    """The newest downloadable version of each wanted package across its release's indexes."""
    wanted = wanted_packages()
    found: dict[str, LockedPackage] = {}
    for release in sorted(set(wanted.values())):
        for mirror, suite in RELEASES[release]:
            for stanza in index_stanzas(mirror, suite):
                name, version = stanza["Package"], stanza["Version"]
                if wanted.get(name) != release:
                    continue
                if name in found and compare_versions(version, found[name].version) <= 0:
                    continue
                url = f"{mirror}/{stanza['Filename']}"
                # An index can outlive its pool (bullseye-security after its LTS ended): a
                # package only counts where it can be downloaded.
                if _downloadable(url):
                    found[name] = LockedPackage(name, version, url, stanza["SHA256"])
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise BuildError(f"not downloadable from the Debian indexes for {ARCH}: {missing}")
    return [found[name] for name in sorted(found)]


def compare_versions(left: str, right: str) -> int:
    """dpkg's version order: <0, 0 or >0 as left is older than, equal to or newer than right."""
    for a, b in zip(_version_parts(left), _version_parts(right), strict=True):
        if a != b:
            return _compare_part(a, b)
    return 0


def _version_parts(version: str) -> tuple[str, str, str]:
    epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
    return epoch or "0", upstream, revision


def _compare_part(a: str, b: str) -> int:
    """Alternating non-digit and digit runs; in text `~` sorts before anything, even the end."""
    while a or b:
        a_text, a = _split_run(a, digits=False)
        b_text, b = _split_run(b, digits=False)
        for at in range(max(len(a_text), len(b_text))):
            x = _char_order(a_text[at]) if at < len(a_text) else 0
            y = _char_order(b_text[at]) if at < len(b_text) else 0
            if x != y:
                return x - y
        a_number, a = _split_run(a, digits=True)
        b_number, b = _split_run(b, digits=True)
        if int(a_number or 0) != int(b_number or 0):
            return int(a_number or 0) - int(b_number or 0)
    return 0


def _split_run(text: str, *, digits: bool) -> tuple[str, str]:
    end = 0
    while end < len(text) and text[end].isdigit() == digits:
        end += 1
    return text[:end], text[end:]


def _char_order(char: str) -> int:
    if char == "~":
        return -1
    return ord(char) if char.isalpha() else ord(char) + 256


def _downloadable(url: str) -> bool:
    request = urllib.request.Request(url, method="HEAD")  # noqa: S310 (Debian's mirror)
    try:
        with urllib.request.urlopen(request, timeout=30):  # noqa: S310
            return True
    except urllib.error.HTTPError:
        return False


# --- install -------------------------------------------------------------------------------------


def locked_packages() -> list[LockedPackage]:
    lines = LOCK_FILE.read_text().splitlines()
    return [LockedPackage.parse(line) for line in lines if line and not line.startswith("#")]


def download(package: LockedPackage, cache: Path) -> Path:
    """The package file, from the cache when its digest matches, else from the mirror."""
    target = cache / f"{package.name}_{package.version.replace(':', '%3a')}_{ARCH}.deb"
    if target.is_file() and _sha256(target) == package.sha256:
        return target
    partial = target.with_suffix(".part")
    try:
        with (
            urllib.request.urlopen(package.url, timeout=120) as response,  # noqa: S310
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(response, out, CHUNK)
    except urllib.error.URLError as error:
        raise BuildError(f"{package.url}: {error}; run `debs.py lock` if it moved") from error
    digest = _sha256(partial)
    if digest != package.sha256:
        partial.unlink()
        raise BuildError(f"{package.url}: SHA-256 {digest}, the lock says {package.sha256}")
    partial.replace(target)
    return target


def unpack(deb: Path, root: Path) -> None:
    """Extracts a .deb's data archive (an `ar` archive holding data.tar.*) under root."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise BuildError(f"{deb.name} is not a Debian package")
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = data[offset + 60 : offset + 60 + size]
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as archive:
                archive.extractall(root, filter="data")
            return
        offset += 60 + size + (size % 2)
    raise BuildError(f"{deb.name} has no data archive")


def install(dest: Path, cache: Path) -> list[str]:
    """Copies clamscan and its library closure under dest/clamav; returns what it copied."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clamav-debs-") as scratch:
        root = Path(scratch)
        for package in locked_packages():
            if package.name != SYSROOT_PACKAGE:
                unpack(download(package, cache), root)
        bin_dir, lib_dir = dest / "clamav" / "bin", dest / "clamav" / "lib"
        bin_dir.mkdir(parents=True, exist_ok=True)
        lib_dir.mkdir(parents=True, exist_ok=True)
        copied: list[str] = []
        for program in PROGRAMS:
            source = root / program
            check_glibc(source)
            shutil.copy2(source, bin_dir / source.name)
            copied.append(f"bin/{source.name}")
        for soname, path in sorted(library_closure([root / p for p in PROGRAMS], root).items()):
            check_glibc(path)
            # Under its soname, the name the loader looks for (the packages' symlinks dropped).
            shutil.copy2(path.resolve(), lib_dir / soname)
            copied.append(f"lib/{soname}")
    return copied


def library_closure(programs: list[Path], root: Path) -> dict[str, Path]:
    """soname -> file of every library the programs load, transitively, except glibc's."""
    found: dict[str, Path] = {}
    pending = [soname for program in programs for soname in needed(program)]
    while pending:
        soname = pending.pop()
        if soname in found or soname in GLIBC_LIBRARIES:
            continue
        path = next((root / d / soname for d in LIBRARY_DIRS if (root / d / soname).exists()), None)
        if path is None:
            raise BuildError(f"{soname} is needed but no locked package provides it")
        found[soname] = path
        pending.extend(needed(path.resolve()))
    return found


def smoke(layer: Path, cache: Path) -> str:
    """Runs the layer's clamscan under qemu: EICAR must be found, a clean file must pass."""
    if shutil.which(QEMU) is None:
        raise BuildError(f"{QEMU} is not installed (apt-get install qemu-user-static)")
    clamscan = layer / "clamav" / "bin" / "clamscan"
    libc = next(p for p in locked_packages() if p.name == SYSROOT_PACKAGE)
    with tempfile.TemporaryDirectory(prefix="clamav-smoke-") as scratch:
        work = Path(scratch)
        sysroot, database = work / "sysroot", work / "db"
        database.mkdir()
        unpack(download(libc, cache), sysroot)
        (work / "eicar.com").write_bytes(EICAR)
        (work / "clean.txt").write_text("nothing to see here\n")
        digest = hashlib.md5(EICAR).hexdigest()  # noqa: S324 (ClamAV .hdb signatures are MD5)
        (database / "smoke.hdb").write_text(f"{digest}:{len(EICAR)}:Smoke.EICAR\n")
        run = subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
            [QEMU, "-L", str(sysroot), str(clamscan), "--no-summary", "--stdout",
             f"--database={database}", str(work / "eicar.com"), str(work / "clean.txt")],
            env={"LD_LIBRARY_PATH": str(clamscan.parent.parent / "lib"), "PATH": os.defpath},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    expected = {"eicar.com: Smoke.EICAR.UNOFFICIAL FOUND", "clean.txt: OK"}
    seen = {line.replace(f"{work}/", "") for line in run.stdout.splitlines()}
    if run.returncode != 1 or seen != expected:
        raise BuildError(f"clamscan under qemu: exit {run.returncode}, {run.stdout}{run.stderr}")
    return "; ".join(sorted(seen))


def check_glibc(path: Path) -> None:
    newest = max(glibc_versions(path.resolve()), default=(0, 0))
    if newest > RUNTIME_GLIBC:
        raise BuildError(
            f"{path.name} needs GLIBC_{'.'.join(map(str, newest))}; Lambda's runtime has "
            f"{'.'.join(map(str, RUNTIME_GLIBC))}"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --- ELF: the two facts this needs, read from the section headers --------------------------------

SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NEEDED = 1


@dataclass(frozen=True)
class _Section:
    kind: int
    offset: int
    size: int
    link: int


def _sections(data: bytes) -> list[_Section]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BuildError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for n in range(shnum):
        base = shoff + n * shentsize
        _, kind, _, _, offset, size, link = struct.unpack_from("<IIQQQQI", data, base)
        sections.append(_Section(kind, offset, size, link))
    return sections


def _string(data: bytes, table: _Section, at: int) -> str:
    start = table.offset + at
    return data[start : data.index(b"\0", start)].decode()


def needed(path: Path) -> list[str]:
    """The DT_NEEDED entries of an ELF file: the libraries the loader maps for it."""
    data = path.read_bytes()
    sections = _sections(data)
    names = []
    for section in sections:
        if section.kind != SHT_DYNAMIC:
            continue
        strings = sections[section.link]
        for at in range(section.offset, section.offset + section.size, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == DT_NEEDED:
                names.append(_string(data, strings, value))
    return names


def glibc_versions(path: Path) -> set[tuple[int, ...]]:
    """The GLIBC_x.y symbol versions an ELF file requires (its .gnu.version_r entries)."""
    data = path.read_bytes()
    sections = _sections(data)
    versions: set[tuple[int, ...]] = set()
    for section in sections:
        if section.kind != SHT_GNU_VERNEED:
            continue
        strings = sections[section.link]
        entry = section.offset
        while True:
            _, count, _, aux, following = struct.unpack_from("<HHIII", data, entry)
            item = entry + aux
            for _ in range(count):
                _, _, _, name, next_aux = struct.unpack_from("<IHHII", data, item)
                version = _string(data, strings, name)
                if version.startswith("GLIBC_") and version[6:7].isdigit():
                    versions.add(tuple(int(part) for part in version[6:].split(".")))
                item += next_aux
            if not following:
                break
            entry += following
    return versions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("lock", help="resolve packages.txt into packages.lock")
    install_command = commands.add_parser("install", help="build the layer into DEST")
    install_command.add_argument("--dest", type=Path, required=True)
    smoke_command = commands.add_parser("smoke", help="run a built layer's clamscan under qemu")
    smoke_command.add_argument("--layer", type=Path, required=True)
    for command in (install_command, smoke_command):
        command.add_argument(
            "--cache",
            type=Path,
            default=Path(os.environ.get("CLAMAV_DEB_CACHE", Path.home() / ".cache/filejobs/debs")),
            help="where downloaded packages are kept between builds (verified on every use)",
        )
    arguments = parser.parse_args()
    try:
        if arguments.command == "lock":
            header = "# package\tversion\turl\tsha256 (written by `debs.py lock`; do not edit)"
            lines = [header, *(package.line() for package in lock())]
            LOCK_FILE.write_text("\n".join(lines) + "\n")
            print(f"locked {len(lines) - 1} packages in {LOCK_FILE.name}")
        elif arguments.command == "install":
            copied = install(arguments.dest, arguments.cache)
            print(f"clamav layer: {', '.join(copied)}")
        else:
            outcome = smoke(arguments.layer, arguments.cache)
            print(f"clamav layer smoke test (arm64 under qemu): {outcome}")
    except BuildError as error:
        print(f"debs.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
