"""The ClamAV layer's build (infra/layers/clamav/debs.py): pinned packages, and the two checks
that keep a binary from another distribution from breaking on Lambda (every library it loads is
shipped; nothing needs a newer glibc than the runtime's); and the smoke's checks. How packages
are fetched and verified (HTTPS, the signed Release, the digests) is test_clamav_layer_archive's.

The ELF readers and the smoke's checks run on this machine's own Debian ClamAV (x86_64: clamscan,
clamd, freshclam, sigtool) and its libraries: the format and the programs are the same as the
layer's arm64 ones, and `make template` runs the built arm64 layer under qemu.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.debian import debian_package
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
HOST_CLAMSCAN = Path("/usr/bin/clamscan")
needs_host_clamscan = pytest.mark.skipif(
    not HOST_CLAMSCAN.exists(), reason="clamscan is not installed (make system-deps)"
)


debs = load_script(ROOT / "infra/layers/clamav/debs.py", "clamav_debs")
# This machine's Debian ClamAV: the layer's programs, at the same paths, built for x86_64.
HOST_PROGRAMS = {Path(program).name: Path("/") / program for program in debs.PROGRAMS}
needs_host_clamav = pytest.mark.skipif(
    not all(path.exists() for path in HOST_PROGRAMS.values()),
    reason="clamav, clamav-daemon and clamav-freshclam are not installed (make system-deps)",
)
# The smoke's checks run natively: this machine's programs, an environment of nothing.
HOST = debs.Runner(programs=HOST_PROGRAMS, env={})


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
        assert package.url.startswith("https://deb.debian.org/")
        assert package.url.endswith("_arm64.deb")


def test_a_package_is_unpacked_without_dpkg(tmp_path: Path) -> None:
    deb = tmp_path / "hello.deb"
    deb.write_bytes(
        debian_package({"usr/bin/hello": b"#!/bin/sh\n", "usr/share/doc/hello/README": b"hi"})
    )
    debs.unpack(deb, tmp_path / "root")
    assert (tmp_path / "root/usr/bin/hello").read_bytes() == b"#!/bin/sh\n"
    assert (tmp_path / "root/usr/share/doc/hello/README").read_bytes() == b"hi"


def test_a_file_that_is_not_a_package_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.deb"
    bogus.write_bytes(b"<html>404</html>")
    with pytest.raises(debs.BuildError, match=r"bogus.deb is not a Debian package"):
        debs.unpack(bogus, tmp_path / "root")


@needs_host_clamscan
def test_the_elf_reader_lists_what_clamscan_loads_and_the_glibc_it_needs() -> None:
    assert {"libclamav.so.12", "libc.so.6"} <= set(debs.needed(HOST_CLAMSCAN))
    versions = debs.glibc_versions(HOST_CLAMSCAN)
    assert (2, 2, 5) in versions or (2, 17) in versions  # the base version of x86_64 / arm64
    assert max(versions) <= (2, 36)  # this machine's glibc: it runs here


def _sysroot_with_host_programs(tmp_path: Path) -> Path:
    """This machine's ClamAV programs and every library of it, laid out as the layer's Debian
    packages have them."""
    root = tmp_path / "root"
    for program in debs.PROGRAMS:
        source = Path("/") / program
        if source.exists():
            (root / program).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, root / program)
    libraries = root / debs.debian.LIBRARY_DIRS[0]
    libraries.mkdir(parents=True)
    for host_dir in (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu")):
        for library in [*host_dir.glob("lib*.so*"), *host_dir.glob("ld-linux*.so*")]:
            if not (libraries / library.name).exists():
                (libraries / library.name).symlink_to(library)
    return root


@needs_host_clamscan
def test_the_layer_takes_exactly_the_library_closure_and_names_a_missing_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given clamscan beside every library of this machine (whose loader has its x86_64 name)
    root = _sysroot_with_host_programs(tmp_path)
    glibc = debs.debian.GLIBC_LIBRARIES | {"ld-linux-x86-64.so.2"}
    monkeypatch.setattr(debs.debian, "GLIBC_LIBRARIES", glibc)
    # when its closure is taken, then libclamav and its own dependencies are in, glibc is not
    closure = debs.library_closure([root / "usr/bin/clamscan"], root)
    assert {"libclamav.so.12", "libxml2.so.2", "libpcre2-8.so.0"} <= set(closure)
    assert not set(closure) & debs.debian.GLIBC_LIBRARIES
    assert "libcurl.so.4" not in closure  # freshclam's, not clamscan's
    # when a library it loads is missing, then the build says which one
    (root / debs.debian.LIBRARY_DIRS[0] / "libmspack.so.0").unlink()
    with pytest.raises(debs.BuildError, match=r"libmspack.so.0 is needed but no locked package"):
        debs.library_closure([root / "usr/bin/clamscan"], root)


@needs_host_clamscan
def test_a_file_needing_a_newer_glibc_than_lambdas_fails_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a runtime older than what this machine's clamscan was built against
    monkeypatch.setattr(debs.debian, "RUNTIME_GLIBC", (2, 2))
    with pytest.raises(debs.BuildError, match=r"clamscan needs GLIBC_2\.\d+; Lambda's runtime"):
        debs.check_glibc(HOST_CLAMSCAN)
    # and with Lambda's glibc it passes (Debian 12 builds ClamAV against glibc <= 2.34)
    monkeypatch.setattr(debs.debian, "RUNTIME_GLIBC", (2, 34))
    debs.check_glibc(HOST_CLAMSCAN)
    # as it does against the bundled glibc, which the layer's check names when it is too old
    debs.check_glibc(HOST_CLAMSCAN, (2, 36), whose="the layer's bundled glibc")
    with pytest.raises(debs.BuildError, match=r"needs GLIBC_2\.\d+; the layer's bundled glibc"):
        debs.check_glibc(HOST_CLAMSCAN, (2, 2), whose="the layer's bundled glibc")


@needs_host_clamav
def test_every_program_is_copied_with_its_launcher_its_closure_and_glibc_each_file_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given this machine's clamscan, clamd, freshclam and sigtool beside all its libraries (its
    # loader under its x86_64 name)
    root = _sysroot_with_host_programs(tmp_path)
    monkeypatch.setattr(debs, "LOADER", "ld-linux-x86-64.so.2")
    monkeypatch.setattr(
        debs.debian, "GLIBC_LIBRARIES", debs.debian.GLIBC_LIBRARIES | {"ld-linux-x86-64.so.2"}
    )
    checked: list[tuple[str, tuple[int, ...]]] = []
    check_glibc = debs.check_glibc

    def check_and_note(path: Path, glibc: tuple[int, ...], *, whose: str) -> None:
        check_glibc(path, glibc, whose=whose)
        checked.append((path.name, glibc))

    monkeypatch.setattr(debs, "check_glibc", check_and_note)
    # when the layer is laid out against this machine's glibc (2.36, as the bundled one)
    copied = debs.copy_programs(root, tmp_path / "layer/clamav", glibc=(2, 36))
    layer = tmp_path / "layer/clamav"
    # then every program is in libexec, with a launcher of its name in bin
    assert {path.name for path in (layer / "libexec").iterdir()} == set(HOST_PROGRAMS)
    assert (layer / "libexec/clamd").read_bytes() == HOST_PROGRAMS["clamd"].read_bytes()
    assert (layer / "bin/clamd").read_text().startswith("#!/bin/sh\n")
    # and glibc with its loader in glibc/, apart from the libraries of each in lib/: clamd's
    # libsystemd, freshclam's libfreshclam and libcurl
    glibc = {path.name for path in (layer / "glibc").iterdir()}
    assert {"libc.so.6", "ld-linux-x86-64.so.2"} <= glibc <= debs.debian.GLIBC_LIBRARIES
    libraries = {path.name for path in (layer / "lib").iterdir()}
    assert {"libclamav.so.12", "libsystemd.so.0", "libfreshclam.so.3", "libcurl.so.4"} <= libraries
    assert not libraries & debs.debian.GLIBC_LIBRARIES
    # and every file copied, program or library, was checked against the bundled glibc first
    expected = {f"{kind}/{name}" for name in HOST_PROGRAMS for kind in ("bin", "libexec")}
    expected |= {f"lib/{name}" for name in libraries} | {f"glibc/{name}" for name in glibc}
    assert set(copied) == expected
    assert sorted(checked) == sorted(
        (entry.split("/", 1)[1], (2, 36)) for entry in copied if not entry.startswith("bin/")
    )


def test_a_launcher_starts_its_program_through_the_layers_loader_with_the_layers_libraries(
    tmp_path: Path,
) -> None:
    # given a layer whose loader is a script printing what it was given
    layer = (tmp_path / "opt/clamav").resolve()
    for folder in ("bin", "glibc", "lib", "libexec"):
        (layer / folder).mkdir(parents=True)
    loader = layer / "glibc" / debs.LOADER
    loader.write_text('#!/bin/sh\nprintf "%s\\n" "$0" "$@"\n')
    loader.chmod(0o755)
    launcher = layer / "bin/clamd"
    launcher.write_text(debs.LAUNCHER.format(program="clamd", loader=debs.LOADER))
    launcher.chmod(0o755)
    # when a worker runs bin/clamd by its path, with LD_LIBRARY_PATH as environment.py sets it
    run = subprocess.run(
        [str(launcher), "--config-file=/tmp/clamd.conf", "a b"],
        env={"LD_LIBRARY_PATH": str(layer / "lib")},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    # then the layer's loader starts libexec/clamd with the layer's glibc and libraries alone,
    # its arguments untouched
    assert run.stdout.splitlines() == [
        str(loader), "--library-path", f"{layer}/glibc:{layer}/lib", str(layer / "libexec/clamd"),
        "--config-file=/tmp/clamd.conf", "a b",
    ]  # fmt: skip


def test_the_layers_programs_run_under_qemu_as_their_launchers_start_them(
    tmp_path: Path,
) -> None:
    runner = debs.layer_runner(tmp_path / "layer")
    clamav = tmp_path / "layer/clamav"
    assert runner.env == {"LD_LIBRARY_PATH": str(clamav / "lib")}
    assert set(runner.programs) == {"clamscan", "clamd", "freshclam", "sigtool"}
    assert runner.argv("clamd", "--config-file=c") == [
        debs.QEMU, str(clamav / "glibc/ld-linux-aarch64.so.1"), "--library-path",
        f"{clamav}/glibc:{clamav}/lib", str(clamav / "libexec/clamd"), "--config-file=c",
    ]  # fmt: skip


def test_the_committed_lock_is_debian_12_alone_with_its_glibc_for_the_bundled_loader() -> None:
    locked = {package.name: package for package in debs.locked_packages()}
    assert not any("deb11" in package.version for package in locked.values())
    assert locked["libxml2"].version.startswith("2.9.14+")
    assert {"libicu72", "libc6"} <= set(locked) and "libicu67" not in locked
    assert debs.bundled_glibc() == (2, 36)


def test_the_version_clamd_must_report_is_clamavs_own_in_the_locked_debian_one() -> None:
    assert debs.upstream_version("1.4.6+dfsg-0+deb12u1") == "1.4.6"
    assert debs.upstream_version("1:1.0.9-1") == "1.0.9"


def _host_clamav_version() -> str:
    """1.4.6 of `clamd --version`'s "ClamAV 1.4.6" (or "ClamAV 1.4.6/27000/<date>")."""
    run = subprocess.run(
        [HOST_PROGRAMS["clamd"], "--version"], capture_output=True, text=True, check=True
    )
    return run.stdout.strip().partition("/")[0].removeprefix("ClamAV ")


