"""The tenants' slots on DynamoDB (data/tenant_slots.py), in TenantSlotsTable as template.yaml
defines it: each take is one conditional write, so a tenant never holds more than its cap of
live slots, however many workers race for the last one; lapsed slots are cleared; a slot given
back is free again."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from mypy_boto3_dynamodb import DynamoDBClient

from filejobs.data.tenant_slots import DynamoTenantSlots, slots_key
from filejobs.domain.job import JobType
from filejobs_dev.infra.template import create_tables

SCAN, PREVIEW = JobType.VIRUS_SCAN, JobType.DOCUMENT_PREVIEW
NOW = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
UNTIL = NOW + timedelta(minutes=5)


@pytest.fixture
def client(aws: None) -> DynamoDBClient:
    dynamodb = boto3.client("dynamodb")
    create_tables(dynamodb, {"TenantSlotsTable": "slots"})
    return dynamodb


@pytest.fixture
def slots(client: DynamoDBClient) -> DynamoTenantSlots:
    return DynamoTenantSlots(client, "slots")


def take(slots: DynamoTenantSlots, job: str, *, tenant: str = "acme", cap: int = 2) -> bool:
    return slots.take(tenant, SCAN, job, cap=cap, until=UNTIL, now=NOW)


def holders(client: DynamoDBClient, tenant: str = "acme", job_type: JobType = SCAN) -> set[str]:
    item = client.get_item(TableName="slots", Key={"slots": {"S": slots_key(tenant, job_type)}})
    return set(item.get("Item", {}).get("holders", {}).get("M", {}))


def test_a_tenant_takes_slots_up_to_its_cap_and_no_more(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    assert take(slots, "job-1")  # the pair's first slot makes its item
    assert take(slots, "job-2")
    assert not take(slots, "job-3")
    assert holders(client) == {"job-1", "job-2"}


def test_a_job_holding_a_slot_takes_it_again_without_a_second_one(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    assert take(slots, "job-1")
    assert take(slots, "job-2")
    assert take(slots, "job-1")  # its message delivered twice
    assert holders(client) == {"job-1", "job-2"}


def test_tenants_and_job_types_have_slots_of_their_own(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    assert take(slots, "job-1", cap=1)
    assert take(slots, "job-2", tenant="globex", cap=1)
    assert slots.take("acme", PREVIEW, "job-3", cap=1, until=UNTIL, now=NOW)
    assert not take(slots, "job-4", cap=1)


def test_a_slot_given_back_is_free_for_the_next_job(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    assert take(slots, "job-1", cap=1)
    slots.give_back("acme", SCAN, "job-1")
    slots.give_back("acme", SCAN, "job-1")  # twice: nothing to remove, no error
    slots.give_back("acme", SCAN, "never-held")
    assert take(slots, "job-2", cap=1)
    assert holders(client) == {"job-2"}


def test_giving_back_a_slot_of_a_pair_never_seen_makes_no_item(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    slots.give_back("initech", SCAN, "job-1")
    assert client.scan(TableName="slots")["Items"] == []


def test_lapsed_slots_are_cleared_when_the_cap_is_reached(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    # given two slots taken by invocations that crashed, lapsing at UNTIL
    assert take(slots, "crashed-1")
    assert take(slots, "crashed-2")
    # when a job asks after they lapsed, then it gets a slot and the lapsed ones are gone
    later = UNTIL + timedelta(seconds=1)
    assert slots.take("acme", SCAN, "job-3", cap=2, until=later + timedelta(minutes=5), now=later)
    assert holders(client) == {"job-3"}


def test_the_item_expires_a_day_after_its_latest_slot(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    assert take(slots, "job-1")
    item = client.get_item(TableName="slots", Key={"slots": {"S": slots_key("acme", SCAN)}})
    expires = int(item["Item"]["expires_at"]["N"])
    assert expires == int((UNTIL + timedelta(days=1)).timestamp())


def test_racing_workers_never_hold_more_slots_than_the_cap(
    slots: DynamoTenantSlots, client: DynamoDBClient
) -> None:
    # given 3 slots and 24 workers asking at once for one each (the first take makes the item)
    won: list[str] = []
    start = threading.Barrier(24)

    def ask(n: int) -> None:
        start.wait()
        if take(slots, f"job-{n}", cap=3):
            won.append(f"job-{n}")

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then exactly 3 won, and they are the holders
    assert len(won) == 3
    assert holders(client) == set(won)
