"""A tenant's bulk operations are held to its quotas (domain/quotas.py): `operations_per_day`,
counted in the transaction that records the operation, and `max_running_operations`; over either
the API answers 429 with Retry-After and records nothing. An operation whose rescans spend the
tenant's day stops there, saying why. Against moto tables and queues built from template.yaml."""

from __future__ import annotations

import json
from typing import Any

from filejobs.domain.job import JobType
from filejobs.domain.quotas import RUNNING_OPERATIONS_RETRY_SECONDS
from tests.integration.test_api import ACME, GLOBEX, OPERATOR, Api, ingested, stack  # noqa: F401
from tests.integration.test_api_requests import headers_of
from tests.integration.test_api_rescans import clean
from tests.integration.test_bulk_operations import api, call, drain  # noqa: F401
from tests.integration.test_rescan_quotas import set_quotas, usage_of
from tests.listing import jobs_of_file

RESCAN_ALL = {"action": "rescan", "filter": {"job_type": "virus_scan"}, "reason": "new rules"}


def start(client: Api, who: dict[str, str], key: str) -> tuple[int, Any, dict[str, str]]:
    response = client.raw(
        "POST",
        "/operations",
        who=who,
        body=json.dumps(RESCAN_ALL),
        headers={"Idempotency-Key": key},
    )
    return response["statusCode"], json.loads(response["body"]), headers_of(response)


def test_a_tenant_starts_at_most_its_operations_of_the_day(api: Api) -> None:  # noqa: F811
    set_quotas(api, "acme", operations_per_day=2, max_running_operations=0)

    answers = [start(api, ACME, f"k-{n}") for n in range(3)]

    assert [a[0] for a in answers] == [202, 202, 429]
    assert answers[2][1]["error"]["code"] == "too_many_requests"
    assert "started its 2 bulk operations of today" in answers[2][1]["error"]["message"]
    assert int(answers[2][2]["Retry-After"]) > 0
    assert usage_of(api, "acme")["operations"] == 2
    # a replay of a key that started one is answered, and counts nothing
    assert start(api, ACME, "k-0")[0] == 200
    # another tenant's and an operator's are not acme's to count
    assert start(api, GLOBEX, "k-0")[0] == 202
    operator = {**RESCAN_ALL, "filter": {"tenant": "acme", "job_type": "virus_scan"}}
    status, _ = call(api, "POST", "/operations", OPERATOR, operator, key="op-1")
    assert status == 202


def test_a_tenant_has_at_most_its_running_operations_at_once(api: Api) -> None:  # noqa: F811
    set_quotas(api, "acme", max_running_operations=1)
    clean(ingested("acme", "a.pdf"))

    assert start(api, ACME, "k-1")[0] == 202
    status, body, headers = start(api, ACME, "k-2")

    assert status == 429 and "1 bulk operations running" in body["error"]["message"]
    assert headers["Retry-After"] == str(RUNNING_OPERATIONS_RETRY_SECONDS)
    drain(api)  # the first finishes
    assert start(api, ACME, "k-3")[0] == 202


def test_an_operation_whose_rescans_spend_the_tenants_day_stops_saying_why(
    api: Api,  # noqa: F811
) -> None:
    set_quotas(api, "acme", rescans_per_day=2)
    plans = [ingested("acme", f"{n}.pdf") for n in range(4)]
    for plan in plans:
        clean(plan)

    status, started, _ = start(api, ACME, "k-1")
    assert status == 202
    drain(api)

    status, done = call(api, "GET", f"/operations/{started['id']}", ACME)
    assert done["status"] == "failed"
    assert "rescans of today" in done["error"] and "start it again after" in done["error"]
    rescans = [
        j
        for p in plans
        for j in jobs_of_file(p.file.id)
        if j.job_type is JobType.VIRUS_SCAN and j.input_data and "rescan" in j.input_data
    ]
    assert len(rescans) == 2


def test_a_dry_run_counts_nothing(api: Api) -> None:  # noqa: F811
    set_quotas(api, "acme", operations_per_day=1)
    status, _ = call(api, "POST", "/operations", ACME, {**RESCAN_ALL, "dry_run": True})
    assert status == 200
    assert usage_of(api, "acme")["operations"] == 0
