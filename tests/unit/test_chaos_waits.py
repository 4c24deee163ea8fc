"""Specification: how the chaos run (tools/chaos.py) waits after the system is quiet: no longer
than a condition still to be met needs."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
chaos: ModuleType = importlib.import_module("chaos")


class NoStack:
    """A stack the code under test must not ask anything."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the stack was asked for {name}")


def not_to_be_called(*_: object) -> float:
    raise AssertionError("the quiet was waited for again")


def test_a_purge_whose_turn_came_before_the_quiet_is_not_waited_for_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the last delete 40 s ago: its purge (30 s after it) was a delayed message the quiet counted
    deleter = SimpleNamespace(last_at=time.monotonic() - chaos.PURGE_DELAY_SECONDS - 10)
    monkeypatch.setattr(chaos, "wait_until_quiet", not_to_be_called)
    assert chaos.wait_for_purges(NoStack(), deleter, 60, 600) == 0.0


def test_a_purge_still_to_come_is_waited_for_then_the_quiet_seen_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deleter = SimpleNamespace(last_at=time.monotonic() - chaos.PURGE_DELAY_SECONDS + 0.2)
    looked: list[int] = []

    def quiet(stack: object, uploads: int, seconds: float) -> float:
        looked.append(uploads)
        return 0.0

    monkeypatch.setattr(chaos, "wait_until_quiet", quiet)
    waited = chaos.wait_for_purges(NoStack(), deleter, 60, 600)
    assert 0.1 <= waited < 5
    assert looked == [60]


def test_no_deletes_no_wait() -> None:
    assert chaos.wait_for_purges(NoStack(), SimpleNamespace(last_at=None), 60, 600) == 0.0
