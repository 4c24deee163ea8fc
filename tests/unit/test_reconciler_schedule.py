"""The reconciler's schedule on the local stack (host.py runs the template's ScheduleV2 events):
every ReconcileEveryMinutes, left at its rate by --schedule-seconds unless a run (the chaos run)
sets it short."""

from __future__ import annotations

from pathlib import Path

from filejobs_dev.local.host import schedule_interval
from filejobs_dev.local.stack import LocalStack, StackOptions
from tests.unit.test_local_stack_options import resources_of

ROOT = Path(__file__).resolve().parents[2]


def test_the_reconciler_runs_every_15_minutes_unless_told_and_a_short_rate_is_sped_up() -> None:
    stack = LocalStack(StackOptions(project_root=ROOT))
    [schedule] = [
        p for kind, p in stack.functions["ReconcilerFunction"].events if kind == "ScheduleV2"
    ]
    # the default: every 15 minutes, which a demo's --schedule-seconds 2 leaves alone
    assert schedule_interval(resources_of(stack), schedule) == 900
    assert schedule_interval(resources_of(stack), schedule, every_seconds=2) == 900
    # the chaos run's: every 2 minutes, sped up with the sweep
    short = resources_of(stack, ReconcileEveryMinutes="2")
    assert schedule_interval(short, schedule, every_seconds=2) == 2
