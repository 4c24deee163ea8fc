"""Tenant quotas on DynamoDB, S3 and SQS (moto, resources from template.yaml): the ingest handler
counts each accepted upload once and records the ones over a quota rejected, with no jobs; two
uploads racing for a quota's last file cannot both pass; the API reads and sets the quotas the
ingest then holds to, and caps the jobs it makes for one file.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import date

import pytest

from filejobs import runtime
from filejobs.adapters.s3 import S3HeadReader
from filejobs.data.file_repository import FileRepository
from filejobs.data.quota_repository import QuotaRepository
from filejobs.domain.file import FileStatus, StoredFile
from filejobs.domain.ingest import ObjectCreated
from filejobs.domain.quotas import TenantQuotas, rejected
from filejobs.domain.time import utcnow
from filejobs.ports import Ingested
from filejobs.services.ingest import IngestService
from functions.ingest import app as ingest
from tests.days import a_whole_usage_day
from tests.factories import ingest_plan
from tests.integration.test_api import ACME, OPERATOR, Api, error_code, ingested
from tests.integration.test_api import stack as api_stack  # noqa: F401 (the fixture api_ builds on)
from tests.integration.test_handlers import Stack, invoke, receive
from tests.integration.test_handlers import stack as handler_stack  # noqa: F401
from tests.listing import jobs_of_file


@pytest.fixture
def today() -> date:
    return a_whole_usage_day()


@pytest.fixture
def stack(handler_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:  # noqa: F811
    # Every tenant may have 2 files a day of at most 100 bytes each (the template's parameters,
    # as the function's environment carries them).
    monkeypatch.setenv("TENANT_MAX_FILES_PER_DAY", "2")
    monkeypatch.setenv("TENANT_MAX_FILE_BYTES", "100")
    runtime.reset()
    # The bucket's notification sent S3's test event first: acknowledged, counted nowhere.
    assert invoke(ingest.handler, receive(handler_stack, "IngestQueue")) == []
    return handler_stack


def files_of(stack: Stack, *names: str) -> dict[str, StoredFile]:
    found = {}
    for name in names:
        [stored] = FileRepository().versions_of(stack.uploads, f"uploads/acme/{name}")
        found[name] = stored
    return found


def versions_in_bucket(stack: Stack, name: str) -> list[str]:
    listed = stack.s3.list_object_versions(Bucket=stack.uploads, Prefix=f"uploads/acme/{name}")
    return [v["VersionId"] for v in listed.get("Versions", [])]


def test_the_ingest_handler_records_the_upload_past_the_quota_rejected_with_no_jobs(
    stack: Stack,
    today: date,
) -> None:
    # given three small uploads of acme, one after another, with room for two a day
    records = []
    for name in ("1.txt", "2.txt", "3.txt"):
        stack.s3.put_object(Bucket=stack.uploads, Key=f"uploads/acme/{name}", Body=b"hello\n")
        [record] = receive(stack, "IngestQueue")
        records.append(record)
        # when the ingest handles each
        assert invoke(ingest.handler, [record]) == []
    stored = files_of(stack, "1.txt", "2.txt", "3.txt")
    # then the first two are processed, the third is recorded rejected, with the reason
    assert [stored[n].status for n in ("1.txt", "2.txt")] == [FileStatus.ACTIVE] * 2
    third = stored["3.txt"]
    assert third.status is FileStatus.REJECTED
    assert third.status_reason == (
        f"tenant acme is over its 2 files per day quota (2 used on {today.isoformat()})"
    )
    # and deleted from the bucket (the record keeps why); the accepted ones are there
    assert versions_in_bucket(stack, "3.txt") == []
    assert versions_in_bucket(stack, "1.txt") == [stored["1.txt"].version_id]
    # and given no jobs, and no message
    assert jobs_of_file(third.id) == []
    assert all(jobs_of_file(stored[n].id) for n in ("1.txt", "2.txt"))
    # when every record is delivered again
    assert invoke(ingest.handler, records) == []
    # then nothing is counted twice, and the rejection stands as it was
    usage = QuotaRepository().usage("acme", today)
    assert (usage.files, usage.bytes) == (2, 12)
    assert files_of(stack, "3.txt")["3.txt"] == third


def test_a_file_over_the_max_file_size_is_rejected_and_counts_nothing(
    stack: Stack, today: date
) -> None:
    stack.s3.put_object(Bucket=stack.uploads, Key="uploads/acme/big.txt", Body=b"x" * 101)

    assert invoke(ingest.handler, receive(stack, "IngestQueue")) == []

    big = files_of(stack, "big.txt")["big.txt"]
    assert big.status is FileStatus.REJECTED
    assert big.status_reason == (
        "file uploads/acme/big.txt is 101 bytes, over tenant acme's 100 bytes max file size quota"
    )
    assert jobs_of_file(big.id) == []
    assert QuotaRepository().usage("acme", today).files == 0
    assert versions_in_bucket(stack, "big.txt") == []


def test_of_uploads_racing_for_a_quotas_last_file_exactly_one_is_accepted(
    stack: Stack, today: date
) -> None:
    # given eight uploads of acme, with room for one more today
    runtime.tables()  # the repositories on the stack's tables
    limits = TenantQuotas(files_per_day=1, bytes_per_day=0, max_file_bytes=0, max_in_flight_jobs=0)
    service = IngestService(FileRepository(), S3HeadReader(stack.s3), limits=lambda _: limits)
    records = []
    for n in range(8):
        key = f"uploads/acme/race-{n}.txt"
        put = stack.s3.put_object(Bucket=stack.uploads, Key=key, Body=b"race\n")
        records.append(
            ObjectCreated(stack.uploads, key, 5, put["ETag"].strip('"'), put.get("VersionId"))
        )
    # when they are ingested at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(service.ingest, records))
    # then exactly one is accepted with its jobs, and seven are recorded rejected
    accepted = [r for r in results if isinstance(r, Ingested) and r.plan.jobs]
    assert len(accepted) == 1
    statuses = [FileRepository().versions_of(r.bucket, r.key)[0].status for r in records]
    assert sorted(statuses) == sorted([FileStatus.ACTIVE] + [FileStatus.REJECTED] * 7)
    assert QuotaRepository().usage("acme", today).files == 1


# --- through the API -----------------------------------------------------------------------------


@pytest.fixture
def api(api_stack: Api) -> Api:  # noqa: F811
    return api_stack


def test_an_operator_sets_a_tenants_quota_and_the_tenant_reads_it(api: Api, today: date) -> None:
    status, body = api.call(
        "PUT",
        "/tenants/acme/quotas",
        who=OPERATOR,
        body=json.dumps({"files_per_day": 5, "max_file_bytes": 0}),
    )
    assert status == 200, body
    status, shown = api.call("GET", "/tenants/acme/quotas", who=ACME)
    assert status == 200
    assert shown == body
    assert shown["limits"] == {
        "files_per_day": 5,
        "bytes_per_day": 10 * 1024**3,
        "max_file_bytes": 0,
        "max_in_flight_jobs": 0,  # TenantMaxRunningJobs' default: no cap
        "rescans_per_day": 10_000,
        "rescans_per_file_per_day": 3,
        "operations_per_day": 50,
        "max_running_operations": 3,
    }
    assert shown["overrides"] == {"files_per_day": 5, "max_file_bytes": 0}
    assert shown["overrides_updated_by"] == "api:operator"
    assert shown["usage"] == {
        "day": today.isoformat(),
        "files": 0,
        "bytes": 0,
        "rescans": 0,
        "operations": 0,
    }
    # and null puts a quota back to the default
    status, reset = api.call(
        "PUT", "/tenants/acme/quotas", who=OPERATOR, body='{"files_per_day": null}'
    )
    assert status == 200 and reset["overrides"] == {"max_file_bytes": 0}
    assert reset["limits"]["files_per_day"] == 10_000


def test_a_tenant_cannot_set_its_quotas_and_nothing_changes(api: Api) -> None:
    status, body = api.call(
        "PUT", "/tenants/acme/quotas", who=ACME, body='{"files_per_day": 1000000}'
    )
    assert (status, error_code(body)) == (403, "forbidden")
    assert "only an operator" in body["error"]["message"]
    assert api.call("GET", "/tenants/acme/quotas", who=ACME)[1]["overrides"] == {}


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ('{"files_per_day": -1}', 422, "files_per_day"),
        ('{"bytes_per_day": 1.5}', 422, "bytes_per_day"),
        ('{"max_file_bytes": "10"}', 422, "max_file_bytes"),
        ('{"max_in_flight_jobs": true}', 422, "max_in_flight_jobs"),
        ('{"files": 1}', 422, "files_per_day"),
        ("{}", 422, "at least one"),
        ("not json", 400, "JSON"),
    ],
)
def test_a_bad_quota_change_is_refused_with_its_field_and_changes_nothing(
    api: Api, body: str, status: int, field: str
) -> None:
    answered, refusal = api.call("PUT", "/tenants/acme/quotas", who=OPERATOR, body=body)

    assert answered == status and field in refusal["error"]["message"]
    assert api.call("GET", "/tenants/acme/quotas", who=OPERATOR)[1]["overrides"] == {}


def test_a_malformed_tenant_is_refused_before_any_read(api: Api) -> None:
    status, body = api.call("GET", "/tenants/a%23b/quotas", who=OPERATOR)
    assert (status, error_code(body)) == (400, "bad_request")


def test_jobs_requested_without_a_key_stop_at_the_files_cap(api: Api) -> None:
    plan = ingested("acme", "capped.png")
    path = f"/files/{plan.file.id}/jobs"
    body = json.dumps({"job_type": "compression"})
    made = [api.call("POST", path, who=ACME, body=body) for _ in range(20)]
    assert [status for status, _ in made] == [201] * 20
    assert len({job["id"] for _, job in made}) == 20

    status, refusal = api.call("POST", path, who=ACME, body=body)

    assert (status, error_code(refusal)) == (409, "conflict")
    assert "has had the 20 jobs a file may be given through the API" in refusal["error"]["message"]
    assert len(jobs_of_file(plan.file.id)) == len(plan.jobs) + 20


def test_a_rejected_upload_shows_its_reason_in_the_files_view(api: Api, today: date) -> None:
    reason = f"tenant acme is over its 2 files per day quota (2 used on {today.isoformat()})"
    refused = rejected(ingest_plan(utcnow(), "image/png", name="seen.png"), reason)
    FileRepository().record_ingest(refused)

    status, shown = api.call("GET", f"/files/{refused.file.id}", who=ACME)

    assert status == 200
    assert (shown["status"], shown["status_reason"], shown["jobs"]) == ("rejected", reason, [])
    # and no job can be requested for it
    status, refusal = api.call(
        "POST", f"/files/{refused.file.id}/jobs", who=ACME, body='{"job_type": "compression"}'
    )
    assert (status, error_code(refusal)) == (409, "conflict")
    assert "is rejected" in refusal["error"]["message"]
