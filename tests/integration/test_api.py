"""The status API through its Lambda handler: API Gateway (REST) events, as the local stack sends
them (caller identity in the authorizer context), against moto tables and queues built from
template.yaml. Cancel and retry are real conditional writes."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs_dev.infra.template import (
    create_buckets,
    create_queues,
    create_secrets,
    create_tables,
    function_definitions,
    load_template,
    queue_arns,
    resources_of_type,
)
from functions.api import app as api
from tests.factories import ingest_plan

TEMPLATE = load_template()
BUCKET = "uploads-bucket"
ACME = {"tenant": "acme", "role": "tenant"}
GLOBEX = {"tenant": "globex", "role": "tenant"}
OPERATOR = {"role": "operator"}


@dataclass
class _Context:
    function_name: str = "api"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:api"
    aws_request_id: str = "7a1c3f0e-8d2b-4f5a-9c6e-1b2d3e4f5a6b"


CONTEXT = cast(LambdaContext, _Context())


@dataclass
class Api:
    queue_urls: dict[str, str]

    def call(
        self,
        method: str,
        path: str,
        *,
        who: dict[str, str] | None,
        query: dict[str, str] | None = None,
        body: str | None = None,
    ) -> tuple[int, Any]:
        response = self.raw(method, path, who=who, query=query, body=body)
        return response["statusCode"], json.loads(response["body"])

    def raw(
        self,
        method: str,
        path: str,
        *,
        who: dict[str, str] | None,
        query: dict[str, str] | None = None,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The handler's whole response (status, headers, body as sent)."""
        sent = {"Accept": "application/json", **(headers or {})}
        event: dict[str, Any] = {
            "resource": path,
            "path": path,
            "httpMethod": method,
            "headers": sent,
            "multiValueHeaders": {name: [value] for name, value in sent.items()},
            "queryStringParameters": query,
            "multiValueQueryStringParameters": (
                None if query is None else {k: [v] for k, v in query.items()}
            ),
            "pathParameters": None,
            "stageVariables": None,
            "requestContext": {
                "resourcePath": path,
                "httpMethod": method,
                "path": f"/v1{path}",
                "stage": "v1",
                "requestId": str(uuid.uuid4()),
                "accountId": "123456789012",
                "apiId": "abc123",
                "identity": {"sourceIp": "203.0.113.10"},
                **({} if who is None else {"authorizer": who}),
            },
            "body": body,
            "isBase64Encoded": False,
        }
        response: dict[str, Any] = api.handler(event, CONTEXT)
        assert "Traceback" not in response["body"]
        return response

    def messages(self, logical_id: str) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs")
        got = sqs.receive_message(QueueUrl=self.queue_urls[logical_id], MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in got.get("Messages", [])]


@pytest.fixture
def stack(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    suffix = uuid.uuid4().hex[:8]
    tables = {t: f"{t}-{suffix}" for t in resources_of_type(TEMPLATE, "AWS::DynamoDB::Table")}
    create_tables(boto3.client("dynamodb"), tables, TEMPLATE)
    queues = {q: f"{q}-{suffix}" for q in resources_of_type(TEMPLATE, "AWS::SQS::Queue")}
    urls = create_queues(boto3.client("sqs"), queues, TEMPLATE)
    groups = {
        g: f"{g}-{suffix}" for g in resources_of_type(TEMPLATE, "AWS::Scheduler::ScheduleGroup")
    }
    for group in groups.values():
        boto3.client("scheduler").create_schedule_group(Name=group)
    # The page-token secret, made as the stack makes it (a random value in Secrets Manager).
    secrets = create_secrets(
        boto3.client("secretsmanager"),
        {s: f"{s}-{suffix}" for s in resources_of_type(TEMPLATE, "AWS::SecretsManager::Secret")},
        TEMPLATE,
    )
    # The buckets with their notifications (DELETE /files/{id} erases in them).
    buckets = {b: f"{b.lower()}-{suffix}" for b in resources_of_type(TEMPLATE, "AWS::S3::Bucket")}
    create_buckets(boto3.client("s3"), buckets, queue_arns(boto3.client("sqs"), urls), TEMPLATE)
    refs = {**tables, **urls, **groups, **secrets, **buckets}
    arns = {
        **queue_arns(boto3.client("sqs"), urls),
        "SchedulerRole": f"arn:aws:iam::123456789012:role/SchedulerRole-{suffix}",
        # The webhook secrets' key (moto's KMS), which the API seals new secrets with.
        "WebhookSecretsKey": boto3.client("kms").create_key()["KeyMetadata"]["Arn"],
    }
    parameters = TEMPLATE.get("Parameters", {})
    for name, value in function_definitions(TEMPLATE)["ApiFunction"].environment.items():
        resolved = value
        if isinstance(value, dict) and "Ref" in value:
            target = value["Ref"]
            resolved = refs.get(target, parameters.get(target, {}).get("Default", "unused"))
        elif isinstance(value, dict) and "Fn::GetAtt" in value:
            found = value["Fn::GetAtt"]
            target, attribute = found.split(".", 1) if isinstance(found, str) else found
            # a role's unique id: no IAM caller here (see every_route)
            resolved = arns.get(target, "unused") if attribute == "Arn" else "unused"
        elif isinstance(value, dict):
            resolved = "unused"
        monkeypatch.setenv(name, str(resolved))
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "filejobs-test")
    monkeypatch.delenv("API_TOKEN_SECRET", raising=False)
    runtime.reset()
    runtime.tables()
    yield Api(urls)
    runtime.reset()


