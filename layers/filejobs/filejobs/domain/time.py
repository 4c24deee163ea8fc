"""Time in the domain is always timezone-aware UTC, passed in (never read from a global clock)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def epoch_seconds(moment: datetime) -> int:
    return int(moment.timestamp())


def require_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: filejobs works in timezone-aware UTC")
    return moment.astimezone(UTC)
