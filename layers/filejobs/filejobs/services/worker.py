"""The worker use case: run one job message to a recorded outcome.

a slot of the job's tenant (its cap, domain/fairness.py) -> claim (one conditional write,
returns the job) -> process in a scratch directory of its own while a lease keeper heartbeats
-> complete, or fail (scheduled for a retry with backoff, or failed for good) -> the slot given
back. A message for a job that is taken, finished or cancelled is acknowledged without work: SQS
redelivers, and the claim's condition is what makes that harmless. A job whose tenant has no
free slot is deferred: left pending with its attempts unspent, its message sent again to come
back after a short delay.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from filejobs.domain import fairness, transitions
from filejobs.domain.attempt_notes import AttemptNotes, AttemptRecorder
from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.domain.retry import (
    DispatchPolicy,
    ErrorKind,
    ObjectGoneError,
    PermanentError,
    RetryPolicy,
)
from filejobs.domain.scanning import Gate, refusal_reason
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied, Lost
from filejobs.ports import Dispatcher, JobStore, TenantSlots, Workspaces
from filejobs.processors.base import OutputWriter, Processor, StopRequested, Work
from filejobs.services.sweep import dispatch_retry_if_soon

if TYPE_CHECKING:
    from filejobs.services.scan_gate import ScanGate

logger = logging.getLogger(__name__)

# How soon a cancel reaches a running attempt: between heartbeats (a third of the lease) the
# lease keeper reads the job this often, eventually consistent (half a read unit, $0.0625 a
# million). An attempt shorter than this reads nothing.
CANCEL_LOOK_EVERY = timedelta(seconds=5)


class Disposition(StrEnum):
    """What became of one job message (the job's own record of an attempt is its AttemptOutcome)."""

    COMPLETED = "completed"
    RETRYING = "retrying"
    FAILED = "failed"
    SKIPPED = "skipped"  # claim lost: someone else has it, or it is over
    ABANDONED = "abandoned"  # cancelled or taken over while running: result discarded
    DEFERRED = "deferred"  # its tenant at its cap: sent again for later, no attempt spent


@dataclass(frozen=True)
class WorkResult:
    disposition: Disposition
    job: ProcessingJob | None
    detail: str = ""


@dataclass(frozen=True)
class RunningCap:
    """The tenants' cap and where its slots are kept; `deadline` says when the invocation at
    work must end (a slot taken now lapses then: a crashed worker's slot is not held forever)."""

    slots: TenantSlots
    cap: fairness.TenantCap  # the default (TenantMaxRunningJobs)
    deadline: Callable[[], datetime]
    dispatch: DispatchPolicy = DispatchPolicy()  # noqa: RUF009 (frozen dataclass: immutable)
    delay: Callable[[], timedelta] = fairness.deferral_delay
    # The tenant's own cap, where an operator set one (its max_in_flight_jobs quota), else None.
    own_cap: Callable[[str], int | None] = lambda _tenant: None

    def cap_for(self, tenant: str) -> fairness.TenantCap:
        own = self.own_cap(tenant)
        return self.cap if own is None else fairness.TenantCap(own)


class WorkerService:
    def __init__(
        self,
        jobs: JobStore,
        dispatcher: Dispatcher,
        processor: Processor,
        job_type: JobType,
        *,
        lease: timedelta,
        retention: timedelta,
        worker_id: str,
        outputs: Callable[[ProcessingJob], OutputWriter] | None = None,
        scratch: Workspaces,
        gate: ScanGate | None = None,
        retry_policy: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen dataclass: immutable)
        clock: Callable[[], datetime] = utcnow,
        cancel_look_every: timedelta = CANCEL_LOOK_EVERY,
        limits: RunningCap | None = None,
    ) -> None:
        self._jobs = jobs
        self._dispatcher = dispatcher
        self._processor = processor
        self._job_type = job_type
        self._lease = lease
        self._retention = retention
        self._worker = worker_id
        self._outputs = outputs or _NoOutputs
        self._scratch = scratch
        self._gate = gate
        self._retry = retry_policy
        self._clock = clock
        self._look_every = cancel_look_every
        self._limits = limits

    def handle(self, message: JobMessage) -> WorkResult:
        if message.job_type is not self._job_type:
            return WorkResult(Disposition.SKIPPED, None, "wrong_type")
        held, decided = self._check_scan(message)
        if held is not None:
            return held
        limits, tenant = self._limits, message.tenant
        # No slots table, or a message sent before messages named their tenant: no cap.
        cap = None if limits is None or tenant is None else limits.cap_for(tenant)
        if limits is None or tenant is None or cap is None or not cap.enforced:
            return self._claim_and_run(message, decided)
        if not self._take_slot(limits, cap, tenant, message.job_id):
            return self._defer(limits, cap, message)
        try:
            return self._claim_and_run(message, decided)
        finally:
            self._give_back_slot(limits, tenant, message.job_id)

    def _claim_and_run(self, message: JobMessage, decided: StoredFile | None) -> WorkResult:
        claim = transitions.claim(now=self._clock(), lease=self._lease, worker=self._worker)
        # The worker's own type, not the message's, derives the index keys it writes.
        claimed = self._jobs.apply(message.job_id, self._job_type, claim)
        if isinstance(claimed, Lost):
            return self._skipped(claimed)
        job = claimed.job
        if decided is not None and job.file_id != decided.id:
            # The message named another file than its job's: never parse an unchecked file.
            return self._fail(job, PermanentError("the job message names another file"))
        if message.tenant is not None and job.tenant != message.tenant:
            # Its slot was counted against another tenant: a forged or mangled message.
            return self._fail(job, PermanentError("the job message names another tenant"))
        return self._run(job)

    # --- the tenant's cap ----------------------------------------------------------------------

    def _take_slot(
        self, limits: RunningCap, cap: fairness.TenantCap, tenant: str, job_id: str
    ) -> bool:
        """Whether the job now holds one of its tenant's slots for this job type."""
        return limits.slots.take(
            tenant,
            self._job_type,
            job_id,
            cap=cap.max_running,
            until=fairness.slot_until(limits.deadline()),
            now=self._clock(),
        )

    def _give_back_slot(self, limits: RunningCap, tenant: str, job_id: str) -> None:
        try:
            limits.slots.give_back(tenant, self._job_type, job_id)
        except Exception:  # the slot lapses at its invocation's deadline anyway
            logger.exception("giving back the slot of job %s failed", job_id)

    def _defer(
        self, limits: RunningCap, cap: fairness.TenantCap, message: JobMessage
    ) -> WorkResult:
        """Leaves the job pending, unclaimed, and sends its message again for later."""
        now = self._clock()
        wait = limits.delay()
        deferral = transitions.defer(
            now=now,
            until=now + wait,
            dispatch_grace=limits.dispatch.grace,
            job_type=self._job_type,
            worker=self._worker,
        )
        deferred = self._jobs.apply(message.job_id, self._job_type, deferral)
        if isinstance(deferred, Lost):
            return self._skipped(deferred)
        self._dispatcher.dispatch(deferred.job, wait)
        running = cap.max_running
        detail = f"tenant {message.tenant} has {running} {self._job_type.value} jobs running"
        return WorkResult(Disposition.DEFERRED, deferred.job, detail)

    def _skipped(self, lost: Lost) -> WorkResult:
        """A message whose job could not be taken (claimed or deferred) is acknowledged. One
        that came before its job's time (a copy of a delayed job's or a retry's message) is
        sent again for that time first: never run early, never lost; a time further off than
        SQS can delay a message is the sweep's to start."""
        if lost.conflict is transitions.Conflict.NOT_DUE and lost.current is not None:
            dispatch_retry_if_soon(self._dispatcher, lost.current, self._clock())
        return WorkResult(Disposition.SKIPPED, lost.current, str(lost.conflict))

    def _run(self, job: ProcessingJob) -> WorkResult:
        """The claimed job's attempt: its processor under a kept lease, in a fresh workspace."""
        notes = AttemptRecorder()
        keeper = LeaseKeeper(
            self._jobs,
            job,
            self._lease,
            self._worker,
            self._clock,
            look_every=self._look_every,
            notes=notes.snapshot,
        )
        with keeper, self._scratch.for_job(job.id) as workspace:
            work = Work(job, keeper.should_stop, workspace, self._outputs(job), notes)
            try:
                result = self._processor(work)
            except StopRequested:
                return WorkResult(Disposition.ABANDONED, job, keeper.reason)
            except Exception as error:  # every failure is recorded on the job
                withdrawn = self._cancel_if_file_withdrawn(job, error)
                return withdrawn or self._fail(job, error, notes.snapshot())
        return self._complete(job, result, notes.snapshot())

    def _cancel_if_file_withdrawn(self, job: ProcessingJob, error: Exception) -> WorkResult | None:
        """A job that finds its object gone because the file was quarantined (or deleted) while
        it ran, as a deduplication check beside the scan that quarantines an infected file can,
        is cancelled with that reason, not failed with S3's NoSuchKey."""
        if self._gate is None or not isinstance(error, ObjectGoneError):
            return None
        stored = self._gate.file(job.file_id)
        if stored is not None and stored.status is FileStatus.ACTIVE:
            return None
        cancelled = self._gate.refuse(JobMessage.for_job(job), stored)
        return WorkResult(Disposition.SKIPPED, cancelled, f"cancelled: {refusal_reason(stored)}")

    def _check_scan(self, message: JobMessage) -> tuple[WorkResult | None, StoredFile | None]:
        """Scan before parse: a result when the job may not run now, and the file checked."""
        if self._gate is None:
            return None, None
        decision, decided = self._gate.decide(message)
        if decision is Gate.WAIT:
            # Left pending: the scan's worker sends it again on a clean verdict.
            return WorkResult(Disposition.SKIPPED, None, "waiting for the virus scan"), decided
        if decision is Gate.REFUSE:
            if not self._gate.names_its_file(message):
                return WorkResult(Disposition.SKIPPED, None, "the message names another file"), None
            refused = self._gate.refuse(message, decided)
            detail = f"cancelled: {refusal_reason(decided)}"
            return WorkResult(Disposition.SKIPPED, refused, detail), decided
        return None, decided

    def _complete(
        self, job: ProcessingJob, result: dict[str, Any], notes: AttemptNotes
    ) -> WorkResult:
        done = transitions.complete(
            job,
            result=result,
            now=self._clock(),
            retention=self._retention,
            worker=self._worker,
            notes=notes,
        )
        written = self._jobs.apply(job.id, job.job_type, done)
        if isinstance(written, Lost):
            return WorkResult(Disposition.ABANDONED, written.current, str(written.conflict))
        return WorkResult(Disposition.COMPLETED, written.job)

    def _fail(
        self, job: ProcessingJob, error: Exception, notes: AttemptNotes | None = None
    ) -> WorkResult:
        now = self._clock()
        if self._retry.classify(error) is ErrorKind.TRANSIENT:
            logger.warning("job %s attempt %s failed: %s", job.id, job.attempt, error)
        retry_at = self._retry.retry_at(job, error, now)
        failure = transitions.fail(
            job,
            error=_describe(error),
            now=now,
            retry_at=retry_at,
            retention=self._retention,
            worker=self._worker,
            notes=notes,
        )
        written = self._jobs.apply(job.id, job.job_type, failure)
        if isinstance(written, Lost):
            return WorkResult(Disposition.ABANDONED, written.current, str(written.conflict))
        stored = written.job
        if stored.status is JobStatus.SCHEDULED:
            # A short retry does not wait for the sweep; the sweep is the safety net.
            dispatch_retry_if_soon(self._dispatcher, stored, now)
            return WorkResult(Disposition.RETRYING, stored, stored.error_message or "")
        if stored.job_type is JobType.VIRUS_SCAN and self._gate is not None:
            self._gate.scan_ended(stored)  # no verdict will come for the jobs that wait on one
        return WorkResult(Disposition.FAILED, stored, stored.error_message or "")