def ingested(tenant: str, name: str, *, minutes_ago: int = 0) -> IngestPlan:
    plan = ingest_plan(
        utcnow() - timedelta(minutes=minutes_ago), "image/png", tenant=tenant, name=name
    )
    FileRepository().record_ingest(plan)
    return plan


def error_code(body: Any) -> str:
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


def cancelled(job: ProcessingJob) -> ProcessingJob:
    cancel = transitions.cancel(now=utcnow(), by="test", reason="r", retention=timedelta(days=1))
    result = JobRepository().apply(job.id, job.job_type, cancel)
    assert isinstance(result, Applied)
    return result.job


# --- identity -----------------------------------------------------------------------------------


def test_health_answers_without_reading_the_caller_or_the_table(stack: Api) -> None:
    # (API Gateway's IAM auth, or the local router, has refused an anonymous caller before this)
    assert stack.call("GET", "/health", who=None) == (200, {"status": "ok"})


@pytest.mark.parametrize(
    "who",
    [
        None,
        {},
        {"role": "admin", "tenant": "acme"},
        {"role": "tenant"},
        {"role": "tenant", "tenant": "a#b"},
    ],
)
def test_a_request_without_a_valid_caller_is_401(stack: Api, who: dict[str, str] | None) -> None:
    # given a job, when asked for with a missing or invalid identity
    job = ingested("acme", "a.png").jobs[0]
    status, body = stack.call("GET", f"/jobs/{job.id}", who=who)
    # then 401 in the standard shape
    assert (status, error_code(body)) == (401, "unauthorized")


def test_an_unknown_route_is_404_in_the_standard_shape(stack: Api) -> None:
    status, body = stack.call("GET", "/nowhere", who=ACME)
    assert (status, error_code(body)) == (404, "not_found")


# --- GET /jobs/{job_id} ---------------------------------------------------------------------------


def test_a_tenant_gets_its_own_job_and_a_foreign_one_is_404(stack: Api) -> None:
    # given a job of acme
    job = ingested("acme", "a.png").jobs[0]
    # when acme, globex and an operator ask for it
    own = stack.call("GET", f"/jobs/{job.id}", who=ACME)
    foreign = stack.call("GET", f"/jobs/{job.id}", who=GLOBEX)
    operator = stack.call("GET", f"/jobs/{job.id}", who=OPERATOR)
    # then acme and the operator see it; globex is told it does not exist
    assert own[0] == 200 and own[1]["id"] == job.id
    assert operator[0] == 200 and operator[1]["id"] == job.id
    assert foreign[0] == 404 and error_code(foreign[1]) == "not_found"
    # worded exactly as for an id that does not exist
    assert foreign[1]["error"]["message"] == f"no job {job.id}"


_SOME_ID = "0b6c4f1e-8d1a-4c53-9a55-3f0f1f6f2a10"


