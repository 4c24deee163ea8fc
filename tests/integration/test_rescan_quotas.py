"""Rescans count against the tenant's and the file's quotas of the day (domain/quotas.py), in the
transaction that stores the rescan's job: over either, the API answers 429 with Retry-After (the
seconds to the end of the UTC day) in the product's error shape, and writes nothing. Against moto
tables built from template.yaml: every count is the real conditional write."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from filejobs.data.models import QuotaModel
from filejobs.domain.job import JobType
from filejobs.domain.quotas import DEFAULT_RESCANS_PER_FILE_PER_DAY
from tests.aws_requests import counting_requests
from tests.integration.test_api import (
    OPERATOR,
    Api,
    error_code,
    ingested,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.integration.test_api_requests import headers_of
from tests.integration.test_api_rescans import clean, rescan, rescan_page
from tests.listing import jobs_of_file


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture, imported to be used here)
    return stack


def set_quotas(api: Api, tenant: str, **limits: int) -> None:
    status, body = api.call(
        "PUT", f"/tenants/{tenant}/quotas", who=OPERATOR, body=json.dumps(limits)
    )
    assert status == 200, body


def usage_of(api: Api, tenant: str) -> dict[str, Any]:
    status, body = api.call("GET", f"/tenants/{tenant}/quotas", who=OPERATOR)
    assert status == 200, body
    usage: dict[str, Any] = body["usage"]
    return usage


def scan_jobs_of(file_id: str) -> int:
    return sum(j.job_type is JobType.VIRUS_SCAN for j in jobs_of_file(file_id))


def seconds_to_midnight() -> float:
    now = datetime.now(UTC)
    return (
        datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC) - now
    ).total_seconds()


def test_a_file_is_rescanned_at_most_its_daily_cap_then_429_with_retry_after(api: Api) -> None:
    plan = ingested("acme", "a.pdf")
    clean(plan)
    for n in range(DEFAULT_RESCANS_PER_FILE_PER_DAY):
        assert rescan(api, plan.file.id, key=f"r-{n}")[0] == 201

    status, body, headers = rescan(api, plan.file.id, key="one-more")

    assert status == 429 and error_code(body) == "too_many_requests"
    assert "rescanned 3 times today" in body["error"]["message"]
    assert abs(int(headers["Retry-After"]) - seconds_to_midnight()) < 60
    assert scan_jobs_of(plan.file.id) == 1 + DEFAULT_RESCANS_PER_FILE_PER_DAY  # nothing written
    # a replay of a key that made a rescan is answered, and counts nothing
    assert rescan(api, plan.file.id, key="r-0")[0] == 200
    assert usage_of(api, "acme")["rescans"] == DEFAULT_RESCANS_PER_FILE_PER_DAY


def test_a_tenants_rescans_of_the_day_are_capped_by_its_own_quota(api: Api) -> None:
    set_quotas(api, "acme", rescans_per_day=2)
    files = [ingested("acme", f"{n}.pdf") for n in range(3)]
    other = ingested("globex", "g.pdf")
    for plan in [*files, other]:
        clean(plan)

    assert [rescan(api, p.file.id, key="k")[0] for p in files] == [201, 201, 429]
    # another tenant's day is its own
    assert rescan(api, other.file.id, key="k", who={"tenant": "globex", "role": "tenant"})[0] == 201
    assert usage_of(api, "acme")["rescans"] == 2
    # 0 is unlimited, as for every quota
    set_quotas(api, "acme", rescans_per_day=0)
    assert rescan(api, files[2].file.id, key="k")[0] == 201


def test_a_bulk_rescan_skips_files_rescanned_enough_and_stops_when_the_tenant_has_none_left(
    api: Api,
) -> None:
    set_quotas(api, "acme", rescans_per_day=3, rescans_per_file_per_day=1)
    files = [ingested("acme", f"bulk/{n}.pdf") for n in range(4)]
    for plan in files:
        clean(plan)
    assert rescan(api, files[0].file.id, key="single")[0] == 201  # its one rescan of the day

    response = api.raw(
        "POST",
        "/rescans",
        who=OPERATOR,
        body=json.dumps({"tenant": "acme", "prefix": "uploads/acme/bulk/"}),
        headers={"Idempotency-Key": "bulk-1"},
    )

    # files[0] skipped (its own cap), files[1] and [2] rescanned: the tenant's 3 are spent, and
    # files[3] is refused with the whole page: 429, to be asked again tomorrow with the same key
    assert response["statusCode"] == 429
    assert int(headers_of(response)["Retry-After"]) > 0
    assert [scan_jobs_of(p.file.id) for p in files] == [2, 2, 2, 1]
    set_quotas(api, "acme", rescans_per_day=10)
    status, page = rescan_page(
        api, {"tenant": "acme", "prefix": "uploads/acme/bulk/"}, key="bulk-1"
    )
    assert status == 200
    assert [s["file_id"] for s in page["skipped"]] == [files[0].file.id]
    assert "rescanned 1 times today" in page["skipped"][0]["reason"]
    assert [scan_jobs_of(p.file.id) for p in files] == [2, 2, 2, 2]


def test_a_rescan_is_counted_in_the_write_that_stores_its_job(api: Api) -> None:
    # the file read, the tenant's quotas read, and one transaction: the job, the file's job ids
    # and API jobs, the tenant's day and the file's day (the count adds no write request)
    plan = ingested("acme", "a.pdf")
    clean(plan)
    quotas_client = QuotaModel._get_connection().connection.client
    with counting_requests(quotas_client) as requests:
        assert rescan(api, plan.file.id, key="measured")[0] == 201
    assert requests.count("dynamodb") == 3
    assert requests.calls["dynamodb:GetItem"] == 2
    assert requests.calls["dynamodb:TransactWriteItems"] == 1
