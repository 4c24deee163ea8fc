"""Recurring schedules: a tenant's action on every file under a key prefix, run on a cron.

"Rescan every file of uploads/acme/contracts/ monthly", "make thumbnails again for
uploads/acme/avatars/ nightly". A schedule is run by EventBridge Scheduler on AWS (and by the local
stack's scheduler locally); each run starts a tracked operation (domain/operations.py) over the
files, paced and audited like a bulk action, started once per scheduled time however many times
the scheduler delivers it.

Expressions are EventBridge Scheduler's cron expressions, `cron(minutes hours day-of-month month
day-of-week year)`, evaluated in the schedule's IANA time zone. This module evaluates them itself
(to validate a request, show the next runs, and run them locally); it supports `*`, `?`, lists,
ranges, steps and month and weekday names, and refuses `L`, `W` and `#` rather than evaluate them
differently from EventBridge.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from filejobs.domain.job import JobType
from filejobs.domain.tenant_prefixes import FieldError

# Runs closer together than this are refused: a schedule is for periodic upkeep, each run walks
# every file under its prefix, and each run's jobs are new jobs on those files (at most one a
# day a schedule). 23 h, so that a daily run across a daylight-saving change passes.
MIN_INTERVAL = timedelta(hours=23)
MAX_SCHEDULES_PER_TENANT = 20
MAX_NAME_CHARS = 100
MAX_TIME_ZONE_CHARS = 64  # the longest IANA name is about 30
# How far ahead a next run is looked for (a cron limited to past years never fires).
HORIZON_DAYS = 5 * 366
SCHEDULE_ID_PATTERN = r"^sch-[0-9a-f]{16}$"

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {month: number for number, month in enumerate(_MONTH_NAMES, 1)}
# EventBridge numbers weekdays 1 (Sunday) to 7 (Saturday).
_WEEKDAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_WEEKDAYS = {day: number for number, day in enumerate(_WEEKDAY_NAMES, 1)}
_CRON = re.compile(r"^cron\((?P<fields>[^()]*)\)$")


class ScheduleError(FieldError):
    """A schedule that cannot be accepted: `field` names what is wrong, the message why."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] = field(default_factory=dict)


_FIELDS = (
    _Field("minutes", 0, 59),
    _Field("hours", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 1, 7, _WEEKDAYS),
    _Field("year", 1970, 2199),
)