@pytest.mark.parametrize(
    "bad",
    [
        "not-a-uuid",
        "..%2F..%2Fetc",
        "1' OR '1'='1",
        # forms uuid.UUID() parses, but no stored id is written in
        _SOME_ID.replace("-", ""),
        f"{{{_SOME_ID}}}",
        f"urn:uuid:{_SOME_ID}",
    ],
)
def test_ids_that_are_not_uuids_are_400(stack: Api, bad: str) -> None:
    for method, path in [
        ("GET", f"/jobs/{bad}"),
        ("POST", f"/jobs/{bad}/cancel"),
        ("POST", f"/jobs/{bad}/retry"),
        ("GET", f"/files/{bad}"),
        ("GET", f"/files/{bad}/jobs"),
    ]:
        status, body = stack.call(method, path, who=OPERATOR)
        assert (status, error_code(body)) == (400, "bad_request"), (method, path)
        assert "must be a UUID" in body["error"]["message"]


def test_an_upper_case_id_names_the_same_job_and_file(stack: Api) -> None:
    # given a job of acme, when acme asks for it and its file with their ids in upper case
    plan = ingested("acme", "a.png")
    job = stack.call("GET", f"/jobs/{plan.jobs[0].id.upper()}", who=ACME)
    file = stack.call("GET", f"/files/{plan.file.id.upper()}", who=ACME)
    # then they are found, and answered with their ids as stored
    assert (job[0], job[1]["id"]) == (200, plan.jobs[0].id)
    assert (file[0], file[1]["id"]) == (200, plan.file.id)


# --- files ------------------------------------------------------------------------------------


def test_a_file_comes_with_its_jobs(stack: Api) -> None:
    # given a file of acme with its jobs
    plan = ingested("acme", "a.png")
    # when acme asks for it
    status, body = stack.call("GET", f"/files/{plan.file.id}", who=ACME)
    # then its view lists every job
    assert status == 200
    assert body["id"] == plan.file.id and body["tenant"] == "acme"
    assert sorted(j["id"] for j in body["jobs"]) == sorted(j.id for j in plan.jobs)


def test_a_foreign_or_unknown_file_is_404_on_every_file_route(stack: Api) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    # when globex asks for it (and anyone for a file that does not exist)
    for path in (f"/files/{plan.file.id}", f"/files/{plan.file.id}/jobs"):
        for who, file_path in (
            (GLOBEX, path),
            (ACME, path.replace(plan.file.id, str(uuid.uuid4()))),
        ):
            status, body = stack.call("GET", file_path, who=who)
            # then 404
            assert (status, error_code(body)) == (404, "not_found"), file_path
    # and the operator sees it
    assert stack.call("GET", f"/files/{plan.file.id}", who=OPERATOR)[0] == 200


def test_a_file_is_found_by_its_object_key_by_its_tenant_only(stack: Api) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    query = {"key": plan.file.key, "bucket": BUCKET}
    # when acme, globex and the operator look its key up
    own = stack.call("GET", "/files", who=ACME, query=query)
    foreign = stack.call("GET", "/files", who=GLOBEX, query=query)
    operator = stack.call("GET", "/files", who=OPERATOR, query=query)
    # then acme and the operator find it, globex does not
    assert own[0] == 200 and [f["id"] for f in own[1]["files"]] == [plan.file.id]
    assert operator[0] == 200 and [f["id"] for f in operator[1]["files"]] == [plan.file.id]
    assert foreign[0] == 404 and error_code(foreign[1]) == "not_found"
    # and an unknown key is 404, a missing key 400
    unknown = stack.call(
        "GET", "/files", who=ACME, query={"key": "uploads/acme/x", "bucket": BUCKET}
    )
    assert unknown[0] == 404
    assert stack.call("GET", "/files", who=ACME, query={"bucket": BUCKET})[0] == 400
    # and without a bucket the key is looked up in the stack's uploads bucket (UPLOADS_BUCKET),
    # which is not where this test's file was recorded
    assert stack.call("GET", "/files", who=ACME, query={"key": plan.file.key})[0] == 404


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"key": "a.png", "bucket": "Not_A_Bucket"}, 400),
        ({"key": "a.png", "bucket": "b" * 64}, 400),
        ({"key": "a.png", "bucket": ""}, 400),
        ({"key": "half a pair \ud800"}, 400),
        ({"key": "x" * 1025}, 400),
        # 1,000 characters but 2,000 bytes: longer than any S3 key, so no file has it
        ({"key": "\u00e9" * 1000}, 404),
    ],
)
def test_a_key_lookup_answers_a_name_no_s3_object_can_have_without_error(
    stack: Api, query: dict[str, str], status: int
) -> None:
    assert stack.call("GET", "/files", who=ACME, query=query)[0] == status


