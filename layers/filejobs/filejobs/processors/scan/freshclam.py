"""ClamAV's own tools for the definitions updater: freshclam fetches, clamscan proves the result.

`Freshclam` writes a config for one run (a scratch DatabaseDirectory, the mirror settings, no
log file, no clamd to notify), runs freshclam with a timeout and an environment holding no AWS
credentials, and classifies what happened from its output, because its exit status alone does
not tell (what freshclam 1.4.6 does, observed against local/mirror.py):

    the mirror ...                    exit  freshclam prints
    served a new or changed file      0     NAME updated (version: ..., sigs: N)
    answered 304 to everything        0     NAME is up-to-date (version: ...)
    answered 429                      0     received error code 429 ... cool-down until after: T
    answered 403                      17    received error code 403 ... Forbidden; Blocked by CDN
    refused before (freshclam.dat)    0     You are still on cool-down until after: T
    served a file that does not load  8     Database test FAILED. ... Test failed
    answered 404                      11    file not found: URL ... HTTP GET failed
    did not answer                    5     Couldn't connect to server ... Connection failed

A 429 or 403 also writes the cool-down into freshclam.dat (4 hours without Retry-After, 24 hours
after a 403), which freshclam honours for the official databases on its next runs.

`SetVerifier` then loads a candidate set the way a worker will: `clamscan --database=<dir>` must
name EICAR in a file it writes and pass a clean one, and the set's YARA rules must compile.
`read_cvd_header` reads the version, signature count and build time of a CVD/CLD/CUD file.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from filejobs.config import inherited
from filejobs.domain.definitions import (
    CONTAINER_SUFFIXES,
    OFFICIAL_DATABASES,
    YARA_SUFFIXES,
    Engine,
    Source,
    custom_refusal,
    engine_of,
    is_file_name,
    is_official,
)
from filejobs.processors.scan.environment import confined_command, isolated_environment

OFFICIAL_MIRROR = "database.clamav.net"
EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
CLEAN = b"filejobs definitions check: an ordinary text file, nothing to find here.\n"
CVD_HEADER_SIZE = 512
# Within the updater's 900 s (its Lambda timeout), with room for S3: freshclam's downloads (the
# official main.cvd is about 160 MB), then one clamscan load of the whole set.
FRESHCLAM_TIMEOUT_SECONDS = 480.0
VERIFY_TIMEOUT_SECONDS = 240.0
_CVD_MAGIC = b"ClamAV-VDB:"
# What may appear in a value written into freshclam.conf: a newline would add a directive.
_CONFIG_VALUE = re.compile(r"^[^\s\x00-\x1f\x7f]+$")


class SettingsError(ValueError):
    """Mirror settings freshclam cannot be given (the deployment's parameters are wrong)."""


# --- settings and config -----------------------------------------------------------------------


@dataclass(frozen=True)
class MirrorSettings:
    """Where freshclam fetches from: the template's DefinitionsMirror, OfficialDatabases and
    DefinitionsCustomUrls parameters."""

    private_mirror: str = ""  # "" for ClamAV's official mirror
    official_databases: tuple[str, ...] = OFFICIAL_DATABASES
    custom_urls: tuple[str, ...] = ()
    # The local stack's mirror serves plain http on 127.0.0.1: allowed there alone (the updater
    # runs against local emulators, functions/definitions/app.py), never in a deployed stack.
    loopback_http: bool = False
    connect_timeout: int = 30
    receive_timeout: int = 300  # per download: the official main.cvd is about 160 MB
    max_attempts: int = 3  # per mirror; freshclam waits 5 s between them

    def __post_init__(self) -> None:
        unknown = sorted(set(self.official_databases) - set(OFFICIAL_DATABASES))
        if unknown:
            raise SettingsError(
                f"unknown official databases: {', '.join(unknown)} "
                f"(one of {', '.join(OFFICIAL_DATABASES)})"
            )
        if self.private_mirror:
            _check_mirror(self.private_mirror, self.loopback_http)
        names = [_custom_url_name(url, self.loopback_http) for url in self.custom_urls]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise SettingsError(
                f"two custom database URLs end in the same name: {', '.join(twice)}"
            )

    @classmethod
    def parse(
        cls, mirror: str, official: str, custom_urls: str, *, loopback_http: bool = False
    ) -> MirrorSettings:
        """From the comma-separated forms the template's parameters take."""
        return cls(
            private_mirror=mirror.strip(),
            official_databases=tuple(dict.fromkeys(_comma_list(official))),
            custom_urls=tuple(_comma_list(custom_urls)),
            loopback_http=loopback_http,
        )

    def custom_names(self) -> frozenset[str]:
        return frozenset(_custom_url_name(url, self.loopback_http) for url in self.custom_urls)

    def source_of(self, name: str) -> Source | None:
        """Whether freshclam fetched the database `name` under these settings, and from where;
        None for anything else in its directory (an excluded database, a leftover)."""
        if is_official(name, self.official_databases):
            return Source.OFFICIAL
        if name in self.custom_names():
            return Source.CUSTOM_URL
        return None


def _comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _check_mirror(mirror: str, loopback_http: bool) -> None:
    if not _CONFIG_VALUE.fullmatch(mirror):
        raise SettingsError(f"DefinitionsMirror {mirror!r} must be a URL or host name")
    if "://" not in mirror:
        # freshclam would reach a bare host name over plain http: a man in the middle could
        # then serve any definitions it likes (freshclam checks no signature on a .cdiff-less
        # custom database, and the mirror's container signatures only for official ones).
        raise SettingsError(f"DefinitionsMirror {mirror!r} must be an https:// URL")
    _check_scheme(mirror, "DefinitionsMirror", loopback_http)


def _check_scheme(url: str, what: str, loopback_http: bool) -> None:
    """https, or http to this machine in the local stack alone: never file:// (a path another
    process on the machine may write) nor plain http across a network."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    loopback = parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS
    if loopback and loopback_http:
        return
    local = " (http://127.0.0.1 only in the local stack)" if loopback else ""
    raise SettingsError(f"{what} {url!r} must be https://{local}")


_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _custom_url_name(url: str, loopback_http: bool) -> str:
    if not _CONFIG_VALUE.fullmatch(url):
        raise SettingsError(f"custom database URL {url!r} holds spaces or control characters")
    _check_scheme(url, "custom database URL", loopback_http)
    name = urlsplit(url).path.rsplit("/", 1)[-1]
    if not is_file_name(name):
        raise SettingsError(f"custom database URL {url!r} does not end in a plain file name")
    if engine_of(name) is not Engine.CLAMAV:
        raise SettingsError(f"custom database URL {url!r} does not name a ClamAV database file")
    if is_official(name):
        raise SettingsError(f"custom database URL {url!r} is named as an official database")
    refusal = custom_refusal(name)
    if refusal is not None:
        raise SettingsError(
            f"custom database URL {url!r}: {refusal}; a custom source may add detections only"
        )
    return name


def current_user() -> str | None:
    """This process's user name (freshclam started as root drops to its DatabaseOwner, which
    must then be us); None when the system has no name for our uid."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


