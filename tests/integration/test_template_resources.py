"""template.yaml's queues, buckets and functions: the contract the deployed stack must keep.

Queues and buckets are created on moto from the template itself (filejobs_dev.infra.template), so a
redrive policy, a visibility timeout or a notification changed in the template is what is tested.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import boto3
import pytest
from mypy_boto3_s3 import S3Client
from mypy_boto3_sqs import SQSClient

from filejobs.domain.keys import is_tenant
from filejobs_dev.infra.template import (
    FunctionSpec,
    create_buckets,
    create_queues,
    function_definitions,
    load_template,
    queue_arns,
    resources_of_type,
)

JOB_TYPES = {
    "ThumbnailGeneration": "thumbnail_generation",
    "VideoThumbnail": "video_thumbnail",
    "DocumentPreview": "document_preview",
    "Compression": "compression",
    "VirusScan": "virus_scan",
    "DeduplicationCheck": "deduplication_check",
}

# Every queue that carries work, and the dead-letter queue it gives up to.
DEAD_LETTER_QUEUE_OF = {
    "IngestQueue": "IngestDeadLetterQueue",
    "FairIngestQueue": "IngestDeadLetterQueue",
    "FileRemovalsQueue": "IngestDeadLetterQueue",
    "OperationsQueue": "OperationsDeadLetterQueue",
    "WebhooksQueue": "WebhooksDeadLetterQueue",
    **{f"{t}Queue": f"{t}DeadLetterQueue" for t in JOB_TYPES},
    **{f"{t}HighQueue": f"{t}DeadLetterQueue" for t in JOB_TYPES},
    **{f"{t}LowQueue": f"{t}DeadLetterQueue" for t in JOB_TYPES},
}
# Stream records the events function gives up on (its on-failure destination, not a redrive).
STREAM_FAILURE_QUEUE = "EventsDeadLetterQueue"
DEAD_LETTER_QUEUES = {*DEAD_LETTER_QUEUE_OF.values(), STREAM_FAILURE_QUEUE}
JOB_QUEUES = {
    q
    for q in DEAD_LETTER_QUEUE_OF
    if q
    not in {
        "IngestQueue",
        "FairIngestQueue",
        "FileRemovalsQueue",
        "OperationsQueue",
        "WebhooksQueue",
    }
}

ROOT = Path(__file__).resolve().parents[2]
BUCKETS = ("UploadsBucket", "OutputsBucket", "QuarantineBucket", "AccessLogsBucket")
FUNCTIONS = {
    "IngestRouterFunction",
    "IngestFunction",
    "FileRemovalsFunction",
    "SweepFunction",
    "ReconcilerFunction",
    "ApiFunction",
    "EventsFunction",
    "OperationsFunction",
    "WebhooksFunction",
    "StatsFunction",
    "DefinitionsUpdater",
    "RescanPolicy",
    *(f"{t}Worker" for t in JOB_TYPES),
}

# X-Ray supports no resource-level permissions: the one grant AWS requires on Resource "*".
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


@dataclass(frozen=True)
class Stack:
    """The template's queues and buckets created on moto."""

    sqs: SQSClient
    s3: S3Client
    queue_urls: dict[str, str]
    queue_arns: dict[str, str]
    buckets: dict[str, str]

    def drain(self, logical_id: str) -> list[dict[str, Any]]:
        """Receive and delete every message of the queue; their bodies, decoded."""
        bodies: list[dict[str, Any]] = []
        url = self.queue_urls[logical_id]
        while True:
            received = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            messages = received.get("Messages", [])
            if not messages:
                return bodies
            for message in messages:
                bodies.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def functions(template: dict[str, Any]) -> dict[str, FunctionSpec]:
    return function_definitions(template)


@pytest.fixture
def stack(aws: None, template: dict[str, Any]) -> Stack:
    suffix = uuid.uuid4().hex[:8]
    sqs = boto3.client("sqs")
    s3 = boto3.client("s3")
    queues = resources_of_type(template, "AWS::SQS::Queue")
    urls = create_queues(sqs, {q: f"{q}-{suffix}" for q in queues}, template)
    arns = queue_arns(sqs, urls)
    buckets = {b: f"{b.lower()}-{suffix}" for b in resources_of_type(template, "AWS::S3::Bucket")}
    create_buckets(s3, buckets, arns, template)
    return Stack(sqs=sqs, s3=s3, queue_urls=urls, queue_arns=arns, buckets=buckets)