def test_a_files_jobs_filter_by_status(stack: Api) -> None:
    # given a file whose first job was cancelled
    plan = ingested("acme", "a.png")
    first = cancelled(plan.jobs[0])
    path = f"/files/{plan.file.id}/jobs"
    # when its jobs are asked for, all and cancelled only
    everything = stack.call("GET", path, who=ACME)
    only = stack.call("GET", path, who=ACME, query={"status": "cancelled"})
    # then the filter applies
    assert len(everything[1]["jobs"]) == len(plan.jobs)
    assert [j["id"] for j in only[1]["jobs"]] == [first.id]
    # and a status that does not exist is 400
    status, body = stack.call("GET", path, who=ACME, query={"status": "done"})
    assert (status, error_code(body)) == (400, "bad_request")


# --- GET /jobs ----------------------------------------------------------------------------------


def test_a_tenant_listing_never_shows_another_tenants_jobs(stack: Api) -> None:
    # given jobs of two tenants
    acme = ingested("acme", "a.png")
    globex = ingested("globex", "g.png")
    # when acme lists its jobs (even naming globex)
    status, body = stack.call("GET", "/jobs", who=ACME)
    named = stack.call("GET", "/jobs", who=ACME, query={"tenant": "globex"})
    # then it sees its own only, and naming another tenant is 404
    assert status == 200
    assert {j["id"] for j in body["jobs"]} == {j.id for j in acme.jobs}
    assert named[0] == 404
    # and the operator sees either tenant's, and both in a status listing
    operator = stack.call("GET", "/jobs", who=OPERATOR, query={"tenant": "globex"})
    assert {j["id"] for j in operator[1]["jobs"]} == {j.id for j in globex.jobs}
    pending = stack.call("GET", "/jobs", who=OPERATOR, query={"status": "pending", "limit": "100"})
    assert {j["id"] for j in pending[1]["jobs"]} == {j.id for j in acme.jobs + globex.jobs}
    assert pending[1]["order"] == "queue"


def test_listing_filters_by_status_and_type(stack: Api) -> None:
    # given a file with one job cancelled
    plan = ingested("acme", "a.png")
    first = cancelled(plan.jobs[0])
    # when listed by status, and by type
    by_status = stack.call("GET", "/jobs", who=ACME, query={"status": "cancelled"})
    by_type = stack.call("GET", "/jobs", who=ACME, query={"job_type": first.job_type.value})
    # then each filter applies
    assert [j["id"] for j in by_status[1]["jobs"]] == [first.id]
    assert [j["id"] for j in by_type[1]["jobs"]] == [first.id]


@pytest.mark.parametrize(
    ("who", "query"),
    [
        (ACME, {"limit": "0"}),
        (ACME, {"limit": "101"}),
        (ACME, {"limit": "ten"}),
        (ACME, {"limit": "\u00b2"}),  # a digit to str.isdigit(), not to int()
        # an empty value is not an absent one
        (ACME, {"limit": ""}),
        (ACME, {"status": ""}),
        (ACME, {"job_type": ""}),
        (OPERATOR, {"tenant": ""}),
        (OPERATOR, {"tenant": "no spaces"}),
        (ACME, {"status": "done"}),
        (ACME, {"job_type": "ocr"}),
        (ACME, {"next_token": "%%%"}),
        (OPERATOR, {}),
    ],
)
def test_invalid_listing_parameters_are_400(
    stack: Api, who: dict[str, str], query: dict[str, str]
) -> None:
    status, body = stack.call("GET", "/jobs", who=who, query=query)
    assert (status, error_code(body)) == (400, "bad_request")


def pages(stack: Api, who: dict[str, str], query: dict[str, str]) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        status, body = stack.call(
            "GET", "/jobs", who=who, query={**query, **({"next_token": token} if token else {})}
        )
        assert status == 200, body
        got.append(body)
        token = body["next_token"]
        if token is None:
            return got


