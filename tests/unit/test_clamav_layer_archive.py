"""The ClamAV layer's supply chain (infra/layers/clamav/debs.py): Debian's archive is read over
HTTPS only, each suite trusted only through an InRelease that gpgv finds signed by a key of the
keyring, its Packages index only with the size and SHA-256 that Release gives, and each .deb
only with the SHA-256 of both packages.lock and that verified index.

Each test publishes a small archive of its own, laid out as Debian's (dists/SUITE/InRelease,
main/binary-arm64/Packages.xz, pool/), signed by a throwaway key made here with gpg, and serves
it over HTTPS on 127.0.0.1 with a certificate made here (passed as the build's CA bundle).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import lzma
import shutil
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from tests.debian import debian_package
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
debs = load_script(ROOT / "infra/layers/clamav/debs.py", "clamav_debs")
needs_gpg = pytest.mark.skipif(
    not (shutil.which("gpg") and shutil.which("gpgv") and shutil.which("openssl")),
    reason="gpg, gpgv and openssl are needed (make system-deps)",
)
pytestmark = needs_gpg

SUITE = "bookworm"
# The one program the test package carries: this machine's `true` (it loads libc alone).
PROGRAM = Path("/usr/bin/true")


# --- a throwaway signing key, a TLS certificate, an HTTPS server on 127.0.0.1 -------------------


@dataclass(frozen=True)
class Signer:
    """Two keys in a GNUPGHOME of their own: the archive's (the only one in `keyring`) and a
    stranger's."""

    home: Path
    archive_key: str
    stranger_key: str
    keyring: Path

    def gpg(self, *arguments: str, data: bytes = b"") -> bytes:
        run = subprocess.run(
            ["gpg", "--homedir", str(self.home), "--batch", "--yes", "--pinentry-mode",
             "loopback", "--passphrase", "", *arguments],
            input=data, capture_output=True, check=True,
        )  # fmt: skip
        return run.stdout

    def clearsign(self, text: str, *keys: str, digest: str = "SHA256") -> bytes:
        users = [argument for key in keys for argument in ("--local-user", key)]
        return self.gpg(*users, "--digest-algo", digest, "--clearsign", data=text.encode())


def _new_key(home: Path, name: str) -> str:
    subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase",
         "", "--quick-generate-key", f"{name} <{name.lower()}@test.invalid>", "ed25519", "sign",
         "never"],
        capture_output=True, check=True,
    )  # fmt: skip
    listing = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--with-colons", "--list-keys", name],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


@pytest.fixture(scope="module")
def signer() -> Iterator[Signer]:
    # A short path: gpg-agent's socket lives in the home, and socket paths are short.
    home = Path(tempfile.mkdtemp(prefix="gpg-"))
    try:
        archive_key, stranger_key = _new_key(home, "Archive"), _new_key(home, "Stranger")
        keyring = home / "archive-keyring.gpg"
        signer = Signer(home, archive_key, stranger_key, keyring)
        keyring.write_bytes(signer.gpg("--export", archive_key))
        yield signer
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key: the server's, and the CA bundle the
    build is given."""
    work = tmp_path_factory.mktemp("tls")
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, check=True,
    )  # fmt: skip
    return cert, key


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a directory; a path in `redirects` answers 302 to where it maps."""

    redirects: dict[str, str] = {}  # noqa: RUF012 (replaced per server, never mutated)

    def do_GET(self) -> None:
        if not self._redirected():
            super().do_GET()

    def do_HEAD(self) -> None:
        if not self._redirected():
            super().do_HEAD()

    def _redirected(self) -> bool:
        if self.path not in self.redirects:
            return False
        self.send_response(302)
        self.send_header("Location", self.redirects[self.path])
        self.end_headers()
        return True

    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass
class Server:
    directory: Path
    url: str
    redirects: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def server(tmp_path: Path, certificate: tuple[Path, Path]) -> Iterator[Server]:
    """A directory served over HTTPS (TLS with `certificate`) on 127.0.0.1 only."""
    directory = tmp_path / "served"
    directory.mkdir()
    redirects: dict[str, str] = {}

    class Handler(_Handler):
        pass

    Handler.redirects = redirects
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(directory))
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Server(directory, f"https://127.0.0.1:{httpd.server_address[1]}", redirects)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


