"""Specification: webhook signing secrets are sealed at rest (issue 45, item 5).

On moto (DynamoDB and KMS): OpsTable holds no usable secret, only ciphertexts bound to their
tenant and endpoint; the API's repository seals and never opens, the webhooks function's opens
(once per warm environment) and never seals; a secret an earlier version stored in plain text is
read as it is and sealed by the API's next write of its endpoint.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from filejobs.adapters.kms_secrets import KmsSecretCipher, forget_opened
from filejobs.data.webhook_repository import (
    SEALED_MARK,
    UnsealedSecretError,
    WebhookRepository,
)
from filejobs.domain import webhooks as rules
from filejobs.domain.time import utcnow
from filejobs_dev.infra.template import create_tables, load_template
from tests.iam import recording_calls

TEMPLATE = load_template()


@pytest.fixture
def ops(aws: None) -> Iterator[tuple[str, str]]:
    """OpsTable as the template makes it, and a KMS key."""
    table = f"ops-{uuid.uuid4().hex[:8]}"
    create_tables(boto3.client("dynamodb"), {"OpsTable": table}, TEMPLATE)
    key = boto3.client("kms").create_key()["KeyMetadata"]["Arn"]
    forget_opened()
    yield table, key
    forget_opened()


def api_store(table: str, key: str) -> WebhookRepository:
    cipher = KmsSecretCipher(boto3.client("kms"), key)
    return WebhookRepository(boto3.client("dynamodb"), table, sealer=cipher)


def webhooks_store(table: str, key: str) -> WebhookRepository:
    cipher = KmsSecretCipher(boto3.client("kms"), key)
    return WebhookRepository(boto3.client("dynamodb"), table, opener=cipher)


def an_endpoint(tenant: str = "acme") -> rules.Endpoint:
    now = utcnow()
    return rules.Endpoint(
        id=rules.new_endpoint_id(tenant),
        tenant=tenant,
        url="https://hooks.example.com/in",
        event_types=frozenset({"Job Completed"}),
        secrets=(rules.Secret(rules.new_secret(), now),),
        created_at=now,
        updated_at=now,
        created_by=f"api:tenant:{tenant}",
    )


def stored_secrets(table: str, endpoint: rules.Endpoint) -> list[dict[str, Any]]:
    item = boto3.client("dynamodb").get_item(
        TableName=table,
        Key={"pk": {"S": f"webhooks#{endpoint.tenant}"}, "sk": {"S": f"endpoint#{endpoint.id}"}},
    )["Item"]
    found: list[dict[str, Any]] = json.loads(item["secrets"]["S"])
    return found


def kms_operations(calls: list[Any]) -> list[str]:
    return [c.operation for c in calls if c.service == "kms"]


def test_the_table_holds_a_ciphertext_bound_to_its_endpoint_not_the_secret(
    ops: tuple[str, str],
) -> None:
    table, key = ops
    endpoint = an_endpoint()
    api_store(table, key).create_endpoint(endpoint)
    (stored,) = stored_secrets(table, endpoint)
    secret = endpoint.secrets[0].value
    assert "value" not in stored and secret not in json.dumps(stored)
    blob = base64.b64decode(stored["sealed"])
    kms = boto3.client("kms")
    context = {"tenant": "acme", "webhook": endpoint.id}
    opened = kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"]
    assert opened.decode() == secret
    # copied into another endpoint's item, or another tenant's, it opens to nothing
    for elsewhere in (
        {"tenant": "acme", "webhook": rules.new_endpoint_id("acme")},
        {"tenant": "globex", "webhook": endpoint.id},
    ):
        with pytest.raises(ClientError):
            kms.decrypt(CiphertextBlob=blob, EncryptionContext=elsewhere)


def test_the_webhooks_function_opens_to_sign_and_writes_back_without_sealing(
    ops: tuple[str, str],
) -> None:
    table, key = ops
    endpoint = an_endpoint()
    api_store(table, key).create_endpoint(endpoint)
    before = stored_secrets(table, endpoint)
    store = webhooks_store(table, key)
    with recording_calls() as recorder:
        read = store.endpoint(endpoint.id)
        assert read is not None and read.secrets[0].value == endpoint.secrets[0].value
        # a failing streak recorded: the item written back whole, its secret as it was
        failing = replace(read, failing_since=utcnow(), version=read.version + 1)
        assert store.replace_endpoint(read, failing)
    assert kms_operations(recorder.calls) == ["Decrypt"]
    assert stored_secrets(table, endpoint) == before


def test_a_warm_environment_opens_each_secret_once(ops: tuple[str, str]) -> None:
    table, key = ops
    endpoint = an_endpoint()
    api_store(table, key).create_endpoint(endpoint)
    with recording_calls() as recorder:
        for _ in range(5):  # five deliveries, each with a repository of its own
            webhooks_store(table, key).endpoints("acme")
    assert kms_operations(recorder.calls) == ["Decrypt"]


def test_the_api_seals_new_secrets_and_never_opens_one(ops: tuple[str, str]) -> None:
    table, key = ops
    endpoint = an_endpoint()
    store = api_store(table, key)
    store.create_endpoint(endpoint)
    (first,) = stored_secrets(table, endpoint)
    with recording_calls() as recorder:
        read = store.endpoint(endpoint.id)
        assert read is not None
        # what it read is the ciphertext, marked: it signs nothing and is no secret
        assert read.secrets[0].value == SEALED_MARK + first["sealed"]
        rotated = rules.rotate(read, rules.new_secret(), utcnow(), rules.ROTATION_OVERLAP)
        assert store.replace_endpoint(read, rotated)
    assert kms_operations(recorder.calls) == ["Encrypt"]  # the new secret alone
    new, old = stored_secrets(table, endpoint)
    assert old["sealed"] == first["sealed"] and old["expires_at"] is not None
    assert "sealed" in new and "value" not in new


def test_a_secret_is_never_stored_in_plain_text_without_a_key(ops: tuple[str, str]) -> None:
    table, _key = ops
    store = WebhookRepository(boto3.client("dynamodb"), table)
    with pytest.raises(UnsealedSecretError):
        store.create_endpoint(an_endpoint())


def test_a_plain_text_secret_of_an_earlier_version_is_read_then_sealed_by_the_api(
    ops: tuple[str, str],
) -> None:
    table, key = ops
    endpoint = an_endpoint()
    secret = endpoint.secrets[0].value
    # given an endpoint stored as an earlier version stored it
    item = api_store(table, key)._endpoint_item(endpoint)  # the shape, then made an old one
    old = json.loads(item["secrets"]["S"])
    old[0] = {"value": secret, **{k: v for k, v in old[0].items() if k != "sealed"}}
    item["secrets"] = {"S": json.dumps(old)}
    boto3.client("dynamodb").put_item(TableName=table, Item=item)
    # then the webhooks function signs with it, and writes it back as it found it
    store = webhooks_store(table, key)
    read = store.endpoint(endpoint.id)
    assert read is not None and read.secrets[0].value == secret
    assert store.replace_endpoint(read, replace(read, version=read.version + 1))
    assert stored_secrets(table, endpoint)[0]["value"] == secret
    # and the API's next write of the endpoint seals it
    api = api_store(table, key)
    current = api.endpoint(endpoint.id)
    assert current is not None
    assert api.replace_endpoint(current, replace(current, version=current.version + 1))
    (sealed,) = stored_secrets(table, endpoint)
    assert "value" not in sealed and secret not in json.dumps(sealed)
    reopened = webhooks_store(table, key).endpoint(endpoint.id)
    assert reopened is not None and reopened.secrets[0].value == secret
