"""Signed webhooks end to end on moto: endpoints registered through the API, events published on
the bus and forwarded by the template's rule to the webhooks queue, the webhooks function fanning
them out and POSTing them to a real HTTP receiver on 127.0.0.1 (local mode), verified with the
manual's snippet (docs/snippets/verify_webhook.py, which docs/WEBHOOKS.md includes); a receiver
that fails then succeeds, one that times out, one that answers 410 (disabled, and a notice on the
bus); a resend; and the refusal of a name that resolves to a private address when not in local
mode."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

from filejobs import runtime
from filejobs.adapters.webhook_http import PinnedSender
from filejobs.domain.time import utcnow
from filejobs.ports import DeliveryTask
from functions.webhooks import app as webhooks_function
from tests.integration.test_api import ACME, GLOBEX, OPERATOR, TEMPLATE, Api, stack  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = ROOT / "docs" / "snippets" / "verify_webhook.py"


def docs_verifier() -> Callable[[str, bytes, str], bool]:
    """The signature check docs/WEBHOOKS.md shows a receiver (its snippet file), run as written."""
    assert '--8<-- "docs/snippets/verify_webhook.py"' in (ROOT / "docs" / "WEBHOOKS.md").read_text()
    scope: dict[str, Any] = {}
    exec(compile(SNIPPET.read_text(), str(SNIPPET), "exec"), scope)
    verify: Callable[[str, bytes, str], bool] = scope["verify_filejobs_signature"]
    return verify


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A receiver on 127.0.0.1: answers each POST with the next of `answers` (a status, or a
    number of seconds to stall), then 200."""

    answers: list[int | float] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            state.received.append(Received(dict(self.headers.items()), body))
            answer = state.answers.pop(0) if state.answers else 200
            if isinstance(answer, float):
                time.sleep(answer)
                answer = 200
            self.send_response(answer)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@dataclass
class Hooks:
    api: Api
    queue: str
    inbox: str
    bus: str

    def publish(self, detail_type: str, tenant: str = "acme") -> str:
        event_id = f"job:{uuid.uuid4()}:1:completed:x"
        detail = {"event_id": event_id, "tenant": tenant, "id": str(uuid.uuid4())}
        answer = boto3.client("events").put_events(
            Entries=[
                {
                    "EventBusName": self.bus,
                    "Source": "filejobs",
                    "DetailType": detail_type,
                    "Detail": json.dumps(detail),
                }
            ]
        )
        assert answer["FailedEntryCount"] == 0
        return event_id

    def drain(self) -> int:
        """Runs the webhooks function on every visible message until none is left."""
        sqs, handled = boto3.client("sqs"), 0
        while got := sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=5).get(
            "Messages", []
        ):
            records = [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": {},
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:webhooks",
                    "awsRegion": "us-east-1",
                }
                for m in got
            ]
            result = webhooks_function.handler({"Records": records}, _context())
            assert result["batchItemFailures"] == []
            for m in got:
                sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=m["ReceiptHandle"])
            handled += len(got)
        return handled

    def notices(self) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs")
        got = sqs.receive_message(QueueUrl=self.inbox, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in got.get("Messages", [])]

    def register(self, url: str, *types: str, who: dict[str, str] = ACME) -> dict[str, Any]:
        status, body = self.api.call(
            "POST",
            "/webhooks",
            who=who,
            body=json.dumps({"url": url, "event_types": list(types or ["Job Completed"])}),
        )
        assert status == 201, body
        made: dict[str, Any] = body
        return made

    def deliveries(self, endpoint_id: str) -> list[dict[str, Any]]:
        status, body = self.api.call("GET", f"/webhooks/{endpoint_id}/deliveries", who=ACME)
        assert status == 200, body
        found: list[dict[str, Any]] = body["deliveries"]
        return found


def _context() -> Any:
    from tests.integration.test_api import CONTEXT  # noqa: PLC0415

    return CONTEXT


