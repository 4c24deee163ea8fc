"""Bulk actions by filter and failure group (POST /operations, the operations function), on moto
tables and queues built from template.yaml: a dry run counts and changes nothing; an operation
is recorded with who, when, why and what filter, runs page by page, paced, to the end; it changes
only the jobs its filter and its caller's tenant allow; run twice, it changes nothing twice; and
a page delivered twice is counted once. And the search behind it: GET /jobs by group, error text
and time.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from filejobs import runtime
from filejobs.data.index_keys import STATUS_SHARDS, TENANT_SHARDS
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.failures import group_of
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.operations import PAGE_SIZE
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs.services.job_search import MAX_READS
from functions.operations import app as operations_function
from functions.stats import app as stats_function
from tests.aws_requests import counting_requests
from tests.integration.test_api import ACME, GLOBEX, OPERATOR, Api, ingested, stack  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "cannot identify image file '/tmp/{n}/in.png'"
OTHER = "decoder sandbox: out of memory after {n} MiB"


def failed(job: ProcessingJob, error: str) -> ProcessingJob:
    """The job run once and failed for good with `error`."""
    jobs = JobRepository()
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    claimed = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(claimed, Applied)
    fail = transitions.fail(
        claimed.job, error=error, now=utcnow(), retry_at=None, retention=timedelta(days=1)
    )
    done = jobs.apply(job.id, job.job_type, fail)
    assert isinstance(done, Applied)
    return done.job


def thumbnails_failed(tenant: str, count: int, error: str) -> list[ProcessingJob]:
    made = []
    for n in range(count):
        plan = ingested(tenant, f"{uuid.uuid4().hex[:6]}-{n}.png")
        job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
        made.append(failed(job, error.format(n=n)))
    return made


def drain(api: Api) -> None:
    """Runs the operations function on every message of its queue, delayed ones included, until
    none is left."""
    sqs = boto3.client("sqs")
    url = api.queue_urls["OperationsQueue"]
    for _ in range(100):
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
        )
        messages = got.get("Messages", [])
        if not messages:
            attributes = sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
            )["Attributes"]
            if attributes["ApproximateNumberOfMessagesDelayed"] == "0":
                return
            time.sleep(1.05)  # moto holds a delayed message back its delay in real time
            continue
        for message in messages:
            event = {"Records": [sqs_record(message["Body"], message_id=message["MessageId"])]}
            answer = operations_function.handler(event, _context())
            assert answer["batchItemFailures"] == []
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    raise AssertionError("the operation never finished")


def sqs_record(body: str, message_id: str | None = None) -> dict[str, Any]:
    """A message as Lambda's SQS event source hands it over."""
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "handle",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:OperationsQueue",
        "awsRegion": "us-east-1",
    }


def _context() -> Any:
    from tests.integration.test_api import CONTEXT  # noqa: PLC0415

    return CONTEXT


def retry_group(api: Api, group: str) -> tuple[int, Any]:
    """acme starts the retry of a failure group (naming no tenant: its own)."""
    return call(
        api, "POST", "/operations", ACME,
        {"action": "retry", "filter": {"group": group}, "reason": "r"},
    )  # fmt: skip


@pytest.fixture
def api(stack: Api, monkeypatch: pytest.MonkeyPatch) -> Api:  # noqa: F811 (test_api's fixture)
    # the operations function's environment is the API's for what both read (the same stack)
    monkeypatch.setenv("OPERATION_RATE", "50")
    runtime.reset()
    runtime.tables()
    return stack


def call(
    api: Api, method: str, path: str, who: dict[str, str], body: Any = None, key: str = ""
) -> tuple[int, Any]:
    headers = {"Idempotency-Key": key} if key else None
    response = api.raw(
        method, path, who=who, body=None if body is None else json.dumps(body), headers=headers
    )
    return response["statusCode"], json.loads(response["body"])


