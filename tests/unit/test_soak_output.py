"""Specification: `make soak` (tools/soak.py) prints its audit and verdict before any plot, and a
plot it cannot draw (no matplotlib, or a failure drawing it) never hides them nor changes the
exit status."""

from __future__ import annotations

import runpy
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.chaos_audit import Report

SOAK: dict[str, Any] = runpy.run_path(
    str(Path(__file__).resolve().parents[2] / "tools" / "soak.py"), run_name="soak"
)


def finished_soak() -> Any:
    memory = [SOAK["MemorySample"](15.0 * n, {"ApiFunction (api)": 100.0}, 0) for n in range(4)]
    return SOAK["Soak"](
        uploads=[], uploaded_at={}, memory=memory, raw={"timings": {"quiet s": 3.0}},
        started_epoch=0.0,
    )  # fmt: skip


def conclude(report: Report, tmp_path: Path) -> int:
    soak = finished_soak()
    measured = [(float(n), 2.0) for n in range(30)]
    return int(
        SOAK["conclude"](
            soak, report, measured, 0.0, kept=tmp_path, plot_path=tmp_path / "soak.png"
        )
    )


def a_report(*, lost: int = 0, memory: int = 0, latency: int = 0) -> Report:
    report = Report()
    report.check("lost files", [f"uploads/x/{n}.jpg: no file" for n in range(lost)])
    report.check("memory flat after warm-up", ["ApiFunction (api): 200 -> 260 MB"] * memory)
    report.check("latency p99 stable", ["p99 10.0 s -> 30.0 s (over 1.5x)"] * latency)
    return report


def test_without_matplotlib_the_verdict_is_printed_then_the_missing_plot_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    status = conclude(a_report(memory=1), tmp_path)
    out = capsys.readouterr().out
    assert status == 1  # the verdict's, whatever became of the plot
    verdict = out.index(
        "soak verdict: FAILED (audit violations 0, memory growth 1, latency drift 0)"
    )
    assert out.index("violations: 1") < verdict
    assert out.index("soak: no plot: matplotlib is not installed") > verdict
    assert not (tmp_path / "soak.png").exists()
    assert (tmp_path / "soak-figures.json").exists() and (tmp_path / "soak-memory.csv").exists()


def test_a_plot_that_fails_to_draw_leaves_a_passing_run_passing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = types.ModuleType("matplotlib")

    def use(backend: str) -> None:
        raise RuntimeError(f"no {backend} backend here")

    broken.use = use  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "matplotlib", broken)
    status = conclude(a_report(), tmp_path)
    out = capsys.readouterr().out
    assert status == 0
    assert out.index("soak verdict: passed (audit violations 0") < out.index(
        "soak: no plot: RuntimeError: no Agg backend here"
    )


def test_the_verdict_counts_the_audit_apart_from_memory_and_latency() -> None:
    report = a_report(lost=2, latency=1)
    report.figures["files uploaded"] = 60  # the audit's figures are not violations
    line = SOAK["verdict"](report, {"audit violations": 2})
    assert line == "soak verdict: FAILED (audit violations 2, memory growth 0, latency drift 1)"


def test_a_system_that_never_goes_quiet_is_audited_all_the_same() -> None:
    # an upload no notification announced keeps the files short of the uploads until the timeout
    def wait_until_quiet(stack: object, uploads: int, seconds: float) -> float:
        raise TimeoutError(f"the system was not quiet after {seconds:.0f} s")

    seconds, stalled = SOAK["waited"](wait_until_quiet, object(), 90, 60.0)
    assert seconds == 60.0
    assert stalled == ["wait_until_quiet: the system was not quiet after 60 s"]
    seconds, stalled = SOAK["waited"](lambda stack, uploads, timeout: 12.5, object(), 90, 60.0)
    assert (seconds, stalled) == (12.5, [])