# --- a Debian archive of one suite and one package -----------------------------------------------


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    data: bytes

    @property
    def filename(self) -> str:
        return f"pool/main/{self.name[0]}/{self.name}/{self.name}_{self.version}_arm64.deb"

    def stanza(self) -> str:
        return (
            f"Package: {self.name}\nVersion: {self.version}\nArchitecture: arm64\n"
            f"Filename: {self.filename}\nSize: {len(self.data)}\n"
            f"SHA256: {hashlib.sha256(self.data).hexdigest()}\n"
            "Description: a test package\n with a folded line\n"
        )


# The glibc the layer bundles, here this machine's (its loader has its x86_64 name), carried by
# the one package with its program.
HOST_GLIBC = Path("/lib/x86_64-linux-gnu")
HOST_LOADER = "ld-linux-x86-64.so.2"
HELLO = Package(
    "hello",
    "1.0-1",
    debian_package(
        {
            "usr/bin/true": PROGRAM.read_bytes(),
            **{
                f"usr/lib/aarch64-linux-gnu/{name}": (HOST_GLIBC / name).read_bytes()
                for name in ("libc.so.6", HOST_LOADER)
            },
        }
    ),
)


@dataclass
class FakeArchive:
    """One suite of a Debian archive, laid out as Debian's, in the server's directory."""

    server: Server
    signer: Signer

    @property
    def mirror(self) -> str:
        return f"{self.server.url}/debian"

    @property
    def root(self) -> Path:
        return self.server.directory / "debian"

    @property
    def inrelease(self) -> Path:
        return self.root / f"dists/{SUITE}/InRelease"

    @property
    def index(self) -> Path:
        return self.root / f"dists/{SUITE}/main/binary-arm64/Packages.xz"

    def publish(
        self,
        *packages: Package,
        keys: tuple[str, ...] = (),
        digest: str = "SHA256",
        codename: str = SUITE,
        date: datetime | None = None,
        valid_until: datetime | None = None,
        by_hash: bool = False,
    ) -> None:
        """The packages in the pool, their Packages.xz (by hash only, with by_hash) and the
        InRelease over it, clearsigned by `keys` (the archive's key by default)."""
        for package in packages or (HELLO,):
            (self.root / package.filename).parent.mkdir(parents=True, exist_ok=True)
            (self.root / package.filename).write_bytes(package.data)
        index = self.packages_index(*(packages or (HELLO,)))
        sha256 = hashlib.sha256(index).hexdigest()
        path = self.index.parent / "by-hash/SHA256" / sha256 if by_hash else self.index
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(index)
        release = (
            f"Origin: Test\nCodename: {codename}\n"
            f"Date: {format_datetime(date or datetime.now(UTC), usegmt=True)}\n"
            + (f"Valid-Until: {format_datetime(valid_until, usegmt=True)}\n" if valid_until else "")
            + f"Acquire-By-Hash: {'yes' if by_hash else 'no'}\n"
            + f"SHA256:\n {sha256} {len(index)} main/binary-arm64/Packages.xz\n"
        )
        signed = self.signer.clearsign(
            release, *(keys or (self.signer.archive_key,)), digest=digest
        )
        self.inrelease.write_bytes(signed)

    @staticmethod
    def packages_index(*packages: Package) -> bytes:
        return lzma.compress("\n".join(package.stanza() for package in packages).encode())


