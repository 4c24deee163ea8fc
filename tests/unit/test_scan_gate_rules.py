"""Which jobs may run on a file, by its scan verdict (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from filejobs.domain.file import FileStatus, ScanStatus
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.scanning import GATED_JOB_TYPES, Gate, gate, refusal_reason
from tests.conftest import FakeClock
from tests.factories import ingest_plan


@pytest.mark.parametrize("job_type", sorted(GATED_JOB_TYPES))
def test_a_parsing_job_waits_runs_or_is_refused_by_the_verdict(
    clock: FakeClock, job_type: JobType
) -> None:
    unscanned = ingest_plan(clock.now).file
    assert gate(job_type, unscanned) is Gate.WAIT
    assert gate(job_type, replace(unscanned, scan_status=ScanStatus.CLEAN)) is Gate.RUN
    assert gate(job_type, replace(unscanned, scan_status=ScanStatus.INFECTED)) is Gate.REFUSE
    assert gate(job_type, replace(unscanned, scan_status=ScanStatus.UNSCANNABLE)) is Gate.REFUSE
    deleted = replace(unscanned, status=FileStatus.DELETED, scan_status=ScanStatus.CLEAN)
    assert gate(job_type, deleted) is Gate.REFUSE
    assert gate(job_type, None) is Gate.REFUSE


@pytest.mark.parametrize("job_type", sorted(GATED_JOB_TYPES))
def test_a_parsing_job_stops_waiting_once_its_scan_ended_without_a_verdict(
    clock: FakeClock, job_type: JobType
) -> None:
    unscanned = ingest_plan(clock.now).file
    # a scan still on its way (or retrying) keeps the job waiting
    for going in (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.SCHEDULED):
        assert gate(job_type, unscanned, going) is Gate.WAIT
    # a scan that failed or was cancelled will never give a verdict: refused
    for ended in (JobStatus.FAILED, JobStatus.CANCELLED):
        assert gate(job_type, unscanned, ended) is Gate.REFUSE
    assert "retry the scan" in refusal_reason(unscanned)
    # a verdict already recorded stands, whatever became of the scan job afterwards
    clean = replace(unscanned, scan_status=ScanStatus.CLEAN)
    assert gate(job_type, clean, JobStatus.CANCELLED) is Gate.RUN


@pytest.mark.parametrize("job_type", [JobType.VIRUS_SCAN, JobType.DEDUPLICATION_CHECK])
def test_jobs_that_never_decode_the_file_are_not_held(clock: FakeClock, job_type: JobType) -> None:
    assert gate(job_type, ingest_plan(clock.now).file) is Gate.RUN


def test_the_refusal_names_the_signature(clock: FakeClock) -> None:
    infected = replace(
        ingest_plan(clock.now).file,
        status=FileStatus.QUARANTINED,
        scan_status=ScanStatus.INFECTED,
        status_reason="Eicar-Test-Signature",
    )
    assert refusal_reason(infected) == (
        "the file was quarantined by the virus scan: Eicar-Test-Signature"
    )


def test_the_refusal_of_an_unscannable_file_says_the_scan_could_not_check_it(
    clock: FakeClock,
) -> None:
    unscannable = replace(ingest_plan(clock.now).file, scan_status=ScanStatus.UNSCANNABLE)
    assert refusal_reason(unscannable) == "the virus scan could not check the file"
