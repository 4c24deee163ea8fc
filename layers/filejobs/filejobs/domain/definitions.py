"""The virus scan's definitions as published sets: what a set holds, how old it is, when to ask
the mirror again. Pure: no I/O, time passed in.

A set is published once, under `signatures/sets/{set_id}/` of the signatures bucket, and made
current by one PUT of `signatures/manifest.json` (adapters/definitions.py). The manifest is the
contract between the updater and the scan workers: a worker scans only with files a manifest
names, each checked against its digest and size, and refuses a manifest it does not fully
understand (`ManifestError`) rather than scan with half of it.

    {"format": 1, "set_id": "20261201T080000Z",
     "published_at": "2026-12-01T08:00:00Z", "checked_at": "2026-12-01T10:00:00Z",
     "engine": "ClamAV 1.4.6",
     "files": [{"name": "daily.cld", "engine": "clamav", "sha256": "...", "size": 123,
                "source": "official", "version": 27460, "signatures": 2070000,
                "build_time": "2026-12-01T07:46:00Z"}, ...],
     "previous": ["20261130T200000Z", ...],
     "verification": {"eicar": "Win.Test.EICAR_HDB-1 FOUND", "clean": "OK"},
     "rolled_back_from": null}

Set ids are the UTC second of their publication (`YYYYMMDDTHHMMSSZ`), so they sort as they were
published and "definitions older than V" is a string comparison.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

from filejobs.domain.time import require_utc

FORMAT = 1
SET_ID_FORMAT = "%Y%m%dT%H%M%SZ"
_SET_ID = re.compile(r"^\d{8}T\d{6}Z$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A file name as it lands in a directory ClamAV or YARA loads: no folder, nothing hidden.
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")

# The databases ClamAV's mirrors publish (freshclam's main, daily and bytecode).
OFFICIAL_DATABASES = ("main", "daily", "bytecode")
# Every kind of file ClamAV loads from its database directory (libclamav's CLI_DBEXT), but YARA
# rules, which a set keeps apart.
CLAMAV_SUFFIXES = frozenset((
    ".cvd", ".cld", ".cud", ".db", ".hdb", ".hdu", ".hsb", ".hsu", ".mdb", ".mdu", ".msb", ".msu",
    ".ndb", ".ndu", ".ldb", ".ldu", ".sdb", ".zmd", ".rmd", ".idb", ".fp", ".sfp", ".gdb", ".pdb",
    ".wdb", ".cdb", ".cat", ".crb", ".cbc", ".ftm", ".cfg", ".ign", ".ign2", ".imp", ".ioc",
    ".pwdb", ".info",
))  # fmt: skip
# YARA rules: kept out of ClamAV's directory, which would try to load them itself (and refuses
# some rules YARA compiles).
YARA_SUFFIXES = frozenset({".yar", ".yara"})
# Files with a CVD header (version, signature count, build time).
CONTAINER_SUFFIXES = frozenset({".cvd", ".cld", ".cud"})
# What only ClamAV's official databases may carry (inside their signed containers): files that
# turn a detection off or change what the engine does, per ClamAV's signature documentation.
# .fp/.sfp allow-list files by hash, .ign/.ign2 ignore signatures by name, .cfg switches engine
# features and parsers off, .ftm retypes files (so the parsers that would find something never
# see them), .crb/.cat trust signers (a file they sign is clean), .pwdb gives the passwords an
# encrypted archive is opened with. A container (.cud: unsigned) may hold any of them.
NOT_CUSTOM_SUFFIXES = frozenset(
    {".fp", ".sfp", ".ign", ".ign2", ".cfg", ".ftm", ".crb", ".cat", ".pwdb", ".info"}
    | CONTAINER_SUFFIXES
)


class ManifestError(ValueError):
    """A manifest that is not exactly what this code understands: never scan with it."""


class Engine(StrEnum):
    CLAMAV = "clamav"
    YARA = "yara"


class Source(StrEnum):
    OFFICIAL = "official"  # ClamAV's main/daily/bytecode, from the mirror
    CUSTOM_URL = "custom_url"  # a DatabaseCustomURL freshclam fetched
    CURATED = "curated"  # put under signatures/custom/ by an operator


def engine_of(name: str) -> Engine | None:
    """Which engine loads a file of this name, None when neither does."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in CLAMAV_SUFFIXES:
        return Engine.CLAMAV
    if suffix in YARA_SUFFIXES:
        return Engine.YARA
    return None