@pytest.fixture
def archive(
    server: Server, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FakeArchive:
    """The build pointed at a fake archive (published by each test) with one package, `hello`,
    carrying the layer's one program, this machine's `true`."""
    fake = FakeArchive(server, signer)
    monkeypatch.setattr(debs.debian, "RELEASES", {SUITE: ((fake.mirror, SUITE),)})
    listing = tmp_path / "packages.txt"
    listing.write_text("hello\n")
    monkeypatch.setattr(debs, "PACKAGE_LIST", listing)
    monkeypatch.setattr(debs, "LOCK_FILE", tmp_path / "packages.lock")
    monkeypatch.setattr(debs, "PROGRAMS", (str(PROGRAM.relative_to("/")),))
    monkeypatch.setattr(debs, "LOADER", HOST_LOADER)
    monkeypatch.setattr(debs.debian, "GLIBC_LIBRARIES", debs.debian.GLIBC_LIBRARIES | {HOST_LOADER})
    monkeypatch.setattr(debs, "bundled_glibc", lambda: (2, 36))  # this machine's, as bookworm's
    return fake


@pytest.fixture
def trusted(signer: Signer, certificate: tuple[Path, Path]) -> Any:
    """How the build reads the fake archive: its key the keyring, its certificate the CA."""
    return debs.Archive(keyring=signer.keyring, ca_bundle=certificate[0])


def _options(trusted: Any) -> list[str]:
    return ["--keyring", str(trusted.keyring), "--ca-bundle", str(trusted.ca_bundle)]


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """debs.py run with argv must exit 1; returns what it said."""
    assert debs.main(list(argv)) == 1
    return capsys.readouterr().err


def _locked(archive: FakeArchive, trusted: Any) -> None:
    debs.write_lock(debs.lock(trusted))


# --- the whole path, through the command line ----------------------------------------------------


@pytest.mark.parametrize("by_hash", [False, True], ids=["by-path", "by-hash"])
def test_a_signed_archive_is_locked_and_the_layer_built_over_https(
    archive: FakeArchive, trusted: Any, tmp_path: Path, by_hash: bool
) -> None:
    # given an archive whose InRelease is signed by the keyring's key, served over HTTPS
    archive.publish(by_hash=by_hash)
    # when the packages are locked from it
    assert debs.main(["lock", *_options(trusted)]) == 0
    # then the lock pins the package's https:// URL and the SHA-256 the signed index gives
    sha256 = hashlib.sha256(HELLO.data).hexdigest()
    assert debs.locked_packages() == [
        debs.LockedPackage("hello", "1.0-1", f"{archive.mirror}/{HELLO.filename}", sha256)
    ]
    # and when the layer is built, the package's program is in it
    dest = tmp_path / "dest"
    build = ["install", "--dest", str(dest), "--cache", str(tmp_path / "cache")]
    assert debs.main([*build, *_options(trusted)]) == 0
    assert (dest / "clamav/libexec/true").read_bytes() == PROGRAM.read_bytes()
    assert (dest / "clamav/glibc/libc.so.6").is_file()
    assert not (dest / "clamav.partial").exists()


def test_one_good_signature_suffices_beside_one_by_a_key_not_in_the_keyring(
    archive: FakeArchive, trusted: Any
) -> None:
    # Debian signs each Release with several keys; a keyring can lack a newer release's key
    archive.publish(keys=(archive.signer.archive_key, archive.signer.stranger_key))
    assert [package.name for package in debs.lock(trusted)] == ["hello"]


# --- the Release: its signature, its suite, its dates --------------------------------------------


def test_an_inrelease_altered_after_signing_is_refused_as_a_bad_signature(
    archive: FakeArchive, trusted: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # given an InRelease whose signed text was changed to name another Packages index
    archive.publish()
    other = FakeArchive.packages_index(HELLO, Package("evil", "1", b"evil"))
    text = archive.inrelease.read_text()
    digest = hashlib.sha256(archive.index.read_bytes()).hexdigest()
    archive.inrelease.write_text(text.replace(digest, hashlib.sha256(other).hexdigest()))
    archive.index.write_bytes(other)
    # then locking fails on the signature, and no lock is written
    error = _fails(capsys, "lock", *_options(trusted))
    assert f"{archive.mirror}/dists/{SUITE}/InRelease: bad signature" in error
    assert not debs.LOCK_FILE.exists()


def test_an_inrelease_signed_only_by_a_key_not_in_the_keyring_is_refused(
    archive: FakeArchive, trusted: Any
) -> None:
    archive.publish(keys=(archive.signer.stranger_key,))
    with pytest.raises(debs.BuildError, match=r"signed by a key not in the keyring .*: refused"):
        debs.lock(trusted)


def test_a_signature_over_a_weak_digest_is_refused(archive: FakeArchive, trusted: Any) -> None:
    archive.publish(digest="SHA1")
    with pytest.raises(debs.BuildError, match=r"signed over a weak digest \(SHA-1\)"):
        debs.lock(trusted)


def test_text_after_the_signature_is_not_read_as_signed(archive: FakeArchive, trusted: Any) -> None:
    # given a tampered index, and unsigned lines after the signature giving its hash
    archive.publish()
    other = FakeArchive.packages_index(Package("evil", "1", b"evil"))
    archive.index.write_bytes(other)
    claim = f"SHA256:\n {hashlib.sha256(other).hexdigest()} {len(other)} {debs.debian.INDEX_PATH}\n"
    archive.inrelease.write_bytes(archive.inrelease.read_bytes() + claim.encode())
    # then only what gpgv says was signed counts: the index is refused
    with pytest.raises(debs.BuildError, match="index hash mismatch"):
        debs.lock(trusted)


def test_text_before_the_signed_message_is_refused(archive: FakeArchive, trusted: Any) -> None:
    archive.publish()
    archive.inrelease.write_bytes(b"Codename: bookworm\n\n" + archive.inrelease.read_bytes())
    with pytest.raises(debs.BuildError, match="not a single clearsigned message"):
        debs.lock(trusted)


def test_an_inrelease_whose_signature_cannot_be_read_is_refused_with_gpgvs_words(
    archive: FakeArchive, trusted: Any
) -> None:
    archive.publish()
    lines = archive.inrelease.read_text().splitlines()
    armor = lines.index("-----BEGIN PGP SIGNATURE-----") + 2  # after the armor's blank line
    lines[armor] = "A" * len(lines[armor])
    archive.inrelease.write_text("\n".join(lines) + "\n")
    with pytest.raises(debs.BuildError, match=r"InRelease: no signature: refused; gpgv: .*\S"):
        debs.lock(trusted)


NOW = datetime.now(UTC)


@pytest.mark.parametrize(
    ("dates", "refusal"),
    [
        ({"valid_until": NOW - timedelta(hours=1)}, r"expired Release: Valid-Until .* has passed"),
        ({"date": NOW + timedelta(days=1)}, r"not valid yet: Date .* is ahead"),
    ],
    ids=["expired", "not-yet-valid"],
)
def test_a_release_outside_its_validity_is_refused(
    archive: FakeArchive, trusted: Any, dates: dict[str, datetime], refusal: str
) -> None:
    archive.publish(**dates)  # type: ignore[arg-type]
    with pytest.raises(debs.BuildError, match=refusal):
        debs.lock(trusted)


def test_a_release_valid_until_a_future_date_is_accepted(
    archive: FakeArchive, trusted: Any
) -> None:
    archive.publish(valid_until=NOW + timedelta(days=7))  # as Debian's security archive does
    assert [package.name for package in debs.lock(trusted)] == ["hello"]


def test_a_signed_release_of_another_suite_is_refused(archive: FakeArchive, trusted: Any) -> None:
    archive.publish(codename="bullseye")
    with pytest.raises(debs.BuildError, match="Release is suite 'bullseye', not 'bookworm'"):
        debs.lock(trusted)


# --- the Packages index and the packages ---------------------------------------------------------


def test_a_packages_index_other_than_the_signed_release_names_is_refused(
    archive: FakeArchive, trusted: Any
) -> None:
    archive.publish()
    archive.index.write_bytes(FakeArchive.packages_index(HELLO, Package("evil", "1", b"evil")))
    with pytest.raises(debs.BuildError, match=r"Packages.xz: index hash mismatch: .* the signed"):
        debs.lock(trusted)


def test_a_deb_altered_after_locking_fails_the_build_and_leaves_no_layer(
    archive: FakeArchive, trusted: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a layer built from the locked package
    archive.publish()
    _locked(archive, trusted)
    dest, cache = tmp_path / "dest", tmp_path / "cache"
    build = ["install", "--dest", str(dest), "--cache", str(cache), *_options(trusted)]
    assert debs.main(build) == 0
    # when the mirror serves other bytes under the package's name, and nothing is cached
    (archive.root / HELLO.filename).write_bytes(HELLO.data[:-1] + b"X")
    shutil.rmtree(cache)
    # then the build fails naming the package, and leaves neither a layer nor the download
    error = _fails(capsys, *build)
    assert f"{archive.mirror}/{HELLO.filename}: deb hash mismatch" in error
    assert not (dest / "clamav").exists()
    assert not (dest / "clamav.partial").exists()
    assert list(cache.iterdir()) == []


def test_a_lock_pinning_other_bytes_than_the_signed_index_is_refused(
    archive: FakeArchive, trusted: Any, tmp_path: Path
) -> None:
    # given a lock edited to pin other bytes, and a mirror serving exactly those
    archive.publish()
    evil = HELLO.data[:-1] + b"X"
    (archive.root / HELLO.filename).write_bytes(evil)
    url = f"{archive.mirror}/{HELLO.filename}"
    pinned = debs.LockedPackage("hello", "1.0-1", url, hashlib.sha256(evil).hexdigest())
    debs.write_lock([pinned])
    # then the build refuses it before downloading anything: the lock alone is not trusted
    with pytest.raises(debs.BuildError, match=r"packages.lock pins SHA-256 .* the signed index"):
        debs.install(tmp_path / "dest", tmp_path / "cache", trusted)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_lock_naming_a_package_packages_txt_does_not_list_is_refused(
    archive: FakeArchive, trusted: Any, tmp_path: Path
) -> None:
    archive.publish()
    _locked(archive, trusted)
    debs.PACKAGE_LIST.write_text("# hello is no longer wanted\n")
    with pytest.raises(debs.BuildError, match=r"packages.txt does not list: \['hello'\]"):
        debs.install(tmp_path / "dest", tmp_path / "cache", trusted)


def test_a_lock_of_a_version_no_longer_in_the_signed_index_asks_for_a_new_lock(
    archive: FakeArchive, trusted: Any, tmp_path: Path
) -> None:
    archive.publish()
    _locked(archive, trusted)
    archive.publish(Package("hello", "1.0-2", HELLO.data + b"\n"))  # a new version replaces it
    with pytest.raises(debs.BuildError, match=r"hello 1.0-1 .* is in no signed index of bookworm"):
        debs.install(tmp_path / "dest", tmp_path / "cache", trusted)


def test_a_lock_refuses_an_older_version_when_the_signed_index_lists_a_newer_it_cannot_fetch(
    archive: FakeArchive, trusted: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a signed index listing hello 1.0-2 (a security fix) beside 1.0-1, and a pool that
    # serves only 1.0-1 (as bullseye-security's listed +deb11u13 after its pool stopped)
    fixed = Package("hello", "1.0-2", HELLO.data + b"\n")
    archive.publish(HELLO, fixed)
    (archive.root / fixed.filename).unlink()
    # when the packages are locked, then the lock fails naming the version it cannot fetch
    said = _fails(capsys, "lock", *_options(trusted))
    assert "hello 1.0-2: the signed index of bookworm lists it but" in said
    assert f"{archive.mirror}/{fixed.filename} cannot be downloaded" in said
    # and no lock is written: the older version is never pinned instead
    assert not debs.LOCK_FILE.exists()


def test_a_cached_package_is_used_only_while_its_digest_matches(
    archive: FakeArchive, trusted: Any, tmp_path: Path
) -> None:
    archive.publish()
    _locked(archive, trusted)
    cache = tmp_path / "cache"
    (cached,) = debs.verified_debs(trusted, cache, names=lambda name: True)
    # a cached copy that still matches is used (the mirror's copy is gone)
    (archive.root / HELLO.filename).unlink()
    assert debs.verified_debs(trusted, cache, names=lambda name: True) == [cached]
    # a cached copy that no longer matches is fetched again: here, from a mirror without it
    cached.write_bytes(b"corrupt")
    with pytest.raises(debs.BuildError, match="404"):
        debs.verified_debs(trusted, cache, names=lambda name: True)
    assert not cached.with_suffix(".part").exists()


# --- HTTPS only ----------------------------------------------------------------------------------


def test_an_http_mirror_is_refused(
    archive: FakeArchive, trusted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive.publish()
    plain = archive.mirror.replace("https://", "http://")
    monkeypatch.setattr(debs.debian, "RELEASES", {SUITE: ((plain, SUITE),)})
    with pytest.raises(debs.BuildError, match=r"^http://.*: refused: .* over https:// only"):
        debs.lock(trusted)


def test_a_redirect_to_http_is_refused(archive: FakeArchive, trusted: Any) -> None:
    archive.publish()
    path = f"/debian/dists/{SUITE}/InRelease"
    archive.server.redirects[path] = archive.server.url.replace("https://", "http://") + path
    with pytest.raises(debs.BuildError, match=r"redirected to http://.*: refused"):
        debs.lock(trusted)


def test_a_mirror_whose_certificate_the_ca_bundle_does_not_vouch_for_is_refused(
    archive: FakeArchive, signer: Signer
) -> None:
    archive.publish()
    system_cas_only = debs.Archive(keyring=signer.keyring)
    with pytest.raises(debs.BuildError, match="CERTIFICATE_VERIFY_FAILED"):
        debs.lock(system_cas_only)


def test_a_missing_keyring_is_named(archive: FakeArchive, tmp_path: Path, trusted: Any) -> None:
    archive.publish()
    missing = debs.Archive(keyring=tmp_path / "none.gpg", ca_bundle=trusted.ca_bundle)
    with pytest.raises(debs.BuildError, match=r"keyring .*none.gpg not found .*keyring\)"):
        debs.lock(missing)