@pytest.fixture
def hooks(stack: Api, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hooks]:  # noqa: F811
    suffix = uuid.uuid4().hex[:8]
    events, sqs = boto3.client("events"), boto3.client("sqs")
    bus = f"jobs-{suffix}"
    events.create_event_bus(Name=bus)
    queue = stack.queue_urls["WebhooksQueue"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    rule = TEMPLATE["Resources"]["WebhookEventsRule"]["Properties"]
    events.put_rule(
        Name="webhooks", EventBusName=bus, EventPattern=json.dumps(rule["EventPattern"])
    )
    events.put_targets(
        Rule="webhooks",
        EventBusName=bus,
        Targets=[{"Id": "webhooks", "Arn": queue_arn["Attributes"]["QueueArn"]}],
    )
    inbox = sqs.create_queue(QueueName=f"inbox-{suffix}")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])
    pattern = {"source": ["filejobs"], "detail-type": ["Webhook Disabled"]}
    events.put_rule(Name="notices", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(
        Rule="notices",
        EventBusName=bus,
        Targets=[{"Id": "inbox", "Arn": inbox_arn["Attributes"]["QueueArn"]}],
    )
    for name, value in {
        "EVENT_BUS_NAME": bus,
        "WEBHOOKS_QUEUE_URL": queue,
        "FILEJOBS_WEBHOOKS_LOCAL_MODE": "1",
        # the API and the webhooks function in one process: one seals, the other opens
        "WEBHOOK_SECRETS_USE": "seal,open",
    }.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    yield Hooks(stack, queue, inbox, bus)
    runtime.reset()


# --- a delivery --------------------------------------------------------------------------------


def test_an_event_reaches_the_receiver_signed_and_logged(hooks: Hooks, receiver: Receiver) -> None:
    endpoint = hooks.register(receiver.url, "Job Completed")
    secret = endpoint["secret"]
    assert secret.startswith("whsec_")
    event_id = hooks.publish("Job Completed")
    hooks.publish("Job Failed")  # not subscribed
    hooks.publish("Job Completed", tenant="globex")  # another tenant's
    assert hooks.drain() == 4  # three events, one delivery

    (got,) = receiver.received
    verify = docs_verifier()
    assert verify(got.headers["Filejobs-Signature"], got.body, secret)
    assert not verify(got.headers["Filejobs-Signature"], got.body + b" ", secret)
    assert not verify(got.headers["Filejobs-Signature"], got.body, "whsec_other")
    assert got.headers["Filejobs-Event-Id"] == event_id
    payload = json.loads(got.body)
    assert payload["type"] == "Job Completed" and payload["tenant"] == "acme"
    assert payload["data"]["event_id"] == event_id

    (delivery,) = hooks.deliveries(endpoint["id"])
    assert got.headers["Filejobs-Delivery-Id"] == delivery["id"]
    assert delivery["status"] == "succeeded" and delivery["attempt"] == 1
    assert delivery["response_code"] == 200 and delivery["latency_ms"] >= 0
    assert delivery["attempts"][0]["status_code"] == 200

    # The secret is shown once: never in a later answer.
    status, shown = hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=ACME)
    assert status == 200 and "secret" not in shown and secret not in json.dumps(shown)
    status, listed = hooks.api.call("GET", "/webhooks", who=ACME)
    assert [e["id"] for e in listed["webhooks"]] == [endpoint["id"]]
    assert secret not in json.dumps(listed)
    # Another tenant neither sees nor changes it.
    assert hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=GLOBEX)[0] == 404
    assert hooks.api.call("GET", f"/webhooks/{endpoint['id']}/deliveries", who=GLOBEX)[0] == 404
    assert hooks.api.call("DELETE", f"/webhooks/{endpoint['id']}", who=GLOBEX)[0] == 404
    assert hooks.api.call("GET", "/webhooks", who=GLOBEX)[1] == {"webhooks": []}
    # An operator names the tenant.
    assert hooks.api.call("GET", "/webhooks", who=OPERATOR)[0] == 422
    status, listed = hooks.api.call("GET", "/webhooks", who=OPERATOR, query={"tenant": "acme"})
    assert [e["id"] for e in listed["webhooks"]] == [endpoint["id"]]


def test_the_same_event_twice_is_delivered_once(hooks: Hooks, receiver: Receiver) -> None:
    endpoint = hooks.register(receiver.url)
    service = runtime.webhooks()
    from filejobs.services.webhooks import bus_event  # noqa: PLC0415

    raw = {
        "source": "filejobs",
        "detail-type": "Job Completed",
        "time": "2026-12-04T12:00:00Z",
        "detail": {"event_id": "e-1", "tenant": "acme"},
    }
    event = bus_event(raw)
    assert event is not None
    assert len(service.fan_out(event)) == 1
    hooks.drain()
    assert service.fan_out(event) == []  # delivered already: nothing new
    hooks.drain()
    assert len(receiver.received) == 1
    assert len(hooks.deliveries(endpoint["id"])) == 1


