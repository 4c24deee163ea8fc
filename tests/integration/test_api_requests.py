"""The status API's job requests, soft deletes, output URLs and OpenAPI document, through its
Lambda handler against moto tables and queues built from template.yaml (tests/integration/
test_api.py's stack). Every write is the real conditional write."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from filejobs.api.webhooks import DELIVERY_ID_PATTERN, ENDPOINT_ID_PATTERN
from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain import transitions
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.keys import TENANT_PATTERN, job_id_for
from filejobs.domain.messages import UUID_PATTERN
from filejobs.domain.operations import OPERATION_ID_PATTERN
from filejobs.domain.presets import NAME_PATTERN as PRESET_NAME_PATTERN
from filejobs.domain.schedules import SCHEDULE_ID_PATTERN
from filejobs.domain.time import utcnow
from filejobs.domain.transition_result import Applied
from filejobs_dev.infra.template import function_definitions, load_template
from functions.api import app as api_function
from tests.integration.test_api import (
    ACME,
    GLOBEX,
    OPERATOR,
    Api,
    cancelled,
    error_code,
    ingested,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.listing import jobs_of_file
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "layers" / "filejobs" / "filejobs" / "api_docs" / "openapi.json"
THUMBNAIL = JobType.THUMBNAIL_GENERATION.value


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture, imported to be used here)
    return stack


def request_job(
    api: Api,
    file_id: str,
    body: dict[str, Any] | str,
    *,
    key: str | None = None,
    who: dict[str, str] = ACME,
) -> tuple[int, Any, dict[str, str]]:
    text = body if isinstance(body, str) else json.dumps(body)
    response = api.raw(
        "POST",
        f"/files/{file_id}/jobs",
        who=who,
        body=text,
        headers=None if key is None else {"Idempotency-Key": key},
    )
    return response["statusCode"], json.loads(response["body"]), headers_of(response)


def headers_of(response: dict[str, Any]) -> dict[str, str]:
    """A REST proxy response's headers, single- or multi-valued as Powertools sent them."""
    multi = {name: values[-1] for name, values in response.get("multiValueHeaders", {}).items()}
    return {**multi, **response.get("headers", {})}


def stored_jobs_of(file_id: str) -> list[ProcessingJob]:
    return jobs_of_file(file_id)


def completed(job: ProcessingJob, result: dict[str, Any]) -> ProcessingJob:
    jobs = JobRepository()
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    claimed = jobs.apply(job.id, job.job_type, claim)
    assert isinstance(claimed, Applied)
    done = transitions.complete(
        claimed.job, result=result, now=utcnow(), retention=timedelta(days=1)
    )
    finished = jobs.apply(job.id, job.job_type, done)
    assert isinstance(finished, Applied)
    return finished.job


# --- POST /files/{file_id}/jobs ------------------------------------------------------------------


def test_a_requested_job_is_created_once_per_idempotency_key(api: Api) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    before = len(stored_jobs_of(plan.file.id))
    body = {"job_type": THUMBNAIL, "priority": 5, "input_data": {"sizes": [64]}}
    # when an operator, acting for acme, requests a raised thumbnail job under a key, then
    # repeats the request
    for_acme = {**OPERATOR, "tenant": "acme"}
    first = request_job(api, plan.file.id, body, key="req-1", who=for_acme)
    again = request_job(api, plan.file.id, body, key="req-1", who=for_acme)
    # then the first made a pending job (201), with the id its key derives
    status, view, headers = first
    assert status == 201, view
    expected_id = job_id_for("acme", f"api:{plan.file.id}:req-1")
    assert (view["id"], view["status"], view["priority"]) == (expected_id, "pending", 5)
    assert headers["Idempotent-Replayed"] == "false" and headers["Idempotency-Key"] == "req-1"
    # and the repeat answered that same job (200, marked as a replay), making nothing new
    assert again[0] == 200 and again[1]["id"] == expected_id
    assert again[2]["Idempotent-Replayed"] == "true"
    assert len(stored_jobs_of(plan.file.id)) == before + 1
    # and the job was sent once, to its type's high lane (priority 5)
    assert [m["job_id"] for m in api.messages("ThumbnailGenerationHighQueue")] == [expected_id]
    # and it carries the file's location with the caller's input, and a sweep check
    job = JobRepository().get(expected_id)
    assert job is not None and job.input_data is not None and job.sweep_at is not None
    assert job.input_data["key"] == plan.file.key and job.input_data["sizes"] == [64]
    assert job.triggered_by == "api:operator:acme"


