"""Schedules' cron expressions, as EventBridge Scheduler reads them (pure domain)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from filejobs.domain.schedules import (
    CronExpression,
    ScheduleError,
    checked_expression,
    run_key,
    time_zone,
)

FRIDAY_AFTERNOON = datetime(2026, 12, 4, 16, 0, tzinfo=UTC)


def runs(expression: str, zone: str = "UTC", count: int = 3) -> list[str]:
    cron = CronExpression.parse(expression)
    found = cron.runs_after(FRIDAY_AFTERNOON, time_zone(zone), count)
    return [run.strftime("%Y-%m-%d %H:%M") for run in found]


def test_a_daily_run_in_a_time_zone_is_at_that_zone_s_hour() -> None:
    assert runs("cron(0 3 * * ? *)", "Europe/Paris") == [
        "2026-12-05 02:00",
        "2026-12-06 02:00",
        "2026-12-07 02:00",
    ]


def test_weekdays_count_from_sunday_as_eventbridge_does() -> None:
    # MON-FRI and 2-6 are the same days; Friday 16:00 is past 03:00, so Monday comes next
    assert runs("cron(0 3 ? * MON-FRI *)") == runs("cron(0 3 ? * 2-6 *)")
    assert runs("cron(0 3 ? * MON-FRI *)")[0] == "2026-12-07 03:00"
    assert runs("cron(30 8 ? * 1 *)", count=1) == ["2026-12-06 08:30"]  # 1 is Sunday


def test_lists_ranges_steps_and_names() -> None:
    assert runs("cron(0 2 1 JAN,JUL ? *)", count=2) == ["2027-01-01 02:00", "2027-07-01 02:00"]
    assert runs("cron(15 0/12 * * ? *)", count=3) == [
        "2026-12-05 00:15",
        "2026-12-05 12:15",
        "2026-12-06 00:15",
    ]
    assert runs("cron(0 4 10-12 * ? 2027)", count=2) == ["2027-01-10 04:00", "2027-01-11 04:00"]


def test_a_run_across_a_daylight_saving_change_keeps_its_local_hour() -> None:
    spring = CronExpression.parse("cron(0 3 * * ? *)").runs_after(
        datetime(2027, 3, 26, 12, 0, tzinfo=UTC), time_zone("Europe/Paris"), 2
    )
    assert [r.hour for r in spring] == [2, 1]  # 03:00 CET, then 03:00 CEST


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("rate(1 day)", "must be cron("),
        ("cron(0 3 * *)", "6 fields"),
        ("cron(0 3 * * * *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 3 ? * ? *)", "exactly one of day-of-month and day-of-week"),
        ("cron(? 3 * * ? *)", "only day-of-month or day-of-week may be ?"),
        ("cron(0 3 L * ? *)", "L, W and # are not supported"),
        ("cron(0 3 15W * ? *)", "L, W and # are not supported"),
        ("cron(0 3 ? * 6#3 *)", "L, W and # are not supported"),
        ("cron(60 3 * * ? *)", "60 is not in 0-59"),
        ("cron(0 3 * FOO ? *)", "'FOO' is not a value"),
        ("cron(0 3 5-1 * ? *)", "runs backwards"),
        ("cron(0 3/0 * * ? *)", "bad step"),
    ],
)
def test_an_expression_eventbridge_would_read_otherwise_is_refused(
    expression: str, why: str
) -> None:
    with pytest.raises(ScheduleError) as refused:
        CronExpression.parse(expression)
    assert refused.value.field == "expression"
    assert why in str(refused.value)


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("cron(0 * * * ? *)", "runs more often than every 23:00:00"),
        ("cron(0 3,15 * * ? *)", "runs more often than every 23:00:00"),
        ("cron(0 3 1 * ? 2020)", "never runs again"),
    ],
)
def test_a_schedule_runs_again_and_at_most_about_daily(expression: str, why: str) -> None:
    with pytest.raises(ScheduleError, match=why):
        checked_expression(expression, time_zone("UTC"), FRIDAY_AFTERNOON)
    checked_expression("cron(0 3 * * ? *)", time_zone("UTC"), FRIDAY_AFTERNOON)


def test_a_time_zone_must_be_an_iana_name() -> None:
    with pytest.raises(ScheduleError) as refused:
        time_zone("Mars/Olympus")
    assert refused.value.field == "timezone"


def test_a_run_s_key_is_the_schedule_and_its_time_in_utc() -> None:
    paris = datetime(2026, 12, 5, 3, 0, tzinfo=time_zone("Europe/Paris"))
    assert (
        run_key("sch-0123456789abcdef", paris) == "schedule:sch-0123456789abcdef:20261205T020000Z"
    )
