"""The local stack's lean HTTP front for moto (filejobs_dev/local/front.py): moto's own answers to
the requests the function hosts make, with less of the server's work around each.

Each server runs in a process of its own (tests/fresh_process.py): moto's backends are module
state, and each side must start from none.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from filejobs_cli.local_stack_file import LOCAL_CREDENTIALS
from filejobs_dev.local.stack import free_port
from tests.fresh_process import in_fresh_process

# Response headers whose values differ between two servers or two runs.
_VOLATILE_HEADERS = {
    "date", "server", "last-modified", "x-amzn-requestid", "x-amz-request-id", "x-amz-id-2",
    "x-amz-crc32",  # over a body that holds times
}  # fmt: skip
_VOLATILE_KEYS = {
    "CreationDateTime", "TableArn", "TableId", "LatestStreamArn", "LatestStreamLabel",
    "StreamArn", "LastModified", "ETag", "SizeBytes", "TableSizeBytes", "eventID",
    "MessageId", "ReceiptHandle", "SentTimestamp", "ApproximateFirstReceiveTimestamp",
}  # fmt: skip


_VOLATILE_XML = re.compile(r"<(LastModified|RequestId|HostId)>[^<]*</\1>")


def _serve(front: bool, port: int, *, cross_origin: bool = False) -> Callable[[], None]:
    """moto's app on loopback, behind the front or behind moto server's own; its stop. Both
    refuse cross-origin requests as the local stack's do, unless `cross_origin` (moto as
    released)."""
    if front:
        from filejobs_dev.local.front import moto_front  # noqa: PLC0415

        server = moto_front("127.0.0.1", port)
        return server.stop
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    from filejobs_dev.local.front import refuse_cross_origin_requests  # noqa: PLC0415

    if not cross_origin:
        refuse_cross_origin_requests()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    return moto.stop


def _steady(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in _VOLATILE_KEYS}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def answers_to_the_hosts_requests(*, front: bool, port: int) -> list[Any]:
    """What the hosts ask of S3, SQS and DynamoDB, and what comes back: status, headers and
    body of each raw response, as the clients received them."""
    stop = _serve(front, port)
    received: list[Any] = []

    def record(http_response: Any, **_: Any) -> None:
        headers = {
            name.lower(): value
            for name, value in http_response.headers.items()
            if name.lower() not in _VOLATILE_HEADERS
        }
        body = http_response.content
        try:
            loaded = json.loads(body) if body else ""
            parsed: Any = _steady(loaded)
            if parsed != loaded:  # a time's digits (1.5 or 1.25) change the body's length
                headers.pop("content-length", None)
        except ValueError:
            parsed = _VOLATILE_XML.sub("", body.decode(errors="replace"))
        received.append([http_response.status_code, headers, parsed])

    session = boto3.Session(
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )

    def client(service: str) -> Any:
        made = session.client(service, endpoint_url=f"http://127.0.0.1:{port}")  # type: ignore[call-overload]
        made.meta.events.register("after-call.*.*", record)
        return made

    try:
        s3, sqs, dynamodb = client("s3"), client("sqs"), client("dynamodb")
        s3.create_bucket(Bucket="uploads")
        s3.put_object(
            Bucket="uploads",
            Key="uploads/acme/a photo (1).jpg",  # spaces and brackets: quoted in the path
            Body=b"\xff\xd8\xff" + bytes(range(256)) * 40,
            Metadata={"taken_by": "ann", "camera-model": "x100"},  # an underscore kept
            ContentType="image/jpeg",
        )
        s3.head_object(Bucket="uploads", Key="uploads/acme/a photo (1).jpg")
        s3.get_object(Bucket="uploads", Key="uploads/acme/a photo (1).jpg", Range="bytes=0-15")
        s3.list_objects_v2(Bucket="uploads", Prefix="uploads/acme/")
        with contextlib.suppress(ClientError):
            s3.get_object_tagging(Bucket="uploads", Key="missing")  # an error answer
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"job_id": "j1"}))
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, AttributeNames=["All"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got["Messages"][0]["ReceiptHandle"])
        dynamodb.create_table(
            TableName="jobs",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName="jobs", Item={"id": {"S": "j1"}, "n": {"N": "1"}})
        dynamodb.update_item(
            TableName="jobs",
            Key={"id": {"S": "j1"}},
            UpdateExpression="SET n = n + :one",
            ConditionExpression="n = :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_NEW",
        )
        with contextlib.suppress(ClientError):
            dynamodb.put_item(
                TableName="jobs", Item={"id": {"S": "j1"}},
                ConditionExpression="attribute_not_exists(id)",
            )  # fmt: skip
        dynamodb.query(
            TableName="jobs",
            KeyConditionExpression="id = :id",
            ExpressionAttributeValues={":id": {"S": "j1"}},
        )
    finally:
        stop()
    return received


def _without_connection(answers: list[Any]) -> list[Any]:
    return [
        [status, {k: v for k, v in headers.items() if k != "connection"}, body]
        for status, headers, body in answers
    ]


@pytest.mark.slow
def test_the_front_answers_every_request_of_the_hosts_as_moto_server_does() -> None:
    # given the S3, SQS and DynamoDB requests the function hosts make, when moto's app answers
    # them behind the front and behind moto server's own werkzeug server
    port = free_port()  # the same for both: it is in the queue's URL
    behind_front = in_fresh_process(answers_to_the_hosts_requests, front=True, port=port)
    behind_werkzeug = in_fresh_process(answers_to_the_hosts_requests, front=False, port=port)
    # then each answer is the same: status, headers and body
    assert _without_connection(behind_front) == _without_connection(behind_werkzeug)
    # but for keeping the connection: werkzeug's server closes it after every response (its
    # comment: http.server cannot drain a request body), so each request of a host paid for a
    # new connection and a new server thread; the front keeps it, as AWS's endpoints do
    assert all(headers.get("connection") == "close" for _, headers, _ in behind_werkzeug)
    assert all("connection" not in headers for _, headers, _ in behind_front)
    statuses = [status for status, _, _ in behind_front]
    assert 404 in statuses  # the missing object's error, as moto gives it
    head = behind_front[2]
    assert head[1]["x-amz-meta-taken_by"] == "ann"  # the metadata name kept as sent
    assert head[1]["content-length"] == str(3 + 256 * 40)  # a HEAD's length, with no body


def server_work_per_request(*, front: bool, requests: int = 200) -> float:
    """Python calls the server made per DynamoDB request, outside moto's app."""
    port = free_port()
    calls = 0
    inside_app = threading.local()

    main = threading.main_thread()

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        server_side = threading.current_thread() is not main  # the client runs on main
        if event == "call" and server_side and not getattr(inside_app, "on", False):
            calls += 1

    from moto.moto_server import werkzeug_app  # noqa: PLC0415

    application = werkzeug_app.DomainDispatcherApplication.__call__

    def app_uncounted(self: Any, environ: Any, start_response: Any) -> Any:
        inside_app.on = True
        try:
            return list(application(self, environ, start_response))
        finally:
            inside_app.on = False

    werkzeug_app.DomainDispatcherApplication.__call__ = app_uncounted  # type: ignore[method-assign]
    stop = _serve(front, port)
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    try:
        dynamodb.list_tables()  # the connection and its thread, before counting
        threading.setprofile_all_threads(count)
        for _ in range(requests):
            dynamodb.list_tables()
        threading.setprofile_all_threads(None)
    finally:
        stop()
    return calls / requests


