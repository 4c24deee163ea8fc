"""Signed webhooks' pure rules (domain/webhooks.py): signing, rotation, backoff, disabling and
which addresses a delivery may reach."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.domain import webhooks
from filejobs.domain.webhooks import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Secret,
    check_url,
    parse_ip,
    refused_address,
)

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def endpoint(**changes: object) -> Endpoint:
    base = Endpoint(
        id="wh-0123456789abcdef01234567-acme",
        tenant="acme",
        url="https://hooks.example.com/in",
        event_types=frozenset({"Job Completed"}),
        secrets=(Secret("whsec_old", NOW - timedelta(days=10)),),
        created_at=NOW - timedelta(days=10),
        updated_at=NOW - timedelta(days=10),
        created_by="api:tenant:acme",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


# --- signing -----------------------------------------------------------------------------------


def test_signature_known_answer() -> None:
    # printf '%s' '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
    assert webhooks.sign("whsec_test", 1700000000, '{"a":1}') == (
        "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
    )


def test_header_has_one_v1_per_secret_and_verifies_under_each() -> None:
    body = '{"id":"e1"}'
    header = webhooks.signature_header(["new", "old"], int(NOW.timestamp()), body)
    assert header.startswith(f"t={int(NOW.timestamp())},v1=")
    assert header.count("v1=") == 2
    assert webhooks.verify(header, body, "new", NOW)
    assert webhooks.verify(header, body, "old", NOW)
    assert not webhooks.verify(header, body, "other", NOW)
    assert not webhooks.verify(header, body + " ", "new", NOW)


def test_an_old_timestamp_is_refused() -> None:
    stamp = int((NOW - timedelta(minutes=6)).timestamp())
    header = webhooks.signature_header(["s"], stamp, "b")
    assert not webhooks.verify(header, "b", "s", NOW)
    assert webhooks.verify(header, "b", "s", NOW - timedelta(minutes=2))


def test_rotation_keeps_the_old_secret_for_the_overlap_only() -> None:
    rotated = webhooks.rotate(endpoint(), "whsec_new", NOW, timedelta(hours=24))
    assert [s.value for s in rotated.active_secrets(NOW)] == ["whsec_new", "whsec_old"]
    later = NOW + timedelta(hours=24, seconds=1)
    assert [s.value for s in rotated.active_secrets(later)] == ["whsec_new"]
    assert rotated.version == 2


def test_a_second_rotation_within_the_overlap_keeps_two_secrets() -> None:
    once = webhooks.rotate(endpoint(), "s2", NOW, timedelta(hours=24))
    twice = webhooks.rotate(once, "s3", NOW + timedelta(hours=1), timedelta(hours=24))
    assert [s.value for s in twice.active_secrets(NOW + timedelta(hours=1))] == ["s3", "s2"]


# --- retries -----------------------------------------------------------------------------------


def test_backoff_grows_and_lasts_about_a_day() -> None:
    rng = random.Random(7)
    low = sum(webhooks.NOMINAL_DELAYS) * webhooks.JITTER[0]
    high = sum(webhooks.NOMINAL_DELAYS) * webhooks.JITTER[1]
    total = timedelta()
    for attempt in range(1, webhooks.MAX_ATTEMPTS):
        delay = webhooks.retry_delay(attempt, rng)
        assert delay is not None
        nominal = webhooks.NOMINAL_DELAYS[attempt - 1]
        assert nominal * 0.75 - 1 <= delay.total_seconds() <= nominal * 1.25 + 1
        total += delay
    assert webhooks.retry_delay(webhooks.MAX_ATTEMPTS, rng) is None
    assert low / 3600 > 15 and high / 3600 < 26
    assert timedelta(hours=15) < total < timedelta(hours=26)
    assert list(webhooks.NOMINAL_DELAYS) == sorted(webhooks.NOMINAL_DELAYS)


def test_jitter_spreads_the_waits() -> None:
    rng = random.Random(1)
    assert len({webhooks.retry_delay(3, rng) for _ in range(20)}) > 10


def delivery() -> Delivery:
    return Delivery(
        id="dl-20261204T120000Z-0123456789abcdef0123",
        endpoint_id="wh-0123456789abcdef01234567-acme",
        tenant="acme",
        event_id="e1",
        event_type="Job Completed",
        body="{}",
        created_at=NOW,
        updated_at=NOW,
    )


def test_after_attempt_succeeds_retries_or_fails() -> None:
    ok = webhooks.after_attempt(delivery(), Attempt(1, NOW, 204, 12, None), None)
    assert ok.status is DeliveryStatus.SUCCEEDED
    again = webhooks.after_attempt(delivery(), Attempt(1, NOW, 500, 12, "500"), timedelta(60))
    assert again.status is DeliveryStatus.RETRYING and again.next_attempt_at == NOW + timedelta(60)
    last = webhooks.after_attempt(delivery(), Attempt(12, NOW, 500, 12, "500"), None)
    assert last.status is DeliveryStatus.FAILED
    gone = webhooks.after_attempt(delivery(), Attempt(1, NOW, 410, 12, "gone"), timedelta(60))
    assert gone.status is DeliveryStatus.FAILED


def test_410_disables_at_once() -> None:
    assert webhooks.disable_reason(endpoint(), Attempt(1, NOW, 410, 5, None)) is not None


def test_failing_for_a_day_disables() -> None:
    recent = endpoint(failing_since=NOW - timedelta(hours=23))
    old = endpoint(failing_since=NOW - timedelta(hours=24))
    failed = Attempt(3, NOW, 500, 5, "500")
    assert webhooks.disable_reason(recent, failed) is None
    assert webhooks.disable_reason(old, failed) is not None
    assert webhooks.disable_reason(old, Attempt(3, NOW, 200, 5, None)) is None
    assert webhooks.disable_reason(endpoint(), Attempt(1, NOW, None, 5, "timeout")) is None


# --- addresses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.9.9.9",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "169.254.1.1",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "fec0::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "::127.0.0.1",
        "64:ff9b::a00:1",
        "2002:7f00:1::",
    ],
)
def test_refused_addresses(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
def test_public_addresses_pass(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is None


def test_metadata_is_named() -> None:
    assert refused_address(ipaddress.ip_address("169.254.169.254")) == "a cloud metadata address"


def test_local_mode_allows_127_0_0_1_alone() -> None:
    assert refused_address(ipaddress.ip_address("127.0.0.1"), local_mode=True) is None
    for other in ("127.0.0.2", "10.0.0.1", "::1", "::ffff:127.0.0.1", "169.254.169.254"):
        assert refused_address(ipaddress.ip_address(other), local_mode=True) is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("[::1]", "::1"),
        ("hooks.example.com", None),
        ("1.2.3.4.5", None),
        ("256.1.1.1", None),
    ],
)
def test_every_numeric_form_is_an_address(text: str, expected: str | None) -> None:
    found = parse_ip(text)
    assert (None if found is None else str(found)) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/in",
        "https://127.0.0.1/in",
        "https://2130706433/in",
        "https://0x7f.1/in",
        "https://[::ffff:127.0.0.1]/in",
        "https://[fd00:ec2::254]/",
        "https://169.254.169.254/latest/meta-data",
        "https://localhost/in",
        "https://api.internal/in",
        "https://intranet/in",
        "https://user:pw@hooks.example.com/in",
        "https://hooks.example.com/in#x",
        "ftp://hooks.example.com/",
        "https:///nohost",
        "https://hooks.example.com/a b",
        "https://h\ud800.example.com/",
        "https://bücher.example/in",
    ],
)
def test_urls_refused_on_aws(url: str) -> None:
    assert check_url(url) is not None


def test_urls_allowed() -> None:
    assert check_url("https://hooks.example.com/in?x=1") is None
    assert check_url("https://93.184.215.14:8443/in") is None
    assert check_url("http://127.0.0.1:8080/in", local_mode=True) is None
    assert check_url("http://127.0.0.1:8080/in") is not None
    assert check_url("http://localhost:8080/in", local_mode=True) is not None
    assert check_url("https://2130706433/in", local_mode=True) is not None
    assert check_url("http://0x7f.1:8080/in", local_mode=True) is not None
    assert check_url("http://10.0.0.1/in", local_mode=True) is not None
    assert check_url("http://hooks.example.com/in", local_mode=True) is not None


def test_first_allowed_skips_refused_addresses() -> None:
    addresses = [ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("93.184.215.14")]
    assert webhooks.first_allowed(addresses, local_mode=False) == (addresses[1], None)
    none, why = webhooks.first_allowed(addresses[:1], local_mode=False)
    assert none is None and why is not None and "private" in why


def test_ids() -> None:
    endpoint_id = webhooks.new_endpoint_id("acme-eu_1")
    assert webhooks.tenant_of_endpoint(endpoint_id) == "acme-eu_1"
    assert webhooks.tenant_of_endpoint("wh-xyz-acme") is None
    first = webhooks.delivery_id(endpoint_id, "e1", NOW)
    assert first == webhooks.delivery_id(endpoint_id, "e1", NOW)
    assert first != webhooks.delivery_id(endpoint_id, "e2", NOW)
    assert webhooks.is_delivery_id(first) and webhooks.is_delivery_id(webhooks.resend_id(NOW))
