"""Whether each speed-up of filejobs_dev/local/moto_speedups.py pays: each alone against moto
without any, on the workload it was made for, in the same run.

Each sample is a fresh process that applies the local stack's fixes to moto (moto_fixes, without
speed-ups), then the one speed-up or none, starts moto server on loopback, builds the workload's
data (not timed) and runs the workload through boto3, as the local stack's functions call it.
What is measured is the CPU seconds of that process (moto server and its client, both in it)
over the workload: wall time on a shared machine moved by tens of percent from one sample to
the next. Samples with and without alternate; medians are compared.

    ratio = median CPU seconds without / median CPU seconds with (above 1: the speed-up pays)

The workloads, each the pattern the speed-up's py-spy profile came from:

    routing                   400 GetItem on a small table, 8 at once (every request pays it)
    queries                   200 index queries and 200 table queries, table of 4,000 items
    serializer                60 queries answering 100 items of 12 attributes each
    expressions               400 UpdateItem with an update and a condition expression
    retention                 100 receives of 10 from a queue of 1,000 messages
    scans                     40 filtered counts (Select=COUNT) of a table of 4,000 items
    kms key pairs             15 symmetric KMS keys created (DynamoDB's default key is one)

    .venv/bin/python bench/moto_speedups.py [--runs 3] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NONE = "none"

Client = Callable[[str], Any]


def _jobs_table(dynamodb: Any, items: int) -> None:
    """A table shaped like the jobs table: a key, a status index, `items` items in 40 statuses."""
    dynamodb.create_table(
        TableName="jobs",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "status", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_status",
                "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    for start in range(0, items, 25):
        batch = [
            {"PutRequest": {"Item": _job(n, attributes=4)}}
            for n in range(start, min(start + 25, items))
        ]
        dynamodb.batch_write_item(RequestItems={"jobs": batch})


def _job(n: int, *, attributes: int) -> dict[str, Any]:
    item: dict[str, Any] = {"id": {"S": f"job{n:05d}"}, "status": {"S": f"s{n % 40}"}}
    for a in range(attributes):
        item[f"a{a}"] = {"S": f"value {a} of job {n}"}
    return item


def requests(client: Client) -> Callable[[], None]:
    """GetItem from 8 threads at once, as the local stack's pollers call (its requests share
    the lock moto's routing takes)."""
    dynamodb = client("dynamodb")
    _jobs_table(dynamodb, 25)

    def get(n: int) -> None:
        dynamodb.get_item(TableName="jobs", Key={"id": {"S": f"job{n % 25:05d}"}})

    def run() -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(get, range(400)))

    return run


def queries(client: Client) -> Callable[[], None]:
    dynamodb = client("dynamodb")
    _jobs_table(dynamodb, 4000)

    def run() -> None:
        for n in range(200):
            dynamodb.query(
                TableName="jobs",
                IndexName="by_status",
                KeyConditionExpression="#s = :s",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": f"s{n % 40}"}},
                Limit=10,
            )
            dynamodb.query(
                TableName="jobs",
                KeyConditionExpression="id = :id",
                ExpressionAttributeValues={":id": {"S": f"job{n:05d}"}},
            )

    return run


def serializer(client: Client) -> Callable[[], None]:
    dynamodb = client("dynamodb")
    dynamodb.create_table(
        TableName="wide",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
    )
    for start in range(0, 100, 25):
        batch = [
            {
                "PutRequest": {
                    "Item": {"pk": {"S": "p"}, "sk": {"S": f"{n:03d}"}, **_job(n, attributes=10)}
                }
            }
            for n in range(start, start + 25)
        ]
        dynamodb.batch_write_item(RequestItems={"wide": batch})

    def run() -> None:
        for _ in range(60):
            dynamodb.query(
                TableName="wide",
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": "p"}},
            )

    return run


def expressions(client: Client) -> Callable[[], None]:
    dynamodb = client("dynamodb")
    _jobs_table(dynamodb, 25)

    def run() -> None:
        for n in range(400):
            dynamodb.update_item(
                TableName="jobs",
                Key={"id": {"S": f"job{n % 25:05d}"}},
                UpdateExpression="SET #s = :s, attempts = if_not_exists(attempts, :zero) + :one",
                ConditionExpression="attribute_exists(id) AND #s <> :done",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":s": {"S": "running"},
                    ":done": {"S": "done"},
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                },
            )

    return run


def retention(client: Client) -> Callable[[], None]:
    sqs = client("sqs")
    queue = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    for start in range(0, 1000, 10):
        entries = [{"Id": str(n), "MessageBody": f"job {n}"} for n in range(start, start + 10)]
        sqs.send_message_batch(QueueUrl=queue, Entries=entries)

    def run() -> None:
        for _ in range(100):  # visible again at once: every receive sees the whole queue
            sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0)

    return run


def scans(client: Client) -> Callable[[], None]:
    dynamodb = client("dynamodb")
    _jobs_table(dynamodb, 4000)

    def run() -> None:
        for _ in range(40):
            dynamodb.scan(
                TableName="jobs",
                Select="COUNT",
                FilterExpression="#s IN (:a, :b)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":a": {"S": "s1"}, ":b": {"S": "s2"}},
            )

    return run


def kms_keys(client: Client) -> Callable[[], None]:
    kms = client("kms")

    def run() -> None:
        for _ in range(15):
            kms.create_key()

    return run


WORKLOADS: dict[str, Callable[[Client], Callable[[], None]]] = {
    "routing": requests,
    "queries": queries,
    "serializer": serializer,
    "expressions": expressions,
    "retention": retention,
    "scans": scans,
    "kms key pairs": kms_keys,
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def one_sample(workload: str, speedup: str) -> float:
    """In this process: the fixes, `speedup` (or none), moto server, the workload's seconds."""
    import boto3  # noqa: PLC0415
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes, moto_speedups  # noqa: PLC0415

    moto_fixes.apply(speedups=False)
    if speedup != NONE:
        moto_speedups.apply(only=[speedup])
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        session = boto3.Session(
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 (moto server on loopback checks none)
            region_name="us-east-1",
        )

        def client(service: str) -> Any:
            return session.client(service, endpoint_url=f"http://127.0.0.1:{port}")  # type: ignore[call-overload]

        run = WORKLOADS[workload](client)
        started = time.process_time()
        run()
        return time.process_time() - started
    finally:
        server.stop()


def sample(workload: str, speedup: str) -> float:
    out = subprocess.run(  # noqa: S603 (this file, by the interpreter running it)
        [sys.executable, __file__, "--sample", workload, speedup],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ).stdout
    return float(out.strip().splitlines()[-1])


def measure(name: str, runs: int) -> tuple[float, float]:
    """Median seconds of the workload without any speed-up and with `name` alone."""
    without: list[float] = []
    with_it: list[float] = []
    for _ in range(runs):
        without.append(sample(name, NONE))
        with_it.append(sample(name, name))
    return statistics.median(without), statistics.median(with_it)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument(
        "--sample", nargs=2, metavar=("WORKLOAD", "SPEEDUP"), help=argparse.SUPPRESS
    )
    arguments = parser.parse_args()
    if arguments.sample:
        print(f"{one_sample(*arguments.sample):.6f}")
        return
    print(f"| speed-up | without, CPU s | with, CPU s | ratio | (median of {arguments.runs}) |")
    print("| --- | --- | --- | --- | --- |")
    for name in arguments.only:
        without, with_it = measure(name, arguments.runs)
        print(
            f"| {name} | {without:.3f} | {with_it:.3f} | {without / with_it:.2f}x | |", flush=True
        )


if __name__ == "__main__":
    main()
