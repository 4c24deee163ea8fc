"""The local stack's fixes to moto server (filejobs_dev/local/moto_fixes.py): what DynamoDB promises
and the system relies on, kept by the emulator under load; and its speed-ups
(filejobs_dev/local/moto_speedups.py): moto's own answers, with less work.

Each scenario runs in a process of its own (tests/fresh_process.py), as the fixes patch moto's
classes for the whole process and the rest of the suite runs moto as released.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from filejobs_cli.local_stack_file import LOCAL_CREDENTIALS
from filejobs_dev.local.stack import free_port
from tests.fresh_process import in_fresh_process


def _emulator() -> tuple[Any, Any, Any]:
    """moto server with the fixes, on loopback; a table with a stream; clients."""
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    moto_fixes.apply()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    session = boto3.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    url = f"http://127.0.0.1:{port}"
    dynamodb = session.client("dynamodb", endpoint_url=url)
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return server, dynamodb, session.client("dynamodbstreams", endpoint_url=url)


@contextmanager
def _served() -> Iterator[Callable[[str], Any]]:
    """moto server, with what this process patched so far, on loopback; a client maker."""
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    session = boto3.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    try:
        yield lambda service: session.client(service, endpoint_url=f"http://127.0.0.1:{port}")  # type: ignore[call-overload]
    finally:
        server.stop()


def _put(key: str, *, new_only: bool = True) -> dict[str, Any]:
    put: dict[str, Any] = {"TableName": "t", "Item": {"pk": {"S": key}}}
    if new_only:
        put["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": put}


def stream_across_rollbacks() -> dict[str, Any]:
    server, dynamodb, streams = _emulator()
    try:
        arn = dynamodb.describe_table(TableName="t")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        read: list[str] = []
        for n in range(20):
            dynamodb.transact_write_items(TransactItems=[_put(f"a{n}"), _put(f"b{n}")])
            # a duplicate: its first two writes are made, then undone by the rollback
            changed = {
                "Update": {
                    "TableName": "t",
                    "Key": {"pk": {"S": f"b{n}"}},
                    "UpdateExpression": "SET changed = :yes",
                    "ExpressionAttributeValues": {":yes": {"BOOL": True}},
                }
            }
            with pytest.raises(ClientError, match="TransactionCanceledException"):
                dynamodb.transact_write_items(
                    TransactItems=[_put(f"undone{n}"), changed, _put(f"a{n}")]
                )
            page = streams.get_records(ShardIterator=iterator)
            iterator = page["NextShardIterator"]
            read += [r["dynamodb"]["Keys"]["pk"]["S"] for r in page["Records"]]
        from moto.dynamodb.models.table import Table  # noqa: PLC0415

        gc.collect()
        stored = dynamodb.scan(TableName="t")["Items"]
        return {
            "read": read,
            "stored": sorted(i["pk"]["S"] for i in stored),
            "changed": sorted(i["pk"]["S"] for i in stored if "changed" in i),
            "tables_alive": sum(isinstance(o, Table) for o in gc.get_objects()),
        }
    finally:
        server.stop()


def writes_during_rollbacks() -> dict[str, int]:
    server, dynamodb, _ = _emulator()
    try:
        for n in range(0, 2000, 25):  # a table big enough that a transaction's backup takes time
            batch = [{"PutRequest": {"Item": {"pk": {"S": f"old{k}"}}}} for k in range(n, n + 25)]
            dynamodb.batch_write_item(RequestItems={"t": batch})
        done = threading.Event()

        def roll_back_again_and_again() -> int:
            rollbacks = 0
            while not done.is_set():
                try:
                    dynamodb.transact_write_items(TransactItems=[_put("x"), _put("old0")])
                except ClientError:
                    rollbacks += 1
            return rollbacks

        with ThreadPoolExecutor(max_workers=1) as pool:
            rollbacks = pool.submit(roll_back_again_and_again)
            for n in range(60):
                dynamodb.put_item(TableName="t", Item={"pk": {"S": f"new{n}"}})
            done.set()
        stored = {
            i["pk"]["S"]
            for page in dynamodb.get_paginator("scan").paginate(TableName="t")
            for i in page["Items"]
        }
        return {
            "acknowledged": 60,
            "kept": sum(f"new{n}" in stored for n in range(60)),
            "rollbacks": rollbacks.result(),
        }
    finally:
        server.stop()


def test_a_rolled_back_transaction_leaves_the_stream_whole_and_no_copies_behind() -> None:
    # given a table with a stream and a reader at its start, when committed transactions
    # alternate with rolled-back ones (each of which put a new item and updated a committed one
    # before it was undone)
    result = in_fresh_process(stream_across_rollbacks)
    committed = [key for n in range(20) for key in (f"a{n}", f"b{n}")]
    # then the reader got every committed write, in order, and nothing of the undone ones
    assert result["read"] == committed
    # and the table holds exactly the committed items, as committed (the update was undone)
    assert result["stored"] == sorted(committed)
    assert result["changed"] == []
    # and no backup of the table outlived its transaction
    assert result["tables_alive"] == 1


def test_an_acknowledged_write_is_never_undone_by_another_requests_rollback() -> None:
    # given a table of 2,000 items, and a client whose transactions keep failing (each backs the
    # table up, then restores it)
    # when another client puts 60 items meanwhile, each acknowledged
    result = in_fresh_process(writes_during_rollbacks)
    # then all 60 are stored, and the rollbacks did happen alongside them
    assert result["kept"] == result["acknowledged"]
    assert result["rollbacks"] > 0


def notifications_of_two_writes(*, fixed: bool = True) -> dict[str, Any]:
    """Two writes of one key (a name S3 URL-encodes) to a versioned bucket that notifies a queue:
    the versions S3 made, and what the notifications said of them."""
    import json  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    with _served() as client:
        s3, sqs = client("s3"), client("sqs")
        queue = sqs.create_queue(QueueName="uploads")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        s3.create_bucket(Bucket="uploads-bucket")
        s3.put_bucket_versioning(
            Bucket="uploads-bucket", VersioningConfiguration={"Status": "Enabled"}
        )
        s3.put_bucket_notification_configuration(
            Bucket="uploads-bucket",
            NotificationConfiguration={
                "QueueConfigurations": [
                    {"QueueArn": arn["Attributes"]["QueueArn"], "Events": ["s3:ObjectCreated:*"]}
                ]
            },
        )
        key = "uploads/acme/café menu+1.txt"
        written = [
            s3.put_object(Bucket="uploads-bucket", Key=key, Body=body)["VersionId"]
            for body in (b"1", b"2")
        ]
        objects: list[dict[str, Any]] = []
        for _ in range(10):  # past the s3:TestEvent the configuration sent
            received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)
            bodies = [json.loads(m["Body"]) for m in received.get("Messages", [])]
            objects += [r["s3"]["object"] for b in bodies for r in b.get("Records", [])]
            if len(objects) >= len(written):
                break
        return {"written": written, "objects": objects}


def test_an_object_created_notification_names_the_version_it_announces() -> None:
    # given a versioned bucket notifying a queue, when one key is written twice
    result = in_fresh_process(notifications_of_two_writes)
    objects = sorted(result["objects"], key=lambda o: o["sequencer"])
    # then each notification names the version S3 made, in the order they were written
    assert [o["versionId"] for o in objects] == result["written"]
    # and carries a sequencer that grows from one write of the key to the next
    assert objects[0]["sequencer"] < objects[1]["sequencer"]


def test_moto_as_released_names_no_version_in_its_notifications() -> None:
    # the gap the fix closes (this fails once moto names versions itself: drop the fix then)
    result = in_fresh_process(notifications_of_two_writes, fixed=False)
    assert len(result["objects"]) == 2
    assert all("versionId" not in o for o in result["objects"])


def removals_notified(*, fixed: bool = True) -> dict[str, Any]:
    """Deletes of every kind, through moto server as the local stack runs it, in a versioned
    bucket (notifying one queue of writes and removals under `uploads/`, another of delete
    markers only) and in an unversioned one: what S3 answered, and each queue's records, in the
    order of their sequencers."""
    import json  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    with _served() as client:
        s3, sqs = client("s3"), client("sqs")
        queues: dict[str, tuple[str, str]] = {}
        for name in ("removals", "markers", "plain"):
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            queues[name] = (url, arn["Attributes"]["QueueArn"])

        def notify(bucket: str, *targets: tuple[str, list[str]]) -> None:
            prefix = {"Key": {"FilterRules": [{"Name": "prefix", "Value": "uploads/"}]}}
            configurations = [
                {"QueueArn": queues[queue][1], "Events": events, "Filter": prefix}
                for queue, events in targets
            ]
            s3.put_bucket_notification_configuration(
                Bucket=bucket, NotificationConfiguration={"QueueConfigurations": configurations}
            )

        def records(queue: str) -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = []
            while messages := sqs.receive_message(
                QueueUrl=queues[queue][0], MaxNumberOfMessages=10
            ).get("Messages", []):
                bodies = [json.loads(m["Body"]) for m in messages]
                got += [
                    {"eventName": r["eventName"], **r["s3"]["object"]}
                    for b in bodies
                    for r in b.get("Records", [])  # not the s3:TestEvent
                ]
            return sorted(got, key=lambda r: r.get("sequencer", ""))

        s3.create_bucket(Bucket="versioned")
        s3.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": "Enabled"})
        notify(
            "versioned",
            ("removals", ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]),
            ("markers", ["s3:ObjectRemoved:DeleteMarkerCreated"]),
        )
        key = "uploads/acme/café menu+1.txt"

        def put(key: str, bucket: str = "versioned") -> str:
            return s3.put_object(Bucket=bucket, Key=key, Body=b"x").get("VersionId", "")  # type: ignore[no-any-return]

        v1, v2 = put(key), put(key)
        marker = s3.delete_object(Bucket="versioned", Key=key)
        s3.delete_object(Bucket="versioned", Key=key, VersionId=marker.get("VersionId", ""))
        s3.delete_object(Bucket="versioned", Key=key, VersionId=v1)
        v3 = put(key)
        s3.delete_objects(
            Bucket="versioned",
            Delete={"Objects": [{"Key": key, "VersionId": v2}, {"Key": key, "VersionId": v3}]},
        )
        # keys that never had a version: S3 adds a delete marker all the same
        never = s3.delete_object(Bucket="versioned", Key="uploads/acme/never.txt")
        batch = s3.delete_objects(
            Bucket="versioned", Delete={"Objects": [{"Key": "uploads/acme/never either.txt"}]}
        )
        put("elsewhere/x.txt")  # outside the notifications' prefix
        s3.delete_object(Bucket="versioned", Key="elsewhere/x.txt")
        listing = s3.list_object_versions(Bucket="versioned")

        s3.create_bucket(Bucket="plain")
        notify("plain", ("plain", ["s3:ObjectRemoved:*"]))
        put("uploads/p.txt", "plain")
        s3.delete_object(Bucket="plain", Key="uploads/p.txt")
        s3.delete_object(Bucket="plain", Key="uploads/absent.txt")  # removes nothing
        return {
            "written": [v1, v2, v3],
            "marker": marker.get("VersionId"),
            "never": (never.get("DeleteMarker"), never.get("VersionId")),
            "never either": [
                (d.get("DeleteMarker"), d.get("DeleteMarkerVersionId")) for d in batch["Deleted"]
            ],
            "markers left": {m["Key"]: m["VersionId"] for m in listing.get("DeleteMarkers", [])},
            "versions left": [v["Key"] for v in listing.get("Versions", [])],
            **{queue: records(queue) for queue in queues},
        }


@functools.cache
def _removals() -> dict[str, Any]:
    """One run of removals_notified with the fixes, for the tests that read it."""
    return in_fresh_process(removals_notified)  # type: ignore[no-any-return]


def _named(records: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(r["eventName"], r["key"], r.get("versionId")) for r in records]


def test_each_delete_in_a_versioned_bucket_notifies_what_it_removed() -> None:
    # given a versioned bucket notifying a queue of writes and removals under uploads/, when a
    # key is written twice, deleted (a marker), the marker deleted, the first version deleted,
    # a third written, and the last two deleted in one DeleteObjects; then two keys that never
    # had a version are deleted, one alone, one in a batch; and a key outside uploads/
    result = _removals()
    v1, v2, v3 = result["written"]
    marker = result["marker"]
    left = result["markers left"]
    never, never_either = left["uploads/acme/never.txt"], left["uploads/acme/never either.txt"]
    key = "uploads%2Facme%2Fcaf%C3%A9+menu%2B1.txt"  # URL-encoded, as S3 names it
    # then each removal is notified, in order, naming the marker added or the version deleted
    assert _named(result["removals"]) == [
        ("ObjectCreated:Put", key, v1),
        ("ObjectCreated:Put", key, v2),
        ("ObjectRemoved:DeleteMarkerCreated", key, marker),
        ("ObjectRemoved:Delete", key, marker),
        ("ObjectRemoved:Delete", key, v1),
        ("ObjectCreated:Put", key, v3),
        ("ObjectRemoved:Delete", key, v2),
        ("ObjectRemoved:Delete", key, v3),
        ("ObjectRemoved:DeleteMarkerCreated", "uploads%2Facme%2Fnever.txt", never),
        ("ObjectRemoved:DeleteMarkerCreated", "uploads%2Facme%2Fnever+either.txt", never_either),
    ]
    # and a removal's record describes no content, only the key, the version and the sequencer
    removals = [r for r in result["removals"] if r["eventName"].startswith("ObjectRemoved")]
    assert all(r.keys() == {"eventName", "key", "versionId", "sequencer"} for r in removals)
    # and a key that never had a version got a delete marker, as S3 answered, alone or in a batch
    assert result["never"] == (True, never)
    assert result["never either"] == [(True, never_either)]
    assert result["versions left"] == ["elsewhere/x.txt"]


def test_a_queue_of_delete_markers_only_gets_the_delete_markers() -> None:
    # given a second queue of the versioned bucket, for s3:ObjectRemoved:DeleteMarkerCreated
    result = _removals()
    # then it got the three markers added under uploads/, and no version deleted for good
    assert _named(result["markers"]) == [
        r for r in _named(result["removals"]) if r[0] == "ObjectRemoved:DeleteMarkerCreated"
    ]
    assert len(result["markers"]) == 3


def test_a_delete_in_an_unversioned_bucket_names_no_version() -> None:
    # given an unversioned bucket notifying a queue of removals, when an object is deleted, then
    # a key that holds none
    result = _removals()
    # then the one object removed is notified, with neither a version nor content
    assert [r.keys() for r in result["plain"]] == [{"eventName", "key", "sequencer"}]
    assert _named(result["plain"]) == [("ObjectRemoved:Delete", "uploads%2Fp.txt", None)]


def test_moto_as_released_notifies_no_delete_marker() -> None:
    # the gap the fix closes (this fails once moto notifies delete markers: drop that part then)
    result = in_fresh_process(removals_notified, fixed=False)
    names = [r["eventName"] for r in result["removals"]]
    assert "ObjectRemoved:DeleteMarkerCreated" not in names
    assert result["markers"] == []
    # and of the four versions and the marker deleted for good, it notified one: the last
    assert names.count("ObjectRemoved:Delete") == 1
    # and it added no delete marker to a key that had no version
    assert result["never"] == (None, None)


def folder_listings_per_request(*, fixed: bool = True) -> dict[str, int]:
    """How often moto server lists its package folder (to find a request's service) while it
    answers 40 requests of three services."""
    from moto import backends  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    listings = 0
    original = backends.list_of_moto_modules

    def counted() -> Any:
        nonlocal listings
        listings += 1
        return original()

    backends.list_of_moto_modules = counted
    with _served() as client:
        sqs, s3 = client("sqs"), client("s3")
        dynamodb = client("dynamodb")
        queue = sqs.create_queue(QueueName="q")["QueueUrl"]
        s3.create_bucket(Bucket="listing-bucket")
        answers = 0
        for n in range(12):
            sqs.send_message(QueueUrl=queue, MessageBody=str(n))
            s3.put_object(Bucket="listing-bucket", Key=f"k{n}", Body=b"x")
            answers += len(dynamodb.list_tables()["TableNames"]) == 0
        return {"requests": 2 + 3 * 12, "listings": listings, "answers": answers}


def test_the_emulator_finds_each_service_once_not_once_per_request() -> None:
    # given moto server with the fixes, when it answers 38 requests of three services
    result = in_fresh_process(folder_listings_per_request)
    # then each was answered, and its package folder was listed at most once per service
    assert result["answers"] == 12
    assert result["listings"] <= 3


def test_moto_as_released_lists_its_folder_for_every_request() -> None:
    # the cost the fix removes (this fails once moto remembers it itself: drop the fix then)
    result = in_fresh_process(folder_listings_per_request, fixed=False)
    assert result["listings"] >= result["requests"]


def queries_on_a_big_table(*, fixed: bool = True) -> dict[str, Any]:
    """Table and index queries (conditions, order, paging, a numeric index) over 600 items, and
    how often moto listed the whole table to answer them."""
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    listings = 0
    original = Table.all_items

    def counted(self: Any) -> Any:
        nonlocal listings
        listings += 1
        return original(self)

    Table.all_items = counted  # type: ignore[method-assign]
    with _served() as client:
        dynamodb = client("dynamodb")
        indexes = [
            ("by_shard", "shard", "S", "at", "S"),
            ("by_rank", "rank", "N", "at", "S"),
        ]
        dynamodb.create_table(
            TableName="big",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "shard", "AttributeType": "S"},
                {"AttributeName": "at", "AttributeType": "S"},
                {"AttributeName": "rank", "AttributeType": "N"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": name,
                    "KeySchema": [
                        {"AttributeName": hash_name, "KeyType": "HASH"},
                        {"AttributeName": range_name, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
                for name, hash_name, _, range_name, _ in indexes
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for n in range(600):
            item = {"pk": {"S": f"p{n % 40}"}, "sk": {"S": f"{n:04d}"}, "at": {"S": f"t{n:04d}"}}
            if n % 3:  # a sparse index: a third of the items are not in it
                item["shard"] = {"S": f"s{n % 7}"}
            item["rank"] = {"N": "1.0" if n % 2 else "1"}
            dynamodb.put_item(TableName="big", Item=item)
        answers: dict[str, Any] = {}

        def keys(**query: Any) -> list[str]:
            found: list[str] = []
            start = None
            while True:
                if start is not None:
                    query["ExclusiveStartKey"] = start
                page = dynamodb.query(TableName="big", Limit=9, **query)
                found += [i["sk"]["S"] for i in page["Items"]]
                start = page.get("LastEvaluatedKey")
                if start is None:
                    return found

        answers["table"] = keys(
            KeyConditionExpression="pk = :p AND sk > :s",
            ExpressionAttributeValues={":p": {"S": "p3"}, ":s": {"S": "0100"}},
        )
        answers["index"] = keys(
            IndexName="by_shard",
            KeyConditionExpression="shard = :h AND #at <= :t",
            ExpressionAttributeNames={"#at": "at"},
            ExpressionAttributeValues={":h": {"S": "s2"}, ":t": {"S": "t0400"}},
            ScanIndexForward=False,
        )
        # a write between two queries of one index: the second sees it
        dynamodb.put_item(
            TableName="big",
            Item={"pk": {"S": "new"}, "sk": {"S": "9999"}, "at": {"S": "t0001"},
                  "shard": {"S": "s2"}, "rank": {"N": "2"}},
        )  # fmt: skip
        answers["index after a write"] = keys(
            IndexName="by_shard",
            KeyConditionExpression="shard = :h AND #at <= :t",
            ExpressionAttributeNames={"#at": "at"},
            ExpressionAttributeValues={":h": {"S": "s2"}, ":t": {"S": "t0400"}},
        )
        answers["numeric"] = keys(
            IndexName="by_rank",
            KeyConditionExpression="#r = :r",
            ExpressionAttributeNames={"#r": "rank"},
            ExpressionAttributeValues={":r": {"N": "1"}},
        )
        answers["nothing"] = keys(
            KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p999"}}
        )
        return {"answers": answers, "listings": listings}


def test_a_query_reads_its_partition_and_answers_as_moto_does() -> None:
    # given 600 items, and table, sparse index and numeric index queries with conditions,
    # descending order and paging, when moto server with the fixes and without answers them
    fixed = in_fresh_process(queries_on_a_big_table)
    unfixed = in_fresh_process(queries_on_a_big_table, fixed=False)
    # then the answers are the same, item for item and in order
    assert fixed["answers"] == unfixed["answers"]
    assert len(fixed["answers"]["index"]) > 9  # paged
    assert "9999" in fixed["answers"]["index after a write"]
    assert len(fixed["answers"]["numeric"]) == 600  # "1" and "1.0" are the same number
    # and the fixed server listed the whole table only for the numeric key, once per page
    assert unfixed["listings"] >= 20
    assert fixed["listings"] == len(fixed["answers"]["numeric"]) // 9 + 1


def index_queries_between_writes(*, fixed: bool = True) -> dict[str, Any]:
    """An index queried after every kind of write (put, update moving an item between groups or
    out of the sparse index, delete, batch, transaction committed and rolled back), and how many
    times moto or the fixes went over every item of the table to answer."""
    from collections import defaultdict  # noqa: PLC0415

    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    moto_fixes.apply(speedups=fixed)
    passes = 0

    class CountedItems(defaultdict[Any, Any]):
        def values(self) -> Any:
            nonlocal passes
            passes += 1
            return super().values()

        def items(self) -> Any:
            nonlocal passes
            passes += 1
            return super().items()

    with _served() as client:
        dynamodb = client("dynamodb")
        dynamodb.create_table(
            TableName="jobs",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "id", "AttributeType": "S"},
                {"AttributeName": "shard", "AttributeType": "S"},
                {"AttributeName": "due", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[{
                "IndexName": "by_shard",
                "KeySchema": [
                    {"AttributeName": "shard", "KeyType": "HASH"},
                    {"AttributeName": "due", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }],
            BillingMode="PAY_PER_REQUEST",
        )  # fmt: skip
        table = dynamodb_backends["123456789012"]["us-east-1"].tables["jobs"]
        table.items = CountedItems(dict, table.items)
        for n in range(300):
            item = {"id": {"S": f"j{n:03d}"}, "due": {"S": f"t{n % 50:02d}"}}
            item["shard"] = {"S": f"s{n % 4}"}
            dynamodb.put_item(TableName="jobs", Item=item)

        def shard(name: str) -> list[str]:
            pages = dynamodb.get_paginator("query").paginate(
                TableName="jobs",
                IndexName="by_shard",
                KeyConditionExpression="#shard = :s AND due <= :d",
                ExpressionAttributeNames={"#shard": "shard"},
                ExpressionAttributeValues={":s": {"S": name}, ":d": {"S": "t40"}},
                PaginationConfig={"PageSize": 7},
            )
            return [i["id"]["S"] for page in pages for i in page["Items"]]

        def moved(job: str, to: str) -> dict[str, Any]:
            return {
                "TableName": "jobs",
                "Key": {"id": {"S": job}},
                "UpdateExpression": "SET #shard = :to",
                "ExpressionAttributeNames": {"#shard": "shard"},
                "ExpressionAttributeValues": {":to": {"S": to}},
            }

        def everything() -> dict[str, list[str]]:
            return {name: shard(name) for name in ("s0", "s1", "s2", "s3", "s9")}

        answers = {"start": everything()}
        passes = 0  # the groups' first build aside
        dynamodb.update_item(**moved("j000", "s9"))  # from one group to another
        answers["moved"] = everything()
        dynamodb.update_item(
            TableName="jobs",
            Key={"id": {"S": "j001"}},
            UpdateExpression="REMOVE #shard",
            ExpressionAttributeNames={"#shard": "shard"},
        )  # out of the index
        answers["removed"] = everything()
        dynamodb.delete_item(TableName="jobs", Key={"id": {"S": "j002"}})
        dynamodb.put_item(
            TableName="jobs", Item={"id": {"S": "j003"}, "due": {"S": "t00"}, "shard": {"S": "s9"}}
        )  # replaced
        dynamodb.put_item(
            TableName="jobs", Item={"id": {"S": "new"}, "due": {"S": "t01"}, "shard": {"S": "s1"}}
        )
        answers["put and deleted"] = everything()
        dynamodb.batch_write_item(
            RequestItems={
                "jobs": [
                    {"DeleteRequest": {"Key": {"id": {"S": "j004"}}}},
                    {
                        "PutRequest": {
                            "Item": {"id": {"S": "j005"}, "due": {"S": "t02"}, "shard": {"S": "s2"}}
                        }
                    },
                ]
            }
        )
        answers["batch"] = everything()
        dynamodb.transact_write_items(TransactItems=[{"Update": moved("j006", "s9")}])
        with pytest.raises(ClientError, match="TransactionCanceledException"):
            dynamodb.transact_write_items(
                TransactItems=[
                    {"Update": moved("j007", "s9")},
                    {
                        "Put": {
                            "TableName": "jobs",
                            "Item": {"id": {"S": "j008"}},
                            "ConditionExpression": "attribute_not_exists(id)",
                        }
                    },
                ]
            )
        answers["transactions"] = everything()
        passes_through_writes = passes
        return {"answers": answers, "passes": passes_through_writes}


def test_index_groups_follow_each_write_without_going_over_the_table() -> None:
    # given 300 items in a sparse index of 4 shards, each shard queried in pages after every
    # kind of write, by moto server with the fixes and without
    fixed = in_fresh_process(index_queries_between_writes)
    unfixed = in_fresh_process(index_queries_between_writes, fixed=False)
    # then every answer is moto's own, item for item and in order
    assert fixed["answers"] == unfixed["answers"]
    assert "j000" in fixed["answers"]["moved"]["s9"]
    assert "j007" not in fixed["answers"]["transactions"]["s9"]  # rolled back
    # and after their first build the groups followed 8 writes without one pass over the
    # table, where moto went over it for every page of every query
    assert fixed["passes"] == 0
    assert unfixed["passes"] > 100


def scans_of_every_kind(*, fixed: bool = True) -> dict[str, Any]:
    """Scans (filtered, counted, projected, paged, segmented, of an index) of 400 items, the
    items still as stored afterwards, and how many items moto copied to answer them."""
    from moto.dynamodb.models.dynamo_type import Item  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    moto_fixes.apply(speedups=fixed)
    copies = 0
    original = Item.__deepcopy__

    def counted(self: Any, memo: Any) -> Any:
        nonlocal copies
        copies += 1
        return original(self, memo)

    Item.__deepcopy__ = counted  # type: ignore[method-assign]
    with _served() as client:
        dynamodb = client("dynamodb")
        dynamodb.create_table(
            TableName="jobs",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "id", "AttributeType": "S"},
                {"AttributeName": "kind", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[{
                "IndexName": "by_kind",
                "KeySchema": [{"AttributeName": "kind", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["status"]},
            }],
            BillingMode="PAY_PER_REQUEST",
        )  # fmt: skip
        for n in range(400):
            item = {
                "id": {"S": f"j{n:03d}"},
                "status": {"S": "running" if n % 10 == 0 else "completed"},
                "result": {"M": {"pages": {"N": str(n)}, "tags": {"SS": ["a", f"t{n}"]}}},
            }
            if n % 2:
                item["kind"] = {"S": f"k{n % 3}"}
            dynamodb.put_item(TableName="jobs", Item=item)
        active = {
            "FilterExpression": "#s = :running",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":running": {"S": "running"}},
        }

        def scan(**parameters: Any) -> dict[str, Any]:
            pages = dynamodb.get_paginator("scan").paginate(TableName="jobs", **parameters)
            answered: dict[str, Any] = {"items": [], "count": 0, "scanned": 0}
            for page in pages:
                answered["items"] += page.get("Items", [])
                answered["count"] += page["Count"]
                answered["scanned"] += page["ScannedCount"]
            return answered

        copies = 0
        answers = {
            "filtered": scan(**active),
            "counted": scan(Select="COUNT", **active),
            "projected": scan(
                ProjectionExpression="id, #s, #r.pages",
                ExpressionAttributeNames={"#s": "status", "#r": "result"},
            ),
            "paged": scan(PaginationConfig={"PageSize": 33}),
            "segment": scan(Segment=1, TotalSegments=3, **active),
        }
        table_copies = copies
        answers["index"] = scan(IndexName="by_kind")
        answers["stored"] = scan()
        return {"answers": answers, "copies": table_copies}


def test_a_scan_copies_only_what_it_answers_with() -> None:
    # given 400 items, when moto server with the fixes and without answers table scans that
    # filter, count, project, page and segment, and an index scan
    fixed = in_fresh_process(scans_of_every_kind)
    unfixed = in_fresh_process(scans_of_every_kind, fixed=False)
    # then every answer is moto's own, and the items are stored as they were
    assert fixed["answers"] == unfixed["answers"]
    assert fixed["answers"]["counted"] == {"items": [], "count": 40, "scanned": 400}
    assert len(fixed["answers"]["stored"]["items"]) == 400
    # and the fixed server copied the items it answered with unprojected (40 filtered, 400
    # paged, those of the segment), not every item each scan read
    assert fixed["copies"] == 40 + 400 + len(fixed["answers"]["segment"]["items"])
    assert unfixed["copies"] >= 4 * 400  # every item read, by each of the four whole scans


def transitions_of_many_jobs(*, fixed: bool = True) -> dict[str, Any]:
    """A job's transitions (conditional updates with the same expressions and new values) on
    50 items, a lost race, bad expressions; the answers, and how much moto parsed."""
    from moto.dynamodb.comparisons import ConditionExpressionParser  # noqa: PLC0415
    from moto.dynamodb.parsing.tokens import ExpressionTokenizer  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    moto_fixes.apply(speedups=fixed)
    counts = {"update parses": 0, "condition parses": 0}

    def counting(owner: Any, name: str, counter: str, *, static: bool = False) -> None:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[counter] += 1
            return original(*args, **kwargs)

        setattr(owner, name, staticmethod(counted) if static else counted)

    counting(ExpressionTokenizer, "make_list", "update parses", static=True)
    counting(ConditionExpressionParser, "_lex_condition_expression", "condition parses")
    with _served() as client:
        dynamodb = client("dynamodb")
        dynamodb.create_table(
            TableName="jobs",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        answers: list[Any] = []

        def transition(job: str, status: str, before: str, worker: str) -> None:
            try:
                answer = dynamodb.update_item(
                    TableName="jobs",
                    Key={"id": {"S": job}},
                    UpdateExpression="SET #s = :to, worker = :w, history ="
                    " list_append(if_not_exists(history, :none), :entry) ADD attempts :one",
                    ConditionExpression="attribute_not_exists(id) OR #s = :from",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues={
                        ":to": {"S": status}, ":from": {"S": before},
                        ":w": {"S": worker}, ":one": {"N": "1"}, ":none": {"L": []},
                        ":entry": {"L": [{"M": {"to": {"S": status}, "by": {"S": worker}}}]},
                    },
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )  # fmt: skip
                answers.append(answer["Attributes"])
            except ClientError as error:
                answers.append([error.response["Error"]["Code"], error.response.get("Item")])

        for n in range(50):
            transition(f"j{n}", "running", "pending", f"w{n}")
            transition(f"j{n}", "completed", "running", f"w{n}")
        transition("j0", "running", "pending", "late")  # a lost race: the old item comes back
        for bad in ("SET #s = ", "SET #s = :missing"):
            try:
                dynamodb.update_item(
                    TableName="jobs", Key={"id": {"S": "j1"}}, UpdateExpression=bad,
                    ExpressionAttributeNames={"#s": "status"},
                )  # fmt: skip
            except ClientError as error:
                answers.append(error.response["Error"])
        answers.append(dynamodb.scan(TableName="jobs")["Items"])
        return {"answers": answers, "counts": counts}


def test_expressions_are_parsed_once() -> None:
    # given 101 conditional transitions with the same expressions and values of their own,
    # and two bad expressions, answered by moto server with the fixes and without
    fixed = in_fresh_process(transitions_of_many_jobs)
    unfixed = in_fresh_process(transitions_of_many_jobs, fixed=False)
    # then every answer is moto's own: the new items, the lost race's old item, the errors
    assert fixed["answers"] == unfixed["answers"]
    assert fixed["answers"][100][0] == "ConditionalCheckFailedException"
    # and where moto parsed each update twice and each condition twice, the fixed server
    # parsed the update expression once (and each bad one, which is never kept), each
    # condition once
    assert unfixed["counts"]["update parses"] >= 2 * 101
    assert fixed["counts"]["update parses"] <= 1 + 2 * 2
    assert unfixed["counts"]["condition parses"] >= 2 * 101
    assert fixed["counts"]["condition parses"] <= 101 + 2


# Keys whose values differ from one server to the next (times, random ids, ARNs made of times;
# a stream record's size counts the digits of its time).
_VOLATILE = {
    "SizeBytes",
    "CreationDateTime", "CreationRequestDateTime", "ApproximateCreationDateTime", "eventID",
    "LatestStreamLabel",
    "LatestStreamArn", "StreamArn", "StreamLabel", "TableId", "TableArn", "ShardIterator",
    "NextShardIterator",
}  # fmt: skip


def _steady(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def responses_of_every_kind(*, fixed: bool = True) -> dict[str, Any]:
    """The raw JSON bodies moto server answers to every item operation, on items holding every
    attribute type, and a few other responses; and how often moto's alias chain was asked."""
    import json  # noqa: PLC0415

    from moto.core import serialize  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    asked = members = 0
    original = serialize.XFormedAttributePicker.__call__
    member = serialize.ResponseSerializer._serialize_structure_member

    def counted(self: Any, context: Any) -> Any:
        nonlocal asked
        asked += 1
        return original(self, context)

    def counted_member(self: Any, *args: Any) -> Any:
        nonlocal members
        members += 1
        return member(self, *args)

    serialize.XFormedAttributePicker.__call__ = counted  # type: ignore[method-assign]
    serialize.ResponseSerializer._serialize_structure_member = counted_member  # type: ignore[method-assign,assignment]
    moto_fixes.apply(speedups=fixed)
    bodies: list[Any] = []
    with _served() as client:
        dynamodb = client("dynamodb")
        streams = client("dynamodbstreams")
        for each in (dynamodb, streams):
            each.meta.events.register(
                "before-parse.*.*",
                lambda response_dict, **_: bodies.append(json.loads(response_dict["body"])),
            )
        dynamodb.create_table(
            TableName="every",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
                {"AttributeName": "kind", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[{
                "IndexName": "by_kind",
                "KeySchema": [{"AttributeName": "kind", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )  # fmt: skip
        for n in range(4):
            dynamodb.put_item(
                TableName="every",
                Item={
                    "pk": {"S": "p"}, "sk": {"N": str(n)}, "kind": {"S": "k"},
                    "blob": {"B": bytes([0, 255, n])}, "blobs": {"BS": [b"\x01", b"\x02\x03"]},
                    "names": {"SS": ["a", "b"]}, "numbers": {"NS": ["1", "2.5"]},
                    "nothing": {"NULL": True}, "flag": {"BOOL": n % 2 == 0},
                    "nested": {"M": {"list": {"L": [{"S": "x"}, {"N": "3"}, {"M": {}}]},
                                     "Item": {"S": "a member's name as a key"}}},
                    "ItemList": {"S": "a shape's name as a key"},
                },
                ReturnValues="ALL_OLD", ReturnConsumedCapacity="INDEXES",
            )  # fmt: skip
        key = {"pk": {"S": "p"}, "sk": {"N": "1"}}
        dynamodb.get_item(TableName="every", Key=key, ReturnConsumedCapacity="TOTAL")
        dynamodb.update_item(
            TableName="every", Key=key, UpdateExpression="SET flag = :f ADD numbers :n",
            ExpressionAttributeValues={":f": {"BOOL": True}, ":n": {"NS": ["7"]}},
            ReturnValues="ALL_NEW",
        )  # fmt: skip
        dynamodb.query(
            TableName="every", KeyConditionExpression="pk = :p AND sk > :s",
            ExpressionAttributeValues={":p": {"S": "p"}, ":s": {"N": "0"}}, Limit=2,
            ReturnConsumedCapacity="INDEXES",
        )  # fmt: skip
        dynamodb.query(
            TableName="every", IndexName="by_kind", KeyConditionExpression="kind = :k",
            ExpressionAttributeValues={":k": {"S": "k"}}, ProjectionExpression="pk, nested.#l",
            ExpressionAttributeNames={"#l": "list"},
        )  # fmt: skip
        dynamodb.scan(TableName="every", Select="COUNT")
        dynamodb.scan(TableName="every", FilterExpression="flag = :t",
                      ExpressionAttributeValues={":t": {"BOOL": True}})  # fmt: skip
        dynamodb.batch_get_item(RequestItems={"every": {"Keys": [key, {**key, "sk": {"N": "9"}}]}})
        dynamodb.batch_write_item(
            RequestItems={"every": [{"DeleteRequest": {"Key": {**key, "sk": {"N": "3"}}}}]}
        )
        dynamodb.transact_get_items(TransactItems=[{"Get": {"TableName": "every", "Key": key}}])
        dynamodb.transact_write_items(
            TransactItems=[{"Update": {"TableName": "every", "Key": key,
                                       "UpdateExpression": "REMOVE nothing"}}],
            ReturnConsumedCapacity="TOTAL",
        )  # fmt: skip
        with pytest.raises(ClientError):
            dynamodb.delete_item(
                TableName="every", Key=key, ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )  # fmt: skip
        dynamodb.delete_item(TableName="every", Key=key, ReturnValues="ALL_OLD")
        dynamodb.describe_table(TableName="every")
        dynamodb.list_tables()
        arn = streams.list_streams(TableName="every")["Streams"][0]["StreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        streams.get_records(ShardIterator=iterator)
        return {"bodies": _steady(bodies), "asked": asked, "members": members}


def test_responses_are_read_from_their_dicts_and_are_byte_for_byte_moto_s() -> None:
    # given items holding every attribute type (and keys that are also shape and member names),
    # when moto server with the fixes and without answers every item operation and a few more
    fixed = in_fresh_process(responses_of_every_kind)
    unfixed = in_fresh_process(responses_of_every_kind, fixed=False)
    # then every answer is the same
    assert len(fixed["bodies"]) == len(unfixed["bodies"]) == 23
    for answered, expected in zip(fixed["bodies"], unfixed["bodies"], strict=True):
        assert answered == expected
    # and moto's alias chain was asked far less: the items' members were read from their dicts,
    # each structure's in one loop
    assert unfixed["asked"] > 1000
    assert fixed["asked"] < unfixed["asked"] / 5
    assert unfixed["members"] > 1000
    assert fixed["members"] < unfixed["members"] / 20


def receives_from_a_backlog(*, fixed: bool = True) -> dict[str, Any]:
    """Receives from a queue of 300 messages, one of them past its retention period: what came
    back, and how often moto built the queue's attributes meanwhile."""
    from moto.sqs import models  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    moto_fixes.apply(speedups=fixed)
    built = 0
    original = vars(models.Queue)["attributes"].fget

    def counted(queue: Any) -> Any:
        nonlocal built
        built += 1
        return original(queue)

    models.Queue.attributes = property(counted)  # type: ignore[method-assign,assignment]
    with _served() as client:
        sqs = client("sqs")
        url = sqs.create_queue(QueueName="backlog", Attributes={"MessageRetentionPeriod": "600"})
        queue_url = url["QueueUrl"]
        for start in range(0, 300, 10):
            sqs.send_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(start, start + 10)],
            )
        # the oldest message, sent 11 minutes ago: past the queue's 10-minute retention
        backend = models.sqs_backends["123456789012"]["us-east-1"]
        oldest = backend.get_queue("backlog")._messages[0]
        oldest.sent_timestamp -= 660_000  # type: ignore[operator,assignment]
        built = 0
        received = []
        for _ in range(40):  # moto ends a batch at an expired message
            page = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
            received += [message["Body"] for message in page.get("Messages", [])]
        return {"received": sorted(received), "built": built}


@pytest.mark.slow
def test_receives_read_the_retention_period_without_building_every_attribute() -> None:
    # given 300 messages in a queue, one past its retention period, when all are received
    fixed = in_fresh_process(receives_from_a_backlog)
    unfixed = in_fresh_process(receives_from_a_backlog, fixed=False)
    # then the same messages came back, and never the expired one
    assert fixed["received"] == unfixed["received"]
    assert len(fixed["received"]) == 299
    assert "m0" not in fixed["received"]
    # and moto built the queue's attributes three times per message without the fix, not with it
    assert unfixed["built"] >= 3 * 299
    assert fixed["built"] < 30


def kms_keys_used(*, fixed: bool = True) -> dict[str, Any]:
    """Three symmetric keys and a table encrypted with DynamoDB's default key, then an RSA
    signing key that signs and verifies: the answers, and how many RSA pairs moto made."""
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        load_der_public_key,
    )
    from moto import mock_aws  # noqa: PLC0415

    from filejobs_dev.local import moto_speedups  # noqa: PLC0415

    if fixed:
        moto_speedups.key_pairs_when_used()
    made = 0
    generate = rsa.generate_private_key

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return generate(*args, **kwargs)

    rsa.generate_private_key = counted
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        symmetric = [kms.create_key()["KeyMetadata"] for _ in range(3)]
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="encrypted",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            SSESpecification={"Enabled": True, "SSEType": "KMS"},
        )
        made_before_signing = made
        sealed = kms.encrypt(KeyId=symmetric[0]["KeyId"], Plaintext=b"secret")["CiphertextBlob"]
        signer = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="RSA_2048")["KeyMetadata"]
        signed = {
            "KeyId": signer["KeyId"],
            "Message": b"m",
            "SigningAlgorithm": "RSASSA_PSS_SHA_256",
        }
        signature = kms.sign(**signed)["Signature"]
        public = kms.get_public_key(KeyId=signer["KeyId"])["PublicKey"]
        return {
            "made before signing": made_before_signing,
            "made": made,
            "opened": kms.decrypt(CiphertextBlob=sealed)["Plaintext"],
            "valid": kms.verify(**signed, Signature=signature)["SignatureValid"],
            "public key bits": load_der_public_key(public).key_size,  # type: ignore[union-attr]
            "symmetric": sorted(
                (key, str(value))
                for key, value in symmetric[0].items()
                if key not in {"KeyId", "Arn", "CreationDate"}
            ),
        }


def test_a_kms_key_makes_its_key_pair_when_it_first_signs() -> None:
    # given symmetric keys (one made by DynamoDB for an encrypted table) and a signing key
    fixed = in_fresh_process(kms_keys_used)
    unfixed = in_fresh_process(kms_keys_used, fixed=False)
    # then KMS answers alike: encryption round-trips, a signature verifies, the same metadata
    assert fixed == {**unfixed, "made before signing": 0, "made": 1}
    assert fixed["opened"] == b"secret" and fixed["valid"] and fixed["public key bits"] == 2048
    # and moto as released made a pair for each of the four symmetric keys, nobody reading it
    assert unfixed["made before signing"] == 4
    assert unfixed["made"] == 5


def first_receive_of_a_burst_and_a_quiet_group(*, fixed: bool = True) -> list[str]:
    """The groups of the 10 messages received from a standard queue sent 30 of group `noisy`
    (10 of them then received and deleted: the consumers' recent work) and then 2 of group
    `quiet`."""
    from filejobs_dev.local import moto_fixes  # noqa: PLC0415

    if fixed:
        moto_fixes.apply()
    with _served() as client:
        sqs = client("sqs")
        queue = sqs.create_queue(QueueName="jobs")["QueueUrl"]

        def send(group: str, count: int) -> None:
            for start in range(0, count, 10):
                entries = [
                    {"Id": str(n), "MessageBody": f"{group} {n}", "MessageGroupId": group}
                    for n in range(start, min(start + 10, count))
                ]
                sqs.send_message_batch(QueueUrl=queue, Entries=entries)

        def receive() -> list[dict[str, Any]]:
            return sqs.receive_message(  # type: ignore[no-any-return]
                QueueUrl=queue,
                MaxNumberOfMessages=10,
                MessageSystemAttributeNames=["MessageGroupId"],
            )["Messages"]

        send("noisy", 30)
        for worked in receive():
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=worked["ReceiptHandle"])
        send("quiet", 2)
        return [m["Attributes"]["MessageGroupId"] for m in receive()]


def test_a_standard_queue_serves_a_quiet_group_before_a_noisy_groups_backlog() -> None:
    # given a noisy tenant's backlog, being worked, and a quiet tenant's 2 messages sent after
    groups = in_fresh_process(first_receive_of_a_burst_and_a_quiet_group)
    # then the quiet tenant's come first in the next batch, as from an SQS fair queue
    assert groups == ["quiet", "quiet", *["noisy"] * 8]


def test_moto_as_released_serves_a_standard_queue_in_the_order_sent() -> None:
    # the gap the fix closes: the quiet tenant waits behind the whole backlog
    groups = in_fresh_process(first_receive_of_a_burst_and_a_quiet_group, fixed=False)
    assert groups == ["noisy"] * 10