def test_a_whole_number_written_as_a_float_is_an_integer_priority(api: Api) -> None:
    # given a file of acme, when a job is requested with priority 5.0 (JSON has one number type)
    plan = ingested("acme", "a.png")
    body = '{"job_type": "compression", "priority": 5.0}'
    status, view, _ = request_job(api, plan.file.id, body, who=OPERATOR)
    # then it is priority 5, as JSON Schema's "integer" reads it
    assert (status, view["priority"]) == (201, 5), view


def test_a_raised_priority_is_an_operator_s_to_give(api: Api) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    before = len(stored_jobs_of(plan.file.id))
    # when acme asks for a job above priority 0, then for one below it
    raised = request_job(api, plan.file.id, {"job_type": THUMBNAIL, "priority": 1}, key="up")
    lowered = request_job(api, plan.file.id, {"job_type": THUMBNAIL, "priority": -3}, key="down")
    # then the raised one is refused, saying why, and made nothing; the lowered one is made
    assert (raised[0], error_code(raised[1])) == (422, "unprocessable")
    assert "operator" in raised[1]["error"]["message"]
    assert lowered[0] == 201 and lowered[1]["priority"] == -3
    assert len(stored_jobs_of(plan.file.id)) == before + 1
    assert api.messages("ThumbnailGenerationHighQueue") == []


def test_without_a_key_each_request_is_a_new_job(api: Api) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    # when the same job is requested twice without an Idempotency-Key
    one = request_job(api, plan.file.id, {"job_type": THUMBNAIL})
    two = request_job(api, plan.file.id, {"job_type": THUMBNAIL})
    # then two jobs, each under a generated key it reports
    assert (one[0], two[0]) == (201, 201)
    assert one[1]["id"] != two[1]["id"]
    assert uuid.UUID(one[2]["Idempotency-Key"]) != uuid.UUID(two[2]["Idempotency-Key"])


@pytest.mark.parametrize(
    "changed",
    [
        {"job_type": JobType.COMPRESSION.value},
        {"job_type": THUMBNAIL, "priority": -1},
        {"job_type": THUMBNAIL, "input_data": {"sizes": [128]}},
    ],
)
def test_the_same_key_with_another_request_is_409(api: Api, changed: dict[str, Any]) -> None:
    # given a job requested under a key
    plan = ingested("acme", "a.png")
    original = {"job_type": THUMBNAIL, "input_data": {"sizes": [64]}}
    assert request_job(api, plan.file.id, original, key="k")[0] == 201
    # when another request comes under the same key
    status, body, _ = request_job(api, plan.file.id, changed, key="k")
    # then it is a conflict, and nothing was written
    assert (status, error_code(body)) == (409, "conflict")
    assert "Idempotency-Key" in body["error"]["message"]
    job = JobRepository().get(job_id_for("acme", f"api:{plan.file.id}:k"))
    assert job is not None and job.job_type is JobType.THUMBNAIL_GENERATION
    assert job.priority == 0


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"job_type": "ocr"}, 422),
        ({"priority": 1}, 422),
        ({"job_type": THUMBNAIL, "priority": 101}, 422),
        ({"job_type": THUMBNAIL, "priority": "1"}, 422),
        ({"job_type": THUMBNAIL, "priority": 1.5}, 422),
        ({"job_type": THUMBNAIL, "priority": True}, 422),
        ({"job_type": THUMBNAIL, "input_data": [1]}, 422),
        ({"job_type": THUMBNAIL, "input_data": {"bucket": "elsewhere"}}, 422),
        ({"job_type": THUMBNAIL, "input_data": {"blob": "x" * 9000}}, 422),
        ({"job_type": THUMBNAIL, "colour": "red"}, 422),
        # what DynamoDB would refuse in a stored map (a 500 on AWS if let through)
        ({"job_type": THUMBNAIL, "input_data": {"": 1}}, 422),
        ({"job_type": THUMBNAIL, "input_data": {"tiny": 1e-200}}, 422),
        ({"job_type": THUMBNAIL, "input_data": {"huge": 1e200}}, 422),
        ('{"job_type": "virus_scan", "input_data": {"k": "\\udc00"}}', 422),
        ('{"job_type": "virus_scan", "input_data": {"\\ud800": 1}}', 422),
        ("{not json", 400),
        ('{"job_type": "virus_scan", "priority": NaN}', 400),
        ("", 400),
    ],
)
def test_an_invalid_job_request_is_refused_before_any_write(
    api: Api, body: dict[str, Any] | str, status: int
) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    before = len(stored_jobs_of(plan.file.id))
    # when an invalid job request is sent, then it is refused and no job is written
    got, answer, _ = request_job(api, plan.file.id, body)
    assert got == status and error_code(answer) in {"bad_request", "unprocessable"}, answer
    assert len(stored_jobs_of(plan.file.id)) == before


