"""The local stack's options for chaos runs (local/stack.py): parameters, sweeps, crashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filejobs.local.faults import CRASH_EXIT_CODE
from filejobs.local.metering import METER_LOG_VARIABLE
from filejobs.local.stack import RESTART_LIMIT, LocalStack, StackConfigError, StackOptions

ROOT = Path(__file__).resolve().parents[2]


class Spawns:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, name: str, source: str, *extra: str) -> None:
        self.calls.append((name, source))


class Exited:
    """A host process that has exited with `returncode`."""

    def __init__(self, pid: int, returncode: int) -> None:
        self.pid, self.returncode = pid, returncode


def stack_with(monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[LocalStack, Spawns]:
    stack = LocalStack(StackOptions(project_root=ROOT, **options))  # not started: no AWS
    spawns = Spawns()
    monkeypatch.setattr(stack, "_spawn", spawns)
    return stack, spawns


def test_a_parameter_the_template_does_not_declare_is_refused() -> None:
    with pytest.raises(StackConfigError, match=r"no such parameter in template\.yaml: LeaseSecs"):
        LocalStack(StackOptions(project_root=ROOT, parameters={"LeaseSecs": "20"}))
    # a declared one is taken
    LocalStack(StackOptions(project_root=ROOT, parameters={"JobLeaseSeconds": "20"}))


def test_function_workers_runs_that_many_sweeps_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    stack, spawns = stack_with(monkeypatch, workers_per_function={"SweepFunction": 2})
    stack._start_hosts("SweepFunction", stack.functions["SweepFunction"])
    assert spawns.calls == [("SweepFunction", "schedule")] * 2


def test_an_injected_crash_is_restarted_without_counting_towards_the_crash_loop_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack, spawns = stack_with(monkeypatch, faults='[{"kind": "crash", "probability": 0.05}]')

    def exits(code: int, count: int) -> list[bool]:
        restarted = []
        for pid in range(count):
            process: Any = Exited(pid, code)
            stack._hosts.append(process)
            stack._host_args[pid] = ("CompressionWorker", "sqs", ())
            restarted.append(stack._restart(process))
        return restarted

    # when a host crashes as injected, many times a minute, then it is always started again
    assert all(exits(CRASH_EXIT_CODE, 3 * RESTART_LIMIT))
    assert len(spawns.calls) == 3 * RESTART_LIMIT
    # and a host dying of anything else still counts: a crash loop stops the stack
    assert exits(1, RESTART_LIMIT + 1) == [True] * RESTART_LIMIT + [False]


def test_the_meter_log_reaches_every_host_as_an_absolute_path() -> None:
    # Given a stack asked to meter into a relative path
    relative = Path(".filejobs") / "meter.jsonl"
    stack = LocalStack(StackOptions(project_root=ROOT, meter_log=relative))

    # Then each host is told where to append (hosts run in other working directories)
    knobs = stack._local_knobs()
    assert knobs[METER_LOG_VARIABLE] == str(relative.resolve())
    # and a stack not asked to meter tells its hosts nothing
    assert METER_LOG_VARIABLE not in LocalStack(StackOptions(project_root=ROOT))._local_knobs()
