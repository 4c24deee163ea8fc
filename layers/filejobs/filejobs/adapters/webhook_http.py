"""Webhook deliveries over HTTP(S), to checked addresses only; the webhooks queue; the notice of a
disabled endpoint on the stack's bus.

`PinnedSender.post` resolves the URL's host itself, checks every address it got
(domain/webhooks.refused_address: no private, loopback, link-local, CGNAT, multicast,
unspecified, ULA, site-local or metadata address, nor an IPv4-mapped form of one), connects to the
first allowed address and speaks TLS to it with the URL's host name as SNI and for the
certificate check, and HTTP with that name as Host. The address checked is the address connected
to, so a name that resolves elsewhere a moment later (DNS rebinding) changes nothing. No redirect
is followed (a 3xx is a failed attempt), the connection has `connect_timeout` seconds, the whole
attempt `total_timeout` (a timer closes the socket then), and at most `max_body` bytes of the
answer are read.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from filejobs.domain.outcome_events import SOURCE
from filejobs.domain.webhooks import (
    WEBHOOK_DISABLED,
    Endpoint,
    IPAddress,
    check_url,
    first_allowed,
    short_error,
    tenant_of_endpoint,
)
from filejobs.ports import DeliveryTask, WebhookAnswer

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sqs import SQSClient

type Resolver = Callable[[str, int], list[IPAddress]]

MAX_SQS_DELAY = timedelta(seconds=900)
USER_AGENT = "filejobs-webhooks/1"
# Not a tenant name (domain/keys.py takes no `#`): never one tenant's group.
UNKNOWN_TENANT_GROUP = "#unknown"


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (the system resolver), in its order."""
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


class RefusedAddressError(Exception):
    """The URL or what its host resolved to may not be delivered to."""


