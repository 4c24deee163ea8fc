"""The LibreOffice layer's build (infra/layers/libreoffice/debs.py, on
infra/layers/debian_packages.py): what packages.txt's `+` and `-` entries lock, how Debian's
absolute links are kept inside the unpacked tree, and the archive the document worker unpacks
(filejobs' office_runtime).

The whole build against Debian's archive, and soffice converting under qemu, run in `make
template` (`debs.py smoke`); these tests run on files made here."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import zstandard

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
office = load_script(ROOT / "infra/layers/libreoffice/debs.py", "libreoffice_debs")
debian: Any = office.debian
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"


def _stanza(name: str, depends: str = "", provides: str = "") -> dict[str, str]:
    return {"Package": name, "Version": "1.0-1", "Depends": depends, "Provides": provides}


def _versions(*stanzas: dict[str, str]) -> dict[str, list[dict[str, str]]]:
    return {stanza["Package"]: [stanza] for stanza in stanzas}


# --- what a package list locks -------------------------------------------------------------------


def test_a_plus_entry_brings_its_dependencies_and_a_minus_entry_keeps_one_out(
    tmp_path: Path,
) -> None:
    # given a list with a root whose dependencies count, a plain entry and an exclusion
    listing = tmp_path / "packages.txt"
    listing.write_text("# a comment\nwriter+\nfonts@bookworm\n-dpkg\n")
    packages = debian.PackageList(listing, tmp_path / "packages.lock", default_release="bullseye")
    # then each is read as it says
    assert packages.entries() == (
        {"writer": "bullseye", "fonts": "bookworm"},
        frozenset({"writer"}),
        frozenset({"dpkg"}),
    )
    # and a package the lock holds as a dependency comes from the default release, an excluded
    # one from nowhere (the lock naming it is refused)
    assert packages.releases_of(["libfoo", "fonts", "dpkg"]) == {
        "libfoo": "bullseye",
        "fonts": "bookworm",
        "dpkg": None,
    }


def test_a_list_without_plus_entries_admits_only_what_it_names(tmp_path: Path) -> None:
    listing = tmp_path / "packages.txt"
    listing.write_text("clamav\n")
    packages = debian.PackageList(listing, tmp_path / "packages.lock", default_release="bookworm")
    assert packages.releases_of(["clamav", "libfoo"]) == {"clamav": "bookworm", "libfoo": None}


def test_the_dependency_closure_follows_alternatives_virtual_packages_and_exclusions() -> None:
    versions = _versions(
        _stanza("writer", depends="core (>= 1:7.0), libfoo1 | libfoo-alt, fonts-any, dpkg"),
        _stanza("core", depends="libc6 (>= 2.31), libbar:any"),
        _stanza("libfoo1"),
        _stanza("libfoo-alt"),
        _stanza("libbar"),
        _stanza("fonts-real", provides="fonts-any"),
        _stanza("libc6"),
        _stanza("unrelated"),
    )
    closure = debian.dependency_closure(
        ["writer"], frozenset({"writer"}), frozenset({"dpkg"}), versions
    )
    # then the first alternative that is a package wins, a virtual package gets its provider,
    # an arch qualifier and a version are read past, and an excluded package is left out
    assert closure == ["core", "fonts-real", "libbar", "libc6", "libfoo1", "writer"]


def test_a_root_without_plus_brings_nothing_else() -> None:
    versions = _versions(_stanza("clamav", depends="libclamav12"), _stanza("libclamav12"))
    assert debian.dependency_closure(["clamav"], frozenset(), frozenset(), versions) == ["clamav"]


def test_a_dependency_nothing_provides_fails_the_lock_naming_it() -> None:
    versions = _versions(_stanza("writer", depends="libgone1 | libgone2"))
    with pytest.raises(debian.BuildError, match=r"writer: nothing provides libgone1 \| libgone2"):
        debian.dependency_closure(["writer"], frozenset({"writer"}), frozenset(), versions)


def test_the_committed_lock_is_debian_12s_libreoffice_with_its_glibc_and_fonts() -> None:
    locked = {package.name: package for package in office.PACKAGES.locked()}
    # then LibreOffice's headless packages are in, from bookworm (security-supported), with
    # bookworm's own glibc for the bundled loader, and nothing of bullseye's
    for name in ("libreoffice-core-nogui", "libreoffice-writer-nogui", "libreoffice-calc-nogui"):
        assert ":7.4." in locked[name].version and "deb12" in locked[name].version, name
    assert locked["libc6"].version.startswith("2.36-")
    assert office.bundled_glibc() == (2, 36)
    assert not any("deb11" in p.version for p in locked.values())
    assert all(p.url.startswith("https://deb.debian.org/") for p in locked.values())
    assert {"fonts-liberation2", "fonts-crosextra-carlito", "fonts-dejavu-core"} <= set(locked)
    # and what the list excludes is not
    _, _, excluded = office.PACKAGES.entries()
    assert not excluded & set(locked)
    assert office.office_version() == locked["libreoffice-core-nogui"].version[2:7]


def test_a_file_needing_a_newer_glibc_than_lambdas_passes_within_the_bundled_one(
    tmp_path: Path,
) -> None:
    # given this machine's `true`, whose symbol versions name its glibc (2.34 or later here)
    program = Path("/usr/bin/true")
    needs = max(debian.glibc_versions(program))
    # then the bundled glibc admits what it covers, and refuses a newer one naming itself
    debian.check_glibc(program, needs, whose=office.BUNDLED_GLIBC)
    older = (needs[0], needs[1] - 1)
    with pytest.raises(debian.BuildError, match=r"needs GLIBC_.*; the layer's bundled glibc has"):
        debian.check_glibc(program, older, whose=office.BUNDLED_GLIBC)


def test_the_network_clients_and_the_helper_programs_are_left_out_of_the_tree(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    (tree / "program").mkdir(parents=True)
    kept = ("libmergedlo.so", "libswlo.so", "soffice.bin", "libucppkg1.so")
    dropped = ("libucpdav1.so", "libucpftp1.so", "libLanguageToollo.so", "libldapbe2lo.so",
               "oosplash", "xpdfimport", "javaldx")  # fmt: skip
    for name in (*kept, *dropped):
        (tree / "program" / name).write_bytes(b"\x7fELF")
    office.drop_modules(tree)
    assert sorted(path.name for path in (tree / "program").iterdir()) == sorted(kept)


# --- unpacking: Debian's absolute links stay inside the tree -------------------------------------


def _deb_with(tmp_path: Path, *members: tarfile.TarInfo) -> Path:
    """A .deb (an `ar` archive) whose data.tar holds the members (links and empty files)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    body = data.getvalue()
    header = f"{'data.tar/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode()
    deb = tmp_path / "sample.deb"
    deb.write_bytes(b"!<arch>\n" + header + body + (b"\n" if len(body) % 2 else b""))
    return deb