def render_config(settings: MirrorSettings, datadir: Path, owner: str | None) -> str:
    """freshclam.conf for one run into `datadir`."""
    lines = [
        "# Written by filejobs (processors/scan/freshclam.py) for one run.",
        f"DatabaseDirectory {datadir}",
        *([f"DatabaseOwner {owner}"] if owner else []),
        # One run in the foreground, its output on stdout/stderr: no log file, no syslog, no
        # daemon, and no clamd to notify (NotifyClamd is off when left out).
        "Foreground yes",
        "LogSyslog no",
        "LogTime no",
        "LogVerbose no",
        "Checks 12",
        f"MaxAttempts {settings.max_attempts}",
        f"ConnectTimeout {settings.connect_timeout}",
        f"ReceiveTimeout {settings.receive_timeout}",
        # Each downloaded database is loaded before it replaces the old one.
        "TestDatabases yes",
        # .cdiff patches for daily: a few KB instead of the whole database.
        "ScriptedUpdates yes",
        "CompressLocalDatabase no",
        (
            f"PrivateMirror {settings.private_mirror}"
            if settings.private_mirror
            else f"DatabaseMirror {OFFICIAL_MIRROR}"
        ),
        *(
            f"ExcludeDatabase {name}"
            for name in OFFICIAL_DATABASES
            if name not in settings.official_databases
        ),
        f"Bytecode {'yes' if 'bytecode' in settings.official_databases else 'no'}",
        *(f"DatabaseCustomURL {url}" for url in settings.custom_urls),
    ]
    return "\n".join(lines) + "\n"


def program_environment(program: str, home: Path) -> dict[str, str]:
    """What freshclam or clamscan sees of the environment: engines.isolated_environment's
    (nothing secret, the layer's libraries alone), with a HOME and TMPDIR of their own, UTC
    (freshclam prints its cool-down in local time) and a CA bundle when one is set and exists."""
    extra = {"HOME": str(home), "TMPDIR": str(home), "TZ": "UTC"}
    bundle = inherited(["CURL_CA_BUNDLE"]).get("CURL_CA_BUNDLE")
    if bundle and Path(bundle).is_file():
        extra["CURL_CA_BUNDLE"] = bundle
    return isolated_environment(program, **extra)


