"""Upload presets (domain/presets.py): managed through the API, applied by ingest.

`Presets` is the API's: a tenant manages its own presets, an operator any tenant's. A change
reads the tenant's presets, checks the whole set (names, jobs and their options, bindings) and
writes it back conditioned on the revision it read, with the new version beside it; a change that
lost a race is tried again on the fresh set.

`PresetCache` is ingest's: each tenant's presets read once and kept for `CACHE_SECONDS` in the
function's memory, so an upload costs no read in the common case. A change applies to uploads
from at most that long after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from filejobs.access import Caller
from filejobs.domain.presets import (
    MAX_DESCRIPTION_CHARS,
    MAX_PRESETS_PER_TENANT,
    Preset,
    PresetError,
    PresetJob,
    PresetSet,
    check_bindings,
    check_jobs,
    check_prefixes,
    checked_name,
)
from filejobs.domain.time import utcnow
from filejobs.ports import PresetStore
from filejobs.services.errors import ConflictError, InvalidRequestError, NotFoundError
from filejobs.services.remembered import Remembered
from filejobs.services.tenancy import tenant_acted_for

CACHE_SECONDS = 60.0
_ATTEMPTS = 3  # a change that keeps losing races to others is refused, not retried forever


@dataclass(frozen=True)
class PresetChange:
    """PUT /presets/{name}: the preset's whole new content."""

    jobs: tuple[PresetJob, ...]
    prefixes: tuple[str, ...] = ()
    tenant_default: bool = False
    description: str = ""


class Presets:
    def __init__(self, store: PresetStore, clock: Callable[[], datetime] = utcnow) -> None:
        self._store, self._clock = store, clock

    def put(self, caller: Caller, tenant: str | None, name: str, change: PresetChange) -> Preset:
        """The preset made, or its next version; the uploads after it get it."""
        owner = tenant_acted_for(caller, tenant, what="the preset")
        for _ in range(_ATTEMPTS):
            current = self._store.current(owner, consistent=True)
            saved = self._next_version(caller, owner, name, change, current)
            others = tuple(preset for preset in current.presets if preset.name != saved.name)
            if len(others) >= MAX_PRESETS_PER_TENANT:
                raise ConflictError(
                    f"tenant {owner} has {MAX_PRESETS_PER_TENANT} presets, the most it may: "
                    "remove one first",
                    log="presets of the tenant spent",
                )
            if self._store.save(owner, (*others, saved), saved, after=current.revision):
                return saved
        raise ConflictError(
            "the tenant's presets are being changed by someone else: try again",
            log="preset change lost its races",
        )

    def of_tenant(self, caller: Caller, tenant: str | None) -> tuple[Preset, ...]:
        owner = tenant_acted_for(caller, tenant, what="the preset")
        return tuple(sorted(self._store.current(owner).presets, key=lambda p: p.name))

    def get(
        self, caller: Caller, tenant: str | None, name: str, version: int | None = None
    ) -> Preset:
        owner = tenant_acted_for(caller, tenant, what="the preset")
        if version is not None:
            found = self._store.version(owner, name, version)
        else:
            found = self._store.current(owner, consistent=True).tenant_presets().named(name)
        if found is None:
            shown = name[:63] if version is None else f"{name[:63]} version {version}"
            raise NotFoundError(f"no preset {shown!r}", log="no such preset")
        return found

    def delete(self, caller: Caller, tenant: str | None, name: str) -> None:
        """Removed: later uploads no longer get it (files keep the version they were given)."""
        owner = tenant_acted_for(caller, tenant, what="the preset")
        for _ in range(_ATTEMPTS):
            current = self._store.current(owner, consistent=True)
            if current.tenant_presets().named(name) is None:
                raise NotFoundError(f"no preset {name[:63]!r}", log="no such preset")
            kept = tuple(preset for preset in current.presets if preset.name != name)
            if self._store.save(owner, kept, None, after=current.revision):
                return
        raise ConflictError(
            "the tenant's presets are being changed by someone else: try again",
            log="preset change lost its races",
        )

    def _next_version(
        self, caller: Caller, tenant: str, name: str, change: PresetChange, current: PresetSet
    ) -> Preset:
        try:
            checked_name(name)
            check_jobs(change.jobs)
            if not caller.operator:
                _check_tenants_priorities(change.jobs)
            check_prefixes(tenant, change.prefixes)
            _check_description(change.description)
            previous = current.tenant_presets().named(name)
            version = (
                previous.version if previous else self._store.latest_version(tenant, name)
            ) + 1
            saved = Preset(
                tenant=tenant,
                name=name,
                version=version,
                jobs=change.jobs,
                prefixes=tuple(dict.fromkeys(change.prefixes)),
                tenant_default=change.tenant_default,
                description=change.description.strip(),
                updated_at=self._clock(),
                updated_by=caller.name,
            )
            check_bindings(saved, current.presets)
        except ValueError as error:  # a PresetError, or an OptionError naming the option
            raise InvalidRequestError(str(error), log="preset refused") from None
        return saved


def _check_tenants_priorities(jobs: tuple[PresetJob, ...]) -> None:
    """The high lane is the operators' to hand out, for a preset's jobs as for a requested one
    (services/api.py): a tenant's preset runs its jobs at priority 0 or below."""
    for index, job in enumerate(jobs):
        if job.priority > 0:
            raise PresetError(
                f"jobs[{index}].priority",
                f"{job.priority} is an operator's to give: a tenant's jobs run at priority 0 "
                "or below",
            )


def _check_description(description: str) -> None:
    if len(description) > MAX_DESCRIPTION_CHARS or not description.isprintable():
        raise PresetError("description", f"printable text of at most {MAX_DESCRIPTION_CHARS}")


class PresetCache:
    """Each tenant's presets, read at most once per `ttl_seconds` per function instance
    (`of(tenant)`)."""

    def __init__(
        self,
        store: PresetStore,
        ttl_seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.of = Remembered(
            lambda tenant: store.current(tenant).tenant_presets(), ttl_seconds, clock
        )
