"""ClamAV for Lambda from Debian's arm64 packages, pinned by SHA-256: no container, no compiler.

Lambda's python3.13 runtime runs on Amazon Linux 2023 (glibc 2.34) and ships no ClamAV. Debian
12 builds ClamAV against glibc <= 2.34, so its arm64 binaries run there once their libraries come
along. This script:

  lock     resolves the packages of `packages.txt` to exact versions, URLs and SHA-256 digests
           from the Debian indexes (security updates first) and writes `packages.lock`;
  install  downloads the locked packages (verifying each digest), unpacks them without dpkg, and
           copies the PROGRAMS (clamscan, clamd, freshclam, sigtool) into DEST/clamav/bin and
           exactly the libraries they load (their DT_NEEDED closure) into DEST/clamav/lib;
  smoke    runs a built layer's arm64 programs under qemu-user on this machine, against a glibc
           from the locked `libc6` (used for nothing else): clamscan and clamd must find EICAR
           with a signature written on the spot and pass a clean file, freshclam must fetch a
           database from a mirror served on 127.0.0.1, sigtool must hash as the signature says.

All three read Debian's archive over https:// only (a redirect to http:// is refused) and trust
it as apt does, from the keyring down: a suite's InRelease counts only when gpgv finds in it a
good signature by a key of Debian's archive keyring (--keyring; debian-archive-keyring's by
default) over a strong digest, and only the text gpgv says was signed is read; that Release must
be the suite's own, dated no later than now and, where it says so, not past its Valid-Until; the
suite's Packages.xz must have the size and SHA-256 the Release gives; and every .deb must have
the SHA-256 both packages.lock and that verified index give (the size too). A lock entry the
signed indexes do not list, with the same version, URL and digest, fails the build: a stale or
hand-edited lock is never built from. Every package is verified before any is unpacked, and the
layer appears under DEST/clamav only once whole.

`install` fails the build when a library is missing from the packages or any file needs a glibc
newer than Lambda's: the two ways a binary copied from another distribution breaks at run time.
glibc itself is never copied: it must match the runtime's dynamic loader.

The workers run the copied programs with LD_LIBRARY_PATH=/opt/clamav/lib (engines.py does for
clamscan), so these libraries never shadow the runtime's own for Python.

    python3.13 debs.py lock
    python3.13 debs.py install --dest "$ARTIFACTS_DIR"
    python3.13 debs.py smoke --layer BUILD_DIR/ClamAvLayer

Each takes --keyring (or $DEBIAN_ARCHIVE_KEYRING) and --ca-bundle (or $DEBIAN_MIRROR_CA_BUNDLE:
the CA certificates a mirror's HTTPS certificate must chain to; the system's by default).
"""

from __future__ import annotations

import argparse
import email.utils
import functools
import hashlib
import http.client
import http.server
import io
import lzma
import os
import pwd
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, override

