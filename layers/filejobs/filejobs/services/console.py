"""What the console's overview and failure views show, for one caller: the aggregates kept from
the jobs' stream (data/stats_repository.py), the dead-letter queues' depths and the age of the
virus scan's definitions. Every read is a fixed number of requests, whatever the tables hold.

A tenant sees its own aggregates; an operator every tenant's (scope "*") or one tenant's, and
alone the dead-letter queues (they hold every tenant's messages).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from filejobs.access import Caller
from filejobs.domain.definitions import DefinitionsManifest
from filejobs.domain.job import JobType
from filejobs.domain.stats import FailureGroupSummary, Overview
from filejobs.domain.time import utcnow
from filejobs.ports import StatsReader
from filejobs.services.errors import MalformedRequestError, NotFoundError

logger = logging.getLogger(__name__)

SCOPE_ALL = "*"


@dataclass(frozen=True)
class DefinitionsAge:
    version: str
    published_at: datetime
    age_seconds: float


@dataclass(frozen=True)
class ConsoleOverview:
    stats: Overview
    dead_letters: dict[str, int]  # queue -> messages in it; operators only
    definitions: DefinitionsAge | None  # None: none published, or not readable now


class ConsoleViews:
    def __init__(
        self,
        stats: StatsReader,
        *,
        dead_letters: Callable[[], Mapping[str, int]] | None = None,
        definitions: Callable[[], DefinitionsManifest | None] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._stats, self._dead_letters, self._definitions = stats, dead_letters, definitions
        self._clock = clock

    def overview(self, caller: Caller, tenant: str | None) -> ConsoleOverview:
        now = self._clock()
        stats = self._stats.overview(scope_of(caller, tenant), now)
        dead_letters = {}
        if caller.operator and self._dead_letters is not None:
            dead_letters = dict(self._dead_letters())
        return ConsoleOverview(stats, dead_letters, self._definitions_age(now))

    def failures(
        self, caller: Caller, tenant: str | None, job_type: JobType | None
    ) -> list[FailureGroupSummary]:
        return self._stats.failure_groups(scope_of(caller, tenant), job_type)

    def _definitions_age(self, now: datetime) -> DefinitionsAge | None:
        if self._definitions is None:
            return None
        try:
            manifest = self._definitions()
        except Exception:
            # The overview is still worth showing: the scan itself fails closed without them.
            logger.exception("the definitions manifest could not be read")
            return None
        if manifest is None:
            return None
        age = (now - manifest.published_at).total_seconds()
        return DefinitionsAge(manifest.set_id, manifest.published_at, max(age, 0.0))


def scope_of(caller: Caller, tenant: str | None) -> str:
    """The aggregates' scope a caller asks for: a tenant's own, or (operators) any or all."""
    if caller.operator:
        return tenant or SCOPE_ALL
    if caller.tenant is None:
        raise MalformedRequestError("a tenant caller without a tenant")
    if tenant not in (None, caller.tenant):
        raise NotFoundError(f"no tenant {tenant!r}")
    return caller.tenant
