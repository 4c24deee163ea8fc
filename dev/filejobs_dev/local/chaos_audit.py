"""The chaos run's audit: what the system left in its tables and queues, against what was sent.

Pure: it reads what the runner (tools/chaos.py) collected — the uploads, every file and job item,
the job table's stream from its first record, the fault log, the cancels it made, what is left
in the dead-letter queues — and says what was violated. Each check is one function, named for
the promise it checks; `audit` runs them all and gathers the figures.

A job's end is explained when it is what its file should get (a corrupt JPEG's thumbnail fails,
an infected file's parsing jobs are cancelled), or when the run caused it: a cancel the harness
made, a retry budget spent on injected faults, a message poisoned on purpose that its
dead-letter queue gave back, a delete the harness made on the uploads bucket. Any other end is
a violation, as is any job not yet ended.

A file whose upload the harness deleted (a delete marker, or its version deleted by id) must end
marked deleted, with no job open and no derived output left: the deletion's own, and the later
purge's for an attempt that was running and wrote after it (the runner waits for that purge).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from filejobs.domain.content import job_types_for
from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.file_lifecycle import FOLLOWS_S3, DeletionReason
from filejobs.domain.job import AttemptOutcome, JobStatus, JobType, ProcessingJob
from filejobs.domain.keys import DERIVED_PREFIX
from filejobs.domain.scanning import SCANNER

COMPLETED = JobStatus.COMPLETED.value
# What an error message says when the run's own faults spent the job's retries.
INJECTED_ERRORS = (
    "injected transient failure",
    "lost its lease",  # a crash (or a worker starved past its lease) the sweep recovered
    "ThrottlingException",
)
DEAD_LETTERED = "dead-letter queue"
# How the lifecycle's cancel of a deleted file's open jobs begins (services/file_lifecycle.py).
CANCELLED_BY_DELETION = "the file was deleted"
# What a job that read its object version after it was deleted for good failed with
# (ObjectGoneError: "s3://bucket/key is gone (NoSuchVersion)").
OBJECT_GONE = " is gone ("
# What the scan gate (domain/scanning.py refusal_reason) cancels a deleted file's job with.
DELETED_REFUSAL = f"the file is {FileStatus.DELETED.value}"
# The files S3 takes out of the lifecycle's hands: their status stays as it is.
NOT_FOLLOWED = (FileStatus.QUARANTINED, FileStatus.REJECTED)


@dataclass(frozen=True)
class Upload:
    """One object the harness put, and what its jobs should end as without faults."""

    key: str
    version_id: str | None
    kind: str
    # job type -> the statuses its job may end in, when not simply "completed"
    expected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    poisoned: frozenset[str] = frozenset()  # job types whose messages are poisoned

    def allowed(self, job_type: str) -> tuple[str, ...]:
        return self.expected.get(job_type, (COMPLETED,))


class DeleteHow(StrEnum):
    MARKER = "marker"  # a plain DeleteObject: a delete marker hides the version
    VERSION = "version"  # DeleteObject of that version id: the version is gone for good


@dataclass(frozen=True)
class Deletion:
    """One delete the harness made on the uploads bucket, of one recorded file's version."""

    key: str
    version_id: str | None
    file_id: str
    how: DeleteHow
    at: float  # seconds after the uploads began

    @property
    def reason(self) -> DeletionReason:
        """What the file's `status_reason` must then say."""
        if self.how == DeleteHow.MARKER:
            return DeletionReason.DELETE_MARKER
        return DeletionReason.VERSION_DELETED


@dataclass(frozen=True)
class StreamRecord:
    """One record of the jobs table's stream: the job and its status before and after."""

    event: str  # INSERT | MODIFY | REMOVE
    job_id: str
    old_status: str | None
    new_status: str | None


@dataclass(frozen=True)
class ProcessedEvent:
    """One `File Processed` event as a subscriber received it (copies included)."""

    file_id: str
    event_id: str
    fingerprint: str


@dataclass
class Evidence:
    uploads: list[Upload]
    files: list[StoredFile]
    jobs: list[ProcessingJob]
    stream: list[StreamRecord]
    injections: list[dict[str, Any]]
    cancelled: set[str]  # job ids the harness cancelled (the API said 200)
    dead_letters_left: dict[str, int]  # queue -> messages still in it (visible or in flight)
    processed_events: list[ProcessedEvent] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)
    # Every key under derived/ in the outputs bucket at the end.
    outputs: list[str] = field(default_factory=list)


