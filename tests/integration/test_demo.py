"""`make demo` keeps working: on the local stack, every job of every sample reaches its expected
terminal state, and the derived outputs land in the output folder."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from PIL import Image

DEMO = Path(__file__).resolve().parents[2] / "tools" / "demo.py"
# The demo starts the whole local stack itself (tools/demo.py).
pytestmark = [pytest.mark.stack, pytest.mark.slow]


def test_the_demo_ends_with_every_job_in_its_expected_state(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    demo = runpy.run_path(str(DEMO))
    # when the demo runs, writing its outputs to a folder of this test's
    assert demo["main"](["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # then it says so, having stopped the stack cleanly
    assert "every job reached its expected state" in out
    assert "local stack stopped (exit 0)" in out
    # and the table shows the infected file quarantined and the corrupt one's readable failure
    assert "quarantined" in out
    # and the derived outputs are real images
    thumbnails = sorted(tmp_path.glob("*/thumbnail_generation/*.webp"))
    assert thumbnails
    with Image.open(thumbnails[0]) as image:
        image.load()
        assert max(image.size) in {128, 256, 512}
