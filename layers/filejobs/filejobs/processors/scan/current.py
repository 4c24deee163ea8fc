"""The engines a scan runs now: the current definitions set, fetched, loaded, and fresh enough.

The virus scan fails closed. With ClamAV configured (ScanEngines=clamav+yara), no scan answers
until ClamAV can vouch: when no definitions were ever published, when the current set has no
ClamAV database, when it is older than the stack allows (MaxDefinitionsAgeHours), when its
manifest cannot be read, or when clamd cannot load it, the scan raises
DefinitionsUnavailableError, a TransientError retried minutes later, and the workers count it
(the DefinitionsUnavailable metric and its alarm). It never falls back to YARA alone: YARA-only
is the explicit ScanEngines=yara, and then only YARA's rules (the shipped ones plus the set's)
are used, with no age limit.

What it keeps warm per execution environment: the current manifest (re-read every few minutes,
by ETag), the set's files under /tmp, the compiled YARA rules of that set, and the clamd
(processors/scan/clamd.py) loaded with its ClamAV databases.

clamd loads only the files the manifest names, each checked against its SHA-256 before every
start. When the local copy is not exactly the set any more (a file added to it, such as an
`.ign2`, or one altered), it is fetched again from the bucket, once, and only then loaded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import yara  # type: ignore[import-not-found]  # a C extension without stubs

from filejobs.domain.definitions import DefinitionsManifest, ManifestError
from filejobs.domain.retry import TransientError
from filejobs.domain.time import utcnow
from filejobs.processors.scan.clamd import (
    ClamdDefinitions,
    ClamdError,
    ClamdScanner,
    ClamLimits,
    DefinitionsTamperedError,
    warm_clamav,
)
from filejobs.processors.scan.engines import Scanner, SignatureError, YaraScanner
from filejobs.processors.scan.isolated import SandboxedYara
from filejobs.processors.scan.processor import EngineSet

logger = logging.getLogger(__name__)

# The soonest a scan refused for its definitions is tried again: the updater runs every couple
# of hours, and a deploy's first set takes a minute or two; seconds of backoff would only spend
# the job's retries.
RETRY_AFTER = timedelta(minutes=5)
# How often a warm worker looks for a newer manifest (one conditional GET when unchanged).
REFRESH_SECONDS = 300.0


class DefinitionsUnavailableError(TransientError):
    """The scan cannot vouch for a file now: its definitions are missing, unloadable or too old."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retry_after=RETRY_AFTER)


class LocalSet(Protocol):
    """A definitions set fetched into this environment's /tmp."""

    @property
    def manifest(self) -> DefinitionsManifest: ...

    @property
    def clamav_dir(self) -> Path: ...

    @property
    def yara_dir(self) -> Path: ...


class ManifestRead(Protocol):
    @property
    def manifest(self) -> DefinitionsManifest | None: ...

    @property
    def etag(self) -> str | None: ...

    @property
    def unchanged(self) -> bool: ...


class DefinitionsSource(Protocol):
    """Where the current set comes from (adapters/definitions.py DefinitionsStore)."""

    def current(self, if_none_match: str | None = None) -> ManifestRead:
        """The published manifest (none when none was ever published), or `unchanged` when its
        ETag is still `if_none_match`. Raises ManifestError for one that cannot be understood."""
        ...

    def fetch(self, manifest: DefinitionsManifest, cache_root: Path) -> LocalSet: ...


@dataclass(frozen=True)
class EngineSettings:
    use_clamav: bool
    clamd: str = "clamd"
    limits: ClamLimits = field(default_factory=ClamLimits)
    max_age: timedelta = timedelta(hours=48)
    refresh_seconds: float = REFRESH_SECONDS
    # YARA and the archive walk in the decoder sandbox (isolated.py); False only for a caller
    # that measures the engine itself.
    sandboxed: bool = True