def _queue_attributes(stack: Stack, logical_id: str) -> dict[str, str]:
    described = stack.sqs.get_queue_attributes(
        QueueUrl=stack.queue_urls[logical_id], AttributeNames=["All"]
    )
    return {str(key): value for key, value in described["Attributes"].items()}


def _getatt_logical_id(value: Any) -> str:
    """X of `!GetAtt X.Arn` (short or long form)."""
    target = value["Fn::GetAtt"]
    return str(target.partition(".")[0] if isinstance(target, str) else target[0])


def _functions_of(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources_of_type(template, "AWS::Serverless::Function")


def _sqs_events(spec: FunctionSpec) -> list[dict[str, Any]]:
    return [properties for kind, properties in spec.events if kind == "SQS"]


def _bucket_policy(template: dict[str, Any], bucket: str) -> dict[str, Any]:
    policies: list[dict[str, Any]] = [
        resource["Properties"]["PolicyDocument"]
        for resource in resources_of_type(template, "AWS::S3::BucketPolicy").values()
        if resource["Properties"]["Bucket"] == {"Ref": bucket}
    ]
    assert len(policies) == 1, f"{bucket} has {len(policies)} bucket policies"
    return policies[0]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --- Queues -----------------------------------------------------------------------------------


def test_the_template_defines_every_work_queue_and_its_dead_letter_queue(
    template: dict[str, Any],
) -> None:
    # given the template
    # when its queues are listed
    queues = set(resources_of_type(template, "AWS::SQS::Queue"))
    # then there is S3's ingest queue, the fair one the router fills and S3's removals queue
    # (sharing a DLQ), three lanes per job type and one DLQ each, the events function's failure
    # queue, the bulk operations' queue and its DLQ, the webhooks' queue and its DLQ, and
    # nothing else
    assert queues == set(DEAD_LETTER_QUEUE_OF) | DEAD_LETTER_QUEUES
    assert len(queues) == 33


def test_every_work_queue_redrives_to_its_dead_letter_queue_after_5_receives(stack: Stack) -> None:
    # given the template's queues created on moto
    for queue, dead_letter_queue in DEAD_LETTER_QUEUE_OF.items():
        # when the queue's redrive policy is read back
        policy = json.loads(_queue_attributes(stack, queue)["RedrivePolicy"])
        # then a message goes to that queue's own DLQ on its 5th failed receive
        assert int(policy["maxReceiveCount"]) == 5, queue
        assert policy["deadLetterTargetArn"] == stack.queue_arns[dead_letter_queue], queue


def test_dead_letter_queues_keep_messages_14_days_and_redrive_nowhere(stack: Stack) -> None:
    # given the template's dead-letter queues created on moto
    for queue in DEAD_LETTER_QUEUES:
        # when their attributes are read back
        attributes = _queue_attributes(stack, queue)
        # then they are the end of the line and keep a message long enough to be looked at
        assert "RedrivePolicy" not in attributes, queue
        assert attributes["MessageRetentionPeriod"] == "1209600", queue


def test_every_queue_hides_a_message_for_at_least_6x_its_consumer_timeout(
    stack: Stack, functions: dict[str, FunctionSpec]
) -> None:
    # given every SQS event of every function, and the queue it reads
    consumed: set[str] = set()
    for name, spec in functions.items():
        for event in _sqs_events(spec):
            queue = _getatt_logical_id(event["Queue"])
            consumed.add(queue)
            # when the queue's visibility timeout is read back from moto
            visibility = int(_queue_attributes(stack, queue)["VisibilityTimeout"])
            # then a message stays hidden while the consumer may still be working on it
            assert visibility >= 6 * spec.timeout, f"{queue} ({visibility} s) for {name}"
    # and every work queue has a consumer, every DLQ none
    assert consumed == set(DEAD_LETTER_QUEUE_OF)


def test_every_queue_is_encrypted_at_rest(stack: Stack, template: dict[str, Any]) -> None:
    # given every queue of the template
    for queue, resource in resources_of_type(template, "AWS::SQS::Queue").items():
        # then the template asks for SQS-managed SSE and the created queue has it
        assert resource["Properties"]["SqsManagedSseEnabled"] is True, queue
        assert _queue_attributes(stack, queue)["SqsManagedSseEnabled"] == "true", queue


def test_only_the_uploads_bucket_in_this_account_may_send_to_its_notification_queues(
    template: dict[str, Any],
) -> None:
    # given the ingest queue's policy and the uploads bucket's explicit name
    bucket_name = template["Resources"]["UploadsBucket"]["Properties"]["BucketName"]["Fn::Sub"]
    policy = template["Resources"]["IngestQueuePolicy"]["Properties"]
    statements = policy["PolicyDocument"]["Statement"]
    # when the statement allowing S3 is found
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    # then S3 may send only on behalf of that bucket, in this account
    queues = [{"Ref": "IngestQueue"}, {"Ref": "FileRemovalsQueue"}]
    assert policy["Queues"] == queues
    assert allow["Resource"] == [{"Fn::GetAtt": f"{q['Ref']}.Arn"} for q in queues]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"]["ArnLike"]["aws:SourceArn"] == {
        "Fn::Sub": f"arn:${{AWS::Partition}}:s3:::{bucket_name}"
    }
    assert allow["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    # and nobody may use the queue without TLS (the other deny locks out the account's other
    # writers: tests/unit/test_queue_and_bus_locks.py)
    (deny,) = [s for s in statements if s.get("Sid") == "DenyInsecureTransport"]
    assert deny["Effect"] == "Deny"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": False}}


# --- Buckets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bucket", BUCKETS)
def test_every_bucket_is_encrypted_private_owner_enforced_and_tls_only(
    template: dict[str, Any], bucket: str
) -> None:
    # given the bucket's properties and its bucket policy
    properties = template["Resources"][bucket]["Properties"]
    policy = _bucket_policy(template, bucket)
    # then objects are encrypted by default
    (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    # and nothing can be made public
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    # and ACLs are off: the bucket owner owns every object
    assert properties["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]
    }
    # and every request without TLS, on the bucket or its objects, is denied
    deny = [
        s
        for s in policy["Statement"]
        if s["Effect"] == "Deny"
        and s["Principal"] == "*"
        and s["Action"] == "s3:*"
        and s.get("Condition") == {"Bool": {"aws:SecureTransport": False}}
    ]
    assert len(deny) == 1, bucket
    assert deny[0]["Resource"] == [
        {"Fn::GetAtt": f"{bucket}.Arn"},
        {"Fn::Sub": f"${{{bucket}.Arn}}/*"},
    ]


@pytest.mark.parametrize("bucket", ["UploadsBucket", "OutputsBucket", "QuarantineBucket"])
def test_buckets_log_access_to_the_access_logs_bucket(
    template: dict[str, Any], bucket: str
) -> None:
    logging = template["Resources"][bucket]["Properties"]["LoggingConfiguration"]
    assert logging["DestinationBucketName"] == {"Ref": "AccessLogsBucket"}


def test_the_uploads_bucket_is_versioned(stack: Stack, template: dict[str, Any]) -> None:
    # given the uploads bucket created from the template
    # when its versioning is read back
    versioning = stack.s3.get_bucket_versioning(Bucket=stack.buckets["UploadsBucket"])
    # then every overwrite keeps the previous version (an upload is a version, not a key)
    assert versioning["Status"] == "Enabled"
    rules = template["Resources"]["UploadsBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert {"NoncurrentDays": 30} in [r.get("NoncurrentVersionExpiration") for r in rules]
    assert {"DaysAfterInitiation": 7} in [r.get("AbortIncompleteMultipartUpload") for r in rules]


def test_an_upload_under_uploads_reaches_the_ingest_queue_and_nothing_else_does(
    stack: Stack,
) -> None:
    # given the uploads bucket's notification, whose creation sent S3's test event
    (test_event,) = stack.drain("IngestQueue")
    assert test_event["Event"] == "s3:TestEvent"
    assert "Records" not in test_event
    bucket = stack.buckets["UploadsBucket"]

    # when one object is put outside uploads/ and one under it
    stack.s3.put_object(Bucket=bucket, Key="elsewhere/acme/x.txt", Body=b"ignored")
    stack.s3.put_object(Bucket=bucket, Key="uploads/acme/x.txt", Body=b"hello")

    # then only the one under uploads/ arrives, as an ObjectCreated record of that key
    # (S3 also sends the versionId; moto leaves it out, so it is not checked here)
    (message,) = stack.drain("IngestQueue")
    (record,) = message["Records"]
    assert record["eventName"].startswith("ObjectCreated:")
    assert record["s3"]["bucket"]["name"] == bucket
    assert unquote_plus(record["s3"]["object"]["key"]) == "uploads/acme/x.txt"


def test_files_written_to_the_outputs_bucket_never_trigger_ingest(
    stack: Stack, template: dict[str, Any]
) -> None:
    # given the outputs bucket (derived files), and the uploads bucket's queues emptied of S3's
    # test events
    stack.drain("IngestQueue")
    stack.drain("FileRemovalsQueue")
    bucket = stack.buckets["OutputsBucket"]
    # then it has no notification, in the template or on moto
    for name in ("OutputsBucket", "QuarantineBucket", "AccessLogsBucket"):
        assert "NotificationConfiguration" not in template["Resources"][name]["Properties"]
    notification = stack.s3.get_bucket_notification_configuration(Bucket=bucket)
    assert not notification.get("QueueConfigurations")
    # when a worker writes a derived file, even under an uploads/ key
    stack.s3.put_object(Bucket=bucket, Key="uploads/acme/x.thumbnail.jpg", Body=b"jpeg")
    # then nothing reaches any queue
    for queue in stack.queue_urls:
        assert stack.drain(queue) == [], queue


# --- Functions --------------------------------------------------------------------------------


def test_the_template_defines_every_function(functions: dict[str, FunctionSpec]) -> None:
    assert set(functions) == FUNCTIONS
    for name, spec in functions.items():
        assert spec.handler == "app.handler", name


@pytest.mark.parametrize(("job_type", "snake"), sorted(JOB_TYPES.items()))
def test_each_worker_reads_the_three_lanes_of_its_own_job_type(
    functions: dict[str, FunctionSpec], template: dict[str, Any], job_type: str, snake: str
) -> None:
    # given the worker of one job type
    spec = functions[f"{job_type}Worker"]
    # then it runs the shared worker code for that type
    assert spec.code_uri == "functions/worker"
    assert spec.environment["JOB_TYPE"] == snake
    # and it reads every lane one message at a time (a job never waits for others in its batch),
    # the low lane (rescans, backfills) at a concurrency of its own, never the normal lane's
    lanes = {
        _getatt_logical_id(e["Queue"]): (e["BatchSize"], e["ScalingConfig"]["MaximumConcurrency"])
        for e in _sqs_events(spec)
    }
    assert lanes == {
        f"{job_type}Queue": (1, 20),
        f"{job_type}HighQueue": (1, 10),
        f"{job_type}LowQueue": (1, {"Ref": "LowLaneMaximumConcurrency"}),
    }
    # which is SQS's least (2) unless an operator raises it
    low = template["Parameters"]["LowLaneMaximumConcurrency"]
    assert (low["Default"], low["MinValue"]) == (2, 2)


def test_every_function_knows_every_job_queue_and_table(
    functions: dict[str, FunctionSpec], template: dict[str, Any]
) -> None:
    # given the environment Globals give every function
    resources = template["Resources"]
    for name, spec in functions.items():
        queue_urls = {k: v for k, v in spec.environment.items() if k.startswith("QUEUE_URL_")}
        # then there is one URL per job type and lane, each the Ref of that lane's queue
        expected = {
            f"QUEUE_URL_{snake.upper()}{lane_suffix}": {"Ref": f"{job_type}{lane}Queue"}
            for job_type, snake in JOB_TYPES.items()
            for lane, lane_suffix in (("", ""), ("High", "_HIGH"), ("Low", "_LOW"))
        }
        assert queue_urls == expected, name
        assert all(v["Ref"] in resources for v in queue_urls.values())
        assert spec.environment["JOBS_TABLE_NAME"] == {"Ref": "JobsTable"}, name
        assert spec.environment["FILES_TABLE_NAME"] == {"Ref": "FilesTable"}, name
        assert spec.environment["LEASE_SECONDS"] == {"Ref": "JobLeaseSeconds"}, name


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return list(_as_list(document["Statement"]))


def _identity_policies(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(owner, document) of every IAM role's inline policy and every managed policy."""
    documents = [
        (role, policy["PolicyDocument"])
        for role, resource in resources_of_type(template, "AWS::IAM::Role").items()
        for policy in resource["Properties"].get("Policies", [])
    ]
    documents += [
        (name, resource["Properties"]["PolicyDocument"])
        for name, resource in resources_of_type(template, "AWS::IAM::ManagedPolicy").items()
    ]
    return documents


def test_no_iam_statement_grants_every_resource_except_x_ray(template: dict[str, Any]) -> None:
    # given every identity policy of the template (no SAM policy templates: they grant "*")
    assert all("Policies" not in f["Properties"] for f in _functions_of(template).values())
    for owner, document in _identity_policies(template):
        for statement in _statements(document):
            resources = _as_list(statement["Resource"])
            actions = set(_as_list(statement["Action"]))
            # then no statement grants "*", except X-Ray's, which AWS cannot scope
            if "*" in resources:
                assert actions <= XRAY_ACTIONS, f"{owner}: {statement}"
            # and every action is named: no service-wide wildcard
            assert not any(a.endswith(":*") or a == "*" for a in actions), owner


def test_each_function_runs_as_a_role_of_its_own_that_may_consume_its_event_sources(
    functions: dict[str, FunctionSpec],
) -> None:
    # given each function's role
    roles = [spec.role for spec in functions.values()]
    assert None not in roles
    assert len(set(roles)) == len(roles)
    for name, spec in functions.items():
        statements = [st for doc in spec.policies for st in _statements(doc)]

        def granted(
            action: str, resource: Any, statements: list[dict[str, Any]] = statements
        ) -> bool:
            return any(
                action in _as_list(st["Action"]) and resource in _as_list(st["Resource"])
                for st in statements
            )

        # then Lambda's pollers may read and delete each of its queues' messages
        for event in _sqs_events(spec):
            for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
                assert granted(action, event["Queue"]), f"{name}: {action}"
        # and read each of its streams
        for kind, event in spec.events:
            if kind == "DynamoDB":
                assert granted("dynamodb:GetRecords", event["Stream"]), name
        # and the function writes traces and its own log group, nothing more of CloudWatch Logs
        assert granted("xray:PutTraceSegments", "*"), name
        logs = [
            st for st in statements if any(a.startswith("logs:") for a in _as_list(st["Action"]))
        ]
        assert [st["Resource"] for st in logs] == [{"Fn::GetAtt": f"{name}LogGroup.Arn"}], name


def test_every_sqs_event_reports_batch_item_failures_and_caps_concurrency(
    functions: dict[str, FunctionSpec], template: dict[str, Any]
) -> None:
    # given every SQS event source of every function
    events = [(name, e) for name, spec in functions.items() for e in _sqs_events(spec)]
    # the ingest router's, the ingest's, the file removals', the operations function's, the
    # webhooks', the three lanes of each job type
    assert len(events) == 5 + 3 * len(JOB_TYPES)
    for name, event in events:
        # then a failed record is retried alone, not its whole batch
        assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"], name
        # and the poller cannot scale the function past a set concurrency (a parameter's default
        # where an operator sets it)
        concurrency = event["ScalingConfig"]["MaximumConcurrency"]
        if isinstance(concurrency, dict):
            concurrency = template["Parameters"][concurrency["Ref"]]["Default"]
        assert 2 <= concurrency <= 20, name


def test_the_sweep_runs_alone_every_minute_without_retries(
    functions: dict[str, FunctionSpec],
) -> None:
    # given the sweep function
    sweep = functions["SweepFunction"]
    # then at most one sweep runs at a time
    assert sweep.reserved_concurrency == 1
    # and EventBridge Scheduler starts it every minute, without retrying a failed run
    (schedule,) = [properties for kind, properties in sweep.events if kind == "ScheduleV2"]
    assert schedule["ScheduleExpression"] == "rate(1 minute)"
    assert schedule["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert len(sweep.events) == 1


@pytest.mark.parametrize(
    ("function", "rate"),
    [
        ("DefinitionsUpdater", {"Ref": "DefinitionsUpdateSchedule"}),
        ("RescanPolicy", "rate(1 hour)"),
    ],
)
def test_the_scans_scheduled_functions_run_alone_without_retries(
    functions: dict[str, FunctionSpec], function: str, rate: object
) -> None:
    spec = functions[function]
    # one run at a time: two updaters would each publish a set; two policies, the same rescans
    assert spec.reserved_concurrency == 1
    (schedule,) = [properties for kind, properties in spec.events if kind == "ScheduleV2"]
    assert schedule["ScheduleExpression"] == rate
    assert schedule["RetryPolicy"]["MaximumRetryAttempts"] == 0


def test_the_virus_scan_worker_starts_only_after_the_first_definitions_are_published(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    assert resources["VirusScanWorker"]["DependsOn"] == "ScanDefinitionsOnDeploy"
    deploy = resources["ScanDefinitionsOnDeploy"]["Properties"]
    assert deploy["ServiceToken"] == {"Fn::GetAtt": "DefinitionsUpdater.Arn"}
    # and a change of the mirror settings runs the updater again at deploy
    assert {deploy[k]["Ref"] for k in ("Mirror", "OfficialDatabases", "CustomUrls")} == {
        "DefinitionsMirror",
        "OfficialDatabases",
        "DefinitionsCustomUrls",
    }


def test_only_the_virus_scan_may_set_or_change_the_scan_status_tag(
    template: dict[str, Any],
) -> None:
    policy = template["Resources"]["UploadsBucketPolicy"]["Properties"]["PolicyDocument"]
    statements = {st.get("Sid"): st for st in _statements(policy)}
    scan_role = {"Fn::GetAtt": "VirusScanWorkerRole.Arn"}
    # given the uploads bucket's policy: nobody but the scan's role sets scan-status, at upload
    # or after
    setting = statements["OnlyTheVirusScanSetsScanStatus"]
    assert setting["Effect"] == "Deny" and setting["Principal"] == "*"
    assert {"s3:PutObject", "s3:PutObjectTagging", "s3:PutObjectVersionTagging"} <= set(
        setting["Action"]
    )
    assert setting["Condition"]["ForAnyValue:StringEquals"] == {
        "s3:RequestObjectTagKeys": ["scan-status"]
    }
    assert setting["Condition"]["ArnNotEquals"] == {"aws:PrincipalArn": scan_role}
    # and nobody but it retags or untags a version that has the tag
    retagging = statements["OnlyTheVirusScanRetagsScannedVersions"]
    assert retagging["Effect"] == "Deny"
    assert {"s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging"} <= set(retagging["Action"])
    assert retagging["Condition"]["Null"] == {"s3:ExistingObjectTag/scan-status": "false"}
    assert retagging["Condition"]["ArnNotEquals"] == {"aws:PrincipalArn": scan_role}


def test_every_function_logs_to_a_group_of_its_own_kept_30_days(template: dict[str, Any]) -> None:
    # given the template's functions and log groups
    groups = resources_of_type(template, "AWS::Logs::LogGroup")
    for function, resource in _functions_of(template).items():
        # then each function logs JSON to its own group, which the template creates first
        logging = resource["Properties"]["LoggingConfig"]
        assert logging == {"LogFormat": "JSON", "LogGroup": {"Ref": f"{function}LogGroup"}}
        group = groups[f"{function}LogGroup"]["Properties"]
        # named by the stack, not by the function: no reference back to the function
        assert group["LogGroupName"]["Fn::Sub"].startswith("/aws/lambda/${AWS::StackName}/")
        assert function not in json.dumps(group)
        assert group["RetentionInDays"] == 30


def test_every_dead_letter_queue_has_an_alarm(template: dict[str, Any]) -> None:
    # given the template's alarms on SQS metrics
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    watched = {
        _getatt_logical_id(alarm["Properties"]["Dimensions"][0]["Value"])
        for alarm in alarms.values()
        if alarm["Properties"].get("Namespace") == "AWS/SQS"
    }
    # then any message in any DLQ raises one
    assert watched == DEAD_LETTER_QUEUES
    assert "JobFailureRateAlarm" in alarms
    # and every alarm notifies the alarm topic
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}], name


# --- Outcome events ---------------------------------------------------------------------------


def test_the_events_function_reads_both_tables_streams_for_possible_outcomes_only(
    template: dict[str, Any], functions: dict[str, FunctionSpec]
) -> None:
    # given both tables and the events function
    tables = resources_of_type(template, "AWS::DynamoDB::Table")
    for table in ("JobsTable", "FilesTable"):
        # then each table streams every change with the item before and after it
        stream = tables[table]["Properties"]["StreamSpecification"]
        assert stream == {"StreamViewType": "NEW_AND_OLD_IMAGES"}, table
    spec = functions["EventsFunction"]
    streams = {kind: e for kind, e in spec.events}
    assert set(streams) == {"DynamoDB"}
    events = {e["Stream"]["Fn::GetAtt"]: e for kind, e in spec.events}
    assert set(events) == {"JobsTable.StreamArn", "FilesTable.StreamArn"}
    for event in events.values():
        # and a failed record is retried alone, then parked in the failure queue, never dropped
        assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert event["BisectBatchOnFunctionError"] is True
        destination = event["DestinationConfig"]["OnFailure"]["Destination"]
        assert _getatt_logical_id(destination) == STREAM_FAILURE_QUEUE
    # and only writes that leave a job terminal or a file quarantined or deleted wake it
    patterns = {
        name: json.loads(e["FilterCriteria"]["Filters"][0]["Pattern"]) for name, e in events.items()
    }
    job_statuses = patterns["JobsTable.StreamArn"]["dynamodb"]["NewImage"]["status"]["S"]
    assert set(job_statuses) == {"completed", "failed", "cancelled"}
    file_statuses = patterns["FilesTable.StreamArn"]["dynamodb"]["NewImage"]["status"]["S"]
    assert file_statuses == ["quarantined", "deleted"]
    # and it publishes to the stack's bus
    assert spec.environment["EVENT_BUS_NAME"] == {"Ref": "JobEventsBus"}


# --- Layers and architecture ------------------------------------------------------------------

MEDIA_LAYERS = {
    "ThumbnailGenerationWorker": ["ThumbnailsLayer"],
    "VideoThumbnailWorker": ["ImagingLayer", "VideoLayer"],
    "DocumentPreviewWorker": ["ImagingLayer", "DocumentsLayer", "LibreOfficeLayer"],
    "CompressionWorker": ["CompressionLayer"],
    "VirusScanWorker": ["ScanningLayer", "ClamAvLayer"],
    "DefinitionsUpdater": ["ScanningLayer", "ClamAvLayer"],
}


def _requirement_names(layer_dir: str) -> set[str]:
    lines = (ROOT / layer_dir / "requirements.txt").read_text().splitlines()
    names = {line.split("#")[0].strip() for line in lines}
    return {re.split(r"[<>=!~\[ ]", name, maxsplit=1)[0].lower() for name in names if name}


def test_each_function_ships_the_shared_layer_and_only_the_media_layers_it_imports(
    functions: dict[str, FunctionSpec],
) -> None:
    for name, spec in functions.items():
        # then the shared layer comes first, then the function's own media layers
        assert spec.layers == ["FileJobsLayer", *MEDIA_LAYERS.get(name, [])], name
        # and everything runs on Graviton
        assert spec.architecture == "arm64", name


def _layer_recipes() -> dict[str, str]:
    """Logical id -> the folder of requirements its infra/layers/Makefile target installs."""
    text = (ROOT / "infra" / "layers" / "Makefile").read_text()
    return dict(re.findall(r"^build-(\w+):\n\t\$\(call build_layer,(\w+)", text, re.M))


def _native_recipes() -> set[str]:
    """Logical ids of the layers built from pinned Debian packages (no requirements.txt)."""
    text = (ROOT / "infra" / "layers" / "Makefile").read_text()
    recipe = r"^build-(\w+):\n\t\$\(PYTHON\) \$\(BUILDERS\)/\w+/debs.py install"
    return set(re.findall(recipe, text, re.M))


def test_every_layer_is_built_for_arm64_and_no_package_is_in_two_layers_of_a_function(
    template: dict[str, Any], functions: dict[str, FunctionSpec]
) -> None:
    recipes = _layer_recipes()
    layers = resources_of_type(template, "AWS::Serverless::LayerVersion")
    assert set(layers) == set(recipes) | _native_recipes()
    for name, layer in layers.items():
        # then SAM builds it with our recipe (compiled ahead of time) for the functions'
        # architecture (SAM would default to x86_64): the Makefile in infra/layers, run in a copy
        # of layers/ (what ships, whose files SAM's build cache is keyed on)
        assert layer["Metadata"] == {
            "BuildMethod": "makefile",
            "BuildArchitecture": "arm64",
            "ContextPath": "infra/layers",
        }
        assert layer["Properties"]["ContentUri"] == "layers"
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"], name
    for function, spec in functions.items():
        # and no requirement of one of a function's layers is also another's (the later layer
        # would shadow it in /opt/python)
        seen: dict[str, str] = {}
        for name in spec.layers:
            python_packages = (
                _requirement_names(f"layers/{recipes[name]}") if name in recipes else ()
            )
            for requirement in python_packages:
                assert requirement not in seen, (function, requirement, name, seen[requirement])
                seen[requirement] = name


def test_every_api_stage_throttles_every_route_at_a_rate_the_deployer_sets(
    template: dict[str, Any],
) -> None:
    apis = resources_of_type(template, "AWS::Serverless::Api")
    assert apis
    for name, api in apis.items():
        settings = api["Properties"].get("MethodSettings", [])
        every_route = [s for s in settings if (s["ResourcePath"], s["HttpMethod"]) == ("/*", "*")]
        assert len(every_route) == 1, name
        assert every_route[0]["ThrottlingRateLimit"] == {"Ref": "ApiThrottleRate"}
        assert every_route[0]["ThrottlingBurstLimit"] == {"Ref": "ApiThrottleBurst"}
    for parameter in ("ApiThrottleRate", "ApiThrottleBurst"):
        declared = template["Parameters"][parameter]
        assert declared["Type"] == "Number"
        assert declared["MinValue"] >= 1
        assert declared["Default"] >= declared["MinValue"]


SESSION_NAMES = [
    "acme", "Acme-Corp_2", "a1", "x" * 63,  # tenants
    "bob@example.com", "acme.eu", "a,b", "k=v", "a+b", "_acme", "-acme",  # no tenant has these
]  # fmt: skip


@pytest.mark.parametrize("session", SESSION_NAMES)
def test_sts_refuses_a_tenant_role_session_that_names_no_tenant(
    template: dict[str, Any], session: str
) -> None:
    # given the tenant role's trust condition, as STS applies StringNotLike (any pattern)
    statement = template["Resources"]["ApiTenantRole"]["Properties"]["AssumeRolePolicyDocument"][
        "Statement"
    ][0]
    patterns = statement["Condition"]["StringNotLike"]["sts:RoleSessionName"]
    allowed_by_sts = not any(fnmatchcase(session, pattern) for pattern in patterns)
    # then STS lets a session through exactly when the API takes its name for a tenant
    assert allowed_by_sts == is_tenant(session)


def test_the_api_roles_trust_only_the_principals_the_deployer_names(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    for role, parameter, condition in (
        ("ApiOperatorRole", "ApiOperatorPrincipals", "NamesOperatorPrincipals"),
        ("ApiTenantRole", "ApiTenantBrokers", "NamesTenantBrokers"),
    ):
        # never the account root: with no principals named the role is not made at all
        assert resources[role]["Condition"] == condition
        for trust in resources[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            assert trust["Principal"]["AWS"] == {"Ref": parameter}
        assert template["Parameters"][parameter]["Type"] == "CommaDelimitedList"
    operator = resources["ApiOperatorRole"]["Properties"]["AssumeRolePolicyDocument"]
    mfa = operator["Statement"][0]["Condition"]["Fn::If"]
    assert mfa[0] == "OperatorRequiresMfa"
    assert mfa[1] == {"Bool": {"aws:MultiFactorAuthPresent": "true"}}
    assert template["Parameters"]["ApiOperatorRequiresMfa"]["Default"] == "true"