@dataclass(frozen=True)
class CronExpression:
    """A parsed EventBridge cron expression: the values each field allows."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int] | None  # None: `?` (the weekday decides)
    months: frozenset[int]
    weekdays: frozenset[int] | None  # None: `?` (the day of month decides)
    years: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        match = _CRON.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise ScheduleError("expression", "must be cron(minutes hours day month weekday year)")
        parts = match["fields"].split()
        if len(parts) != len(_FIELDS):
            raise ScheduleError("expression", f"cron takes 6 fields, not {len(parts)}")
        days_text, weekdays_text = parts[2], parts[4]
        if "?" in (parts[0], parts[1], parts[3], parts[5]):
            raise ScheduleError("expression", "only day-of-month or day-of-week may be ?")
        if (days_text == "?") == (weekdays_text == "?"):
            raise ScheduleError(
                "expression", "exactly one of day-of-month and day-of-week must be ?"
            )
        minutes, hours, days, months, weekdays, years = (
            _values(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)
        )
        return cls(
            text.strip(),
            minutes,
            hours,
            None if days_text == "?" else days,
            months,
            None if weekdays_text == "?" else weekdays,
            years,
        )

    def next_after(self, moment: datetime, zone: ZoneInfo) -> datetime | None:
        """The first run strictly after `moment`, in UTC; None within the horizon."""
        local = moment.astimezone(zone)
        day = local.date()
        for _ in range(HORIZON_DAYS):
            if self._runs_on(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        run = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                        if run.astimezone(UTC) > moment:
                            return run.astimezone(UTC)
            day += timedelta(days=1)
            if day.year > max(self.years):
                return None
        return None

    def runs_after(self, moment: datetime, zone: ZoneInfo, count: int) -> list[datetime]:
        runs: list[datetime] = []
        while len(runs) < count:
            found = self.next_after(runs[-1] if runs else moment, zone)
            if found is None:
                break
            runs.append(found)
        return runs

    def _runs_on(self, day: date) -> bool:
        if day.year not in self.years or day.month not in self.months:
            return False
        if self.days is not None:
            return day.day in self.days
        # Python: Monday 0 .. Sunday 6; EventBridge: Sunday 1 .. Saturday 7.
        weekday = (day.weekday() + 1) % 7 + 1
        return self.weekdays is not None and weekday in self.weekdays


def _values(part: str, spec: _Field) -> frozenset[int]:
    if part == "?":
        return frozenset()  # a day field left to the other one (checked by the caller)
    allowed: set[int] = set()
    for item in part.split(","):
        allowed |= _item_values(item.upper(), spec)
    return frozenset(allowed)


def _item_values(item: str, spec: _Field) -> set[int]:
    tokens = re.split(r"[-/]", item)
    if any(mark in t and t not in spec.names for t in tokens for mark in ("L", "W", "#")):
        raise ScheduleError("expression", f"{spec.name}: L, W and # are not supported")
    base, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not step_text.isdigit() or int(step_text) < 1:
            raise ScheduleError("expression", f"{spec.name}: bad step {step_text!r}")
        step = int(step_text)
    if base == "*":
        low, high = spec.low, spec.high
    elif "-" in base:
        first, _, last = base.partition("-")
        low, high = _number(first, spec), _number(last, spec)
        if low > high:
            raise ScheduleError("expression", f"{spec.name}: range {base!r} runs backwards")
    else:
        low = _number(base, spec)
        high = spec.high if step_text else low
    return set(range(low, high + 1, step))


def _number(text: str, spec: _Field) -> int:
    if text in spec.names:
        return spec.names[text]
    if not text.isdigit():
        raise ScheduleError("expression", f"{spec.name}: {text!r} is not a value")
    value = int(text)
    if not spec.low <= value <= spec.high:
        raise ScheduleError("expression", f"{spec.name}: {value} is not in {spec.low}-{spec.high}")
    return value


def time_zone(name: str) -> ZoneInfo:
    refused = ScheduleError("timezone", f"{name[:60]!r} is not an IANA time zone")
    if not 0 < len(name) <= MAX_TIME_ZONE_CHARS:
        raise refused
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise refused from None


def checked_expression(text: str, zone: ZoneInfo, now: datetime) -> CronExpression:
    """The expression, if it runs again and never closer together than MIN_INTERVAL."""
    cron = CronExpression.parse(text)
    runs = cron.runs_after(now, zone, 6)
    if not runs:
        raise ScheduleError("expression", "never runs again")
    gaps = [later - earlier for earlier, later in itertools.pairwise(runs)]
    if any(gap < MIN_INTERVAL for gap in gaps):
        raise ScheduleError("expression", f"runs more often than every {MIN_INTERVAL}")
    return cron


class ScheduleAction(StrEnum):
    RESCAN = "rescan"  # a virus scan again of every file under the prefix
    RUN = "run"  # a new job of `job_type` (with `options`) on every file under the prefix


@dataclass(frozen=True)
class Schedule:
    id: str
    tenant: str
    name: str
    expression: str
    timezone: str
    action: ScheduleAction
    prefix: str  # an object key prefix, inside the tenant's uploads/{tenant}/
    created_by: str
    created_at: datetime
    updated_at: datetime
    job_type: JobType | None = None  # RUN only
    options: dict[str, Any] = field(default_factory=dict)  # RUN only: the job's input options
    enabled: bool = True
    runs: int = 0
    last_run_at: datetime | None = None  # the scheduled time of the last run started
    last_operation_id: str | None = None

    def cron(self) -> CronExpression:
        return CronExpression.parse(self.expression)

    def next_run(self, now: datetime) -> datetime | None:
        if not self.enabled:
            return None
        return self.cron().next_after(now, time_zone(self.timezone))

    def reason(self, scheduled_time: datetime) -> str:
        """What a run's operation says it is, in the audit list."""
        return f"schedule {self.name!r} ({self.id}), run of {scheduled_time.isoformat()}"


def run_key(schedule_id: str, scheduled_time: datetime) -> str:
    """The idempotency key of one run: the scheduler delivering it twice starts it once."""
    return f"schedule:{schedule_id}:{scheduled_time.astimezone(UTC):%Y%m%dT%H%M%SZ}"