@needs_host_clamav
def test_the_smokes_clamscan_and_sigtool_checks_pass_this_machines_programs(
    tmp_path: Path,
) -> None:
    samples = debs.write_samples(tmp_path)
    assert debs.check_clamscan(HOST, samples) == (
        "clamscan: clean.txt: OK; eicar.com: Smoke.EICAR.UNOFFICIAL FOUND"
    )
    assert debs.check_sigtool(HOST, samples).startswith("sigtool: --md5 eicar.com -> ")
    # and a database that detects nothing fails the clamscan check
    (samples.database / "smoke.hdb").write_text(debs.hdb_signature(b"other", "Other") + "\n")
    with pytest.raises(debs.BuildError, match="clamscan: exit 0"):
        debs.check_clamscan(HOST, samples)


@needs_host_clamav
def test_clamd_runs_on_the_smokes_config_and_scans_by_fildes_and_instream(tmp_path: Path) -> None:
    # given this machine's clamd started as the smoke starts the layer's
    samples = debs.write_samples(tmp_path / "samples")
    # when the smoke's clamd check runs
    lines = list(
        debs.check_clamd(HOST, samples, tmp_path / "clamd", version=_host_clamav_version())
    )
    # then clamd answered, scanned both ways, and stopped when told
    assert [line.split(" ")[1] for line in lines] == [
        "PING", "VERSION", "FILDES", "INSTREAM", "SHUTDOWN",
    ]  # fmt: skip
    for line in lines[2:4]:
        assert line.endswith("clean.txt: OK; eicar.com: Smoke.EICAR.UNOFFICIAL FOUND")
    # and the config named clamd's paths: no socket is left behind
    assert not (tmp_path / "clamd/clamd.sock").exists()


