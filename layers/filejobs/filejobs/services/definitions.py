"""The definitions updater: freshclam against the mirror, the result proved, then published.

One run (`DefinitionsUpdater.run`):

1. **Back off** while the mirror's last refusal (429, 403) says so: the run is skipped.
2. **Seed** a scratch database directory with the current set's ClamAV files and freshclam.dat,
   so freshclam fetches only differences (.cdiff patches, If-Modified-Since); each seeded file's
   time is the last time the mirror confirmed the set (a little before, to be safe with HTTP's
   whole seconds), so a file the mirror changed since is fetched again.
3. **Run freshclam**. A refusal backs the updater off (BackoffPolicy) and fails the run; any
   other failure fails the run and the next scheduled one is its retry.
4. **Collect** the databases freshclam fetched under the current settings, plus the curated
   files of signatures/custom/. Byte for byte the current set: the manifest's `checked_at` is
   moved on, nothing else ("unchanged").
5. **Verify** (the Verifier): EICAR found, a clean file passed, YARA rules compiled. A set that
   fails is not published; the run fails with the reason.
6. **Publish** the set, then the manifest; **prune** to the kept sets.

Everything local happens in a temporary folder removed at the end (Lambda's /tmp outlives an
invocation). With ScanEngines yara, freshclam is not run: a set holds the curated YARA rules.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from filejobs.domain.definitions import (
    Backoff,
    BackoffPolicy,
    DatabaseFile,
    DefinitionsManifest,
    Engine,
    ManifestError,
    Source,
    format_time,
    new_set_id,
)
from filejobs.domain.retry import TransientError
from filejobs.domain.time import utcnow
from filejobs.ports import (
    BACKOFF_STATE,
    FRESHCLAM_STATE,
    CuratedFile,
    LocalDefinitions,
    ManifestRead,
)
from filejobs.processors.scan.freshclam import (
    CvdHeader,
    CvdHeaderError,
    FreshclamResult,
    FreshclamStatus,
    Verification,
)

logger = logging.getLogger(__name__)
CHUNK = 1024 * 1024
# Seeded files look this much older than the mirror's last confirmation: HTTP dates are whole
# seconds, and a file changed within the second of the check must not look already fetched.
MTIME_MARGIN = timedelta(seconds=2)


class Store(Protocol):
    """Where sets are published (adapters/definitions.py's DefinitionsStore)."""

    def current(self, if_none_match: str | None = None) -> ManifestRead: ...
    def fetch(self, manifest: DefinitionsManifest, cache_root: Path) -> LocalDefinitions: ...
    def set_manifest(self, set_id: str) -> DefinitionsManifest | None: ...
    def sets(self) -> list[str]: ...
    def publish(self, manifest: DefinitionsManifest, clamav_dir: Path, yara_dir: Path) -> None: ...
    def touch(self, manifest: DefinitionsManifest, checked_at: datetime) -> DefinitionsManifest: ...
    def prune(self, keep: int) -> list[str]: ...
    def read_state(self, name: str) -> bytes | None: ...
    def write_state(self, name: str, data: bytes) -> None: ...
    def curated(self) -> list[CuratedFile]: ...
    def download(self, curated: CuratedFile, directory: Path) -> Path: ...


class Fetcher(Protocol):
    """freshclam (processors/scan/freshclam.py's Freshclam)."""

    def run(self, datadir: Path, workdir: Path) -> FreshclamResult: ...
    def source_of(self, name: str) -> Source | None: ...
    def header(self, path: Path) -> CvdHeader | None: ...


class Verifier(Protocol):
    """Proves a candidate set (processors/scan/freshclam.py's SetVerifier)."""

    def verify(self, clamav_dir: Path, yara_dir: Path, workdir: Path) -> Verification: ...
    def engine_version(self) -> str: ...


class UpdateStatus(StrEnum):
    PUBLISHED = "published"  # a new set is current
    UNCHANGED = "unchanged"  # the mirror serves what is current: checked_at moved on
    SKIPPED = "skipped"  # not asked: backing off from the mirror, or a rolled-back set again
    FAILED = "failed"  # nothing published: the mirror failed, or the set did not prove itself


@dataclass(frozen=True)
class UpdateReport:
    status: UpdateStatus
    set_id: str | None  # the current set after the run (None: nothing published yet)
    age: timedelta | None  # of that set, at the end of the run
    reason: str = ""
    durations: dict[str, float] = field(default_factory=dict)  # seconds, by step
    pruned: tuple[str, ...] = ()
    stale: bool = False  # older than the scan accepts (MaxDefinitionsAgeHours)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "set_id": self.set_id,
            "age_hours": None if self.age is None else round(self.age / timedelta(hours=1), 3),
            "reason": self.reason,
            "durations": {step: round(seconds, 3) for step, seconds in self.durations.items()},
            "pruned": list(self.pruned),
            "stale": self.stale,
        }


