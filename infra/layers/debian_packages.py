"""Debian's arm64 packages for a Lambda layer, pinned by SHA-256 and trusted as apt trusts them:
no container, no compiler. The ClamAV and LibreOffice layers' build scripts
(clamav/debs.py, libreoffice/debs.py) are built on it.

Lambda's python3.13 runtime runs on Amazon Linux 2023 (glibc 2.34). A Debian binary built
against glibc <= 2.34 runs there once its libraries come along; this module gives the parts:

  PackageList        a layer's packages.txt (what it wants) and packages.lock (what it builds);
  lock               resolves the list to exact versions, URLs and SHA-256 digests from the
                     signed indexes (security updates first);
  verified_debs      downloads the locked packages, each verified before any is unpacked;
  unpack             extracts a package without dpkg;
  library_closure    the libraries a set of ELF files loads (DT_NEEDED), transitively;
  check_glibc        refuses a file that needs a newer glibc than the one it runs on: Lambda's,
                     or the one a layer bundles with its own loader (both layers do).

Debian's archive is read over https:// only (a redirect to http:// is refused) and trusted from
the keyring down: a suite's InRelease counts only when gpgv finds in it a good signature by a key
of Debian's archive keyring (--keyring; debian-archive-keyring's by default) over a strong
digest, and only the text gpgv says was signed is read; that Release must be the suite's own,
dated no later than now and, where it says so, not past its Valid-Until; the suite's
Packages.xz must have the size and SHA-256 the Release gives; and every .deb must have the
SHA-256 both packages.lock and that verified index give (the size too). A lock entry the signed
indexes do not list, with the same version, URL and digest, fails the build: a stale or
hand-edited lock is never built from.

glibc is copied only with its own dynamic loader, and its programs started through that loader
(both layers: Debian 12's LibreOffice and libstdc++ need glibc 2.35/2.36): a glibc mixed with
the runtime's loader would break.
"""

from __future__ import annotations

import argparse
import email.utils
import functools
import hashlib
import http.client
import io
import lzma
import os
import shutil
import ssl
import struct
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, override

ARCH = "arm64"
# Where Debian puts arm64 libraries (/lib for the packages not yet moved under /usr).
LIBRARY_DIRS = ("usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu")
# The indexes `lock` reads for each Debian release, most preferred first: a security update wins
# over the point release.
RELEASES = {
    release: (
        ("https://deb.debian.org/debian-security", f"{release}-security"),
        ("https://deb.debian.org/debian", f"{release}-updates"),
        ("https://deb.debian.org/debian", release),
    )
    for release in ("bookworm", "bullseye")
}
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
# Provided by the runtime's glibc: copied only by a layer that also bundles glibc's own loader
# and starts its programs through it (they must match the loader that maps them).
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
# glibc's package: the glibc both layers bundle with its loader.
SYSROOT_PACKAGE = "libc6"
QEMU = "qemu-aarch64-static"
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
    with tempfile.TemporaryDirectory(prefix="debian-gpgv-") as scratch:
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


@dataclass(frozen=True)
class PackageList:
    """A layer's package list and its lock. The list names a package per line: `name` (from
    default_release), `name@release`, `name+` (it and every package it Depends or Pre-Depends
    on, transitively, from its release) or `-name` (never, not even as a dependency: what
    only a full system needs, such as dpkg or perl)."""

    listing: Path
    lock_file: Path
    default_release: str

    def entries(self) -> tuple[dict[str, str], frozenset[str], frozenset[str]]:
        """name -> release of each package listed, the names listed with `+`, and the excluded."""
        wanted: dict[str, str] = {}
        closures: set[str] = set()
        excluded: set[str] = set()
        for line in self.listing.read_text().splitlines():
            entry = line.split("#")[0].strip()
            if not entry:
                continue
            if entry.startswith("-"):
                excluded.add(entry[1:])
                continue
            name, _, release = entry.partition("@")
            if name.endswith("+"):
                name = name[:-1]
                closures.add(name)
            if (release or self.default_release) not in RELEASES:
                raise BuildError(f"{self.listing.name}: unknown Debian release in {entry!r}")
            wanted[name] = release or self.default_release
        return wanted, frozenset(closures), frozenset(excluded)

    def wanted(self) -> dict[str, str]:
        """package -> Debian release of each package listed by name."""
        return self.entries()[0]

    def releases_of(self, names: Iterable[str]) -> dict[str, str | None]:
        """name -> the release a locked package of that name must come from: its own entry's,
        else (a dependency of a `+` entry) the default release; None when the list cannot have
        put it there. The list is read once for all of them."""
        wanted, closures, excluded = self.entries()
        dependency = self.default_release if closures else None
        return {name: wanted.get(name, None if name in excluded else dependency) for name in names}

    def locked(self) -> list[LockedPackage]:
        lines = self.lock_file.read_text().splitlines()
        return [LockedPackage.parse(line) for line in lines if line and not line.startswith("#")]

    def write_lock(self, packages: list[LockedPackage]) -> None:
        """The lock, replaced whole: an interrupted lock leaves the previous one."""
        header = "# package\tversion\turl\tsha256 (written by `debs.py lock`; do not edit)"
        lines = [header, *(package.line() for package in packages)]
        partial = self.lock_file.with_suffix(".partial")
        partial.write_text("\n".join(lines) + "\n")
        partial.replace(self.lock_file)


