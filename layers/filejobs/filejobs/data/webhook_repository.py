"""Webhook endpoints and deliveries (domain/webhooks.py) in OpsTable, through the plain client.

Items:
- endpoint: `pk="webhooks#{tenant}"`, `sk="endpoint#{endpoint id}"`: url, event types, status,
  the signing secrets (JSON), `failing_since`, `version`. One Query reads a tenant's endpoints
  (the fan-out of each event). The id names the tenant (`wh-<hex>-<tenant>`), so a route finds
  the item by the id alone. No TTL.
- delivery: `pk="webhook-deliveries#{endpoint id}"`, `sk=<delivery id>` (`dl-<time>-<hex>`, so a
  Query reads the log newest first): the body sent, status, attempts (JSON: number, time, status
  code, latency, short error), next attempt, `expires_at` 30 days after its creation (TTL).

Every change is one conditional write: an endpoint's on its `version`, a delivery's on its status
and number of attempts, so two runs of one attempt cannot both record it.

Signing secrets are stored sealed (`{"sealed": <ciphertext>, ...}`; adapters/kms_secrets.py), each
bound to its tenant and endpoint by the encryption context, so the table holds no usable secret.
Who may do what with them is the repository's `sealer` and `opener`:
- the API's repository seals each new secret (registration, rotation) and never opens one: the
  secrets it reads stay sealed (`SEALED_MARK` + ciphertext, which signs nothing) and are written
  back as they were read;
- the webhooks function's repository opens the secrets it reads (to sign) and writes back, with
  an endpoint's failing streak, the ciphertexts it opened: it never seals.
A secret stored in plain text by an earlier version (`{"value": ...}`) is read as it is and
written back so by the webhooks function; the API's next write of its endpoint (a rotation, an
enable) seals it (docs/UPGRADING.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from filejobs.domain.webhooks import (
    DELIVERY_RETENTION,
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointStatus,
    Secret,
    tenant_of_endpoint,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_REFUSED = "ConditionalCheckFailedException"
# A secret read sealed by a repository that does not open secrets: the mark and its ciphertext.
# No secret is made with it (domain/webhooks.py new_secret: "whsec_..."), so it is never taken
# for a plaintext and is written back as the ciphertext it holds.
SEALED_MARK = "sealed:"


class SecretSealer(Protocol):
    def seal(self, plaintext: str, context: Mapping[str, str]) -> str: ...


class SecretOpener(Protocol):
    def open(self, sealed: str, context: Mapping[str, str]) -> str: ...


class UnsealedSecretError(RuntimeError):
    """A new secret to store and no key to seal it with: refused, never stored in plain text."""


def secret_context(tenant: str, endpoint_id: str) -> dict[str, str]:
    """The encryption context of an endpoint's secrets (and the key policy's required keys)."""
    return {"tenant": tenant, "webhook": endpoint_id}


class WebhookRepository:
    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        sealer: SecretSealer | None = None,
        opener: SecretOpener | None = None,
    ) -> None:
        self._client, self._table = client, table
        self._sealer, self._opener = sealer, opener
        # The ciphertext each secret this repository opened came from, by (endpoint, plaintext):
        # written back as it was, with no seal. None: stored in plain text by an earlier version.
        self._stored: dict[tuple[str, str], str | None] = {}

    # --- endpoints ----------------------------------------------------------------------------

    def create_endpoint(self, endpoint: Endpoint) -> None:
        self._client.put_item(
            TableName=self._table,
            Item=self._endpoint_item(endpoint),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def endpoint(self, endpoint_id: str) -> Endpoint | None:
        tenant = tenant_of_endpoint(endpoint_id)
        if tenant is None:
            return None
        found = self._client.get_item(
            TableName=self._table, Key=_endpoint_key(tenant, endpoint_id), ConsistentRead=True
        )
        item = found.get("Item")
        return None if item is None else self._endpoint_from(item)

    def endpoints(self, tenant: str) -> list[Endpoint]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :endpoint)",
            "ExpressionAttributeValues": {
                ":pk": {"S": f"webhooks#{tenant}"},
                ":endpoint": {"S": "endpoint#"},
            },
        }
        found: list[Endpoint] = []
        while True:
            answer = self._client.query(**request)
            found += [self._endpoint_from(item) for item in answer.get("Items", [])]
            last = answer.get("LastEvaluatedKey")
            if last is None:
                return found
            request["ExclusiveStartKey"] = last

    def replace_endpoint(self, before: Endpoint, after: Endpoint) -> bool:
        return self._put_if(
            self._endpoint_item(after),
            "version = :version",
            {":version": {"N": str(before.version)}},
        )

    def delete_endpoint(self, endpoint: Endpoint) -> bool:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=_endpoint_key(endpoint.tenant, endpoint.id),
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == _REFUSED:
                return False
            raise
        return True

    def erase_tenant(self, tenant: str) -> tuple[int, int]:
        """A tenant's erasure (services/tenant_erasure.py): each endpoint's deliveries deleted
        (a delivery holds an event's body, object keys included), then the endpoint, so a run
        that dies half way finds the endpoint and its deliveries left; (endpoints, deliveries)."""
        endpoints = deliveries = 0
        for endpoint in self.endpoints(tenant):
            deliveries += self._delete_deliveries(endpoint.id)
            endpoints += self.delete_endpoint(endpoint)
        return endpoints, deliveries

    def _delete_deliveries(self, endpoint_id: str) -> int:
        pages = self._client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": _deliveries_pk(endpoint_id)}},
            ProjectionExpression="pk, sk",
            ConsistentRead=True,
        )
        deleted = 0
        for page in pages:
            for item in page.get("Items", []):
                key = {"pk": item["pk"], "sk": item["sk"]}
                self._client.delete_item(TableName=self._table, Key=key)
                deleted += 1
        return deleted

    # --- deliveries ---------------------------------------------------------------------------

    def create_delivery(self, delivery: Delivery) -> bool:
        return self._put_if(_delivery_item(delivery), "attribute_not_exists(pk)", None)

    def delivery(self, endpoint_id: str, delivery_id: str) -> Delivery | None:
        found = self._client.get_item(
            TableName=self._table,
            Key={"pk": {"S": _deliveries_pk(endpoint_id)}, "sk": {"S": delivery_id}},
            ConsistentRead=True,
        )
        item = found.get("Item")
        return None if item is None else _delivery_from(item)

    def deliveries(
        self, endpoint_id: str, *, after: str | None, limit: int
    ) -> tuple[list[Delivery], str | None]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": _deliveries_pk(endpoint_id)}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if after is not None:
            request["ExclusiveStartKey"] = {
                "pk": {"S": _deliveries_pk(endpoint_id)},
                "sk": {"S": after},
            }
        answer = self._client.query(**request)
        found = [_delivery_from(item) for item in answer.get("Items", [])]
        last = answer.get("LastEvaluatedKey")
        return found, None if last is None else last["sk"]["S"]

    def update_delivery(self, before: Delivery, after: Delivery) -> bool:
        return self._put_if(
            _delivery_item(after),
            "attribute_exists(pk) AND #status = :status AND attempt_count = :count",
            {
                ":status": {"S": before.status.value},
                ":count": {"N": str(before.attempt_count)},
            },
            names={"#status": "status"},
        )

    # --- secrets, sealed at rest ---------------------------------------------------------------

    def _endpoint_item(self, endpoint: Endpoint) -> dict[str, Any]:
        context = secret_context(endpoint.tenant, endpoint.id)
        stored = [
            {
                **self._stored_secret(endpoint.id, s.value, context),
                "created_at": _iso(s.created_at),
                "expires_at": None if s.expires_at is None else _iso(s.expires_at),
            }
            for s in endpoint.secrets
        ]
        return _endpoint_item(endpoint, stored)

    def _stored_secret(
        self, endpoint_id: str, value: str, context: Mapping[str, str]
    ) -> dict[str, str]:
        """How one secret is stored: the ciphertext it was read as, else sealed now."""
        if value.startswith(SEALED_MARK):
            return {"sealed": value.removeprefix(SEALED_MARK)}
        if (endpoint_id, value) in self._stored:
            sealed = self._stored[(endpoint_id, value)]
            if sealed is not None:
                return {"sealed": sealed}
            if self._sealer is None:
                return {"value": value}  # as an earlier version stored it: left for the API
        if self._sealer is None:
            raise UnsealedSecretError("no key to seal a new webhook secret with")
        sealed = self._sealer.seal(value, context)
        self._stored[(endpoint_id, value)] = sealed
        return {"sealed": sealed}

    def _endpoint_from(self, item: dict[str, Any]) -> Endpoint:
        endpoint_id = item["endpoint_id"]["S"]
        context = secret_context(item["tenant"]["S"], endpoint_id)
        secrets = tuple(
            Secret(
                self._secret_value(endpoint_id, stored, context),
                _parse(stored["created_at"]),
                None if stored["expires_at"] is None else _parse(stored["expires_at"]),
            )
            for stored in json.loads(item["secrets"]["S"])
        )
        return _endpoint_from(item, secrets)

    def _secret_value(
        self, endpoint_id: str, stored: dict[str, Any], context: Mapping[str, str]
    ) -> str:
        """A stored secret's plaintext where this repository opens secrets, else its mark."""
        if "sealed" not in stored:
            self._stored[(endpoint_id, stored["value"])] = None
            return str(stored["value"])
        sealed = str(stored["sealed"])
        if self._opener is None:
            return SEALED_MARK + sealed
        value = self._opener.open(sealed, context)
        self._stored[(endpoint_id, value)] = sealed
        return value

    def _put_if(
        self,
        item: dict[str, Any],
        condition: str,
        values: dict[str, Any] | None,
        names: dict[str, str] | None = None,
    ) -> bool:
        request: dict[str, Any] = {
            "TableName": self._table,
            "Item": item,
            "ConditionExpression": condition,
        }
        if values:
            request["ExpressionAttributeValues"] = values
        if names:
            request["ExpressionAttributeNames"] = names
        try:
            self._client.put_item(**request)
        except ClientError as error:
            if error.response["Error"]["Code"] == _REFUSED:
                return False
            raise
        return True


def _endpoint_key(tenant: str, endpoint_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"webhooks#{tenant}"}, "sk": {"S": f"endpoint#{endpoint_id}"}}


