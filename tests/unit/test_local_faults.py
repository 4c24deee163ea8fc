"""The local stack's fault rules (filejobs/local/faults.py): parsed strictly, applied narrowly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.retry import TransientError
from filejobs.local.faults import FaultConfigError, FaultKind, parse_faults, with_processor_faults
from filejobs.processors.base import StopRequested, Work
from tests.conftest import FakeClock
from tests.factories import ingest_plan


def work_on(clock: FakeClock, name: str, attempt: int, stop: bool = False) -> Work:
    job = replace(ingest_plan(clock.now, "image/png", name=name).jobs[0], attempt=attempt)

    def outputs(*_: Any) -> str:
        raise AssertionError("not used")

    return Work(job, lambda: stop, Path("/nonexistent"), outputs)  # type: ignore[arg-type]


def done(work: Work) -> dict[str, Any]:
    return {"ran": work.job.attempt}


def test_rules_are_parsed_and_a_bad_rule_is_refused_by_number() -> None:
    faults = parse_faults('[{"kind": "transient", "key_contains": "flaky", "attempts": 2}]')
    assert faults[0].kind is FaultKind.TRANSIENT
    assert faults[0].attempts == 2
    with pytest.raises(FaultConfigError, match="rule 1"):
        parse_faults('[{"kind": "meteor"}]')
    with pytest.raises(FaultConfigError, match="rule 2"):
        parse_faults('[{"kind": "slow"}, {"kind": "slow", "colour": "red"}]')
    with pytest.raises(FaultConfigError, match="not JSON"):
        parse_faults("[{")
    with pytest.raises(FaultConfigError, match="JSON list"):
        parse_faults('{"kind": "slow"}')


def test_a_transient_rule_fails_the_first_attempts_of_matching_jobs_only(clock: FakeClock) -> None:
    faults = parse_faults('[{"kind": "transient", "key_contains": "flaky", "attempts": 2}]')
    processor = with_processor_faults(done, faults)
    # the first two attempts of a matching job fail, transiently
    for attempt in (1, 2):
        with pytest.raises(TransientError, match="injected transient failure"):
            processor(work_on(clock, "flaky.png", attempt))
    # then it runs
    assert processor(work_on(clock, "flaky.png", 3)) == {"ran": 3}
    # and a job of another file is never touched
    assert processor(work_on(clock, "fine.png", 1)) == {"ran": 1}


def test_a_slow_rule_stops_as_soon_as_the_job_is_cancelled(clock: FakeClock) -> None:
    processor = with_processor_faults(done, parse_faults('[{"kind": "slow", "seconds": 60}]'))
    with pytest.raises(StopRequested):
        processor(work_on(clock, "any.png", 1, stop=True))