def lock(archive: Archive, packages: PackageList) -> list[LockedPackage]:
    """The newest downloadable version of each package the list names or (through `+`) depends
    on, across its release's signed indexes."""
    wanted, closures, excluded = packages.entries()
    found: dict[str, LockedPackage] = {}
    for release in sorted(set(wanted.values())):
        versions: dict[str, list[dict[str, str]]] = {}
        for mirror, suite in RELEASES[release]:
            for stanza in index_stanzas(archive, mirror, suite):
                versions.setdefault(stanza["Package"], []).append(
                    stanza | {"Mirror": mirror, "Suite": suite}
                )
        roots = [name for name, origin in wanted.items() if origin == release]
        for name in dependency_closure(roots, closures, excluded, versions):
            if (newest := _newest_downloadable(archive, versions.get(name, []))) is not None:
                found[name] = newest
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise BuildError(f"not downloadable from the Debian indexes for {ARCH}: {missing}")
    return [found[name] for name in sorted(found)]


def _newest_downloadable(archive: Archive, stanzas: list[dict[str, str]]) -> LockedPackage | None:
    """The newest version the signed indexes list, from the first suite whose pool serves it
    (security first). BuildError when none does: an older version is never locked instead, since
    the newest is the one with the fixes (bullseye-security kept listing +deb11u13 after its
    pool stopped serving it, and the lock went back to +deb11u10 without a word)."""
    if not stanzas:
        return None

    def newer_first(a: Mapping[str, str], b: Mapping[str, str]) -> int:
        return compare_versions(b["Version"], a["Version"])

    newest_first = sorted(stanzas, key=functools.cmp_to_key(newer_first))
    newest = newest_first[0]["Version"]
    offered = [stanza for stanza in newest_first if stanza["Version"] == newest]
    for stanza in offered:
        url = f"{stanza['Mirror']}/{stanza['Filename']}"
        if archive.exists(url):
            return LockedPackage(stanza["Package"], stanza["Version"], url, stanza["SHA256"])
    suites = ", ".join(stanza["Suite"] for stanza in offered)
    raise BuildError(
        f"{offered[0]['Package']} {newest}: the signed index of {suites} lists it but "
        f"{offered[0]['Mirror']}/{offered[0]['Filename']} cannot be downloaded: refused, an "
        "older version would lack its fixes (pin another release in packages.txt, or exclude it)"
    )


def dependency_closure(
    roots: list[str],
    closures: frozenset[str],
    excluded: frozenset[str],
    versions: Mapping[str, list[dict[str, str]]],
) -> list[str]:
    """roots, and what every root in closures Depends or Pre-Depends on, transitively; each
    relation satisfied by its first alternative that is a package (or, for a virtual one, its
    first provider) and not excluded. Versions in relations are not compared: the lock takes
    each package's newest version, the one the suite's other packages were built against."""
    providers: dict[str, list[str]] = {}
    for name, stanzas in versions.items():
        for provided in _relation_names(stanzas[0].get("Provides", "")):
            providers.setdefault(provided[0], []).append(name)
    chosen: set[str] = set()
    pending = [(root, root in closures) for root in roots]
    while pending:
        name, follow = pending.pop()
        if name in chosen:
            continue
        chosen.add(name)
        if follow and name in versions:
            pending.extend(
                (pick, True) for pick in _dependencies(name, versions, providers, excluded)
            )
    return sorted(chosen)