def test_a_failure_group_is_dry_run_then_retried_page_by_page_to_the_end(api: Api) -> None:
    # given 60 thumbnails of acme failed the same way (numbers and paths differing), 3 another way
    broken = thumbnails_failed("acme", PAGE_SIZE + 10, BROKEN)
    others = thumbnails_failed("acme", 3, OTHER)
    group = group_of(JobType.THUMBNAIL_GENERATION, broken[0].error_message).id
    assert {group_of(j.job_type, j.error_message).id for j in broken} == {group}
    request = {"action": "retry", "filter": {"group": group}, "reason": "bad deploy fixed"}
    # when acme asks for a dry run
    status, preview = call(api, "POST", "/operations", ACME, {**request, "dry_run": True})
    # then it counts the group's jobs, shows a sample of them and changes nothing
    assert status == 200 and preview["dry_run"] is True
    assert preview["matched"] == len(broken) and preview["exact"] is True
    assert {j["id"] for j in preview["sample"]} <= {j.id for j in broken}
    assert len(preview["sample"]) == 10
    assert all(JobRepository().get(j.id).status is JobStatus.FAILED for j in broken)  # type: ignore[union-attr]
    # when acme starts it
    status, operation = call(api, "POST", "/operations", ACME, request, key="incident-42")
    # then it is recorded with who, why and what, and running
    assert status == 202
    assert operation["status"] == "running" and operation["matched"] == len(broken)
    assert operation["created_by"] == "api:tenant:acme" and operation["reason"] == request["reason"]
    assert operation["filter"] == {"group": group, "tenant": "acme"}
    # when the operations function works its queue
    drain(api)
    # then every job of the group is pending again and sent to its queue, the others untouched
    status, done = call(api, "GET", f"/operations/{operation['id']}", ACME)
    assert status == 200 and done["status"] == "succeeded", done
    assert (done["processed"], done["changed"], done["skipped"], done["errors"]) == (
        len(broken),
        len(broken),
        0,
        0,
    )
    assert done["finished_at"] is not None
    jobs = JobRepository()
    assert all(jobs.get(j.id).status is JobStatus.PENDING for j in broken)  # type: ignore[union-attr]
    assert all(jobs.get(j.id).status is JobStatus.FAILED for j in others)  # type: ignore[union-attr]
    # and the audit list shows it
    status, listed = call(api, "GET", "/operations", ACME)
    assert [o["id"] for o in listed["operations"]] == [operation["id"]]


def test_the_same_key_answers_the_same_operation_and_a_rerun_changes_nothing(api: Api) -> None:
    broken = thumbnails_failed("acme", 3, BROKEN)
    group = group_of(JobType.THUMBNAIL_GENERATION, broken[0].error_message).id
    request = {"action": "retry", "filter": {"group": group}, "reason": "again"}
    # when the same request is sent twice with one key
    first = call(api, "POST", "/operations", ACME, request, key="k-1")
    second = call(api, "POST", "/operations", ACME, request, key="k-1")
    # then the second answers the first's operation (200), and one message was sent
    assert (first[0], second[0]) == (202, 200)
    assert first[1]["id"] == second[1]["id"]
    # and the key with another request is a conflict
    status, _ = call(api, "POST", "/operations", ACME, {**request, "reason": "other"}, key="k-1")
    assert status == 409
    drain(api)
    # when the same filter runs again as a new operation
    status, rerun = call(api, "POST", "/operations", ACME, request, key="k-2")
    # then it matches nothing (the group's jobs are pending now) and changes nothing
    assert status == 202 and rerun["matched"] == 0
    drain(api)
    status, done = call(api, "GET", f"/operations/{rerun['id']}", ACME)
    assert done["status"] == "succeeded" and done["changed"] == 0


def test_a_tenants_operation_touches_only_its_own_jobs(api: Api) -> None:
    # given acme's and globex's thumbnails failed the same way
    mine = thumbnails_failed("acme", 2, BROKEN)
    theirs = thumbnails_failed("globex", 2, BROKEN)
    group = group_of(JobType.THUMBNAIL_GENERATION, mine[0].error_message).id
    # when acme retries the group naming no tenant, and names globex in another request
    status, operation = retry_group(api, group)
    foreign = call(
        api,
        "POST",
        "/operations",
        ACME,
        {"action": "retry", "filter": {"group": group, "tenant": "globex"}, "reason": "r"},
    )
    drain(api)
    # then only acme's jobs were retried, naming globex is 404, and globex cannot see the op
    jobs = JobRepository()
    assert status == 202 and operation["matched"] == 2
    assert all(jobs.get(j.id).status is JobStatus.PENDING for j in mine)  # type: ignore[union-attr]
    assert all(jobs.get(j.id).status is JobStatus.FAILED for j in theirs)  # type: ignore[union-attr]
    assert foreign[0] == 404
    assert call(api, "GET", f"/operations/{operation['id']}", GLOBEX)[0] == 404
    assert call(api, "GET", "/operations", GLOBEX)[1]["operations"] == []