@pytest.mark.parametrize("key", ["", "has space", "x" * 129, "caf\u00e9"])
def test_an_invalid_idempotency_key_is_400(api: Api, key: str) -> None:
    plan = ingested("acme", "a.png")
    status, body, _ = request_job(api, plan.file.id, {"job_type": THUMBNAIL}, key=key)
    assert (status, error_code(body)) == (400, "bad_request")


def test_a_job_on_another_tenants_or_an_unknown_file_is_404(api: Api) -> None:
    # given a file of acme
    plan = ingested("acme", "a.png")
    before = len(stored_jobs_of(plan.file.id))
    # when globex requests a job on it, and acme on a file that does not exist
    foreign = request_job(api, plan.file.id, {"job_type": THUMBNAIL}, who=GLOBEX)
    unknown = request_job(api, str(uuid.uuid4()), {"job_type": THUMBNAIL})
    # then both are 404 and nothing was written
    assert (foreign[0], error_code(foreign[1])) == (404, "not_found")
    assert (unknown[0], error_code(unknown[1])) == (404, "not_found")
    assert len(stored_jobs_of(plan.file.id)) == before
    # and the operator may request one for acme's file, as acme's job
    status, view, _ = request_job(api, plan.file.id, {"job_type": THUMBNAIL}, who=OPERATOR)
    assert status == 201 and view["tenant"] == "acme"


def test_a_job_on_a_quarantined_file_is_409(api: Api) -> None:
    # given a file the virus scan quarantined
    plan = ingested("acme", "a.png")
    files = FileRepository()
    files.quarantine(plan.file.id, reason="EICAR", at=utcnow(), by="test")
    # when any job is requested on it, then 409
    for job_type in (THUMBNAIL, JobType.VIRUS_SCAN.value):
        status, body, _ = request_job(api, plan.file.id, {"job_type": job_type})
        assert (status, error_code(body)) == (409, "conflict"), job_type
        assert "quarantined" in body["error"]["message"]


def test_a_parsing_job_waits_for_the_scan_but_an_unscannable_file_refuses_it(api: Api) -> None:
    # given a file not yet scanned
    plan = ingested("acme", "a.png")
    # when a parsing job is requested, then it is accepted (the scan gate holds it)
    assert request_job(api, plan.file.id, {"job_type": THUMBNAIL})[0] == 201
    # given the scan then could not vouch for the file
    unscannable = ScanRecord(ScanStatus.UNSCANNABLE, utcnow(), "scan", reason="a zip bomb")
    FileRepository().record_scan(plan.file.id, unscannable, by="test")
    # when a parsing job is requested again, then it is refused, saying why
    status, body, _ = request_job(api, plan.file.id, {"job_type": THUMBNAIL})
    assert (status, error_code(body)) == (409, "conflict")
    assert "could not vouch for the file: a zip bomb" in body["error"]["message"]
    # and a scan may still be requested
    assert request_job(api, plan.file.id, {"job_type": JobType.VIRUS_SCAN.value})[0] == 201


