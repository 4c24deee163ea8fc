"""Signed webhooks per tenant: endpoints managed through the API, events fanned out to them, each
delivery attempted, retried, logged, and re-sent by hand (domain/webhooks.py has the rules).

- `register`, `endpoints`, `endpoint`, `remove`, `rotate`, `enable`, `deliveries`, `delivery`,
  `resend`: the API's use cases, each scoped to the caller's tenant (an operator names one).
- `fan_out`: an event of the stack's bus (through its rule and the webhooks queue) becomes one
  delivery per enabled endpoint of its tenant subscribed to its type, each recorded (its id made
  from the endpoint and the event, so a repeated event makes none twice) and sent as a message of
  its own: a slow endpoint holds up no other. The tenant's endpoints are read through
  `RememberedEndpoints` (the webhooks function keeps one per instance): at most one Query per
  tenant a minute, and none at all for each event of a tenant known to have no endpoint, which
  is most events. An endpoint registered or enabled is served within ENDPOINTS_KEPT; one removed
  or disabled stops at once, as `deliver` reads the endpoint before every attempt.
- `deliver`: one attempt of one delivery, when due; a message that arrives early is sent again
  for the time left (SQS delays at most 15 minutes). The attempt is recorded by one conditional
  write, then the next attempt's message is sent; the endpoint's failing streak (or its
  disabling, with a `Webhook Disabled` notice) by another.
"""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from filejobs.access import Caller
from filejobs.domain import webhooks as rules
from filejobs.domain.keys import is_tenant
from filejobs.domain.time import utcnow
from filejobs.domain.webhooks import (
    DELIVERY_ID_HEADER,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    EndpointStatus,
    Secret,
)
from filejobs.ports import DeliveryTask, WebhookNotices, WebhookQueue, WebhookSender, WebhookStore
from filejobs.services.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
)

_ENDPOINT_RACES = 5
# How long a function instance uses a tenant's endpoints as it read them (none, often) before it
# reads them again: the delay before a new or re-enabled endpoint gets its first event.
ENDPOINTS_KEPT = timedelta(seconds=60)
# Tenants whose endpoints an instance remembers at most (the least recently used forgotten).
TENANTS_REMEMBERED = 10_000


@dataclass(frozen=True)
class Register:
    url: str
    event_types: frozenset[str]
    tenant: str | None = None  # an operator's: whose endpoint
    description: str = ""


@dataclass(frozen=True)
class WithSecret:
    """An endpoint and its new secret: shown once, in the answer that made it."""

    endpoint: Endpoint
    secret: str


@dataclass(frozen=True)
class BusEvent:
    event_id: str
    event_type: str
    time: datetime
    tenant: str
    detail: dict[str, Any]


def bus_event(raw: dict[str, Any]) -> BusEvent | None:
    """The event a rule forwarded (EventBridge's envelope), if it is one a tenant can receive."""
    detail, event_type = raw.get("detail"), raw.get("detail-type")
    if not isinstance(detail, dict) or event_type not in rules.EVENT_TYPES:
        return None
    tenant = detail.get("tenant")
    if not isinstance(tenant, str) or not is_tenant(tenant):
        return None
    event_id = detail.get("event_id") or raw.get("id")
    if not isinstance(event_id, str):
        return None
    try:
        time = datetime.fromisoformat(str(raw.get("time", "")).replace("Z", "+00:00"))
    except ValueError:
        time = utcnow()
    if time.tzinfo is None:
        time = time.replace(tzinfo=UTC)
    return BusEvent(event_id, str(event_type), time.astimezone(UTC), tenant, detail)