def test_an_operator_cancels_across_tenants_and_deletes_by_filter(api: Api) -> None:
    # given pending thumbnails of two tenants
    pending = [ingested(t, f"{n}.png").jobs[0] for t in ("acme", "globex") for n in range(2)]
    job_type = pending[0].job_type.value
    # when an operator cancels every pending job of the type
    status, operation = call(
        api,
        "POST",
        "/operations",
        OPERATOR,
        {"action": "cancel", "filter": {"job_type": job_type}, "reason": "incident"},
    )
    drain(api)
    # then each is cancelled, with the operation's reason
    jobs = JobRepository()
    assert status == 202 and operation["matched"] == len(pending)
    for job in pending:
        found = jobs.get(job.id)
        assert found is not None and found.status is JobStatus.CANCELLED
        assert found.cancel_reason == "incident"
    # when the operator deletes acme's cancelled jobs of the type
    call(
        api,
        "POST",
        "/operations",
        OPERATOR,
        {
            "action": "delete",
            "filter": {"tenant": "acme", "job_type": job_type, "status": "cancelled"},
            "reason": "clean up",
        },
    )
    drain(api)
    # then acme's are deleted, and globex's remain
    assert all(
        (jobs.get(j.id).metadata.deleted_at is not None) == (j.tenant == "acme")  # type: ignore[union-attr]
        for j in pending
    )


def test_a_page_run_twice_is_recorded_once(api: Api) -> None:
    # given a started operation over 3 failed jobs
    broken = thumbnails_failed("acme", 3, BROKEN)
    group = group_of(JobType.THUMBNAIL_GENERATION, broken[0].error_message).id
    _, operation = retry_group(api, group)
    # when its message is handled twice (a duplicate delivery), the second after the first
    bulk = runtime.bulk_operations()
    first = bulk.advance(operation["id"])
    again = bulk.advance(operation["id"])
    # then the page was counted once: the second run found the operation finished
    assert first is not None and again is not None
    assert again.progress == first.progress
    assert first.progress.changed == 3


