"""The UTC day a test counts its quotas on, never one that ends while it runs."""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta

from filejobs.domain.quotas import usage_day
from filejobs.domain.time import utcnow

# Longer than any test that reads a tenant's usage takes, even on a loaded machine.
TEST_SECONDS = timedelta(minutes=2)


def seconds_left_in(moment: datetime) -> float:
    midnight = datetime.combine(
        usage_day(moment) + timedelta(days=1), datetime.min.time(), moment.tzinfo
    )
    return (midnight - moment).total_seconds()


def a_whole_usage_day() -> date:
    """Today's usage day, after waiting for midnight UTC when today has less than a test's time
    left: an upload counted on one day and read back on the next is not a failure of the code.
    (The day was once read when the module was imported, and a suite crossing midnight failed.)"""
    left = seconds_left_in(utcnow())
    if left < TEST_SECONDS.total_seconds():
        time.sleep(left + 1)
    return usage_day(utcnow())