class RememberedEndpoints:
    """Each tenant's endpoints as read at most `kept` ago (an empty list remembered like any
    other): what `fan_out` sends an event to. Stale by at most `kept`, and only in one way that
    matters: an endpoint added late misses events for that long; one removed, disabled or
    re-keyed is re-read by `deliver` before anything is sent to it."""

    def __init__(
        self,
        read: Callable[[str], list[Endpoint]],
        *,
        kept: timedelta = ENDPOINTS_KEPT,
        tenants: int = TENANTS_REMEMBERED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._kept, self._tenants, self._clock = read, kept, tenants, clock
        self._known: OrderedDict[str, tuple[float, list[Endpoint]]] = OrderedDict()

    def __call__(self, tenant: str) -> list[Endpoint]:
        now = self._clock()
        known = self._known.get(tenant)
        if known is not None and now - known[0] < self._kept.total_seconds():
            self._known.move_to_end(tenant)
            return known[1]
        endpoints = self._read(tenant)
        self._known[tenant] = (now, endpoints)
        self._known.move_to_end(tenant)
        if len(self._known) > self._tenants:
            self._known.popitem(last=False)
        return endpoints


class Webhooks:
    def __init__(
        self,
        store: WebhookStore,
        *,
        endpoints_of: Callable[[str], list[Endpoint]] | None = None,
        queue: Callable[[], WebhookQueue],
        sender: Callable[[], WebhookSender] | None = None,
        notices: Callable[[], WebhookNotices] | None = None,
        local_mode: bool = False,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        # The tenant's endpoints for fan_out: the store's own answer unless told (a remembered
        # one: RememberedEndpoints).
        self._endpoints_of = endpoints_of or store.endpoints
        self._queue = queue
        self._sender = sender
        self._notices = notices
        self._local = local_mode
        self._clock = clock
        self._rng = rng or random.Random()  # noqa: S311 (jitter, not a secret)

    # --- the API's use cases -------------------------------------------------------------------

    def register(self, caller: Caller, command: Register) -> WithSecret:
        tenant = self._tenant_for(caller, command.tenant)
        problem = rules.check_url(command.url, local_mode=self._local)
        if problem is not None:
            raise InvalidRequestError(problem)
        unknown = sorted(command.event_types - set(rules.EVENT_TYPES))
        if unknown or not command.event_types:
            raise InvalidRequestError(
                f"event_types must be some of {', '.join(rules.EVENT_TYPES)}"
                + (f"; got {unknown[0]!r}" if unknown else "")
            )
        if len(self._store.endpoints(tenant)) >= rules.MAX_ENDPOINTS_PER_TENANT:
            raise ConflictError(
                f"a tenant has at most {rules.MAX_ENDPOINTS_PER_TENANT} endpoints; remove one first"
            )
        now = self._clock()
        secret = rules.new_secret()
        endpoint = Endpoint(
            id=rules.new_endpoint_id(tenant),
            tenant=tenant,
            url=command.url,
            event_types=command.event_types,
            secrets=(Secret(secret, now),),
            created_at=now,
            updated_at=now,
            created_by=caller.name,
            description=command.description,
        )
        self._store.create_endpoint(endpoint)
        return WithSecret(endpoint, secret)

    def endpoints(self, caller: Caller, tenant: str | None) -> list[Endpoint]:
        found = self._store.endpoints(self._tenant_for(caller, tenant))
        return sorted(found, key=lambda e: (e.created_at, e.id))

    def endpoint(self, caller: Caller, endpoint_id: str) -> Endpoint:
        tenant = rules.tenant_of_endpoint(endpoint_id)
        found = None if tenant is None else self._store.endpoint(endpoint_id)
        if found is None or not caller.may_see(found.tenant):
            raise NotFoundError("no such webhook endpoint")
        return found

    def remove(self, caller: Caller, endpoint_id: str) -> None:
        if not self._store.delete_endpoint(self.endpoint(caller, endpoint_id)):
            raise NotFoundError("no such webhook endpoint")

    def rotate(
        self, caller: Caller, endpoint_id: str, overlap: timedelta = rules.ROTATION_OVERLAP
    ) -> WithSecret:
        if not timedelta() <= overlap <= rules.MAX_ROTATION_OVERLAP:
            raise InvalidRequestError("overlap must be between 0 and 7 days")
        secret = rules.new_secret()
        for _ in range(_ENDPOINT_RACES):
            before = self.endpoint(caller, endpoint_id)
            after = rules.rotate(before, secret, self._clock(), overlap)
            if self._store.replace_endpoint(before, after):
                return WithSecret(after, secret)
        raise ConflictError("the endpoint changed meanwhile; try again")

    def enable(self, caller: Caller, endpoint_id: str) -> Endpoint:
        for _ in range(_ENDPOINT_RACES):
            before = self.endpoint(caller, endpoint_id)
            if before.status is EndpointStatus.ENABLED:
                return before
            after = replace(
                before,
                status=EndpointStatus.ENABLED,
                failing_since=None,
                disabled_at=None,
                disabled_reason=None,
                updated_at=self._clock(),
                version=before.version + 1,
            )
            if self._store.replace_endpoint(before, after):
                return after
        raise ConflictError("the endpoint changed meanwhile; try again")

    def deliveries(
        self, caller: Caller, endpoint_id: str, *, after: str | None, limit: int
    ) -> tuple[list[Delivery], str | None]:
        found = self.endpoint(caller, endpoint_id)
        return self._store.deliveries(found.id, after=after, limit=limit)

    def delivery(self, caller: Caller, endpoint_id: str, delivery_id: str) -> Delivery:
        found = self.endpoint(caller, endpoint_id)
        delivery = self._store.delivery(found.id, delivery_id)
        if delivery is None:
            raise NotFoundError("no such delivery")
        return delivery

    def resend(self, caller: Caller, endpoint_id: str, delivery_id: str) -> Delivery:
        """A new delivery of the same event and body (a new id, signed anew when sent)."""
        original = self.delivery(caller, endpoint_id, delivery_id)
        endpoint = self.endpoint(caller, endpoint_id)
        if endpoint.status is not EndpointStatus.ENABLED:
            raise ConflictError("the endpoint is disabled: enable it first")
        now = self._clock()
        again = Delivery(
            id=rules.resend_id(now),
            endpoint_id=endpoint.id,
            tenant=endpoint.tenant,
            event_id=original.event_id,
            event_type=original.event_type,
            body=original.body,
            created_at=now,
            updated_at=now,
            resend_of=original.id,
        )
        self._store.create_delivery(again)
        self._queue().send(DeliveryTask(endpoint.id, again.id), timedelta())
        return again

    def _tenant_for(self, caller: Caller, named: str | None) -> str:
        if named is not None and not is_tenant(named):
            raise InvalidRequestError("tenant must be a tenant name")
        tenant = named if named is not None else caller.tenant
        if tenant is None:
            raise InvalidRequestError("an operator names the tenant (tenant)")
        if not caller.may_see(tenant):
            raise NotFoundError("no such tenant")
        return tenant

    # --- the webhooks function's -------------------------------------------------------------

    def fan_out(self, event: BusEvent) -> list[Delivery]:
        """One delivery per enabled endpoint of the event's tenant that wants its type."""
        made: list[Delivery] = []
        for endpoint in self._endpoints_of(event.tenant):
            if not endpoint.wants(event.event_type):
                continue
            body = json.dumps(
                rules.payload(
                    event.event_id, event.event_type, event.time, event.tenant, event.detail
                ),
                separators=(",", ":"),
                sort_keys=True,
                default=str,
            )
            now = self._clock()
            delivery = Delivery(
                id=rules.delivery_id(endpoint.id, event.event_id, event.time),
                endpoint_id=endpoint.id,
                tenant=event.tenant,
                event_id=event.event_id,
                event_type=event.event_type,
                body=body,
                created_at=now,
                updated_at=now,
            )
            if not self._store.create_delivery(delivery):
                # The event came again: send only a delivery whose first message may be lost.
                existing = self._store.delivery(endpoint.id, delivery.id)
                if existing is None or existing.status is not DeliveryStatus.PENDING:
                    continue
                delivery = existing
            self._queue().send(DeliveryTask(endpoint.id, delivery.id), timedelta())
            made.append(delivery)
        return made

    def deliver(self, task: DeliveryTask) -> str:
        """Attempts the delivery if it is due; what happened, for the log."""
        delivery = self._store.delivery(task.endpoint_id, task.delivery_id)
        if delivery is None:
            return "no such delivery"
        if delivery.finished:
            return f"already {delivery.status.value}"
        now = self._clock()
        endpoint = self._store.endpoint(task.endpoint_id)
        if endpoint is None or endpoint.status is not EndpointStatus.ENABLED:
            why = "endpoint removed" if endpoint is None else "endpoint disabled"
            ended = replace(
                delivery, status=DeliveryStatus.FAILED, next_attempt_at=None, updated_at=now
            )
            self._store.update_delivery(delivery, ended)
            return why
        if delivery.next_attempt_at is not None and delivery.next_attempt_at > now:
            self._queue().send(task, delivery.next_attempt_at - now)
            return "not due yet: sent again"
        attempt = self._attempt(endpoint, delivery, now)
        delay = None if attempt.succeeded else rules.retry_delay(attempt.number, self._rng)
        after = rules.after_attempt(delivery, attempt, delay)
        disable = rules.disable_reason(endpoint, attempt)
        if disable is not None:
            after = replace(after, status=DeliveryStatus.FAILED, next_attempt_at=None)
        if not self._store.update_delivery(delivery, after):
            return "another run recorded this attempt"
        self._endpoint_after(endpoint, attempt, disable)
        if after.status is DeliveryStatus.RETRYING and after.next_attempt_at is not None:
            self._queue().send(task, after.next_attempt_at - attempt.at)
        return f"attempt {attempt.number}: {after.status.value}"

    def _attempt(self, endpoint: Endpoint, delivery: Delivery, now: datetime) -> Attempt:
        if self._sender is None:
            raise RuntimeError("no sender: this Webhooks serves the API only")
        timestamp = int(now.timestamp())
        secrets = [s.value for s in endpoint.active_secrets(now)]
        headers = {
            SIGNATURE_HEADER: rules.signature_header(secrets, timestamp, delivery.body),
            EVENT_ID_HEADER: delivery.event_id,
            DELIVERY_ID_HEADER: delivery.id,
        }
        answer = self._sender().post(endpoint.url, delivery.body.encode(), headers)
        return Attempt(
            number=delivery.attempt_count + 1,
            at=now,
            status_code=answer.status_code,
            latency_ms=answer.latency_ms,
            error=answer.error,
        )

    def _endpoint_after(self, endpoint: Endpoint, attempt: Attempt, disable: str | None) -> None:
        """The endpoint's failing streak: started by a failure, ended by a success; or the
        endpoint disabled (and announced, by the one write that disabled it)."""
        current: Endpoint | None = endpoint
        for _ in range(_ENDPOINT_RACES):
            if current is None or current.status is not EndpointStatus.ENABLED:
                return
            after = _after(current, attempt, disable)
            if after is None:
                return
            if self._store.replace_endpoint(current, after):
                if after.status is EndpointStatus.DISABLED and self._notices is not None:
                    self._notices().disabled(after, after.disabled_reason or "", attempt.at)
                return
            current = self._store.endpoint(endpoint.id)
            if current is not None and disable is None:
                disable = rules.disable_reason(current, attempt)


def _after(endpoint: Endpoint, attempt: Attempt, disable: str | None) -> Endpoint | None:
    """The endpoint's change after `attempt`, or None when there is nothing to write."""
    if disable is not None:
        return replace(
            endpoint,
            status=EndpointStatus.DISABLED,
            disabled_at=attempt.at,
            disabled_reason=disable,
            updated_at=attempt.at,
            version=endpoint.version + 1,
        )
    if attempt.succeeded:
        if endpoint.failing_since is None:
            return None
        return replace(endpoint, failing_since=None, version=endpoint.version + 1)
    if endpoint.failing_since is not None:
        return None
    return replace(endpoint, failing_since=attempt.at, version=endpoint.version + 1)


def endpoint_view(endpoint: Endpoint, now: datetime | None = None) -> dict[str, Any]:
    """An endpoint as the API shows it: never a secret, only when each active one ends."""
    moment = now or utcnow()
    return {
        "id": endpoint.id,
        "tenant": endpoint.tenant,
        "url": endpoint.url,
        "event_types": sorted(endpoint.event_types),
        "description": endpoint.description,
        "status": endpoint.status.value,
        "created_at": endpoint.created_at.isoformat(),
        "updated_at": endpoint.updated_at.isoformat(),
        "created_by": endpoint.created_by,
        "failing_since": _iso(endpoint.failing_since),
        "disabled_at": _iso(endpoint.disabled_at),
        "disabled_reason": endpoint.disabled_reason,
        "secrets": [
            {"created_at": s.created_at.isoformat(), "expires_at": _iso(s.expires_at)}
            for s in endpoint.active_secrets(moment)
        ],
    }


def delivery_view(delivery: Delivery, *, with_body: bool = False) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": delivery.id,
        "endpoint_id": delivery.endpoint_id,
        "tenant": delivery.tenant,
        "event_id": delivery.event_id,
        "event_type": delivery.event_type,
        "status": delivery.status.value,
        "attempt": delivery.attempt_count,
        "created_at": delivery.created_at.isoformat(),
        "updated_at": delivery.updated_at.isoformat(),
        "next_attempt_at": _iso(delivery.next_attempt_at),
        "resend_of": delivery.resend_of,
        "attempts": [
            {
                "number": a.number,
                "at": a.at.isoformat(),
                "status_code": a.status_code,
                "latency_ms": a.latency_ms,
                "error": a.error,
            }
            for a in delivery.attempts
        ],
    }
    last = delivery.attempts[-1] if delivery.attempts else None
    view["response_code"] = None if last is None else last.status_code
    view["latency_ms"] = None if last is None else last.latency_ms
    view["error"] = None if last is None else last.error
    if with_body:
        view["body"] = delivery.body
    return view


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def event_types_of(raw: Iterable[object]) -> frozenset[str]:
    return frozenset(str(t) for t in raw)
