"""Upload presets end to end on moto, built from template.yaml: managed through the API's handler
(PUT/GET/DELETE /presets), stored in OpsTable (one item a tenant, each version kept), and applied
by ingest to real uploads in S3, by prefix and by the upload's own metadata, for one read of the
tenant's presets a minute."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
import pytest

from filejobs import runtime
from filejobs.adapters.s3 import S3HeadReader
from filejobs.data.file_repository import FileRepository
from filejobs.data.preset_repository import PresetRepository
from filejobs.domain.ingest import ObjectCreated
from filejobs.domain.job import JobType
from filejobs.domain.presets import Preset, PresetJob, PresetSet
from filejobs.ports import Ingested
from filejobs.services.ingest import IngestService
from filejobs.services.presets import PresetCache
from tests.aws_requests import counting_requests
from tests.integration.test_api import ACME, BUCKET, GLOBEX, OPERATOR, Api, stack  # noqa: F401
from tests.integration.test_bulk_operations import call

AVATARS: dict[str, Any] = {
    "jobs": [
        {"job_type": "virus_scan"},
        {"job_type": "thumbnail_generation", "options": {"sizes": [512], "format": "webp"}},
    ],
    "prefixes": ["uploads/acme/avatars/"],
    "description": "a scan and one 512 px WebP",
}
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(200)


@pytest.fixture
def api(stack: Api) -> Api:  # noqa: F811 (test_api's fixture)
    return stack


def store() -> PresetRepository:
    return PresetRepository(boto3.client("dynamodb"), os.environ["OPS_TABLE_NAME"])


def uploaded(key: str, body: bytes, preset: str | None = None) -> ObjectCreated:
    s3 = boto3.client("s3")
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    metadata = {} if preset is None else {"filejobs-preset": preset}
    put = s3.put_object(Bucket=BUCKET, Key=key, Body=body, Metadata=metadata)
    return ObjectCreated(BUCKET, key, len(body), put["ETag"].strip('"'), sequencer=key)


def ingest_service(cache: PresetCache | None = None) -> IngestService:
    return IngestService(
        FileRepository(),
        S3HeadReader(boto3.client("s3")),
        presets=(cache or PresetCache(store())).of,
    )


def test_a_preset_is_saved_read_versioned_listed_and_removed_through_the_api(api: Api) -> None:
    # when acme saves a preset, then saves it again with another size
    status, first = call(api, "PUT", "/presets/avatars", ACME, AVATARS)
    assert status == 200 and first["version"] == 1 and first["tenant"] == "acme"
    assert first["jobs"][1] == {
        "job_type": "thumbnail_generation",
        "options": {"sizes": [512], "format": "webp"},
        "priority": 0,
    }
    bigger = {**AVATARS, "jobs": [AVATARS["jobs"][0], {"job_type": "thumbnail_generation"}]}
    status, second = call(api, "PUT", "/presets/avatars", ACME, bigger)
    assert status == 200 and second["version"] == 2
    # then the current version is the second, and the first stays readable
    assert call(api, "GET", "/presets/avatars", ACME)[1]["version"] == 2
    status, old = api.call("GET", "/presets/avatars", who=ACME, query={"version": "1"})
    assert (status, old["jobs"]) == (200, first["jobs"])
    assert [p["name"] for p in call(api, "GET", "/presets", ACME)[1]["presets"]] == ["avatars"]
    # and globex sees none of it
    assert call(api, "GET", "/presets", GLOBEX)[1] == {"presets": []}
    assert call(api, "GET", "/presets/avatars", GLOBEX)[0] == 404
    # when acme removes it, then it is gone, its versions kept
    assert api.raw("DELETE", "/presets/avatars", who=ACME)["statusCode"] == 204
    assert call(api, "GET", "/presets/avatars", ACME)[0] == 404
    assert api.call("GET", "/presets/avatars", who=ACME, query={"version": "2"})[0] == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"jobs": [{"job_type": "thumbnail_generation"}]}, "jobs: "),
        ({"jobs": [{"job_type": "virus_scan"}, {"job_type": "virus_scan"}]}, "jobs[1].job_type:"),
        (
            {"jobs": [{"job_type": "virus_scan", "options": {"sizes": [64]}}]},
            "jobs[0].options.sizes:",
        ),
        (
            {
                "jobs": [
                    {"job_type": "virus_scan"},
                    {"job_type": "compression", "options": {"algorithm": "brotli"}},
                ]
            },
            "jobs[1].options.algorithm:",
        ),
        ({"jobs": [{"job_type": "sharpen"}]}, "jobs[0].job_type:"),
        ({"jobs": [{"job_type": "virus_scan", "priority": 1.5}]}, "jobs[0].priority"),
        ({"jobs": [], "prefixes": ["uploads/globex/"]}, "prefixes[0]:"),
        ({"jobs": [], "prefixes": "uploads/acme/"}, "prefixes:"),
        ({"jobs": None}, "jobs:"),
        ({"jobs": [], "tenant_default": "yes"}, "tenant_default:"),
    ],
)
def test_a_preset_the_rules_refuse_is_422_naming_the_field_and_nothing_is_saved(
    api: Api, body: dict[str, Any], field: str
) -> None:
    status, answer = call(api, "PUT", "/presets/avatars", ACME, body)
    assert status == 422, answer
    assert answer["error"]["message"].startswith(field), answer
    assert store().current("acme", consistent=True) == PresetSet()


def test_an_operator_manages_a_tenants_presets_by_naming_the_tenant(api: Api) -> None:
    status, made = api.call(
        "PUT", "/presets/quick", who=OPERATOR, query={"tenant": "globex"},
        body=json.dumps({"jobs": [{"job_type": "virus_scan"}], "tenant_default": True}),
    )  # fmt: skip
    assert status == 200 and made["tenant"] == "globex" and made["updated_by"] == "api:operator"
    assert call(api, "GET", "/presets", GLOBEX)[1]["presets"][0]["name"] == "quick"
    assert call(api, "PUT", "/presets/quick", OPERATOR, {"jobs": []})[0] == 422  # whose?


def test_uploads_get_the_jobs_of_their_prefixs_preset_and_the_file_records_it(api: Api) -> None:
    call(api, "PUT", "/presets/avatars", ACME, {**AVATARS, "jobs": [*AVATARS["jobs"]]})
    # when a photo is uploaded under the bound prefix, and another elsewhere
    bound = ingest_service().ingest(uploaded("uploads/acme/avatars/me.jpg", JPEG))
    free = ingest_service().ingest(uploaded("uploads/acme/photos/me.jpg", JPEG))
    assert isinstance(bound, Ingested) and isinstance(free, Ingested)
    # then the first gets exactly the preset's jobs, with its options
    jobs = {job.job_type: job for job in bound.plan.jobs}
    assert set(jobs) == {JobType.VIRUS_SCAN, JobType.THUMBNAIL_GENERATION}
    assert jobs[JobType.THUMBNAIL_GENERATION].input_data["sizes"] == [512]  # type: ignore[index]
    # and the other its content type's default jobs
    assert {job.job_type for job in free.plan.jobs} == {
        JobType.VIRUS_SCAN,
        JobType.DEDUPLICATION_CHECK,
        JobType.THUMBNAIL_GENERATION,
    }
    # and the file says which preset (and version) chose its jobs
    status, shown = call(api, "GET", f"/files/{bound.plan.file.id}", ACME)
    assert status == 200
    assert shown["preset"] == {"name": "avatars", "version": 1, "by": "prefix"}
    assert call(api, "GET", f"/files/{free.plan.file.id}", ACME)[1]["preset"] is None


def test_an_upload_names_its_preset_in_its_metadata_and_a_store_only_file_is_stored(
    api: Api,
) -> None:
    call(api, "PUT", "/presets/archive", ACME, {"jobs": []})
    result = ingest_service().ingest(
        uploaded("uploads/acme/reports/q3.pdf", b"%PDF-1.7\n", preset="archive")
    )
    assert isinstance(result, Ingested) and result.plan.jobs == ()
    status, shown = call(api, "GET", f"/files/{result.plan.file.id}", ACME)
    assert status == 200
    assert shown["preset"] == {"name": "archive", "version": 1, "by": "metadata"}
    assert shown["processing_state"] == "stored" and shown["jobs"] == []
    # a name the tenant lacks is noted on the file, and the default jobs run
    typo = ingest_service().ingest(
        uploaded("uploads/acme/reports/q4.pdf", b"%PDF-1.7\n", preset="archiv")
    )
    assert isinstance(typo, Ingested) and typo.plan.jobs
    noted = call(api, "GET", f"/files/{typo.plan.file.id}", ACME)[1]
    assert "'archiv'" in noted["preset_note"]


def test_a_version_saved_later_applies_to_later_uploads_and_each_file_keeps_its_own(
    api: Api,
) -> None:
    call(api, "PUT", "/presets/avatars", ACME, AVATARS)
    first = ingest_service().ingest(uploaded("uploads/acme/avatars/a.jpg", JPEG))
    smaller = {"job_type": "thumbnail_generation", "options": {"sizes": [64]}}
    call(api, "PUT", "/presets/avatars", ACME, {**AVATARS, "jobs": [AVATARS["jobs"][0], smaller]})
    second = ingest_service().ingest(uploaded("uploads/acme/avatars/b.jpg", JPEG))
    assert isinstance(first, Ingested) and isinstance(second, Ingested)
    assert (first.plan.file.preset.version, second.plan.file.preset.version) == (1, 2)  # type: ignore[union-attr]
    sizes = [
        next(j for j in r.plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION).input_data[
            "sizes"
        ]  # type: ignore[index]
        for r in (first, second)
    ]
    assert sizes == [[512], [64]]
    assert FileRepository().get(first.plan.file.id).preset.version == 1  # type: ignore[union-attr]


def test_ingest_reads_the_tenants_presets_once_for_many_uploads(api: Api) -> None:
    call(api, "PUT", "/presets/avatars", ACME, AVATARS)
    records = [uploaded(f"uploads/acme/avatars/{n}.jpg", JPEG) for n in range(5)]
    dynamodb = boto3.client("dynamodb")
    cache = PresetCache(PresetRepository(dynamodb, os.environ["OPS_TABLE_NAME"]))
    service = ingest_service(cache)
    with counting_requests(dynamodb) as requests:
        results = [service.ingest(r) for r in records]
    assert all(isinstance(r, Ingested) for r in results)
    # one GetItem of the tenant's presets, and each upload's one transaction
    assert requests.calls == {"dynamodb:GetItem": 1, "dynamodb:TransactWriteItems": 5}


def test_two_changes_racing_cannot_both_bind_a_prefix(api: Api) -> None:
    repository = store()
    current = repository.current("acme", consistent=True)
    one = Preset("acme", "one", 1, (PresetJob(JobType.VIRUS_SCAN),), ("uploads/acme/x/",))
    two = Preset("acme", "two", 1, (PresetJob(JobType.VIRUS_SCAN),), ("uploads/acme/x/",))
    # both read revision 0; the first write wins, the second is refused, nothing of it written
    assert repository.save("acme", (one,), one, after=current.revision)
    assert not repository.save("acme", (two,), two, after=current.revision)
    assert [p.name for p in repository.current("acme", consistent=True).presets] == ["one"]
    assert repository.version("acme", "two", 1) is None
    assert runtime.settings().require_ops_table() == os.environ["OPS_TABLE_NAME"]
