"""Signed webhooks per tenant: the rules, without I/O.

- An **endpoint** is a tenant's URL and the event types it wants (`EVENT_TYPES`), with one or two
  active signing secrets (two while a rotation's overlap lasts).
- A **delivery** is one event sent to one endpoint: up to `MAX_ATTEMPTS` attempts, waits from
  `retry_delay` between them (about a day in all), each attempt logged.
- **Signing**: `Filejobs-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]`, each v1 the HMAC-SHA256
  of `"{t}.{body}"` under one active secret (`signature_header`; `verify` is the receiver's check).
- **Disabling**: a 410 Gone answer disables the endpoint at once; so does a failed attempt when
  no attempt has succeeded for `DISABLE_AFTER` (24 hours) of failures (`disable_reason`).
- **Addresses** (SSRF): `refused_address` says why an IP may not be delivered to; `check_url`
  checks a URL at registration; the HTTP adapter checks every resolved address again at connect
  time (adapters/webhook_http.py).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import random
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from urllib.parse import urlsplit

from filejobs.domain.outcome_events import DetailType

# The event types an endpoint may subscribe to: every outcome event of the stack's bus.
EVENT_TYPES: tuple[str, ...] = (
    DetailType.JOB_COMPLETED.value,
    DetailType.JOB_FAILED.value,
    DetailType.JOB_CANCELLED.value,
    DetailType.FILE_QUARANTINED.value,
    DetailType.UPLOAD_REJECTED.value,
    DetailType.FILE_PROCESSED.value,
    DetailType.FILE_DELETED.value,
)
# The notice published on the stack's own bus when an endpoint is disabled (never delivered).
WEBHOOK_DISABLED = "Webhook Disabled"

SIGNATURE_HEADER = "Filejobs-Signature"
EVENT_ID_HEADER = "Filejobs-Event-Id"
DELIVERY_ID_HEADER = "Filejobs-Delivery-Id"
SIGNATURE_TOLERANCE = timedelta(minutes=5)  # what a receiver should allow (docs' snippet)

MAX_ATTEMPTS = 12
# The wait after attempt n (1-based) is NOMINAL_DELAYS[n - 1], times a jitter in [0.75, 1.25]:
# 11 waits of 73,860 s nominal (20.5 h), between 15.4 h and 25.6 h with jitter.
NOMINAL_DELAYS: tuple[int, ...] = (60, 120, 240, 480, 960, 1920, 3840, 7680, 15360, 21600, 21600)
JITTER = (0.75, 1.25)
DISABLE_AFTER = timedelta(hours=24)
ROTATION_OVERLAP = timedelta(hours=24)
MAX_ROTATION_OVERLAP = timedelta(days=7)
DELIVERY_RETENTION = timedelta(days=30)
MAX_ENDPOINTS_PER_TENANT = 20
MAX_URL_LENGTH = 2048
MAX_ERROR_LENGTH = 200
MAX_DESCRIPTION_LENGTH = 200

_ENDPOINT_ID = re.compile(r"wh-([0-9a-f]{24})-([A-Za-z0-9][A-Za-z0-9_-]{0,62})")
_DELIVERY_ID = re.compile(r"dl-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{20}")
# IMDS on EC2 and its IPv6 form; link-local/ULA rules refuse them too, named for the reason.
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
LOCAL_RECEIVER = ipaddress.ip_address("127.0.0.1")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class EndpointStatus(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # not tried yet
    RETRYING = "retrying"  # tried, failed, another attempt due at next_attempt_at
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # attempts exhausted, 410 Gone, or the endpoint disabled


FINISHED = frozenset({DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED})


@dataclass(frozen=True)
class Secret:
    value: str
    created_at: datetime
    expires_at: datetime | None = None  # None: valid until a rotation sets an end

    def active(self, now: datetime) -> bool:
        return self.expires_at is None or now < self.expires_at


@dataclass(frozen=True)
class Endpoint:
    id: str
    tenant: str
    url: str
    event_types: frozenset[str]
    secrets: tuple[Secret, ...]  # newest first
    created_at: datetime
    updated_at: datetime
    created_by: str
    description: str = ""
    status: EndpointStatus = EndpointStatus.ENABLED
    failing_since: datetime | None = None  # the first failed attempt since the last success
    disabled_at: datetime | None = None
    disabled_reason: str | None = None
    version: int = 1  # every change writes version + 1, conditioned on version

    def active_secrets(self, now: datetime) -> tuple[Secret, ...]:
        return tuple(s for s in self.secrets if s.active(now))

    def wants(self, event_type: str) -> bool:
        return self.status is EndpointStatus.ENABLED and event_type in self.event_types


@dataclass(frozen=True)
class Attempt:
    number: int
    at: datetime
    status_code: int | None
    latency_ms: int
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class Delivery:
    id: str
    endpoint_id: str
    tenant: str
    event_id: str
    event_type: str
    body: str  # the exact bytes (UTF-8) signed and sent, the same at every attempt
    created_at: datetime
    updated_at: datetime
    status: DeliveryStatus = DeliveryStatus.PENDING
    next_attempt_at: datetime | None = None
    attempts: tuple[Attempt, ...] = field(default_factory=tuple)
    resend_of: str | None = None

    @property
    def attempt_count(self) -> int:
        return len(self.attempts)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


# --- ids ---------------------------------------------------------------------------------------


def new_endpoint_id(tenant: str) -> str:
    """`wh-<24 hex>-<tenant>`: the tenant is in the id, so any route finds it by the id alone."""
    return f"wh-{secrets.token_hex(12)}-{tenant}"


def tenant_of_endpoint(endpoint_id: str) -> str | None:
    match = _ENDPOINT_ID.fullmatch(endpoint_id)
    return None if match is None else match[2]


def is_delivery_id(text: str) -> bool:
    return _DELIVERY_ID.fullmatch(text) is not None


def delivery_id(endpoint_id: str, event_id: str, event_time: datetime) -> str:
    """The delivery of one event to one endpoint: the same id however often the event arrives
    (EventBridge and SQS deliver at least once), ordered by the event's time."""
    digest = hashlib.sha256(f"{endpoint_id}\n{event_id}".encode()).hexdigest()[:20]
    return f"dl-{_compact(event_time)}-{digest}"