def test_pages_round_trip_newest_first_without_gaps_or_repeats(stack: Api) -> None:
    # given three files of acme, a minute apart, and one of globex
    plans = [ingested("acme", f"{n}.png", minutes_ago=n) for n in range(3)]
    ingested("globex", "g.png")
    expected = [j.id for p in plans for j in sorted(p.jobs, key=lambda j: j.id, reverse=True)]
    # when acme pages through its jobs a few at a time
    got = pages(stack, ACME, {"limit": "4"})
    # then there are several pages, newest first, every job once, none of globex
    assert len(got) >= 2
    assert [j["id"] for page in got for j in page["jobs"]] == expected
    assert all(len(page["jobs"]) <= 4 for page in got)


def test_status_pages_round_trip_for_an_operator(stack: Api) -> None:
    # given pending jobs of two tenants
    plans = [ingested("acme", "a.png"), ingested("globex", "g.png", minutes_ago=1)]
    # when the operator pages through pending jobs
    got = pages(stack, OPERATOR, {"status": "pending", "limit": "3"})
    # then every job appears once
    ids = [j["id"] for page in got for j in page["jobs"]]
    assert len(got) >= 2
    assert sorted(ids) == sorted(j.id for p in plans for j in p.jobs)


def tampered(token: str, change: dict[str, Any]) -> str:
    body, dot, signature = token.partition(".")
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    data["scope"].update(change)
    encoded = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return encoded + dot + signature


