"""Malformed events, fuzzed into every event-driven handler, on moto resources built from
template.yaml.

Whatever an event source hands over, no exception escapes a handler. A malformed record of an SQS
batch fails alone (reported in batchItemFailures: redelivered, then kept by the dead-letter queue)
or is acknowledged without effect, as each handler's design says; a valid record beside it is
processed all the same. Nothing already recorded in the tables changes because of a malformed
record. The API answers any request with a 2xx or a 4xx in its error shape: never a 5xx, never a
stack trace.

The handlers are called in-process, exactly as tests/integration/test_handlers.py calls them; its
`stack` fixture and helpers are reused. Examples are derandomized: the same ones run everywhere.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote_plus

import boto3
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from filejobs import runtime
from filejobs.data.file_repository import FileRepository
from filejobs.domain.job import JobStatus, JobType
from filejobs.domain.keys import TENANT_PATTERN
from filejobs.domain.messages import JobMessage
from filejobs.domain.time import utcnow
from filejobs_dev.infra.template import create_secrets, function_definitions
from functions.api import app as api
from functions.ingest import app as ingest
from functions.sweep import app as sweep
from functions.worker import app as worker
from tests.conftest import FakeClock
from tests.factories import ingest_plan
from tests.integration import test_handlers as handlers
from tests.integration import test_outcome_events as outcome_events
from tests.integration.test_api import ACME, GLOBEX, OPERATOR, cancelled
from tests.integration.test_handlers import (
    TEMPLATE,
    FakeContext,
    Stack,
    event_file,
    invoke,
    receive,
)

# A batch with nothing to measure (every record malformed) flushes no metric: Powertools warns.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

# The fixtures this module's tests run on, as the integration tests define them.
stack = handlers.stack
outcomes = outcome_events.outcomes

# FUZZ_SCALE=10 runs ten times the examples (a deeper run than CI's).
SCALE = float(os.environ.get("FUZZ_SCALE", "1"))


def examples(count: int) -> int:
    return max(1, round(count * SCALE))


FUZZ = settings(
    deadline=None,
    derandomize=True,  # the same examples on every machine and every run
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Fate(StrEnum):
    """What becomes of a record of a batch, as the handler's design says."""

    REPORTED = "reported"  # in batchItemFailures: redelivered, then kept by the dead-letter queue
    ACKNOWLEDGED = "acknowledged"  # deleted from its queue, having changed nothing


type Labelled = tuple[str, Fate]  # a message body and what must become of it


# --- text as the event sources carry it -----------------------------------------------------------

# What an SQS message body may hold: #x9 #xA #xD, #x20 to #xD7FF, #xE000 to #xFFFD, and above.
SQS_TEXT = st.text(
    st.one_of(
        st.sampled_from("\t\n\r"),
        st.characters(min_codepoint=0x20, codec="utf-8", exclude_characters="\ufffe\uffff"),
    ),
    max_size=60,
)
# Any string a JSON document can spell, lone surrogates (`"\ud800"`) and NULs included.
ANY_TEXT = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=40)
HUGE_TEXT = st.integers(2_000, 60_000).map(lambda n: "x" * n)
FULLWIDTH_UPLOADS = "".join(chr(ord(c) + 0xFEE0) for c in "uploads")
MOJIBAKE = st.sampled_from(
    ["Ã©tÃ©", "\ufeff", "\x00", "\udcff\udcfe", "\ud800", "\u202e", "\ufffd" * 3, FULLWIDTH_UPLOADS]
)
STRANGE_TEXT = st.one_of(ANY_TEXT, HUGE_TEXT, MOJIBAKE)
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), STRANGE_TEXT
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)
NOT_AN_OBJECT = st.one_of(JSON_SCALARS, st.lists(JSON_VALUES, max_size=3))
NOT_A_STRING = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.lists(JSON_VALUES)
)


def as_body(value: object) -> str:
    """JSON as a producer writes it: ASCII, with escapes for everything else."""
    return json.dumps(value)


