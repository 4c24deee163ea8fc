"""A tenant erased ("a customer leaving"): each stage's work (domain/tenant_erasure.py).

The operation that drives it, page by page, is a bulk operation (services/operations.py:
`erase_tenant` starts it, `advance` runs its pages); this service does what each page does and
says how much it removed. Every step deletes what is there and counts what it deleted, so a step
run again after a crash deletes what is left and counts nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from filejobs.access import Caller
from filejobs.domain.file_lifecycle import Erasure
from filejobs.domain.tenant_erasure import REMAINS_BATCH
from filejobs.ports import Scheduler, ScheduleStore, TenantObjects, TenantSettings
from filejobs.services.file_lifecycle import FileLifecycle

logger = logging.getLogger(__name__)


class TenantErasure:
    def __init__(
        self,
        *,
        lifecycle: FileLifecycle,
        objects: TenantObjects,
        settings: TenantSettings,
        schedules: ScheduleStore,
        scheduler: Callable[[], Scheduler],
    ) -> None:
        self._lifecycle, self._objects, self._settings = lifecycle, objects, settings
        self._schedules, self._scheduler = schedules, scheduler

    def stop_settings(self, tenant: str) -> dict[str, int]:
        """SETTINGS: the tenant's schedules disarmed then deleted (a run delivered meanwhile
        finds no record and is dropped), then its webhooks, presets and quotas."""
        schedules = 0
        for schedule in self._schedules.of_tenant(tenant):
            self._scheduler().disarm(schedule.id)
            schedules += self._schedules.delete(schedule.id)
        return {"schedules": schedules, **self._settings.erase(tenant)}

    def erase_file(self, caller: Caller, file_id: str, operation_id: str) -> Erasure:
        """FILES: one file erased for good, with its key's every version; NotFoundError when it
        is gone already (erased with another version of its key, or by a page done before)."""
        return self._lifecycle.erase(caller, file_id, operation_id=operation_id)

    def erase_remains(self, tenant: str, *, most: int = REMAINS_BATCH) -> dict[str, int]:
        """REMAINS: at most `most` object versions under the tenant's prefixes deleted; fewer
        than `most` in all: none is left."""
        uploads = self._objects.delete_uploads(tenant, most=most)
        outputs = self._objects.delete_outputs(tenant, most=most - uploads)
        quarantined = self._objects.delete_quarantined(tenant, most=most - uploads - outputs)
        if uploads or outputs or quarantined:
            logger.info(
                "tenant %s: %d upload, %d output, %d quarantined versions deleted",
                tenant,
                uploads,
                outputs,
                quarantined,
            )
        return {
            "upload_versions": uploads,
            "outputs": outputs,
            "quarantined_versions": quarantined,
        }
