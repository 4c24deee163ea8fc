"""ClamAV for Lambda from Debian's arm64 packages, pinned by SHA-256: no container, no compiler.

Lambda's python3.13 runtime runs on Amazon Linux 2023 (glibc 2.34) and ships no ClamAV. Debian
12 builds ClamAV itself against glibc <= 2.34, but the C++ runtime under its libxml2 (ICU 72,
GCC 12's libstdc++) needs 2.35/2.36. So the layer carries Debian 12's glibc with its own dynamic
loader (clamav/glibc/), the programs in clamav/libexec/, and in clamav/bin/ a launcher per
program (LAUNCHER, a POSIX shell script) that starts it through that loader with the layer's
libraries alone (`glibc/ld-linux-aarch64.so.1 --library-path glibc:lib libexec/clamd ...`):
whoever runs /opt/clamav/bin/clamd gets clamd on glibc 2.36, unchanged. This script:

  lock     resolves the packages of `packages.txt` to exact versions, URLs and SHA-256 digests
           from the Debian indexes (security updates first) and writes `packages.lock`;
  install  downloads the locked packages (verifying each digest), unpacks them without dpkg, and
           copies the PROGRAMS (clamscan, clamd, freshclam, sigtool) into DEST/clamav/libexec
           with a launcher each in DEST/clamav/bin, glibc's libraries and loader into
           DEST/clamav/glibc and exactly the other libraries they load (their DT_NEEDED
           closure) into DEST/clamav/lib;
  smoke    runs a built layer's arm64 programs under qemu-user on this machine, each started as
           its launcher starts it (through the layer's loader, with no library of this
           machine's): clamscan and clamd must find EICAR
           with a signature written on the spot and pass a clean file, freshclam must fetch a
           database from a mirror served on 127.0.0.1, sigtool must hash as the signature says.

All three read and trust Debian's archive as debian_packages.py (beside this folder) says:
HTTPS only, each suite's Release signed by Debian's archive keyring, each .deb by the SHA-256 of
both packages.lock and the signed index. packages.txt and packages.lock are in layers/clamav,
beside what the stack ships; this builder is in infra/layers/clamav, out of that tree.

`install` fails the build when a library is missing from the packages or any file needs a glibc
newer than the bundled one: the two ways a binary copied from another distribution breaks at
run time. glibc is kept apart (glibc/, not lib/): the workers still run the programs with
LD_LIBRARY_PATH=/opt/clamav/lib (processors/scan/environment.py), which reaches the launcher's
shell (the runtime's /bin/sh, which loads none of lib/'s libraries) and which the loader's
--library-path then replaces, so neither glibc ever meets the other's loader.

    python3.13 infra/layers/clamav/debs.py lock
    python3.13 infra/layers/clamav/debs.py install --dest "$ARTIFACTS_DIR"
    python3.13 infra/layers/clamav/debs.py smoke --layer BUILD_DIR/ClamAvLayer

Each takes --keyring (or $DEBIAN_ARCHIVE_KEYRING) and --ca-bundle (or $DEBIAN_MIRROR_CA_BUNDLE:
the CA certificates a mirror's HTTPS certificate must chain to; the system's by default).
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import http.server
import os
import pwd
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # debian_packages.py, shared with the LibreOffice layer
# What the layer is built from lives with what ships (layers/clamav), this builder in infra/.
LISTS = HERE.parents[2] / "layers" / "clamav"

import debian_packages as debian  # noqa: E402
from debian_packages import (  # noqa: E402
    QEMU,
    SYSROOT_PACKAGE,
    Archive,
    BuildError,
    LockedPackage,
    check_glibc,
    compare_versions,
    glibc_versions,
    library_closure,
    needed,
    unpack,
)

PACKAGE_LIST = LISTS / "packages.txt"
LOCK_FILE = LISTS / "packages.lock"
# Packages come from bookworm unless packages.txt says `name@bullseye`.
DEFAULT_RELEASE = "bookworm"
# What the layer runs, as Debian installs them; each lands in clamav/bin under its own name.
# clamscan: the one-shot scanner; clamd: the warm engine the scan worker drives over a Unix
# socket; freshclam: the definitions updater's downloader; sigtool: inspects databases (it adds
# no library to the others' closure, only its own 8 MB).
PROGRAMS = ("usr/bin/clamscan", "usr/sbin/clamd", "usr/bin/freshclam", "usr/bin/sigtool")
# The bundled glibc's loader, in the layer's glibc/.
LOADER = "ld-linux-aarch64.so.1"
# The launcher in bin/ for each program: the layer is found from the launcher's own path (it is
# run by its absolute path, /opt/clamav/bin/PROGRAM), the program started by the layer's loader
# with the layer's glibc and libraries (--library-path replaces LD_LIBRARY_PATH for it).
LAUNCHER = """#!/bin/sh
# ClamAV's {program} (Debian 12) on the layer's own glibc: see infra/layers/clamav/debs.py.
layer=$(cd "${{0%/*}}/.." && pwd -P) || exit 127
exec "$layer/glibc/{loader}" --library-path "$layer/glibc:$layer/lib" \\
  "$layer/libexec/{program}" "$@"
