"""Recurring schedules (domain/schedules.py): managed through the API, run as operations.

`create` records a schedule in OpsTable, then arms it in the scheduler (EventBridge Scheduler on
AWS, the local stack's scheduler locally); if arming fails the record is removed, so no schedule
is shown that will not run. `run`, called by the operations function for each run the scheduler
delivers, starts the run's operation (services/operations.py) once per scheduled time, and only
while the schedule exists and is enabled in OpsTable: the record, not the scheduler, decides.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from filejobs.access import Caller
from filejobs.domain.job import JobType
from filejobs.domain.schedules import (
    MAX_NAME_CHARS,
    MAX_SCHEDULES_PER_TENANT,
    Schedule,
    ScheduleAction,
    ScheduleError,
    checked_expression,
    time_zone,
)
from filejobs.domain.tenant_prefixes import prefix_problem
from filejobs.domain.time import utcnow
from filejobs.ports import Scheduler, ScheduleStore
from filejobs.services.errors import ConflictError, InvalidRequestError, NotFoundError
from filejobs.services.operations import BulkOperations, Started
from filejobs.services.tenancy import tenant_acted_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewSchedule:
    name: str
    expression: str
    action: ScheduleAction
    prefix: str
    timezone: str = "UTC"
    tenant: str | None = None  # an operator's, for a tenant; a tenant's own otherwise
    job_type: JobType | None = None
    options: dict[str, Any] = field(default_factory=dict)


class Schedules:
    def __init__(
        self,
        *,
        store: ScheduleStore,
        scheduler: Callable[[], Scheduler],
        operations: Callable[[], BulkOperations],
        check_options: Callable[[JobType, dict[str, Any]], None] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store, self._scheduler, self._operations = store, scheduler, operations
        self._check_options, self._clock = check_options, clock

    def create(self, caller: Caller, command: NewSchedule) -> Schedule:
        tenant = tenant_acted_for(caller, command.tenant, what="a schedule")
        now = self._clock()
        schedule = Schedule(
            id=f"sch-{secrets.token_hex(8)}",
            tenant=tenant,
            name=command.name,
            expression=command.expression.strip(),
            timezone=command.timezone,
            action=command.action,
            prefix=command.prefix,
            created_by=caller.name,
            created_at=now,
            updated_at=now,
            job_type=command.job_type,
            options=dict(command.options),
        )
        self._check(schedule, now)
        if len(self._store.of_tenant(tenant)) >= MAX_SCHEDULES_PER_TENANT:
            raise ConflictError(
                f"tenant {tenant} has {MAX_SCHEDULES_PER_TENANT} schedules, the most it may: "
                "remove one first",
                log="schedules of the tenant spent",
            )
        if not self._store.create(schedule):
            raise ConflictError(f"schedule {schedule.id} exists", log="schedule id collision")
        try:
            self._scheduler().arm(schedule)
        except Exception:
            self._store.delete(schedule.id)
            raise
        return schedule

    def of_tenant(self, caller: Caller, tenant: str | None) -> list[Schedule]:
        if caller.operator:
            return self._store.of_tenant(tenant)
        return self._store.of_tenant(tenant_acted_for(caller, tenant, what="a schedule"))

    def get(self, caller: Caller, schedule_id: str) -> Schedule:
        found = self._store.get(schedule_id)
        if found is None or not (caller.operator or caller.tenant == found.tenant):
            raise NotFoundError(f"no schedule {schedule_id[:80]!r}")
        return found

    def set_enabled(self, caller: Caller, schedule_id: str, enabled: bool) -> Schedule:
        """Paused (no run starts) or resumed; the scheduler follows the record."""
        self.get(caller, schedule_id)
        changed = self._store.set_enabled(schedule_id, enabled, at=self._clock(), by=caller.name)
        if changed is None:
            raise NotFoundError(f"no schedule {schedule_id[:80]!r}")
        self._scheduler().arm(changed)
        return changed

    def delete(self, caller: Caller, schedule_id: str) -> None:
        """Disarmed first: a run delivered meanwhile finds no record and is dropped."""
        self.get(caller, schedule_id)
        self._scheduler().disarm(schedule_id)
        self._store.delete(schedule_id)

    # --- the operations function's ----------------------------------------------------------------

    def run(self, tenant: str, schedule_id: str, scheduled_time: datetime) -> Started | None:
        """The run's operation, started once per scheduled time; None when the schedule is gone,
        paused, or not the tenant's (the message is then dropped)."""
        schedule = self._store.get(schedule_id)
        if schedule is None or schedule.tenant != tenant:
            logger.warning("run of schedule %s dropped: no such schedule", schedule_id)
            return None
        if not schedule.enabled:
            logger.info("run of schedule %s dropped: the schedule is paused", schedule_id)
            return None
        started = self._operations().start_run(schedule, scheduled_time)
        self._store.record_run(schedule.id, scheduled_time, started.operation.id)
        return started

    # --- helpers ----------------------------------------------------------------------------------

    def _check(self, schedule: Schedule, now: datetime) -> None:
        try:
            _check_name(schedule.name)
            checked_expression(schedule.expression, time_zone(schedule.timezone), now)
            _check_prefix(schedule.tenant, schedule.prefix)
            self._check_action(schedule)
        except ValueError as error:  # a ScheduleError, or an option the job type refuses
            raise InvalidRequestError(str(error), log="schedule refused") from None

    def _check_action(self, schedule: Schedule) -> None:
        if schedule.action is ScheduleAction.RESCAN:
            if schedule.job_type is not None or schedule.options:
                raise ScheduleError("job_type", "a rescan takes no job_type or options")
            return
        if schedule.job_type is None:
            raise ScheduleError("job_type", "required to run a job on each file")
        if schedule.job_type is JobType.VIRUS_SCAN:
            raise ScheduleError("job_type", "use the rescan action to scan files again")
        if self._check_options is not None:
            # Its error names the field: input_data.sizes[1]: ...
            self._check_options(schedule.job_type, schedule.options)


def _check_name(name: str) -> None:
    if not 0 < len(name.strip()) <= MAX_NAME_CHARS or not name.isprintable():
        raise ScheduleError("name", f"1 to {MAX_NAME_CHARS} printable characters")


def _check_prefix(tenant: str, prefix: str) -> None:
    if problem := prefix_problem(tenant, prefix):
        raise ScheduleError("prefix", problem)