HERE = Path(__file__).resolve().parent
PACKAGE_LIST = HERE / "packages.txt"
LOCK_FILE = HERE / "packages.lock"
ARCH = "arm64"
# Where Debian puts arm64 libraries (/lib for the packages not yet moved under /usr).
LIBRARY_DIRS = ("usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu")
# What the layer runs, as Debian installs them; each lands in clamav/bin under its own name.
# clamscan: the one-shot scanner; clamd: the warm engine the scan worker drives over a Unix
# socket; freshclam: the definitions updater's downloader; sigtool: inspects databases (it adds
# no library to the others' closure, only its own 8 MB).
PROGRAMS = ("usr/bin/clamscan", "usr/sbin/clamd", "usr/bin/freshclam", "usr/bin/sigtool")
# The indexes `lock` reads for each Debian release, most preferred first: a security update wins
# over the point release. Packages come from bookworm unless packages.txt says `name@bullseye`.
RELEASES = {
    release: (
        ("https://deb.debian.org/debian-security", f"{release}-security"),
        ("https://deb.debian.org/debian", f"{release}-updates"),
        ("https://deb.debian.org/debian", release),
    )
    for release in ("bookworm", "bullseye")
}
DEFAULT_RELEASE = "bookworm"
# The Debian archive's signing keys (package debian-archive-keyring, which `make system-deps`
# installs): a suite's packages are trusted only through a Release signed by one of them.
DEFAULT_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
# Each suite's index of ARCH's packages, as the suite's Release lists it.
INDEX_PATH = f"main/binary-{ARCH}/Packages.xz"
# Far above any suite's InRelease (bookworm's: 150 kB): a server cannot make the build read more.
MAX_RELEASE_BYTES = 16 * 1024 * 1024
CLEARSIGNED = b"-----BEGIN PGP SIGNED MESSAGE-----"
# gpgv's status keywords, one per signature checked, saying what it found.
SIGNATURE_VERDICTS = frozenset({"GOODSIG", "BADSIG", "ERRSIG", "EXPSIG", "EXPKEYSIG", "REVKEYSIG"})
# Digests apt no longer accepts a Release signature over (OpenPGP's numbers for them): a
# collision would let one signature vouch for another text.
WEAK_DIGESTS = {"1": "MD5", "2": "SHA-1", "3": "RIPEMD-160"}
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
# Under qemu a program takes seconds where it takes a fraction of one natively; far above both.
SMOKE_TIMEOUT = 120.0


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


# --- the archive: HTTPS only, each suite's Release signed, each index by the Release's hash ------


