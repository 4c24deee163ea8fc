"""EventBridge Scheduler, emulated: the schedules armed in the stack's schedule groups, fired.

moto keeps the schedules (the API creates, updates and deletes them as on AWS) but never runs
them. This runs them as EventBridge Scheduler would for the targets the template uses: at each
time the cron expression names, in its time zone, the target's Input (with
`<aws.scheduler.scheduled-time>` filled in) is sent to the target queue. A one-time schedule,
`at(yyyy-mm-ddThh:mm:ss)`, fires once at that time (the API never arms one; a test or an operator
can, to run a schedule's target now without waiting for its cron). A schedule is fired from the
moment it is first seen (no backfill of runs before), a DISABLED one not at all, and each run once.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from filejobs.domain.schedules import CronExpression, ScheduleError, time_zone

log = logging.getLogger(__name__)

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
LOOK_EVERY_SECONDS = 5.0
ONE_TIME = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")


class LocalScheduler:
    def __init__(
        self,
        scheduler: Any,
        sqs: Any,
        groups: list[str],
        queue_urls: dict[str, str],  # queue ARN -> URL
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._scheduler, self._sqs, self._groups = scheduler, sqs, groups
        self._queue_urls, self._clock = queue_urls, clock
        # Per schedule (group, name): the time up to which its runs are fired.
        self._fired_until: dict[tuple[str, str], datetime] = {}
        self._stop = threading.Event()

    def tick(self) -> list[tuple[str, datetime]]:
        """Fires every run due since the last tick; (schedule name, scheduled time) of each."""
        now = self._clock()
        fired: list[tuple[str, datetime]] = []
        seen: set[tuple[str, str]] = set()
        for group in self._groups:
            for name in self._names(group):
                seen.add((group, name))
                fired += self._fire_due(group, name, now)
        for gone in set(self._fired_until) - seen:
            del self._fired_until[gone]
        return fired

    def run(self) -> None:
        while not self._stop.wait(LOOK_EVERY_SECONDS):
            try:
                self.tick()
            except Exception:
                log.exception("local scheduler: a look at the schedules failed")

    def start(self) -> None:
        threading.Thread(target=self.run, name="local-scheduler", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _names(self, group: str) -> list[str]:
        pages = self._scheduler.get_paginator("list_schedules").paginate(GroupName=group)
        return [s["Name"] for page in pages for s in page.get("Schedules", [])]

    def _fire_due(self, group: str, name: str, now: datetime) -> list[tuple[str, datetime]]:
        since = self._fired_until.setdefault((group, name), now)
        self._fired_until[(group, name)] = now
        schedule = self._scheduler.get_schedule(Name=name, GroupName=group)
        if schedule.get("State") != "ENABLED":
            return []
        try:
            runs = runs_between(
                schedule["ScheduleExpression"],
                time_zone(schedule.get("ScheduleExpressionTimezone") or "UTC"),
                since,
                now,
            )
        except ScheduleError:
            log.warning("local scheduler: %s/%s has an expression it cannot run", group, name)
            return []
        for run in runs:
            self._send(schedule["Target"], run)
        return [(name, run) for run in runs]

    def _send(self, target: dict[str, Any], run: datetime) -> None:
        url = self._queue_urls.get(target["Arn"])
        if url is None:
            log.warning("local scheduler: target %s is not a queue of the stack", target["Arn"])
            return
        moment = run.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = str(target.get("Input") or "{}").replace(SCHEDULED_TIME, moment)
        self._sqs.send_message(QueueUrl=url, MessageBody=body)
        log.info("local scheduler: run of %s sent to %s", moment, url)


def runs_between(expression: str, zone: ZoneInfo, since: datetime, now: datetime) -> list[datetime]:
    """The times after `since`, up to `now`, that a schedule's expression names in its zone."""
    one_time = ONE_TIME.fullmatch(expression)
    if one_time:
        try:
            moment = datetime.fromisoformat(one_time[1]).replace(tzinfo=zone)
        except ValueError:
            raise ScheduleError("expression", f"{expression!r} names no time") from None
        return [moment] if since < moment <= now else []
    cron = CronExpression.parse(expression)
    runs = []
    run = cron.next_after(since, zone)
    while run is not None and run <= now:
        runs.append(run)
        run = cron.next_after(run, zone)
    return runs