def reported(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[Labelled]:
    return strategy.map(lambda body: (body, Fate.REPORTED))


def acknowledged(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[Labelled]:
    return strategy.map(lambda body: (body, Fate.ACKNOWLEDGED))


# Bodies that are no document of any kind: not JSON, or JSON that is not an object.
NOT_A_DOCUMENT = st.one_of(
    SQS_TEXT,
    NOT_AN_OBJECT.map(as_body),
    st.sampled_from(["", " ", "{", '{"a":', "\ufeff{}", "null", "[]", "NaN", "{'a': 1}"]),
)


# --- the tables ---------------------------------------------------------------------------------

type Key = tuple[str, str]  # (table, id)
type Snapshot = dict[Key, Mapping[str, Any]]


def snapshot(names: Mapping[str, str]) -> Snapshot:
    """Every item of the jobs and files tables, by table and id.

    Read from moto's own store: its Scan answers through a serializer that takes a second per
    hundred job items, which would leave no time for examples.
    """
    backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    items: Snapshot = {}
    for logical_id in ("JobsTable", "FilesTable"):
        table = names[logical_id]
        for item in backend.get_table(table).all_items():
            attributes: dict[str, Any] = item.to_json()["Attributes"]
            items[(table, str(attributes["id"]["S"]))] = attributes
    return items


def about(item: Mapping[str, Any]) -> str:
    """The file an item is about: a file itself, or a job or content index entry of one."""
    return str((item.get("file_id") or item["id"])["S"])


def written(before: Snapshot, after: Snapshot) -> Snapshot:
    """The items added or changed from one snapshot to the next."""
    return {key: item for key, item in after.items() if before.get(key) != item}


def assert_only_changed_about(
    file_id: str | None, before: Snapshot, after: Snapshot, *, also: frozenset[Key] = frozenset()
) -> None:
    """Nothing was deleted, and every item added or changed is about `file_id` (none if None),
    or is one of `also` (checked by the caller)."""
    assert set(before) <= set(after), "items disappeared"
    strays = [
        key
        for key, item in written(before, after).items()
        if about(item) != file_id and key not in also
    ]
    assert not strays, f"items changed that no valid record is about: {strays}"


# --- SQS ------------------------------------------------------------------------------------------


def send(stack: Stack, logical_id: str, bodies: list[str]) -> None:
    for body in bodies:
        stack.sqs.send_message(QueueUrl=stack.queue(logical_id), MessageBody=body)


def expected_failures(records: list[dict[str, Any]], fates: Mapping[str, Fate]) -> list[str]:
    """The message ids the handler must report: its reported bodies' (others are acknowledged)."""
    return sorted(r["messageId"] for r in records if fates.get(r["body"]) is Fate.REPORTED)


def environment_of(function: str, stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function's own environment as template.yaml sets it, on the stack's resources (names
    of resources the stack lacks, such as IAM roles, stay their logical ids)."""
    parameters = TEMPLATE.get("Parameters", {})
    for name, declared in function_definitions(TEMPLATE)[function].environment.items():
        value: Any = declared
        if isinstance(value, dict) and "Ref" not in value:
            value = "unused"  # a role's unique id (!GetAtt): only the API reads it, of IAM callers
        known = {**handlers.PSEUDO, **stack.names, **parameters}
        missing = isinstance(value, dict) and value["Ref"] not in known
        resolved = value["Ref"] if missing else handlers._resolve(value, stack.names, parameters)
        monkeypatch.setenv(name, resolved)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "filejobs-test")
    runtime.reset()


# === IngestFunction: S3 notifications through the ingest queue ====================================

UPLOADS = "<uploads-bucket>"  # stands for the stack's uploads bucket in a generated body
UPLOAD_KEY = re.compile(rf"uploads/{TENANT_PATTERN[1:-1]}/.*[^/]", re.DOTALL)


def s3_record(
    key: str,
    *,
    bucket: object = UPLOADS,
    event_name: object = "ObjectCreated:Put",
    size: object = 11,
    etag: object = "9b2cf535f27731c974343645a3985328",
    sequencer: object = "0062E99A88DC407460",
) -> dict[str, Any]:
    """One record of an S3 event notification (key URL-encoded, as S3 sends it)."""
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2026-11-29T12:00:00.000Z",
        "eventName": event_name,
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "uploads",
            "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
            "object": {"key": key, "size": size, "eTag": etag, "sequencer": sequencer},
        },
    }


def without(record: dict[str, Any], *path: str) -> dict[str, Any]:
    """A deep copy of the record with the field at `path` removed."""
    copy: dict[str, Any] = json.loads(json.dumps(record))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return copy


def replaced(record: dict[str, Any], value: object, *path: str) -> dict[str, Any]:
    copy = without(record, *path)
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return copy


# Raw keys: a prefix, then anything, URL-encoding debris included; or a huge key.
ENCODED_DEBRIS = st.sampled_from(["%", "%2", "%ZZ", "%FF", "%00", "%2F", "+", "%25", "%ED%A0%80"])
RAW_KEYS = st.one_of(
    st.tuples(
        st.sampled_from(
            [
                "uploads/acme/",
                "uploads/acme/sub/",
                "uploads/",
                "uploads",
                "",
                "/uploads/acme/",
                "Uploads/acme/",
                "uploads%2Facme%2F",
                "uploads/ac+me/",
                "uploads/-acme/",
                f"uploads/{'a' * 64}/",
                "derived/acme/",
            ]
        ),
        st.lists(st.one_of(ANY_TEXT, ENCODED_DEBRIS, MOJIBAKE), max_size=4).map("".join),
    ).map("".join),
    HUGE_TEXT.map(lambda text: f"uploads/acme/{text}"),
)


def fate_of_key(raw_key: str) -> Fate:
    """An upload key (`uploads/{tenant}/{name}`, once decoded) is read from S3, where no generated
    key names an object: reported, to be retried. Any other key is refused for good, before any
    read: no retry turns it into an upload."""
    return Fate.REPORTED if UPLOAD_KEY.fullmatch(unquote_plus(raw_key)) else Fate.ACKNOWLEDGED


BROKEN_FIELDS: list[tuple[str, ...]] = [
    ("eventName",),
    ("s3",),
    ("s3", "bucket"),
    ("s3", "bucket", "name"),
    ("s3", "object"),
    ("s3", "object", "key"),
    ("s3", "object", "size"),
]
NOT_A_SIZE = st.one_of(  # null aside
    st.lists(st.integers(), max_size=2),
    st.dictionaries(ANY_TEXT, st.integers(), max_size=2),
    st.sampled_from(["", "abc", "12kb", "1.5", "0x10", "NaN", "Infinity", "1e3", "ten"]),
    st.text(st.characters(categories=["L"]), min_size=1, max_size=10),
)


@st.composite
def s3_records(draw: st.DrawFn) -> tuple[dict[str, Any], Fate]:
    """One record of a notification, and what must become of the message because of it."""
    key = draw(RAW_KEYS)
    record = s3_record(key, bucket=draw(st.sampled_from([UPLOADS, UPLOADS, "no-such-bucket"])))
    kind = draw(st.sampled_from(["key", "other event", "missing", "not a size", "no event name"]))
    if kind == "key":  # garbage or huge keys, inside or outside uploads/{tenant}/
        return record, fate_of_key(key)
    if kind == "other event":  # not an ObjectCreated record: skipped, whatever it holds
        name = draw(
            st.one_of(
                st.sampled_from(
                    ["ObjectRemoved:Delete", "s3:ObjectCreated:Put", "objectcreated:put", ""]
                ),
                ANY_TEXT.filter(lambda text: not text.startswith("ObjectCreated:")),
            )
        )
        s3 = draw(st.one_of(st.just(record["s3"]), JSON_VALUES))
        return {**record, "eventName": name, "s3": s3}, Fate.ACKNOWLEDGED
    if kind == "missing":  # an ObjectCreated record without a field every one has
        return without(record, *draw(st.sampled_from(BROKEN_FIELDS))), Fate.REPORTED
    if kind == "not a size":
        size = draw(st.one_of(st.none(), NOT_A_SIZE))
        return replaced(record, size, "s3", "object", "size"), Fate.REPORTED
    return replaced(record, draw(NOT_A_STRING), "eventName"), Fate.REPORTED


@st.composite
def s3_notifications(draw: st.DrawFn) -> Labelled:
    """A notification of one to three records: reported when any record is."""
    records = draw(st.lists(s3_records(), min_size=1, max_size=3))
    fate = Fate.REPORTED if any(f is Fate.REPORTED for _, f in records) else Fate.ACKNOWLEDGED
    return as_body({"Records": [record for record, _ in records]}), fate


def s3_test_event(extra: dict[str, Any]) -> str:
    """What S3 sends once when the notification is configured."""
    return as_body(
        {
            **extra,
            "Service": "Amazon S3",
            "Event": "s3:TestEvent",
            "Time": "2026-11-29T12:00:00.000Z",
            "Bucket": UPLOADS,
        }
    )


def eventbridge_event(key: str) -> str:
    """An S3 `Object Created` event as EventBridge delivers it: not a notification."""
    return as_body(
        {
            "version": "0",
            "id": "17793124-05d4-b198-2fde-7ededc63b103",
            "detail-type": "Object Created",
            "source": "aws.s3",
            "account": "123456789012",
            "time": "2026-11-29T12:00:00Z",
            "region": "us-east-1",
            "resources": [f"arn:aws:s3:::{UPLOADS}"],
            "detail": {
                "version": "0",
                "bucket": {"name": UPLOADS},
                "object": {"key": key, "size": 11, "etag": "9b2c", "sequencer": "0062E9"},
                "reason": "PutObject",
            },
        }
    )


MALFORMED_NOTIFICATIONS: st.SearchStrategy[Labelled] = st.one_of(
    reported(NOT_A_DOCUMENT),
    # an object without a Records list: another service's event, EventBridge's among them
    reported(RAW_KEYS.map(eventbridge_event)),
    reported(
        st.dictionaries(ANY_TEXT.filter(lambda k: k not in {"Records", "Event"}), JSON_VALUES).map(
            as_body
        )
    ),
    # Records that are not a list
    reported(
        st.one_of(JSON_SCALARS, st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=3)).map(
            lambda v: as_body({"Records": v})
        )
    ),
    # Records that are not records
    reported(
        st.lists(NOT_AN_OBJECT, min_size=1, max_size=3).map(lambda v: as_body({"Records": v}))
    ),
    acknowledged(st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=3).map(s3_test_event)),
    acknowledged(st.just(as_body({"Records": []}))),
    s3_notifications(),
)


@pytest.fixture
def uploads(stack: Stack) -> Stack:
    """The stack, its ingest queue drained of the test event S3 sent when it was configured."""
    assert invoke(ingest.handler, receive(stack, "IngestQueue")) == []
    return stack


# moto deep-copies a table for each transaction (and keeps the copies): every upload ingested
# makes the next examples slower, so few, with several notifications each.
def broken_copy(notification: str, field: tuple[str, ...], value: object) -> str:
    """The notification, its first record's field removed (`value` None) or replaced."""
    data = json.loads(notification)
    record = data["Records"][0]
    data["Records"][0] = (
        without(record, *field) if value is None else replaced(record, value, *field)
    )
    return as_body(data)


@settings(FUZZ, max_examples=examples(40))
@given(
    malformed=st.lists(MALFORMED_NOTIFICATIONS, min_size=1, max_size=7),
    at=st.integers(0, 7),
    # a copy of the upload's own notification, broken, to be refused without touching the upload
    breakage=st.one_of(
        st.none(),
        st.tuples(st.sampled_from(BROKEN_FIELDS), st.none()),
        st.tuples(st.just(("s3", "object", "size")), NOT_A_SIZE),
    ),
)
def test_malformed_notifications_fail_alone_and_the_upload_among_them_is_ingested(
    uploads: Stack,
    malformed: list[Labelled],
    at: int,
    breakage: tuple[tuple[str, ...], object] | None,
) -> None:
    # Given a batch of malformed notifications, with a real upload's notification among them
    stack = uploads
    fates = {body.replace(UPLOADS, stack.uploads): fate for body, fate in malformed}
    bodies = list(fates)
    key = f"uploads/acme/valid-{uuid.uuid4().hex}.txt"
    before = snapshot(stack.names)
    send(stack, "IngestQueue", bodies[:at])
    stack.s3.put_object(Bucket=stack.uploads, Key=key, Body=key.encode())
    send(stack, "IngestQueue", bodies[at:])
    records = receive(stack, "IngestQueue")
    assert len(records) == len(bodies) + 1
    if breakage is not None:  # and maybe a broken copy of it last
        [real] = [r["body"] for r in records if r["body"] not in fates]
        fates[broken_copy(real, *breakage)] = Fate.REPORTED
        send(stack, "IngestQueue", list(fates)[-1:])
        records += receive(stack, "IngestQueue")

    # When the ingest handler gets the batch
    failed = invoke(ingest.handler, records)

    # Then it returned a partial batch response naming exactly the notifications to retry
    assert sorted(failed) == expected_failures(records, fates)
    # and the upload was ingested: its file recorded, with its pending jobs
    after = snapshot(stack.names)
    added = written(before, after)
    [file_id] = [i["id"]["S"] for i in added.values() if i.get("key", {}).get("S") == key]
    jobs = [i for i in added.values() if "job_type" in i and i["file_id"]["S"] == file_id]
    assert jobs and {job["status"]["S"] for job in jobs} == {JobStatus.PENDING.value}
    # and counted once on its tenant's day (usage#acme#{day}), in the same write
    [usage] = [k for k in added if k[1].startswith("usage#acme#")]
    assert {
        name: int(after[usage][name]["N"]) - int(before.get(usage, {}).get(name, {"N": "0"})["N"])
        for name in ("files", "bytes")
    } == {"files": 1, "bytes": len(key)}
    # and nothing else was written or changed
    assert_only_changed_about(file_id, before, after, also=frozenset({usage}))


# === the workers: job messages through their job type's queue ====================================

JOB_TYPES = [job_type.value for job_type in JobType]
STATUSES = [status.value for status in JobStatus]
UUIDS = st.uuids().map(str)
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
# A file and its jobs recorded before any fuzzed message arrives (ids fixed: plan ids derive from
# the object), so that malformed messages can name them.
RECORDED = ingest_plan(T0, "text/plain", name="recorded.txt")
RECORDED_JOB_IDS = [job.id for job in RECORDED.jobs]


# Digits `int()` and `\d` read, which no UUID is written with.
FULLWIDTH_DIGITS = str.maketrans({str(n): chr(0xFF10 + n) for n in range(10)})


def uuid_lookalikes(value: str) -> list[str]:
    """Forms `uuid.UUID` reads but a job id never has (ids are `str(uuid4())`), and near misses."""
    return [
        f"{{{value}}}",
        f"urn:uuid:{value}",
        value.replace("-", ""),
        f"{value}\n",
        f" {value}",
        value[:-1],
        f"{value}0",
        value.replace("-", "_"),
        value.translate(FULLWIDTH_DIGITS),
    ]


NOT_AN_ID = st.one_of(
    NOT_A_STRING,
    STRANGE_TEXT,
    st.tuples(st.one_of(UUIDS, st.sampled_from(RECORDED_JOB_IDS)), st.integers(0, 8)).map(
        lambda pair: uuid_lookalikes(pair[0])[pair[1]]
    ),
)
NOT_A_JOB_TYPE = st.one_of(
    NOT_A_STRING,  # lists among them: not even hashable
    STRANGE_TEXT.filter(lambda text: text not in JOB_TYPES),
    st.sampled_from(JOB_TYPES).map(str.upper),
    st.sampled_from(JOB_TYPES).map(lambda text: f" {text}"),
    st.sampled_from(JOB_TYPES).map(lambda text: text.replace("_", "-")),
)
EXTRA_FIELDS = st.dictionaries(
    ANY_TEXT.filter(lambda key: key not in {"job_id", "job_type", "file_id"}),
    JSON_VALUES,
    max_size=3,
)


@st.composite
def broken_job_messages(draw: st.DrawFn) -> str:
    """A job message with one field missing or not what it must be, the others as sent."""
    message: dict[str, object] = {
        "job_id": draw(st.one_of(UUIDS, st.sampled_from(RECORDED_JOB_IDS))),
        "job_type": draw(st.sampled_from(JOB_TYPES)),
        **draw(st.one_of(st.just({}), UUIDS.map(lambda file_id: {"file_id": file_id}))),
        **draw(EXTRA_FIELDS),
    }
    field = draw(st.sampled_from(["job_id", "job_type", "file_id"]))
    if field != "file_id" and draw(st.booleans()):
        del message[field]
    else:
        # a file id may be null (messages sent before it existed), never anything else
        wrong = NOT_AN_ID.filter(lambda v: v is not None) if field == "file_id" else NOT_AN_ID
        message[field] = draw(NOT_A_JOB_TYPE if field == "job_type" else wrong)
    return as_body(message)


# Well-formed messages that name no recorded job (or another worker's type): nothing to do.
STRAY_JOB_MESSAGES = st.fixed_dictionaries(
    {"job_id": st.one_of(UUIDS, UUIDS.map(str.upper)), "job_type": st.sampled_from(JOB_TYPES)},
    optional={"file_id": st.one_of(st.none(), UUIDS, st.sampled_from([RECORDED.file.id]))},
).flatmap(lambda message: EXTRA_FIELDS.map(lambda extra: as_body({**extra, **message})))

JOB_MESSAGES: st.SearchStrategy[Labelled] = st.one_of(
    reported(NOT_A_DOCUMENT),
    reported(broken_job_messages()),
    acknowledged(STRAY_JOB_MESSAGES),
)


def queue_of(job_type: JobType) -> str:
    return "".join(part.title() for part in job_type.value.split("_")) + "Queue"


def batch_of(stack: Stack, job_type: JobType, bodies: list[str]) -> list[dict[str, Any]]:
    """The bodies, sent to the job type's queue, as the worker's event source hands them over."""
    send(stack, queue_of(job_type), bodies)
    records = receive(stack, queue_of(job_type))
    assert sorted(r["body"] for r in records) == sorted(bodies)
    return records


@pytest.fixture
def recorded(stack: Stack) -> Stack:
    """The stack, with a file and its pending jobs recorded."""
    runtime.tables()
    FileRepository().record_ingest(RECORDED)
    return stack


@settings(FUZZ, max_examples=examples(40))
@given(job_type=st.sampled_from(JobType), messages=st.lists(JOB_MESSAGES, min_size=1, max_size=8))
@example(  # a job type that is a list, not hashable: refused as unknown (it raised TypeError)
    job_type=JobType.VIRUS_SCAN,
    messages=[(as_body({"job_id": RECORDED_JOB_IDS[0], "job_type": []}), Fate.REPORTED)],
)
def test_every_worker_reports_exactly_its_malformed_messages_and_changes_nothing(
    recorded: Stack, monkeypatch: pytest.MonkeyPatch, job_type: JobType, messages: list[Labelled]
) -> None:
    # Given a worker of some job type, and a batch of malformed and stray job messages
    stack = recorded
    monkeypatch.setenv("JOB_TYPE", job_type.value)
    fates = dict(messages)
    records = batch_of(stack, job_type, list(fates))
    before = snapshot(stack.names)

    # When the worker handles the batch
    failed = invoke(worker.handler, records)

    # Then exactly the malformed messages are reported (to rest in the dead-letter queue); the
    # stray ones, naming no job of this worker, are acknowledged
    assert sorted(failed) == expected_failures(records, fates)
    # and no job or file changed
    assert snapshot(stack.names) == before


def new_job_message(stack: Stack) -> tuple[str, str, str]:
    """A new upload's deduplication check, pending: its message, job id and file id."""
    runtime.tables()
    name = f"dedup-{uuid.uuid4().hex}.txt"
    plan = ingest_plan(utcnow(), "text/plain", name=name, bucket=stack.uploads)
    stack.s3.put_object(Bucket=stack.uploads, Key=plan.file.key, Body=name.encode())
    FileRepository().record_ingest(plan)
    [job] = [job for job in plan.jobs if job.job_type is JobType.DEDUPLICATION_CHECK]
    return JobMessage.for_job(job).to_json(), job.id, job.file_id


@settings(FUZZ, max_examples=examples(15))
@given(
    messages=st.lists(JOB_MESSAGES, min_size=1, max_size=6),
    at=st.integers(0, 6),
    echo=st.one_of(st.none(), EXTRA_FIELDS.filter(bool)),
)
def test_malformed_job_messages_fail_alone_and_the_job_among_them_runs(
    stack: Stack,
    monkeypatch: pytest.MonkeyPatch,
    messages: list[Labelled],
    at: int,
    echo: dict[str, Any] | None,
) -> None:
    # Given the deduplication worker, and a batch of malformed and stray job messages with a
    # pending job's message among them (and maybe a copy of it carrying fields it does not know)
    monkeypatch.setenv("JOB_TYPE", JobType.DEDUPLICATION_CHECK.value)
    valid, job_id, file_id = new_job_message(stack)
    fates = dict(messages)
    bodies = [*list(fates)[:at], valid, *list(fates)[at:]]
    if echo is not None:
        bodies.append(as_body({**echo, **json.loads(valid)}))
    records = batch_of(stack, JobType.DEDUPLICATION_CHECK, bodies)
    before = snapshot(stack.names)

    # When the worker handles the batch
    failed = invoke(worker.handler, records)

    # Then only the malformed messages are reported
    assert sorted(failed) == expected_failures(records, fates)
    # and the job ran once, to completion, and recorded its file's digest
    after = snapshot(stack.names)
    job = after[(stack.names["JobsTable"], job_id)]
    assert (job["status"]["S"], job["attempt"]["N"]) == (JobStatus.COMPLETED.value, "1")
    assert "sha256" in after[(stack.names["FilesTable"], file_id)]
    # and nothing about any other file changed
    assert_only_changed_about(file_id, before, after)


# === SweepFunction: whatever its schedule sends ===================================================

SCHEDULE = event_file("sweep_schedule.json")


@pytest.fixture
def sweeping(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The sweep's environment, jobs that are not due yet, and what the sweep reports of them."""
    environment_of("SweepFunction", stack, monkeypatch)
    runtime.tables()
    FileRepository().record_ingest(ingest_plan(utcnow() + timedelta(days=1), "text/plain"))
    summary: dict[str, Any] = sweep.handler(SCHEDULE, FakeContext())
    return summary


SCHEDULE_EVENTS = st.one_of(
    JSON_VALUES,
    st.dictionaries(st.sampled_from(sorted(SCHEDULE)), JSON_VALUES).map(
        lambda changed: {**SCHEDULE, **changed}
    ),
)


# What the dead-letter review makes of a letter: a malformed one is set aside as unreadable (a
# person looks at it); a well-formed one naming no job is left for later.
REVIEWED = {Fate.REPORTED: "unreadable_letters", Fate.ACKNOWLEDGED: "dead_letters_left"}


@settings(FUZZ, max_examples=examples(5))  # a sweep queries every shard: a second each
@given(
    delivered=SCHEDULE_EVENTS,
    letters=st.lists(st.tuples(st.sampled_from(JobType), JOB_MESSAGES), max_size=4),
)
@example(  # Found by this test: a job type that is a list made the review fail on every run
    delivered=SCHEDULE,
    letters=[
        (
            JobType.COMPRESSION,
            (as_body({"job_id": RECORDED_JOB_IDS[0], "job_type": []}), Fate.REPORTED),
        )
    ],
)
def test_the_sweep_ignores_its_event_and_sets_malformed_dead_letters_aside(
    stack: Stack,
    sweeping: dict[str, Any],
    delivered: object,
    letters: list[tuple[JobType, Labelled]],
) -> None:
    # Given jobs that are not due, an event of any shape in place of the schedule's, and malformed
    # or stray job messages in the job types' dead-letter queues
    for job_type, (body, _) in letters:
        send(stack, queue_of(job_type).replace("Queue", "DeadLetterQueue"), [body])
    before = snapshot(stack.names)

    # When the sweep runs on it
    summary = sweep.handler(cast(dict[str, Any], delivered), FakeContext())

    # Then it did what it does on its schedule's event, and reviewed each letter without error
    reviewed = Counter(REVIEWED[fate] for _, (_, fate) in letters)
    assert summary == {**sweeping, "dead_letters": dict(reviewed)}
    # and changed no job or file
    assert snapshot(stack.names) == before


# === EventsFunction: the tables' stream records ===================================================


@pytest.fixture
def completion(outcomes: outcome_events.Outcomes, clock: FakeClock) -> dict[str, Any]:
    """The stream record of a job's completion, as the template's filter passes it."""
    outcome_events.run_to_completion(outcome_events.ingested(clock)[0], clock)
    [record] = outcomes.stream_event()["Records"]
    return cast(dict[str, Any], record)


# A value under each type descriptor; an attribute under any but its own cannot be read.
DESCRIPTORS: dict[str, object] = {
    "S": "text",
    "N": "1",
    "B": "AA==",
    "BOOL": True,
    "M": {},
    "L": [],
    "SS": ["a"],
    "NS": ["1"],
    "BS": ["AA=="],
    "XX": "x",
}
TIMES = ("created_at", "updated_at", "started_at", "completed_at")
COUNTS = ("attempt", "priority", "retry_count", "max_retries", "dispatch_count")
NOT_A_NUMBER = st.text(st.characters(categories=["L", "P"]), min_size=1, max_size=12).filter(
    lambda text: text not in {"NaN", "Infinity"}
)


@st.composite
def malformed_stream_records(draw: st.DrawFn, valid: dict[str, Any]) -> tuple[dict[str, Any], Fate]:
    """The completion's record made unreadable in one way, or (acknowledged) left without a new
    image, as a delete is."""
    record: dict[str, Any] = json.loads(json.dumps(valid))
    image: dict[str, Any] = record["dynamodb"]["NewImage"]
    kinds = ["stream", "descriptor", "old image", "enum", "time", "count", "not a map"]
    kind = draw(st.sampled_from(kinds))
    if kind == "stream":  # from a table that is neither the jobs' nor the files'
        source = draw(
            st.one_of(
                st.just("arn:aws:dynamodb:us-east-1:123456789012:table/other/stream/1"),
                ANY_TEXT,
                st.none(),
            )
        )
        record["eventSourceARN"] = source
    elif kind in ("descriptor", "old image"):  # the item after the write, or before it
        item = image if kind == "descriptor" else record["dynamodb"]["OldImage"]
        name = draw(st.sampled_from(sorted(item)))
        (own,) = item[name]
        other = draw(st.sampled_from(sorted(set(DESCRIPTORS) - {own})))
        item[name] = {other: DESCRIPTORS[other]}
    elif kind == "enum":
        name = draw(st.sampled_from(["status", "job_type"]))
        image[name] = {"S": draw(STRANGE_TEXT.filter(lambda t: t not in {*STATUSES, *JOB_TYPES}))}
    elif kind == "time":
        image[draw(st.sampled_from(TIMES))] = {"S": draw(STRANGE_TEXT)}
    elif kind == "count":
        image[draw(st.sampled_from(COUNTS))] = {"N": draw(NOT_A_NUMBER)}
    else:
        record["dynamodb"]["NewImage"] = draw(NOT_AN_OBJECT.filter(lambda v: v is not None))
    if draw(st.booleans()) and kind != "stream":
        del record["dynamodb"]["NewImage"]  # nothing to announce, whatever else it holds
        return record, Fate.ACKNOWLEDGED
    return record, Fate.REPORTED


@settings(FUZZ, max_examples=examples(15))
@given(data=st.data(), at=st.integers(0, 5))
def test_malformed_stream_records_fail_alone_and_the_outcome_among_them_is_published(
    outcomes: outcome_events.Outcomes, completion: dict[str, Any], data: st.DataObject, at: int
) -> None:
    # Given a stream batch of malformed records with a job's completion among them
    malformed = data.draw(
        st.lists(malformed_stream_records(completion), min_size=1, max_size=5), label="malformed"
    )
    records = [record for record, _ in malformed]
    records.insert(at, json.loads(json.dumps(completion)))
    for number, record in enumerate(records, start=1):
        record["eventID"] = f"event-{number}"
        record["dynamodb"]["SequenceNumber"] = str(number)
    reported_numbers = [r["dynamodb"]["SequenceNumber"] for r, f in malformed if f is Fate.REPORTED]
    names = {"JobsTable": outcomes.jobs.table, "FilesTable": outcomes.files.table}
    before = snapshot(names)

    # When the events handler gets the batch
    response = outcome_events.handle({"Records": records})

    # Then exactly the unreadable records are reported (Lambda retries them, then its on-failure
    # destination keeps them); those without a new image, like a delete's, are acknowledged
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == sorted(
        reported_numbers
    )
    # and the completion was published, alone
    [published] = outcomes.published()
    assert published["detail-type"] == "Job Completed"
    assert published["detail"]["id"] == completion["dynamodb"]["Keys"]["id"]["S"]
    # and the tables are as they were
    assert snapshot(names) == before


# === ApiFunction: API Gateway (REST) proxy events =================================================

ACME_FILE = ingest_plan(T0, "image/png", tenant="acme", name="fuzzed.png")
GLOBEX_FILE = ingest_plan(T0, "image/png", tenant="globex", name="fuzzed.png")
FILE_IDS = [ACME_FILE.file.id, GLOBEX_FILE.file.id]
JOB_IDS = [job.id for plan in (ACME_FILE, GLOBEX_FILE) for job in plan.jobs]
ROUTES = [
    "/health",
    "/files",
    "/files/{file}",
    "/files/{file}/jobs",
    "/jobs",
    "/jobs/{job}",
    "/jobs/{job}/cancel",
    "/jobs/{job}/retry",
    "/openapi.json",
    "/docs",
]
QUERY_NAMES = ["key", "bucket", "status", "job_type", "tenant", "limit", "next_token"]
HEADER_NAMES = ["Idempotency-Key", "idempotency-key", "Content-Type", "Accept", "Accept-Encoding"]
ST_TEXT = st.text(max_size=30)
# Path segments and query values: the recorded ids (in either case), other UUIDs and lookalikes,
# words the API knows, and anything at all.
SEGMENTS = st.one_of(
    st.sampled_from([*FILE_IDS, *JOB_IDS]),
    st.sampled_from([*FILE_IDS, *JOB_IDS]).map(str.upper),
    UUIDS,
    st.tuples(UUIDS, st.integers(0, 8)).map(lambda pair: uuid_lookalikes(pair[0])[pair[1]]),
    st.text(st.characters(exclude_characters="/"), max_size=30),
    HUGE_TEXT,
)
WORDS = st.one_of(
    st.sampled_from(
        [*STATUSES, *JOB_TYPES, "acme", "globex", "0", "1", "100", "101", "-1", "²", "1e2", ""]
    ),
    st.sampled_from(["uploads/acme/fuzzed.png", "uploads-bucket", "Uploads_Bucket", "a" * 1100]),
    ST_TEXT,
    SEGMENTS,
)
PATHS = st.one_of(
    st.tuples(st.sampled_from(ROUTES), SEGMENTS, SEGMENTS).map(
        lambda parts: parts[0].format(file=parts[1], job=parts[2])
    ),
    st.tuples(st.sampled_from(ROUTES), ST_TEXT).map(lambda parts: f"{parts[0]}/{parts[1]}"),
    ST_TEXT.map(lambda text: f"/{text}"),
    ST_TEXT,
)
METHODS = st.one_of(
    st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "get"]),
    st.text(max_size=10),
)
QUERIES = st.one_of(
    st.none(),
    st.dictionaries(st.one_of(st.sampled_from(QUERY_NAMES), ST_TEXT), WORDS, max_size=4),
)
ASCII = st.characters(codec="ascii")
HEADERS = st.one_of(
    st.none(),
    st.dictionaries(
        st.one_of(st.sampled_from(HEADER_NAMES), st.text(ASCII, max_size=20)),
        st.one_of(WORDS, st.text(ASCII, min_size=1, max_size=130)),
        max_size=4,
    ),
)


def nested(depth: int) -> dict[str, Any]:
    """input_data nested `depth` levels deep."""
    value: object = 1
    for _ in range(depth - 1):
        value = [value]
    return {"a": value}


JOB_REQUESTS = st.fixed_dictionaries(
    {"job_type": st.one_of(st.sampled_from(JOB_TYPES), st.sampled_from(JOB_TYPES), JSON_VALUES)},
    optional={
        "priority": st.one_of(
            st.integers(-100, 100), st.integers(), st.floats(), st.booleans(), ST_TEXT
        ),
        "input_data": st.one_of(
            st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=4),
            JSON_VALUES,
            st.integers(1, 40).map(lambda depth: {"bucket": "x"} if depth == 1 else nested(depth)),
            st.integers(10**37, 10**40).map(lambda n: {"n": n}),
            st.sampled_from([1e-200, 1e200, -0.0, 5e-324]).map(lambda x: {"x": x}),
            st.fixed_dictionaries(
                {}, optional={"sizes": JSON_VALUES, "format": JSON_VALUES, "level": JSON_VALUES}
            ),
        ),
        "run_at": st.one_of(
            ST_TEXT,
            JSON_VALUES,
            st.datetimes(timezones=st.just(UTC)).map(datetime.isoformat),
            st.datetimes().map(datetime.isoformat),  # no offset
        ),
        "delay_seconds": st.one_of(st.integers(), st.floats(), JSON_VALUES),
        "max_retries": st.one_of(st.integers(), st.floats(), JSON_VALUES),
    },
).flatmap(
    lambda request: st.one_of(st.just({}), EXTRA_FIELDS).map(lambda extra: {**extra, **request})
)
CANCEL_REQUESTS = st.dictionaries(
    st.sampled_from(["reason", "why"]), st.one_of(JSON_VALUES, st.just("wrong file"))
)
BODIES: st.SearchStrategy[tuple[str | None, bool]] = st.one_of(
    st.tuples(st.none(), st.just(False)),
    st.tuples(ST_TEXT, st.just(False)),
    st.tuples(st.sampled_from(["{", "[1,", '{"job_type": NaN}', '{"a":1}{"b":2}']), st.just(False)),
    st.tuples(JSON_VALUES.map(as_body), st.just(False)),
    st.tuples(JOB_REQUESTS.map(as_body), st.just(False)),
    st.tuples(CANCEL_REQUESTS.map(as_body), st.just(False)),
    # base64, as API Gateway sends a binary body: bytes that are not UTF-8, or a JSON request
    st.tuples(
        st.one_of(st.binary(max_size=64), JOB_REQUESTS.map(lambda r: as_body(r).encode())).map(
            lambda raw: base64.b64encode(raw).decode()
        ),
        st.just(True),
    ),
)
ARN = "arn:aws:sts::123456789012:assumed-role"
VALID_CALLERS: list[dict[str, Any]] = [
    {"authorizer": ACME},
    {"authorizer": GLOBEX},
    {"authorizer": OPERATOR},
    {"authorizer": {"role": "operator", "tenant": "acme"}},
    {"authorizer": {"claims": {"custom:tenant": "acme"}}},
    {"authorizer": {"claims": {"cognito:groups": "[operators admins]"}}},
    {"identity": {"userArn": f"{ARN}/ApiOperatorRole/alice"}},
    {"identity": {"userArn": f"{ARN}/ApiTenantRole/acme"}},
]
CALLERS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    # valid: a tenant, another tenant, an operator (from the local stack's authorizer, Cognito's
    # claims, or IAM)
    st.sampled_from(VALID_CALLERS),
    # invalid: no identity, or one that is malformed
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.one_of(st.sampled_from(["operator", "tenant", "admin"]), JSON_VALUES),
            "tenant": st.one_of(st.sampled_from(["acme", "a#b", "acme\n", ""]), JSON_VALUES),
        },
    ).map(lambda authorizer: {"authorizer": authorizer}),
    st.dictionaries(
        st.sampled_from(["custom:tenant", "cognito:groups", "sub"]), JSON_VALUES, max_size=3
    ).map(lambda claims: {"authorizer": {"claims": claims}}),
    st.one_of(JSON_VALUES, st.sampled_from([f"{ARN}/ApiTenantRole/a#b", f"{ARN}/Other/acme"])).map(
        lambda arn: {"identity": {"userArn": arn}}
    ),
    JSON_VALUES.map(lambda authorizer: {"authorizer": authorizer}),
)


