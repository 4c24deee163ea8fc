"""Job messages and S3 notifications: what is accepted, and how the rest is refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from filejobs.adapters.s3_notifications import object_created_records
from filejobs.domain.job import JobType
from filejobs.domain.messages import JobMessage, MalformedMessageError, is_uuid
from tests.factories import pending_job

JOB_ID = "5368c92a-dbb6-510d-b34e-246abad353a0"
FILE_ID = "0b7e5d43-2a61-5c1e-9d0f-3c2b1a4e6f70"


def test_a_job_message_round_trips() -> None:
    message = JobMessage(JOB_ID, JobType.VIRUS_SCAN, FILE_ID)
    assert JobMessage.parse(message.to_json()) == message


def test_a_jobs_message_names_its_file() -> None:
    job = pending_job(datetime(2026, 11, 29, tzinfo=UTC))
    message = JobMessage.for_job(job)
    assert (message.job_id, message.job_type, message.file_id) == (
        job.id,
        job.job_type,
        job.file_id,
    )
    assert json.loads(message.to_json())["file_id"] == job.file_id


def test_a_jobs_message_names_its_tenant_for_the_tenants_cap() -> None:
    job = pending_job(datetime(2026, 11, 29, tzinfo=UTC))
    message = JobMessage.parse(JobMessage.for_job(job).to_json())
    assert message.tenant == job.tenant == "acme"


def test_a_message_sent_before_tenants_parses_without_one() -> None:
    body = json.dumps({"job_id": JOB_ID, "job_type": "virus_scan", "file_id": FILE_ID})
    assert JobMessage.parse(body).tenant is None


def test_a_message_sent_before_file_ids_still_parses() -> None:
    body = json.dumps({"job_id": JOB_ID, "job_type": "virus_scan"})
    assert JobMessage.parse(body) == JobMessage(JOB_ID, JobType.VIRUS_SCAN, file_id=None)


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"job_type": "virus_scan"}', "job_id must be a UUID"),
        ('{"job_id": "../../etc", "job_type": "virus_scan"}', "job_id must be a UUID"),
        (json.dumps({"job_id": JOB_ID, "job_type": "mining"}), "unknown job_type"),
        (
            json.dumps({"job_id": JOB_ID, "job_type": "virus_scan", "file_id": "../../etc"}),
            "file_id must be a UUID",
        ),
        (
            json.dumps({"job_id": JOB_ID, "job_type": "virus_scan", "file_id": 7}),
            "file_id must be a UUID",
        ),
        (
            json.dumps({"job_id": JOB_ID, "job_type": "virus_scan", "tenant": "../acme"}),
            "tenant must be a tenant id",
        ),
    ],
)
def test_malformed_job_messages_are_refused_with_a_reason(body: str, complaint: str) -> None:
    with pytest.raises(MalformedMessageError, match=complaint):
        JobMessage.parse(body)


def s3_notification(key: str, event: str = "ObjectCreated:Put") -> str:
    return json.dumps(
        {
            "Records": [
                {
                    "eventName": event,
                    "s3": {
                        "bucket": {"name": "uploads"},
                        "object": {
                            "key": key,
                            "size": 12,
                            "eTag": "abc",
                            "versionId": "v1",
                            "sequencer": "0A1B",
                        },
                    },
                }
            ]
        }
    )


ID = "0b6c4f1e-8d1a-4c53-9a55-3f0f1f6f2a10"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        (ID, True),
        (ID.upper(), True),
        (ID.replace("-", ""), False),
        (f"{{{ID}}}", False),
        (f"urn:uuid:{ID}", False),
        (f"{ID}\n", False),
        (ID[:-1], False),
        (ID[:-1] + "g", False),
        ("", False),
    ],
)
def test_an_id_is_a_uuid_in_its_hyphenated_form_only(text: str, answer: bool) -> None:
    assert is_uuid(text) is answer


def test_object_created_keys_are_url_decoded() -> None:
    [record] = object_created_records(s3_notification("uploads/acme/Annual+report%2C+2026.pdf"))
    assert record.key == "uploads/acme/Annual report, 2026.pdf"
    assert (record.bucket, record.size, record.version_id, record.sequencer) == (
        "uploads",
        12,
        "v1",
        "0A1B",
    )


def test_the_s3_test_event_is_acknowledged_with_no_records() -> None:
    body = json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "uploads"})
    assert object_created_records(body) == []


def test_other_s3_events_are_ignored() -> None:
    assert object_created_records(s3_notification("uploads/a/b", "ObjectRemoved:Delete")) == []


@pytest.mark.parametrize(
    "body",
    ["", "{}", '{"Records": "nope"}', '{"Records": [{"eventName": "ObjectCreated:Put"}]}'],
)
def test_malformed_s3_notifications_are_refused(body: str) -> None:
    with pytest.raises(MalformedMessageError):
        object_created_records(body)
