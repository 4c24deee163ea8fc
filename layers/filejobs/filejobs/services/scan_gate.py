"""Scan before parse, as a use case: hold gated jobs until the file's virus scan has a verdict.

`decide` runs before a gated job's claim (one GetItem of the file). `settle` runs after every
verdict (services/virus_scan.py): it sends the file's waiting jobs when the file may be parsed
(clean, or unscannable under the "process" policy), and gives back the jobs the scan itself had
cancelled for want of a verdict (a rescan that gets through after the definitions were fixed);
otherwise it cancels them with the reason (infected, unscannable under "hold"). A scan job that
ends with no verdict (its retries spent, or cancelled) has them cancelled too: at once when its
own worker fails it (`scan_ended`), else when the sweep next looks at them (`review`: the file's
verdict and, while it has none, its scan job), which also sends a job whose verdict let it go
but whose release was lost; a job still waiting for a verdict is left for the scan job's own
next check, never sent. Every step is idempotent, so a worker that dies in between leaves
nothing that a retry does not finish.

What `settle` reads: nothing, in the common case. The verdict's own write returns the file (its
`job_ids`), and ingest jobs' ids derive from the file (keys.ingest_job_types), so the gated jobs
of a file the ingest alone gave jobs are known by id and type without a read. Told the scan job
that gave the verdict, `settle` acts on them blind when that scan can be the only thing that
ever decided about them (`_blind_release`: the file's ingest scan on its first attempt, no other
job named on the file, no preset). Each is then pending as the ingest left it (or cancelled by
its owner since): a verdict that lets them run sends each one's message (in the scan job's
lane: without a preset every ingest job of a file has one priority), and the worker's claim
takes it, or acknowledges it unread when the job is no longer pending; a refusal cancels each by
a guarded write that leaves a finished job as it is. Anything else (a rescan, a later attempt,
API jobs, a preset's priorities) reads the file's jobs first (JobStore.jobs_of), as they may be
scheduled, or cancelled by an earlier refusal and now to be given back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from filejobs.domain import keys, transitions
from filejobs.domain.file import StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.quotas import names_another_job
from filejobs.domain.scanning import (
    GATED_JOB_TYPES,
    SCANNER,
    Gate,
    GateReview,
    UnscannablePolicy,
    gate,
    refusal_reason,
)
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs.ports import Dispatcher, FileStore, JobStore


def scan_job_id(stored: StoredFile) -> str:
    """The id of the virus scan job the ingest made for the file."""
    return keys.job_id_for(
        stored.tenant, keys.ingest_idempotency_key(stored.id, JobType.VIRUS_SCAN)
    )


def _verdict_time(stored: StoredFile | None) -> datetime | None:
    """When the file's verdict was given: its scan sent the waiting jobs right after."""
    if stored is None or stored.scan is None:
        return None
    return stored.scan.scanned_at


