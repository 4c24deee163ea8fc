"""Scan before parse, as a use case: hold gated jobs until the file's virus scan is clean.

`decide` runs before a gated job's claim (one GetItem of the file). `ScanRecording` wraps the
virus scan's processor: before the scan job completes, it records the verdict on the file (one
conditional write), then sends the file's waiting jobs on a clean verdict, or quarantines the
file and cancels them on an infected one. A scan that fails for good (PermanentError: a zip bomb,
a limit) marks the file unscannable and cancels them with the scan's reason, rather than leaving
them pending until the sweep gives up on them. A scan job that ends with no verdict (its retries
spent, or cancelled) has them cancelled too: at once when its own worker fails it (`scan_ended`),
else at their next delivery (`decide` looks at the scan job of a file still waiting), which the
sweep's re-sending of pending jobs guarantees. A worker that dies in between leaves the scan job
to be retried, and every step is idempotent, so the follow-up is never lost.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import keys, transitions
from filejobs.domain.file import ScanStatus, StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.outcome import Applied
from filejobs.domain.retry import PermanentError
from filejobs.domain.scanning import GATED_JOB_TYPES, SCANNER, Gate, gate, refusal_reason
from filejobs.domain.time import utcnow
from filejobs.processors.base import Processor, Work
from filejobs.services.sweep import Dispatcher

INFECTED = "INFECTED"  # processors/scan: Verdict.INFECTED


def scan_job_id(stored: StoredFile) -> str:
    """The id of the virus scan job the ingest made for the file."""
    return keys.job_id_for(
        stored.tenant, keys.ingest_idempotency_key(stored.id, JobType.VIRUS_SCAN)
    )


class ScanGate:
    def __init__(
        self,
        files: FileRepository,
        jobs: JobRepository,
        dispatcher: Dispatcher,
        *,
        retention: timedelta,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._files, self._jobs, self._dispatcher = files, jobs, dispatcher
        self._retention, self._clock = retention, clock

    def decide(self, message: JobMessage) -> tuple[Gate, StoredFile | None]:
        """Whether the message's job may run now; the file it was decided on."""
        if message.job_type not in GATED_JOB_TYPES:
            return Gate.RUN, None
        file_id = message.file_id
        if file_id is None:  # a message from before file ids travelled with it
            job = self._jobs.get(message.job_id, consistent=False)
            file_id = None if job is None else job.file_id
        stored = None if file_id is None else self._files.get(file_id)
        decision = gate(message.job_type, stored)
        if decision is Gate.WAIT and stored is not None:
            # Waiting is only right while a verdict may still come: one read of the scan job.
            scan = self._jobs.get(scan_job_id(stored), consistent=False)
            decision = gate(message.job_type, stored, None if scan is None else scan.status)
        return decision, stored

    def names_its_file(self, message: JobMessage) -> bool:
        """Whether the message's file is its job's: a refusal cancels the job, so it must be
        decided on the job's own file, never on one a forged or stale message names."""
        if message.file_id is None:
            return True  # `decide` read the job's own file
        job = self._jobs.get(message.job_id, consistent=False)
        return job is not None and job.file_id == message.file_id

    def file(self, file_id: str) -> StoredFile | None:
        return self._files.get(file_id)

    def refuse(
        self, message: JobMessage, stored: StoredFile | None, detail: str | None = None
    ) -> ProcessingJob | None:
        """Cancel a job whose file will never be clean; the job as it is afterwards."""
        reason = refusal_reason(stored) + (f": {detail}" if detail else "")
        cancel = transitions.cancel(
            now=self._clock(), by=SCANNER, reason=reason, retention=self._retention
        )
        result = self._jobs.apply(message.job_id, message.job_type, cancel)
        return result.job if isinstance(result, Applied) else result.current

    def record_verdict(self, scan: ProcessingJob, infected: bool, reason: str) -> None:
        """The scan's verdict on its file, then the file's gated jobs released or cancelled."""
        now = self._clock()
        verdict = ScanStatus.INFECTED if infected else ScanStatus.CLEAN
        stored = self._files.record_scan(scan.file_id, verdict, at=now, by=SCANNER)
        if stored is not None and stored.scan_status is ScanStatus.INFECTED:
            stored = self._files.quarantine(scan.file_id, reason=reason, at=now, by=SCANNER)
        self._settle_gated_jobs(scan.file_id, stored)

    def record_unscannable(self, scan: ProcessingJob, reason: str) -> None:
        """The scan failed for good: the file's gated jobs are cancelled with its reason."""
        now = self._clock()
        stored = self._files.record_scan(scan.file_id, ScanStatus.UNSCANNABLE, at=now, by=SCANNER)
        self._settle_gated_jobs(scan.file_id, stored, detail=reason)

    def scan_ended(self, scan: ProcessingJob) -> None:
        """The scan job ended for good (failed, cancelled): gated jobs of a file left with no
        verdict are cancelled now; those of a file with one were settled by it already."""
        self._settle_gated_jobs(scan.file_id, self._files.get(scan.file_id))

    def _settle_gated_jobs(
        self, file_id: str, stored: StoredFile | None, detail: str | None = None
    ) -> None:
        for job in self._jobs.jobs_of_file(file_id):
            if job.job_type not in GATED_JOB_TYPES or job.status.is_terminal:
                continue
            if stored is None or stored.scan_status is not ScanStatus.CLEAN:
                # The detail explains an unscannable file; an infected one's is on the file.
                unscannable = stored is not None and stored.scan_status is ScanStatus.UNSCANNABLE
                self.refuse(JobMessage.for_job(job), stored, detail if unscannable else None)
            elif job.status is JobStatus.PENDING:
                self._dispatcher.dispatch(job)


class ScanRecording:
    """The virus scan's processor, followed by the verdict's consequences for the file."""

    def __init__(self, scan: Processor, gate: ScanGate) -> None:
        self._scan = scan
        self._gate = gate

    def __call__(self, work: Work) -> dict[str, Any]:
        try:
            result = self._scan(work)
        except PermanentError as error:
            # The job fails for good with this error (the worker records it); its file's
            # parsing jobs must not wait for a verdict that will never come.
            self._gate.record_unscannable(work.job, str(error))
            raise
        infected = result.get("verdict") == INFECTED
        signatures = result.get("signatures") or []
        reason = ", ".join(str(s) for s in signatures) or "infected"
        self._gate.record_verdict(work.job, infected, reason)
        return result