def _link(name: str, target: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.SYMTYPE, target
    return member


def _file(name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size = 1
    return member


def test_an_absolute_link_in_a_package_points_inside_the_unpacked_tree(tmp_path: Path) -> None:
    deb = _deb_with(
        tmp_path,
        _file("./usr/share/fontconfig/conf.avail/10-hinting.conf"),
        _link("./etc/fonts/conf.d/10-hinting.conf", "/usr/share/fontconfig/conf.avail/10-hinting.conf"),  # noqa: E501
    )  # fmt: skip
    root = tmp_path / "root"
    debian.unpack(deb, root)
    link = root / "etc/fonts/conf.d/10-hinting.conf"
    # then the link is relative and lands on the package's own file, not this machine's
    assert link.readlink() == Path("../../../usr/share/fontconfig/conf.avail/10-hinting.conf")
    assert link.resolve() == (root / "usr/share/fontconfig/conf.avail/10-hinting.conf").resolve()


def test_a_relative_link_out_of_the_tree_is_still_refused(tmp_path: Path) -> None:
    deb = _deb_with(tmp_path, _link("./etc/passwd-copy", "../../../../etc/passwd"))
    with pytest.raises(debian.BuildError, match=r"sample.deb: refused: .*passwd-copy"):
        debian.unpack(deb, tmp_path / "root")


def test_the_layer_tree_replaces_links_by_what_they_point_to_inside_root(tmp_path: Path) -> None:
    # given LibreOffice's tree as Debian lays it out: its registry a link into /etc
    root = tmp_path / "root"
    (root / "etc/libreoffice/registry").mkdir(parents=True)
    (root / "etc/libreoffice/registry/main.xcd").write_text("<registry/>")
    install = root / "usr/lib/libreoffice/share"
    install.mkdir(parents=True)
    (install / "registry").symlink_to("../../../../etc/libreoffice/registry")
    (install / "gone").symlink_to("../../../../etc/libreoffice/nothing")
    (install / "loop").symlink_to("loop")
    # when it is copied for the layer
    office.copy_resolved(root, root / "usr/lib/libreoffice", tmp_path / "tree")
    tree = tmp_path / "tree/share"
    # then the registry is a real folder with the file, and links to nothing are left out
    assert not (tree / "registry").is_symlink()
    assert (tree / "registry/main.xcd").read_text() == "<registry/>"
    assert sorted(path.name for path in tree.iterdir()) == ["registry"]


def test_the_archive_holds_the_tree_with_no_owner_and_its_manifest_says_what_it_is(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    (tree / "program").mkdir(parents=True)
    (tree / "program/soffice.bin").write_text("#!/bin/sh\n")
    (tree / "program/soffice.bin").chmod(0o4755)  # setuid: not kept
    (tree / "fonts").mkdir()
    (tree / "fonts/a.ttf").write_bytes(b"\0" * 100)
    target = tmp_path / "layer"
    target.mkdir()
    line = office.write_archive(tree, target, version="7.4.7")
    manifest = json.loads((target / "layer.json").read_text())
    assert manifest["libreoffice"] == "7.4.7"
    # and says how the worker starts it: soffice.bin through the layer's own loader
    assert (manifest["loader"], manifest["program"]) == (
        "lib/ld-linux-aarch64.so.1",
        "program/soffice.bin",
    )
    # and lists every file with its size and SHA-256, for the worker to check what it unpacks
    listed = json.loads((target / manifest["tree"]).read_text())["files"]
    assert listed == {
        "program/soffice.bin": [10, debian.sha256_of(tree / "program/soffice.bin")],
        "fonts/a.ttf": [100, debian.sha256_of(tree / "fonts/a.ttf")],
    }
    assert manifest["unpacked_bytes"] == len("#!/bin/sh\n") + 100
    assert manifest["files"] == 2
    assert manifest["sha256"] == debian.sha256_of(target / "libreoffice.tar.zst")
    assert "2 files" in line
    with (
        (target / "libreoffice.tar.zst").open("rb") as compressed,
        zstandard.ZstdDecompressor().stream_reader(compressed) as stream,
        tarfile.open(fileobj=stream, mode="r|") as tar,
    ):
        members = {member.name: member for member in tar}
    assert members["program/soffice.bin"].mode == 0o755
    assert {member.uid for member in members.values()} == {0}
    assert {member.mtime for member in members.values()} == {0}


DEBIAN_FUNDAMENTALRC = """[Bootstrap]
BRAND_BASE_DIR=file:///usr/lib/libreoffice
CONFIGURATION_LAYERS=xcsxcu:file:///etc/libreoffice/registry res:file:///etc/libreoffice/registry dconf:* user:!x
"""  # noqa: E501


def _debian_install(tmp_path: Path) -> tuple[Path, Path]:
    root, tree = tmp_path / "root", tmp_path / "tree"
    (root / "etc/libreoffice").mkdir(parents=True)
    (root / "etc/libreoffice/sofficerc").write_text("[Bootstrap]\nCrashDumpEnable=true\nLogo=1\n")
    (tree / "program").mkdir(parents=True)
    (tree / "program/fundamentalrc").write_text(DEBIAN_FUNDAMENTALRC)
    (tree / "program/sofficerc").write_text("FHS_CONFIG_FILE=file:///etc/libreoffice/sofficerc\n")
    return root, tree


def test_the_bootstrap_files_name_the_tree_relative_to_themselves_not_debian_s_paths(
    tmp_path: Path,
) -> None:
    root, tree = _debian_install(tmp_path)
    office.relocate(root, tree)
    fundamental = (tree / "program/fundamentalrc").read_text()
    # then the tree is found from the program folder, the registry inside it, no desktop dconf
    assert "BRAND_BASE_DIR=${ORIGIN}/..\n" in fundamental
    assert (
        "CONFIGURATION_LAYERS=xcsxcu:${BRAND_BASE_DIR}/share/registry "
        "res:${BRAND_BASE_DIR}/share/registry user:!x"
    ) in fundamental
    # and sofficerc holds /etc's settings itself, crash dumps off
    assert (tree / "program/sofficerc").read_text() == (
        "[Bootstrap]\nCrashDumpEnable=false\nLogo=1\nURE_BOOTSTRAP=${ORIGIN}/fundamentalrc\n"
    )


def test_a_bootstrap_file_laid_out_otherwise_fails_the_build(tmp_path: Path) -> None:
    root, tree = _debian_install(tmp_path)
    (tree / "program/fundamentalrc").write_text("BRAND_BASE_DIR=file:///opt/libreoffice7.0\n")
    with pytest.raises(debian.BuildError, match="fundamentalrc no longer says"):
        office.relocate(root, tree)


def test_a_bootstrap_file_still_naming_etc_fails_the_build(tmp_path: Path) -> None:
    root, tree = _debian_install(tmp_path)
    (tree / "program/unorc").write_text("UNO_TYPES=file:///etc/libreoffice/types.rdb\n")
    with pytest.raises(debian.BuildError, match="unorc still names a path of Debian's"):
        office.relocate(root, tree)


def test_the_configuration_registry_is_where_soffice_reads_it(tmp_path: Path) -> None:
    # given Debian's layout: the .xcd files in share/.registry, share/registry only samples
    tree = tmp_path / "tree"
    (tree / "share/.registry/res").mkdir(parents=True)
    (tree / "share/.registry/main.xcd").write_text("<main/>")
    (tree / "share/.registry/res/fcfg_langpack_en-US.xcd").write_text("<res/>")
    (tree / "share/registry").mkdir()
    (tree / "share/registry/oo-ldap.xcd.sample").write_text("")
    office.install_registry(tree)
    registry = tree / "share/registry"
    assert sorted(str(p.relative_to(registry)) for p in registry.rglob("*.xcd*")) == [
        "main.xcd",
        "res/fcfg_langpack_en-US.xcd",
    ]
    assert not (tree / "share/.registry").exists()
    # and a libreoffice-common without them fails the build (soffice would abort at start)
    with pytest.raises(debian.BuildError, match=r"no share/\.registry/main\.xcd"):
        office.install_registry(tree)


def test_the_smoke_converts_a_document_of_each_application(tmp_path: Path) -> None:
    documents = office.write_documents(tmp_path / "documents")
    assert [document.name for document in documents] == [
        "smoke-sheet.fods",
        "smoke-slides.fodp",
        "smoke.docx",
    ]
    # each well-formed, of its kind, carrying the text the PDF must draw in a font
    sheet, slides, docx = documents
    for flat, kind in ((sheet, "spreadsheet"), (slides, "presentation")):
        root = ElementTree.fromstring(flat.read_bytes())
        assert root.get(f"{{{OFFICE}}}mimetype") == f"application/vnd.oasis.opendocument.{kind}"
        assert "layer smoke test" in "".join(root.itertext())
    with zipfile.ZipFile(docx) as archive:
        assert "layer smoke test" in archive.read("word/document.xml").decode()
        assert set(archive.namelist()) == {
            "[Content_Types].xml",
            "_rels/.rels",
            "word/document.xml",
        }
