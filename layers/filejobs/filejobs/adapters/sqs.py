"""Job queues on SQS: one queue per job type and lane, messages delayed for short retries.

Every job message carries its tenant as its `MessageGroupId`: on a standard queue that makes it
an SQS fair queue, which serves the other tenants' messages first while one tenant's backlog
dominates the messages in flight, so one tenant's burst does not starve another (the local
stack emulates the order: filejobs_dev/local/fair_queues.py). The group id orders nothing on a
standard queue and deduplicates nothing: it only names whose message it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from filejobs.domain.backlog import QueueProgress
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.messages import MAX_MESSAGE_DELAY, JobMessage, Lane, lane_of
from filejobs.domain.time import utcnow
from filejobs.ports import DeadLetter

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_BATCH_ENTRIES = 10  # SendMessageBatch takes at most 10 entries


class SqsDispatcher:
    def __init__(self, client: SQSClient, queue_urls: Mapping[tuple[JobType, Lane], str]) -> None:
        self._client = client
        self._queue_urls = queue_urls

    def dispatch(self, job: ProcessingJob, delay: timedelta = timedelta(0)) -> None:
        # Rounded up: a retry's message visible before the retry is due would find the job
        # not yet claimable, and be acknowledged unread.
        bounded = min(max(delay, timedelta(0)), MAX_MESSAGE_DELAY)
        seconds = math.ceil(bounded.total_seconds())
        self._client.send_message(
            QueueUrl=self._queue_url(job),
            MessageBody=JobMessage.for_job(job).to_json(),
            DelaySeconds=seconds,
            MessageGroupId=fairness_group(job),
        )

    def dispatch_all(self, jobs: Iterable[ProcessingJob]) -> None:
        """Send new jobs' messages, batched per queue (a file's jobs go to different queues)."""
        by_queue: dict[str, list[ProcessingJob]] = {}
        for job in jobs:
            by_queue.setdefault(self._queue_url(job), []).append(job)
        for url, queued in by_queue.items():
            for start in range(0, len(queued), MAX_BATCH_ENTRIES):
                self._send_batch(url, queued[start : start + MAX_BATCH_ENTRIES])

    def _send_batch(self, url: str, jobs: list[ProcessingJob]) -> None:
        entries = [
            {
                "Id": str(n),
                "MessageBody": JobMessage.for_job(job).to_json(),
                "MessageGroupId": fairness_group(job),
            }
            for n, job in enumerate(jobs)
        ]
        response = self._client.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
        failed = response.get("Failed", [])
        if failed:
            # Not raised as lost: the jobs are recorded and the sweep re-dispatches them.
            reasons = "; ".join(f"{f['Id']}: {f.get('Message', f['Code'])}" for f in failed)
            raise RuntimeError(f"SQS refused {len(failed)} job message(s): {reasons}")

    def _queue_url(self, job: ProcessingJob) -> str:
        # A lane the environment names no queue for (a function not yet updated to a template
        # with that lane) falls back to the normal lane: sent late beats never sent.
        lane = lane_of(job)
        url = self._queue_urls.get((job.job_type, lane)) or self._queue_urls.get(
            (job.job_type, Lane.NORMAL)
        )
        if url is None:
            raise LookupError(f"no queue configured for {job.job_type.value} ({lane.value})")
        return url


def fairness_group(job: ProcessingJob) -> str:
    """The fair queue's group of a job's message: its tenant (at most 63 letters, digits, `_`
    and `-`, domain/keys.py: within what MessageGroupId takes, 128 of them)."""
    return job.tenant


class SqsQueueWatch:
    """How far each job queue has got, from its approximate counts (one GetQueueAttributes)."""

    _ATTRIBUTES = (
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "RedrivePolicy",
    )

    def __init__(
        self,
        client: SQSClient,
        queue_urls: Mapping[tuple[JobType, Lane], str],
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._client, self._queue_urls, self._clock = client, queue_urls, clock

    def progress(self, job_type: JobType, lane: Lane) -> QueueProgress:
        url = self._queue_urls.get((job_type, lane)) or self._queue_urls[(job_type, Lane.NORMAL)]
        now = self._clock()
        found = self._client.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=list(self._ATTRIBUTES),  # type: ignore[arg-type]
        )["Attributes"]
        return QueueProgress.from_counts(
            now=now,
            visible=int(found["ApproximateNumberOfMessages"]),
            in_flight=int(found["ApproximateNumberOfMessagesNotVisible"]),
            visibility_timeout=timedelta(seconds=int(found["VisibilityTimeout"])),
            retention=timedelta(seconds=int(found["MessageRetentionPeriod"])),
            receives=max_receives(found.get("RedrivePolicy")),
        )


def max_receives(redrive_policy: str | None) -> int:
    """How many times the queue delivers a message before its dead-letter queue takes it (the
    RedrivePolicy's maxReceiveCount, in the same GetQueueAttributes answer); 1 with no policy
    or one that cannot be read: the sweep then waits the least before sending a copy."""
    if not redrive_policy:
        return 1
    try:
        return max(int(json.loads(redrive_policy)["maxReceiveCount"]), 1)
    except (ValueError, KeyError, TypeError):
        return 1


class SqsDeadLetters:
    """The job types' dead-letter queues, as the sweep reviews them."""

    # A letter the sweep leaves (it names no job it can settle) is not read again for this long.
    HIDE_SECONDS = 3600

    def __init__(self, client: SQSClient, queue_urls: Mapping[JobType, str]) -> None:
        self._client = client
        self._queue_urls = queue_urls

    def receive(self, job_type: JobType, limit: int = 10) -> list[DeadLetter]:
        url = self._queue_urls.get(job_type)
        if url is None:
            return []
        messages = self._client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=min(limit, 10), VisibilityTimeout=self.HIDE_SECONDS
        ).get("Messages", [])
        return [
            DeadLetter(job_type, m.get("Body", ""), m["ReceiptHandle"], m["MessageId"])
            for m in messages
        ]

    def depths(self) -> dict[str, int]:
        """Messages in each job type's dead-letter queue (visible and in flight), by job type:
        one GetQueueAttributes per queue."""
        found = {}
        for job_type, url in sorted(self._queue_urls.items()):
            attributes = self._client.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"]
            found[job_type.value] = int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
                attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
            )
        return found

    def settle(self, letter: DeadLetter) -> None:
        """The letter's job carries the outcome now: the letter is deleted."""
        self._client.delete_message(
            QueueUrl=self._queue_urls[letter.job_type], ReceiptHandle=letter.receipt_handle
        )