def _dependencies(
    name: str,
    versions: Mapping[str, list[dict[str, str]]],
    providers: Mapping[str, list[str]],
    excluded: frozenset[str],
) -> Iterator[str]:
    stanza = versions[name][0]
    for field in ("Pre-Depends", "Depends"):
        for alternatives in _relation_names(stanza.get(field, "")):
            pick = _satisfier(alternatives, excluded, versions, providers)
            if pick is not None:
                yield pick
            elif not set(alternatives) & excluded:
                raise BuildError(f"{name}: nothing provides {' | '.join(alternatives)}")


def _relation_names(relations: str) -> list[list[str]]:
    """The package names of a relation field (`a (>= 1) | b:any, c`), as alternatives."""
    return [
        [alternative.split("(")[0].split(":")[0].strip() for alternative in clause.split("|")]
        for clause in relations.split(",")
        if clause.strip()
    ]


def _satisfier(
    alternatives: list[str],
    excluded: frozenset[str],
    versions: Mapping[str, list[dict[str, str]]],
    providers: Mapping[str, list[str]],
) -> str | None:
    """The first alternative that is a package, or a virtual one's first provider; None once an
    excluded alternative comes first (the list says the layer goes without it)."""
    for alternative in alternatives:
        if alternative in excluded:
            return None
        if alternative in versions:
            return alternative
        real = [name for name in providers.get(alternative, []) if name not in excluded]
        if real:
            return real[0]
    return None


def compare_versions(left: str, right: str) -> int:
    """dpkg's version order: <0, 0 or >0 as left is older than, equal to or newer than right."""
    for a, b in zip(_version_parts(left), _version_parts(right), strict=True):
        if a != b:
            return _compare_part(a, b)
    return 0


def upstream_part(version: str) -> str:
    """The upstream version in a Debian one: 1.4.6+dfsg of 1:1.4.6+dfsg-0+deb12u1."""
    return _version_parts(version)[1]


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


@dataclass(frozen=True)
class Vouched:
    """A locked package as a verified index lists it, with the size its download must have."""

    package: LockedPackage
    size: int


