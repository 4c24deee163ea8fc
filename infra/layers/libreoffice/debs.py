"""LibreOffice for Lambda from Debian's arm64 packages, pinned by SHA-256: no container, no
compiler. document_preview converts office documents to PDF with it (headless soffice).

Debian 12's LibreOffice (7.4, security-supported) needs glibc 2.35/2.36; Lambda's python3.13
runtime (Amazon Linux 2023) has 2.34. So the layer carries Debian 12's own glibc with its own
dynamic loader (lib/ld-linux-aarch64.so.1, libc.so.6, libm.so.6 ...) and soffice.bin is started
through that loader, `lib/ld-linux-aarch64.so.1 --library-path lib program/soffice.bin ...`:
the whole soffice process runs on glibc 2.36 and on the layer's libraries alone, while the
Python worker keeps Lambda's (--library-path is the loader's own option, not LD_LIBRARY_PATH:
nothing soffice starts inherits it). The helper programs LibreOffice could exec (oosplash,
xpdfimport, javaldx...) are left out: started by the runtime's loader they would meet a glibc
too old for them, and a conversion runs none of them.

Headless LibreOffice with the libraries it loads and a set of fonts is about 350 MB unpacked:
more than Lambda's 250 MB for a function and all its layers. So the layer ships it compressed,
as one archive (libreoffice/libreoffice.tar.zst, with libreoffice/layer.json saying its version,
digest and unpacked size), and the document worker unpacks it to /tmp on its first conversion
in an execution environment (filejobs.processors.office_runtime).

  lock     resolves packages.txt (roots, their dependencies, exclusions) to exact versions,
           URLs and SHA-256 digests from Debian 12's signed indexes and writes packages.lock;
  install  downloads and verifies the locked packages, unpacks them without dpkg, and archives
           LibreOffice's own tree (/usr/lib/libreoffice, its links into /etc resolved), the
           libraries its files load (their DT_NEEDED closure, glibc and its loader included,
           every file checked against the bundled glibc), the fonts and fontconfig's aliases
           into DEST/libreoffice, with a manifest of every file (tree.json: size, SHA-256) the
           worker checks the unpacked tree against;
  smoke    unpacks a built layer's archive as the worker does and converts a DOCX, a
           spreadsheet and a presentation to PDF with its arm64 soffice under qemu-user on
           this machine, started as the worker starts it: through the layer's own loader.

All three read and trust Debian's archive as debian_packages.py (beside this folder) says:
HTTPS only, each suite's Release signed by Debian's archive keyring, each .deb by the SHA-256 of
both packages.lock and the signed index. packages.txt and packages.lock are in layers/libreoffice,
beside what the stack ships; this builder is in infra/layers/libreoffice, out of that tree.

    python3.13 infra/layers/libreoffice/debs.py lock
    python3.13 infra/layers/libreoffice/debs.py install --dest "$ARTIFACTS_DIR"
    python3.13 infra/layers/libreoffice/debs.py smoke --layer BUILD_DIR/LibreOfficeLayer
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # debian_packages.py, shared with the ClamAV layer
# What the layer is built from lives with what ships (layers/libreoffice), this builder in infra/.
LISTS = HERE.parents[2] / "layers" / "libreoffice"

import debian_packages as debian  # noqa: E402
from debian_packages import QEMU, SYSROOT_PACKAGE, Archive, BuildError, unpack  # noqa: E402

PACKAGES = debian.PackageList(
    LISTS / "packages.txt", LISTS / "packages.lock", default_release="bookworm"
)
# LibreOffice's own tree, as Debian installs it; it becomes the archive's root.
INSTALL_DIR = "usr/lib/libreoffice"
# The bundled glibc's dynamic loader and the program the worker starts through it, in the tree.
LOADER = "lib/ld-linux-aarch64.so.1"
PROGRAM = "program/soffice.bin"
# What the layer leaves out of LibreOffice's program folder, each for a reason:
# - the network clients among its modules: the WebDAV/HTTP(S) and FTP content providers (the
#   way a document's linked image or file at http://, https://, webdav:// or ftp:// would be
#   fetched), LanguageTool's client (grammar checking on a server), the LDAP configuration
#   backend and the mailer. Without them LibreOffice has no provider for those URLs at all.
#   (libcurl, LDAP, Kerberos, avahi, D-Bus and gpgme stay in lib/: libmergedlo.so, the core,
#   links libcurl, gpgme and dconf, libsdlo.so, Impress, links avahi, librdf links libcurl, and
#   a library the loader cannot find stops soffice from starting at all.)
# - the helper programs soffice.bin could exec: run by the runtime's loader they would meet
#   glibc 2.34 (see above), and a conversion needs none of them. soffice.bin is started
#   directly, its restart-on-exit-81 done by the worker, as oosplash would.
DROPPED = (
    "program/libucpdav1.so",
    "program/libucpftp1.so",
    "program/libLanguageToollo.so",
    "program/libldapbe2lo.so",
    "program/libcmdmaillo.so",
    "program/mailmerge.py",
    "program/oosplash",
    "program/soffice",
    "program/xpdfimport",
    "program/javaldx",
    "program/senddoc",
    "program/uri-encode",
    "program/ui-previewer",
    "program/gengal",
    "program/gengal.bin",
    "program/unopkg",
    "program/unopkg.bin",
    "program/regmerge",
    "program/regview",
    "program/uno",
    "program/uno.bin",
    "program/unoinfo",
    "program/opencltest",
    "program/java-set-classpath",
)
# How the glibc check names the glibc a file is checked against.
BUNDLED_GLIBC = "the layer's bundled glibc"
# Where the loader finds libraries; lp_solve's own folder (Calc's solver links it by RUNPATH);
# and BLAS's and LAPACK's, whose usual names update-alternatives links to them from a maintainer
# script (which never runs here).
LIBRARY_DIRS = (
    *debian.LIBRARY_DIRS,
    "usr/lib/lp_solve",
    "usr/lib/aarch64-linux-gnu/blas",
    "usr/lib/aarch64-linux-gnu/lapack",
)
# Libraries loaded with dlopen (not DT_NEEDED), so no closure finds them: NSS's software token
# and its crypto, which NSS loads from libnss3's own folder (lib/, in the layer). Every PDF
# export hashes with NSS: without them it fails ("Write Code:16").
DLOPENED = (
    "usr/lib/aarch64-linux-gnu/libsoftokn3.so",
    "usr/lib/aarch64-linux-gnu/libfreeblpriv3.so",
)
# Debian's bootstrap files name where Debian installs LibreOffice (/usr/lib/libreoffice) and its
# configuration (/etc/libreoffice); the layer's tree is wherever the worker unpacks it. Each
# (file, text, replacement), as upstream's own files say it: relative to the program folder.
RELOCATIONS = (
    (
        "program/fundamentalrc",
        "BRAND_BASE_DIR=file:///usr/lib/libreoffice",
        "BRAND_BASE_DIR=${ORIGIN}/..",
    ),
    (
        "program/fundamentalrc",
        "file:///etc/libreoffice/registry",
        "${BRAND_BASE_DIR}/share/registry",
    ),
    # dconf: a desktop's settings store, read over D-Bus; Lambda has neither.
    ("program/fundamentalrc", " dconf:*", ""),
)
# Debian's sofficerc points to /etc/libreoffice/sofficerc for its settings; the layer's holds
# them itself, with no crash dumps (no crash reporter to send them to).
SOFFICE_SETTINGS = "etc/libreoffice/sofficerc"
# What headless conversion never reads: document templates, the wizards and their Basic, and the
# clip-art gallery. (Filters, the registry and the UNO type libraries stay: all are read.)
LEFT_OUT = ("share/gallery", "share/template", "share/wizards", "share/basic", "program/wizards")
# The fonts, under the archive's fonts/ (their packages' folders).
FONT_DIRS = (
    "usr/share/fonts/truetype/liberation2",
    "usr/share/fonts/truetype/crosextra",
    "usr/share/fonts/truetype/dejavu",
)
# fontconfig's rule files as Debian enables them (links into conf.avail), under fontconfig/.
FONTCONFIG_RULES = "etc/fonts/conf.d"
# The fontconfig file the unpacker completes, and the mark it replaces with the tree's path.
FONTS_CONF_TEMPLATE = "fonts.conf.in"
TREE_MARK = "@LIBREOFFICE_HOME@"
ARCHIVE_NAME = "libreoffice.tar.zst"
MANIFEST_NAME = "layer.json"
# zstd, not xz: the worker unpacks the archive on every cold start, and zstd decompresses
# several times faster (the whole unpack, measured here: 3.5 s against 8 s for xz). Level 12:
# measured on one core here, 21 s to write 117 MB; level 19 takes 221 s for 102 MB and xz -3
# 87 s for 97 MB, and the worker unpacks any zstd level as fast.
ZSTD = ("-q", "-12", "-T0", "-c")
# A symlink chain longer than this is a loop.
MAX_LINK_HOPS = 40
# The smoke's conversion takes about 5 s under qemu here (2 s natively); far above both, for a
# slower or busier machine.
TREE_MANIFEST_NAME = "tree.json"
SMOKE_TIMEOUT = 900.0
# soffice.bin's exit status asking its launcher to start it again, as it does on a fresh
# profile: oosplash would (it is not in the layer); the worker and the smoke do.
RESTART = 81
# LibreOffice modules known to open network connections: the smoke fails if one is in the tree.
NETWORK_MODULES = frozenset(Path(name).name for name in DROPPED if name.endswith(".so"))
FONT_NAME = re.compile(rb"/FontName\s*/([A-Za-z0-9+_-]+)")


def install(dest: Path, cache: Path, archive: Archive) -> list[str]:
    """Builds DEST/libreoffice (the archive and its manifest); returns a line per part. The
    layer appears there only once whole: a build that fails leaves no DEST/libreoffice."""
    layer, staging = dest / "libreoffice", dest / "libreoffice.partial"
    shutil.rmtree(layer, ignore_errors=True)  # a previous build's: not this build's result
    shutil.rmtree(staging, ignore_errors=True)
    debs = debian.verified_debs(archive, cache, PACKAGES, names=lambda _name: True)
    try:
        with tempfile.TemporaryDirectory(prefix="libreoffice-debs-") as scratch:
            root, tree = Path(scratch) / "root", Path(scratch) / "tree"
            for deb in debs:
                unpack(deb, root)
            summary = lay_out(root, tree)
            staging.mkdir(parents=True)
            summary.append(write_archive(tree, staging, version=office_version()))
        staging.rename(layer)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary


def office_version() -> str:
    """LibreOffice's version in the lock: 7.4.7 of 4:7.4.7-1+deb12u14."""
    return _locked_upstream("libreoffice-core-nogui")


