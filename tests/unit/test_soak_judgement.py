"""Specification: what `make soak` (tools/soak.py) holds a run to, beside chaos's audit."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from filejobs_dev.local.chaos_audit import Report

SOAK: dict[str, Any] = runpy.run_path(
    str(Path(__file__).resolve().parents[2] / "tools" / "soak.py"), run_name="soak"
)
MemorySample = SOAK["MemorySample"]
WARM_UP = 600.0


def samples(rss: dict[str, list[float]], items: list[int]) -> list[Any]:
    """One sample a minute from the start, each role's RSS and the tables' items in turn."""
    return [
        MemorySample(60.0 * n, {role: values[n] for role, values in rss.items()}, items[n])
        for n in range(len(items))
    ]


def test_a_host_that_keeps_its_memory_after_warm_up_passes() -> None:
    # warm-up imports and caches grow it from 70 to 190 MB; after that it wanders by a few MB
    rss = [70.0 + 12 * min(n, 10) + (n % 3) for n in range(60)]
    report = Report()
    figures = SOAK["check_memory"](
        samples({"VirusScanWorker (sqs)": rss}, [0] * 60), report, WARM_UP
    )
    assert report.violations == []
    assert figures["RSS VirusScanWorker (sqs) growth MB (bound 32)"] < 5


def test_a_host_that_leaks_is_named_with_its_growth() -> None:
    # 1 MB a minute for 50 minutes after warm-up
    rss = [200.0 + n for n in range(60)]
    report = Report()
    SOAK["check_memory"](samples({"ApiFunction (api)": rss}, [0] * 60), report, WARM_UP)
    assert report.violations == ["ApiFunction (api): 212 -> 257 MB (bound +32)"]


def test_the_emulators_may_grow_with_what_they_store_and_no_more() -> None:
    items = [100 * n for n in range(60)]  # 100 items a minute
    stored = [80.0 + 100 * n * SOAK["EMULATOR_KB_PER_ITEM"] / 1024 * 0.9 for n in range(60)]
    report = Report()
    SOAK["check_memory"](samples({"emulator (DynamoDB)": stored}, items), report, WARM_UP)
    assert report.violations == []
    # twice as much per item as it may keep is a leak, even for an emulator
    leaking = [80.0 + 2 * (value - 80.0) for value in stored]
    report = Report()
    SOAK["check_memory"](samples({"emulator (DynamoDB)": leaking}, items), report, WARM_UP)
    assert len(report.violations) == 1
    assert report.violations[0].startswith("emulator (DynamoDB): ")


def test_latency_whose_p99_climbs_through_the_run_is_a_violation() -> None:
    steady = [(WARM_UP + n, 5.0 + (n % 10)) for n in range(300)]
    report = Report()
    figures = SOAK["check_latency"](steady, report, WARM_UP)
    assert report.violations == []
    assert figures["latency p99 last third s"] <= figures["latency p99 first third s"] * 1.5
    climbing = [(at, latency * (1 + n / 50)) for n, (at, latency) in enumerate(steady)]
    report = Report()
    SOAK["check_latency"](climbing, report, WARM_UP)
    assert len(report.violations) == 1
    assert "over 1.5x" in report.violations[0]


def test_too_short_a_run_is_not_judged_flat() -> None:
    report = Report()
    SOAK["check_memory"](samples({"x": [1.0] * 12}, [0] * 12), report, WARM_UP)
    SOAK["check_latency"]([(WARM_UP + 1, 1.0)] * 5, report, WARM_UP)
    assert len(report.violations) == 2


def test_processes_are_grouped_by_the_function_and_source_they_host() -> None:
    role_of = SOAK["role_of"]
    host = b"\0".join(
        [b"python", b"-m", b"filejobs_dev.local.host", b"--config", b"c", b"--function",
         b"SweepFunction", b"--source", b"schedule"]
    )  # fmt: skip
    assert role_of(host, is_stack=False) == "SweepFunction (schedule)"
    assert role_of(b"python\0-m\0filejobs_dev.local.emulator\0--port\04577\0", is_stack=False) == (
        "emulator (DynamoDB)"
    )
    assert role_of(b"/usr/sbin/clamd\0--config-file\0x\0", is_stack=False) == "clamd"
    assert role_of(b"python\0-m\0filejobs_cli.main\0dev\0", is_stack=True) == (
        "stack (S3, SQS, EventBridge)"
    )