def test_the_front_does_a_small_part_of_werkzeug_s_work_per_request() -> None:
    # given the same requests on one kept-alive connection
    front = in_fresh_process(server_work_per_request, front=True)
    werkzeug = in_fresh_process(server_work_per_request, front=False)
    # then the front makes under a third of the calls werkzeug's server makes around the app
    assert front < werkzeug / 3, (front, werkzeug)


def _raw(port: int, request: bytes, *, then: bytes = b"") -> bytes:
    """`request` sent on a socket of its own (and `then` once the server answers once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = connection.recv(65536)
        if then:
            connection.sendall(then)
            answer += b"|" + connection.recv(65536)
        return answer


def raw_requests() -> dict[str, bytes]:
    port = free_port()
    stop = _serve(True, port)
    target = b"DynamoDB_20120810.ListTables"
    headers = (
        b"Host: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"
        b"X-Amz-Target: " + target + b"\r\n"
        b"Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/"
        b"dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n"
    )
    try:
        return {
            "chunked": _raw(
                port,
                b"POST / HTTP/1.1\r\n" + headers
                + b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n1\r\n}\r\n0\r\n\r\n",
            ),
            "continue": _raw(
                port,
                b"POST / HTTP/1.1\r\n" + headers
                + b"Content-Length: 2\r\nExpect: 100-continue\r\n\r\n",
                then=b"{}",
            ),
            "garbage": _raw(port, b"HELLO\r\n\r\n"),
            "bad length": _raw(port, b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            "after them": _raw(
                port, b"POST / HTTP/1.1\r\n" + headers + b"Content-Length: 2\r\n\r\n{}"
            ),
        }  # fmt: skip
    finally:
        stop()


def test_the_front_reads_chunked_and_continued_bodies_and_refuses_garbage() -> None:
    answers = in_fresh_process(raw_requests)
    # a chunked body is read whole, and an expected 100 Continue is sent before the body
    assert answers["chunked"].startswith(b"HTTP/1.1 200 ")
    assert b'"TableNames": []' in answers["chunked"]
    assert answers["continue"].startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert b"HTTP/1.1 200 " in answers["continue"]
    # what is not HTTP is refused, and the server goes on serving
    assert answers["garbage"].startswith(b"HTTP/1.1 400 ")
    assert answers["bad length"].startswith(b"HTTP/1.1 400 ")
    assert answers["after them"].startswith(b"HTTP/1.1 200 ")


def test_a_response_leaves_in_one_piece() -> None:
    # headers and body in one write: a client never waits for the body on Nagle's algorithm
    from filejobs_dev.local.front import Front  # noqa: PLC0415

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello ", b"world"]

    writes: list[bytes] = []
    server = Front(app, "127.0.0.1", 0).start()
    original = socket.socket.sendall

    def recorded(self: socket.socket, data: Any, *args: Any) -> None:
        if self.getsockname()[1] == server.address[1]:
            writes.append(bytes(data))
        original(self, data, *args)

    socket.socket.sendall = recorded  # type: ignore[method-assign,assignment]
    try:
        answer = _raw(server.address[1], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        socket.socket.sendall = original  # type: ignore[method-assign]
        server.stop()
    assert answer.endswith(b"\r\n\r\nhello world")
    assert len(writes) == 1 and b"Content-Length: 11" in writes[0]


def cross_origin_answer(*, front: bool, released: bool = False) -> dict[str, str]:
    """The headers a page of another origin gets when it lists the buckets, and asks first."""
    port = free_port()
    stop = _serve(front, port, cross_origin=released)
    try:
        asked = urllib.request.Request(
            f"http://127.0.0.1:{port}/",
            method="OPTIONS",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
        )
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(asked, timeout=10).close()
        listing = urllib.request.Request(
            f"http://127.0.0.1:{port}/", headers={"Origin": "https://evil.example"}
        )
        with urllib.request.urlopen(listing, timeout=10) as answer:
            return {k.lower(): v for k, v in answer.headers.items()}
    finally:
        stop()


def test_no_web_page_may_read_the_emulator() -> None:
    # given moto server as released, which lets any origin read its answers
    released = in_fresh_process(cross_origin_answer, front=False, released=True)
    assert released.get("access-control-allow-origin") in {"*", "https://evil.example"}
    # when a page of another origin asks the local stack's emulator, behind the front or not
    for front in (True, False):
        answer = in_fresh_process(cross_origin_answer, front=front)
        # then no answer lets the browser hand it to the page
        assert not any(name.startswith("access-control-") for name in answer), answer