class PinnedSender:
    def __init__(
        self,
        *,
        local_mode: bool = False,
        resolver: Resolver = resolve,
        connect_timeout: float = 3.0,
        total_timeout: float = 10.0,
        max_body: int = 16 * 1024,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._local = local_mode
        self._resolve = resolver
        self._connect_timeout, self._total_timeout = connect_timeout, total_timeout
        self._max_body = max_body
        self._tls = tls or ssl.create_default_context()

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> WebhookAnswer:
        started = time.monotonic()

        def answer(status: int | None, error: str | None) -> WebhookAnswer:
            latency = round((time.monotonic() - started) * 1000)
            return WebhookAnswer(status, latency, None if error is None else short_error(error))

        try:
            status, error = self._post(url, body, headers, started)
        except RefusedAddressError as refused:
            return answer(None, f"refused: {refused}")
        except TimeoutError:
            return answer(None, "timed out")
        except ssl.SSLError as failed:
            return answer(None, f"TLS: {failed}")
        except (OSError, http.client.HTTPException) as failed:
            if time.monotonic() - started >= self._total_timeout:
                return answer(None, "timed out")  # the timer closed the socket
            return answer(None, f"{type(failed).__name__}: {failed}")
        return answer(status, error)

    def _post(
        self, url: str, body: bytes, headers: dict[str, str], started: float
    ) -> tuple[int, str | None]:
        problem = check_url(url, local_mode=self._local)
        if problem is not None:
            raise RefusedAddressError(problem)
        parts = urlsplit(url)
        host = parts.hostname or ""
        secure = parts.scheme == "https"
        port = parts.port or (443 if secure else 80)
        address, why = first_allowed(self._resolve(host, port), local_mode=self._local)
        if address is None:
            raise RefusedAddressError(f"{host} resolved to no allowed address ({why})")
        raw = socket.create_connection((str(address), port), timeout=self._connect_timeout)
        # The whole attempt is bounded: whatever is in progress then fails on a closed socket.
        remaining = max(0.1, self._total_timeout - (time.monotonic() - started))
        held = [raw]  # wrapping in TLS detaches `raw`: the timer shuts what is held then
        watchdog = threading.Timer(remaining, lambda: _shut(held[0]))
        watchdog.start()
        try:
            raw.settimeout(remaining)
            sock: socket.socket = (
                self._tls.wrap_socket(raw, server_hostname=host) if secure else raw
            )
            held[0] = sock
            connection = http.client.HTTPConnection(host, port, timeout=remaining)
            connection.sock = sock  # connected already: http.client does not resolve again
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request(
                "POST",
                path,
                body=body,
                headers={
                    **headers,
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                    "Connection": "close",
                },
            )
            response = connection.getresponse()
            response.read(self._max_body)  # capped: the rest is never read
            status = response.status
            connection.close()
        finally:
            watchdog.cancel()
            held[0].close()
            raw.close()
        if 200 <= status < 300:
            return status, None
        if 300 <= status < 400:
            return status, f"HTTP {status}: redirects are not followed"
        return status, f"HTTP {status}"


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class SqsWebhookQueue:
    """The webhooks queue: a delivery to attempt, as `{"webhook_delivery": {...}}`. A wait longer
    than SQS's 15-minute delay is made of several: the function finds the delivery not yet due
    and sends the message again for what is left (at most 15 minutes each time).

    Each message carries its endpoint's tenant as its `MessageGroupId`, which makes the standard
    queue an SQS fair queue: one tenant's burst of deliveries (or of retries to an endpoint that
    is down) does not hold up the others' (adapters/sqs.py does the same for jobs)."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client, self._url = client, queue_url

    def send(self, task: DeliveryTask, delay: timedelta) -> None:
        seconds = int(min(max(delay, timedelta()), MAX_SQS_DELAY).total_seconds())
        self._client.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps(
                {
                    "webhook_delivery": {
                        "endpoint_id": task.endpoint_id,
                        "delivery_id": task.delivery_id,
                    }
                }
            ),
            DelaySeconds=seconds,
            MessageGroupId=delivery_group(task),
        )


def delivery_group(task: DeliveryTask) -> str:
    """The fair queue's group of a delivery's message: the tenant its endpoint's id names (every
    endpoint id does, domain/webhooks.py); an id that names none shares one group."""
    return tenant_of_endpoint(task.endpoint_id) or UNKNOWN_TENANT_GROUP


def delivery_task_of(body: str) -> DeliveryTask | None:
    parsed = _json(body)
    task = parsed.get("webhook_delivery") if parsed else None
    if not isinstance(task, dict):
        return None
    endpoint_id, delivery_id = task.get("endpoint_id"), task.get("delivery_id")
    if not (isinstance(endpoint_id, str) and isinstance(delivery_id, str)):
        return None
    return DeliveryTask(endpoint_id, delivery_id)


def bus_event_of(body: str) -> dict[str, Any] | None:
    """An EventBridge event as its rule's SQS target receives it (source, detail-type, detail)."""
    parsed = _json(body)
    if not parsed or parsed.get("source") != SOURCE:
        return None
    if not isinstance(parsed.get("detail-type"), str) or not isinstance(parsed.get("detail"), dict):
        return None
    return parsed


def _json(body: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


class EventBridgeWebhookNotices:
    def __init__(self, client: EventBridgeClient, bus_name: str) -> None:
        self._client, self._bus = client, bus_name

    def disabled(self, endpoint: Endpoint, reason: str, at: datetime) -> None:
        detail = {
            "event_id": f"webhook:{endpoint.id}:disabled:{at.isoformat()}",
            "endpoint_id": endpoint.id,
            "tenant": endpoint.tenant,
            "url": endpoint.url,
            "reason": reason,
            "disabled_at": at.isoformat(),
        }
        response = self._client.put_events(
            Entries=[
                {
                    "EventBusName": self._bus,
                    "Source": SOURCE,
                    "DetailType": WEBHOOK_DISABLED,
                    "Detail": json.dumps(detail),
                    "Time": at,
                }
            ]
        )
        if response.get("FailedEntryCount", 0):
            raise RuntimeError(f"the notice of {endpoint.id} was refused by EventBridge")