@dataclass
class Report:
    figures: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def check(self, name: str, problems: list[str]) -> None:
        """Counts a check's violations as a figure, and keeps the first few of each."""
        self.figures[name] = len(problems)
        self.violations.extend(problems[:20])
        if len(problems) > 20:
            self.violations.append(f"... and {len(problems) - 20} more of {name}")


def audit(evidence: Evidence) -> Report:
    report = Report()
    files_by_upload = _files_by_upload(evidence.files)
    jobs_by_file: dict[str, list[ProcessingJob]] = defaultdict(list)
    for job in evidence.jobs:
        jobs_by_file[job.file_id].append(job)
    report.check("uploads never recorded", never_recorded(evidence.uploads, files_by_upload))
    report.check("lost files", lost_files(evidence.uploads, files_by_upload, jobs_by_file))
    report.check("duplicate files", duplicate_files(files_by_upload))
    report.check("duplicate jobs", duplicate_jobs(jobs_by_file))
    report.check("jobs not terminal", not_terminal(evidence.jobs))
    report.check("invariant violations", broken_invariants(evidence.jobs))
    report.check("retry counts over max", over_retried(evidence.jobs))
    report.check("double completions", double_completions(evidence.stream))
    report.check("completions without a witness", unwitnessed(evidence.jobs, evidence.stream))
    report.check("finished jobs rewritten", finished_rewritten(evidence.stream))
    report.check("crashes not recovered", unrecovered_crashes(evidence.jobs, evidence.injections))
    deleted_ids = {deletion.file_id for deletion in evidence.deletions}
    report.check(
        "unexplained outcomes",
        unexplained_outcomes(
            evidence.uploads, files_by_upload, jobs_by_file, evidence.cancelled, deleted_ids
        ),
    )
    report.check(
        "outputs left by deleted files",
        outputs_left_by_deleted_files(evidence.files, deleted_ids, evidence.outputs),
    )
    report.check(
        "deleted uploads not marked", deleted_not_marked(evidence.files, evidence.deletions)
    )
    report.check(
        "open jobs of deleted files", open_jobs_of_deleted_files(evidence.files, jobs_by_file)
    )
    report.check(
        "files not announced processed once per completion",
        not_processed_once(
            evidence.files,
            jobs_by_file,
            evidence.processed_events,
            reopened_jobs(evidence.jobs, evidence.stream),
        ),
    )
    report.figures["File Processed events received"] = len(evidence.processed_events)
    report.figures["File Processed events distinct"] = len(
        {event.event_id for event in evidence.processed_events}
    )
    left = evidence.dead_letters_left
    report.check("dead letters unaccounted", [f"{q}: {n} left" for q, n in left.items() if n])
    report.figures.update(_outcome_figures(evidence))
    return report


# --- the checks -------------------------------------------------------------------------------


def _files_by_upload(files: Iterable[StoredFile]) -> dict[str, list[StoredFile]]:
    """Files by object key: the harness puts each key once, so each key has one file."""
    found: dict[str, list[StoredFile]] = defaultdict(list)
    for stored in files:
        found[stored.key].append(stored)
    return found


def never_recorded(uploads: list[Upload], files: Mapping[str, list[StoredFile]]) -> list[str]:
    """Every upload is recorded as a file, its notification dropped or not (the reconciler
    ingests what no notification announced)."""
    return [f"{upload.key}: no file recorded" for upload in uploads if not files.get(upload.key)]


def dropped_notification_keys(injections: Iterable[Mapping[str, Any]]) -> set[str]:
    """The uploads whose S3 notification a `drop` fault lost (faults.py logs the keys)."""
    return {
        str(key)
        for line in injections
        if line.get("kind") == "drop"
        for key in line.get("keys") or []
    }


def lost_files(
    uploads: list[Upload],
    files: Mapping[str, list[StoredFile]],
    jobs_by_file: Mapping[str, list[ProcessingJob]],
) -> list[str]:
    """Every recorded upload is a file of the version put (when S3's event carried one), with
    one job of each type its content calls for (one not recorded at all is never_recorded's)."""
    problems = []
    for upload in uploads:
        for stored in files.get(upload.key, []):
            if stored.version_id not in (None, upload.version_id):
                problems.append(f"{upload.key}: recorded as version {stored.version_id}")
            wanted = {t.value for t in job_types_for(stored.content_type)}
            present = {j.job_type.value for j in jobs_by_file.get(stored.id, [])}
            if missing := wanted - present:
                problems.append(f"{upload.key}: no {', '.join(sorted(missing))} job")
    return problems


def duplicate_files(files: Mapping[str, list[StoredFile]]) -> list[str]:
    return [f"{key}: {len(stored)} files" for key, stored in files.items() if len(stored) > 1]


