"""The local stack's HTTP front (filejobs_dev/local/front.py) against werkzeug's threaded server
(what moto server runs on, and a dependency of moto already), serving the same app: moto's, with
the local stack's fixes and speed-ups, as the DynamoDB emulator serves it.

Each sample starts the server in a process of its own on loopback, then a client process (8
threads, one boto3 client, as a host's pollers share theirs) sends a job-like mix of DynamoDB
calls: a PutItem, a conditional UpdateItem, a GetItem and a Query per job. Figures: requests
per second (wall) and the server's CPU milliseconds per request. Servers alternate sample by
sample; medians are compared.

    .venv/bin/python bench/front_servers.py [--runs 3] [--jobs 300]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

SERVERS = ("front", "werkzeug")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve(kind: str, port: int) -> None:
    """In this process: moto's app with the local stack's fixes, behind `kind`, until SIGTERM;
    prints the process's CPU seconds once it serves, and again when it stops."""
    from moto.moto_server.werkzeug_app import (  # noqa: PLC0415
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server  # noqa: PLC0415

    from filejobs_dev.local import moto_fixes  # noqa: PLC0415
    from filejobs_dev.local.front import Front  # noqa: PLC0415

    moto_fixes.apply()
    app = DomainDispatcherApplication(create_backend_app)
    server: Any
    if kind == "front":
        server = Front(app, "127.0.0.1", port)
    else:
        server = make_server(
            "127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler
        )
    signal.signal(signal.SIGTERM, lambda *_: server.shutdown())
    import threading  # noqa: PLC0415

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(f"{time.process_time():.6f}", flush=True)  # serving: its CPU so far
    thread.join()
    print(f"{time.process_time():.6f}", flush=True)


def load(port: int, jobs: int) -> float:
    """The job-like mix against the server; its requests per second."""
    import boto3  # noqa: PLC0415

    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 (moto server on loopback checks none)
    )
    dynamodb.create_table(
        TableName="jobs",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )

    def job(n: int) -> None:
        key = {"id": {"S": f"job{n}"}}
        dynamodb.put_item(TableName="jobs", Item={**key, "status": {"S": "pending"}})
        dynamodb.update_item(
            TableName="jobs",
            Key=key,
            UpdateExpression="SET #s = :running",
            ConditionExpression="#s = :pending",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":running": {"S": "running"}, ":pending": {"S": "pending"}},
        )
        dynamodb.get_item(TableName="jobs", Key=key)
        dynamodb.query(
            TableName="jobs",
            KeyConditionExpression="id = :id",
            ExpressionAttributeValues={":id": key["id"]},
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(job, range(jobs)))
    return 4 * jobs / (time.perf_counter() - started)


def sample(kind: str, jobs: int) -> tuple[float, float]:
    """(requests per second, server CPU ms per request) of one server process."""
    port = free_port()
    server = subprocess.Popen(  # noqa: S603 (this file, by the interpreter running it)
        [sys.executable, __file__, "--serve", kind, str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        cpu_before = float(server.stdout.readline())  # serving
        client = subprocess.run(  # noqa: S603 (this file, by the interpreter running it)
            [sys.executable, __file__, "--load", str(port), str(jobs)],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        rate = float(client.stdout.strip().splitlines()[-1])
    finally:
        os.kill(server.pid, signal.SIGTERM)
        out, _ = server.communicate(timeout=60)
    cpu = float(out.strip().splitlines()[-1]) - cpu_before
    return rate, 1000 * cpu / (4 * jobs + 1)  # the table's creation counted as one request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=2, type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve[0], int(arguments.serve[1]))
        return
    if arguments.load:
        print(f"{load(*arguments.load):.3f}")
        return
    samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in SERVERS}
    for _ in range(arguments.runs):
        for kind in SERVERS:
            samples[kind].append(sample(kind, arguments.jobs))
    print(f"| server | requests/s | server CPU ms/request | (median of {arguments.runs}) |")
    print("| --- | --- | --- | --- |")
    for kind in SERVERS:
        rate = statistics.median(s[0] for s in samples[kind])
        cpu = statistics.median(s[1] for s in samples[kind])
        print(f"| {kind} | {rate:.0f} | {cpu:.2f} | |")


if __name__ == "__main__":
    main()
