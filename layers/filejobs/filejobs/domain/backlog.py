"""Lost or queued: whether a waiting job's message may still be in its queue.

A job that is pending (or scheduled and due) and unclaimed is in one of two states that look the
same in the table: its message is still queued behind others (a backlog), or its message is gone
(the sender died between its write and its send, or a copy was deleted unread). Sending again
is right only for the second: under a backlog a copy doubles the queue's work exactly when it is
busiest, and the worker that receives the original first leaves the copy to be skipped.

The queue itself says which: every message that became visible before the queue's *reach* has
been received by a worker (and is deleted, or is in a worker's hands). A job whose message
became visible before the reach, and which is still unclaimed, lost its message. A job whose
message became visible after it may simply be queued: it is left alone, and its next check put
off, with no copy and no count against its dispatch budget.

`QueueProgress.from_counts` works the reach out from what SQS's GetQueueAttributes gives:

- no visible message: every message visible before `now - lag` has been received (SQS's counts
  are eventually consistent: `lag` covers it);
- messages in flight as well: one of them may be the job's, received by a worker that has not
  claimed it yet (a batch runs its records one by one), or one a worker failed before claiming
  (a crash, a message it cannot read) that SQS delivers again, up to the queue's maxReceiveCount
  times before its dead-letter queue takes it: the reach is that many visibility timeouts back.
  (With one, the sweep could send a copy of a poisoned job's message seconds before the
  original was dead-lettered, and the copy went through the same five deliveries.);
- visible messages: a backlog whose age SQS does not say; only messages older than the queue's
  retention period are surely gone (SQS deleted them), so that is the reach. Under a backlog
  that never clears, a lost message is found again after the retention period, never before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from filejobs.domain.job import JobStatus, ProcessingJob
from filejobs.domain.messages import MAX_MESSAGE_DELAY

# SQS's approximate counts may lag the queue by about a minute (the GetQueueAttributes docs).
COUNT_LAG = timedelta(minutes=1)


@dataclass(frozen=True)
class QueueProgress:
    """How far a job queue has got: every message visible before `reach` has been received."""

    reach: datetime

    def may_hold(self, visible_at: datetime) -> bool:
        """Whether a message that became visible at `visible_at` may still be queued."""
        return visible_at >= self.reach

    @classmethod
    def from_counts(
        cls,
        *,
        now: datetime,
        visible: int,
        in_flight: int,
        visibility_timeout: timedelta,
        retention: timedelta,
        receives: int = 1,
        lag: timedelta = COUNT_LAG,
    ) -> QueueProgress:
        if visible > 0:
            return cls(now - retention)
        if in_flight > 0:
            return cls(now - visibility_timeout * max(receives, 1) - lag)
        return cls(now - lag)


def visible_at(job: ProcessingJob, released_at: datetime | None = None) -> datetime | None:
    """When the job's latest message became (or was due to become) visible to its workers; None
    when none is out (a retry due later than SQS can delay a message waits for the sweep).

    A scheduled job's message (a retry's, a delayed job's) is delayed until it is due; any other
    job's was sent
    at its last dispatch, or at its creation. `released_at` is when a gate let the job go (the
    file's verdict, after which the scan sends the jobs that waited on it).
    """
    if job.status is JobStatus.SCHEDULED and job.scheduled_at is not None:
        failed = job.attempts.get(job.attempt)
        # A retry's message went out when its attempt failed; a delayed job's (one that never
        # ran) when it was requested, and only if SQS could hold it that long.
        sent = job.metadata.created_at if job.attempt == 0 else None
        sent = failed.ended_at if failed is not None else sent
        if sent is not None and job.scheduled_at - sent > MAX_MESSAGE_DELAY:
            return None
        due = job.scheduled_at
        # A gate that opened after the time: the verdict's release sent it then.
        return due if released_at is None else max(due, released_at)
    sent = job.dispatched_at or job.metadata.created_at
    return sent if released_at is None else max(sent, released_at)
