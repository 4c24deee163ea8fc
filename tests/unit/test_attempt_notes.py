"""An attempt's progress and bounded log (domain/attempt_notes.py), and how the state machine
carries them: on the heartbeat, into the attempt's record at its end, never as another
attempt's."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

from filejobs.data.mapping import job_to_model
from filejobs.data.stream import job_from_image
from filejobs.domain import transitions
from filejobs.domain.attempt_notes import (
    LOG_HEAD_LINES,
    LOG_LINE_BYTES,
    LOG_LINES_LIMIT,
    PROGRESS_MESSAGE_LIMIT,
    AttemptNotes,
    AttemptRecorder,
)
from filejobs.domain.job import (
    ATTEMPT_HISTORY_LIMIT,
    ERROR_MESSAGE_LIMIT,
    AttemptOutcome,
    JobStatus,
    ProcessingJob,
)
from filejobs.processors.base import Work
from tests.conftest import FakeClock
from tests.factories import pending_job

LEASE = timedelta(minutes=5)


def test_progress_is_clamped_and_never_goes_back_within_an_attempt() -> None:
    notes = AttemptRecorder()
    assert notes.snapshot() == AttemptNotes()

    notes.report_progress(0.4, "encoded 12 of 30 s")
    notes.report_progress(0.2, "a late report")  # below: the fraction stays, the message moves
    assert notes.snapshot().fraction == 0.4
    assert notes.snapshot().message == "a late report"

    notes.report_progress(7, None)
    assert notes.snapshot().fraction == 1.0
    notes.report_progress(float("nan"), "no number")
    assert notes.snapshot().fraction == 1.0


def test_a_progress_message_is_one_short_line() -> None:
    notes = AttemptRecorder()
    notes.report_progress(0.1, "line one\nline two\t" + "x" * 500)
    message = notes.snapshot().message
    assert message is not None
    assert "\n" not in message and "\t" not in message
    assert len(message) == PROGRESS_MESSAGE_LIMIT and message.endswith("…")


def test_a_log_line_is_capped_in_bytes_at_a_character_boundary() -> None:
    notes = AttemptRecorder()
    notes.log("é" * 1000)  # two bytes each
    notes.log("read\x00 3.2 MB\r\nvideo/mp4")
    first, second = notes.snapshot().lines
    assert len(first.encode("utf-8")) <= LOG_LINE_BYTES and first.endswith("…")
    assert second == "read 3.2 MB video/mp4"


def test_a_processor_that_logs_ten_thousand_lines_keeps_its_first_and_last_within_the_cap() -> None:
    notes = AttemptRecorder()
    for n in range(10_000):
        notes.log(f"line {n}")

    snapshot = notes.snapshot()

    assert len(snapshot.lines) == LOG_LINES_LIMIT
    assert snapshot.lines[:LOG_HEAD_LINES] == tuple(f"line {n}" for n in range(LOG_HEAD_LINES))
    assert snapshot.lines[-1] == "line 9999"
    tail = LOG_LINES_LIMIT - LOG_HEAD_LINES - 1
    assert snapshot.lines[LOG_HEAD_LINES + 1 :] == tuple(
        f"line {n}" for n in range(10_000 - tail, 10_000)
    )
    # it says it truncated, and by how much
    assert snapshot.dropped == 10_000 - LOG_LINES_LIMIT + 1
    assert snapshot.lines[LOG_HEAD_LINES] == f"[... {snapshot.dropped:,} lines left out ...]"


def test_a_log_at_its_cap_is_whole_and_one_more_line_truncates_it() -> None:
    notes = AttemptRecorder()
    for n in range(LOG_LINES_LIMIT):
        notes.log(f"line {n}")
    assert notes.snapshot().dropped == 0
    assert len(notes.snapshot().lines) == LOG_LINES_LIMIT

    notes.log("one more")
    snapshot = notes.snapshot()
    assert len(snapshot.lines) == LOG_LINES_LIMIT
    assert snapshot.dropped == 2  # a line gave way to the marker too
    assert snapshot.lines[-1] == "one more"


def test_reports_from_one_thread_and_snapshots_from_another_stay_consistent() -> None:
    notes = AttemptRecorder()
    seen: list[float] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            fraction = notes.snapshot().fraction
            if fraction is not None:
                seen.append(fraction)

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(1, 20_001):
        notes.report_progress(n / 20_000, f"step {n}")
        notes.log(f"step {n}")
    done.set()
    thread.join()

    assert seen == sorted(seen)  # monotonic as the other thread saw it
    assert notes.snapshot().fraction == 1.0
    assert len(notes.snapshot().lines) == LOG_LINES_LIMIT


def test_work_keeps_the_scratch_directory_out_of_what_it_logs(
    tmp_path: Path, clock: FakeClock
) -> None:
    work = Work(pending_job(clock.now), lambda: False, tmp_path, outputs=None)  # type: ignore[arg-type]
    work.log(f"wrote {tmp_path}/poster.webp")
    work.report_progress(0.5, f"reading {tmp_path / 'video'}")
    assert work.notes.snapshot().lines == ("wrote <workspace>/poster.webp",)
    assert work.notes.snapshot().message == "reading <workspace>/video"


# --- the state machine ----------------------------------------------------------------------


def running(clock: FakeClock) -> ProcessingJob:
    job = pending_job(clock.now)
    job.apply(transitions.claim(now=clock.now, lease=LEASE, worker="w"))
    return job


def some_notes(fraction: float = 0.4) -> AttemptNotes:
    return AttemptNotes(fraction, "encoded 12 of 30 s", ("read 3.2 MB video/mp4",), 0)


def test_a_heartbeat_carries_the_attempts_notes_and_only_for_that_attempt(
    clock: FakeClock,
) -> None:
    job = running(clock)
    beat = transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    job.apply(beat)
    progress = job.current_progress()
    assert progress is not None
    assert (progress.attempt, progress.notes) == (1, some_notes())
    # the heartbeat's guard is unchanged: a write of its own attempt, running
    assert beat.guard == transitions.Guard(statuses=frozenset({JobStatus.RUNNING}), attempt=1)

    # nothing to say: the heartbeat writes no progress at all
    quiet = transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=AttemptNotes())
    assert "progress" not in quiet.changes.set


def test_completing_freezes_the_notes_into_the_attempt_whole_and_clears_the_live_progress(
    clock: FakeClock,
) -> None:
    job = running(clock)
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    )

    job.apply(
        transitions.complete(job, result={}, now=clock.now, retention=LEASE, notes=some_notes(0.9))
    )

    assert job.progress is None
    record = job.attempts[1]
    assert record.notes == AttemptNotes(1.0, "encoded 12 of 30 s", ("read 3.2 MB video/mp4",))


def test_failing_keeps_the_notes_as_they_were_and_the_next_attempt_starts_with_none(
    clock: FakeClock,
) -> None:
    job = running(clock)
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    )
    job.apply(
        transitions.fail(
            job,
            error="boom",
            now=clock.now,
            retry_at=clock.now,
            retention=LEASE,
            notes=some_notes(0.6),
        )
    )
    assert job.attempts[1].notes == some_notes(0.6)
    assert job.progress is None

    job.apply(transitions.claim(now=clock.now, lease=LEASE, worker="w"))
    assert job.attempt == 2 and job.current_progress() is None


def test_the_sweeps_rescue_keeps_what_the_last_heartbeat_carried(clock: FakeClock) -> None:
    job = running(clock)
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    )
    clock.advance(LEASE * 2)

    job.apply(transitions.recover_lease(job, now=clock.now, retry_at=clock.now, retention=LEASE))

    assert job.attempts[1].outcome is AttemptOutcome.LEASE_EXPIRED
    assert job.attempts[1].notes == some_notes()
    assert job.progress is None


def test_a_cancel_leaves_the_progress_where_the_attempt_stopped_and_a_retry_clears_it(
    clock: FakeClock,
) -> None:
    job = running(clock)
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    )
    job.apply(transitions.cancel(now=clock.now, by="op", reason="stop", retention=LEASE))
    assert job.current_progress() is not None

    job.apply(transitions.retry(now=clock.now, by="op", dispatch_grace=LEASE))
    assert job.progress is None


def test_the_worst_case_job_item_stays_far_below_dynamodbs_400_kb(clock: FakeClock) -> None:
    # Given a job with its whole attempt history, each attempt at every cap (longest error,
    # a full log of the widest UTF-8 lines), and a running attempt's full live notes
    job = running(clock)
    wide = "😀" * LOG_LINE_BYTES  # four bytes each: the byte cap binds
    full = AttemptRecorder()
    for _ in range(1_000):
        full.log(wide)
        full.report_progress(0.5, "😀" * 500)
    error = "😀" * ERROR_MESSAGE_LIMIT * 2
    for _ in range(ATTEMPT_HISTORY_LIMIT + 3):
        job.apply(
            transitions.heartbeat(
                job, now=clock.now, lease=LEASE, worker="w", notes=full.snapshot()
            )
        )
        job.apply(
            transitions.fail(
                job,
                error=error,
                now=clock.now,
                retry_at=clock.now,
                retention=LEASE,
                notes=full.snapshot(),
            )
        )
        job.retry_count = 0
        job.apply(transitions.claim(now=clock.now, lease=LEASE, worker="w"))
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=full.snapshot())
    )

    # When it is stored
    item = job_to_model(job).serialize()
    size = len(json.dumps(item, ensure_ascii=False).encode("utf-8"))
    log_bytes = sum(
        len(line.encode("utf-8")) for a in job.attempts.values() for line in a.notes.lines
    )

    # Then the logs take at most ~4 KB an attempt, and the item (no input or result data)
    # stays under 200 KB: logs 11 x 4 KB, errors 10 x 8 KB (ERROR_MESSAGE_LIMIT characters)
    assert len(job.attempts) == ATTEMPT_HISTORY_LIMIT
    assert log_bytes <= ATTEMPT_HISTORY_LIMIT * (LOG_LINES_LIMIT * LOG_LINE_BYTES)
    print(f"worst-case item: {size} bytes, logs {log_bytes} bytes")
    assert size < 200_000, size


def test_the_notes_survive_the_items_round_trip_as_a_stream_image_carries_it(
    clock: FakeClock,
) -> None:
    job = running(clock)
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    )
    job.apply(
        transitions.fail(
            job, error="boom", now=clock.now, retry_at=clock.now, retention=LEASE,
            notes=AttemptNotes(0.5, "half", ("a", "[... 3 lines left out ...]", "b"), 3),
        )
    )  # fmt: skip
    job.retry_count = 0
    job.apply(transitions.claim(now=clock.now, lease=LEASE, worker="w"))
    job.apply(
        transitions.heartbeat(job, now=clock.now, lease=LEASE, worker="w", notes=some_notes())
    )

    image = job_to_model(job).serialize()
    back = job_from_image(json.loads(json.dumps(image)))

    assert back.attempts == job.attempts
    assert back.progress == job.progress
    assert back.current_progress() is not None
