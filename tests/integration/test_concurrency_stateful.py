"""Hypothesis stateful test: workers, sweeps, cancels, retries, lease expiries and duplicate
deliveries interleave against real conditional writes (moto). After every step, every job
satisfies every invariant, and no job was ever completed twice.

"Completed twice" is counted from an append-only witness of the completion writes that
DynamoDB accepted, not from the final status, so a double completion cannot hide.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, event, settings, target
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from moto import mock_aws

from filejobs.data import index_keys
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.mapping import job_from_model
from filejobs.data.models import JobModel, bind_tables
from filejobs.domain import transitions
from filejobs.domain.ingest import plan_ingest
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.retry import DispatchPolicy, RetryPolicy
from filejobs.domain.transition_result import Applied, Lost
from filejobs.ports import Ingested
from filejobs.services.sweep import SweepService
from filejobs_dev.infra.template import create_tables, load_template
from tests.conftest import FakeClock
from tests.factories import upload_record

# A hypothesis state machine over moto: about 40 s here.
pytestmark = pytest.mark.slow

LEASE = timedelta(minutes=2)
KEEP = timedelta(days=1)
RETRY = RetryPolicy(base=timedelta(seconds=5), cap=timedelta(minutes=1))
# Giving up on unclaimed jobs has its own test; here it would end most runs early.
DISPATCH = DispatchPolicy(grace=timedelta(minutes=1), cap=timedelta(minutes=4), max_dispatches=50)
WORKERS = ("worker-a", "worker-b")
# Fewer index shards keep each sweep cheap on moto; the logic does not depend on the count.
FEWER_SHARDS = {"SWEEP_SHARDS": 4, "STATUS_SHARDS": 2, "TENANT_SHARDS": 2}
# Two uploads of two jobs each (scan, dedupe), each delivered any number of times: few jobs, so
# workers, sweeps and users collide on the same job often.
UPLOADS = (("a.bin", "application/x-empty"), ("b.bin", "application/x-empty"))
# Time moves in steps that matter: within a lease, just past a lease, past a backoff, long idle.
STEPS = tuple(timedelta(seconds=s) for s in (1, 10, 30, LEASE.seconds - 1, LEASE.seconds + 1, 400))
TEMPLATE = load_template()


class NullDispatcher:
    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        """Messages are implicit: any worker may claim any job at any step."""


def _outcome(result: Applied | Lost) -> str:
    return "applied" if isinstance(result, Applied) else f"lost ({result.conflict})"


class JobLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.shard_counts = {name: getattr(index_keys, name) for name in FEWER_SHARDS}
        for name, count in FEWER_SHARDS.items():
            setattr(index_keys, name, count)
        self.aws = mock_aws()
        self.aws.start()
        # One client for the example: a client made per step costs more than the step.
        self.dynamodb = boto3.client("dynamodb")
        create_tables(self.dynamodb, {"JobsTable": "jobs", "FilesTable": "files"}, TEMPLATE)
        bind_tables(jobs_table="jobs", files_table="files")
        self.clock = FakeClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
        self.repo = JobRepository()
        self.files = FileRepository()
        self.sweep = SweepService(
            self.repo,
            NullDispatcher(),
            clock=self.clock,
            retry_policy=RETRY,
            dispatch_policy=DISPATCH,
            retention=KEEP,
        )
        self.ingested: set[str] = set()
        self.job_types: dict[str, JobType] = {}
        self.held: dict[str, ProcessingJob] = {}  # worker -> its view of the job it runs
        self.paused: dict[str, ProcessingJob] = {}  # workers frozen mid-job (GC pause, partition)
        self.completions: Counter[str] = Counter()  # append-only witness of accepted completions
        self.results: dict[str, dict[str, Any]] = {}
        self.highest_attempt: Counter[str] = Counter()
        self.seen_status: dict[str, JobStatus] = {}
        self.reopened: set[str] = set()  # jobs a user retry reopened since the last check
        self.danger = 0

    def teardown(self) -> None:
        # Steer the search toward the dangerous state: a paused worker whose job another
        # worker now runs under a newer attempt (its wake-up write must then lose).
        target(float(self.danger), label="paused behind a newer attempt")
        self.aws.stop()
        for name, count in self.shard_counts.items():
            setattr(index_keys, name, count)

    def _job(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.job_types)))

    # --- S3 deliveries -----------------------------------------------------------------------

    @initialize()
    def first_delivery(self) -> None:
        self.deliver_upload(UPLOADS[0])

    @rule(upload=st.sampled_from(UPLOADS))
    def deliver_upload(self, upload: tuple[str, str]) -> None:
        name, content_type = upload
        plan = plan_ingest(upload_record(name), content_type, now=self.clock.now)
        result = self.files.record_ingest(plan)
        if isinstance(result, Ingested):
            assert plan.file.id not in self.ingested, "a duplicate delivery created a second file"
            self.ingested.add(plan.file.id)
            self.job_types.update({j.id: j.job_type for j in plan.jobs})
        else:
            assert plan.file.id in self.ingested

    # --- workers (each SQS delivery of a job's message may reach any worker, repeatedly) ------

    @rule(data=st.data())
    def workers_poll(self, data: st.DataObject) -> None:
        """Every idle worker receives a message for some job (stale, duplicate or fresh)."""
        for worker in WORKERS:
            if worker in self.held or worker in self.paused:
                continue  # a worker runs one job at a time
            self._claim(worker, self._job(data))

    def _claim(self, worker: str, job_id: str) -> None:
        job_type = self.job_types[job_id]
        claim = transitions.claim(now=self.clock.now, lease=LEASE, worker=worker, job_type=job_type)
        result = self.repo.apply(job_id, job_type, claim)
        event(f"claim: {_outcome(result)}")
        if isinstance(result, Applied):
            self.held[worker] = result.job

    def _busy_worker(self, data: st.DataObject) -> str:
        worker: str = data.draw(st.sampled_from(sorted(self.held)))
        return worker

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        self._complete(self._busy_worker(data))

    def _complete(self, worker: str) -> None:
        view = self.held.pop(worker)
        result_data = {"worker": worker, "attempt": view.attempt}
        done = transitions.complete(
            view, result=result_data, now=self.clock.now, retention=KEEP, worker=worker
        )
        result = self.repo.apply(view.id, view.job_type, done)
        event(f"complete: {_outcome(result)}")
        if isinstance(result, Applied):
            self.completions[view.id] += 1
            self.results[view.id] = result_data

    @precondition(lambda self: self.held)
    @rule(data=st.data(), permanent=st.booleans())
    def fail(self, data: st.DataObject, permanent: bool) -> None:
        self._fail(self._busy_worker(data), permanent=permanent)

    def _fail(self, worker: str, *, permanent: bool) -> None:
        view = self.held.pop(worker)
        retry_at = None if permanent else self.clock.now + RETRY.delay(view.retry_count + 1)
        failure = transitions.fail(
            view, error="boom", now=self.clock.now, retry_at=retry_at, retention=KEEP
        )
        event(f"fail: {_outcome(self.repo.apply(view.id, view.job_type, failure))}")

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        worker = self._busy_worker(data)
        view = self.held[worker]
        beat = transitions.heartbeat(view, now=self.clock.now, lease=LEASE, worker=worker)
        result = self.repo.apply(view.id, view.job_type, beat)
        if isinstance(result, Applied):
            self.held[worker] = result.job
        else:
            del self.held[worker]  # cancelled or taken over: the worker stops cooperatively

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def worker_pauses(self, data: st.DataObject) -> None:
        """The worker freezes mid-job; its lease may expire and the job move on without it."""
        worker = self._busy_worker(data)
        self.paused[worker] = self.held.pop(worker)

    def _overslept(self) -> list[str]:
        return sorted(
            worker
            for worker, view in self.paused.items()
            if view.lease_expires_at is not None and view.lease_expires_at < self.clock.now
        )

    @precondition(lambda self: self._overslept())
    @rule(data=st.data(), succeeded=st.booleans())
    def paused_worker_resumes(self, data: st.DataObject, succeeded: bool) -> None:
        """It wakes after its lease expired, unaware, and reports its outcome with its old view.

        (A shorter pause is just a slow job: `complete` and `fail` cover it.)
        """
        worker: str = data.draw(st.sampled_from(self._overslept()))
        self.held[worker] = self.paused.pop(worker)
        if succeeded:
            self._complete(worker)
        else:
            self._fail(worker, permanent=False)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """The worker dies mid-job and writes nothing; only its lease can tell."""
        del self.held[self._busy_worker(data)]

    # --- time, the sweep, users ---------------------------------------------------------------

    @rule(step=st.sampled_from(STEPS))
    def time_passes(self, step: timedelta) -> None:
        """Time moves on, and the scheduled sweep runs as it does every minute."""
        self.clock.advance(step)
        report = self.sweep.run()
        for action in report.actions:
            event(f"sweep: {action}")

    @rule()
    def another_sweep_overlaps(self) -> None:
        self.sweep.run()

    @rule(data=st.data(), really=st.integers(0, 3))
    def user_cancels(self, data: st.DataObject, really: int) -> None:
        if really:
            return  # users cancel rarely; left at every step they would cancel everything
        job_id = self._job(data)
        cancel = transitions.cancel(now=self.clock.now, by="user", reason="stop", retention=KEEP)
        self.repo.apply(job_id, self.job_types[job_id], cancel)

    @rule(data=st.data(), really=st.integers(0, 1))
    def user_retries(self, data: st.DataObject, really: int) -> None:
        if really:
            return
        job_id = self._job(data)
        again = transitions.retry(now=self.clock.now, by="user", dispatch_grace=DISPATCH.grace)
        if isinstance(self.repo.apply(job_id, self.job_types[job_id], again), Applied):
            self.reopened.add(job_id)

    # --- what must hold after every step ------------------------------------------------------

    @invariant()
    def every_job_is_consistent_and_completed_at_most_once(self) -> None:
        # One consistent Scan per step (test-only): every job exactly once, none lost, none extra.
        stored = {m.id: job_from_model(m) for m in JobModel.scan(consistent_read=True)}
        assert set(stored) == set(self.job_types), "a job was lost or duplicated"
        for job_id, job in stored.items():
            self._check(job_id, job)
        self.reopened.clear()
        self.danger = max(self.danger, self._paused_behind_a_newer_attempt())

    def _check(self, job_id: str, job: ProcessingJob) -> None:
        assert job.invariant_violations() == [], (job_id, job.invariant_violations())
        assert job.attempt >= self.highest_attempt[job_id], "the fencing token went back"
        self.highest_attempt[job_id] = job.attempt
        before = self.seen_status.get(job_id)
        if before is not None and before.is_terminal and job_id not in self.reopened:
            assert job.status is before, f"{job_id} left {before} for {job.status}"
        self.seen_status[job_id] = job.status
        assert self.completions[job_id] <= 1, f"job {job_id} completed twice"
        if job.status is JobStatus.COMPLETED:
            assert self.completions[job_id] == 1
            assert job.result_data == self.results[job_id]
            # The fencing token: only the attempt that holds the job may write its outcome.
            assert job.result_data["attempt"] == job.attempt, "a stale worker's result won"
        else:
            assert self.completions[job_id] == 0, "a completed job left its terminal state"

    def _paused_behind_a_newer_attempt(self) -> int:
        running = {view.id: view.attempt for view in self.held.values()}
        return sum(1 for view in self.paused.values() if running.get(view.id, 0) > view.attempt)

    @invariant()
    def one_file_per_upload(self) -> None:
        files = self.dynamodb.scan(TableName="files", Select="COUNT")
        assert files["Count"] == len(self.ingested)


JobLifecycle.TestCase.settings = settings(
    max_examples=int(os.environ.get("STATEFUL_EXAMPLES", "30")),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJobsSurviveAnyInterleaving = JobLifecycle.TestCase