def without_page_token_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API as it answers without a secret to sign its page tokens with (the template always
    gives it one: what is left then is each listing's own scope)."""
    monkeypatch.delenv("API_TOKEN_SECRET_ARN")
    runtime.reset()
    runtime.tables()


def test_a_page_token_is_bound_to_its_caller_and_listing(
    stack: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_page_token_secret(monkeypatch)
    # given a first page of acme's jobs
    for n in range(2):
        ingested("acme", f"{n}.png", minutes_ago=n)
        ingested("globex", f"{n}.png", minutes_ago=n)
    _, first = stack.call("GET", "/jobs", who=ACME, query={"limit": "2"})
    token = first["next_token"]
    assert token
    # when the token is replayed by globex, rewritten to name globex, or used for another listing
    attempts = [
        (GLOBEX, {"next_token": token}),
        (ACME, {"next_token": tampered(token, {"tenant": "globex", "caller": "tenant:globex"})}),
        (ACME, {"next_token": token, "status": "pending"}),
        (ACME, {"next_token": token[:-3]}),
    ]
    for who, query in attempts:
        status, body = stack.call("GET", "/jobs", who=who, query={"limit": "2", **query})
        # then every one is refused
        assert (status, error_code(body)) == (400, "bad_request"), query
    # and an unsigned token globex writes for itself reads globex's own partitions only
    forged = tampered(token, {"tenant": "globex", "caller": "tenant:globex"})
    status, body = stack.call("GET", "/jobs", who=GLOBEX, query={"next_token": forged})
    assert status == 200 and {j["tenant"] for j in body["jobs"]} <= {"globex"}


def test_a_signed_token_refuses_any_change(stack: Api) -> None:
    # given the stack's page-token secret (ApiPageTokenSecret), and a first page signed with it
    for n in range(2):
        ingested("acme", f"{n}.png", minutes_ago=n)
    _, first = stack.call("GET", "/jobs", who=ACME, query={"limit": "2"})
    token = first["next_token"]
    assert "." in token
    # when it is used as is, then it works
    status, second = stack.call("GET", "/jobs", who=ACME, query={"limit": "2", "next_token": token})
    assert status == 200 and second["jobs"]
    # when its signature is dropped or its body changed, then it is refused
    for forged in (token.partition(".")[0], tampered(token, {"job_type": None})):
        status, body = stack.call(
            "GET", "/jobs", who=ACME, query={"limit": "2", "next_token": forged}
        )
        assert (status, error_code(body)) == (400, "bad_request")


def test_page_tokens_are_signed_with_the_secret_the_stack_keeps_in_secrets_manager(
    stack: Api,
) -> None:
    # given a token signed while the stack's secret held its first value
    for n in range(3):
        ingested("acme", f"{n}.png", minutes_ago=n)
    _, first = stack.call("GET", "/jobs", who=ACME, query={"limit": "1"})
    token = first["next_token"]
    # when the secret gets a new value (a rotation) and the API reads it again
    boto3.client("secretsmanager").put_secret_value(
        SecretId=os.environ["API_TOKEN_SECRET_ARN"], SecretString=uuid.uuid4().hex
    )
    runtime.reset()
    runtime.tables()
    # then the old token no longer verifies, and a new first page's does
    status, body = stack.call("GET", "/jobs", who=ACME, query={"limit": "1", "next_token": token})
    assert (status, error_code(body)) == (400, "bad_request")
    _, again = stack.call("GET", "/jobs", who=ACME, query={"limit": "1"})
    status, _ = stack.call(
        "GET", "/jobs", who=ACME, query={"limit": "1", "next_token": again["next_token"]}
    )
    assert status == 200


# --- cancel -------------------------------------------------------------------------------------


def test_cancel_cancels_once_then_409(stack: Api) -> None:
    # given a pending job of acme
    job = ingested("acme", "a.png").jobs[0]
    path = f"/jobs/{job.id}/cancel"
    # when acme cancels it, with a reason
    status, view = stack.call("POST", path, who=ACME, body='{"reason": "uploaded by mistake"}')
    # then it is cancelled, by acme, for that reason
    assert status == 200
    assert (view["status"], view["cancel_reason"]) == ("cancelled", "uploaded by mistake")
    assert view["cancelled_by"] == "api:tenant:acme"
    stored = JobRepository().get(job.id)
    assert stored is not None and stored.status is JobStatus.CANCELLED
    # and a second cancel is a conflict
    status, body = stack.call("POST", path, who=ACME)
    assert (status, error_code(body)) == (409, "conflict")


def test_cancelling_a_scan_cancels_the_jobs_waiting_on_its_verdict_at_once(stack: Api) -> None:
    # given an image of acme whose thumbnail waits on the virus scan
    plan = ingested("acme", "a.png")
    scan = next(j for j in plan.jobs if j.job_type is JobType.VIRUS_SCAN)
    thumbnail = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    # when acme cancels the scan
    status, _ = stack.call("POST", f"/jobs/{scan.id}/cancel", who=ACME)
    # then the thumbnail, which no verdict will release now, is cancelled with it, saying why
    assert status == 200
    waiting = JobRepository().get(thumbnail.id)
    assert waiting is not None and waiting.status is JobStatus.CANCELLED
    assert "virus scan" in (waiting.cancel_reason or "")


def test_cancel_of_a_finished_job_is_409(stack: Api) -> None:
    # given a job that ran and failed for good
    job = ingested("acme", "a.png").jobs[0]
    jobs = JobRepository()
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    claimed = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(claimed, Applied)
    fail = transitions.fail(
        claimed.job, error="boom", now=utcnow(), retry_at=None, retention=timedelta(days=1)
    )
    assert isinstance(jobs.apply(job.id, job.job_type, fail), Applied)
    # when it is cancelled, then 409
    status, body = stack.call("POST", f"/jobs/{job.id}/cancel", who=OPERATOR)
    assert (status, error_code(body)) == (409, "conflict")


def test_a_foreign_tenant_cannot_cancel_or_retry(stack: Api) -> None:
    # given a pending job of acme and a cancelled one
    plan = ingested("acme", "a.png")
    pending, stopped = plan.jobs[0], cancelled(plan.jobs[1])
    # when globex cancels the one and retries the other
    cancel = stack.call("POST", f"/jobs/{pending.id}/cancel", who=GLOBEX)
    retry = stack.call("POST", f"/jobs/{stopped.id}/retry", who=GLOBEX)
    # then both are 404 and nothing changed
    assert cancel[0] == 404 and retry[0] == 404
    jobs = JobRepository()
    now_pending, still_cancelled = jobs.get(pending.id), jobs.get(stopped.id)
    assert now_pending is not None and now_pending.status is JobStatus.PENDING
    assert still_cancelled is not None and still_cancelled.status is JobStatus.CANCELLED


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("{not json", 400),
        ("[1]", 422),
        ('{"reason": 3}', 422),
        ('{"reason": ""}', 422),
        ('{"reason": "\\r\\n \\t"}', 422),  # white space alone says nothing
        ('{"why": "x"}', 422),
        (json.dumps({"reason": "x" * 501}), 422),
        ('{"reason": "half a pair \\ud800"}', 422),  # no UTF-8 can store a lone surrogate
    ],
)
def test_an_invalid_cancel_body_is_refused_before_any_write(
    stack: Api, body: str, status: int
) -> None:
    job = ingested("acme", "a.png").jobs[0]
    got, answer = stack.call("POST", f"/jobs/{job.id}/cancel", who=ACME, body=body)
    assert got == status and error_code(answer) in {"bad_request", "unprocessable"}
    stored = JobRepository().get(job.id)
    assert stored is not None and stored.status is JobStatus.PENDING