def test_a_replayed_key_of_a_deleted_job_is_409(api: Api) -> None:
    # given a job requested under a key, cancelled, then deleted
    plan = ingested("acme", "a.png")
    _, view, _ = request_job(api, plan.file.id, {"job_type": THUMBNAIL}, key="gone")
    job = JobRepository().get(view["id"])
    assert job is not None
    cancelled(job)
    assert api.raw("DELETE", f"/jobs/{job.id}", who=ACME)["statusCode"] == 204
    # when the same request is repeated, then 409: the key stays taken while the job's item is
    # kept (docs/JOBS.md: until its TTL)
    status, body, _ = request_job(api, plan.file.id, {"job_type": THUMBNAIL}, key="gone")
    assert (status, error_code(body)) == (409, "conflict")


# --- DELETE /jobs/{job_id} ----------------------------------------------------------------------


def test_delete_refuses_an_active_job_and_hides_a_finished_one(api: Api) -> None:
    # given a running job of acme
    plan = ingested("acme", "a.png")
    job = plan.jobs[0]
    claim = transitions.claim(now=utcnow(), lease=timedelta(minutes=5), worker="w")
    assert isinstance(JobRepository().apply(job.id, job.job_type, claim), Applied)
    # when it is deleted, then 409 (it is not finished)
    response = api.raw("DELETE", f"/jobs/{job.id}", who=ACME)
    assert (response["statusCode"], error_code(json.loads(response["body"]))) == (409, "conflict")
    # given it was cancelled, when it is deleted, then 204 with no body
    cancelled(job)
    response = api.raw("DELETE", f"/jobs/{job.id}", who=ACME)
    assert (response["statusCode"], response["body"]) == (204, "")
    # and it is recorded as deleted by acme, its item kept
    stored = JobRepository().get(job.id)
    assert stored is not None and stored.metadata.deleted_by == "api:tenant:acme"
    assert stored.metadata.deleted_at is not None and stored.status is JobStatus.CANCELLED
    # and it is gone: 404 by id, absent from every listing
    assert api.call("GET", f"/jobs/{job.id}", who=ACME)[0] == 404
    listings = [
        api.call("GET", "/jobs", who=ACME)[1]["jobs"],
        api.call("GET", "/jobs", who=ACME, query={"status": "cancelled"})[1]["jobs"],
        api.call("GET", "/jobs", who=OPERATOR, query={"status": "cancelled"})[1]["jobs"],
        api.call("GET", f"/files/{plan.file.id}/jobs", who=ACME)[1]["jobs"],
        api.call("GET", f"/files/{plan.file.id}", who=ACME)[1]["jobs"],
    ]
    for listed in listings:
        assert job.id not in {j["id"] for j in listed}
    assert len(listings[0]) == len(plan.jobs) - 1
    # and deleting it again, or retrying it, is 404
    assert api.raw("DELETE", f"/jobs/{job.id}", who=ACME)["statusCode"] == 404
    assert api.call("POST", f"/jobs/{job.id}/retry", who=ACME)[0] == 404


def test_delete_of_a_foreign_or_unknown_job_is_404(api: Api) -> None:
    # given a finished job of acme
    job = cancelled(ingested("acme", "a.png").jobs[0])
    # when globex deletes it, and anyone an unknown job or a malformed id
    foreign = api.raw("DELETE", f"/jobs/{job.id}", who=GLOBEX)
    unknown = api.raw("DELETE", f"/jobs/{uuid.uuid4()}", who=OPERATOR)
    malformed = api.raw("DELETE", "/jobs/not-a-uuid", who=OPERATOR)
    # then 404, 404 and 400, and the job is untouched
    assert [r["statusCode"] for r in (foreign, unknown, malformed)] == [404, 404, 400]
    stored = JobRepository().get(job.id)
    assert stored is not None and stored.metadata.deleted_at is None