def rest_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    body: str | None = None,
    encoded: bool = False,
    caller: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A REST proxy event (payload 1.0), as API Gateway sends one."""
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": None if headers is None else {k: [v] for k, v in headers.items()},
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
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "accountId": "123456789012",
            "apiId": "abc123",
            "identity": {"sourceIp": "203.0.113.10"},
            **(caller or {}),
        },
        "body": body,
        "isBase64Encoded": encoded,
    }


@st.composite
def api_events(draw: st.DrawFn) -> dict[str, Any]:
    """A request with every part drawn: method, path, query, headers, body and caller."""
    body, encoded = draw(BODIES)
    return rest_event(
        draw(METHODS),
        draw(PATHS),
        query=draw(QUERIES),
        headers=draw(HEADERS),
        body=body,
        encoded=encoded,
        caller=draw(CALLERS),
    )


# Each route with the method it answers: a request that reaches the route's code (those that
# write, twice: they have the most to get wrong).
ROUTE_METHODS = [
    ("GET", "/health"),
    ("GET", "/files"),
    ("GET", "/files/{file}"),
    ("GET", "/files/{file}/jobs"),
    ("GET", "/jobs"),
    ("GET", "/jobs/{job}"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    *2
    * [
        ("POST", "/files/{file}/jobs"),
        ("DELETE", "/jobs/{job}"),
        ("POST", "/jobs/{job}/cancel"),
        ("POST", "/jobs/{job}/retry"),
    ],
]


# The body a route reads, as it should be and as it should not.
ACCEPTABLE_JOB_REQUESTS = st.fixed_dictionaries(
    {"job_type": st.sampled_from(JOB_TYPES)},
    optional={
        "priority": st.integers(-100, 100),
        # thumbnail options (a job type without options, or a file they do not fit: 422)
        "input_data": st.fixed_dictionaries(
            {},
            optional={
                "sizes": st.lists(st.integers(16, 4096), min_size=1, max_size=8),
                "format": st.sampled_from(["webp", "jpeg"]),
            },
        ),
        "delay_seconds": st.integers(0, 2_592_000),
        "max_retries": st.integers(1, 25),
    },
)
ROUTE_BODIES = {
    "/files/{file}/jobs": st.tuples(
        st.one_of(ACCEPTABLE_JOB_REQUESTS, JOB_REQUESTS).map(as_body), st.just(False)
    ),
    "/jobs/{job}/cancel": st.tuples(CANCEL_REQUESTS.map(as_body), st.just(False)),
}


@st.composite
def routed_events(draw: st.DrawFn) -> dict[str, Any]:
    """A request a route answers, from a valid caller, about recorded files and jobs (mostly),
    with its query, headers and body drawn."""
    method, route = draw(st.sampled_from(ROUTE_METHODS))
    file_id = draw(st.one_of(st.sampled_from(FILE_IDS), SEGMENTS))
    job_id = draw(st.one_of(st.sampled_from(JOB_IDS), SEGMENTS))
    body, encoded = draw(st.one_of(ROUTE_BODIES.get(route, BODIES), BODIES))
    return rest_event(
        method,
        route.format(file=file_id, job=job_id),
        query=draw(QUERIES),
        headers=draw(HEADERS),
        body=body,
        encoded=encoded,
        caller=draw(st.sampled_from(VALID_CALLERS)),
    )


def page_token(scope: dict[str, Any], after: object) -> str:
    """A next_token as the API writes one (unsigned, as the template deploys it), for any
    position: anyone can forge one for a listing of their own."""
    payload = json.dumps({"after": after, "scope": scope}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(payload.encode("utf-8", "surrogatepass")).decode().rstrip("=")


# A tenant's listing, and an operator's listing of one status and type: who asks, the query,
# and the scope its tokens name.
type Listing = tuple[dict[str, str], dict[str, str], dict[str, Any]]
TENANT_LISTING: Listing = (
    ACME,
    {},
    {"caller": "tenant:acme", "tenant": "acme", "status": None, "job_type": None},
)
OPERATOR_LISTING: Listing = (
    OPERATOR,
    {"status": "pending", "job_type": "virus_scan"},
    {"caller": "operator", "tenant": None, "status": "pending", "job_type": "virus_scan"},
)


def next_page(listing: Listing, after: object) -> dict[str, Any]:
    """The request for a listing's next page, from a token naming `after` as its position."""
    who, query, scope = listing
    next_token = page_token(scope, after)
    return rest_event(
        "GET", "/jobs", query={**query, "next_token": next_token}, caller={"authorizer": who}
    )