class CurrentEngines:
    """An EngineSource (processors/scan/processor.py): the engines for the scan about to run."""

    def __init__(
        self,
        source: DefinitionsSource | None,
        cache_root: Path,
        settings: EngineSettings,
        *,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source, self._cache, self._settings = source, cache_root, settings
        self._clock, self._monotonic = clock, monotonic
        self._lock = threading.Lock()
        self._manifest: DefinitionsManifest | None = None
        self._etag: str | None = None
        self._read_at: float | None = None
        self._local: LocalSet | None = None
        self._yara: tuple[str | None, Scanner] | None = None

    def __call__(self, newest: bool = False) -> EngineSet:
        with self._lock:
            manifest = self._current(newest)
            local = self._fetched(manifest)
            engines: list[Scanner] = [self._yara_for(local)]
            versions = {"yara": str(yara.__version__)}
            if self._settings.use_clamav:
                clamav = self._clamav(manifest, local)
                engines.append(clamav)
                versions["clamav"] = clamav.version or "ClamAV"
            return EngineSet(
                engines,
                versions,
                None if manifest is None else manifest.summary(),
                None if manifest is None else manifest.set_id,
            )

    # --- the manifest -------------------------------------------------------------------------

    def _current(self, newest: bool) -> DefinitionsManifest | None:
        now = self._monotonic()
        stale = self._read_at is None or now - self._read_at >= self._settings.refresh_seconds
        # Until a set exists, every scan looks again: the first one is a minute away, not five.
        # A rescan looks too (one conditional GET): it is asked for because definitions changed.
        if self._source is not None and (stale or newest or self._manifest is None):
            try:
                self._read()
            except ManifestError as error:
                raise DefinitionsUnavailableError(
                    f"the definitions manifest cannot be used: {error}"
                ) from error
            except Exception:
                if self._manifest is None:
                    raise
                # S3 hiccuped: the set in hand is still checked for age below.
                kept = self._manifest.set_id
                logger.warning("definitions manifest not re-read; scanning with set %s", kept)
            self._read_at = now
        return self._manifest

    def _read(self) -> None:
        assert self._source is not None
        read = self._source.current(if_none_match=self._etag if self._manifest else None)
        if not read.unchanged:
            self._manifest, self._etag = read.manifest, read.etag

    def _fetched(self, manifest: DefinitionsManifest | None) -> LocalSet | None:
        if manifest is None or self._source is None:
            return None
        if self._local is None or self._local.manifest.set_id != manifest.set_id:
            try:
                # fetch() keeps a local copy only if it is exactly the set, byte for byte.
                self._local = self._source.fetch(manifest, self._cache)
            except TransientError as error:  # a file missing, or not the bytes it should be
                raise DefinitionsUnavailableError(
                    f"definitions set {manifest.set_id} could not be fetched whole: {error}"
                ) from error
        return self._local

    # --- the engines --------------------------------------------------------------------------

    def _yara_for(self, local: LocalSet | None) -> Scanner:
        set_id = None if local is None else local.manifest.set_id
        if self._yara is None or self._yara[0] != set_id:
            extra = [] if local is None else [local.yara_dir]
            try:
                scanner = YaraScanner.with_rules_in(*extra)
            except SignatureError as error:
                raise DefinitionsUnavailableError(f"set {set_id}: {error}") from error
            engine: Scanner = scanner
            if self._settings.sandboxed:
                engine = SandboxedYara(scanner)
            self._yara = (set_id, engine)
        return self._yara[1]

    def _clamav(self, manifest: DefinitionsManifest | None, local: LocalSet | None) -> ClamdScanner:
        if manifest is None or local is None:
            raise DefinitionsUnavailableError(
                "no ClamAV definitions have been published yet (the definitions updater has not "
                "run, or has not succeeded): the scan will not answer without them"
            )
        if not manifest.clamav_files():
            raise DefinitionsUnavailableError(
                f"definitions set {manifest.set_id} holds no ClamAV database"
            )
        age, limit = manifest.age(self._clock()), self._settings.max_age
        if age > limit:
            raise DefinitionsUnavailableError(
                f"definitions set {manifest.set_id} is {_hours(age)} h old, past the "
                f"{_hours(limit)} h this stack allows (MaxDefinitionsAgeHours)"
            )
        try:
            try:
                return self._warm(manifest, local)
            except DefinitionsTamperedError as error:
                logger.warning("definitions fetched again: %s", error)
                self._local = None
                return self._warm(manifest, self._fetched(manifest))
        except ClamdError as error:
            raise DefinitionsUnavailableError(
                f"clamd could not load definitions set {manifest.set_id}: {error}"
            ) from error

    def _warm(self, manifest: DefinitionsManifest, local: LocalSet | None) -> ClamdScanner:
        assert local is not None
        definitions = ClamdDefinitions.of_set(local.clamav_dir, manifest.clamav_files())
        return warm_clamav(self._settings.clamd, definitions, self._settings.limits)


def _hours(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 3600:.1f}"