def test_cancel_or_retry_of_an_unknown_job_is_404(stack: Api) -> None:
    for action in ("cancel", "retry"):
        status, body = stack.call("POST", f"/jobs/{uuid.uuid4()}/{action}", who=OPERATOR)
        assert (status, error_code(body)) == (404, "not_found")


# --- retry --------------------------------------------------------------------------------------


def test_retry_requeues_a_cancelled_job_in_place_and_dispatches_it(stack: Api) -> None:
    # given a job that was claimed once, then cancelled while running
    job = next(j for j in ingested("acme", "a.png").jobs if j.job_type is JobType.VIRUS_SCAN)
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    assert isinstance(JobRepository().apply(job.id, job.job_type, claim), Applied)
    cancelled(job)
    # when acme retries it
    status, view = stack.call("POST", f"/jobs/{job.id}/retry", who=ACME)
    # then it is pending again, the same job, its attempt counter kept
    assert status == 200
    assert (view["id"], view["status"], view["attempt"]) == (job.id, "pending", 1)
    assert view["cancelled_by"] is None
    # and its message is on its type's queue
    assert [m["job_id"] for m in stack.messages("VirusScanQueue")] == [job.id]
    # and retrying it again is a conflict (it is active)
    status, body = stack.call("POST", f"/jobs/{job.id}/retry", who=ACME)
    assert (status, error_code(body)) == (409, "conflict")


def test_retry_keeps_the_attempt_history_of_a_failed_job(stack: Api) -> None:
    # given a job whose one attempt failed for good
    job = ingested("acme", "a.png").jobs[0]
    jobs = JobRepository()
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    claimed = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(claimed, Applied)
    fail = transitions.fail(
        claimed.job, error="boom", now=utcnow(), retry_at=None, retention=timedelta(days=1)
    )
    assert isinstance(jobs.apply(job.id, job.job_type, fail), Applied)
    # when the operator retries it
    status, view = stack.call("POST", f"/jobs/{job.id}/retry", who=OPERATOR)
    # then it is pending with the failed attempt still in its history
    assert status == 200 and view["status"] == "pending"
    assert [(a["number"], a["outcome"]) for a in view["attempts"]] == [(1, "failed")]
    assert view["error_message"] is None


def test_retry_of_a_pending_job_is_409(stack: Api) -> None:
    job = ingested("acme", "a.png").jobs[0]
    status, body = stack.call("POST", f"/jobs/{job.id}/retry", who=ACME)
    assert (status, error_code(body)) == (409, "conflict")


# --- the sample events ----------------------------------------------------------------------------


def test_the_sample_api_events_are_answered(stack: Api) -> None:
    # given the events/ samples (a tenant's listing and a cancel of a job that does not exist)
    events = Path(__file__).resolve().parents[2] / "events"
    listing = json.loads((events / "api_list_jobs.json").read_text())
    cancel = json.loads((events / "api_cancel_job.json").read_text())
    # when they are handled, then the listing answers and the cancel is 404
    assert api.handler(listing, CONTEXT)["statusCode"] == 200
    response = api.handler(cancel, CONTEXT)
    assert response["statusCode"] == 404
    assert error_code(json.loads(response["body"])) == "not_found"


def test_a_file_lists_its_tenants_other_files_of_the_same_content(stack: Api) -> None:
    # given two files of acme and one of globex with the same content hashed, and another of acme
    files = FileRepository()
    same = "ab" * 32
    first, second = ingested("acme", "a.png", minutes_ago=2), ingested("acme", "b.png")
    foreign, other = ingested("globex", "a.png"), ingested("acme", "c.png")
    for plan, sha256 in ((first, same), (second, same), (foreign, same), (other, "cd" * 32)):
        files.record_content(plan.file.id, sha256=sha256, duplicate_of=None, at=utcnow(), by="t")
    # when acme reads the first file
    status, view = stack.call("GET", f"/files/{first.file.id}", who=ACME)
    # then its duplicates are acme's other file of that content, and nothing else
    assert status == 200
    assert [d["id"] for d in view["duplicates"]] == [second.file.id]
    assert view["duplicates"][0]["key"] == second.file.key
