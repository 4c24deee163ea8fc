"""Tenant quotas: the limits that hold a tenant's uploads (the ingest asks `limits`), and the
API's use cases to read them (a tenant its own, an operator any) and change them (operators
only). The rules are domain/quotas.py; counting is the file store's ingest (ports.FileStore)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from filejobs.access import Caller
from filejobs.domain.quotas import (
    DayUsage,
    QuotaChange,
    QuotaOverrides,
    TenantQuotas,
    usage_day,
)
from filejobs.domain.time import utcnow
from filejobs.ports import QuotaStore
from filejobs.services.errors import ForbiddenError, NotFoundError
from filejobs.services.remembered import Remembered

logger = logging.getLogger(__name__)

# How long a function instance keeps a tenant's quotas (the ingest's, the workers' own cap): an
# operator's change applies to what starts at most this long after it, and a warm instance reads
# a tenant's quota item at most once per this, not once per upload or job.
REMEMBERED_SECONDS = 60.0


@dataclass
class RememberedLimits(Remembered[TenantQuotas]):
    """The limits in force for each tenant (`read`: TenantLimits.limits), read at most once per
    `ttl_seconds` per function instance, "no quota item" (the defaults) included. The ingest's:
    an upload costs no read of `quota#{tenant}` in the common case. A read that fails raises, as
    the read itself would: the upload is retried, never let through unlimited."""

    ttl_seconds: float = REMEMBERED_SECONDS


@dataclass
class InFlightCaps:
    """A tenant's own in-flight cap (its `max_in_flight_jobs` quota), as the workers read it
    for the running cap (services/worker.RunningCap): None where the default applies. Each
    tenant's is kept for `ttl_seconds`, so an operator's change reaches every worker within it
    without a read per job; a read that fails answers the default rather than failing the job."""

    store: QuotaStore
    ttl_seconds: float = REMEMBERED_SECONDS
    monotonic: Callable[[], float] = time.monotonic
    _known: dict[str, tuple[float, int | None]] = field(default_factory=dict)

    def __call__(self, tenant: str) -> int | None:
        now = self.monotonic()
        known = self._known.get(tenant)
        if known is not None and now - known[0] < self.ttl_seconds:
            return known[1]
        try:
            own = self.store.overrides(tenant).max_in_flight_jobs
        except Exception:  # the default cap still holds the tenant
            logger.exception("reading the quotas of tenant %s failed", tenant)
            return None if known is None else known[1]
        self._known[tenant] = (now, own)
        return own


@dataclass(frozen=True)
class QuotaReport:
    """A tenant's limits as the API shows them: the ones in force, the defaults, the tenant's
    own, and what its uploads of today (UTC) add up to."""

    tenant: str
    limits: TenantQuotas
    defaults: TenantQuotas
    overrides: QuotaOverrides
    usage: DayUsage


@dataclass
class TenantLimits:
    store: QuotaStore
    defaults: TenantQuotas
    clock: Callable[[], datetime] = utcnow

    def limits(self, tenant: str) -> TenantQuotas:
        """The limits in force for the tenant: its own where an operator set them, else the
        defaults."""
        return self.defaults.overridden(self.store.overrides(tenant))

    def report(self, caller: Caller, tenant: str) -> QuotaReport:
        """A tenant reads its own quotas, an operator any tenant's; another tenant's answer as
        if there were no such tenant."""
        if not caller.may_see(tenant):
            raise NotFoundError(f"no tenant {tenant!r}", log="another tenant's quotas")
        return self._report(tenant, self.store.overrides(tenant))

    def change(self, caller: Caller, tenant: str, change: QuotaChange) -> QuotaReport:
        """An operator sets or resets some of a tenant's limits, in one write."""
        if not caller.operator:
            # A tenant who could raise its own limits would have none.
            raise ForbiddenError(
                "only an operator may change a tenant's quotas", log="tenant changing quotas"
            )
        overrides = self.store.change(tenant, change, at=self.clock(), by=caller.name)
        return self._report(tenant, overrides)

    def _report(self, tenant: str, overrides: QuotaOverrides) -> QuotaReport:
        usage = self.store.usage(tenant, usage_day(self.clock()))
        return QuotaReport(
            tenant=tenant,
            limits=self.defaults.overridden(overrides),
            defaults=self.defaults,
            overrides=overrides,
            usage=usage,
        )
