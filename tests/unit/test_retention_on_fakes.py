"""Keep the last N finished jobs of a type per file (domain/retention.py, services/retention.py),
on the in-memory job store: which go, which stay, and what is never touched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from filejobs.domain import transitions
from filejobs.domain.ingest import new_job
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.retention import KeepLastSettingError, keep_last_setting, to_retire
from filejobs.domain.retry import DispatchPolicy
from filejobs.domain.time import epoch_seconds
from filejobs.services.retention import Retention
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
THUMBS = JobType.THUMBNAIL_GENERATION


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def test_the_setting_names_types_and_their_n() -> None:
    assert keep_last_setting("") == {}
    assert keep_last_setting(None) == {}
    assert keep_last_setting(" thumbnail_generation=3, video_thumbnail=1 ,compression=0") == {
        THUMBS: 3,
        JobType.VIDEO_THUMBNAIL: 1,
    }
    twice = "thumbnail_generation=1,thumbnail_generation=2"
    for bad in ("thumbnails=3", "thumbnail_generation", "thumbnail_generation=x", "x=-1", twice):
        with pytest.raises(KeepLastSettingError):
            keep_last_setting(bad)


class File:
    """One file's jobs in the store, made and finished at the clock's pace."""

    def __init__(self, store: InMemoryJobStore, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self.stored = ingest_plan(T0, "image/png").file
        self.files = InMemoryFileStore(store)
        self.files.put(self.stored)
        self.made = 0

    def job(self, job_type: JobType = THUMBS) -> ProcessingJob:
        self.made += 1
        job = new_job(
            self.stored,
            job_type,
            now=self.clock(),
            created_by="api",
            dispatch=DispatchPolicy(),
            idempotency_key=f"request-{self.made}",
        )
        assert self.store.create(job)
        return job

    def run(self, job: ProcessingJob) -> ProcessingJob:
        claim = transitions.claim(now=self.clock(), lease=LEASE, worker="w")
        return self.store.apply(job.id, job.job_type, claim).job  # type: ignore[union-attr]

    def finish(self, job: ProcessingJob, *, failed: bool = False) -> ProcessingJob:
        running = self.run(job)
        now = self.clock()
        end = (
            transitions.fail(running, error="bad", now=now, retry_at=None, retention=LEASE)
            if failed
            else transitions.complete(running, result={}, now=now, retention=LEASE)
        )
        return self.store.apply(job.id, job.job_type, end).job  # type: ignore[union-attr]


def test_n_plus_two_finished_jobs_of_a_type_on_a_file_keep_the_last_n() -> None:
    # Given a type that keeps its last 2 finished jobs per file, and on one file: 4 finished
    # thumbnail jobs (one failed), a running one, and finished jobs of another type
    store, clock = InMemoryJobStore(), Clock()
    file = File(store, clock)
    retention = Retention(store, file.files, {THUMBS: 2}, clock)
    old = [file.finish(file.job()), file.finish(file.job(), failed=True), file.finish(file.job())]
    running = file.run(file.job())
    others = [file.finish(file.job(JobType.VIRUS_SCAN)) for _ in range(3)]
    newest_job = file.job()
    before = store.get(newest_job.id)

    # When the newest thumbnail job finishes, and its change is handled
    newest = file.finish(newest_job)
    retired = retention.on_change(before, newest)

    # Then the two oldest finished thumbnail jobs were retired, the newest two kept
    assert retired == [old[0].id, old[1].id]
    listed = {j.id for j in store.jobs_of_file(file.stored.id)}
    assert listed == {old[2].id, newest.id, running.id, *(o.id for o in others)}
    for job in old[:2]:
        gone = store.get(job.id)
        assert gone is not None and gone.metadata.deleted_by == "retention"
        assert gone.expires_at is not None and gone.expires_at <= epoch_seconds(clock.now)
    # and the running one and the other type's were never touched
    assert store.get(running.id).status is JobStatus.RUNNING  # type: ignore[union-attr]
    assert all(store.get(o.id).metadata.deleted_at is None for o in others)  # type: ignore[union-attr]

    # and handling the same change again (a stream retry) retires nothing more
    assert retention.on_change(before, newest) == []


def test_only_a_change_into_a_finished_status_of_a_named_type_applies() -> None:
    store, clock = InMemoryJobStore(), Clock()
    file = File(store, clock)
    retention = Retention(store, file.files, {THUMBS: 1}, clock)
    done = file.finish(file.job())
    scan = file.finish(file.job(JobType.VIRUS_SCAN))

    assert retention.applies_to(None, done)
    assert not retention.applies_to(done, done)  # finished before: a delete, a retirement
    assert not retention.applies_to(None, scan)  # a type the setting does not name
    assert not Retention(store, file.files, {}, clock).applies_to(None, done)


def test_a_job_retried_and_finished_again_since_it_was_read_is_not_retired() -> None:
    # Given two finished jobs, the older read as one to retire
    store, clock = InMemoryJobStore(), Clock()
    file = File(store, clock)
    older, newer = file.finish(file.job(), failed=True), file.finish(file.job())
    (stale,) = to_retire(newer, store.jobs_of_file(file.stored.id), {THUMBS: 1})
    assert stale.id == older.id

    # When it is retried and finishes again before the retirement is written
    retry = transitions.retry(now=clock(), by="op", dispatch_grace=LEASE)
    store.apply(older.id, THUMBS, retry)
    file.finish(store.get(older.id))  # type: ignore[arg-type]
    result = store.apply(older.id, THUMBS, transitions.retire(stale, now=clock()))

    # Then the retirement lost: the job finished at another time than the one read
    assert result.conflict is transitions.Conflict.CHANGED  # type: ignore[union-attr]
    assert store.get(older.id).metadata.deleted_at is None  # type: ignore[union-attr]


def test_a_running_job_is_never_retired() -> None:
    store, clock = InMemoryJobStore(), Clock()
    file = File(store, clock)
    done = file.finish(file.job(), failed=True)
    store.apply(done.id, THUMBS, transitions.retry(now=clock(), by="op", dispatch_grace=LEASE))
    running = file.run(store.get(done.id))  # type: ignore[arg-type]

    result = store.apply(done.id, THUMBS, transitions.retire(done, now=clock()))

    assert result.conflict is not None  # type: ignore[union-attr]
    assert store.get(running.id).status is JobStatus.RUNNING  # type: ignore[union-attr]


def test_a_finish_read_from_an_old_stream_record_ranks_its_job_but_never_retires_it_again() -> None:
    # Given three finished jobs, the oldest already retired (by a later finish's pass)
    store, clock = InMemoryJobStore(), Clock()
    file = File(store, clock)
    oldest = file.finish(file.job())
    file.finish(file.job())
    file.finish(file.job())
    store.apply(oldest.id, THUMBS, transitions.retire(oldest, now=clock()))

    # When the oldest's own finish comes off the stream, as its record showed it then
    retired = Retention(store, file.files, {THUMBS: 1}, clock).on_change(None, oldest)

    # Then only the middle one goes; the oldest is not written again
    assert len(retired) == 1 and retired[0] != oldest.id
