"""`make demo` keeps working: every job of the demo reaches its expected state."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "tools" / "demo.py"


def test_the_demo_ends_with_every_job_in_its_expected_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo = runpy.run_path(str(DEMO))

    assert demo["main"]() == 0
    out = capsys.readouterr().out
    assert "duplicate delivery: already ingested, nothing written" in out
    assert "'recovered': 1" in out
    assert "every job reached its expected state" in out