@needs_host_clamav
def test_a_clamd_that_fails_is_named_with_its_own_words_and_is_not_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[subprocess.Popen[bytes]] = []
    start = debs.Runner.start

    def keep(self: Any, program: str, *arguments: str, log: Path) -> subprocess.Popen[bytes]:
        started.append(start(self, program, *arguments, log=log))
        return started[-1]

    monkeypatch.setattr(debs.Runner, "start", keep)
    samples = debs.write_samples(tmp_path / "samples")
    # when clamd runs, but is not the version the lock names, then the check fails and clamd
    # is stopped
    with pytest.raises(debs.BuildError, match=r"VERSION -> 'ClamAV .*', the lock has ClamAV 0\.0"):
        list(debs.check_clamd(HOST, samples, tmp_path / "wrong-version", version="0.0"))
    assert started[-1].poll() is not None
    # when clamd cannot start (no database), then the error carries what clamd said
    (samples.database / "smoke.hdb").unlink()
    with pytest.raises(debs.BuildError, match=r"(?s)clamd exited \(\d+\) before .*database"):
        list(debs.check_clamd(HOST, samples, tmp_path / "no-database", version="0.0"))


@needs_host_clamav
def test_freshclam_fetches_from_the_smokes_mirror_on_localhost(tmp_path: Path) -> None:
    line = debs.check_freshclam(HOST, tmp_path)
    assert line.startswith("freshclam: fresh.hdb from the private mirror http://127.0.0.1:")
    assert (tmp_path / "db/fresh.hdb").read_bytes() == (tmp_path / "mirror/fresh.hdb").read_bytes()
    config = (tmp_path / "freshclam.conf").read_text().splitlines()
    assert {"ExcludeDatabase main", "ExcludeDatabase daily", "ExcludeDatabase bytecode"} <= set(
        config
    )


def test_a_freshclam_that_fetches_nothing_fails_the_smoke(tmp_path: Path) -> None:
    # given a "freshclam" that exits 0 and fetches nothing
    runner = debs.Runner(programs={"freshclam": Path(shutil.which("true") or "/bin/true")}, env={})
    with pytest.raises(debs.BuildError, match="freshclam: exit 0"):
        debs.check_freshclam(runner, tmp_path)
