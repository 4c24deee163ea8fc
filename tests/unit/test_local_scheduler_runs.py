"""The local scheduler's runs of a schedule between two looks: a cron's every time, a one-time
`at(...)` schedule's one time, in the schedule's time zone (as EventBridge Scheduler runs them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from filejobs.domain.schedules import ScheduleError
from filejobs_dev.local.scheduler import runs_between

PARIS, UTC_ZONE = ZoneInfo("Europe/Paris"), ZoneInfo("UTC")
LOOKED = datetime(2026, 12, 5, 21, 0, 0, tzinfo=UTC)  # 22:00 in Paris


def test_a_one_time_schedule_runs_once_at_its_time_in_its_zone() -> None:
    at = "at(2026-12-05T22:00:30)"  # Paris time: 21:00:30 UTC
    assert runs_between(at, PARIS, LOOKED, LOOKED + timedelta(seconds=29)) == []
    ran = runs_between(at, PARIS, LOOKED, LOOKED + timedelta(seconds=30))
    assert ran == [datetime(2026, 12, 5, 21, 0, 30, tzinfo=UTC)]
    # and never again at a later look
    assert runs_between(at, PARIS, LOOKED + timedelta(seconds=30), LOOKED + timedelta(days=1)) == []


def test_a_cron_runs_at_each_of_its_times_between_two_looks() -> None:
    ran = runs_between("cron(* * * * ? *)", UTC_ZONE, LOOKED, LOOKED + timedelta(minutes=3))
    assert ran == [LOOKED + timedelta(minutes=n) for n in (1, 2, 3)]


@pytest.mark.parametrize("expression", ["at(2026-13-45T00:00:00)", "at(tomorrow)", "every day"])
def test_an_expression_naming_no_time_is_refused(expression: str) -> None:
    with pytest.raises(ScheduleError):
        runs_between(expression, UTC_ZONE, LOOKED, LOOKED + timedelta(days=1))