def resend_id(now: datetime) -> str:
    return f"dl-{_compact(now)}-{secrets.token_hex(10)}"


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def _compact(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


# --- signing -----------------------------------------------------------------------------------


def sign(secret: str, timestamp: int, body: str) -> str:
    """HMAC-SHA256 of `"{timestamp}.{body}"` under `secret`, in hex."""
    message = f"{timestamp}.{body}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secrets_: Iterable[str], timestamp: int, body: str) -> str:
    """`t=<timestamp>,v1=<hex>` with one v1 per secret (newest first)."""
    return ",".join([f"t={timestamp}", *(f"v1={sign(s, timestamp, body)}" for s in secrets_)])


def verify(
    header: str,
    body: str,
    secret: str,
    now: datetime,
    tolerance: timedelta = SIGNATURE_TOLERANCE,
) -> bool:
    """The receiver's check (docs/snippets/verify_webhook.py does the same): some v1 matches the
    secret, in constant time, and the timestamp is within `tolerance` of now."""
    timestamp, signatures = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or abs(now.timestamp() - timestamp) > tolerance.total_seconds():
        return False
    expected = sign(secret, timestamp, body)
    return any(hmac.compare_digest(expected, s) for s in signatures)


def rotate(
    endpoint: Endpoint, secret: str, now: datetime, overlap: timedelta = ROTATION_OVERLAP
) -> Endpoint:
    """A new secret signs from now on; the newest of the old ones stays valid for `overlap`
    (or less, if it was to end sooner), every older one ends now: at most two are active."""
    kept: list[Secret] = []
    for old in endpoint.active_secrets(now)[:1]:
        end = now + overlap
        if old.expires_at is not None:
            end = min(end, old.expires_at)
        if end > now:
            kept.append(replace(old, expires_at=end))
    return replace(
        endpoint,
        secrets=(Secret(secret, now), *kept),
        updated_at=now,
        version=endpoint.version + 1,
    )


# --- retries and disabling ---------------------------------------------------------------------


def retry_delay(attempt: int, rng: random.Random | None = None) -> timedelta | None:
    """The wait after failed attempt `attempt` (1-based); None when it was the last."""
    if attempt < 1 or attempt >= MAX_ATTEMPTS:
        return None
    nominal = NOMINAL_DELAYS[attempt - 1]
    low, high = JITTER
    factor = (rng or random).uniform(low, high)
    return timedelta(seconds=round(nominal * factor))


def disable_reason(endpoint: Endpoint, attempt: Attempt) -> str | None:
    """Why a failed attempt disables its endpoint, or None."""
    if attempt.succeeded:
        return None
    if attempt.status_code == 410:
        return "the endpoint answered 410 Gone"
    since = endpoint.failing_since or attempt.at
    if attempt.at - since >= DISABLE_AFTER:
        hours = int(DISABLE_AFTER.total_seconds() // 3600)
        return f"every attempt failed for {hours} hours (since {since.isoformat()})"
    return None


def after_attempt(delivery: Delivery, attempt: Attempt, delay: timedelta | None) -> Delivery:
    """The delivery once `attempt` is recorded: succeeded; failed (no attempt left, or 410); or
    retrying at attempt.at + delay."""
    attempts = (*delivery.attempts, attempt)
    if attempt.succeeded:
        status, due = DeliveryStatus.SUCCEEDED, None
    elif attempt.status_code == 410 or delay is None:
        status, due = DeliveryStatus.FAILED, None
    else:
        status, due = DeliveryStatus.RETRYING, attempt.at + delay
    return replace(
        delivery, attempts=attempts, status=status, next_attempt_at=due, updated_at=attempt.at
    )


def short_error(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line[:MAX_ERROR_LENGTH]


# --- addresses (SSRF) --------------------------------------------------------------------------

type IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def refused_address(address: IPAddress, *, local_mode: bool = False) -> str | None:  # noqa: PLR0911
    """Why `address` may not be delivered to, or None. In local mode 127.0.0.1 alone is allowed
    besides public addresses (the local stack's receivers)."""
    if local_mode and address == LOCAL_RECEIVER:
        return None
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = refused_address(embedded)  # never the local exception through a mapping
            return None if reason is None else f"an IPv4-mapped or embedded {reason}"
        if address in ipaddress.ip_network("fc00::/7"):
            return "a unique local address"
        if address.is_site_local:
            return "a site-local address"
    for test, reason in (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (
            isinstance(address, ipaddress.IPv4Address)
            and address in ipaddress.ip_network("100.64.0.0/10"),
            "a carrier-grade NAT address",
        ),
        (address.is_private, "a private address"),
        (address.is_reserved, "a reserved address"),
        (not address.is_global, "not a public address"),
    ):
        if test:
            return reason
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d),
    NAT64 (64:ff9b::a.b.c.d), 6to4 and Teredo."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or (int(address) >> 32 == 0 and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def parse_ip(host: str) -> IPAddress | None:
    """`host` as an IP address, in every form a resolver takes as one: dotted quad, IPv6
    (bracketed or not), and the legacy inet_aton forms (2130706433, 0x7f.1, 0177.0.0.1, 127.1)."""
    text = host.strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    return _inet_aton(text)


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        value = _c_number(part)
        if value is None:
            return None
        numbers.append(value)
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (4 - len(leading)):
        return None
    value = 0
    for n in leading:
        value = value * 256 + n
    value = value * 256 ** (4 - len(leading)) + last
    return ipaddress.IPv4Address(value)


def _c_number(part: str) -> int | None:
    """A number as C's strtoul(..., 0) reads it: 0x hex, 0 octal, else decimal."""
    lowered = part.lower()
    try:
        if lowered.startswith("0x"):
            return int(lowered[2:] or "0", 16)
        if len(lowered) > 1 and lowered.startswith("0"):
            return int(lowered[1:], 8)
        return int(lowered, 10) if lowered.isdigit() else None
    except ValueError:
        return None


def check_url(url: str, *, local_mode: bool = False) -> str | None:  # noqa: PLR0911
    """Why `url` cannot be an endpoint, or None: https only (in local mode http://127.0.0.1 too),
    no credentials in it, no fragment, and a host that is no refused address nor localhost. A
    name is checked again, resolved, at every connection."""
    if len(url) > MAX_URL_LENGTH or not all(0x20 < ord(c) < 0x7F for c in url):
        return (
            f"url must be at most {MAX_URL_LENGTH} visible ASCII characters (an international "
            "name in its punycode form, other characters percent-encoded)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "url is not a URL"
    host = parts.hostname
    if not host:
        return "url names no host"
    if parts.username is not None or parts.password is not None:
        return "url must not carry credentials"
    if parts.fragment:
        return "url must not have a fragment"
    if port == 0:
        return "url's port must not be 0"
    address = parse_ip(host)
    if parts.scheme == "http" and local_mode and host == str(LOCAL_RECEIVER):
        return None
    if parts.scheme != "https":
        allowed = "https (or http://127.0.0.1 on the local stack)" if local_mode else "https"
        return f"url must be {allowed}"
    if address is not None:
        # Local mode's one exception is 127.0.0.1 written so, never another form of it.
        reason = refused_address(address, local_mode=local_mode and host == str(LOCAL_RECEIVER))
        return None if reason is None else f"url's host is {reason}"
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith((".localhost", ".internal", ".local")):
        return "url's host is a local name"
    if "." not in name:
        return "url's host must be a fully qualified name"
    return None


def first_allowed(
    addresses: Sequence[IPAddress], *, local_mode: bool
) -> tuple[IPAddress | None, str | None]:
    """The first resolved address that may be connected to; else None and why the first was
    refused."""
    reasons = []
    for address in addresses:
        reason = refused_address(address, local_mode=local_mode)
        if reason is None:
            return address, None
        reasons.append(f"{address} is {reason}")
    return None, "; ".join(reasons) or "the name resolved to no address"


# --- what is delivered ---------------------------------------------------------------------------


def payload(
    event_id: str, event_type: str, time: datetime, tenant: str, detail: object
) -> dict[str, object]:
    """The JSON body of a delivery (serialised once, stored, sent byte for byte each attempt)."""
    return {
        "id": event_id,
        "type": event_type,
        "created_at": time.astimezone(UTC).isoformat(),
        "tenant": tenant,
        "data": detail,
    }