def bundled_glibc() -> tuple[int, ...]:
    """The glibc the layer carries (the locked libc6's): (2, 36) of 2.36-9+deb12u14."""
    return tuple(int(part) for part in _locked_upstream(SYSROOT_PACKAGE).split(".")[:2])


def _locked_upstream(name: str) -> str:
    (package,) = (p for p in PACKAGES.locked() if p.name == name)
    return debian.upstream_part(package.version)


def lay_out(root: Path, tree: Path) -> list[str]:
    """The archive's tree from the unpacked packages under root: LibreOffice's own files, the
    libraries they load in lib/, the fonts in fonts/, fontconfig's rules in fontconfig/."""
    copy_resolved(root, root / INSTALL_DIR, tree)
    install_registry(tree)
    relocate(root, tree)
    for left_out in LEFT_OUT:
        shutil.rmtree(tree / left_out, ignore_errors=True)
    drop_modules(tree)
    glibc = bundled_glibc()
    elf_files = [path for path in sorted(tree.rglob("*")) if _is_elf(path)]
    for path in elf_files:
        debian.check_glibc(path, glibc, whose=BUNDLED_GLIBC)
    own = frozenset(path.name for path in elf_files)
    dlopened = {Path(name).name: root / name for name in DLOPENED}
    # glibc too (system=nothing): the layer brings its own, loader included.
    libraries = dlopened | debian.library_closure(
        [*elf_files, *dlopened.values()],
        root,
        provided=own,
        library_dirs=LIBRARY_DIRS,
        system=frozenset(),
    )
    if Path(LOADER).name not in libraries:
        raise BuildError(f"no {Path(LOADER).name} in the closure: libc6 is not locked")
    (tree / "lib").mkdir()
    for soname, path in sorted(libraries.items()):
        debian.check_glibc(path, glibc, whose=BUNDLED_GLIBC)
        shutil.copy2(path.resolve(), tree / "lib" / soname)
    for font_dir in FONT_DIRS:
        copy_resolved(root, root / font_dir, tree / "fonts" / Path(font_dir).name)
    copy_resolved(root, root / FONTCONFIG_RULES, tree / "fontconfig" / "conf.d")
    write_fonts_conf_template(tree)
    fonts = [path for path in (tree / "fonts").rglob("*") if path.suffix in {".ttf", ".otf"}]
    return [
        "bootstrap files relocated (share/registry, fundamentalrc, sofficerc)",
        f"{len(elf_files)} LibreOffice programs and libraries (each within the bundled glibc "
        f"{'.'.join(map(str, glibc))})",
        f"{len(libraries)} libraries they load, glibc and its loader included, in lib/",
        f"{len(fonts)} fonts",
    ]


