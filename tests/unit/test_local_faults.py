"""The local stack's fault rules (filejobs_dev/local/faults.py): parsed strictly, applied
narrowly."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.job import JobType
from filejobs.domain.retry import TransientError
from filejobs.processors.base import StopRequested, Work
from filejobs.services.dedup import DeduplicationCheck
from filejobs_dev.local.faults import (
    FaultConfigError,
    FaultKind,
    parse_faults,
    with_processor_faults,
)
from tests.conftest import FakeClock
from tests.factories import ingest_plan


def work_on(
    clock: FakeClock,
    name: str,
    attempt: int,
    stop: bool = False,
    job_type: JobType = JobType.VIRUS_SCAN,
) -> Work:
    plan = ingest_plan(clock.now, "image/png", name=name)
    job = replace(next(j for j in plan.jobs if j.job_type is job_type), attempt=attempt)

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


def test_a_probability_picks_that_share_of_attempts_the_same_way_in_every_process() -> None:
    rule = parse_faults('[{"kind": "transient", "probability": 0.2, "seed": 7}]')[0]
    draws = [rule.fires(f"job-{n}", 1) for n in range(4000)]
    # about a fifth of the attempts
    assert 0.17 < sum(draws) / len(draws) < 0.23
    # the same ones again (another process deciding on the same attempt agrees)
    assert draws == [rule.fires(f"job-{n}", 1) for n in range(4000)]
    # another attempt of the same job is a new draw; another seed, another run
    other = parse_faults('[{"kind": "transient", "probability": 0.2, "seed": 8}]')[0]
    assert draws != [other.fires(f"job-{n}", 1) for n in range(4000)]


def test_a_probability_outside_0_to_1_or_an_empty_burst_is_refused() -> None:
    with pytest.raises(FaultConfigError, match="probability"):
        parse_faults('[{"kind": "crash", "probability": 1.5}]')
    with pytest.raises(FaultConfigError, match="burst"):
        parse_faults('[{"kind": "throttle", "every": 10, "seconds": 0}]')


class Crashed(BaseException):
    """Stands for the process dying: nothing after it runs."""


def die() -> None:
    raise Crashed


def test_a_crash_strikes_before_the_processor_or_after_it_wrote_its_outputs(
    clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "faults.log"
    monkeypatch.setenv("FILEJOBS_LOCAL_FAULT_LOG", str(log))
    ran: list[int] = []

    def processor(work: Work) -> dict[str, Any]:
        ran.append(work.job.attempt)
        return {}

    crashing = with_processor_faults(processor, parse_faults('[{"kind": "crash"}]'), die)
    # when 40 attempts run under a rule that crashes every one
    when = []
    for attempt in range(1, 41):
        with pytest.raises(Crashed):
            crashing(work_on(clock, "any.png", attempt))
        when.append(attempt in ran)
    # then some crashed before the processor ran and some after it ran
    assert any(when)
    assert not all(when)
    # and each crash was written to the fault log first, saying which attempt and when
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["attempt"] for line in lines] == list(range(1, 41))
    assert {line["kind"] for line in lines} == {"crash"}
    assert [line["when"] == "after" for line in lines] == when


def test_a_throttle_burst_is_on_for_its_seconds_in_every_period() -> None:
    rule = parse_faults('[{"kind": "throttle", "every": 20, "seconds": 2}]')[0]
    assert rule.bursting(1000.0)
    assert rule.bursting(1001.9)
    assert not rule.bursting(1002.0)
    assert not rule.bursting(1019.9)
    assert rule.bursting(1020.5)


def test_a_noop_rule_skips_the_processor_of_matching_jobs_only(
    clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "faults.log"
    monkeypatch.setenv("FILEJOBS_LOCAL_FAULT_LOG", str(log))
    ran: list[str] = []

    def processor(work: Work) -> dict[str, Any]:
        ran.append(work.job.job_type.value)
        return {"ran": True}

    rules = '[{"kind": "noop", "job_type": "thumbnail_generation", "key_contains": "bench"}]'
    skipping = with_processor_faults(processor, parse_faults(rules))
    # when a matching job runs
    first = skipping(work_on(clock, "bench-1.png", 1, job_type=JobType.THUMBNAIL_GENERATION))
    # then its processor is not run and the attempt returns the no-op result at once
    assert first == {"noop": True}
    assert ran == []
    # and each attempt gets a result of its own (the worker may add to it)
    first["extra"] = 1
    again = skipping(work_on(clock, "bench-2.png", 2, job_type=JobType.THUMBNAIL_GENERATION))
    assert again == {"noop": True}
    # while another job type, or another file, runs its processor
    assert skipping(work_on(clock, "bench-1.png", 1, job_type=JobType.DEDUPLICATION_CHECK)) == {
        "ran": True
    }
    assert skipping(work_on(clock, "real.png", 1, job_type=JobType.THUMBNAIL_GENERATION)) == {
        "ran": True
    }
    assert ran == ["deduplication_check", "thumbnail_generation"]
    # and a no-op is not a fault: the fault log stays empty
    assert not log.exists()


def test_a_skipped_virus_scan_says_clean_so_its_files_gated_jobs_are_released(
    clock: FakeClock,
) -> None:
    def scan(work: Work) -> dict[str, Any]:
        raise AssertionError("the scan must not run")

    # given the scan processor skipped by a noop rule (the faults wrap the registry's processor,
    # which the virus scan's use case then records the verdict of)
    skipped = with_processor_faults(scan, parse_faults('[{"kind": "noop"}]'))
    # when the scan job runs, then its result is a no-op with the verdict CLEAN: the use case
    # records a verdict it can read, and the file's other jobs are sent
    result = skipped(work_on(clock, "any.png", 1))
    assert result == {"noop": True, "verdict": "CLEAN", "engines": {}}


def test_a_skipped_digest_names_a_content_of_the_files_own_so_dedup_still_records_it(
    clock: FakeClock,
) -> None:
    def digest(work: Work) -> dict[str, Any]:
        raise AssertionError("the digest must not run")

    class Owners:
        def claim(self, tenant: str, sha256: str, file_id: str, *, at: object) -> str:
            return file_id  # the first file with this content owns it

    class Files:
        def __init__(self) -> None:
            self.recorded: list[str] = []

        def record_content(self, file_id: str, *, sha256: str, **_: object) -> object:
            self.recorded.append(sha256)
            return object()

    # given the deduplication check's digest skipped by a noop rule (bench/local_stack.py)
    skipped = with_processor_faults(digest, parse_faults('[{"kind": "noop"}]'))
    files = Files()
    check = DeduplicationCheck(skipped, Owners(), files)  # type: ignore[arg-type]
    dedup = JobType.DEDUPLICATION_CHECK
    # when two files' checks run, then each completes as a no-op, with a digest of its own
    # recorded on its file, as the use case records a real one
    first = check(work_on(clock, "a.png", 1, job_type=dedup))
    second = check(work_on(clock, "b.png", 1, job_type=dedup))
    assert first["noop"] is True
    assert second["noop"] is True
    assert first["duplicate_of"] is None
    assert files.recorded == [first["sha256"], second["sha256"]]
    assert len({first["sha256"], second["sha256"]}) == 2


def test_a_noop_rule_with_a_probability_skips_that_share_of_attempts(clock: FakeClock) -> None:
    rules = parse_faults('[{"kind": "noop", "probability": 0.5, "seed": 3}]')
    skipping = with_processor_faults(done, rules)
    # when 200 attempts of different files run under a rule that skips half of them
    thumbnail = JobType.THUMBNAIL_GENERATION
    results = [skipping(work_on(clock, f"file-{n}.png", 1, job_type=thumbnail)) for n in range(200)]
    skipped = sum(1 for result in results if result == {"noop": True})
    # then about half were skipped, and the rest ran
    assert 70 < skipped < 130
    assert all(result in ({"noop": True}, {"ran": 1}) for result in results)