def duplicate_jobs(jobs_by_file: Mapping[str, list[ProcessingJob]]) -> list[str]:
    problems: list[str] = []
    for file_id, jobs in jobs_by_file.items():
        counts = Counter(job.job_type.value for job in jobs)
        problems.extend(f"file {file_id}: {n} {t} jobs" for t, n in counts.items() if n > 1)
    return problems


def not_processed_once(
    files: Iterable[StoredFile],
    jobs_by_file: Mapping[str, list[ProcessingJob]],
    events: Iterable[ProcessedEvent],
    reopened: Mapping[str, int] | None = None,
) -> list[str]:
    """Every file version given jobs is announced processed once (copies of one event, same id,
    are a consumer's to drop), and what was last announced is its jobs' final state: the
    completion the file keeps, naming every one of its jobs. A file one of whose ended jobs was
    made pending again (`reopened`: the scan gate giving back the jobs it had cancelled when a
    cancelled scan's verdict still came) may be processed once more for each, each time with a
    new completion: the harness retries nothing itself."""
    announced: dict[str, set[str]] = defaultdict(set)
    fingerprints: dict[str, set[str]] = defaultdict(set)
    for event in events:
        announced[event.file_id].add(event.event_id)
        fingerprints[event.file_id].add(event.fingerprint)
    problems = []
    for stored in files:
        jobs = jobs_by_file.get(stored.id, [])
        if not jobs:
            continue
        count, again = len(announced.get(stored.id, ())), (reopened or {}).get(stored.id, 0)
        if not 1 <= count <= 1 + again:
            reason = f" ({again} of its jobs reopened)" if again else ""
            problems.append(f"file {stored.id}: announced processed {count} times{reason}")
        elif (
            stored.processed is None or stored.processed.fingerprint not in fingerprints[stored.id]
        ):
            problems.append(f"file {stored.id}: the event is not the file's recorded completion")
        elif {j.id for j in stored.processed.jobs} != {j.id for j in jobs}:
            problems.append(f"file {stored.id}: its completion does not name every job")
    return problems


def reopened_jobs(jobs: Iterable[ProcessingJob], stream: Iterable[StreamRecord]) -> dict[str, int]:
    """file id -> how many times the stream saw one of its jobs leave an end (failed or
    cancelled) for pending again."""
    file_of = {job.id: job.file_id for job in jobs}
    ended = {JobStatus.FAILED.value, JobStatus.CANCELLED.value}
    counts: Counter[str] = Counter(
        file_of[r.job_id]
        for r in stream
        if r.old_status in ended and r.new_status not in ended and r.job_id in file_of
    )
    return dict(counts)


def not_terminal(jobs: Iterable[ProcessingJob]) -> list[str]:
    return [f"job {j.id} ({j.job_type}) is {j.status}" for j in jobs if not j.is_terminal]


def broken_invariants(jobs: Iterable[ProcessingJob]) -> list[str]:
    return [f"job {job.id}: {problem}" for job in jobs for problem in job.invariant_violations()]


def over_retried(jobs: Iterable[ProcessingJob]) -> list[str]:
    return [
        f"job {j.id}: retry_count {j.retry_count} > max_retries {j.max_retries}"
        for j in jobs
        if j.retry_count > j.max_retries
    ]


def double_completions(stream: Iterable[StreamRecord]) -> list[str]:
    """From the stream, not the final rows: a job written as completed twice (even with the
    same values) ran to completion twice, whatever its row says now."""
    completions = Counter(r.job_id for r in stream if r.new_status == COMPLETED)
    return [f"job {job_id}: completed {n} times" for job_id, n in completions.items() if n > 1]


def unwitnessed(jobs: Iterable[ProcessingJob], stream: Iterable[StreamRecord]) -> list[str]:
    """A completed row the stream never saw completing: the witness itself would be unsound."""
    witnessed = {r.job_id for r in stream if r.new_status == COMPLETED}
    return [
        f"job {j.id}: completed, but no stream record says so"
        for j in jobs
        if j.status is JobStatus.COMPLETED and j.id not in witnessed
    ]


def finished_rewritten(stream: Iterable[StreamRecord]) -> list[str]:
    """A completed job is final: no write may change it or take it away (the harness never
    deletes or retries)."""
    return [
        f"job {r.job_id}: {r.event} of a completed job (now {r.new_status})"
        for r in stream
        if r.old_status == COMPLETED
    ]


def crashed_attempts(injections: Iterable[Mapping[str, Any]]) -> set[tuple[str, int]]:
    return {
        (str(line["job_id"]), int(line["attempt"]))
        for line in injections
        if line.get("kind") == "crash"
    }