# --- output URLs --------------------------------------------------------------------------------


def test_a_completed_job_carries_short_lived_urls_of_its_own_outputs(api: Api) -> None:
    # given a completed thumbnail job whose result names two outputs, its source and a foreign key
    plan = ingested("acme", "a.png")
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    folder = f"derived/acme/{plan.file.id}/{THUMBNAIL}"
    result = {
        "thumbnails": [
            {"size": 128, "key": f"{folder}/128.webp"},
            {"kind": "thumbnail", "key": f"{folder}/256.webp", "bytes": 2048, "width": 256},
        ],
        "source": {"key": plan.file.key},
        "elsewhere": {"key": f"derived/globex/{plan.file.id}/{THUMBNAIL}/x.webp"},
    }
    completed(job, result)
    # when acme asks for the job
    status, view = api.call("GET", f"/jobs/{job.id}", who=ACME)
    # then its outputs are the two derived files, each with a URL for its own key
    assert status == 200
    assert [(o["name"], o["key"]) for o in view["outputs"]] == [
        ("128.webp", f"{folder}/128.webp"),
        ("256.webp", f"{folder}/256.webp"),
    ]
    bucket = os.environ["OUTPUTS_BUCKET"]
    for output in view["outputs"]:
        url = urlparse(output["url"])
        query = parse_qs(url.query)
        path = unquote(url.path)
        assert path.endswith(f"/{output['key']}")
        assert bucket in url.netloc or path.startswith(f"/{bucket}/")
        assert query.get("X-Amz-Expires") == ["900"] or "Expires" in query
        assert "X-Amz-Signature" in query or "Signature" in query
        assert output["expires_at"] > view["completed_at"]
    # and each is typed: its kind, and the facts its result states (null where it states none)
    assert [(o["kind"], o["format"], o["bytes"], o["width"]) for o in view["outputs"]] == [
        ("thumbnail", "webp", None, None),
        ("thumbnail", "webp", 2048, 256),
    ]
    # and the file's view carries them too, in its job and in its one list, while listings do not
    file_view = api.call("GET", f"/files/{plan.file.id}", who=ACME)[1]
    in_file = next(j for j in file_view["jobs"] if j["id"] == job.id)
    assert [o["key"] for o in in_file["outputs"]] == [o["key"] for o in view["outputs"]]
    assert [(o["job_id"], o["job_type"], o["key"]) for o in file_view["outputs"]] == [
        (job.id, THUMBNAIL, o["key"]) for o in view["outputs"]
    ]
    assert all(o["url"].startswith("http") for o in file_view["outputs"])
    listed = api.call("GET", "/jobs", who=ACME)[1]["jobs"]
    assert all("outputs" not in j for j in listed)
    # and a job that is not completed has none
    pending = next(j for j in plan.jobs if j.id != job.id)
    assert api.call("GET", f"/jobs/{pending.id}", who=ACME)[1]["outputs"] == []


# --- OpenAPI --------------------------------------------------------------------------------------


def _openapi_tool() -> Any:
    return load_script(ROOT / "tools" / "openapi.py", "openapi_tool")


