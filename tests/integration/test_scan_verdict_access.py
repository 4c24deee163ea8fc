"""Specification: a verdict only the scan can give, and bytes read only as the verdict allows.

The template's own policies (role policies, bucket policies) evaluated by tests/iam.py against
the calls the real code makes on moto, condition keys included: the attributes a DynamoDB write
names (`dynamodb:Attributes`), the tags the S3 object carried when it was read
(`s3:ExistingObjectTag/scan-status`), the caller (`aws:PrincipalArn`).

- Only the scan's role may write a file's verdict attributes (ScanVerdictIsTheScansPolicy
  denies them to every other role that writes FilesTable); the ingest records a file without
  one: its absence means "not scanned".
- A decoding worker may read an upload only once the scan tagged it CLEAN (UNSCANNABLE too
  where UnscannableFiles is "process"), and the uploads bucket denies every other reader but the
  ingest, the scan and the deduplication check, as GuardDuty's tag-based access does.
- The quarantine bucket is written by the scan, read by the incident-response role alone, and
  emptied by the erasures; the definitions are written by their updater alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

import pytest

from filejobs.adapters.quarantine import S3VerdictStore
from filejobs.data.file_repository import FileRepository
from filejobs.data.models import FileModel
from filejobs.domain.file import ScanRecord, ScanStatus
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.objects import ObjectLocation
from filejobs_dev.infra.template import load_template, resources_of_type, role_policies
from tests.factories import ingest_plan
from tests.iam import (
    ACCOUNT,
    PARTITION,
    Call,
    Grant,
    Resolver,
    denied,
    denied_by_resource_policy,
    grants,
    recording_calls,
    table_arn,
    template_conditions,
)
from tests.processing import MediaBench

TEMPLATE = load_template()
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SCAN = "VirusScanWorkerRole"
DECODERS = (
    "ThumbnailGenerationWorkerRole",
    "VideoThumbnailWorkerRole",
    "DocumentPreviewWorkerRole",
    "CompressionWorkerRole",
)
READ_BEFORE_A_VERDICT = ("IngestFunctionRole", SCAN, "DeduplicationCheckWorkerRole")
DEFAULTS = template_conditions()
PROCESSING_UNSCANNABLE = template_conditions({"UnscannableFiles": "process"})
WITH_RESPONDERS = template_conditions(
    {"IncidentResponsePrincipals": f"arn:{PARTITION}:iam::{ACCOUNT}:role/SecurityTeam"}
)


def role_arn(role: str) -> str:
    return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{role}"


class Arns(Mapping[str, str]):
    """Every "LogicalId.Arn" a policy names: the test's tables and buckets, each role by its
    logical id, anything else a placeholder no request here names."""

    def __init__(self, named: Mapping[str, str]) -> None:
        self._named = dict(named)

    def __getitem__(self, name: str) -> str:
        if name in self._named:
            return self._named[name]
        logical_id = name.removesuffix(".Arn")
        if TEMPLATE["Resources"].get(logical_id, {}).get("Type") == "AWS::IAM::Role":
            return role_arn(logical_id)
        return f"arn:{PARTITION}:unrelated:::{name}"

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._named)

    def __len__(self) -> int:
        return len(self._named)


@pytest.fixture
def arns(tables: dict[str, str], media: MediaBench) -> Arns:
    return Arns(
        {
            "FilesTable.Arn": table_arn(tables["FilesTable"]),
            "JobsTable.Arn": table_arn(tables["JobsTable"]),
            "UploadsBucket.Arn": f"arn:{PARTITION}:s3:::{media.uploads}",
            "OutputsBucket.Arn": f"arn:{PARTITION}:s3:::{media.outputs}",
            "QuarantineBucket.Arn": f"arn:{PARTITION}:s3:::{media.quarantine}",
        }
    )


def of_role(role: str, arns: Arns, conditions: Mapping[str, bool] = DEFAULTS) -> list[Grant]:
    return grants(role_policies(TEMPLATE, role), Resolver(arns, conditions=conditions))


def of_policy(
    logical_id: str, arns: Arns, conditions: Mapping[str, bool] = DEFAULTS
) -> list[Grant]:
    document = TEMPLATE["Resources"][logical_id]["Properties"]["PolicyDocument"]
    return grants([document], Resolver(arns, conditions=conditions))


def roles_allowed(calls: list[Call], arns: Arns) -> set[str]:
    """The roles of the template whose own policies allow every one of the calls."""
    assert calls
    return {
        role
        for role in resources_of_type(TEMPLATE, "AWS::IAM::Role")
        if denied(calls, of_role(role, arns, WITH_RESPONDERS)) == []
    }


@pytest.fixture
def recorded(tables: dict[str, str]) -> IngestPlan:
    plan = ingest_plan(T0)
    FileRepository().record_ingest(plan)
    return plan


def verdict(status: ScanStatus) -> ScanRecord:
    return ScanRecord(verdict=status, scanned_at=T0, job_id="scan-job", engines={"clamav": "1"})


# --- the verdict in FilesTable -----------------------------------------------------------------


def test_only_the_scans_role_may_record_a_verdict(recorded: IngestPlan, arns: Arns) -> None:
    # When the verdict is recorded as the scan records it
    with recording_calls() as recorder:
        FileRepository().record_scan(recorded.file.id, verdict(ScanStatus.CLEAN), by="scan")
    # Then, of all the template's roles (seven of them may update a file item), only the
    # scan's may make that write
    assert roles_allowed(recorder.calls, arns) == {SCAN}


def test_the_compression_worker_cannot_set_a_verdict_by_any_write(
    recorded: IngestPlan, arns: Arns
) -> None:
    compression = of_role("CompressionWorkerRole", arns)
    with recording_calls() as recorder:
        FileRepository().record_scan(recorded.file.id, verdict(ScanStatus.CLEAN), by="x")
        FileRepository().keep_displaced_tags(recorded.file.id, {"a": "b"}, at=T0, by="x")
        # a whole file item put again, carrying a verdict
        forged = FileModel.get(recorded.file.id)
        forged.scan_status = ScanStatus.CLEAN.value
        forged.save()
    assert len(recorder.calls) == 4
    for call in (recorder.calls[0], recorder.calls[1], recorder.calls[3]):
        assert denied([call], compression) != [], call.operation


def test_the_other_writers_are_denied_the_verdict_explicitly_not_their_own_attributes(
    recorded: IngestPlan, arns: Arns
) -> None:
    api = of_role("ApiFunctionRole", arns)
    # Given the API's role, which may update a file item (a deletion, a restore)
    with recording_calls() as own:
        FileRepository().mark_deleted(recorded.file.id, reason="by the tenant", at=T0, by="api")
    assert denied(own.calls, api) == []
    # When it tries to write the verdict, or to remove it
    with recording_calls() as forged:
        FileRepository().record_scan(recorded.file.id, verdict(ScanStatus.CLEAN), by="api")
        FileModel(id=recorded.file.id).update(actions=[FileModel.scan_status.remove()])
    # Then an explicit Deny refuses each (no later Allow can undo it)
    refused = denied(forged.calls, api)
    assert len(refused) == 1 and refused[0].endswith("(dynamodb:UpdateItem): denied")
    writes = [c for c in forged.calls if c.operation == "UpdateItem"]
    assert len(writes) == 2 and all(denied([write], api) for write in writes)


def test_the_ingest_records_a_file_without_a_verdict_and_may(arns: Arns, tables: object) -> None:
    # The ingest puts the whole file item (PutItem names every attribute): it carries none of
    # the verdict's, so the Deny does not touch it, and the file waits for its scan
    plan = ingest_plan(T0)
    with recording_calls() as recorder:
        FileRepository().record_ingest(plan)
    assert denied(recorder.calls, of_role("IngestFunctionRole", arns)) == []
    stored = FileRepository().get(plan.file.id)
    assert stored is not None and stored.scan_status is None


# --- reading uploads: the scan-status tag -------------------------------------------------------


def read_as_worker(media: MediaBench, key: str, version: str) -> list[Call]:
    with recording_calls() as recorder:
        media.s3.get_object(Bucket=media.uploads, Key=key, VersionId=version)
    return recorder.calls


def uploaded(media: MediaBench, name: str) -> tuple[str, str]:
    key = f"uploads/acme/{name}"
    put = media.s3.put_object(Bucket=media.uploads, Key=key, Body=b"\x89PNG not really")
    return key, put["VersionId"]


def tagged(media: MediaBench, key: str, version: str, verdict: str) -> None:
    """The version tagged as the scan tags it."""
    marks = S3VerdictStore(media.s3, media.quarantine)
    location = ObjectLocation(media.uploads, key, version)
    assert marks.tag(location, verdict, keep_displaced=lambda _: None)


@pytest.mark.parametrize("role", DECODERS)
def test_a_decoding_worker_may_read_an_upload_only_once_scanned_clean(
    media: MediaBench, arns: Arns, role: str
) -> None:
    key, version = uploaded(media, "photo.png")
    worker = of_role(role, arns)
    # Not before the scan, nor when it is UNSCANNABLE (held by default)
    assert denied(read_as_worker(media, key, version), worker) != []
    tagged(media, key, version, "UNSCANNABLE")
    assert denied(read_as_worker(media, key, version), worker) != []
    # unless the stack processes unscannable files
    processing = of_role(role, arns, PROCESSING_UNSCANNABLE)
    assert denied(read_as_worker(media, key, version), processing) == []
    # And once the scan tagged it CLEAN
    tagged(media, key, version, "CLEAN")
    assert denied(read_as_worker(media, key, version), worker) == []


def test_the_uploads_bucket_denies_unscanned_reads_to_all_but_ingest_scan_and_dedup(
    media: MediaBench, arns: Arns
) -> None:
    policy = of_policy("UploadsBucketPolicy", arns)
    key, version = uploaded(media, "photo.png")
    unscanned = read_as_worker(media, key, version)
    readers = [role_arn(r) for r in (*DECODERS, "ApiFunctionRole")] + [role_arn("Admin")]
    for principal in readers:
        assert denied_by_resource_policy(unscanned, policy, principal) != [], principal
    for role in READ_BEFORE_A_VERDICT:
        assert denied_by_resource_policy(unscanned, policy, role_arn(role)) == [], role
    # Once the scan tagged it CLEAN, the bucket lets anyone's own grants decide
    tagged(media, key, version, "CLEAN")
    clean = read_as_worker(media, key, version)
    assert denied_by_resource_policy(clean, policy, role_arn("CompressionWorkerRole")) == []


# --- the quarantine bucket and the definitions ----------------------------------------------------


def quarantined(media: MediaBench) -> tuple[list[Call], str]:
    """The scan's calls that quarantine an upload, and the copy's key."""
    key, version = uploaded(media, "virus.exe")
    store = S3VerdictStore(media.s3, media.quarantine, media.outputs)
    with recording_calls() as recorder:
        moved = store.quarantine(
            ObjectLocation(media.uploads, key, version),
            tenant="acme",
            file_id="f-1",
            etag=media.s3.head_object(Bucket=media.uploads, Key=key)["ETag"],
            size=15,
        )
    return recorder.calls, moved.key


def test_only_the_scan_writes_the_quarantine_and_needs_no_read_of_it(
    media: MediaBench, arns: Arns
) -> None:
    calls, _ = quarantined(media)
    policy = of_policy("QuarantineBucketPolicy", arns)
    into_quarantine = [c for c in calls if c.params.get("Bucket") == media.quarantine]
    assert {c.operation for c in into_quarantine} >= {"CopyObject", "GetObjectTagging"}
    assert denied_by_resource_policy(into_quarantine, policy, role_arn(SCAN)) == []
    assert denied(calls, of_role(SCAN, arns)) == []
    for other in ("ApiFunctionRole", "OperationsFunctionRole", "Admin"):
        assert denied_by_resource_policy(into_quarantine, policy, role_arn(other)) != []


def test_only_the_incident_response_role_reads_a_quarantined_copy(
    media: MediaBench, arns: Arns
) -> None:
    _, copy = quarantined(media)
    with recording_calls() as recorder:
        media.s3.get_object(Bucket=media.quarantine, Key=copy)
    read = recorder.calls
    # Without IncidentResponsePrincipals there is no such role, and nobody reads a copy
    nobody = of_policy("QuarantineBucketPolicy", arns)
    for role in (SCAN, "ApiFunctionRole", "Admin", "IncidentResponseRole"):
        assert denied_by_resource_policy(read, nobody, role_arn(role)) != []
    assert TEMPLATE["Resources"]["IncidentResponseRole"]["Condition"] == "NamesIncidentResponders"
    assert not DEFAULTS["NamesIncidentResponders"]
    # With it, the role it makes reads, and nobody else
    responders = of_policy("QuarantineBucketPolicy", arns, WITH_RESPONDERS)
    assert denied_by_resource_policy(read, responders, role_arn("IncidentResponseRole")) == []
    assert denied(read, of_role("IncidentResponseRole", arns, WITH_RESPONDERS)) == []
    for role in (SCAN, "ApiFunctionRole", "Admin"):
        assert denied_by_resource_policy(read, responders, role_arn(role)) != []
    assert roles_allowed(read, arns) == {"IncidentResponseRole"}


def test_only_the_erasures_delete_a_quarantined_copy(media: MediaBench, arns: Arns) -> None:
    _, copy = quarantined(media)
    with recording_calls() as recorder:
        media.s3.delete_object(Bucket=media.quarantine, Key=copy, VersionId="v")
    policy = of_policy("QuarantineBucketPolicy", arns)
    for eraser in ("ApiFunctionRole", "OperationsFunctionRole"):
        assert denied_by_resource_policy(recorder.calls, policy, role_arn(eraser)) == []
    for other in (SCAN, "FileRemovalsFunctionRole", "Admin"):
        assert denied_by_resource_policy(recorder.calls, policy, role_arn(other)) != []


def test_only_the_definitions_updater_writes_the_definitions(media: MediaBench, arns: Arns) -> None:
    with recording_calls() as recorder:
        media.s3.put_object(Bucket=media.outputs, Key="signatures/manifest.json", Body=b"{}")
        media.s3.delete_object(Bucket=media.outputs, Key="signatures/sets/1/main.cvd")
    policy = of_policy("OutputsBucketPolicy", arns)
    updater = role_arn("DefinitionsUpdaterRole")
    assert denied_by_resource_policy(recorder.calls, policy, updater) == []
    for other in (SCAN, "ApiFunctionRole", "CompressionWorkerRole", "Admin"):
        refused = denied_by_resource_policy(recorder.calls, policy, role_arn(other))
        assert len(refused) == 2, other
    # A worker's own derived outputs are not the updater's business, and signatures/custom/
    # is the operators' input to the updater (checked by it before any set has it)
    with recording_calls() as others:
        media.s3.put_object(Bucket=media.outputs, Key="derived/acme/f/compression/x", Body=b"z")
        media.s3.put_object(Bucket=media.outputs, Key="signatures/custom/yara/r.yar", Body=b"")
    assert (
        denied_by_resource_policy(others.calls[:1], policy, role_arn("CompressionWorkerRole")) == []
    )
    assert denied_by_resource_policy(others.calls[1:], policy, role_arn("Admin")) == []


def test_object_lock_on_the_quarantine_is_an_option_off_by_default() -> None:
    assert not DEFAULTS["LocksQuarantinedCopies"]
    assert template_conditions({"QuarantineObjectLockMode": "GOVERNANCE"})["LocksQuarantinedCopies"]
    bucket = TEMPLATE["Resources"]["QuarantineBucket"]["Properties"]
    rule = bucket["ObjectLockConfiguration"]["Fn::If"][1]["Rule"]["DefaultRetention"]
    assert rule == {
        "Mode": {"Ref": "QuarantineObjectLockMode"},
        "Days": {"Ref": "QuarantineRetentionDays"},
    }