# --- what a run did ----------------------------------------------------------------------------


def tool_version(program: str) -> str:
    """ "`ClamAV 1.4.6` from `program --version`, without the database version clamscan appends
    after a slash when it finds one."""
    run = subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
        [program, "--version"],
        capture_output=True,
        text=True,
        errors="replace",
        env=program_environment(program, Path(tempfile.gettempdir())),
        timeout=60,
        check=True,
    )
    return run.stdout.strip().split("/", 1)[0].strip()


class FreshclamStatus(StrEnum):
    UPDATED = "updated"  # at least one database is new or changed
    UP_TO_DATE = "up_to_date"  # the mirror confirmed every database
    REFUSED = "refused"  # the mirror rate-limited (429) or blocked (403) us: back off
    FAILED = "failed"  # anything else: not published, the next scheduled run retries


@dataclass(frozen=True)
class FreshclamResult:
    status: FreshclamStatus
    exit_code: int | None  # None: it did not run, or ran out of time
    reason: str  # the last lines of its output that say what went wrong ("" when nothing did)
    http_status: int | None = None  # the mirror's refusal: 429 or 403
    cool_down_until: datetime | None = None  # as freshclam announced it
    updated: tuple[str, ...] = ()  # the databases it replaced
    seconds: float = 0.0


_REFUSED = re.compile(r"(?<!previously )received error code (\d{3})")
_STILL_COOLING = re.compile(r"previously received error code 429 or 403|still on cool-down")
_COOL_DOWN = re.compile(r"cool-down until after: (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
_UPDATED = re.compile(r"^(\S+) updated \(version:", re.MULTILINE)


def classify(exit_code: int, output: str, seconds: float = 0.0) -> FreshclamResult:
    """What a finished freshclam run did, from its exit status and its output (`--stdout`: its
    warnings and errors in order with the rest). A 429 exits 0: the output decides (see the
    table in the module's docstring)."""
    updated = tuple(_UPDATED.findall(output))
    refused = [int(code) for code in _REFUSED.findall(output) if code in ("429", "403")]
    if refused or _STILL_COOLING.search(output):
        until = max((_utc(moment) for moment in _COOL_DOWN.findall(output)), default=None)
        status = 403 if 403 in refused else (refused[0] if refused else None)
        return FreshclamResult(
            FreshclamStatus.REFUSED,
            exit_code,
            _refusal_reason(status, until),
            http_status=status,
            cool_down_until=until,
            updated=updated,
            seconds=seconds,
        )
    if exit_code != 0:
        return FreshclamResult(
            FreshclamStatus.FAILED,
            exit_code,
            f"freshclam failed ({exit_code}): {_problem(output) or f'exit status {exit_code}'}",
            updated=updated,
            seconds=seconds,
        )
    status_ = FreshclamStatus.UPDATED if updated else FreshclamStatus.UP_TO_DATE
    return FreshclamResult(status_, exit_code, "", updated=updated, seconds=seconds)


def _refusal_reason(status: int | None, until: datetime | None) -> str:
    said = {429: "rate-limited us (429)", 403: "blocked us (403)"}.get(
        status or 0, "refused us before (freshclam's cool-down)"
    )
    tail = "" if until is None else f"; cool-down until {until.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    return f"the mirror {said}{tail}"


def _utc(text: str) -> datetime:
    # freshclam prints local time; it runs with TZ=UTC (program_environment).
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


# Lines freshclam prints on every run, or after every failure: they say nothing of the cause.
_NOISE = ("DNS Update Info disabled", "Update failed.", "Invalid DNS reply", "Can't query")


def _problem(output: str) -> str:
    """What a failed run said of its cause: its first warning ("Problem parsing database at line
    3", "file not found: URL"), its first error ("Malformed database") and its last (freshclam's
    summary), each cut to a readable length."""
    lines = [
        (line.startswith("ERROR:"), line.split(":", 1)[1].strip()[:300])
        for line in output.splitlines()
        if line.startswith(("ERROR:", "WARNING:")) and not any(n in line for n in _NOISE)
    ]
    if not lines:
        return _last_lines(output)
    errors = [text for is_error, text in lines if is_error] or [lines[-1][1]]
    return " | ".join(dict.fromkeys([lines[0][1], errors[0], errors[-1]]))


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:])