def drop_modules(tree: Path) -> None:
    """DROPPED out of the tree (a name a release does not have is skipped)."""
    for name in DROPPED:
        (tree / name).unlink(missing_ok=True)


def install_registry(tree: Path) -> None:
    """The configuration registry where soffice reads it (share/registry), as libreoffice-common's
    maintainer script would install it: Debian ships the .xcd files in share/.registry and
    share/registry as a link to /etc/libreoffice/registry, which the script fills. Without them
    soffice aborts at start (a DeploymentException from the configuration manager)."""
    shipped, registry = tree / "share" / ".registry", tree / "share" / "registry"
    if not (shipped / "main.xcd").is_file():
        raise BuildError("libreoffice-common has no share/.registry/main.xcd: its layout changed")
    for sample in registry.glob("*.sample"):
        sample.unlink()
    shutil.copytree(shipped, registry, dirs_exist_ok=True)
    shutil.rmtree(shipped)


def relocate(root: Path, tree: Path) -> None:
    """The bootstrap files made independent of where the tree is (RELOCATIONS, sofficerc's
    settings in place); BuildError when a file still names /usr/lib/libreoffice or /etc."""
    for name, text, replacement in RELOCATIONS:
        path = tree / name
        content = path.read_text()
        if text not in content:
            raise BuildError(f"{name} no longer says {text!r}: Debian's layout changed")
        path.write_text(content.replace(text, replacement))
    settings = (
        (root / SOFFICE_SETTINGS)
        .read_text()
        .replace("CrashDumpEnable=true", "CrashDumpEnable=false")
    )
    (tree / "program/sofficerc").write_text(settings + "URE_BOOTSTRAP=${ORIGIN}/fundamentalrc\n")
    for bootstrap in sorted((tree / "program").glob("*rc")):
        if (
            "file:///usr/lib/libreoffice" in (said := bootstrap.read_text())
            or "file:///etc" in said
        ):
            raise BuildError(f"{bootstrap.name} still names a path of Debian's installation")