"""
EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
# Under qemu a program takes seconds where it takes a fraction of one natively; far above both.
SMOKE_TIMEOUT = 120.0
# What tests and callers read through this script.
__all__ = ["Archive", "BuildError", "LockedPackage", "compare_versions", "glibc_versions", "needed"]


def packages() -> debian.PackageList:
    """The ClamAV layer's list and lock (read at each call: tests point them elsewhere)."""
    return debian.PackageList(PACKAGE_LIST, LOCK_FILE, default_release=DEFAULT_RELEASE)


def wanted_packages() -> dict[str, str]:
    """package -> Debian release, from packages.txt (`name` or `name@release`)."""
    return packages().wanted()


def lock(archive: Archive) -> list[LockedPackage]:
    return debian.lock(archive, packages())


def locked_packages() -> list[LockedPackage]:
    return packages().locked()


def write_lock(locked: list[LockedPackage]) -> None:
    packages().write_lock(locked)


def verified_debs(archive: Archive, cache: Path, *, names: Callable[[str], bool]) -> list[Path]:
    return debian.verified_debs(archive, cache, packages(), names=names)


def install(dest: Path, cache: Path, archive: Archive) -> list[str]:
    """Copies the PROGRAMS and their library closure under dest/clamav; returns what it copied.
    The layer appears there only once whole: a build that fails leaves no dest/clamav."""
    layer, staging = dest / "clamav", dest / "clamav.partial"
    shutil.rmtree(layer, ignore_errors=True)  # a previous build's: not this build's result
    shutil.rmtree(staging, ignore_errors=True)
    debs = verified_debs(archive, cache, names=lambda _name: True)
    try:
        with tempfile.TemporaryDirectory(prefix="clamav-debs-") as scratch:
            root = Path(scratch)
            for deb in debs:
                unpack(deb, root)
            copied = copy_programs(root, staging)
        staging.rename(layer)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return copied


def bundled_glibc() -> tuple[int, ...]:
    """The glibc the layer carries (the locked libc6's): (2, 36) of 2.36-9+deb12u14."""
    (libc,) = (p for p in locked_packages() if p.name == SYSROOT_PACKAGE)
    return tuple(int(part) for part in debian.upstream_part(libc.version).split(".")[:2])