class _FailedError(Exception):
    """Ends a run as FAILED with this reason (nothing published)."""


@dataclass
class _Run:
    """What one run learns as it goes."""

    started: datetime
    current: DefinitionsManifest | None
    scratch: Path
    durations: dict[str, float] = field(default_factory=dict)
    # The current set cannot be read back from the bucket as its manifest says (an object
    # changed or gone): it is replaced, and never offered for a rollback.
    damaged: bool = False

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.durations[step] = self.durations.get(step, 0.0) + time.monotonic() - began


class DefinitionsUpdater:
    def __init__(
        self,
        store: Store,
        freshclam: Fetcher | None,
        verifier: Verifier,
        *,
        clock: Callable[[], datetime] = utcnow,
        keep: int = 3,
        policy: BackoffPolicy = BackoffPolicy(),  # noqa: B008 (frozen dataclass: immutable)
        max_age: timedelta | None = None,
        scratch_root: Path | None = None,
    ) -> None:
        """`freshclam` None: ScanEngines yara (no ClamAV database is fetched). `keep`: the sets
        kept in the bucket, the current one included (keep - 1 rollbacks)."""
        if keep < 1:
            raise ValueError("keep at least the current set")
        self._store, self._freshclam, self._verifier = store, freshclam, verifier
        self._clock, self._keep, self._policy = clock, keep, policy
        self._max_age, self._scratch_root = max_age, scratch_root

    def run(self) -> UpdateReport:
        began = time.monotonic()
        current, broken = self._current()
        backoff = self._backoff()
        if self._freshclam is not None and backoff.blocks(self._now()):
            assert backoff.until is not None
            reason = f"backing off from the mirror until {format_time(backoff.until)}"
            return self._report(UpdateStatus.SKIPPED, current, f"{reason} ({backoff.reason})")
        with tempfile.TemporaryDirectory(
            prefix="filejobs-definitions-", dir=self._scratch_root
        ) as scratch:
            run = _Run(self._now(), current, Path(scratch))
            try:
                report = self._update(run, backoff)
            except _FailedError as failure:
                reason = f"{failure}{broken}"
                report = self._report(UpdateStatus.FAILED, current, reason, run.durations)
        report.durations["total"] = time.monotonic() - began
        return report

    def _now(self) -> datetime:
        # Manifests keep whole seconds: what is published reads back equal.
        return self._clock().replace(microsecond=0)

    def _current(self) -> tuple[DefinitionsManifest | None, str]:
        """The current set; a manifest that does not parse is replaced by this run's set."""
        try:
            return self._store.current().manifest, ""
        except ManifestError as error:
            logger.warning("the current manifest is unreadable (%s): publishing anew", error)
            return None, f" (the current manifest is unreadable: {error})"

    def _backoff(self) -> Backoff:
        stored = self._store.read_state(BACKOFF_STATE)
        return Backoff() if stored is None else Backoff.from_json(stored)

    # --- one run -----------------------------------------------------------------------------

    def _update(self, run: _Run, backoff: Backoff) -> UpdateReport:
        clamav_dir, yara_dir = run.scratch / "set" / "clamav", run.scratch / "set" / "yara"
        clamav_dir.mkdir(parents=True)
        yara_dir.mkdir(parents=True)
        if self._freshclam is not None:
            self._fetch(run, self._freshclam, backoff, clamav_dir)
        with run.timed("curated"):
            self._add_curated(clamav_dir, yara_dir)
        files = self._describe(clamav_dir, yara_dir)
        current = run.current
        if not files and self._freshclam is not None:
            raise _FailedError("nothing to publish: no database was fetched and custom/ is empty")
        if not files and current is None:
            # YARA alone and no curated rule: the shipped rules are all a scan uses, no set needed
            # (once a set of rules was published, an empty one withdraws them).
            reason = "ScanEngines is yara and signatures/custom/yara/ holds no rule to publish"
            return self._report(UpdateStatus.SKIPPED, None, reason, run.durations)
        if current is not None and current.same_files(files) and not run.damaged:
            touched = self._store.touch(current, run.started)
            return self._report(UpdateStatus.UNCHANGED, touched, "", run.durations)
        refused = self._rolled_back(current, files)
        if refused:
            return self._report(UpdateStatus.SKIPPED, current, refused, run.durations)
        with run.timed("verify"):
            verification = self._verifier.verify(clamav_dir, yara_dir, run.scratch / "verify")
        if not verification.passed:
            raise _FailedError(f"the new set was not published: {verification.reason}")
        with run.timed("publish"):
            manifest = self._manifest(run, files, verification)
            self._store.publish(manifest, clamav_dir, yara_dir)
            pruned = self._store.prune(self._keep)
        return self._report(UpdateStatus.PUBLISHED, manifest, "", run.durations, tuple(pruned))

    def _fetch(self, run: _Run, freshclam: Fetcher, backoff: Backoff, target: Path) -> None:
        """freshclam over a datadir seeded from the current set; its databases into `target`."""
        datadir = run.scratch / "freshclam"
        datadir.mkdir()
        with run.timed("seed"):
            self._seed(run, freshclam, datadir)
        with run.timed("freshclam"):
            result = freshclam.run(datadir, run.scratch / "home")
        state = datadir / FRESHCLAM_STATE
        if state.is_file():  # its cool-down and UUID, kept whatever happened
            self._store.write_state(FRESHCLAM_STATE, state.read_bytes())
        if result.status is FreshclamStatus.REFUSED:
            backed_off = self._policy.after_refusal(
                backoff,
                self._now(),
                status=result.http_status,
                cool_down_until=result.cool_down_until,
                reason=result.reason,
            )
            self._store.write_state(BACKOFF_STATE, backed_off.to_json().encode())
            assert backed_off.until is not None
            raise _FailedError(
                f"{result.reason}: backing off until {format_time(backed_off.until)}"
            )
        if result.status is FreshclamStatus.FAILED:
            raise _FailedError(result.reason)
        if backoff != Backoff():
            self._store.write_state(BACKOFF_STATE, self._policy.after_success().to_json().encode())
        for path in sorted(datadir.iterdir()):
            if path.is_file() and freshclam.source_of(path.name) is not None:
                path.rename(target / path.name)

    def _seed(self, run: _Run, freshclam: Fetcher, datadir: Path) -> None:
        state = self._store.read_state(FRESHCLAM_STATE)
        if state is not None:
            (datadir / FRESHCLAM_STATE).write_bytes(state)
        current = run.current
        if current is None:
            return
        try:
            local = self._store.fetch(current, run.scratch / "current")
        except TransientError as error:
            # No base to update from: freshclam downloads everything, and the set it makes
            # replaces this one even if its files are the same.
            logger.warning("set %s cannot be read back, replacing it: %s", current.set_id, error)
            run.damaged = True
            return
        confirmed = (current.checked_at - MTIME_MARGIN).timestamp()
        for entry in current.clamav_files():
            if freshclam.source_of(entry.name) is None:
                continue  # curated, or no longer configured: not freshclam's to update
            seeded = datadir / entry.name
            (local.clamav_dir / entry.name).rename(seeded)
            os.utime(seeded, (confirmed, confirmed))

    def _add_curated(self, clamav_dir: Path, yara_dir: Path) -> None:
        for curated in self._store.curated():
            if curated.engine is Engine.CLAMAV and self._freshclam is None:
                continue  # ScanEngines yara: no ClamAV to load it
            directory = clamav_dir if curated.engine is Engine.CLAMAV else yara_dir
            if (directory / curated.name).exists():
                raise _FailedError(
                    f"curated {curated.key} has the name of a database freshclam fetches"
                )
            self._store.download(curated, directory)

    def _describe(self, clamav_dir: Path, yara_dir: Path) -> list[DatabaseFile]:
        files = []
        for engine, directory in ((Engine.CLAMAV, clamav_dir), (Engine.YARA, yara_dir)):
            for path in sorted(directory.iterdir()):
                files.append(self._file(engine, path))
        return files

    def _file(self, engine: Engine, path: Path) -> DatabaseFile:
        fetched = None if self._freshclam is None else self._freshclam.source_of(path.name)
        source = fetched or Source.CURATED
        try:
            header = None if self._freshclam is None else self._freshclam.header(path)
            return DatabaseFile(
                name=path.name,
                engine=engine,
                sha256=_sha256(path),
                size=path.stat().st_size,
                source=source,
                version=None if header is None else header.version,
                signatures=None if header is None else header.signatures,
                build_time=None if header is None else header.build_time,
            )
        except (CvdHeaderError, ManifestError) as error:  # a header, or a name, unfit to publish
            raise _FailedError(f"the new set was not published: {error}") from None

    def _rolled_back(self, current: DefinitionsManifest | None, files: list[DatabaseFile]) -> str:
        """Why not to publish `files` again: they are the set an operator rolled back from."""
        if current is None or current.rolled_back_from is None:
            return ""
        undone = self._store.set_manifest(current.rolled_back_from)
        if undone is None or not undone.same_files(files):
            return ""
        return (
            f"the mirror still serves set {undone.set_id}, which was rolled back from; "
            "it is not published again until the mirror serves something else"
        )

    def _manifest(
        self, run: _Run, files: list[DatabaseFile], verification: Verification
    ) -> DefinitionsManifest:
        current = run.current
        known = self._store.sets()
        if current is not None:
            known += [current.set_id, *current.previous, *filter(None, [current.rolled_back_from])]
        published = self._now()
        kept = [] if current is None else [current.set_id, *current.previous]
        if run.damaged:
            kept = kept[1:]
        return DefinitionsManifest(
            set_id=new_set_id(published, after=max(known, default=None)),
            published_at=published,
            checked_at=run.started,
            engine=self._verifier.engine_version(),
            files=tuple(files),
            previous=tuple(dict.fromkeys(kept))[: self._keep - 1],
            verification=verification.report,
        )

    def _report(
        self,
        status: UpdateStatus,
        manifest: DefinitionsManifest | None,
        reason: str,
        durations: dict[str, float] | None = None,
        pruned: tuple[str, ...] = (),
    ) -> UpdateReport:
        age = None if manifest is None else manifest.age(self._now())
        stale = age is not None and self._max_age is not None and age > self._max_age
        return UpdateReport(
            status=status,
            set_id=None if manifest is None else manifest.set_id,
            age=age,
            reason=reason,
            durations=dict(durations or {}),
            pruned=pruned,
            stale=stale,
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for piece in iter(lambda: data.read(CHUNK), b""):
            digest.update(piece)
    return digest.hexdigest()