POSITIONS = st.one_of(
    st.tuples(
        st.one_of(ANY_TEXT, st.integers(200, 1500).map(lambda n: "0" * n), WORDS),
        st.one_of(UUIDS, st.sampled_from(JOB_IDS)),
    ).map(list),
    JSON_VALUES,
)
FORGED_PAGES = st.builds(next_page, st.sampled_from([TENANT_LISTING, OPERATOR_LISTING]), POSITIONS)


REPO = str(Path(__file__).resolve().parents[2])
FRAME = re.compile(r'File "[^"]*", line \d+')


def assert_answered_safely(response: dict[str, Any]) -> None:
    """A 2xx, or a 4xx in the API's error shape; never a 5xx; never a trace or a source path."""
    status, body = response["statusCode"], response["body"]
    assert isinstance(status, int) and 200 <= status < 500, response
    assert isinstance(body, str)
    assert "Traceback" not in body and not FRAME.search(body), body
    assert REPO not in body and "site-packages" not in body, body
    if status >= 400:
        error = json.loads(body)
        assert set(error) == {"error"} and set(error["error"]) == {"code", "message"}, error
        assert all(isinstance(part, str) for part in error["error"].values()), error
        assert response["multiValueHeaders"]["Content-Type"] == ["application/json"]


@pytest.fixture
def api_stack(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The API's environment, and two tenants' files with their jobs, one of them cancelled."""
    environment_of("ApiFunction", stack, monkeypatch)
    monkeypatch.delenv("API_TOKEN_SECRET", raising=False)
    # its page tokens signed with a secret of its own in Secrets Manager, as the stack's are
    made = create_secrets(
        boto3.client("secretsmanager"),
        {"ApiPageTokenSecret": f"page-tokens-{uuid.uuid4().hex[:8]}"},
        TEMPLATE,
    )
    monkeypatch.setenv("API_TOKEN_SECRET_ARN", made["ApiPageTokenSecret"])
    runtime.tables()
    for plan in (ACME_FILE, GLOBEX_FILE):
        FileRepository().record_ingest(plan)
    cancelled(ACME_FILE.jobs[0])
    return stack


@settings(FUZZ, max_examples=examples(250))
@given(request=st.one_of(api_events(), routed_events(), FORGED_PAGES))
# Found by this test: an empty position in an operator's listing, which DynamoDB refused
# (ValidationException), answered 500
@example(request=next_page(OPERATOR_LISTING, ["", JOB_IDS[0]]))
def test_the_api_answers_any_request_with_a_2xx_or_a_4xx_that_changed_nothing(
    api_stack: Stack, request: dict[str, Any]
) -> None:
    # Given the recorded files and jobs
    before = snapshot(api_stack.names)

    # When any request reaches the API's function
    response: dict[str, Any] = api.handler(request, FakeContext())

    # Then it is answered without a server error or a trace
    event(f"answered {response['statusCode']}")  # the spread, in --hypothesis-show-statistics
    assert_answered_safely(response)
    # and a refused request changed nothing
    if response["statusCode"] >= 300:
        assert snapshot(api_stack.names) == before


@pytest.mark.parametrize(
    "position",
    ["", "0" * 1025, "\ud800"],
    ids=["empty", "over 1,024 bytes", "not UTF-8"],
)
def test_a_page_token_naming_a_position_no_sort_key_can_hold_is_refused(
    api_stack: Stack, position: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an API without a page-token secret (no signature to stop a forged token first)
    monkeypatch.delenv("API_TOKEN_SECRET_ARN")
    runtime.reset()
    runtime.tables()
    # and a forged token for an operator's listing, naming a position DynamoDB refuses in a
    # query (moto takes the last two; DynamoDB answers all three with a ValidationException)
    event = next_page(OPERATOR_LISTING, [position, JOB_IDS[0]])

    # When it is sent
    response: dict[str, Any] = api.handler(event, FakeContext())

    # Then it is refused as any invalid token is, before any query
    assert response["statusCode"] == 400, response
    assert json.loads(response["body"])["error"] == {
        "code": "bad_request",
        "message": "next_token is not valid",
    }