def _deliveries_pk(endpoint_id: str) -> str:
    return f"webhook-deliveries#{endpoint_id}"


def _endpoint_item(endpoint: Endpoint, secrets: list[dict[str, Any]]) -> dict[str, Any]:
    item: dict[str, Any] = {
        **_endpoint_key(endpoint.tenant, endpoint.id),
        "endpoint_id": {"S": endpoint.id},
        "tenant": {"S": endpoint.tenant},
        "url": {"S": endpoint.url},
        "event_types": {"S": json.dumps(sorted(endpoint.event_types))},
        "secrets": {"S": json.dumps(secrets)},
        "status": {"S": endpoint.status.value},
        "created_at": {"S": _iso(endpoint.created_at)},
        "updated_at": {"S": _iso(endpoint.updated_at)},
        "created_by": {"S": endpoint.created_by},
        "description": {"S": endpoint.description},
        "version": {"N": str(endpoint.version)},
    }
    for name, moment in (
        ("failing_since", endpoint.failing_since),
        ("disabled_at", endpoint.disabled_at),
    ):
        if moment is not None:
            item[name] = {"S": _iso(moment)}
    if endpoint.disabled_reason is not None:
        item["disabled_reason"] = {"S": endpoint.disabled_reason}
    return item


def _endpoint_from(item: dict[str, Any], secrets: tuple[Secret, ...]) -> Endpoint:
    def moment(name: str) -> datetime | None:
        value = item.get(name)
        return None if value is None else _parse(value["S"])

    return Endpoint(
        id=item["endpoint_id"]["S"],
        tenant=item["tenant"]["S"],
        url=item["url"]["S"],
        event_types=frozenset(json.loads(item["event_types"]["S"])),
        secrets=secrets,
        created_at=_parse(item["created_at"]["S"]),
        updated_at=_parse(item["updated_at"]["S"]),
        created_by=item["created_by"]["S"],
        description=item.get("description", {}).get("S", ""),
        status=EndpointStatus(item["status"]["S"]),
        failing_since=moment("failing_since"),
        disabled_at=moment("disabled_at"),
        disabled_reason=item.get("disabled_reason", {}).get("S"),
        version=int(item["version"]["N"]),
    )


