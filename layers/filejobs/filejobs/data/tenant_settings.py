"""A tenant's own settings, erased with the tenant (ports.TenantSettings): each repository
deletes its own items (it alone knows their keys), this only adds up what each removed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from filejobs.data.preset_repository import PresetRepository
from filejobs.data.quota_repository import QuotaRepository
from filejobs.data.webhook_repository import WebhookRepository
from filejobs.domain.time import utcnow


class TenantSettingsRepository:
    def __init__(
        self,
        *,
        webhooks: WebhookRepository,
        presets: PresetRepository,
        quotas: QuotaRepository,
        today: Callable[[], date] = lambda: utcnow().date(),
    ) -> None:
        self._webhooks, self._presets, self._quotas, self._today = webhooks, presets, quotas, today

    def erase(self, tenant: str) -> dict[str, int]:
        endpoints, deliveries = self._webhooks.erase_tenant(tenant)
        presets, versions = self._presets.erase_tenant(tenant)
        overrides, days = self._quotas.erase_tenant(tenant, self._today())
        return {
            "webhook_endpoints": endpoints,
            "webhook_deliveries": deliveries,
            "presets": presets,
            "preset_versions": versions,
            "quota_overrides": overrides,
            "usage_days": days,
        }
