"""Rescans through the status API (POST /files/{id}/rescan, POST /rescans) and the scheduled
policy (services/rescans.py), against moto tables and queues built from template.yaml. Every
write is the real conditional write; every listing reads the real index."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from filejobs.data.file_repository import FileRepository
from filejobs.data.job_repository import JobRepository
from filejobs.domain.file import FileStatus, ScanRecord, ScanStatus
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobType
from filejobs.domain.time import utcnow
from filejobs.services.rescans import RESCAN_PRIORITY, Rescans
from tests.integration.test_api import (
    ACME,
    GLOBEX,
    OPERATOR,
    Api,
    error_code,
    ingested,
    stack,  # noqa: F401 (the fixture `api` builds on)
)
from tests.integration.test_api_requests import headers_of
from tests.listing import jobs_of_file


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture, imported to be used here)
    return stack


def clean(plan: IngestPlan, *, days_ago: float = 0, definitions: str | None = None) -> None:
    record = ScanRecord(
        ScanStatus.CLEAN,
        utcnow() - timedelta(days=days_ago),
        "00000000-0000-4000-8000-00000000aaaa",
        engines={"clamav": "ClamAV 1.4.6"},
        definitions_version=definitions,
    )
    FileRepository().record_scan(plan.file.id, record, by="virus_scan")


def rescan(
    api: Api, file_id: str, *, key: str | None = None, who: dict[str, str] = ACME, body: Any = None
) -> tuple[int, Any, dict[str, str]]:
    response = api.raw(
        "POST",
        f"/files/{file_id}/rescan",
        who=who,
        body=None if body is None else json.dumps(body),
        headers=None if key is None else {"Idempotency-Key": key},
    )
    return response["statusCode"], json.loads(response["body"]), headers_of(response)


def rescan_page(
    api: Api, body: dict[str, Any], *, key: str, who: dict[str, str] = OPERATOR
) -> tuple[int, Any]:
    response = api.raw(
        "POST", "/rescans", who=who, body=json.dumps(body), headers={"Idempotency-Key": key}
    )
    return response["statusCode"], json.loads(response["body"])


def scan_jobs_of(file_id: str) -> list[Any]:
    return [j for j in jobs_of_file(file_id) if j.job_type is JobType.VIRUS_SCAN]


# --- POST /files/{file_id}/rescan ----------------------------------------------------------------


def test_a_rescan_is_a_new_scan_job_made_once_per_key_and_sent(api: Api) -> None:
    plan = ingested("acme", "a.pdf")
    clean(plan)
    status, job, headers = rescan(api, plan.file.id, key="r-1", body={"reason": "new sigs"})
    assert status == 201, job
    assert (job["job_type"], job["status"], job["priority"]) == ("virus_scan", "pending", -10)
    assert headers["Idempotent-Replayed"] == "false"
    stored = JobRepository().get(job["id"])
    assert stored is not None and stored.input_data is not None
    assert stored.input_data["rescan"] == {"reason": "new sigs", "requested_by": "api:tenant:acme"}
    assert stored.input_data["key"] == plan.file.key
    # the same key again answers the same job, making and sending nothing new
    again = rescan(api, plan.file.id, key="r-1", body={"reason": "new sigs"})
    assert again[0] == 200 and again[1]["id"] == job["id"]
    # in the scan's low lane (priority below 0), which never holds up new uploads
    assert [m["job_id"] for m in api.messages("VirusScanLowQueue")] == [job["id"]]
    assert len(scan_jobs_of(plan.file.id)) == 2  # the ingest's and the rescan


def test_a_quarantined_file_cannot_be_rescanned_and_another_tenants_is_not_found(
    api: Api,
) -> None:
    plan = ingested("acme", "bad.exe")
    FileRepository().quarantine(plan.file.id, reason="Eicar", at=utcnow(), by="virus_scan")
    status, body, _ = rescan(api, plan.file.id)
    assert (status, error_code(body)) == (409, "conflict")
    assert "quarantined" in body["error"]["message"]
    theirs = ingested("globex", "g.pdf")
    assert rescan(api, theirs.file.id, who=ACME)[0] == 404
    assert rescan(api, theirs.file.id, who=GLOBEX)[0] == 201


@pytest.mark.parametrize(
    "body",
    ['{"reason": ""}', '{"reason": 5}', '{"why": "x"}', "[1]", '{"reason": NaN}'],
)
def test_a_bad_rescan_body_is_refused_before_anything_is_written(api: Api, body: str) -> None:
    plan = ingested("acme", "b.pdf")
    response = api.raw("POST", f"/files/{plan.file.id}/rescan", who=ACME, body=body)
    assert response["statusCode"] in (400, 422)
    assert len(scan_jobs_of(plan.file.id)) == 1


# --- POST /rescans -----------------------------------------------------------------------------


def test_a_tenants_files_under_a_prefix_are_rescanned_page_by_page_once_per_key(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("filejobs.services.api.RESCAN_PAGE_LIMIT", 3)
    contracts = [ingested("acme", f"contracts/2026/c{n}.pdf") for n in range(7)]
    ingested("acme", "avatars/me.png")  # outside the prefix
    ingested("globex", "contracts/2026/theirs.pdf")  # another tenant's
    quarantined = ingested("acme", "contracts/2026/virus.exe")
    FileRepository().quarantine(quarantined.file.id, reason="x", at=utcnow(), by="virus_scan")
    body: dict[str, Any] = {"tenant": "acme", "prefix": "uploads/acme/contracts/"}
    requested: list[str] = []
    skipped: list[str] = []
    pages = 0
    while True:
        status, page = rescan_page(api, body, key="op-1")
        assert status == 200, page
        pages += 1
        requested += [r["file_id"] for r in page["requested"] if r["created"]]
        skipped += [s["file_id"] for s in page["skipped"]]
        if not page["next_token"]:
            break
        body["next_token"] = page["next_token"]
    assert pages == 3
    assert sorted(requested) == sorted(p.file.id for p in contracts)
    assert skipped == [quarantined.file.id]
    # a page replayed under the same key makes no second job
    status, replay = rescan_page(
        api, {k: v for k, v in body.items() if k != "next_token"}, key="op-1"
    )
    assert status == 200 and not any(r["created"] for r in replay["requested"])
    assert all(len(scan_jobs_of(p.file.id)) == 2 for p in contracts)


def test_a_dry_run_counts_and_writes_nothing(api: Api) -> None:
    plans = [ingested("acme", f"dry/{n}.txt") for n in range(2)]
    status, page = rescan_page(
        api, {"tenant": "acme", "prefix": "uploads/acme/dry/", "dry_run": True}, key="dry"
    )
    assert status == 200 and page["dry_run"] is True
    assert {r["file_id"] for r in page["requested"]} == {p.file.id for p in plans}
    assert all(len(scan_jobs_of(p.file.id)) == 1 for p in plans)
    assert api.messages("VirusScanLowQueue") == []


def test_a_tenant_rescans_only_its_own_and_an_operator_names_the_tenant(api: Api) -> None:
    ingested("acme", "t.txt")
    status, page = rescan_page(api, {}, key="k", who=ACME)
    assert status == 200 and page["tenant"] == "acme"
    assert rescan_page(api, {"tenant": "globex"}, key="k", who=ACME)[0] == 404
    assert rescan_page(api, {}, key="k", who=OPERATOR)[0] == 422
    # a field given as null is refused, not taken for absent
    assert rescan_page(api, {"tenant": None}, key="k", who=ACME)[0] == 422
    assert rescan_page(api, {"next_token": None}, key="k", who=ACME)[0] == 422
    # a token from another operation (another key) does not continue this one
    status, page = rescan_page(api, {"tenant": "acme", "next_token": "e30"}, key="k2", who=ACME)
    assert status == 400


# --- the policy ----------------------------------------------------------------------------------


class Sent:
    def __init__(self) -> None:
        self.jobs: list[str] = []

    def dispatch(self, job: Any, delay: timedelta = timedelta(0)) -> None:
        self.jobs.append(job.id)


def test_the_policy_rescans_old_verdicts_and_old_definitions_once_each(api: Api) -> None:
    old = ingested("acme", "old.pdf")
    clean(old, days_ago=40, definitions="20261001T000000Z")
    recent = ingested("acme", "recent.pdf")
    clean(recent, days_ago=1, definitions="20261130T000000Z")
    stale_sigs = ingested("globex", "g.pdf")
    clean(stale_sigs, days_ago=3, definitions="20261101T000000Z")
    never = ingested("acme", "unscanned.pdf")  # no verdict: not the policy's to rescan
    gone = ingested("acme", "gone.exe")
    clean(gone, days_ago=50)
    FileRepository().quarantine(gone.file.id, reason="x", at=utcnow(), by="virus_scan")
    sent = Sent()
    rescans = Rescans(JobRepository(), FileRepository(), sent)

    def run() -> Any:
        return rescans.run_policy(
            older_than=timedelta(days=30),
            definitions_before="20261115T000000Z",
            max_files=100,
        )

    report = run()
    # the 40-day-old verdict and the one given with definitions from before the 15th
    assert report.requested == 2
    plans = (old, recent, stale_sigs, never, gone)
    rescanned = [p.file.id for p in plans if len(scan_jobs_of(p.file.id)) == 2]
    assert sorted(rescanned) == sorted([old.file.id, stale_sigs.file.id])
    assert all(scan_jobs_of(f)[1].priority == RESCAN_PRIORITY for f in rescanned)
    # a second run before those rescans finish finds the same jobs, making none
    again = run()
    assert (again.requested, again.already_requested) == (0, 2)
    assert len(sent.jobs) == 2


def test_the_policy_stops_at_its_limit_per_run(api: Api) -> None:
    for n in range(5):
        clean(ingested("acme", f"batch/{n}.txt"), days_ago=60)
    rescans = Rescans(JobRepository(), FileRepository(), Sent())
    report = rescans.run_policy(
        older_than=timedelta(days=30),
        definitions_before=None,
        max_files=2,
    )
    assert report.requested == 2


def test_a_quarantined_file_leaves_the_policys_index(api: Api) -> None:
    plan = ingested("acme", "q.pdf")
    clean(plan, days_ago=90)
    files = FileRepository()
    assert [f.id for f in files.scanned_before(utcnow())] == [plan.file.id]
    files.quarantine(plan.file.id, reason="x", at=utcnow(), by="virus_scan")
    assert list(files.scanned_before(utcnow())) == []
    stored = files.get(plan.file.id)
    assert stored is not None and stored.status is FileStatus.QUARANTINED