def recovered_attempts(jobs: Iterable[ProcessingJob]) -> set[tuple[str, int]]:
    return {
        (job.id, number)
        for job in jobs
        for number, attempt in job.attempts.items()
        if attempt.outcome is AttemptOutcome.LEASE_EXPIRED
    }


def unrecovered_crashes(
    jobs: list[ProcessingJob], injections: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Every attempt whose worker was crashed was taken back by the sweep when its lease ran
    out, unless the job was cancelled first (a cancel ends a running job, crashed or not)."""
    recovered = recovered_attempts(jobs)
    by_id = {job.id: job for job in jobs}
    problems = []
    for job_id, attempt in sorted(crashed_attempts(injections) - recovered):
        job = by_id.get(job_id)
        if job is None:
            problems.append(f"job {job_id}: crashed in attempt {attempt}, and is gone")
        elif job.status is not JobStatus.CANCELLED:
            problems.append(f"job {job_id}: attempt {attempt} crashed and was never recovered")
    return problems


def unexplained_outcomes(
    uploads: list[Upload],
    files: Mapping[str, list[StoredFile]],
    jobs_by_file: Mapping[str, list[ProcessingJob]],
    cancelled: set[str],
    deleted: set[str] | None = None,
) -> list[str]:
    """Every ended job explained (`explanation`); `deleted`: the ids of the files whose upload
    the harness deleted."""
    problems = []
    for upload in uploads:
        for stored in files.get(upload.key, []):
            siblings = jobs_by_file.get(stored.id, [])
            gone = stored.id in (deleted or set())
            for job in siblings:
                if not job.is_terminal:
                    continue  # not_terminal's to count
                if explanation(upload, job, cancelled, siblings, deleted=gone) is None:
                    problems.append(
                        f"{upload.key} {job.job_type}: {job.status}"
                        f" ({job.error_message or job.cancel_reason or 'no reason'})"
                    )
    return problems


def explanation(
    upload: Upload,
    job: ProcessingJob,
    cancelled: set[str],
    siblings: Iterable[ProcessingJob] = (),
    *,
    deleted: bool = False,
) -> str | None:
    """Why the job ended as it did, or None when nothing the run did explains it. `deleted`:
    the harness deleted the job's upload (a job that completed before the delete is expected
    still; its outputs are `outputs_left_by_deleted_files`' to judge)."""
    if job.status.value in upload.allowed(job.job_type.value):
        return "expected"
    if job.status is JobStatus.CANCELLED:
        return _why_cancelled(upload, job, cancelled, siblings, deleted=deleted)
    if job.status is JobStatus.FAILED:
        return _why_failed(upload, job, deleted=deleted)
    return None


def _why_cancelled(
    upload: Upload,
    job: ProcessingJob,
    cancelled: set[str],
    siblings: Iterable[ProcessingJob],
    *,
    deleted: bool,
) -> str | None:
    if job.id in cancelled:
        return "cancelled by the harness"
    if deleted and cancelled_for_deletion(job):
        return "cancelled: its upload was deleted by the run"
    scan = next((j for j in siblings if j.job_type is JobType.VIRUS_SCAN), None)
    if (
        job.cancelled_by == SCANNER
        and scan is not None
        and scan.status.value in ("failed", "cancelled")
        and explanation(upload, scan, cancelled, deleted=deleted) is not None
    ):
        return "its file's scan ended without a verdict, as the run made it"
    return None


def _why_failed(upload: Upload, job: ProcessingJob, *, deleted: bool) -> str | None:
    error = job.error_message or ""
    if job.job_type.value in upload.poisoned and DEAD_LETTERED in error:
        return "dead-lettered (poisoned)"
    if any(marker in error for marker in INJECTED_ERRORS):
        return "retries spent on injected faults"
    if deleted and OBJECT_GONE in error:
        return "its object version was deleted by the run while it ran"
    return None


def cancelled_for_deletion(job: ProcessingJob) -> bool:
    """Cancelled by the lifecycle when its file was deleted, or refused by the scan gate (or by
    a worker that found the object gone) because its file was deleted by then."""
    if job.cancelled_by == FOLLOWS_S3:
        return (job.cancel_reason or "").startswith(CANCELLED_BY_DELETION)
    return job.cancelled_by == SCANNER and job.cancel_reason == DELETED_REFUSAL


def outputs_by_file(outputs: Iterable[str]) -> dict[str, list[str]]:
    """The outputs bucket's `derived/{tenant}/{file_id}/...` keys, by file id."""
    found: dict[str, list[str]] = defaultdict(list)
    for key in outputs:
        parts = key.split("/")
        if len(parts) > 3 and parts[0] == DERIVED_PREFIX:
            found[parts[2]].append(key)
    return found


def outputs_left_by_deleted_files(
    files: Iterable[StoredFile], deleted: set[str], outputs: Iterable[str]
) -> list[str]:
    """A file marked deleted, or whose upload the harness deleted, has no derived output left:
    one problem per output (a quarantined or rejected file aside: the lifecycle leaves it be)."""
    left = outputs_by_file(outputs)
    problems: list[str] = []
    for stored in files:
        withdrawn = stored.status is FileStatus.DELETED or (
            stored.id in deleted and stored.status not in NOT_FOLLOWED
        )
        if withdrawn:
            problems.extend(
                f"{stored.key} (file {stored.id}, {stored.status}): output left: {key}"
                for key in sorted(left.get(stored.id, ()))
            )
    return problems


def deleted_not_marked(files: Iterable[StoredFile], deletions: Iterable[Deletion]) -> list[str]:
    """Each upload the harness deleted has its file marked deleted, saying how (a quarantined
    or rejected file keeps its status: S3's removal is not the lifecycle's to follow)."""
    by_id = {stored.id: stored for stored in files}
    problems = []
    for deletion in deletions:
        stored = by_id.get(deletion.file_id)
        if stored is None:
            problems.append(f"{deletion.key}: deleted ({deletion.how}), and its file is gone")
        elif stored.status in NOT_FOLLOWED:
            continue
        elif stored.status is not FileStatus.DELETED:
            problems.append(
                f"{deletion.key}: deleted ({deletion.how}), its file is {stored.status}"
            )
        elif stored.status_reason != deletion.reason.value:
            problems.append(
                f"{deletion.key}: deleted ({deletion.how}), marked {stored.status_reason!r}"
            )
    return problems


def open_jobs_of_deleted_files(
    files: Iterable[StoredFile], jobs_by_file: Mapping[str, list[ProcessingJob]]
) -> list[str]:
    """A deleted file's jobs are all ended: the deletion cancelled those it found open."""
    return [
        f"{stored.key}: deleted, its {job.job_type} job is {job.status}"
        for stored in files
        if stored.status is FileStatus.DELETED
        for job in jobs_by_file.get(stored.id, [])
        if not job.is_terminal
    ]


# --- figures ------------------------------------------------------------------------------


def _outcome_figures(evidence: Evidence) -> dict[str, int]:
    jobs = evidence.jobs
    statuses = Counter(job.status.value for job in jobs)
    injected = Counter(str(line.get("kind")) for line in evidence.injections)
    crashed, recovered = crashed_attempts(evidence.injections), recovered_attempts(jobs)
    dropped = dropped_notification_keys(evidence.injections)
    recorded_keys = {stored.key for stored in evidence.files}
    return {
        "files uploaded": len(evidence.uploads),
        "files recorded": len(evidence.files),
        "uploads whose notification was dropped": len(dropped),
        "of them recorded (the reconciler found them)": len(dropped & recorded_keys),
        "jobs": len(jobs),
        **{f"jobs {s}": statuses.get(s, 0) for s in ("completed", "failed", "cancelled")},
        # Each letter the sweep's review settled: the job failed, saying its message was
        # dead-lettered (what is still in a dead-letter queue is checked apart).
        "jobs failed through a dead-letter queue": sum(
            1 for job in jobs if DEAD_LETTERED in (job.error_message or "")
        ),
        "attempts": sum(job.attempt for job in jobs),
        "retries": sum(job.retry_count for job in jobs),
        **{f"injected {kind}": n for kind, n in sorted(injected.items())},
        "crashes recovered by the sweep": len(crashed & recovered),
        "crashes ended by a cancel": len(crashed - recovered),
        # A worker too starved (the emulator is one busy process) to renew its lease in time.
        "leases lost without a crash": len(recovered - crashed),
        "cancels by the harness": len(evidence.cancelled),
        **{
            f"deletes by the harness ({how})": sum(1 for d in evidence.deletions if d.how == how)
            for how in DeleteHow
        },
        "files deleted": sum(1 for f in evidence.files if f.status is FileStatus.DELETED),
        "jobs cancelled by a deletion": sum(
            1 for job in jobs if job.status is JobStatus.CANCELLED and cancelled_for_deletion(job)
        ),
        "outputs at the end": len(evidence.outputs),
        "stream records": len(evidence.stream),
        "completions witnessed": sum(1 for r in evidence.stream if r.new_status == COMPLETED),
    }