def vouched_packages(archive: Archive, packages: PackageList) -> list[Vouched]:
    """Every locked package, each found in a signed index of its release with the lock's
    version, URL and SHA-256: the lock pins what is built, the archive's signature vouches that
    Debian published it (a lock edited by hand, or written from a tampered index, fails here)."""
    locked = packages.locked()
    releases = packages.releases_of(package.name for package in locked)
    unlisted = sorted(name for name, release in releases.items() if release is None)
    if unlisted:
        raise BuildError(
            f"{packages.lock_file.name} names packages {packages.listing.name} does not list: "
            f"{unlisted}"
        )
    listed: dict[str, dict[str, str]] = {}
    for release in sorted({release for release in releases.values() if release}):
        for mirror, suite in RELEASES[release]:
            for stanza in index_stanzas(archive, mirror, suite):
                if releases.get(stanza["Package"]) == release:
                    listed.setdefault(f"{mirror}/{stanza['Filename']}", stanza)
    return [
        _vouched(package, listed.get(package.url), releases[package.name] or "")
        for package in locked
    ]


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
    if target.is_file() and sha256_of(target) == package.sha256:
        return target
    partial = target.with_suffix(".part")
    try:
        archive.save(package.url, partial, limit=vouched.size + 1)  # a longer file shows longer
        size, digest = partial.stat().st_size, sha256_of(partial)
        if (size, digest) != (vouched.size, package.sha256):
            raise BuildError(
                f"{package.url}: deb hash mismatch: {size} bytes with SHA-256 {digest}, the lock "
                f"and the signed index say {vouched.size} bytes with SHA-256 {package.sha256}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def verified_debs(
    archive: Archive, cache: Path, packages: PackageList, *, names: Callable[[str], bool]
) -> list[Path]:
    """The locked packages whose names pass `names`, every one downloaded and verified before
    the caller unpacks any."""
    cache.mkdir(parents=True, exist_ok=True)
    return [
        download(vouched, cache, archive)
        for vouched in vouched_packages(archive, packages)
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
            try:
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as archive:
                    archive.extractall(root, filter=_rooted)  # noqa: S202 (data filter, below)
            except tarfile.FilterError as error:
                raise BuildError(f"{deb.name}: refused: {error}") from error
            return
        offset += 60 + size + (size % 2)
    raise BuildError(f"{deb.name} has no data archive")


def _rooted(member: tarfile.TarInfo, root: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter (no member outside root, no device, no setuid), with a symlink
    to an absolute path (Debian's /etc/fonts/conf.d/* -> /usr/share/fontconfig/...) made
    relative, so that it points into root as it would into / once installed."""
    if member.issym() and member.linkname.startswith("/"):
        directory = os.path.dirname(os.path.normpath(member.name))
        member = member.replace(
            linkname=os.path.relpath(member.linkname.lstrip("/"), start=directory or "."),
            deep=False,
        )
    return tarfile.data_filter(member, root)


def library_closure(
    programs: list[Path],
    root: Path,
    *,
    provided: frozenset[str] = frozenset(),
    library_dirs: tuple[str, ...] = LIBRARY_DIRS,
    system: frozenset[str] | None = None,
) -> dict[str, Path]:
    """soname -> file of every library the programs load, transitively, except the system's
    (glibc's, from the runtime, by default; none for a layer that bundles its own glibc) and
    those provided (already in the layer, beside the programs: found by their RUNPATH)."""
    system = GLIBC_LIBRARIES if system is None else system
    found: dict[str, Path] = {}
    pending = [soname for program in programs for soname in needed(program)]
    while pending:
        soname = pending.pop()
        if soname in found or soname in system or soname in provided:
            continue
        path = next((root / d / soname for d in library_dirs if (root / d / soname).exists()), None)
        if path is None:
            raise BuildError(f"{soname} is needed but no locked package provides it")
        found[soname] = path
        pending.extend(needed(path.resolve()))
    return found


def check_glibc(
    path: Path, glibc: tuple[int, ...] | None = None, *, whose: str = "Lambda's runtime"
) -> None:
    """BuildError when the file needs a newer glibc than the one it will run on: Lambda's (by
    default), or the one a layer bundles with its own loader (glibc, whose)."""
    glibc = RUNTIME_GLIBC if glibc is None else glibc
    newest = max(glibc_versions(path.resolve()), default=(0, 0))
    if newest > glibc:
        raise BuildError(
            f"{path.name} needs GLIBC_{'.'.join(map(str, newest))}; {whose} has "
            f"{'.'.join(map(str, glibc))}"
        )


def sha256_of(path: Path) -> str:
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


def archive_options(command: argparse.ArgumentParser) -> None:
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


def cache_option(command: argparse.ArgumentParser, variable: str) -> None:
    command.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get(variable, Path.home() / ".cache/filejobs/debs")),
        help=f"where downloaded packages are kept between builds (verified on every use; "
        f"default ${variable} or ~/.cache/filejobs/debs)",
    )


@dataclass(frozen=True)
class LayerScript:
    """What a layer's build script does for each of the three commands every one has: `lock`
    (its list into its lock), `install` (the layer into DEST; a line per part built) and
    `smoke` (a built layer's programs run under qemu; a line per check passed)."""

    name: str  # "clamav": how its lines begin
    description: str
    packages: Callable[[], PackageList]
    install: Callable[[Path, Path, Archive], Iterable[str]]
    smoke: Callable[[Path, Path, Archive], Iterable[str]]
    smoke_help: str
    cache_variable: str

    def main(self, argv: list[str] | None = None) -> int:
        """Runs the command argv names; 1, with the reason on stderr, when the build fails."""
        arguments = self._parser().parse_args(argv)
        archive = Archive(keyring=arguments.keyring, ca_bundle=arguments.ca_bundle)
        try:
            if arguments.command == "lock":
                packages = self.packages()
                locked = lock(archive, packages)
                packages.write_lock(locked)
                print(f"locked {len(locked)} packages in {packages.lock_file.name}")
            elif arguments.command == "install":
                for line in self.install(arguments.dest, arguments.cache, archive):
                    print(f"{self.name} layer: {line}", flush=True)
            else:
                for line in self.smoke(arguments.layer, arguments.cache, archive):
                    print(f"{self.name} layer smoke test (arm64 under qemu): {line}", flush=True)
        except BuildError as error:
            print(f"debs.py: {error}", file=sys.stderr)
            return 1
        return 0

    def _parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(description=self.description)
        commands = parser.add_subparsers(dest="command", required=True)
        lock_command = commands.add_parser("lock", help="resolve packages.txt into packages.lock")
        install_command = commands.add_parser("install", help="build the layer into DEST")
        install_command.add_argument("--dest", type=Path, required=True)
        smoke_command = commands.add_parser("smoke", help=self.smoke_help)
        smoke_command.add_argument("--layer", type=Path, required=True)
        for command in (install_command, smoke_command):
            cache_option(command, self.cache_variable)
        for command in (lock_command, install_command, smoke_command):
            archive_options(command)
        return parser