class LeaseKeeper:
    """Heartbeats a running job from a background thread, every third of its lease, and looks
    at it every `look_every` in between.

    If a heartbeat loses, or a look finds that it would (the job was cancelled, or the sweep
    gave it to another worker), `should_stop()` turns true so the processor can stop early; its
    result would be refused anyway by the completion's condition. A look is an eventually
    consistent read, judged by the heartbeat's own guard; a read older than the claim (an
    earlier attempt) says nothing and is ignored.

    Each heartbeat carries the attempt's `notes()` (its progress and log so far) in the same
    write: progress costs no write of its own, and shows within a beat (a third of the lease).
    """

    def __init__(
        self,
        jobs: JobStore,
        job: ProcessingJob,
        lease: timedelta,
        worker: str,
        clock: Callable[[], datetime],
        *,
        look_every: timedelta = CANCEL_LOOK_EVERY,
        notes: Callable[[], AttemptNotes] | None = None,
    ) -> None:
        self._jobs, self._job, self._lease = jobs, job, lease
        self._notes = notes
        self._worker, self._clock = worker, clock
        self._beat_every = max(lease.total_seconds() / 3, 0.05)
        self._look_every = min(max(look_every.total_seconds(), 0.05), self._beat_every)
        self._done = threading.Event()
        self._stop = threading.Event()
        self.reason = ""
        self._thread = threading.Thread(target=self._run, name=f"lease-{job.id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self._done.wait(self._look_every):
            # A beat is due when the next look would come after it.
            if time.monotonic() + self._look_every - last_beat > self._beat_every:
                last_beat = time.monotonic()
                refused = self._beat()
            else:
                refused = self._look()
            if refused is not None:
                self.reason = str(refused)
                self._stop.set()
                return

    def _heartbeat(self) -> transitions.Transition:
        return transitions.heartbeat(
            self._job,
            now=self._clock(),
            lease=self._lease,
            worker=self._worker,
            notes=None if self._notes is None else self._notes(),
        )

    def _beat(self) -> transitions.Conflict | None:
        try:
            result = self._jobs.apply(self._job.id, self._job.job_type, self._heartbeat())
        except Exception:  # a missed beat is retried: the lease has slack
            logger.exception("heartbeat of job %s failed", self._job.id)
            return None
        return None if isinstance(result, Applied) else result.conflict

    def _look(self) -> transitions.Conflict | None:
        try:
            current = self._jobs.get(self._job.id, consistent=False)
        except Exception:  # the next look or beat tells
            logger.exception("looking at job %s failed", self._job.id)
            return None
        if current is None:
            return transitions.Conflict.NOT_FOUND
        if current.attempt < self._job.attempt:
            return None  # a replica from before the claim
        return self._heartbeat().guard.refusal(current)


class _NoOutputs:
    """The writer of a worker given no outputs bucket: a processor that writes fails clearly."""

    def __init__(self, job: ProcessingJob) -> None:
        self._job = job

    def put_bytes(self, name: str, data: bytes, content_type: str) -> str:
        raise PermanentError("this worker has no outputs bucket (OUTPUTS_BUCKET is not set)")

    def put_file(self, name: str, path: object, content_type: str) -> str:
        raise PermanentError("this worker has no outputs bucket (OUTPUTS_BUCKET is not set)")

    def put_stream(self, name: str, chunks: object, content_type: str) -> str:
        raise PermanentError("this worker has no outputs bucket (OUTPUTS_BUCKET is not set)")


def _describe(error: Exception) -> str:
    kind = type(error).__name__
    text = str(error).strip()
    return f"{kind}: {text}" if text else kind