def custom_refusal(name: str) -> str | None:
    """Why a database of this name may not come from anywhere but ClamAV's official mirror
    (a custom URL, a curated file); None when it may (a detection signature: .hdb, .ndb...)."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in CONTAINER_SUFFIXES:
        return f"{name} is a database container, which may hold allow-lists and engine settings"
    if suffix in NOT_CUSTOM_SUFFIXES:
        return f"{name} is a {suffix} file, which turns detections off or reconfigures ClamAV"
    return None


def is_file_name(name: str) -> bool:
    """Whether `name` may be a file of a set: a plain name, nothing hidden, no folder."""
    return _FILE_NAME.fullmatch(name) is not None


def is_official(name: str, databases: Iterable[str] = OFFICIAL_DATABASES) -> bool:
    """Whether `name` is one of the official databases (main.cvd, daily.cld, ...)."""
    path = PurePosixPath(name)
    return path.suffix.lower() in {".cvd", ".cld"} and path.stem in set(databases)


def format_time(moment: datetime) -> str:
    return require_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object, what: str) -> datetime:
    if not isinstance(value, str):
        raise ManifestError(f"{what} must be an ISO 8601 UTC time, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ManifestError(f"{what} must be an ISO 8601 UTC time, got {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() != timedelta(0):
        raise ManifestError(f"{what} must be in UTC, got {value!r}")
    return parsed.astimezone(UTC)


def is_set_id(value: object) -> bool:
    if not isinstance(value, str) or not _SET_ID.fullmatch(value):
        return False
    try:
        datetime.strptime(value, SET_ID_FORMAT)
    except ValueError:
        return False
    return True


def new_set_id(now: datetime, after: str | None = None) -> str:
    """The id of a set published at `now`: its UTC second. When that would not sort after
    `after` (the newest id already used: two publications within one second, or a clock that
    went back), the second after `after` instead, so ids stay unique and in publication order."""
    candidate = require_utc(now).strftime(SET_ID_FORMAT)
    if after is None or candidate > after:
        return candidate
    if not is_set_id(after):
        raise ValueError(f"not a set id: {after!r}")
    later = datetime.strptime(after, SET_ID_FORMAT).replace(tzinfo=UTC) + timedelta(seconds=1)
    return later.strftime(SET_ID_FORMAT)


@dataclass(frozen=True)
class DatabaseFile:
    """One file of a set: what it is, where it came from, and how to recognise its bytes."""

    name: str
    engine: Engine
    sha256: str
    size: int
    source: Source
    version: int | None = None  # CVD/CLD/CUD header
    signatures: int | None = None  # CVD/CLD/CUD header
    build_time: datetime | None = None  # CVD/CLD/CUD header

    def __post_init__(self) -> None:
        if not is_file_name(self.name):
            raise ManifestError(f"file name {self.name!r} is not a plain file name")
        if engine_of(self.name) is not self.engine:
            raise ManifestError(f"{self.name}: not a file the {self.engine} engine loads")
        if not _SHA256.fullmatch(self.sha256):
            raise ManifestError(f"{self.name}: sha256 must be 64 lowercase hex digits")
        if self.size < 0:
            raise ManifestError(f"{self.name}: size must not be negative")
        # By its name, not its claimed source: calling an .ign2 official smuggles nothing in.
        refusal = None if is_official(self.name) else custom_refusal(self.name)
        if refusal is not None and self.engine is Engine.CLAMAV:
            # A worker never loads what the updater should never have published.
            raise ManifestError(f"{refusal}: only the official databases may carry it")

    @property
    def path(self) -> str:
        """Its path within a set: `clamav/daily.cld`, `yara/rules.yar`."""
        return f"{self.engine.value}/{self.name}"

    def identity(self) -> tuple[str, str, str, int]:
        """What makes two sets' files the same: place, name and bytes."""
        return (self.engine.value, self.name, self.sha256, self.size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "engine": self.engine.value,
            "sha256": self.sha256,
            "size": self.size,
            "source": self.source.value,
            "version": self.version,
            "signatures": self.signatures,
            "build_time": None if self.build_time is None else format_time(self.build_time),
        }

    @classmethod
    def from_dict(cls, data: object, index: int) -> DatabaseFile:
        what = f"files[{index}]"
        entry = _object(data, what)
        _exact_keys(entry, _FILE_KEYS, what)
        name = entry["name"]
        if not isinstance(name, str):
            raise ManifestError(f"{what}.name must be a string")
        what = f"files[{index}] ({name})"
        build_time = entry["build_time"]
        return cls(
            name=name,
            engine=_enum(Engine, entry["engine"], f"{what}.engine"),
            sha256=_string(entry["sha256"], f"{what}.sha256"),
            size=_integer(entry["size"], f"{what}.size"),
            source=_enum(Source, entry["source"], f"{what}.source"),
            version=_optional_integer(entry["version"], f"{what}.version"),
            signatures=_optional_integer(entry["signatures"], f"{what}.signatures"),
            build_time=None if build_time is None else parse_time(build_time, f"{what}.build_time"),
        )


