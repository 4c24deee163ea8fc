"""Which jobs may run on a file, by its scan verdict (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.scanning import (
    GATED_JOB_TYPES,
    Gate,
    UnscannablePolicy,
    gate,
    refusal_reason,
    sent_at_ingest,
)
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


def test_the_refusal_of_an_unscannable_file_says_why_the_scan_could_not_vouch_for_it(
    clock: FakeClock,
) -> None:
    stored = ingest_plan(clock.now).file
    unscannable = replace(stored, scan_status=ScanStatus.UNSCANNABLE)
    assert refusal_reason(unscannable) == "the virus scan could not vouch for the file"
    record = ScanRecord(ScanStatus.UNSCANNABLE, clock.now, "scan", reason="a likely zip bomb")
    explained = replace(unscannable, scan=record)
    assert refusal_reason(explained) == (
        "the virus scan could not vouch for the file: a likely zip bomb"
    )


def test_an_unscannable_file_is_parsed_only_under_the_process_policy(clock: FakeClock) -> None:
    unscannable = replace(ingest_plan(clock.now).file, scan_status=ScanStatus.UNSCANNABLE)
    thumbnail = JobType.THUMBNAIL_GENERATION
    assert gate(thumbnail, unscannable) is Gate.REFUSE
    assert gate(thumbnail, unscannable, unscannable=UnscannablePolicy.PROCESS) is Gate.RUN
    # an infected file never, whatever the policy
    infected = replace(unscannable, scan_status=ScanStatus.INFECTED)
    assert gate(thumbnail, infected, unscannable=UnscannablePolicy.PROCESS) is Gate.REFUSE


def test_the_ingest_holds_a_files_parsing_jobs_back_for_its_scan(clock: FakeClock) -> None:
    # Given the jobs planned for an uploaded file: its scan, its hash and its parsing jobs
    jobs = ingest_plan(clock.now).jobs
    assert {j.job_type for j in jobs} & GATED_JOB_TYPES

    # When the ingest picks the messages to send
    sent = sent_at_ingest(jobs)

    # Then only the jobs that never wait on a verdict go now; the scan's release sends the rest
    assert {j.job_type for j in sent} == {j.job_type for j in jobs} - GATED_JOB_TYPES
    assert JobType.VIRUS_SCAN in {j.job_type for j in sent}


def test_jobs_with_no_scan_among_them_are_all_sent(clock: FakeClock) -> None:
    # A redelivered upload whose scan is done finds only parsing jobs pending: nothing will
    # release them but this send.
    parsing = [j for j in ingest_plan(clock.now).jobs if j.job_type in GATED_JOB_TYPES]

    assert sent_at_ingest(parsing) == parsing
