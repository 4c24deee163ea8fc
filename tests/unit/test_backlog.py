"""Lost or queued (domain/backlog.py): how far a queue has got, and when a job's message became
visible."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from filejobs.domain.backlog import COUNT_LAG, QueueProgress, visible_at
from filejobs.domain.job import Attempt, AttemptOutcome, JobStatus, JobType
from filejobs.domain.retry import DispatchPolicy
from tests.factories import pending_job

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
VISIBILITY = timedelta(minutes=30)
RETENTION = timedelta(days=4)


def progress(visible: int, in_flight: int) -> QueueProgress:
    return QueueProgress.from_counts(
        now=NOW,
        visible=visible,
        in_flight=in_flight,
        visibility_timeout=VISIBILITY,
        retention=RETENTION,
    )


def test_an_empty_queue_has_received_every_message_older_than_the_counts_lag() -> None:
    empty = progress(0, 0)
    assert empty.reach == NOW - COUNT_LAG
    assert not empty.may_hold(NOW - timedelta(minutes=2))
    assert empty.may_hold(NOW - timedelta(seconds=30))


def test_messages_in_flight_may_include_one_received_and_not_yet_claimed() -> None:
    busy = progress(0, 7)
    # A worker may hold it for up to a visibility timeout before its claim (a batch in hand)
    assert busy.may_hold(NOW - timedelta(minutes=20))
    assert not busy.may_hold(NOW - VISIBILITY - COUNT_LAG - timedelta(seconds=1))


def test_a_message_in_flight_may_be_delivered_again_until_its_receives_run_out() -> None:
    # A worker that fails a message before claiming its job (a crash, a poisoned body) leaves it
    # to SQS, which delivers it again up to the redrive policy's maxReceiveCount.
    redelivered = QueueProgress.from_counts(
        now=NOW,
        visible=0,
        in_flight=1,
        visibility_timeout=VISIBILITY,
        retention=RETENTION,
        receives=5,
    )
    assert redelivered.may_hold(NOW - 4 * VISIBILITY)
    assert not redelivered.may_hold(NOW - 5 * VISIBILITY - COUNT_LAG - timedelta(seconds=1))


def test_a_backlog_of_unknown_age_has_surely_dropped_only_what_outlived_the_retention() -> None:
    backlog = progress(5000, 40)
    assert backlog.may_hold(NOW - timedelta(days=3))
    assert not backlog.may_hold(NOW - RETENTION - timedelta(seconds=1))


def test_a_message_visible_at_the_very_reach_may_still_be_queued() -> None:
    assert QueueProgress(NOW).may_hold(NOW)


def test_a_new_job_became_visible_at_its_creation() -> None:
    job = pending_job(NOW)
    assert visible_at(job) == NOW


def test_a_resent_job_from_its_last_send() -> None:
    job = replace(pending_job(NOW), dispatched_at=NOW + timedelta(hours=1))
    assert visible_at(job) == NOW + timedelta(hours=1)


def test_a_job_a_gate_released_from_the_release_when_that_is_later() -> None:
    job = pending_job(NOW, JobType.THUMBNAIL_GENERATION)
    assert visible_at(job, NOW + timedelta(minutes=9)) == NOW + timedelta(minutes=9)
    assert visible_at(job, NOW - timedelta(minutes=9)) == NOW


def test_a_scheduled_retry_from_when_its_delayed_message_was_due() -> None:
    retry_at = NOW + timedelta(minutes=4)
    job = replace(pending_job(NOW), status=JobStatus.SCHEDULED, scheduled_at=retry_at)
    assert visible_at(job) == retry_at
    failed_now = {1: Attempt(1, NOW, NOW, AttemptOutcome.RETRYING)}
    assert visible_at(replace(job, attempt=1, attempts=failed_now)) == retry_at


def test_a_retry_later_than_sqs_can_delay_has_no_message_out() -> None:
    # its attempt failed at NOW, its retry an hour on: no delayed message was sent
    job = replace(
        pending_job(NOW),
        status=JobStatus.SCHEDULED,
        scheduled_at=NOW + timedelta(hours=1),
        attempt=1,
        attempts={1: Attempt(1, NOW - timedelta(seconds=5), NOW, AttemptOutcome.RETRYING)},
    )
    assert visible_at(job) is None


def test_a_queued_job_is_looked_at_again_after_as_long_as_it_waited_within_bounds() -> None:
    policy = DispatchPolicy(grace=timedelta(minutes=2), patience=timedelta(hours=6))
    assert policy.next_look(NOW, NOW) == NOW + timedelta(minutes=2)
    assert policy.next_look(NOW - timedelta(minutes=30), NOW) == NOW + timedelta(minutes=30)
    assert policy.next_look(NOW - timedelta(days=2), NOW) == NOW + timedelta(hours=6)
    # a clock that went backwards never makes the next look sooner than the grace
    assert policy.next_look(NOW + timedelta(hours=1), NOW) == NOW + timedelta(minutes=2)