_FILE_KEYS = frozenset(
    {"name", "engine", "sha256", "size", "source", "version", "signatures", "build_time"}
)
_MANIFEST_KEYS = frozenset(
    {
        "format",
        "set_id",
        "published_at",
        "checked_at",
        "engine",
        "files",
        "previous",
        "verification",
        "rolled_back_from",
    }
)


@dataclass(frozen=True)
class DefinitionsManifest:
    """A published set of definitions (format 1): see the module's docstring."""

    set_id: str
    published_at: datetime
    checked_at: datetime  # the last time the updater saw the mirror serve exactly this
    engine: str  # "ClamAV 1.4.6": the freshclam that fetched it
    files: tuple[DatabaseFile, ...]
    previous: tuple[str, ...] = ()  # the kept older sets, newest first (for rollback)
    verification: Mapping[str, str] = field(default_factory=dict)
    rolled_back_from: str | None = None

    def __post_init__(self) -> None:
        if not is_set_id(self.set_id):
            raise ManifestError(f"set_id {self.set_id!r} is not a YYYYMMDDTHHMMSSZ set id")
        require_utc(self.published_at)
        require_utc(self.checked_at)
        paths = [f.path for f in self.files]
        duplicated = sorted({p for p in paths if paths.count(p) > 1})
        if duplicated:
            raise ManifestError(f"files named twice: {', '.join(duplicated)}")
        for older in (*self.previous, *filter(None, [self.rolled_back_from])):
            if not is_set_id(older):
                raise ManifestError(f"{older!r} is not a set id")
        if self.set_id in self.previous:
            raise ManifestError(f"set {self.set_id} lists itself among its previous sets")

    # --- what a worker needs ----------------------------------------------------------------

    def clamav_files(self) -> tuple[DatabaseFile, ...]:
        return tuple(f for f in self.files if f.engine is Engine.CLAMAV)

    def yara_files(self) -> tuple[DatabaseFile, ...]:
        return tuple(f for f in self.files if f.engine is Engine.YARA)

    def age(self, now: datetime) -> timedelta:
        """How old these definitions are at `now`: since the newest official ClamAV database of
        the set was built, if it has any; else (a custom-only set carries no build time) since
        the mirror last confirmed the set. Never negative."""
        built = [
            f.build_time
            for f in self.clamav_files()
            if f.source is Source.OFFICIAL and f.build_time is not None
        ]
        since = max(built) if built else self.checked_at
        return max(require_utc(now) - since, timedelta(0))

    def summary(self) -> dict[str, Any]:
        """What a verdict records of the definitions it was given with."""
        return {
            "set_id": self.set_id,
            "published_at": format_time(self.published_at),
            "engine": self.engine,
            "files": {f.name: {"version": f.version, "sha256": f.sha256} for f in self.files},
        }

    def same_files(self, files: Iterable[DatabaseFile]) -> bool:
        """Whether `files` are byte for byte this set's (sources and headers aside)."""
        return {f.identity() for f in files} == {f.identity() for f in self.files}

    # --- JSON -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "set_id": self.set_id,
            "published_at": format_time(self.published_at),
            "checked_at": format_time(self.checked_at),
            "engine": self.engine,
            "files": [f.to_dict() for f in self.files],
            "previous": list(self.previous),
            "verification": dict(self.verification),
            "rolled_back_from": self.rolled_back_from,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> DefinitionsManifest:
        """The manifest in `text`, or a ManifestError saying what is wrong with it."""
        try:
            data: Any = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ManifestError(f"the manifest is not JSON: {error}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> DefinitionsManifest:
        manifest = _object(data, "the manifest")
        version = manifest.get("format", FORMAT)
        if isinstance(version, bool) or version != FORMAT:
            raise ManifestError(f"manifest format {version!r}: this code reads format {FORMAT}")
        _exact_keys(manifest, _MANIFEST_KEYS, "the manifest")
        files = manifest["files"]
        if not isinstance(files, list):
            raise ManifestError("files must be a list")
        previous = manifest["previous"]
        if not isinstance(previous, list) or not all(isinstance(p, str) for p in previous):
            raise ManifestError("previous must be a list of set ids")
        verification = _object(manifest["verification"], "verification")
        if not all(isinstance(v, str) for v in verification.values()):
            raise ManifestError("verification must map each check to what it reported")
        rolled_back_from = manifest["rolled_back_from"]
        if rolled_back_from is not None and not isinstance(rolled_back_from, str):
            raise ManifestError("rolled_back_from must be a set id or null")
        return cls(
            set_id=_string(manifest["set_id"], "set_id"),
            published_at=parse_time(manifest["published_at"], "published_at"),
            checked_at=parse_time(manifest["checked_at"], "checked_at"),
            engine=_string(manifest["engine"], "engine"),
            files=tuple(DatabaseFile.from_dict(f, n) for n, f in enumerate(files)),
            previous=tuple(previous),
            verification=dict(verification),
            rolled_back_from=rolled_back_from,
        )


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{what} must be a JSON object")
    return value


def _exact_keys(data: dict[str, Any], expected: frozenset[str], what: str) -> None:
    missing = sorted(expected - set(data))
    if missing:
        raise ManifestError(f"{what} lacks {', '.join(missing)}")
    unknown = sorted(set(data) - expected)
    if unknown:
        # A field this code does not know may change what the set means: refuse, not ignore.
        raise ManifestError(f"{what} has fields this code does not know: {', '.join(unknown)}")


def _string(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{what} must be a non-empty string")
    return value


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(f"{what} must be an integer, got {value!r}")
    return value


def _optional_integer(value: object, what: str) -> int | None:
    return None if value is None else _integer(value, what)


def _enum[E: StrEnum](kind: type[E], value: object, what: str) -> E:
    known = {member.value: member for member in kind}
    if not isinstance(value, str) or value not in known:
        raise ManifestError(f"{what} must be one of {', '.join(known)}, got {value!r}")
    return known[value]


# --- backing off from a mirror that refuses us -------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """The updater's standing with the mirror: how many refusals in a row, and until when it
    must not ask again. The default is a clean slate."""

    refusals: int = 0
    until: datetime | None = None
    status: int | None = None  # the mirror's last refusal: 429 (rate limited) or 403 (blocked)
    reason: str = ""

    def blocks(self, now: datetime) -> bool:
        return self.until is not None and require_utc(now) < self.until

    def to_json(self) -> str:
        return json.dumps(
            {
                "refusals": self.refusals,
                "until": None if self.until is None else format_time(self.until),
                "status": self.status,
                "reason": self.reason,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Backoff:
        """The stored state; an unreadable one is a clean slate (the mirror, if it still
        refuses, says so again and the backoff starts over)."""
        try:
            data = json.loads(text)
            until = data["until"]
            return cls(
                refusals=int(data["refusals"]),
                until=None if until is None else parse_time(until, "until"),
                status=None if data["status"] is None else int(data["status"]),
                reason=str(data["reason"]),
            )
        except (TypeError, ValueError, KeyError):
            return cls()


@dataclass(frozen=True)
class BackoffPolicy:
    """After the mirror refuses (429 rate limited, 403 blocked), wait `base`, doubling with each
    refusal in a row up to `cap`, and never less than the cool-down freshclam announced. A
    success resets it; other failures leave it alone (the next scheduled run is their retry)."""

    base: timedelta = timedelta(hours=1)
    factor: int = 2
    cap: timedelta = timedelta(hours=24)

    def after_refusal(
        self,
        state: Backoff,
        now: datetime,
        *,
        status: int | None,
        cool_down_until: datetime | None = None,
        reason: str = "",
    ) -> Backoff:
        refusals = state.refusals + 1
        wait = min(self.base * self.factor ** (refusals - 1), self.cap)
        until = require_utc(now) + wait
        if cool_down_until is not None:
            until = max(until, require_utc(cool_down_until))
        return Backoff(refusals=refusals, until=until, status=status, reason=reason)

    def after_success(self) -> Backoff:
        return Backoff()