def copy_programs(root: Path, target: Path, *, glibc: tuple[int, ...] | None = None) -> list[str]:
    """Each of PROGRAMS (found under root) into target/libexec with its launcher in target/bin,
    glibc's libraries (its loader included) into target/glibc and every other library any of
    them loads into target/lib, each file checked against the bundled glibc (`glibc`, the
    locked libc6's by default) first; returns what it copied."""
    glibc = glibc or bundled_glibc()
    programs = [root / program for program in PROGRAMS]
    folders = {name: target / name for name in ("bin", "libexec", "glibc", "lib")}
    for made in folders.values():
        made.mkdir(parents=True, exist_ok=True)
    copied: list[str] = []
    for program in programs:
        check_glibc(program, glibc, whose="the layer's bundled glibc")
        shutil.copy2(program, folders["libexec"] / program.name)
        launcher = folders["bin"] / program.name
        launcher.write_text(LAUNCHER.format(program=program.name, loader=LOADER))
        launcher.chmod(0o755)
        copied += [f"bin/{program.name}", f"libexec/{program.name}"]
    closure = library_closure(programs, root, system=frozenset())
    if LOADER not in closure:
        raise BuildError(f"no {LOADER} in the closure: libc6 is not locked")
    for soname, path in sorted(closure.items()):
        check_glibc(path, glibc, whose="the layer's bundled glibc")
        folder = "glibc" if soname in debian.GLIBC_LIBRARIES else "lib"
        # Under its soname, the name the loader looks for (the packages' symlinks dropped).
        shutil.copy2(path.resolve(), folders[folder] / soname)
        copied.append(f"{folder}/{soname}")
    return copied


# --- smoke ---------------------------------------------------------------------------------------

# The smoke's samples by file name, and what every check must report for each (an .hdb signature
# is reported with .UNOFFICIAL appended).
EXPECTED = {"eicar.com": "Smoke.EICAR.UNOFFICIAL FOUND", "clean.txt": "OK"}