def test_rotation_signs_with_both_secrets_during_the_overlap(
    hooks: Hooks, receiver: Receiver
) -> None:
    endpoint = hooks.register(receiver.url)
    status, rotated = hooks.api.call(
        "POST", f"/webhooks/{endpoint['id']}/rotate", who=ACME, body='{"overlap_hours": 1}'
    )
    assert status == 200 and rotated["secret"] != endpoint["secret"]
    assert len(rotated["secrets"]) == 2
    hooks.publish("Job Completed")
    hooks.drain()
    (got,) = receiver.received
    header = got.headers["Filejobs-Signature"]
    assert header.count("v1=") == 2
    verify = docs_verifier()
    assert verify(header, got.body, rotated["secret"])
    assert verify(header, got.body, endpoint["secret"])


# --- failures ----------------------------------------------------------------------------------


def test_a_failing_receiver_is_retried_with_backoff_until_it_succeeds(
    hooks: Hooks, receiver: Receiver
) -> None:
    receiver.answers = [503]
    endpoint = hooks.register(receiver.url)
    hooks.publish("Job Completed")
    hooks.drain()
    (delivery,) = hooks.deliveries(endpoint["id"])
    assert delivery["status"] == "retrying" and delivery["response_code"] == 503
    assert delivery["error"] == "HTTP 503"
    due = datetime.fromisoformat(delivery["next_attempt_at"])
    wait = due - datetime.fromisoformat(delivery["attempts"][0]["at"])
    assert timedelta(seconds=45) <= wait <= timedelta(seconds=75)
    failing = hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=ACME)[1]
    assert failing["failing_since"] is not None
    # The next attempt's message is delayed: nothing to run now.
    assert hooks.drain() == 0

    # Early, the message is sent again for the time left; when due, attempt 2 succeeds.
    task = DeliveryTask(endpoint["id"], delivery["id"])
    assert runtime.webhooks().deliver(task) == "not due yet: sent again"
    later = runtime.webhooks(clock=lambda: due + timedelta(seconds=1))
    assert later.deliver(task) == "attempt 2: succeeded"
    (delivery,) = hooks.deliveries(endpoint["id"])
    assert delivery["status"] == "succeeded" and delivery["attempt"] == 2
    assert [a["status_code"] for a in delivery["attempts"]] == [503, 200]
    assert len(receiver.received) == 2
    assert receiver.received[0].body == receiver.received[1].body
    healthy = hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=ACME)[1]
    assert healthy["failing_since"] is None and healthy["status"] == "enabled"


def test_a_receiver_that_stalls_times_out(hooks: Hooks, receiver: Receiver) -> None:
    receiver.answers = [3.0]
    endpoint = hooks.register(receiver.url)
    hooks.publish("Job Completed")
    quick = PinnedSender(local_mode=True, total_timeout=1.0)
    service = runtime.webhooks(sender=quick)
    sqs = boto3.client("sqs")
    (fan_out,) = sqs.receive_message(QueueUrl=hooks.queue)["Messages"]
    sqs.delete_message(QueueUrl=hooks.queue, ReceiptHandle=fan_out["ReceiptHandle"])
    from filejobs.services.webhooks import bus_event  # noqa: PLC0415

    event = bus_event(json.loads(fan_out["Body"]))
    assert event is not None
    (made,) = service.fan_out(event)
    started = time.monotonic()
    outcome = service.deliver(DeliveryTask(endpoint["id"], made.id))
    assert time.monotonic() - started < 2.5
    assert outcome == "attempt 1: retrying"
    (delivery,) = hooks.deliveries(endpoint["id"])
    assert delivery["error"] == "timed out" and delivery["response_code"] is None
    assert 900 <= delivery["latency_ms"] < 2500


def test_410_disables_the_endpoint_and_announces_it(hooks: Hooks, receiver: Receiver) -> None:
    receiver.answers = [410]
    endpoint = hooks.register(receiver.url)
    hooks.publish("Job Completed")
    hooks.drain()
    (delivery,) = hooks.deliveries(endpoint["id"])
    assert delivery["status"] == "failed" and delivery["response_code"] == 410
    shown = hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=ACME)[1]
    assert shown["status"] == "disabled" and "410" in shown["disabled_reason"]
    (notice,) = hooks.notices()
    assert notice["detail-type"] == "Webhook Disabled"
    assert notice["detail"]["endpoint_id"] == endpoint["id"]
    assert notice["detail"]["tenant"] == "acme"

    # Nothing more is delivered to it, and it cannot be resent to until enabled.
    hooks.publish("Job Completed")
    hooks.drain()
    assert len(receiver.received) == 1
    resend = f"/webhooks/{endpoint['id']}/deliveries/{delivery['id']}/resend"
    assert hooks.api.call("POST", resend, who=ACME)[0] == 409
    status, enabled = hooks.api.call("POST", f"/webhooks/{endpoint['id']}/enable", who=ACME)
    assert status == 200 and enabled["status"] == "enabled"
    assert hooks.api.call("POST", resend, who=ACME)[0] == 202
    hooks.drain()
    assert len(receiver.received) == 2