def test_pages_are_paced_to_the_operation_rate(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a rate of 10 jobs a second and a group of more than a page
    monkeypatch.setenv("OPERATION_RATE", "10")
    runtime.reset()
    runtime.tables()
    broken = thumbnails_failed("acme", PAGE_SIZE + 1, BROKEN)
    group = group_of(JobType.THUMBNAIL_GENERATION, broken[0].error_message).id
    _, operation = retry_group(api, group)
    sqs = boto3.client("sqs")
    url = api.queue_urls["OperationsQueue"]
    sqs.purge_queue(QueueUrl=url)
    # when its first page runs
    runtime.bulk_operations().advance(operation["id"])
    # then the next page is sent for PAGE_SIZE / rate seconds later
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None


def test_a_message_that_names_no_operation_is_dropped_without_failing_the_batch(api: Api) -> None:
    bodies = ["not json", "{}", '{"operation_id": "op-../../x"}', '{"operation_id": 7}']
    for body in bodies:
        answer = operations_function.handler({"Records": [sqs_record(body)]}, _context())
        assert answer == {"batchItemFailures": []}, body
    # and an operation that does not exist is acknowledged too
    missing = json.dumps({"operation_id": "op-20260101T000000Z-0123abcd"})
    answer = operations_function.handler({"Records": [sqs_record(missing)]}, _context())
    assert answer == {"batchItemFailures": []}


@pytest.mark.parametrize(
    "body",
    [
        {"filter": {}, "reason": "r"},
        {"action": "explode", "filter": {}, "reason": "r"},
        {"action": {}, "filter": {}, "reason": "r"},
        {"action": "retry", "reason": "r"},
        {"action": "retry", "filter": {}},
        {"action": "retry", "filter": {"group": "not-a-group"}, "reason": "r"},
        {"action": "retry", "filter": {"since": "yesterday"}, "reason": "r"},
        {"action": "retry", "filter": {"colour": "red"}, "reason": "r"},
        {"action": "retry", "filter": {}, "reason": "r", "dry_run": "yes"},
    ],
)
def test_an_invalid_operation_is_refused_before_anything_is_written(
    api: Api, body: dict[str, Any]
) -> None:
    status, answer = call(api, "POST", "/operations", ACME, body)
    assert status == 422, answer
    assert call(api, "GET", "/operations", OPERATOR)[1]["operations"] == []


def test_an_operator_filter_across_tenants_must_name_a_status_or_group(api: Api) -> None:
    status, answer = call(
        api, "POST", "/operations", OPERATOR, {"action": "rescan", "filter": {}, "reason": "r"}
    )
    assert status == 400 and "status" in answer["error"]["message"]


# --- the search behind it ------------------------------------------------------------------------


def test_jobs_are_found_by_failure_group_error_text_and_time(api: Api) -> None:
    broken = thumbnails_failed("acme", 3, BROKEN)
    others = thumbnails_failed("acme", 2, OTHER)
    group = group_of(JobType.THUMBNAIL_GENERATION, broken[0].error_message).id
    # by group (an operator, across tenants)
    status, by_group = api.call("GET", "/jobs", who=OPERATOR, query={"group": group})
    assert status == 200 and {j["id"] for j in by_group["jobs"]} == {j.id for j in broken}
    # by error text (a tenant)
    status, by_text = api.call("GET", "/jobs", who=ACME, query={"error": "out of memory"})
    assert status == 200 and {j["id"] for j in by_text["jobs"]} == {j.id for j in others}
    # by time: nothing was created before an hour ago
    earlier = (utcnow() - timedelta(hours=1)).isoformat()
    status, none = api.call("GET", "/jobs", who=ACME, query={"until": earlier})
    assert status == 200 and none["jobs"] == []
    # and a tenant's search never shows another tenant's
    thumbnails_failed("globex", 1, BROKEN)
    _, own = api.call("GET", "/jobs", who=ACME, query={"group": group})
    assert {j["tenant"] for j in own["jobs"]} == {"acme"}


def test_files_are_listed_by_key_prefix(api: Api) -> None:
    for name in ("a/1.png", "a/2.png", "b/1.png"):
        ingested("acme", name)
    ingested("globex", "a/1.png")
    status, listing = api.call("GET", "/files", who=ACME, query={"prefix": "uploads/acme/a/"})
    assert status == 200
    assert [f["key"] for f in listing["files"]] == ["uploads/acme/a/1.png", "uploads/acme/a/2.png"]
    # an operator names the tenant; a tenant naming another is 404
    assert api.call("GET", "/files", who=OPERATOR, query={"prefix": "uploads/"})[0] == 400
    assert api.call("GET", "/files", who=ACME, query={"prefix": "x", "tenant": "globex"})[0] == 404


def stored_jobs(tenant: str) -> int:
    return len(JobRepository().recent_jobs(tenant, limit=1000))


def ingested_until(tenant: str, jobs: int) -> None:
    """Ingests PNGs of `tenant` until at least `jobs` of its jobs are stored. Counted from each
    ingest's plan rather than by listing the table after every file: a listing reads every job
    stored, so polling made seeding quadratic (199 listings, 96% of this test's time)."""
    stored = stored_jobs(tenant)
    while stored < jobs:
        stored += len(ingested(tenant, f"{uuid.uuid4().hex}.png").jobs)
    # the count the plans promise is what the table holds
    assert stored_jobs(tenant) == stored


def search_requests(api: Api, who: dict[str, str], query: dict[str, str]) -> int:
    with counting_requests() as counter:
        status, _ = api.call("GET", "/jobs", who=who, query=query)
    assert status == 200
    return counter.count("dynamodb")


@pytest.mark.slow
def test_a_search_reads_a_bounded_number_of_pages_however_many_jobs_are_stored(api: Api) -> None:
    # given acme's files, their jobs pending, and 3 thumbnails failed
    thumbnails_failed("acme", 3, BROKEN)
    # each listing page: one Query per index shard and one BatchGetItem for the whole items
    tenant_bound = MAX_READS * (TENANT_SHARDS + 1)
    type_bound = MAX_READS * (STATUS_SHARDS + 1)
    searches = [
        (ACME, {"status": "failed"}, tenant_bound),
        (ACME, {"error": "cannot identify"}, tenant_bound),
        (OPERATOR, {"status": "failed", "job_type": "thumbnail_generation"}, type_bound),
    ]
    counts = []
    for files in (15, 150):
        ingested_until("acme", files * 4)
        # when each search runs
        counts.append([search_requests(api, who, query) for who, query, _ in searches])
    # then none reads more than its bound, with 60 jobs stored or ten times as many
    for count in counts:
        assert all(n <= bound for n, (_, _, bound) in zip(count, searches, strict=True)), counts
    # and the operators' search by status and type (its own index) reads the same
    assert counts[0][2] == counts[1][2], counts


def test_the_sample_page_event_for_an_unknown_operation_is_acknowledged(api: Api) -> None:
    event = json.loads((ROOT / "events" / "operations_page.json").read_text())
    assert operations_function.handler(event, _context()) == {"batchItemFailures": []}


# --- the overview and the failure groups ---------------------------------------------------------


def test_the_overview_lists_every_queue_and_shows_dead_letters_to_operators_only(
    api: Api,
) -> None:
    # given an empty stack with one message in the thumbnails' dead-letter queue
    boto3.client("sqs").send_message(
        QueueUrl=api.queue_urls["ThumbnailGenerationDeadLetterQueue"], MessageBody="{}"
    )
    # when a tenant and an operator read the overview
    status, mine = api.call("GET", "/overview", who=ACME)
    _, everyone = api.call("GET", "/overview", who=OPERATOR)
    # then each job type's three lanes are rows, with nothing counted
    assert status == 200 and mine["scope"] == "acme" and everyone["scope"] == "all"
    assert {(q["job_type"], q["lane"]) for q in mine["queues"]} == {
        (t.value, lane) for t in JobType for lane in ("normal", "high", "low")
    }
    assert all(q["pending"] == q["failed_last_day"] == 0 for q in mine["queues"])
    assert len(mine["series"]) == 60 and mine["latency_seconds"] is None
    # and only the operator sees the dead-letter queues, the message counted
    assert mine["dead_letters"] == []
    depths = {d["queue"]: d["depth"] for d in everyone["dead_letters"]}
    assert depths["thumbnail_generation"] == 1 and len(depths) == len(JobType)
    # and no definitions are published in this stack
    assert everyone["virus_scan"]["definitions"] is None
    # and a tenant naming another is told it does not exist
    assert api.call("GET", "/overview", who=ACME, query={"tenant": "globex"})[0] == 404


def test_the_failure_groups_come_from_the_jobs_stream(api: Api) -> None:
    # given failed thumbnails, their table's stream records fed to the stats function
    from tests.streams import StreamTap  # noqa: PLC0415

    tap = StreamTap.of_table(boto3.client("dynamodb"), os.environ["JOBS_TABLE_NAME"])
    broken = thumbnails_failed("acme", 3, BROKEN)
    event = {
        "Records": tap.read(),
        "shardId": "shard-1",
        "eventSourceARN": tap.stream_arn,
        "window": {"start": "2026-12-04T12:00:00Z", "end": "2026-12-04T12:15:00Z"},
        "state": {},
        "isFinalInvokeForWindow": False,
        "isWindowTerminatedEarly": False,
    }
    stats_function.handler(event, _context())
    group = group_of(JobType.THUMBNAIL_GENERATION, broken[0].error_message)
    # when acme reads its failure groups
    status, answer = api.call("GET", "/failures", who=ACME)
    # then the three are one group, with a sample
    assert status == 200
    [found] = answer["groups"]
    assert (found["id"], found["count"], found["fingerprint"]) == (group.id, 3, group.fingerprint)
    assert found["sample"]["job_id"] in {j.id for j in broken}
    # and a dry run of the group's retry counts them from the aggregate
    _, preview = call(
        api, "POST", "/operations", ACME,
        {"action": "retry", "filter": {"group": group.id}, "reason": "r", "dry_run": True},
    )  # fmt: skip
    assert (preview["matched"], preview["exact"]) == (3, True)