@dataclass(frozen=True)
class Runner:
    """How the smoke starts a program: its file by name, what precedes it on the command line
    (qemu, for the layer's arm64 files) and the whole of its environment."""

    programs: Mapping[str, Path]
    env: Mapping[str, str]
    prefix: tuple[str, ...] = ()

    def argv(self, program: str, *arguments: str) -> list[str]:
        return [*self.prefix, str(self.programs[program]), *arguments]

    def run(self, program: str, *arguments: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
                self.argv(program, *arguments), env=dict(self.env), stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=SMOKE_TIMEOUT, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as error:  # killed by subprocess.run
            raise BuildError(f"{program} still running after {SMOKE_TIMEOUT:.0f} s") from error

    def start(self, program: str, *arguments: str, log: Path) -> subprocess.Popen[bytes]:
        """The program in the background, its output (both streams) to log."""
        with log.open("wb") as out:
            return subprocess.Popen(  # noqa: S603 (a fixed argument list, no shell)
                self.argv(program, *arguments), env=dict(self.env), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip


def layer_runner(layer: Path) -> Runner:
    """The layer's programs under qemu as their launchers start them (qemu cannot run the
    launcher itself: its shell is this machine's): the layer's loader with the layer's glibc
    and libraries, and nothing else in their environment but what the workers set (no PATH, no
    proxy, no credentials), as on Lambda."""
    clamav = layer / "clamav"
    return Runner(
        programs={Path(p).name: clamav / "libexec" / Path(p).name for p in PROGRAMS},
        env={"LD_LIBRARY_PATH": str(clamav / "lib")},
        prefix=(
            QEMU,
            str(clamav / "glibc" / LOADER),
            "--library-path",
            f"{clamav / 'glibc'}:{clamav / 'lib'}",
        ),
    )


@dataclass(frozen=True)
class Samples:
    """What the checks scan: EICAR, a clean file, and a database directory detecting EICAR."""

    eicar: Path
    clean: Path
    database: Path


def hdb_signature(data: bytes, name: str) -> str:
    """A ClamAV .hdb line: a file's MD5 and size, and the name to report it by."""
    digest = hashlib.md5(data).hexdigest()  # noqa: S324 (ClamAV .hdb signatures are MD5)
    return f"{digest}:{len(data)}:{name}"


def write_samples(work: Path) -> Samples:
    samples = Samples(work / "eicar.com", work / "clean.txt", work / "db")
    samples.database.mkdir(parents=True)
    samples.eicar.write_bytes(EICAR)
    samples.clean.write_text("nothing to see here\n")
    (samples.database / "smoke.hdb").write_text(hdb_signature(EICAR, "Smoke.EICAR") + "\n")
    return samples


def smoke(layer: Path, cache: Path, archive: Archive) -> Iterator[str]:
    """Runs the layer's programs under qemu: one line per check passed, BuildError at the first
    that fails. (cache and archive: unused, every command takes them.)"""
    if shutil.which(QEMU) is None:
        raise BuildError(f"{QEMU} is not installed (apt-get install qemu-user-static)")
    locked = {package.name: package for package in locked_packages()}
    version = upstream_version(locked["clamav-daemon"].version)
    with tempfile.TemporaryDirectory(prefix="clamav-smoke-") as scratch:
        work = Path(scratch)
        runner = layer_runner(layer)
        samples = write_samples(work / "samples")
        yield check_clamscan(runner, samples)
        yield check_sigtool(runner, samples)
        yield from check_clamd(runner, samples, work / "clamd", version=version)
        yield check_freshclam(runner, work / "freshclam")


def upstream_version(version: str) -> str:
    """ClamAV's own version in a Debian one: 1.4.6 of 1.4.6+dfsg-0+deb12u1."""
    return debian.upstream_part(version).partition("+")[0]


def check_clamscan(runner: Runner, samples: Samples) -> str:
    run = runner.run(
        "clamscan", "--no-summary", "--stdout", f"--database={samples.database}",
        str(samples.eicar), str(samples.clean),
    )  # fmt: skip
    seen = dict(line.rpartition("/")[2].partition(": ")[::2] for line in run.stdout.splitlines())
    if run.returncode != 1 or seen != EXPECTED:
        raise BuildError(f"clamscan: exit {run.returncode}, {run.stdout}{run.stderr}")
    return f"clamscan: {_verdicts(seen)}"


def check_sigtool(runner: Runner, samples: Samples) -> str:
    run = runner.run("sigtool", "--md5", str(samples.eicar))
    expected = hdb_signature(EICAR, samples.eicar.name)
    if run.returncode != 0 or run.stdout.strip() != expected:
        raise BuildError(f"sigtool --md5: exit {run.returncode}, {run.stdout}{run.stderr}")
    return f"sigtool: --md5 {samples.eicar.name} -> {expected} (the smoke signature's hash)"


def _verdicts(results: Mapping[str, str]) -> str:
    return "; ".join(f"{name}: {verdict}" for name, verdict in sorted(results.items()))


# --- smoke: clamd --------------------------------------------------------------------------------


def clamd_config(socket_path: Path, database: Path, temporary: Path) -> str:
    """A clamd.conf (passed by --config-file, for /etc/clamav/clamd.conf) as the scan worker
    starts clamd: in the foreground, so that its starter holds its process and output (a daemon
    would detach from both); on a Unix socket of its own (by default there is none); and every
    path it would otherwise take from its compiled-in defaults named (/var/lib/clamav, syslog),
    none of which exists or is writable on Lambda. No LogFile: in the foreground clamd logs to
    stdout."""
    lines = (
        "Foreground yes",
        f"LocalSocket {socket_path}",
        f"DatabaseDirectory {database}",
        f"TemporaryDirectory {temporary}",
        "LogSyslog no",
    )
    return "".join(f"{line}\n" for line in lines)


def check_clamd(runner: Runner, samples: Samples, work: Path, *, version: str) -> Iterator[str]:
    """clamd started with its own config must answer PING and VERSION, then find EICAR and pass
    the clean file by FILDES (a descriptor passed over the socket) and by INSTREAM, and stop."""
    work.mkdir(parents=True)
    socket_path, config, log = work / "clamd.sock", work / "clamd.conf", work / "clamd.log"
    config.write_text(clamd_config(socket_path, samples.database, work))
    started = time.monotonic()
    clamd = runner.start("clamd", f"--config-file={config}", log=log)
    try:
        _await_pong(clamd, socket_path, log)
        yield f"clamd: PING -> PONG {time.monotonic() - started:.1f} s after start"
        reply = clamd_request(socket_path, _sends(b"zVERSION\0"))
        # With only unofficial databases loaded there is no "/<daily version>/<date>" suffix.
        if reply.partition("/")[0] != f"ClamAV {version}":
            raise BuildError(f"clamd: VERSION -> {reply!r}, the lock has ClamAV {version}")
        yield f"clamd: VERSION -> {reply}"
        files = (samples.eicar, samples.clean)
        for command, scan in (("FILDES", clamd_fildes), ("INSTREAM", clamd_instream)):
            replies = {file.name: scan(socket_path, file) for file in files}
            verdicts = {name: reply.split(": ", 1)[-1] for name, reply in replies.items()}
            if verdicts != EXPECTED:
                raise BuildError(f"clamd: {command} -> {replies}{_tail(log)}")
            yield f"clamd: {command} {_verdicts(verdicts)}"
        yield _shut_down(clamd, socket_path, log)
    except OSError as error:  # its socket went away, or an answer did not come in time
        raise BuildError(f"clamd: {error!r}{_tail(log)}") from error
    finally:
        if clamd.poll() is None:
            clamd.kill()
            clamd.wait(timeout=SMOKE_TIMEOUT)


def clamd_request(socket_path: Path, send: Callable[[socket.socket], None]) -> str:
    """One command on a connection of its own to clamd's socket, in the `z` form (NUL-terminated
    both ways); returns the reply without its NUL, "" if clamd closed without one."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(SMOKE_TIMEOUT)
        connection.connect(str(socket_path))
        send(connection)
        reply = b""
        while not reply.endswith(b"\0") and (chunk := connection.recv(4096)):
            reply += chunk
    return reply.removesuffix(b"\0").decode()


def _sends(command: bytes) -> Callable[[socket.socket], None]:
    return lambda connection: connection.sendall(command)


def clamd_fildes(socket_path: Path, file: Path) -> str:
    """FILDES: clamd scans an open file passed over the socket (SCM_RIGHTS), as the worker sends
    files: clamd needs no access to their paths."""
    descriptor = os.open(file, os.O_RDONLY)

    def send(connection: socket.socket) -> None:
        connection.sendall(b"zFILDES\0")
        # As clamdscan does: the descriptor rides on a single byte after the command.
        socket.send_fds(connection, [b"\0"], [descriptor])

    try:
        return clamd_request(socket_path, send)
    finally:
        os.close(descriptor)


def clamd_instream(socket_path: Path, file: Path) -> str:
    """INSTREAM: the bytes in chunks, each after its length (4 bytes, big-endian); 0 ends it."""
    data = file.read_bytes()
    stream = struct.pack(">I", len(data)) + data + struct.pack(">I", 0)
    return clamd_request(socket_path, _sends(b"zINSTREAM\0" + stream))


def _await_pong(clamd: subprocess.Popen[bytes], socket_path: Path, log: Path) -> None:
    """Until clamd answers PING: it opens its socket only once its databases are loaded."""
    deadline = time.monotonic() + SMOKE_TIMEOUT
    while time.monotonic() < deadline:
        if clamd.poll() is not None:
            raise BuildError(f"clamd exited ({clamd.returncode}) before answering PING{_tail(log)}")
        try:
            reply = clamd_request(socket_path, _sends(b"zPING\0"))
        except OSError:  # no socket yet, or not listening yet
            time.sleep(0.1)
            continue
        if reply != "PONG":
            raise BuildError(f"clamd: PING -> {reply!r}{_tail(log)}")
        return
    raise BuildError(f"clamd did not answer PING within {SMOKE_TIMEOUT:.0f} s{_tail(log)}")


def _shut_down(clamd: subprocess.Popen[bytes], socket_path: Path, log: Path) -> str:
    clamd_request(socket_path, _sends(b"zSHUTDOWN\0"))  # no reply: clamd closes and exits
    try:
        code = clamd.wait(timeout=SMOKE_TIMEOUT)
    except subprocess.TimeoutExpired as error:
        raise BuildError(f"clamd did not stop on SHUTDOWN{_tail(log)}") from error
    if code != 0:
        raise BuildError(f"clamd exited ({code}) on SHUTDOWN{_tail(log)}")
    return "clamd: SHUTDOWN -> exit 0"


def _tail(log: Path) -> str:
    return f"\n{log.name}:\n{log.read_text(errors='replace')[-2000:]}"


# --- smoke: freshclam ----------------------------------------------------------------------------

# On Lambda freshclam also needs CURL_CA_BUNDLE=/etc/pki/tls/certs/ca-bundle.crt in its
# environment for HTTPS: Debian's libcurl looks for /etc/ssl/certs/ca-certificates.crt, which
# Amazon Linux does not have, and libfreshclam hands that variable to CURLOPT_CAINFO (OpenSSL's
# SSL_CERT_FILE does nothing: libcurl names its CA file itself). The smoke's mirror is plain HTTP.


def freshclam_config(database: Path, mirror: str, custom_url: str, *, owner: str) -> str:
    """A freshclam.conf (passed by --config-file, for /etc/clamav/freshclam.conf) for a private
    mirror with the official databases excluded. Every path freshclam would take from its
    compiled-in defaults is named (/var/lib/clamav; no UpdateLogFile, no syslog). DatabaseOwner
    is the user running it: freshclam reads it only when started as root (never on Lambda),
    to give the database directory to that user and switch to it, and the default, clamav,
    would then be locked out of a scratch directory only its creator may enter."""
    lines = (
        f"DatabaseDirectory {database}",
        f"DatabaseOwner {owner}",
        # A private mirror also turns off the version check by DNS (current.cvd.clamav.net).
        f"PrivateMirror {mirror}",
        f"DatabaseCustomURL {custom_url}",
        "ExcludeDatabase main",
        "ExcludeDatabase daily",
        "ExcludeDatabase bytecode",
        "Bytecode no",
        "LogSyslog no",
    )
    return "".join(f"{line}\n" for line in lines)


def check_freshclam(runner: Runner, work: Path) -> str:
    """freshclam must fetch a database written now (so nothing else could have put it there)
    from a mirror served on 127.0.0.1 into its DatabaseDirectory."""
    served, database, config = work / "mirror", work / "db", work / "freshclam.conf"
    served.mkdir(parents=True)
    database.mkdir()
    fresh = hdb_signature(os.urandom(64), "Smoke.Fresh") + "\n"
    (served / "fresh.hdb").write_text(fresh)
    owner = pwd.getpwuid(os.geteuid()).pw_name
    with serving(served) as mirror:
        config.write_text(freshclam_config(database, mirror, f"{mirror}/fresh.hdb", owner=owner))
        run = runner.run("freshclam", f"--config-file={config}", f"--datadir={database}")
    arrived = database / "fresh.hdb"
    if run.returncode != 0 or not arrived.is_file() or arrived.read_text() != fresh:
        raise BuildError(f"freshclam: exit {run.returncode}, {run.stdout}{run.stderr}")
    return f"freshclam: fresh.hdb from the private mirror {mirror} is in its DatabaseDirectory"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a directory without writing a line to stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serving(directory: Path) -> Iterator[str]:
    """directory over HTTP on 127.0.0.1 only, at a free port, as a mirror; yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="smoke-mirror", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=SMOKE_TIMEOUT)


def _installed(dest: Path, cache: Path, archive: Archive) -> list[str]:
    return [", ".join(install(dest, cache, archive))]


SCRIPT = debian.LayerScript(
    name="clamav",
    description=__doc__.split("\n\n")[0],
    packages=packages,
    install=_installed,
    smoke=smoke,
    smoke_help="run a built layer's programs under qemu",
    cache_variable="CLAMAV_DEB_CACHE",
)


def main(argv: list[str] | None = None) -> int:
    return SCRIPT.main(argv)


if __name__ == "__main__":
    sys.exit(main())