def copy_resolved(root: Path, source: Path, target: Path) -> None:
    """source's tree into target with every symlink replaced by what it points to, read
    inside root (Debian links /usr/lib/libreoffice/share/registry to /etc/libreoffice/registry:
    the layer has no /etc); a link to nothing in root is left out."""
    real = resolve_inside(root, source)
    if real is None:
        return
    if real.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        for entry in sorted(real.iterdir()):
            copy_resolved(root, entry, target / entry.name)
    elif real.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, target)


def resolve_inside(root: Path, path: Path) -> Path | None:
    """path with its links followed as if root were /: never to a file outside root. None for
    a link to nothing (or a loop)."""
    for _ in range(MAX_LINK_HOPS):
        if not path.is_symlink():
            return path if path.exists() else None
        link = Path(os.readlink(path))
        path = root / link.relative_to("/") if link.is_absolute() else path.parent / link
        path = root / Path(os.path.normpath(path)).relative_to(root)
        if not path.resolve(strict=False).is_relative_to(root.resolve()) and not path.is_symlink():
            return None
    return None


def _is_elf(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as file:
        return file.read(4) == b"\x7fELF"


def write_archive(tree: Path, target: Path, *, version: str) -> str:
    """tree as target/libreoffice.tar.zst (owners and times cleared: the same tree gives the
    same bytes) and the manifest the worker reads before unpacking it."""
    entries = sorted(tree.rglob("*"))
    files = [path for path in entries if path.is_file()]
    unpacked = sum(path.stat().st_size for path in files)
    archive_path = target / ARCHIVE_NAME
    zstd = shutil.which("zstd")
    if zstd is None:
        raise BuildError("zstd is not installed (make system-deps; apt-get install zstd)")
    with archive_path.open("wb") as out:
        compressor = subprocess.Popen([zstd, *ZSTD], stdin=subprocess.PIPE, stdout=out)  # noqa: S603
        assert compressor.stdin is not None
        with (
            compressor.stdin,
            tarfile.open(fileobj=compressor.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            for path in entries:
                tar.add(path, arcname=str(path.relative_to(tree)), recursive=False, filter=_plain)
        if compressor.wait() != 0:
            raise BuildError(f"zstd exited {compressor.returncode} compressing the archive")
    (target / TREE_MANIFEST_NAME).write_text(tree_manifest(tree, files))
    manifest = {
        "libreoffice": version,
        "archive": ARCHIVE_NAME,
        "sha256": debian.sha256_of(archive_path),
        "archive_bytes": archive_path.stat().st_size,
        "unpacked_bytes": unpacked,
        "files": len(files),
        "tree": TREE_MANIFEST_NAME,
        "loader": LOADER,
        "program": PROGRAM,
    }
    (target / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return (
        f"LibreOffice {version}: {len(files)} files, {unpacked / 1e6:.1f} MB unpacked, "
        f"{manifest['archive_bytes'] / 1e6:.1f} MB as {ARCHIVE_NAME}"  # type: ignore[operator]
    )


def tree_manifest(tree: Path, files: list[Path]) -> str:
    """Every file of the tree with its size and SHA-256 (tree.json): the worker checks the tree
    it unpacked against it, and never runs one that differs."""
    listed = {
        str(path.relative_to(tree)): [path.stat().st_size, debian.sha256_of(path)] for path in files
    }
    return json.dumps({"files": listed}, indent=0, sort_keys=True) + "\n"


def _plain(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    member.mtime = 0
    member.mode &= 0o755
    return member


# --- smoke ---------------------------------------------------------------------------------------


def smoke(layer: Path, cache: Path, archive: Archive) -> Iterator[str]:
    """Unpacks the layer's archive with the document worker's own code and converts a document
    of each application (write_documents) with its soffice under qemu, started as the worker
    starts it (through the layer's own loader: no sysroot, no library of this machine's): one
    line per check passed, BuildError at the first that fails. Run by the project's interpreter
    (make template: .venv), which has the worker's package. (cache and archive: unused, every
    command takes them.)"""
    if shutil.which(QEMU) is None:
        raise BuildError(f"{QEMU} is not installed (apt-get install qemu-user-static)")
    from filejobs.processors.office_runtime import unpacked_layer  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="libreoffice-smoke-") as scratch:
        work = Path(scratch)
        started = time.monotonic()
        program = unpacked_layer(layer / "libreoffice", into=work)
        manifest = json.loads((layer / "libreoffice" / MANIFEST_NAME).read_text())
        took = time.monotonic() - started
        yield (
            f"unpacked {manifest['files']} files as the worker does, each checked against "
            f"{TREE_MANIFEST_NAME}, in {took:.1f} s"
        )
        yield check_no_network_modules(Path(program.argv[-1]).parents[1])
        for document in write_documents(work / "documents"):
            yield check_conversion(program.argv, program.environment, work, document)


def check_no_network_modules(tree: Path) -> str:
    """None of NETWORK_MODULES is in the unpacked tree."""
    found = sorted(path.name for path in tree.rglob("*") if path.name in NETWORK_MODULES)
    if found:
        raise BuildError(f"network client modules in the layer: {found}")
    return f"no network client module in the tree ({', '.join(sorted(NETWORK_MODULES))})"


def check_conversion(
    program: tuple[str, ...], environment: Mapping[str, str], work: Path, document: Path
) -> str:
    """soffice must turn the one-page document into a one-page PDF, its text drawn in a font of
    the layer's, with nothing but the worker's environment for it (the layer's fontconfig file)
    and a scratch profile. `program` is the worker's argv prefix (the layer's loader, its
    --library-path, soffice.bin), run by qemu-user as it is: an aarch64 loader, then the
    program it maps."""
    out = work / "out"
    command = [
        QEMU, *program,
        f"-env:UserInstallation=file://{work / 'profile'}", "--headless", "--norestore",
        "--nologo", "--convert-to", "pdf", "--outdir", str(out), str(document),
    ]  # fmt: skip
    # As office.py runs it: the worker's environment, headless rendering, a writable home.
    environment = {
        **environment,
        "SAL_USE_VCLPLUGIN": "svp",
        "HOME": str(work),
        "TMPDIR": str(work),
    }
    started = time.monotonic()
    run = _run(command, environment)
    if run.returncode == RESTART:  # a fresh profile: soffice asks to be started again
        run = _run(command, environment)
    pdf = out / f"{document.stem}.pdf"
    data = pdf.read_bytes() if pdf.is_file() else b""
    if run.returncode != 0 or not data.startswith(b"%PDF-"):
        raise BuildError(
            f"soffice ({document.name}): exit {run.returncode}, {run.stdout}{run.stderr}"
        )
    pages = data.count(b"/Type/Page") - data.count(b"/Type/Pages")
    # A subset font is named XXXXXX+Family: with none, the text was not drawn in any font.
    fonts = sorted({name.split(b"+")[-1].decode() for name in FONT_NAME.findall(data)})
    if pages != 1 or not fonts:
        raise BuildError(f"soffice: {pdf.name} of {document.name} has {pages} pages, fonts {fonts}")
    took = time.monotonic() - started
    return (
        f"soffice --convert-to pdf: {document.name} -> {pdf.name} ({pages} page, text in "
        f"{', '.join(fonts)}) in {took:.0f} s"
    )


def _run(command: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
            command, env=environment, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=SMOKE_TIMEOUT, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as error:
        raise BuildError(f"soffice still running after {SMOKE_TIMEOUT:.0f} s") from error


def write_fonts_conf_template(tree: Path) -> None:
    """fontconfig's file for the tree's fonts and rules, its cache beside them, with TREE_MARK
    where the tree's path goes: whoever unpacks the tree writes fonts.conf from it (Lambda has
    no /etc/fonts, and fontconfig finds no font through a relative <dir>). Its cache goes
    under $XDG_CACHE_HOME, else $HOME/.cache: the job's private directory, never the tree,
    which no conversion writes to (the worker checks it against tree.json)."""
    (tree / "fontconfig" / FONTS_CONF_TEMPLATE).write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">\n'
        "<fontconfig>\n"
        f"  <dir>{TREE_MARK}/fonts</dir>\n"
        '  <cachedir prefix="xdg">fontconfig</cachedir>\n'
        f'  <include ignore_missing="yes">{TREE_MARK}/fontconfig/conf.d</include>\n'
        "</fontconfig>\n"
    )


def write_documents(folder: Path) -> list[Path]:
    """One document for each of the layer's applications, each a page: a DOCX (Writer, through
    the OOXML filters), a flat OpenDocument spreadsheet (Calc) and presentation (Impress)."""
    folder.mkdir(parents=True)
    text = "filejobs LibreOffice layer smoke test"
    write_docx(folder / "smoke.docx", text)
    (folder / "smoke-sheet.fods").write_text(flat_open_document("spreadsheet", text))
    (folder / "smoke-slides.fodp").write_text(flat_open_document("presentation", text))
    return sorted(folder.iterdir())


def flat_open_document(kind: str, text: str) -> str:
    """A one-page flat OpenDocument spreadsheet (one cell) or presentation (one text box)."""
    namespaces = {
        "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
        "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
        "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
        "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
        "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    }
    declared = " ".join(f'xmlns:{prefix}="{uri}"' for prefix, uri in namespaces.items())
    body = (
        f'<table:table table:name="Smoke"><table:table-row><table:table-cell><text:p>{text}'
        "</text:p></table:table-cell></table:table-row></table:table>"
        if kind == "spreadsheet"
        else '<draw:page draw:name="Smoke"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm"'
        f' svg:height="3cm"><draw:text-box><text:p>{text}</text:p></draw:text-box></draw:frame>'
        "</draw:page>"
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {declared} '
        f'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.{kind}">'
        f"<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document>"
    )


def write_docx(path: Path, text: str) -> None:
    """The smallest DOCX Word opens: its content types, its relationship, one paragraph."""
    main = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    office_document = (
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
    )
    with zipfile.ZipFile(path, "w") as docx:
        docx.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats'
            '.org/package/2006/content-types"><Default Extension="rels" ContentType="application'
            '/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" '
            'ContentType="application/xml"/><Override PartName="/word/document.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.'
            'document.main+xml"/></Types>',
        )
        docx.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            f'Type="{office_document}" Target="word/document.xml"/></Relationships>',
        )
        docx.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{main}"><w:body>'
            f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>",
        )


SCRIPT = debian.LayerScript(
    name="libreoffice",
    description=__doc__.split("\n\n")[0],
    packages=lambda: PACKAGES,
    install=install,
    smoke=smoke,
    smoke_help="convert a document of each application with the built layer under qemu",
    cache_variable="LIBREOFFICE_DEB_CACHE",
)


def main(argv: list[str] | None = None) -> int:
    return SCRIPT.main(argv)


if __name__ == "__main__":
    sys.exit(main())