class Freshclam:
    """freshclam with the given mirror settings, one run per call into a scratch directory."""

    def __init__(
        self,
        program: str,
        settings: MirrorSettings,
        *,
        timeout_seconds: float = FRESHCLAM_TIMEOUT_SECONDS,
    ) -> None:
        self._program = program
        self.settings = settings
        self._timeout = timeout_seconds

    def run(self, datadir: Path, workdir: Path) -> FreshclamResult:
        """Updates `datadir` (seeded by the caller); its config and HOME go in `workdir`."""
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "freshclam.conf"
        config.write_text(render_config(self.settings, datadir, current_user()))
        started = time.monotonic()
        try:
            # A session of its own: freshclam forks to test each database, and a timeout must
            # stop those children too (they hold its output open).
            process = subprocess.Popen(  # noqa: S603 (a fixed argument list, no shell)
                [self._program, f"--config-file={config}", "--stdout"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                env=program_environment(self._program, workdir),
                start_new_session=True,
            )
        except OSError as error:  # not installed, not executable
            reason = f"freshclam could not run: {error}"
            return FreshclamResult(FreshclamStatus.FAILED, None, reason)
        try:
            stdout, stderr = process.communicate(timeout=self._timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            reason = f"freshclam timed out after {self._timeout:g} seconds"
            return FreshclamResult(FreshclamStatus.FAILED, None, reason)
        seconds = time.monotonic() - started
        return classify(process.returncode, f"{stdout}\n{stderr}", seconds)

    def source_of(self, name: str) -> Source | None:
        """Whether this freshclam fetches `name`, and from where (MirrorSettings.source_of)."""
        return self.settings.source_of(name)

    def header(self, path: Path) -> CvdHeader | None:
        return read_cvd_header(path)


# --- CVD headers -------------------------------------------------------------------------------


class CvdHeaderError(ValueError):
    """A .cvd/.cld/.cud file whose 512-byte header is not ClamAV's."""


@dataclass(frozen=True)
class CvdHeader:
    """`ClamAV-VDB:build time:version:signatures:functionality level:md5:dsig:builder:stime`,
    padded with spaces to 512 bytes; stime, the last field, is the build time in epoch seconds."""

    version: int
    signatures: int
    functionality_level: int
    builder: str
    build_time: datetime


def parse_cvd_header(data: bytes) -> CvdHeader:
    head = data[:CVD_HEADER_SIZE]
    if not head.startswith(_CVD_MAGIC):
        raise CvdHeaderError("no ClamAV-VDB header")
    if len(head) < CVD_HEADER_SIZE:
        raise CvdHeaderError(f"a header of {len(head)} bytes, not {CVD_HEADER_SIZE}")
    fields = head.decode("ascii", errors="replace").rstrip(" \x00\r\n").split(":")
    if len(fields) < 9:
        raise CvdHeaderError(f"a header of {len(fields)} fields, not 9")
    try:
        version, signatures, level = int(fields[2]), int(fields[3]), int(fields[4])
        built = datetime.fromtimestamp(int(fields[-1]), UTC)
    except (ValueError, OverflowError, OSError):
        raise CvdHeaderError(f"unreadable numbers in header {head[:120]!r}") from None
    return CvdHeader(version, signatures, level, fields[7], built)


def read_cvd_header(path: Path) -> CvdHeader | None:
    """The header of a CVD/CLD/CUD file; None for databases that have none (.hdb, .ndb, ...)."""
    if path.suffix.lower() not in CONTAINER_SUFFIXES:
        return None
    with path.open("rb") as database:
        head = database.read(CVD_HEADER_SIZE)
    try:
        return parse_cvd_header(head)
    except CvdHeaderError as error:
        raise CvdHeaderError(f"{path.name}: {error}") from None


# --- proving a set before it is published ------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    passed: bool
    report: dict[str, str]  # {"eicar": what was reported, "clean": "OK"}
    reason: str = ""
    seconds: float = 0.0


class SetVerifier:
    """Loads a candidate set as a worker will and tries it on EICAR and on a clean file.

    With `clamscan` (ScanEngines clamav+yara): clamscan over the set's ClamAV directory must name
    EICAR and pass the clean file, in one run (one load of the database, which takes tens of
    seconds with the official one). Without (ScanEngines yara): the shipped rules with the
    set's must do so. Either way the set's YARA rules must compile, as YaraScanner.from_files
    compiles them on a worker.
    """

    def __init__(
        self, clamscan: str | None = "clamscan", *, timeout_seconds: float = VERIFY_TIMEOUT_SECONDS
    ) -> None:
        self._clamscan = clamscan
        self._timeout = timeout_seconds

    def engine_version(self) -> str:
        """What proved the set: `ClamAV 1.4.6` (clamscan --version), or YARA's version."""
        if self._clamscan is None:
            import yara  # type: ignore[import-not-found]  # noqa: PLC0415 (a C extension, no stubs)

            return f"YARA {yara.__version__}"
        return tool_version(self._clamscan)

    def verify(self, clamav_dir: Path, yara_dir: Path, workdir: Path) -> Verification:
        started = time.monotonic()
        workdir.mkdir(parents=True, exist_ok=True)
        eicar, clean = workdir / "eicar.com", workdir / "clean.txt"
        eicar.write_bytes(EICAR)
        clean.write_bytes(CLEAN)
        rules = sorted(p for p in _files(yara_dir) if p.suffix.lower() in YARA_SUFFIXES)
        failure = _compile_failure(rules)
        if failure is not None:
            return Verification(False, {}, failure, time.monotonic() - started)
        if self._clamscan is None:
            result = _yara_check(rules, eicar, clean)
        else:
            result = self._clamscan_check(clamav_dir, workdir, eicar, clean)
        return Verification(result.passed, result.report, result.reason, time.monotonic() - started)

    def _clamscan_check(
        self, clamav_dir: Path, workdir: Path, eicar: Path, clean: Path
    ) -> Verification:
        assert self._clamscan is not None
        if not any(engine_of(p.name) is Engine.CLAMAV for p in _files(clamav_dir)):
            return Verification(False, {}, "the set has no ClamAV database")
        command = [
            self._clamscan, "--no-summary", "--stdout", f"--database={clamav_dir}",
            "--", str(eicar), str(clean),
        ]  # fmt: skip
        try:
            # The downloaded set is parsed here: confined as clamd is (no socket but Unix
            # ones). freshclam itself needs HTTPS, so it cannot be; it loads each database
            # it downloads to test it, which is why a set is proved here before publishing.
            argv, environment = confined_command(
                command, program_environment(self._clamscan, workdir)
            )
            run = subprocess.run(  # noqa: S603 (a fixed argument list, no shell)
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                env=environment,
                timeout=self._timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Verification(False, {}, f"clamscan timed out after {self._timeout:.0f} s")
        except OSError as error:
            return Verification(False, {}, f"clamscan could not run: {error}")
        reported = _reports(run.stdout)
        report = {"eicar": reported.get(str(eicar), ""), "clean": reported.get(str(clean), "")}
        if run.returncode not in (0, 1):
            detail = _last_lines(run.stderr) or _last_lines(run.stdout)
            reason = f"the set does not load: clamscan failed ({run.returncode}): {detail}"
            return Verification(False, report, reason)
        return _judged(report, "clamscan")


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.is_file()] if directory.is_dir() else []


def _reports(stdout: str) -> dict[str, str]:
    """clamscan's `path: Signature FOUND` / `path: OK` lines, by path."""
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        path, separator, said = line.rpartition(": ")
        if separator:
            found[path] = said.strip()
    return found


def _judged(report: dict[str, str], engine: str) -> Verification:
    if not report["eicar"].endswith("FOUND"):
        said = report["eicar"] or "nothing"
        return Verification(False, report, f"the set does not detect EICAR ({engine}: {said})")
    if report["clean"] != "OK":
        said = report["clean"] or "nothing"
        return Verification(False, report, f"the set flags a clean file ({engine}: {said})")
    return Verification(True, report)


def _compile_failure(rules: list[Path]) -> str | None:
    if not rules:
        return None
    from filejobs.processors.scan.engines import SignatureError, YaraScanner  # noqa: PLC0415

    try:
        YaraScanner.from_files(rules)
    except SignatureError as error:
        return f"the set's YARA rules do not compile: {error}"
    return None


def _yara_check(rules: list[Path], eicar: Path, clean: Path) -> Verification:
    # yara-python is imported only here: freshclam's side of this module runs without it.
    from filejobs.processors.scan.engines import (  # noqa: PLC0415
        BUILTIN_RULES,
        YaraScanner,
        rule_files,
    )

    scanner = YaraScanner.from_files([*rule_files(BUILTIN_RULES), *rules])
    found = scanner.scan(eicar).signatures
    flagged = scanner.scan(clean).signatures
    report = {
        "eicar": f"{', '.join(found)} FOUND" if found else "OK",
        "clean": f"{', '.join(flagged)} FOUND" if flagged else "OK",
    }
    return _judged(report, "yara")
