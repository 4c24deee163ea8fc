"""The chaos audit (filejobs_dev/local/chaos_audit.py) finds each kind of violation, only those.

An audit that passes everything would prove nothing: each test takes the evidence of a clean
run and breaks one promise in it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.file_completion import completion_of
from filejobs.domain.file_lifecycle import FOLLOWS_S3, DeletionReason
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs_dev.local.chaos_audit import (
    DeleteHow,
    Deletion,
    Evidence,
    ProcessedEvent,
    StreamRecord,
    Upload,
    audit,
)
from tests.conftest import FakeClock
from tests.factories import ingest_plan

KEEP = timedelta(days=1)
LEASE = timedelta(seconds=20)


@pytest.fixture
def plan(clock: FakeClock) -> IngestPlan:
    return ingest_plan(clock.now, "image/png", name="a.png", version_id="v1")


def completed(job: ProcessingJob, clock: FakeClock) -> ProcessingJob:
    done = job.copy()
    done.mark_started(now=clock.now, lease=LEASE, worker="w")
    done.mark_completed({"ok": True}, now=clock.now, retention=KEEP)
    return done


def witness(*jobs: ProcessingJob) -> list[StreamRecord]:
    return [StreamRecord("MODIFY", job.id, "running", job.status.value) for job in jobs]


def clean_run(plan: IngestPlan, clock: FakeClock) -> Evidence:
    jobs = [completed(job, clock) for job in plan.jobs]
    completion = completion_of(jobs, at=clock.now)
    assert completion is not None
    processed = replace(plan.file, processed=completion)
    return Evidence(
        uploads=[Upload(plan.file.key, plan.file.version_id, "png")],
        files=[processed],
        jobs=jobs,
        stream=witness(*jobs),
        injections=[],
        cancelled=set(),
        dead_letters_left={"ThumbnailGenerationDeadLetterQueue": 0},
        processed_events=[announcement(processed)],
    )


def announcement(stored: StoredFile) -> ProcessedEvent:
    assert stored.processed is not None
    fingerprint = stored.processed.fingerprint
    return ProcessedEvent(stored.id, f"file:{stored.id}:processed:{fingerprint}", fingerprint)


def violations(evidence: Evidence) -> dict[str, int]:
    return {name: n for name, n in audit(evidence).figures.items() if n and name in CHECKS}


CHECKS = {
    "uploads never recorded",
    "lost files",
    "duplicate files",
    "duplicate jobs",
    "jobs not terminal",
    "invariant violations",
    "retry counts over max",
    "double completions",
    "completions without a witness",
    "finished jobs rewritten",
    "crashes not recovered",
    "unexplained outcomes",
    "dead letters unaccounted",
    "outputs left by deleted files",
    "deleted uploads not marked",
    "open jobs of deleted files",
}


def test_a_clean_run_passes_with_its_figures(plan: IngestPlan, clock: FakeClock) -> None:
    report = audit(clean_run(plan, clock))
    assert report.violations == []
    assert report.figures["jobs completed"] == len(plan.jobs)
    assert report.figures["completions witnessed"] == len(plan.jobs)


def test_an_upload_never_recorded_is_counted_apart(plan: IngestPlan, clock: FakeClock) -> None:
    evidence = clean_run(plan, clock)
    evidence.uploads.append(Upload("uploads/acme/b.png", "v1", "png"))
    assert violations(evidence) == {"uploads never recorded": 1}


def test_an_upload_whose_dropped_notification_nothing_made_up_for_is_never_recorded(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # given the notification of a second upload dropped (faults.py "drop"), and no reconciler
    # run that found it
    evidence = clean_run(plan, clock)
    evidence.uploads.append(Upload("uploads/acme/b.png", "v1", "png"))
    evidence.injections.append({"kind": "drop", "message": "m1", "keys": ["uploads/acme/b.png"]})
    report = audit(evidence)
    # then the upload is never recorded, a violation, and the drop is counted as not made up for
    assert violations(evidence) == {"uploads never recorded": 1}
    assert report.figures["uploads whose notification was dropped"] == 1
    assert report.figures["of them recorded (the reconciler found them)"] == 0


def test_an_upload_whose_dropped_notification_the_reconciler_made_up_for_passes(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    evidence.injections.append({"kind": "drop", "message": "m1", "keys": [plan.file.key]})
    report = audit(evidence)
    assert report.violations == []
    assert report.figures["of them recorded (the reconciler found them)"] == 1


def test_a_file_missing_one_of_its_jobs_is_a_lost_file(plan: IngestPlan, clock: FakeClock) -> None:
    evidence = clean_run(plan, clock)
    evidence.jobs = [j for j in evidence.jobs if j.job_type is not JobType.VIRUS_SCAN]
    assert violations(evidence) == {"lost files": 1}


def test_a_second_job_of_a_type_for_one_file_is_a_duplicate(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    twin = replace(evidence.jobs[0], id="another-id")
    evidence.jobs.append(twin)
    evidence.stream += witness(twin)
    assert violations(evidence) == {"duplicate jobs": 1}


def test_a_job_completed_twice_is_counted_from_the_stream_not_the_row(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    # the row is as clean as ever; only the stream shows a second write of "completed"
    again = StreamRecord("MODIFY", evidence.jobs[0].id, "completed", "completed")
    evidence.stream.append(again)
    assert violations(evidence) == {"double completions": 1, "finished jobs rewritten": 1}


def test_a_pending_job_at_the_end_is_not_terminal(plan: IngestPlan, clock: FakeClock) -> None:
    evidence = clean_run(plan, clock)
    evidence.jobs[0] = plan.jobs[0]  # never ran
    evidence.stream = witness(*evidence.jobs[1:])
    assert violations(evidence) == {"jobs not terminal": 1}


def test_a_failure_nothing_injected_explains_is_a_violation_and_an_injected_one_is_not(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    failed = plan.jobs[0].copy()
    failed.max_retries = 1
    for error in ("injected transient failure (attempt 1 of 1000)", "boom"):
        failed.mark_started(now=clock.now, lease=LEASE, worker="w")
        failed.mark_failed(error, now=clock.now, retention=KEEP, retry_at=clock.now)
    assert failed.status is JobStatus.FAILED
    evidence.jobs[0] = failed
    evidence.stream = witness(*evidence.jobs[1:])
    # the last error is not one of the run's faults: unexplained
    assert violations(evidence) == {"unexplained outcomes": 1}
    # the same job whose budget went on injected faults is explained
    failed.error_message = "injected transient failure (attempt 2 of 1000)"
    assert violations(evidence) == {}


def test_a_crashed_attempt_the_sweep_never_took_back_is_a_violation(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    job = evidence.jobs[0]
    evidence.injections.append({"kind": "crash", "job_id": job.id, "attempt": 1})
    assert violations(evidence) == {"crashes not recovered": 1}
    # recovered: the job's attempt 1 ended with its lease lost, then a retry completed it
    recovered = plan.jobs[0].copy()
    recovered.mark_started(now=clock.now, lease=LEASE, worker="w")
    later = clock.advance(LEASE * 2)
    recovered.apply(transitions.recover_lease(recovered, now=later, retry_at=later, retention=KEEP))
    evidence.jobs[0] = completed(recovered, clock)
    assert violations(evidence) == {}
    assert audit(evidence).figures["crashes recovered by the sweep"] == 1


def test_a_letter_left_in_a_dead_letter_queue_is_unaccounted(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    evidence.dead_letters_left["ThumbnailGenerationDeadLetterQueue"] = 2
    assert violations(evidence) == {"dead letters unaccounted": 1}


def test_a_parsing_job_cancelled_because_its_scan_was_cancelled_is_explained_by_that_cancel(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    scan = next(j for j in evidence.jobs if j.job_type is JobType.VIRUS_SCAN)
    thumbnail = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION).copy()
    thumbnail.cancel(now=clock.now, by="virus_scan", reason="no verdict", retention=KEEP)
    evidence.jobs = [thumbnail if j.id == thumbnail.id else j for j in evidence.jobs]
    evidence.stream = witness(*[j for j in evidence.jobs if j.status is JobStatus.COMPLETED])
    # given the thumbnail was cancelled by the scan gate while the scan completed: unexplained
    assert violations(evidence) == {"unexplained outcomes": 1}
    # when the scan itself was cancelled by the harness, then the cascade is explained
    cancelled_scan = next(j for j in plan.jobs if j.id == scan.id).copy()
    cancelled_scan.cancel(now=clock.now, by="chaos", reason="chaos", retention=KEEP)
    evidence.jobs = [cancelled_scan if j.id == scan.id else j for j in evidence.jobs]
    evidence.stream = witness(*[j for j in evidence.jobs if j.status is JobStatus.COMPLETED])
    evidence.cancelled = {scan.id}
    assert violations(evidence) == {}


NOT_ONCE = "files not announced processed once per completion"


def test_copies_of_one_file_processed_event_count_once(plan: IngestPlan, clock: FakeClock) -> None:
    evidence = clean_run(plan, clock)
    evidence.processed_events *= 3  # a retried stream batch published it again, same id
    assert audit(evidence).figures[NOT_ONCE] == 0


def test_a_file_never_announced_processed_is_a_violation(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    evidence.processed_events = []
    report = audit(evidence)
    assert report.figures[NOT_ONCE] == 1
    assert f"file {plan.file.id}: announced processed 0 times" in report.violations


def test_a_file_announced_processed_twice_is_a_violation(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    (event,) = evidence.processed_events
    evidence.processed_events.append(replace(event, event_id="file:x:processed:other"))
    assert audit(evidence).figures[NOT_ONCE] == 1


def test_an_announcement_of_another_state_than_the_recorded_one_is_a_violation(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    (event,) = evidence.processed_events
    evidence.processed_events = [replace(event, fingerprint="0" * 32)]
    report = audit(evidence)
    assert report.figures[NOT_ONCE] == 1
    assert any("not the file's recorded completion" in v for v in report.violations)


def test_a_file_whose_cancelled_job_was_given_back_may_be_announced_again(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # given a file announced processed with a job cancelled, that job then given back (the scan
    # gate, when a cancelled scan's verdict still came) and the file processed again
    evidence = clean_run(plan, clock)
    (event,) = evidence.processed_events
    earlier = replace(
        event, event_id=f"file:{plan.file.id}:processed:earlier", fingerprint="1" * 32
    )
    evidence.processed_events.insert(0, earlier)
    job = evidence.jobs[0]
    evidence.stream += [
        StreamRecord("MODIFY", job.id, "pending", "cancelled"),
        StreamRecord("MODIFY", job.id, "cancelled", "pending"),
    ]
    # then both announcements count, the last being the file's recorded completion
    assert audit(evidence).figures[NOT_ONCE] == 0
    # and a third, with no other job given back, is one too many
    evidence.processed_events.insert(0, replace(earlier, event_id="file:x:processed:third"))
    report = audit(evidence)
    assert report.figures[NOT_ONCE] == 1
    assert f"file {plan.file.id}: announced processed 3 times (1 of its jobs reopened)" in (
        report.violations
    )


# --- uploads the harness deleted ------------------------------------------------------------


def thumbnail_outputs(stored: StoredFile) -> list[str]:
    folder = f"derived/{stored.tenant}/{stored.id}/thumbnail_generation"
    return [f"{folder}/thumb_256.jpg", f"{folder}/thumb_1024.jpg"]


def deleted_while_running(plan: IngestPlan, clock: FakeClock, how: DeleteHow) -> Evidence:
    """The clean run, but the harness deleted the upload while its thumbnail ran: the file is
    marked deleted, the thumbnail cancelled by the lifecycle, the jobs done before it kept, and
    every output gone."""
    evidence = clean_run(plan, clock)
    reason = (
        DeletionReason.DELETE_MARKER
        if how is DeleteHow.MARKER
        else (DeletionReason.VERSION_DELETED)
    )
    thumbnail = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION).copy()
    thumbnail.mark_started(now=clock.now, lease=LEASE, worker="w")
    thumbnail.cancel(
        now=clock.now, by=FOLLOWS_S3, reason=f"the file was deleted: {reason}", retention=KEEP
    )
    evidence.jobs = [thumbnail if j.id == thumbnail.id else j for j in evidence.jobs]
    evidence.stream = witness(*[j for j in evidence.jobs if j.status is JobStatus.COMPLETED])
    (stored,) = evidence.files
    evidence.files = [replace(stored, status=FileStatus.DELETED, status_reason=reason.value)]
    evidence.deletions = [Deletion(stored.key, stored.version_id, stored.id, how, at=4.2)]
    return evidence


@pytest.mark.parametrize("how", list(DeleteHow))
def test_a_job_cancelled_by_the_deletion_of_its_upload_is_explained_by_that_deletion(
    plan: IngestPlan, clock: FakeClock, how: DeleteHow
) -> None:
    evidence = deleted_while_running(plan, clock, how)
    # given the run deleted the upload: the cancel, and the jobs completed before it, pass
    report = audit(evidence)
    assert report.violations == []
    assert report.figures["jobs cancelled by a deletion"] == 1
    assert report.figures[f"deletes by the harness ({how})"] == 1
    # given the run deleted nothing, the same cancel is unexplained
    evidence.deletions = []
    assert violations(evidence) == {"unexplained outcomes": 1}


def test_an_output_left_by_a_deleted_file_is_a_violation_counted_per_output(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = deleted_while_running(plan, clock, DeleteHow.MARKER)
    (stored,) = evidence.files
    # given a thumbnail written after the deletion that no purge removed, beside another
    # (active) file's outputs
    other = replace(stored, id="another-file")
    evidence.outputs = [thumbnail_outputs(stored)[0], *thumbnail_outputs(other)]
    report = audit(evidence)
    assert violations(evidence) == {"outputs left by deleted files": 1}
    assert any(thumbnail_outputs(stored)[0] in v for v in report.violations)


def test_a_deleted_upload_whose_file_stays_active_is_a_violation(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = clean_run(plan, clock)
    (stored,) = evidence.files
    deletion = Deletion(stored.key, stored.version_id, stored.id, DeleteHow.MARKER, at=1.0)
    evidence.deletions = [deletion]
    assert violations(evidence) == {"deleted uploads not marked": 1}
    # and its outputs, which the deletion should have taken, count too
    evidence.outputs = thumbnail_outputs(stored)
    assert violations(evidence) == {
        "deleted uploads not marked": 1,
        "outputs left by deleted files": 2,
    }


def test_a_file_marked_deleted_for_another_reason_than_the_delete_made_is_a_violation(
    plan: IngestPlan, clock: FakeClock
) -> None:
    # given the version deleted for good, but the file says a marker hides it (restorable)
    evidence = deleted_while_running(plan, clock, DeleteHow.VERSION)
    (stored,) = evidence.files
    marker = DeletionReason.DELETE_MARKER.value
    evidence.files = [replace(stored, status_reason=marker)]
    assert violations(evidence) == {"deleted uploads not marked": 1}


def test_an_open_job_of_a_deleted_file_is_a_violation(plan: IngestPlan, clock: FakeClock) -> None:
    evidence = deleted_while_running(plan, clock, DeleteHow.MARKER)
    scan = next(j for j in plan.jobs if j.job_type is JobType.VIRUS_SCAN)
    evidence.jobs = [scan if j.id == scan.id else j for j in evidence.jobs]  # pending still
    evidence.stream = witness(*[j for j in evidence.jobs if j.status is JobStatus.COMPLETED])
    assert violations(evidence) == {"open jobs of deleted files": 1, "jobs not terminal": 1}


def test_a_job_that_found_its_deleted_version_gone_is_explained_only_by_that_deletion(
    plan: IngestPlan, clock: FakeClock
) -> None:
    evidence = deleted_while_running(plan, clock, DeleteHow.VERSION)
    thumbnail = next(j for j in evidence.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    failed = next(j for j in plan.jobs if j.id == thumbnail.id).copy()
    failed.mark_started(now=clock.now, lease=LEASE, worker="w")
    gone = f"s3://uploads/{plan.file.key} is gone (NoSuchVersion)"
    # a permanent error: no retry
    failed.mark_failed(gone, now=clock.now, retention=KEEP, retry_at=None)
    assert failed.status is JobStatus.FAILED
    evidence.jobs = [failed if j.id == failed.id else j for j in evidence.jobs]
    assert violations(evidence) == {}
    evidence.deletions = []
    assert violations(evidence) == {"unexplained outcomes": 1}