@dataclass(frozen=True)
class Archive:
    """How Debian's archive is read: over https:// only (the server's certificate checked against
    ca_bundle, or against the system's CAs when None), each suite trusted only through a Release
    that gpgv finds signed by a key of keyring."""

    keyring: Path = DEFAULT_KEYRING
    ca_bundle: Path | None = None

    @functools.cached_property
    def _opener(self) -> urllib.request.OpenerDirector:
        # Only the HTTPS handler: no http://, file:// or ftp:// opener exists to fall back to.
        context = ssl.create_default_context(cafile=self.ca_bundle)
        opener = urllib.request.OpenerDirector()
        for handler in (
            urllib.request.HTTPSHandler(context=context),
            _HttpsOnlyRedirects(),
            urllib.request.HTTPDefaultErrorHandler(),
            urllib.request.HTTPErrorProcessor(),
        ):
            opener.add_handler(handler)
        return opener

    def _open(self, url: str, *, method: str, timeout: float) -> Any:
        if urllib.parse.urlsplit(url).scheme != "https":
            raise BuildError(f"{url}: refused: the Debian archive is read over https:// only")
        request = urllib.request.Request(url, method=method)  # noqa: S310 (https only, above)
        return self._opener.open(request, timeout=timeout)

    def read(self, url: str, *, limit: int) -> bytes:
        """The body at url, at most limit bytes of it (the caller checks the length it expects:
        a server sending more cannot fill the disk or the memory first)."""
        try:
            with self._open(url, method="GET", timeout=120) as response:
                data: bytes = response.read(limit)
                return data
        except OSError as error:  # URLError, HTTPError, a TLS or socket failure
            raise BuildError(f"{url}: {error}") from error

    def save(self, url: str, target: Path, *, limit: int) -> None:
        """The body at url into target, at most limit bytes of it."""
        try:
            with self._open(url, method="GET", timeout=120) as response, target.open("wb") as out:
                while limit > 0 and (chunk := response.read(min(CHUNK, limit))):
                    out.write(chunk)
                    limit -= len(chunk)
        except OSError as error:
            raise BuildError(f"{url}: {error}; run `debs.py lock` if it moved") from error

    def exists(self, url: str) -> bool:
        """Whether url can be downloaded (a HEAD request answered 2xx)."""
        try:
            with self._open(url, method="HEAD", timeout=30):
                return True
        except urllib.error.HTTPError:  # 404: an index can outlive its pool
            return False
        except OSError as error:  # no answer at all, or a TLS failure: not a "no"
            raise BuildError(f"{url}: {error}") from error


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another https:// URL: one to http:// would hand the download
    to anyone on the path (a Release's signature still holds there, but not its freshness)."""

    @override
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme != "https":
            raise BuildError(
                f"{req.full_url}: redirected to {newurl}: refused: the Debian archive is read "
                "over https:// only"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@dataclass(frozen=True)
class Release:
    """What a suite's signed Release says: which suite it is, when it was made and until when
    it holds, whether indexes are served by hash, and each index's SHA-256 and size."""

    codename: str
    date: datetime
    valid_until: datetime | None
    by_hash: bool
    indexes: Mapping[str, tuple[str, int]]


def signed_text(clearsigned: bytes, keyring: Path, *, source: str) -> str:
    """The text a clearsigned file (an InRelease) carries, as gpgv outputs it once a good
    signature by a key of keyring covers it: never the file's own bytes, where text outside the
    signed part would read as signed."""
    gpgv = shutil.which("gpgv")
    if gpgv is None:
        raise BuildError("gpgv is not installed (make system-deps; apt-get install gpgv)")
    if not keyring.is_file():
        raise BuildError(
            f"keyring {keyring} not found "
            "(make system-deps; apt-get install debian-archive-keyring)"
        )
    # One clearsigned message and nothing before it: apt refuses any other shape of InRelease.
    if not clearsigned.startswith(CLEARSIGNED) or clearsigned.count(CLEARSIGNED) != 1:
        raise BuildError(f"{source}: not a single clearsigned message: refused")
    with tempfile.TemporaryDirectory(prefix="clamav-gpgv-") as scratch:
        signed, output = Path(scratch) / "InRelease", Path(scratch) / "Release"
        signed.write_bytes(clearsigned)
        # An empty home of its own: no user's trustedkeys.kbx or gpg.conf joins the keyring.
        run = subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
            [gpgv, "--homedir", scratch, "--status-fd", "1", "--keyring", str(keyring.resolve()),
             "--output", str(output), str(signed)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        check_signatures(run.stdout, keyring, source=source, gpgv_said=run.stderr)
        return output.read_text()


def check_signatures(status: str, keyring: Path, *, source: str, gpgv_said: str = "") -> None:
    """gpgv's status lines (--status-fd) must show a good signature by a key of the keyring over
    a strong digest, and no bad one. gpgv's exit status alone will not do: Debian signs each
    Release with several keys, and a keyring that lacks one (a newer release's) makes gpgv exit
    2 even though another key's signature is good, as apt accepts."""
    signatures = _signatures(status)
    bad = [signature for signature in signatures if signature["verdict"] == "BADSIG"]
    if bad:
        raise BuildError(
            f"{source}: bad signature (key {bad[0]['key']}): its text is not what was signed"
        )
    if any(_is_good(signature) for signature in signatures):
        return
    if not signatures:  # no signature gpgv could even read: its own words say why
        raise BuildError(f"{source}: no signature: refused; gpgv: {gpgv_said.strip()[-500:]}")
    raise BuildError(f"{source}: {_why_untrusted(signatures, keyring)}: refused")


def _signatures(status: str) -> list[dict[str, str]]:
    """Each signature gpgv checked: its verdict (GOODSIG, BADSIG, ERRSIG, EXPKEYSIG...), key id
    and, from VALIDSIG, the OpenPGP number of its digest algorithm."""
    signatures: list[dict[str, str]] = []
    for line in status.splitlines():
        if not line.startswith("[GNUPG:] "):
            continue
        keyword, *arguments = line.removeprefix("[GNUPG:] ").split()
        if keyword == "NEWSIG" or (keyword in SIGNATURE_VERDICTS and not signatures):
            signatures.append({"verdict": "", "key": "", "digest": ""})
        if keyword in SIGNATURE_VERDICTS:
            signatures[-1] |= {"verdict": keyword, "key": arguments[0] if arguments else "?"}
        elif keyword == "NO_PUBKEY" and signatures:
            signatures[-1]["verdict"] = "NO_PUBKEY"
        elif keyword == "VALIDSIG" and signatures and len(arguments) > 7:
            signatures[-1]["digest"] = arguments[7]
    return signatures


def _is_good(signature: Mapping[str, str]) -> bool:
    # GOODSIG: good, by a key neither expired nor revoked (gpgv reports those as EXPKEYSIG and
    # REVKEYSIG instead).
    return signature["verdict"] == "GOODSIG" and signature["digest"] not in WEAK_DIGESTS


def _why_untrusted(signatures: list[dict[str, str]], keyring: Path) -> str:
    """Why none of the signatures counts, each reason once with the keys it applies to."""
    keys_by_reason: dict[str, list[str]] = {}
    for signature in signatures:
        keys_by_reason.setdefault(_untrusted_reason(signature, keyring), []).append(
            signature["key"]
        )
    return "; ".join(f"{reason} (key {', '.join(keys)})" for reason, keys in keys_by_reason.items())


def _untrusted_reason(signature: Mapping[str, str], keyring: Path) -> str:
    verdict = signature["verdict"]
    if verdict == "GOODSIG":  # good, but over a digest in WEAK_DIGESTS
        return f"signed over a weak digest ({WEAK_DIGESTS[signature['digest']]})"
    reasons = {
        "NO_PUBKEY": f"signed by a key not in the keyring {keyring}",
        "ERRSIG": "a signature gpgv could not check",
        "EXPKEYSIG": "signed by an expired key",
        "REVKEYSIG": "signed by a revoked key",
        "EXPSIG": "an expired signature",
    }
    return reasons.get(verdict, verdict)


def parse_release(text: str, *, source: str) -> Release:
    fields = _paragraph(text.partition("\n\n")[0])
    date = _release_time(fields, "Date", source=source)
    if date is None:
        raise BuildError(f"{source}: the signed Release has no Date: refused")
    indexes: dict[str, tuple[str, int]] = {}
    for line in fields.get("SHA256", "").splitlines():
        match line.split():
            case [digest, size, path] if size.isdigit():
                indexes[path] = (digest, int(size))
            case []:
                continue
            case _:
                raise BuildError(
                    f"{source}: the signed Release has a malformed SHA256 line {line!r}"
                )
    return Release(
        codename=fields.get("Codename", ""),
        date=date,
        valid_until=_release_time(fields, "Valid-Until", source=source),
        by_hash=fields.get("Acquire-By-Hash") == "yes",
        indexes=indexes,
    )


def _release_time(fields: Mapping[str, str], name: str, *, source: str) -> datetime | None:
    value = fields.get(name)
    if value is None:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError) as error:
        raise BuildError(f"{source}: {name} {value!r} is not a date") from error
    if moment.tzinfo is None:  # "-0000": a time in no known zone
        raise BuildError(f"{source}: {name} {value!r} names no time zone")
    return moment


def check_release(release: Release, suite: str, *, source: str, now: datetime) -> None:
    """A Release must be the suite's own (a signed Release of another suite, replayed, is
    refused), made no later than now and, when it says how long it holds (the security
    archive's hold a week), not expired: a mirror replaying an old signed Release would
    otherwise keep serving packages with known holes."""
    if release.codename != suite:
        raise BuildError(
            f"{source}: the signed Release is suite {release.codename!r}, not {suite!r}"
        )
    if release.date > now:
        raise BuildError(f"{source}: the Release is not valid yet: Date {release.date} is ahead")
    if release.valid_until is not None and release.valid_until < now:
        raise BuildError(
            f"{source}: expired Release: Valid-Until {release.valid_until} has passed "
            f"(now {now:%Y-%m-%d %H:%M:%S} UTC)"
        )


def verified_release(archive: Archive, mirror: str, suite: str) -> Release:
    """The suite's InRelease, its signature verified, its Date and Valid-Until checked."""
    url = f"{mirror}/dists/{suite}/InRelease"
    text = signed_text(archive.read(url, limit=MAX_RELEASE_BYTES), archive.keyring, source=url)
    release = parse_release(text, source=url)
    check_release(release, suite, source=url, now=datetime.now(UTC))
    return release


def verified_index(archive: Archive, mirror: str, suite: str) -> str:
    """The suite's Packages index for ARCH, refused unless its size and SHA-256 are those the
    signed Release gives."""
    release = verified_release(archive, mirror, suite)
    if INDEX_PATH not in release.indexes:
        raise BuildError(
            f"{mirror}/dists/{suite}/InRelease: the signed Release lists no {INDEX_PATH}"
        )
    digest, size = release.indexes[INDEX_PATH]
    # By hash where the archive offers it (Debian's does): the file of exactly this Release,
    # even when the mirror publishes the next one between the two downloads.
    path = (
        f"{INDEX_PATH.rpartition('/')[0]}/by-hash/SHA256/{digest}"
        if release.by_hash
        else INDEX_PATH
    )
    url = f"{mirror}/dists/{suite}/{path}"
    data = archive.read(url, limit=size + 1)  # one byte over: a longer file shows as longer
    actual = hashlib.sha256(data).hexdigest()
    if len(data) != size or actual != digest:
        raise BuildError(
            f"{url}: index hash mismatch: {len(data)} bytes with SHA-256 {actual}, the signed "
            f"Release says {size} bytes with SHA-256 {digest}"
        )
    return lzma.decompress(data).decode()


def index_stanzas(archive: Archive, mirror: str, suite: str) -> Iterator[dict[str, str]]:
    """Each package of the suite's verified Packages index, as its fields."""
    for block in verified_index(archive, mirror, suite).split("\n\n"):
        fields = _paragraph(block)
        if "Package" in fields:
            yield fields


def _paragraph(block: str) -> dict[str, str]:
    """One deb822 paragraph: field -> value, the lines of a folded value joined by newlines."""
    fields: dict[str, str] = {}
    key = ""
    for line in block.splitlines():
        if line[:1].isspace() and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


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


def lock(archive: Archive) -> list[LockedPackage]:
    """The newest downloadable version of each wanted package across its release's signed
    indexes."""
    wanted = wanted_packages()
    found: dict[str, LockedPackage] = {}
    for release in sorted(set(wanted.values())):
        for mirror, suite in RELEASES[release]:
            for stanza in index_stanzas(archive, mirror, suite):
                name, version = stanza["Package"], stanza["Version"]
                if wanted.get(name) != release:
                    continue
                if name in found and compare_versions(version, found[name].version) <= 0:
                    continue
                url = f"{mirror}/{stanza['Filename']}"
                # An index can outlive its pool (bullseye-security after its LTS ended): a
                # package only counts where it can be downloaded.
                if archive.exists(url):
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


# --- install -------------------------------------------------------------------------------------


def locked_packages() -> list[LockedPackage]:
    lines = LOCK_FILE.read_text().splitlines()
    return [LockedPackage.parse(line) for line in lines if line and not line.startswith("#")]


@dataclass(frozen=True)
class Vouched:
    """A locked package as a verified index lists it, with the size its download must have."""

    package: LockedPackage
    size: int


def vouched_packages(archive: Archive) -> list[Vouched]:
    """Every locked package, each found in a signed index of its release with the lock's
    version, URL and SHA-256: the lock pins what is built, the archive's signature vouches that
    Debian published it (a lock edited by hand, or written from a tampered index, fails here)."""
    wanted = wanted_packages()
    locked = locked_packages()
    unlisted = sorted(package.name for package in locked if package.name not in wanted)
    if unlisted:
        raise BuildError(f"packages.lock names packages packages.txt does not list: {unlisted}")
    listed: dict[str, dict[str, str]] = {}
    for release in sorted({wanted[package.name] for package in locked}):
        for mirror, suite in RELEASES[release]:
            for stanza in index_stanzas(archive, mirror, suite):
                if wanted.get(stanza["Package"]) == release:
                    listed.setdefault(f"{mirror}/{stanza['Filename']}", stanza)
    return [_vouched(package, listed.get(package.url), wanted[package.name]) for package in locked]


def _vouched(package: LockedPackage, stanza: Mapping[str, str] | None, release: str) -> Vouched:
    if stanza is None or (stanza["Package"], stanza["Version"]) != (package.name, package.version):
        raise BuildError(
            f"{package.name} {package.version} ({package.url}) is in no signed index of "
            f"{release}: packages.lock is stale or was edited; run `debs.py lock`"
        )
    if stanza["SHA256"] != package.sha256:
        raise BuildError(
            f"{package.name} {package.version}: packages.lock pins SHA-256 {package.sha256}, "
            f"the signed index says {stanza['SHA256']}"
        )
    return Vouched(package, int(stanza["Size"]))


def download(vouched: Vouched, cache: Path, archive: Archive) -> Path:
    """The package file, from the cache when its digest matches, else from the mirror; a
    download is kept only when its size and SHA-256 are those the lock and the signed index
    give."""
    package = vouched.package
    target = cache / f"{package.name}_{package.version.replace(':', '%3a')}_{ARCH}.deb"
    if target.is_file() and _sha256(target) == package.sha256:
        return target
    partial = target.with_suffix(".part")
    try:
        archive.save(package.url, partial, limit=vouched.size + 1)  # a longer file shows longer
        size, digest = partial.stat().st_size, _sha256(partial)
        if (size, digest) != (vouched.size, package.sha256):
            raise BuildError(
                f"{package.url}: deb hash mismatch: {size} bytes with SHA-256 {digest}, the lock "
                f"and the signed index say {vouched.size} bytes with SHA-256 {package.sha256}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def verified_debs(archive: Archive, cache: Path, *, names: Callable[[str], bool]) -> list[Path]:
    """The locked packages whose names pass `names`, every one downloaded and verified before
    the caller unpacks any."""
    cache.mkdir(parents=True, exist_ok=True)
    return [
        download(vouched, cache, archive)
        for vouched in vouched_packages(archive)
        if names(vouched.package.name)
    ]


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


def install(dest: Path, cache: Path, archive: Archive) -> list[str]:
    """Copies the PROGRAMS and their library closure under dest/clamav; returns what it copied.
    The layer appears there only once whole: a build that fails leaves no dest/clamav."""
    layer, staging = dest / "clamav", dest / "clamav.partial"
    shutil.rmtree(layer, ignore_errors=True)  # a previous build's: not this build's result
    shutil.rmtree(staging, ignore_errors=True)
    debs = verified_debs(archive, cache, names=lambda name: name != SYSROOT_PACKAGE)
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


def copy_programs(root: Path, target: Path) -> list[str]:
    """Each of PROGRAMS (found under root) into target/bin, and every library any of them loads
    into target/lib, each file checked against Lambda's glibc first; returns what it copied."""
    programs = [root / program for program in PROGRAMS]
    bin_dir, lib_dir = target / "bin", target / "lib"
    bin_dir.mkdir(parents=True, exist_ok=True)
    lib_dir.mkdir(parents=True, exist_ok=True)
    copied: list[str] = []
    for program in programs:
        check_glibc(program)
        shutil.copy2(program, bin_dir / program.name)
        copied.append(f"bin/{program.name}")
    for soname, path in sorted(library_closure(programs, root).items()):
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


def layer_runner(layer: Path, sysroot: Path) -> Runner:
    """The layer's programs under qemu against sysroot's glibc, with the layer's libraries and
    nothing else in their environment: no PATH, no proxy, no credentials, as the workers run
    them on Lambda."""
    bin_dir = layer / "clamav" / "bin"
    return Runner(
        programs={Path(program).name: bin_dir / Path(program).name for program in PROGRAMS},
        env={"LD_LIBRARY_PATH": str(layer / "clamav" / "lib")},
        prefix=(QEMU, "-L", str(sysroot)),
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
    that fails."""
    if shutil.which(QEMU) is None:
        raise BuildError(f"{QEMU} is not installed (apt-get install qemu-user-static)")
    locked = {package.name: package for package in locked_packages()}
    version = upstream_version(locked["clamav-daemon"].version)
    with tempfile.TemporaryDirectory(prefix="clamav-smoke-") as scratch:
        work = Path(scratch)
        (libc,) = verified_debs(archive, cache, names=lambda name: name == SYSROOT_PACKAGE)
        unpack(libc, work / "sysroot")
        runner = layer_runner(layer, work / "sysroot")
        samples = write_samples(work / "samples")
        yield check_clamscan(runner, samples)
        yield check_sigtool(runner, samples)
        yield from check_clamd(runner, samples, work / "clamd", version=version)
        yield check_freshclam(runner, work / "freshclam")


def upstream_version(version: str) -> str:
    """ClamAV's own version in a Debian one: 1.4.6 of 1.4.6+dfsg-0+deb12u1."""
    return _version_parts(version)[1].partition("+")[0]


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


def write_lock(packages: list[LockedPackage]) -> None:
    """packages.lock, replaced whole: an interrupted lock leaves the previous one."""
    header = "# package\tversion\turl\tsha256 (written by `debs.py lock`; do not edit)"
    lines = [header, *(package.line() for package in packages)]
    partial = LOCK_FILE.with_suffix(".partial")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(LOCK_FILE)


def _archive_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--keyring",
        type=Path,
        default=Path(os.environ.get("DEBIAN_ARCHIVE_KEYRING", DEFAULT_KEYRING)),
        help="the OpenPGP keys a suite's Release must be signed by (default: Debian's archive "
        "keyring, or $DEBIAN_ARCHIVE_KEYRING)",
    )
    ca_bundle = os.environ.get("DEBIAN_MIRROR_CA_BUNDLE")
    command.add_argument(
        "--ca-bundle",
        type=Path,
        default=Path(ca_bundle) if ca_bundle else None,
        help="the CA certificates the mirror's HTTPS certificate must chain to (default: the "
        "system's, or $DEBIAN_MIRROR_CA_BUNDLE)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lock_command = commands.add_parser("lock", help="resolve packages.txt into packages.lock")
    install_command = commands.add_parser("install", help="build the layer into DEST")
    install_command.add_argument("--dest", type=Path, required=True)
    smoke_command = commands.add_parser("smoke", help="run a built layer's programs under qemu")
    smoke_command.add_argument("--layer", type=Path, required=True)
    for command in (install_command, smoke_command):
        command.add_argument(
            "--cache",
            type=Path,
            default=Path(os.environ.get("CLAMAV_DEB_CACHE", Path.home() / ".cache/filejobs/debs")),
            help="where downloaded packages are kept between builds (verified on every use)",
        )
    for command in (lock_command, install_command, smoke_command):
        _archive_options(command)
    arguments = parser.parse_args(argv)
    archive = Archive(keyring=arguments.keyring, ca_bundle=arguments.ca_bundle)
    try:
        if arguments.command == "lock":
            packages = lock(archive)
            write_lock(packages)
            print(f"locked {len(packages)} packages in {LOCK_FILE.name}")
        elif arguments.command == "install":
            copied = install(arguments.dest, arguments.cache, archive)
            print(f"clamav layer: {', '.join(copied)}")
        else:
            for line in smoke(arguments.layer, arguments.cache, archive):
                print(f"clamav layer smoke test (arm64 under qemu): {line}", flush=True)
    except BuildError as error:
        print(f"debs.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