def _delivery_item(delivery: Delivery) -> dict[str, Any]:
    expires = delivery.created_at + DELIVERY_RETENTION
    item: dict[str, Any] = {
        "pk": {"S": _deliveries_pk(delivery.endpoint_id)},
        "sk": {"S": delivery.id},
        "endpoint_id": {"S": delivery.endpoint_id},
        "tenant": {"S": delivery.tenant},
        "event_id": {"S": delivery.event_id},
        "event_type": {"S": delivery.event_type},
        "body": {"S": delivery.body},
        "created_at": {"S": _iso(delivery.created_at)},
        "updated_at": {"S": _iso(delivery.updated_at)},
        "status": {"S": delivery.status.value},
        "attempt_count": {"N": str(delivery.attempt_count)},
        "attempts": {
            "S": json.dumps(
                [
                    {
                        "number": a.number,
                        "at": _iso(a.at),
                        "status_code": a.status_code,
                        "latency_ms": a.latency_ms,
                        "error": a.error,
                    }
                    for a in delivery.attempts
                ]
            )
        },
        "expires_at": {"N": str(int(expires.timestamp()))},
    }
    if delivery.next_attempt_at is not None:
        item["next_attempt_at"] = {"S": _iso(delivery.next_attempt_at)}
    if delivery.resend_of is not None:
        item["resend_of"] = {"S": delivery.resend_of}
    return item


def _delivery_from(item: dict[str, Any]) -> Delivery:
    due = item.get("next_attempt_at")
    return Delivery(
        id=item["sk"]["S"],
        endpoint_id=item["endpoint_id"]["S"],
        tenant=item["tenant"]["S"],
        event_id=item["event_id"]["S"],
        event_type=item["event_type"]["S"],
        body=item["body"]["S"],
        created_at=_parse(item["created_at"]["S"]),
        updated_at=_parse(item["updated_at"]["S"]),
        status=DeliveryStatus(item["status"]["S"]),
        next_attempt_at=None if due is None else _parse(due["S"]),
        attempts=tuple(
            Attempt(a["number"], _parse(a["at"]), a["status_code"], a["latency_ms"], a["error"])
            for a in json.loads(item["attempts"]["S"])
        ),
        resend_of=item.get("resend_of", {}).get("S"),
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)