class ScanGate:
    def __init__(
        self,
        files: FileStore,
        jobs: JobStore,
        dispatcher: Dispatcher,
        *,
        retention: timedelta,
        unscannable: UnscannablePolicy = UnscannablePolicy.HOLD,
        dispatch_grace: timedelta = timedelta(minutes=2),
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._files, self._jobs, self._dispatcher = files, jobs, dispatcher
        self._retention, self._clock = retention, clock
        self._unscannable, self._dispatch_grace = unscannable, dispatch_grace

    def decide(self, message: JobMessage) -> tuple[Gate, StoredFile | None]:
        """Whether the message's job may run now; the file it was decided on."""
        if message.job_type not in GATED_JOB_TYPES:
            return Gate.RUN, None
        file_id = message.file_id
        if file_id is None:  # a message from before file ids travelled with it
            job = self._jobs.get(message.job_id, consistent=False)
            file_id = None if job is None else job.file_id
        stored = None if file_id is None else self._files.get(file_id)
        decision, _ = self._decision(message.job_type, stored)
        return decision, stored

    def review(self, job: ProcessingJob) -> GateReview:
        """For the sweep, of a gated job it found waiting: whether it waits for a verdict still
        to come (not to be sent: its worker could only skip it), may run, or is refused (and
        then cancelled here, as its worker would have)."""
        if job.job_type not in GATED_JOB_TYPES:
            return GateReview(Gate.RUN)
        stored = self._files.get(job.file_id)
        decision, scan = self._decision(job.job_type, stored)
        if decision is Gate.WAIT:
            return GateReview(Gate.WAIT, wait_until=None if scan is None else scan.sweep_at)
        if decision is Gate.REFUSE:
            self.refuse(JobMessage.for_job(job), stored)
            return GateReview(Gate.REFUSE)
        return GateReview(Gate.RUN, released_at=_verdict_time(stored))

    def _decision(
        self, job_type: JobType, stored: StoredFile | None
    ) -> tuple[Gate, ProcessingJob | None]:
        """The gate's decision on the file, and the scan job read to make it (if one was)."""
        decision = gate(job_type, stored, unscannable=self._unscannable)
        if decision is not Gate.WAIT or stored is None:
            return decision, None
        # Waiting is only right while a verdict may still come: one read of the scan job.
        scan = self._jobs.get(scan_job_id(stored), consistent=False)
        status = None if scan is None else scan.status
        return gate(job_type, stored, status, unscannable=self._unscannable), scan

    def names_its_file(self, message: JobMessage) -> bool:
        """Whether the message's file is its job's: a refusal cancels the job, so it must be
        decided on the job's own file, never on one a forged or stale message names."""
        if message.file_id is None:
            return True  # `decide` read the job's own file
        job = self._jobs.get(message.job_id, consistent=False)
        return job is not None and job.file_id == message.file_id

    def file(self, file_id: str) -> StoredFile | None:
        return self._files.get(file_id)

    def refuse(self, message: JobMessage, stored: StoredFile | None) -> ProcessingJob | None:
        """Cancel a job whose file will never be clean; the job as it is afterwards."""
        cancel = transitions.cancel(
            now=self._clock(), by=SCANNER, reason=refusal_reason(stored), retention=self._retention
        )
        result = self._jobs.apply(message.job_id, message.job_type, cancel)
        return result.job if isinstance(result, Applied) else result.current

    def settle(
        self, file_id: str, stored: StoredFile | None, scan: ProcessingJob | None = None
    ) -> int:
        """After a verdict (or its absence) on the file, given by `scan` when it is known: the
        file's gated jobs sent, given back or cancelled. How many were sent."""
        if stored is None:
            return 0  # an erased file: its jobs went with it
        blind = _blind_release(stored, scan)
        if blind is not None:
            return self._settle_blind(stored, blind)
        jobs = [job for job in self._jobs.jobs_of(stored) if job.job_type in GATED_JOB_TYPES]
        return sum(self._settle(job, stored) for job in jobs)

    def scan_ended(self, scan: ProcessingJob) -> None:
        """The scan job ended for good (failed, cancelled): gated jobs of a file left with no
        verdict are cancelled now; those of a file with one were settled by it already."""
        self.settle(scan.file_id, self._files.get(scan.file_id), scan)

    def _settle_blind(self, stored: StoredFile, held: list[ProcessingJob]) -> int:
        """The gated ingest jobs, known without a read (`_blind_release`): sent on a verdict that
        lets them run, else cancelled (a guarded write: a finished job is left as it is)."""
        if any(self._decision_after_scan(job, stored) is not Gate.RUN for job in held):
            for job in held:
                self.refuse(JobMessage.for_job(job), stored)
            return 0
        for job in held:
            self._dispatcher.dispatch(job)
        return len(held)

    def _decision_after_scan(self, job: ProcessingJob, stored: StoredFile | None) -> Gate:
        # No verdict is coming after this (it came, or the scan ended): a file without one is
        # refused, never left waiting.
        return gate(job.job_type, stored, JobStatus.FAILED, unscannable=self._unscannable)

    def _settle(self, job: ProcessingJob, stored: StoredFile | None) -> int:
        """One gated job as read from the store: 1 when its message was sent."""
        if self._decision_after_scan(job, stored) is not Gate.RUN:
            if not job.status.is_terminal:
                self.refuse(JobMessage.for_job(job), stored)
            return 0
        if job.status is JobStatus.PENDING or self._due(job):
            # A scheduled job already due (a delayed job whose message came before the verdict,
            # and was skipped) is sent now too: its claim takes it, as it is due.
            self._dispatcher.dispatch(job)
            return 1
        if job.status is JobStatus.CANCELLED and job.cancelled_by == SCANNER:
            return self._give_back(job)
        return 0

    def _due(self, job: ProcessingJob) -> bool:
        return (
            job.status is JobStatus.SCHEDULED
            and job.scheduled_at is not None
            and job.scheduled_at <= self._clock()
        )

    def _give_back(self, job: ProcessingJob) -> int:
        """A job the scan cancelled for want of a verdict, pending again now that one allows
        it (its file was rescanned after the definitions came back, say)."""
        retry = transitions.retry(
            now=self._clock(), by=SCANNER, dispatch_grace=self._dispatch_grace
        )
        result = self._jobs.apply(job.id, job.job_type, retry)
        if not isinstance(result, Applied):
            return 0
        self._dispatcher.dispatch(result.job)
        return 1


def _blind_release(stored: StoredFile, scan: ProcessingJob | None) -> list[ProcessingJob] | None:
    """The file's gated jobs, without a read, when nothing but `scan` can have decided about them
    yet; None otherwise (they are read).

    - `scan` is the file's ingest scan, on its first attempt: no earlier attempt's verdict
      refused them, and the scan never ended without a verdict (a retry keeps the attempt
      count), so no refusal cancelled them for want of one;
    - the file names no job but the ingest's, and could name another (none went unnamed): no
      rescan's verdict came first, no API job is among them, and no restore made them again;
    - no preset chose the jobs: each ingest job of the file then has the scan's priority (the
      default table's, or a backfill's), so its message goes to the lane the job's would.

    Each is then as the ingest made it, pending (ingest jobs are never delayed), or cancelled by
    its owner since: then its message is acknowledged unread by the worker's claim.
    """
    if scan is None or scan.attempt != 1 or stored.preset is not None:
        return None
    if scan.id != scan_job_id(stored) or scan.id not in stored.job_ids:
        return None  # another scan's verdict, or a file from before files named their jobs
    ingest = keys.ingest_job_types(stored.tenant, stored.id)
    if not stored.job_ids <= ingest.keys() or not names_another_job(stored):
        return None
    gated = sorted(
        (ingest[job_id].value, job_id)
        for job_id in stored.job_ids
        if ingest[job_id] in GATED_JOB_TYPES
    )
    return [_sibling(scan, job_id, JobType(job_type)) for job_type, job_id in gated]


def _sibling(scan: ProcessingJob, job_id: str, job_type: JobType) -> ProcessingJob:
    """What the message of one of the scan's sibling ingest jobs needs (its id, type, file,
    tenant and priority, which is the scan's): the scan job's, renamed; never stored."""
    return replace(scan, id=job_id, job_type=job_type, status=JobStatus.PENDING)