def test_an_endpoint_failing_for_a_day_is_disabled(hooks: Hooks, receiver: Receiver) -> None:
    receiver.answers = [500, 500]
    endpoint = hooks.register(receiver.url)
    hooks.publish("Job Completed")
    hooks.drain()
    (delivery,) = hooks.deliveries(endpoint["id"])
    day_later = utcnow() + timedelta(hours=24, minutes=1)
    outcome = runtime.webhooks(clock=lambda: day_later).deliver(
        DeliveryTask(endpoint["id"], delivery["id"])
    )
    assert outcome == "attempt 2: failed"
    shown = hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=ACME)[1]
    assert shown["status"] == "disabled" and "24 hours" in shown["disabled_reason"]
    assert [n["detail-type"] for n in hooks.notices()] == ["Webhook Disabled"]


# --- resend ------------------------------------------------------------------------------------


def test_a_delivery_is_resent_by_hand(hooks: Hooks, receiver: Receiver) -> None:
    endpoint = hooks.register(receiver.url)
    hooks.publish("Job Completed")
    hooks.drain()
    (first,) = hooks.deliveries(endpoint["id"])
    status, again = hooks.api.call(
        "POST", f"/webhooks/{endpoint['id']}/deliveries/{first['id']}/resend", who=ACME
    )
    assert status == 202 and again["resend_of"] == first["id"] and again["status"] == "pending"
    hooks.drain()
    one, two = receiver.received
    assert one.body == two.body
    assert one.headers["Filejobs-Event-Id"] == two.headers["Filejobs-Event-Id"]
    assert two.headers["Filejobs-Delivery-Id"] == again["id"] != first["id"]
    status, shown = hooks.api.call(
        "GET", f"/webhooks/{endpoint['id']}/deliveries/{again['id']}", who=ACME
    )
    assert status == 200 and shown["status"] == "succeeded" and shown["body"] == one.body.decode()
    other = f"/webhooks/{endpoint['id']}/deliveries/{first['id']}/resend"
    assert hooks.api.call("POST", other, who=GLOBEX)[0] == 404


def test_a_removed_endpoint_gets_nothing(hooks: Hooks, receiver: Receiver) -> None:
    endpoint = hooks.register(receiver.url)
    assert hooks.api.raw("DELETE", f"/webhooks/{endpoint['id']}", who=ACME)["statusCode"] == 204
    hooks.publish("Job Completed")
    hooks.drain()
    assert receiver.received == []
    assert hooks.api.call("GET", f"/webhooks/{endpoint['id']}", who=ACME)[0] == 404


# --- what may be called ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.2/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::ffff:10.0.0.1]/hook",
        "https://2130706433/hook",
        "http://10.0.0.1/hook",
        "http://localhost:8080/hook",
        "http://hooks.example.com/hook",
    ],
)
def test_registration_refuses_private_urls_even_in_local_mode(hooks: Hooks, url: str) -> None:
    status, body = hooks.api.call(
        "POST", "/webhooks", who=ACME, body=json.dumps({"url": url, "event_types": ["Job Failed"]})
    )
    assert status == 422, body


