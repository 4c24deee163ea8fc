"""Outcome events: terminal jobs and quarantined files reach the stack's EventBridge bus.

Real writes go through the repositories into moto tables created from template.yaml (with their
streams); the stream records moto keeps are filtered with the template's FilterCriteria and fed
to the events handler as Lambda's DynamoDB event source would; a rule on the bus forwards what
is published to a queue the test reads.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from mypy_boto3_sqs import SQSClient

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.data.models import bind_tables
from filejobs.domain import transitions
from filejobs.domain.file_completion import completion_of
from filejobs.domain.ingest import new_job
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.quotas import UsageCharge, over_quota, rejected, usage_day
from filejobs.domain.retry import DispatchPolicy
from filejobs.ports import Ingested, OverQuota
from filejobs_dev.infra.template import (
    create_event_buses,
    create_tables,
    function_definitions,
    load_template,
)
from filejobs_dev.local.filter_criteria import filter_patterns, passes
from functions.events import app as events_app
from tests.aws_requests import DYNAMODB_READS, counting_requests
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.streams import StreamTap

TEMPLATE = load_template()
EVENTS_FUNCTION = function_definitions(TEMPLATE)["EventsFunction"]
SAMPLE_EVENT = Path(__file__).resolve().parents[2] / "events" / "events_job_completed.json"
KEEP = timedelta(days=30)
LEASE = timedelta(minutes=5)


@dataclass
class _Context:
    function_name: str = "events"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:events"
    aws_request_id: str = "6f1c4b8e-2d47-4a57-9d0e-3b5f2f9d8a10"


def context() -> LambdaContext:
    return cast(LambdaContext, _Context())


@dataclass
class Outcomes:
    jobs: StreamTap
    files: StreamTap
    sqs: SQSClient
    inbox: str  # a queue that receives everything published on the bus

    def stream_event(self, *, filtered: bool = True) -> dict[str, Any]:
        """The next batch of both streams as a DynamoDB event, filtered like the template says."""
        records: list[dict[str, Any]] = []
        for tap, name in ((self.jobs, "JobChanges"), (self.files, "FileChanges")):
            patterns = filter_patterns(_event_source(name))
            records += [r for r in tap.read() if not filtered or passes(patterns, r)]
        return {"Records": records}

    def published(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while got := self.sqs.receive_message(QueueUrl=self.inbox, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in got:
                events.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.inbox, ReceiptHandle=message["ReceiptHandle"])
        return events


def _event_source(name: str) -> dict[str, Any]:
    events = dict(TEMPLATE["Resources"]["EventsFunction"]["Properties"]["Events"])
    properties: dict[str, Any] = events[name]["Properties"]
    return properties


@pytest.fixture
def outcomes(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Outcomes]:
    suffix = uuid.uuid4().hex[:8]
    names = {"JobsTable": f"jobs-{suffix}", "FilesTable": f"files-{suffix}"}
    dynamodb = boto3.client("dynamodb")
    create_tables(dynamodb, names, TEMPLATE)
    bind_tables(jobs_table=names["JobsTable"], files_table=names["FilesTable"])
    bus = f"jobs-{suffix}"
    create_event_buses(boto3.client("events"), {"JobEventsBus": bus}, TEMPLATE)
    sqs = boto3.client("sqs")
    inbox = sqs.create_queue(QueueName=f"inbox-{suffix}")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])
    events = boto3.client("events")
    events.put_rule(Name="all", EventBusName=bus, EventPattern=json.dumps({"source": ["filejobs"]}))
    events.put_targets(
        Rule="all",
        EventBusName=bus,
        Targets=[{"Id": "inbox", "Arn": inbox_arn["Attributes"]["QueueArn"]}],
    )

    def tap(table: str) -> StreamTap:
        return StreamTap.of_table(dynamodb, table)

    monkeypatch.setenv("JOBS_TABLE_NAME", names["JobsTable"])
    monkeypatch.setenv("FILES_TABLE_NAME", names["FilesTable"])
    monkeypatch.setenv("EVENT_BUS_NAME", bus)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "filejobs-test")
    runtime.reset()
    yield Outcomes(tap(names["JobsTable"]), tap(names["FilesTable"]), sqs, inbox)
    runtime.reset()


def ingested(clock: FakeClock) -> list[ProcessingJob]:
    plan = ingest_plan(clock.now, "image/png")
    FileRepository().record_ingest(plan)
    return list(plan.jobs)


def run_to_completion(
    job: ProcessingJob, clock: FakeClock, result: dict[str, Any] | None = None
) -> ProcessingJob:
    repository = JobRepository()
    claimed = repository.apply(
        job.id, job.job_type, transitions.claim(now=clock.now, lease=LEASE, worker="w1")
    )
    running = claimed.job  # type: ignore[union-attr]
    clock.advance(timedelta(seconds=1))
    beat = transitions.heartbeat(running, now=clock.now, lease=LEASE, worker="w1")
    repository.apply(job.id, job.job_type, beat)
    clock.advance(timedelta(seconds=1))
    done = transitions.complete(
        running, result=result or {"width": 128}, now=clock.now, retention=KEEP, worker="w1"
    )
    return repository.apply(job.id, job.job_type, done).job  # type: ignore[union-attr]


def fail_for_good(job: ProcessingJob, clock: FakeClock) -> ProcessingJob:
    repository = JobRepository()
    claim = transitions.claim(now=clock.now, lease=LEASE, worker="w1")
    running = repository.apply(job.id, job.job_type, claim).job  # type: ignore[union-attr]
    failure = transitions.fail(
        running,
        error="PermanentError: not an image",
        now=clock.now,
        retry_at=None,
        retention=KEEP,
        worker="w1",
    )
    return repository.apply(job.id, job.job_type, failure).job  # type: ignore[union-attr]


def handle(event: dict[str, Any]) -> dict[str, Any]:
    return dict(events_app.handler(event, context()))


def test_a_completed_job_is_announced_once_with_its_result(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a job that was claimed, heartbeaten and completed
    job = run_to_completion(ingested(clock)[0], clock)
    # when the stream's records pass the template's filter and reach the handler
    event = outcomes.stream_event()
    response = handle(event)
    # then only the completion got through the filter, and it was published
    assert len(event["Records"]) == 1
    assert response == {"batchItemFailures": []}
    (published,) = outcomes.published()
    assert published["source"] == "filejobs"
    assert published["detail-type"] == "Job Completed"
    detail = published["detail"]
    assert (detail["id"], detail["file_id"], detail["tenant"]) == (job.id, job.file_id, "acme")
    assert detail["status"] == "completed"
    assert detail["result"] == {"width": 128}
    assert detail["event_id"].startswith(f"job:{job.id}:1:completed:")
    # and the event carries the moment of the change, not of the publication
    assert published["time"].startswith(clock.now.strftime("%Y-%m-%dT%H:%M:%S"))


def test_a_job_failed_for_good_is_announced_with_its_error(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a job that failed with no retry
    fail_for_good(ingested(clock)[0], clock)
    # when its changes are handled
    handle(outcomes.stream_event())
    # then one Job Failed event says why
    (published,) = outcomes.published()
    assert published["detail-type"] == "Job Failed"
    assert published["detail"]["error_message"] == "PermanentError: not an image"


def test_a_failure_that_will_be_retried_is_not_an_outcome(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a job whose attempt failed and that is scheduled for a retry
    job = ingested(clock)[0]
    repository = JobRepository()
    claim = transitions.claim(now=clock.now, lease=LEASE, worker="w1")
    running = repository.apply(job.id, job.job_type, claim).job  # type: ignore[union-attr]
    retry_at = clock.now + timedelta(seconds=30)
    failure = transitions.fail(
        running, error="TransientError: timeout", now=clock.now, retry_at=retry_at,
        retention=KEEP, worker="w1",
    )  # fmt: skip
    repository.apply(job.id, job.job_type, failure)
    # when every change reaches the handler, unfiltered
    response = handle(outcomes.stream_event(filtered=False))
    # then nothing is published
    assert response == {"batchItemFailures": []}
    assert outcomes.published() == []


def test_a_cancelled_job_is_announced_with_who_cancelled_it(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a pending job cancelled by a user
    job = ingested(clock)[0]
    cancel = transitions.cancel(now=clock.now, by="alice", reason="wrong file", retention=KEEP)
    JobRepository().apply(job.id, job.job_type, cancel)
    # when its changes are handled
    handle(outcomes.stream_event())
    # then one Job Cancelled event names the canceller
    (published,) = outcomes.published()
    assert published["detail-type"] == "Job Cancelled"
    assert (published["detail"]["cancelled_by"], published["detail"]["cancel_reason"]) == (
        "alice",
        "wrong file",
    )


def test_a_quarantined_file_is_announced_once(outcomes: Outcomes, clock: FakeClock) -> None:
    # given an ingested file the virus scan quarantines, twice (a redelivered scan)
    file_id = ingested(clock)[0].file_id
    files = FileRepository()
    first = files.quarantine(file_id, reason="Eicar-Signature", at=clock.now, by="virus_scan")
    again = files.quarantine(file_id, reason="Eicar-Signature", at=clock.now, by="virus_scan")
    assert first is not None and again is not None
    assert first.status_reason == again.status_reason == "Eicar-Signature"
    # when the files stream is handled
    handle(outcomes.stream_event())
    # then one File Quarantined event carries the verdict: the second write changed nothing
    (published,) = outcomes.published()
    assert published["detail-type"] == "File Quarantined"
    assert published["detail"]["id"] == file_id
    assert published["detail"]["status_reason"] == "Eicar-Signature"


def test_an_upload_over_its_quota_is_announced_once_as_rejected(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given an upload accepted and counted on its tenant's day, and one recorded rejected
    files = FileRepository()
    today = usage_day(clock.now)
    charge = UsageCharge("acme", today, 1, 10, max_files=1, max_bytes=None)
    accepted = ingest_plan(clock.now, "image/png", name="in.png", size=10)
    assert isinstance(files.record_ingest(accepted, charge), Ingested)
    over = ingest_plan(clock.now, "image/png", name="over.png", size=10)
    refused = files.record_ingest(over, charge)
    assert isinstance(refused, OverQuota)
    reason = over_quota(refused.charge, refused.usage)
    files.record_ingest(rejected(over, reason))
    # when the files stream is handled, as the template filters it
    handle(outcomes.stream_event())
    # then one Upload Rejected event says whose upload, which, how large and why; the accepted
    # upload and the day's usage item announce nothing
    (published,) = outcomes.published()
    assert published["detail-type"] == "Upload Rejected"
    detail = published["detail"]
    assert (detail["tenant"], detail["key"], detail["size"]) == ("acme", over.file.key, 10)
    assert (
        detail["reason"]
        == reason
        == (f"tenant acme is over its 1 files per day quota (1 used on {today.isoformat()})")
    )
    assert detail["id"] == over.file.id and detail["status"] == "rejected"


def test_a_redelivered_batch_publishes_copies_a_consumer_can_drop(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a completed job's change, delivered twice (a retried stream batch)
    run_to_completion(ingested(clock)[0], clock)
    event = outcomes.stream_event()
    handle(event)
    handle(event)
    # then both publications name the same event id
    first, second = outcomes.published()
    assert first["detail"]["event_id"] == second["detail"]["event_id"]


def test_a_bad_record_fails_alone_and_the_rest_of_the_batch_is_published(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a batch of two completions with a record from an unknown stream between them
    jobs = ingested(clock)
    for job in jobs[:2]:
        run_to_completion(job, clock)
    records = outcomes.stream_event()["Records"]
    stranger = {**records[0], "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/x/stream/1"}
    stranger["dynamodb"] = {**stranger["dynamodb"], "SequenceNumber": "999"}
    # when the batch is handled
    response = handle({"Records": [records[0], stranger, records[1]]})
    # then only the stranger is reported failed (Lambda retries from it), and both jobs published
    assert response == {"batchItemFailures": [{"itemIdentifier": "999"}]}
    assert len(outcomes.published()) == 2


def test_the_sample_stream_event_is_published(
    outcomes: Outcomes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given events/events_job_completed.json, aimed at this test's jobs table
    event = json.loads(SAMPLE_EVENT.read_text())
    for record in event["Records"]:
        record["eventSourceARN"] = outcomes.jobs.stream_arn
    # when it is handled
    response = handle(event)
    # then its job's completion is published
    assert response == {"batchItemFailures": []}
    (published,) = outcomes.published()
    assert published["detail-type"] == "Job Completed"
    assert published["detail"]["status"] == JobStatus.COMPLETED.value


# --- File Processed: all of a file's jobs ended ------------------------------------------------


def handle_until_quiet(outcomes: Outcomes) -> list[dict[str, Any]]:
    """Handles the streams' batches, as Lambda would, until no record is left; what was
    published meanwhile."""
    while (event := outcomes.stream_event())["Records"]:
        assert handle(event) == {"batchItemFailures": []}
    return outcomes.published()


def processed_events(published: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in published if e["detail-type"] == "File Processed"]


def test_a_file_is_announced_processed_once_when_its_last_job_ends(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given an ingested file: all but one of its jobs end, then the last
    jobs = ingested(clock)
    *first, last = jobs
    run_to_completion(first[0], clock)
    for job in first[1:]:
        fail_for_good(job, clock)
    # when those ends are handled, the file is not processed yet
    assert processed_events(handle_until_quiet(outcomes)) == []
    poster = f"derived/acme/{last.file_id}/{last.job_type.value}/poster.webp"
    run_to_completion(last, clock, {"width": 128, "poster": {"key": poster, "bytes": 512}})
    published = handle_until_quiet(outcomes)
    # then one File Processed carries every job's status and result summary
    (processed,) = processed_events(published)
    detail = processed["detail"]
    assert detail["id"] == last.file_id and detail["tenant"] == "acme"
    summary = {j["id"]: (j["status"], j["attempt"]) for j in detail["processed"]["jobs"]}
    assert summary == {
        first[0].id: ("completed", 1),
        **{j.id: ("failed", 1) for j in first[1:]},
        last.id: ("completed", 1),
    }
    completed = next(j for j in detail["processed"]["jobs"] if j["id"] == last.id)
    assert completed["result"]["width"] == 128
    # and the bundle, typed, in one list: the file the last job wrote
    assert [(o["job_id"], o["key"], o["kind"], o["bytes"]) for o in detail["outputs"]] == [
        (last.id, poster, "poster", 512)
    ]
    assert detail["processed"]["counts"] == {"completed": 2, "failed": len(first) - 1}
    assert (
        detail["event_id"] == f"file:{last.file_id}:processed:{detail['processed']['fingerprint']}"
    )
    # and the stored file says it is processed
    stored = FileRepository().get(last.file_id)
    assert stored is not None and stored.processed is not None
    assert stored.processed.fingerprint == detail["processed"]["fingerprint"]


def test_jobs_ending_together_and_batches_delivered_twice_record_one_completion(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given every job of a file ended before any stream record was handled
    jobs = ingested(clock)
    for job in jobs:
        run_to_completion(job, clock)
    event = outcomes.stream_event()
    # when that batch is handled twice (a retried batch: every end checks the file again)
    handle(event)
    handle(event)
    published = handle_until_quiet(outcomes)
    # then one completion was recorded, so one File Processed was published
    assert len(processed_events(published)) == 1


def test_a_retried_job_reopens_the_file_and_its_new_end_is_a_new_completion(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a processed file one of whose jobs had failed
    jobs = ingested(clock)
    for job in jobs[1:]:
        run_to_completion(job, clock)
    failed = fail_for_good(jobs[0], clock)
    (first,) = processed_events(handle_until_quiet(outcomes))
    # when the failed job is retried and completes
    clock.advance(timedelta(minutes=1))
    retry = transitions.retry(now=clock.now, by="alice", dispatch_grace=timedelta(seconds=30))
    reopened = JobRepository().apply(failed.id, failed.job_type, retry).job  # type: ignore[union-attr]
    assert reopened.status is JobStatus.PENDING
    stored = FileRepository().get(failed.file_id)
    assert stored is not None and stored.processed is not None  # the last completion stays
    run_to_completion(reopened, clock)
    (second,) = processed_events(handle_until_quiet(outcomes))
    # then the second completion is another event, with the job's second attempt
    assert second["detail"]["event_id"] != first["detail"]["event_id"]
    again = next(j for j in second["detail"]["processed"]["jobs"] if j["id"] == failed.id)
    assert (again["status"], again["attempt"]) == ("completed", 2)


def test_a_stale_completion_never_replaces_a_newer_one(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a file whose jobs all ended, read as one check saw it (the completion then)
    jobs = ingested(clock)
    fail_for_good(jobs[0], clock)
    for job in jobs[1:]:
        run_to_completion(job, clock)
    files, repository = FileRepository(), JobRepository()
    stale = completion_of(repository.get_many(j.id for j in jobs), at=clock.now)
    assert stale is not None
    # and a job re-opened and ended again, recorded by a later check
    clock.advance(timedelta(minutes=1))
    retry = transitions.retry(now=clock.now, by="alice", dispatch_grace=timedelta(seconds=30))
    reopened = repository.apply(jobs[0].id, jobs[0].job_type, retry).job  # type: ignore[union-attr]
    run_to_completion(reopened, clock)
    fresh = completion_of(repository.get_many(j.id for j in jobs), at=clock.now)
    assert fresh is not None and fresh.version > stale.version
    assert files.record_completion(jobs[0].file_id, fresh)
    # when the slow check's older completion is written after it
    written = files.record_completion(jobs[0].file_id, stale)
    # then it is refused, and the newer one stays
    stored = files.get(jobs[0].file_id)
    assert not written
    assert stored is not None and stored.processed is not None
    assert stored.processed.fingerprint == fresh.fingerprint


def test_the_last_end_of_an_ingested_file_is_checked_in_one_read(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given a file all of whose ingest jobs but one have ended and been handled
    *first, last = ingested(clock)
    for job in first:
        run_to_completion(job, clock)
    handle_until_quiet(outcomes)
    # when the last one's end is handled
    run_to_completion(last, clock)
    event = outcomes.stream_event()
    with counting_requests(runtime.dynamodb()) as counter:
        handle(event)
    # then the file and its jobs were read in one BatchGetItem (both tables), and nothing else
    assert counter.count("dynamodb", DYNAMODB_READS) == 1
    assert counter.calls["dynamodb:BatchGetItem"] == 1
    # and the completion it recorded is announced once
    assert len(processed_events(handle_until_quiet(outcomes))) == 1


def test_a_job_the_ingest_did_not_make_costs_the_check_a_second_read(
    outcomes: Outcomes, clock: FakeClock
) -> None:
    # given an ingested file given a job through the API (an id the check cannot foresee), which
    # ends before the ingest's last job
    *first, last = ingested(clock)
    stored = FileRepository().get(last.file_id)
    assert stored is not None
    extra = new_job(
        stored,
        JobType.COMPRESSION,
        now=clock.now,
        created_by="api:acme",
        dispatch=DispatchPolicy(),
        idempotency_key="client-key-1",
    )
    assert FileRepository().add_job(extra)
    for job in [*first, extra]:
        run_to_completion(job, clock)
    handle_until_quiet(outcomes)
    # when the last ingest job's end is handled
    run_to_completion(last, clock)
    event = outcomes.stream_event()
    with counting_requests(runtime.dynamodb()) as counter:
        handle(event)
    # then the check read the API job too (a second request), and saw the file complete with it
    assert counter.calls["dynamodb:BatchGetItem"] == 2
    (processed,) = processed_events(handle_until_quiet(outcomes))
    assert extra.id in {j["id"] for j in processed["detail"]["processed"]["jobs"]}


def test_a_rescan_job_is_one_of_the_file_s_jobs(outcomes: Outcomes, clock: FakeClock) -> None:
    # given a processed file
    jobs = ingested(clock)
    for job in jobs:
        run_to_completion(job, clock)
    handle_until_quiet(outcomes)
    # when a rescan job is added to it (as the rescan use case stores it)
    file_id = jobs[0].file_id
    files = FileRepository()
    stored = files.get(file_id)
    assert stored is not None
    rescan = new_job(
        stored,
        JobType.VIRUS_SCAN,
        now=clock.now,
        created_by="rescans",
        dispatch=DispatchPolicy(),
        idempotency_key=f"rescan:{file_id}:monthly",
    )
    assert files.add_job(rescan)
    assert not files.add_job(rescan)  # the same job again writes nothing
    # then the file counts it among its jobs, and is processed again only once it ends
    stored = files.get(file_id)
    assert stored is not None and rescan.id in stored.job_ids
    assert processed_events(handle_until_quiet(outcomes)) == []
    run_to_completion(rescan, clock)
    (again,) = processed_events(handle_until_quiet(outcomes))
    assert rescan.id in {j["id"] for j in again["detail"]["processed"]["jobs"]}
