"""When a file is processed, and what its completion says (pure domain, and the service on the
in-memory stores)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import timedelta

from filejobs.domain import keys, transitions
from filejobs.domain.file import StoredFile
from filejobs.domain.file_completion import (
    JOBS_SUMMARISED,
    RESULT_SUMMARY_BYTES,
    completion_of,
    summarise,
    summarise_result,
)
from filejobs.domain.job import JobStatus, ProcessingJob
from filejobs.domain.outcome_events import file_processed
from filejobs.services.file_completion import FileCompletions, SeparateReads
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.fakes import InMemoryFileStore, InMemoryJobStore

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)


def ended(job: ProcessingJob, clock: FakeClock, *, error: str | None = None) -> ProcessingJob:
    """The job run once to its end: completed, or failed for good with `error`."""
    done = job.copy()
    done.apply(transitions.claim(now=clock.now, lease=LEASE, worker="w1"))
    clock.advance(timedelta(seconds=1))
    if error is None:
        done.apply(transitions.complete(done, result={"width": 64}, now=clock.now, retention=KEEP))
    else:
        done.apply(
            transitions.fail(done, error=error, now=clock.now, retry_at=None, retention=KEEP)
        )
    return done


def test_a_file_is_not_processed_while_one_of_its_jobs_is_open(clock: FakeClock) -> None:
    jobs = list(ingest_plan(clock.now, "image/png").jobs)
    finished = [ended(job, clock) for job in jobs[1:]]
    assert completion_of([jobs[0], *finished], at=clock.now) is None
    assert completion_of([], at=clock.now) is None


def test_the_completion_names_every_job_s_end_in_creation_order(clock: FakeClock) -> None:
    jobs = [ended(job, clock) for job in ingest_plan(clock.now, "image/png").jobs]
    jobs[1] = ended(ingest_plan(clock.now, "image/png").jobs[1], clock, error="Permanent: no")
    completion = completion_of(reversed(jobs), at=clock.now)
    assert completion is not None
    in_creation_order = sorted(jobs, key=lambda j: (j.metadata.created_at, j.id))
    assert [j.id for j in completion.jobs] == [j.id for j in in_creation_order]
    assert completion.counts() == {"completed": len(jobs) - 1, "failed": 1}
    assert completion.version == max(j.metadata.updated_at for j in jobs).isoformat()
    by_id = {j.id: j for j in completion.jobs}
    assert by_id[jobs[1].id].error == "Permanent: no"
    assert by_id[jobs[0].id].result == {"width": 64}


def test_the_same_ends_read_twice_are_one_completion_and_a_new_attempt_is_another(
    clock: FakeClock,
) -> None:
    jobs = [ended(job, clock) for job in ingest_plan(clock.now, "image/png").jobs]
    first = completion_of(jobs, at=clock.now)
    again = completion_of(list(reversed(jobs)), at=clock.now + timedelta(seconds=5))
    assert first is not None and again is not None
    assert first.fingerprint == again.fingerprint
    rerun = replace(jobs[0], attempt=jobs[0].attempt + 1)
    other = completion_of([rerun, *jobs[1:]], at=clock.now)
    assert other is not None and other.fingerprint != first.fingerprint


def test_a_large_result_is_summarised_by_its_scalars_within_the_bound() -> None:
    result = {
        "verdict": "clean",
        "bytes": 1234,
        "thumbnails": [{"key": f"derived/acme/{n}.webp", "width": n} for n in range(200)],
    }
    summary = summarise_result(result)
    assert summary == {"truncated": True, "verdict": "clean", "bytes": 1234}
    assert summarise_result({"width": 10}) == {"width": 10}
    assert summarise_result(None) is None
    huge = {f"field{n}": "x" * 100 for n in range(50)}
    bounded = summarise_result(huge)
    assert bounded is not None and bounded["truncated"] is True
    assert len(str(bounded)) <= RESULT_SUMMARY_BYTES + 100


def test_a_long_error_is_cut(clock: FakeClock) -> None:
    job = ended(ingest_plan(clock.now).jobs[0], clock, error="E" * 3000)
    error = summarise(job).error
    assert error is not None and len(error) == 500 and error.endswith("…")


def test_a_file_with_many_jobs_lists_the_first_and_counts_the_rest(clock: FakeClock) -> None:
    template = ended(ingest_plan(clock.now).jobs[0], clock)
    jobs = [replace(template, id=f"{n:04d}") for n in range(JOBS_SUMMARISED + 7)]
    completion = completion_of(jobs, at=clock.now)
    assert completion is not None
    assert (len(completion.jobs), completion.more_jobs) == (JOBS_SUMMARISED, 7)


def test_only_a_write_with_a_new_completion_announces_the_file_processed(
    clock: FakeClock,
) -> None:
    plan = ingest_plan(clock.now, "image/png")
    jobs = [ended(job, clock) for job in plan.jobs]
    completion = completion_of(jobs, at=clock.now)
    assert completion is not None
    open_file = plan.file
    processed = replace(open_file, processed=completion)
    assert file_processed(open_file, processed)
    assert file_processed(None, processed)
    assert not file_processed(processed, replace(processed, sha256="ab" * 32))
    assert not file_processed(open_file, open_file)
    rerun = completion_of([replace(jobs[0], attempt=2), *jobs[1:]], at=clock.now)
    assert rerun is not None
    assert file_processed(processed, replace(processed, processed=rerun))


def stores(clock: FakeClock) -> tuple[InMemoryJobStore, InMemoryFileStore, list[ProcessingJob]]:
    jobs = InMemoryJobStore()
    files = InMemoryFileStore(jobs)
    plan = ingest_plan(clock.now, "image/png")
    files.record_ingest(plan)
    return jobs, files, list(plan.jobs)


def end_in_store(jobs: InMemoryJobStore, job: ProcessingJob, clock: FakeClock) -> ProcessingJob:
    claimed = jobs.apply(
        job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w1")
    )
    running = claimed.job  # type: ignore[union-attr]
    clock.advance(timedelta(seconds=1))
    done = transitions.complete(running, result={}, now=clock.now, retention=KEEP)
    return jobs.apply(job.id, job.job_type, done).job  # type: ignore[union-attr]


def test_the_last_job_to_end_records_the_completion_once(clock: FakeClock) -> None:
    jobs, files, made = stores(clock)
    completions = FileCompletions(jobs, files, clock=clock)
    *others, final = made
    # every end is checked as it happens (as the stream delivers them), the last one twice
    first = []
    for job in others:
        first.append(end_in_store(jobs, job, clock))
        assert completions.job_ended(first[-1]) is None
    last = end_in_store(jobs, final, clock)
    recorded = completions.job_ended(last)
    assert recorded is not None
    assert completions.job_ended(last) is None
    assert completions.job_ended(first[0]) is None
    stored = files.get(last.file_id)
    assert stored is not None and stored.processed == recorded


def test_a_job_added_to_a_processed_file_reopens_it_until_it_ends(clock: FakeClock) -> None:
    jobs, files, made = stores(clock)
    completions = FileCompletions(jobs, files, clock=clock)
    ends = [end_in_store(jobs, job, clock) for job in made]
    first = completions.job_ended(ends[-1])
    assert first is not None
    rescan = replace(made[0], id="00000000-0000-4000-8000-00000000abcd", status=JobStatus.PENDING)
    assert files.add_job(rescan)
    # an earlier job's end checked again (a late record) finds the new job open
    assert completions.job_ended(ends[0]) is None
    second = completions.job_ended(end_in_store(jobs, rescan, clock))
    assert second is not None and second.fingerprint != first.fingerprint
    assert rescan.id in {j.id for j in second.jobs}


class CountedReads(SeparateReads):
    """The reads as one request each (as the BatchGetItem of data/completion_reads.py), counted."""

    def __init__(self, jobs: InMemoryJobStore, files: InMemoryFileStore) -> None:
        super().__init__(jobs, files)
        self.asked: list[set[str]] = []

    def file_and_jobs(
        self, file_id: str, job_ids: Iterable[str]
    ) -> tuple[StoredFile | None, list[ProcessingJob]]:
        self.asked.append(set(job_ids))
        return super().file_and_jobs(file_id, self.asked[-1])


class CountedJobs(InMemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.get_many_calls = 0

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True) -> list[ProcessingJob]:
        self.get_many_calls += 1
        return super().get_many(job_ids, consistent=consistent)


def counted_stores(
    clock: FakeClock,
) -> tuple[CountedJobs, InMemoryFileStore, list[ProcessingJob], CountedReads]:
    jobs = CountedJobs()
    files = InMemoryFileStore(jobs)
    plan = ingest_plan(clock.now, "image/png")
    files.record_ingest(plan)
    return jobs, files, list(plan.jobs), CountedReads(jobs, files)


def test_an_ingested_file_is_checked_by_one_read_of_the_file_and_its_default_jobs(
    clock: FakeClock,
) -> None:
    jobs, files, made, reads = counted_stores(clock)
    completions = FileCompletions(jobs, files, together=reads, clock=clock)
    ends = [end_in_store(jobs, job, clock) for job in made]
    jobs.get_many_calls = 0
    assert completions.job_ended(ends[-1]) is not None
    # one read, of the file and the ids of the ingest jobs its content gets by default: no key
    # asked for a type it has no job of (each costs a read unit, found or not)
    assert reads.asked == [{job.id for job in made}]
    assert len(keys.ingest_job_types(made[0].tenant, made[0].file_id)) > len(made)
    # and no read of jobs beside it (the fake answers it with one get_many)
    assert jobs.get_many_calls == 1


def test_two_jobs_ending_together_record_exactly_one_completion(clock: FakeClock) -> None:
    jobs, files, made, reads = counted_stores(clock)
    completions = FileCompletions(jobs, files, together=reads, clock=clock)
    *others, a, b = made
    for job in others:
        completions.job_ended(end_in_store(jobs, job, clock))
    # given the last two jobs both ended before either's check ran (either order of records)
    ended_a, ended_b = end_in_store(jobs, a, clock), end_in_store(jobs, b, clock)
    recorded = [completions.job_ended(ended_b), completions.job_ended(ended_a)]
    # then one of the checks recorded the completion, the other nothing
    assert [r is not None for r in recorded] == [True, False]
    stored = files.get(a.file_id)
    assert stored is not None and stored.processed == recorded[0]


def test_the_last_job_s_check_sees_the_file_complete_whenever_the_others_were_checked(
    clock: FakeClock,
) -> None:
    jobs, files, made, reads = counted_stores(clock)
    completions = FileCompletions(jobs, files, together=reads, clock=clock)
    *others, a, last = made
    for job in others:
        end_in_store(jobs, job, clock)
    # given a job whose check ran before the last job ended (it saw the last one open)
    ended_a = end_in_store(jobs, a, clock)
    assert completions.job_ended(ended_a) is None
    # when the last job ends: its check reads every earlier end, committed before its own
    recorded = completions.job_ended(end_in_store(jobs, last, clock))
    assert recorded is not None
    assert {j.id for j in recorded.jobs} == {j.id for j in made}