def test_the_committed_openapi_document_matches_the_routes() -> None:
    # given the document tools/openapi.py builds from the resolver now
    fresh = _openapi_tool().render()
    # then the committed one is exactly that
    assert DOCUMENT.read_text() == fresh, (
        f"{DOCUMENT.relative_to(ROOT)} is out of date: run .venv/bin/python tools/openapi.py"
    )
    # and it describes every route the template routes to the function, with its errors
    document = json.loads(fresh)
    routed = {(path, method) for path, ops in document["paths"].items() for method in ops}
    events = function_definitions(load_template())["ApiFunction"].events
    # (but the console's shell, which is no API: its files hold no data; and the browser's CORS
    # preflight of POST /uploads, which API Gateway lets through unsigned and which answers no
    # request of its own)
    shell = {("/console", "get"), ("/console/{asset}", "get"), ("/uploads", "options")}
    assert {(e["Path"], e["Method"]) for kind, e in events if kind == "Api"} - shell == routed
    error = "#/components/schemas/Error"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            schema = operation["responses"]["500"]["content"]["application/json"]["schema"]
            assert schema == {"$ref": error}, (method, path)
            names = {p["name"] for p in operation.get("parameters", [])}
            assert {part[1:-1] for part in path.split("/") if part.startswith("{")} <= names
            # and every id (and tenant) in a path is declared as the API checks it, before any
            # database call
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    pattern = {
                        "tenant": TENANT_PATTERN,
                        "operation_id": OPERATION_ID_PATTERN,
                        "webhook_id": ENDPOINT_ID_PATTERN,
                        "delivery_id": DELIVERY_ID_PATTERN,
                        "schedule_id": SCHEDULE_ID_PATTERN,
                        "preset_name": PRESET_NAME_PATTERN,
                    }.get(parameter["name"], UUID_PATTERN)
                    assert parameter["schema"]["pattern"] == pattern, (method, path)


def test_the_openapi_document_is_served_as_committed_behind_auth(api: Api) -> None:
    # when the document is asked for with and without an identity
    served = api.raw("GET", "/openapi.json", who=ACME)
    anonymous = api.raw("GET", "/openapi.json", who=None)
    # then it is the committed file, and only to a caller
    assert served["statusCode"] == 200
    assert json.loads(served["body"]) == json.loads(DOCUMENT.read_text())
    assert anonymous["statusCode"] == 401


def test_the_docs_page_is_behind_auth_and_loads_the_document(api: Api) -> None:
    # when the docs page is asked for with and without an identity
    page = api.raw("GET", "/docs", who=ACME)
    anonymous = api.raw("GET", "/docs", who=None)
    # then the caller gets Swagger UI pointed at openapi.json, and nobody else gets it
    assert page["statusCode"] == 200
    headers = headers_of(page)
    assert headers["Content-Type"].startswith("text/html")
    assert "swagger-ui-dist@" in page["body"] and '"openapi.json"' in page["body"]
    assert "Content-Security-Policy" in headers
    assert anonymous["statusCode"] == 401
    assert error_code(json.loads(anonymous["body"])) == "unauthorized"


def test_every_file_the_docs_page_loads_from_elsewhere_is_pinned_by_its_hash(api: Api) -> None:
    page = api.raw("GET", "/docs", who=ACME)["body"]
    tags = re.findall(r"<(?:script|link)\b[^>]*>", page)
    remote = [tag for tag in tags if re.search(r'(?:src|href)="https://', tag)]
    assert len(remote) == 2  # the stylesheet and the bundle
    for tag in remote:
        # a sha384 of 48 bytes, and CORS so that the browser may check it
        assert re.search(r'integrity="sha384-[A-Za-z0-9+/]{64}"', tag), tag
        assert 'crossorigin="anonymous"' in tag, tag


# --- logs -----------------------------------------------------------------------------------------


def test_every_log_line_of_a_request_names_the_job_it_is_about(api: Api) -> None:
    # given a job id no one has (the route's Router names it; the app's error handler logs),
    # and the handler's log read where it writes
    unknown = str(uuid.uuid4())
    written = io.StringIO()
    output = cast("logging.StreamHandler[Any]", api_function.logger.registered_handler)
    previous = output.setStream(written)
    try:
        # when acme asks for it
        assert api.raw("GET", f"/jobs/{unknown}", who=ACME)["statusCode"] == 404
    finally:
        output.setStream(previous)
    # then the refusal's log line carries the job's id
    lines = [json.loads(line) for line in written.getvalue().splitlines()]
    refused = [line for line in lines if line.get("message") == "job not found"]
    assert refused and all(line.get("job_id") == unknown for line in refused), lines