def test_a_name_resolving_to_a_private_address_is_refused_at_connect_time(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The resolver is patched, not the check: the name now points at the receiver (loopback).
    real = socket.getaddrinfo

    def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if host == "hooks.example.com":
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = f"https://hooks.example.com:{receiver.port}/hook"
    answer = PinnedSender(local_mode=False).post(url, b"{}", {})
    assert answer.status_code is None
    assert answer.error is not None and "refused" in answer.error and "loopback" in answer.error
    # Local mode allows 127.0.0.1 written as such, never a name that resolves to it over https
    # to a private address other than 127.0.0.1.
    private = PinnedSender(
        local_mode=True, resolver=lambda host, port: [ipaddress.ip_address("10.1.2.3")]
    ).post("https://hooks.example.com/hook", b"{}", {})
    assert private.error is not None and "private" in private.error
    metadata = PinnedSender(
        local_mode=False,
        resolver=lambda host, port: [ipaddress.ip_address("::ffff:169.254.169.254")],
    ).post("https://hooks.example.com/hook", b"{}", {})
    assert metadata.error is not None and "metadata" in metadata.error
    assert receiver.received == []


def test_redirects_are_not_followed(hooks: Hooks, receiver: Receiver) -> None:
    receiver.answers = [302]
    answer = PinnedSender(local_mode=True).post(receiver.url, b"{}", {})
    assert answer.status_code == 302 and answer.error is not None and "redirect" in answer.error
    assert len(receiver.received) == 1


def test_event_time_is_kept_in_the_payload() -> None:
    from filejobs.services.webhooks import bus_event  # noqa: PLC0415

    event = bus_event(
        {
            "source": "filejobs",
            "detail-type": "File Processed",
            "time": "2026-12-04T12:00:00Z",
            "detail": {"event_id": "e", "tenant": "acme"},
        }
    )
    assert event is not None and event.time == datetime(2026, 12, 4, 12, tzinfo=UTC)
    assert bus_event({"detail-type": "Webhook Disabled", "detail": {"tenant": "acme"}}) is None


def test_the_sample_event_file_fans_out_to_the_tenants_endpoint(
    hooks: Hooks, receiver: Receiver
) -> None:
    endpoint = hooks.register(receiver.url, "Job Completed")
    sample = json.loads((ROOT / "events" / "webhooks_bus_event.json").read_text())
    assert webhooks_function.handler(sample, _context())["batchItemFailures"] == []
    hooks.drain()
    (delivery,) = hooks.deliveries(endpoint["id"])
    assert delivery["status"] == "succeeded"
    assert json.loads(receiver.received[0].body)["data"]["tenant"] == "acme"


@pytest.mark.parametrize(
    "body",
    [
        "[]",
        "{",
        '{"url": "https://hooks.example.com/in"}',
        '{"url": "https://hooks.example.com/in", "event_types": []}',
        '{"url": "https://hooks.example.com/in", "event_types": ["Job Done"]}',
        '{"url": "https://hooks.example.com/in", "event_types": ["Job Failed", "Job Failed"]}',
        '{"url": "https://hooks.example.com/in", "event_types": ["Job Failed"], "x": 1}',
        '{"url": "https://h\\ud800.example.com/", "event_types": ["Job Failed"]}',
        '{"url": "https://hooks.example.com/", "event_types": ["Job Failed"], '
        '"description": "\\ud800"}',
        '{"url": "https://hooks.example.com/", "event_types": ["Job Failed"], "tenant": "a b"}',
    ],
)
def test_a_malformed_registration_is_refused_before_any_write(hooks: Hooks, body: str) -> None:
    status, answer = hooks.api.call("POST", "/webhooks", who=ACME, body=body)
    assert status in {400, 422}, answer
    assert hooks.api.call("GET", "/webhooks", who=ACME)[1] == {"webhooks": []}


@pytest.mark.parametrize("body", ['{"overlap_hours": 169}', '{"overlap_hours": "1"}', "Infinity"])
def test_a_rotation_out_of_range_is_refused(hooks: Hooks, body: str) -> None:
    endpoint = hooks.register("https://hooks.example.com/in")
    status, _ = hooks.api.call("POST", f"/webhooks/{endpoint['id']}/rotate", who=ACME, body=body)
    assert status in {400, 422}


def test_tls_goes_to_the_checked_address_with_the_names_sni_host_and_certificate(
    tmp_path: Path,
) -> None:
    # given an HTTPS receiver on 127.0.0.1 whose certificate names hooks.example.com, and a
    # resolver that answers that name with 127.0.0.1 (local mode allows it)
    import shutil  # noqa: PLC0415
    import ssl  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make the receiver's certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=hooks.example.com",
         "-addext", "subjectAltName=DNS:hooks.example.com"],
        check=True, capture_output=True,
    )  # fmt: skip
    seen: dict[str, Any] = {}
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)

    def sni(_: Any, name: str | None, __: Any) -> None:
        seen["sni"] = name

    server_tls.sni_callback = sni

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen["host"] = self.headers.get("Host")
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = server_tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    loopback = [ipaddress.ip_address("127.0.0.1")]
    try:
        trusting = ssl.create_default_context(cafile=str(cert))
        sender = PinnedSender(local_mode=True, resolver=lambda h, p: loopback, tls=trusting)
        # when a delivery goes to the name
        answer = sender.post(f"https://hooks.example.com:{port}/in", b"{}", {})
        # then it reached the checked address, spoke TLS for the name and sent it as Host
        assert answer.status_code == 204, answer
        assert seen == {"sni": "hooks.example.com", "host": f"hooks.example.com:{port}"}
        # and a certificate that does not name the host is refused
        wrong = PinnedSender(local_mode=True, resolver=lambda h, p: loopback, tls=trusting)
        refused = wrong.post(f"https://other.example.com:{port}/in", b"{}", {})
        assert refused.status_code is None and refused.error is not None
        assert "TLS" in refused.error
    finally:
        server.shutdown()
        server.server_close()
