"""Specification: the webhooks use cases (services/webhooks.py) on in-memory ports: who sees
what, the fan-out, an attempt's recording, waiting longer than SQS's delay, disabling, races."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from filejobs.access import Caller
from filejobs.domain import webhooks as rules
from filejobs.domain.webhooks import Delivery, DeliveryStatus, Endpoint, EndpointStatus
from filejobs.ports import DeliveryTask, WebhookAnswer
from filejobs.services.errors import ConflictError, InvalidRequestError, NotFoundError
from filejobs.services.webhooks import (
    ENDPOINTS_KEPT,
    BusEvent,
    Register,
    RememberedEndpoints,
    Webhooks,
)

ACME = Caller("acme", operator=False)
GLOBEX = Caller("globex", operator=False)
OPERATOR = Caller(None, operator=True)
START = datetime(2026, 12, 4, 12, tzinfo=UTC)


class Store:
    """Every change conditional, as data/webhook_repository.py's."""

    def __init__(self) -> None:
        self.endpoints_: dict[str, Endpoint] = {}
        self.deliveries_: dict[tuple[str, str], Delivery] = {}
        self.refuse_next_endpoint_write = 0

    def create_endpoint(self, endpoint: Endpoint) -> None:
        assert endpoint.id not in self.endpoints_
        self.endpoints_[endpoint.id] = endpoint

    def endpoint(self, endpoint_id: str) -> Endpoint | None:
        return self.endpoints_.get(endpoint_id)

    def endpoints(self, tenant: str) -> list[Endpoint]:
        return [e for e in self.endpoints_.values() if e.tenant == tenant]

    def replace_endpoint(self, before: Endpoint, after: Endpoint) -> bool:
        current = self.endpoints_.get(before.id)
        if self.refuse_next_endpoint_write:
            self.refuse_next_endpoint_write -= 1
            return False
        if current is None or current.version != before.version:
            return False
        self.endpoints_[before.id] = after
        return True

    def delete_endpoint(self, endpoint: Endpoint) -> bool:
        return self.endpoints_.pop(endpoint.id, None) is not None

    def create_delivery(self, delivery: Delivery) -> bool:
        key = (delivery.endpoint_id, delivery.id)
        if key in self.deliveries_:
            return False
        self.deliveries_[key] = delivery
        return True

    def delivery(self, endpoint_id: str, delivery_id: str) -> Delivery | None:
        return self.deliveries_.get((endpoint_id, delivery_id))

    def deliveries(
        self, endpoint_id: str, *, after: str | None, limit: int
    ) -> tuple[list[Delivery], str | None]:
        found = sorted(
            (d for (e, _), d in self.deliveries_.items() if e == endpoint_id),
            key=lambda d: d.id,
            reverse=True,
        )
        return found[:limit], None

    def update_delivery(self, before: Delivery, after: Delivery) -> bool:
        current = self.deliveries_.get((before.endpoint_id, before.id))
        if current is None or (current.status, current.attempt_count) != (
            before.status,
            before.attempt_count,
        ):
            return False
        self.deliveries_[(before.endpoint_id, before.id)] = after
        return True


@dataclass
class Queue:
    sent: list[tuple[DeliveryTask, timedelta]] = field(default_factory=list)

    def send(self, task: DeliveryTask, delay: timedelta) -> None:
        self.sent.append((task, delay))


@dataclass
class Sender:
    answers: list[int | None] = field(default_factory=list)
    posts: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> WebhookAnswer:
        self.posts.append((url, headers))
        status = self.answers.pop(0) if self.answers else 200
        return WebhookAnswer(status, 5, None if status == 200 else f"HTTP {status}")


@dataclass
class Notices:
    disabled_: list[tuple[str, str]] = field(default_factory=list)

    def disabled(self, endpoint: Endpoint, reason: str, at: datetime) -> None:
        self.disabled_.append((endpoint.id, reason))


@dataclass
class Bench:
    store: Store
    queue: Queue
    sender: Sender
    notices: Notices
    now: list[datetime]

    def service(self) -> Webhooks:
        return Webhooks(
            self.store,
            queue=lambda: self.queue,
            sender=lambda: self.sender,
            notices=lambda: self.notices,
            clock=lambda: self.now[0],
            rng=random.Random(3),
        )

    def at(self, moment: datetime) -> Webhooks:
        self.now[0] = moment
        return self.service()


@pytest.fixture
def bench() -> Bench:
    return Bench(Store(), Queue(), Sender(), Notices(), [START])


def register(bench: Bench, who: Caller = ACME, *types: str) -> Endpoint:
    command = Register("https://hooks.example.com/in", frozenset(types or {"Job Completed"}))
    return bench.service().register(who, command).endpoint


def event(tenant: str = "acme", kind: str = "Job Completed", event_id: str = "e1") -> BusEvent:
    return BusEvent(event_id, kind, START, tenant, {"tenant": tenant})


def test_a_tenant_sees_only_its_own_and_an_operator_names_the_tenant(bench: Bench) -> None:
    mine = register(bench)
    service = bench.service()
    assert [e.id for e in service.endpoints(ACME, None)] == [mine.id]
    assert service.endpoints(GLOBEX, None) == []
    with pytest.raises(NotFoundError):
        service.endpoint(GLOBEX, mine.id)
    with pytest.raises(NotFoundError):
        service.endpoints(GLOBEX, "acme")
    with pytest.raises(InvalidRequestError):
        service.endpoints(OPERATOR, None)
    assert [e.id for e in service.endpoints(OPERATOR, "acme")] == [mine.id]
    made = service.register(
        OPERATOR, Register("https://h.example.com/x", frozenset({"Job Failed"}), "globex")
    )
    assert made.endpoint.tenant == "globex" and made.endpoint.created_by == "api:operator"


def test_a_tenant_has_at_most_20_endpoints(bench: Bench) -> None:
    for _ in range(rules.MAX_ENDPOINTS_PER_TENANT):
        register(bench)
    with pytest.raises(ConflictError):
        register(bench)


def test_an_event_reaches_each_enabled_endpoint_that_wants_it_once(bench: Bench) -> None:
    wants = register(bench, ACME, "Job Completed")
    register(bench, ACME, "Job Failed")
    register(bench, GLOBEX, "Job Completed")
    disabled = register(bench, ACME, "Job Completed")
    bench.store.endpoints_[disabled.id] = Endpoint(
        **{**disabled.__dict__, "status": EndpointStatus.DISABLED}
    )
    made = bench.service().fan_out(event())
    assert [d.endpoint_id for d in made] == [wants.id]
    assert [t.endpoint_id for t, _ in bench.queue.sent] == [wants.id]
    # the same event again: the delivery exists and is pending (its message may be lost): sent
    # again; once attempted, nothing more
    assert len(bench.service().fan_out(event())) == 1
    bench.service().deliver(bench.queue.sent[0][0])
    assert bench.service().fan_out(event()) == []


def test_a_wait_longer_than_sqs_allows_is_sent_again_for_what_is_left(bench: Bench) -> None:
    endpoint = register(bench)
    bench.sender.answers = [500] * 9
    (delivery,) = bench.service().fan_out(event())
    task = DeliveryTask(endpoint.id, delivery.id)
    moment = START
    for _ in range(9):  # nine failures: the ninth wait is about 4.3 hours
        outcome = bench.at(moment).deliver(task)
        assert outcome.endswith("retrying")
        stored = bench.store.delivery(endpoint.id, delivery.id)
        assert stored is not None and stored.next_attempt_at is not None
        moment = stored.next_attempt_at
    bench.queue.sent.clear()
    early = moment - timedelta(hours=2)
    assert bench.at(early).deliver(task) == "not due yet: sent again"
    ((_, delay),) = bench.queue.sent
    assert delay == timedelta(hours=2)  # the queue adapter caps each hop at 15 minutes
    assert len(bench.sender.posts) == 9
    assert bench.at(moment).deliver(task) == "attempt 10: succeeded"


def test_the_last_attempt_fails_the_delivery(bench: Bench) -> None:
    endpoint = register(bench)
    bench.sender.answers = [503] * rules.MAX_ATTEMPTS
    (delivery,) = bench.service().fan_out(event())
    task = DeliveryTask(endpoint.id, delivery.id)
    moment = START
    outcomes = []
    for _ in range(rules.MAX_ATTEMPTS):
        outcomes.append(bench.at(moment).deliver(task))
        found = bench.store.delivery(endpoint.id, delivery.id)
        assert found is not None
        moment = found.next_attempt_at or moment
    assert outcomes[-1] == f"attempt {rules.MAX_ATTEMPTS}: failed"
    assert all(o.endswith("retrying") for o in outcomes[:-1])
    stored = bench.store.delivery(endpoint.id, delivery.id)
    assert stored is not None
    assert stored.status is DeliveryStatus.FAILED and stored.attempt_count == rules.MAX_ATTEMPTS
    # 20.5 hours nominal: the endpoint failed for less than a day, so it stays enabled
    assert bench.store.endpoints_[endpoint.id].status is EndpointStatus.ENABLED
    assert bench.notices.disabled_ == []
    assert bench.service().deliver(task) == "already failed"


def test_two_runs_of_one_attempt_record_it_once(bench: Bench) -> None:
    endpoint = register(bench)
    (delivery,) = bench.service().fan_out(event())
    task = DeliveryTask(endpoint.id, delivery.id)
    stale = bench.store.delivery(endpoint.id, delivery.id)
    assert bench.service().deliver(task) == "attempt 1: succeeded"
    assert stale is not None
    # a second run read the delivery before the first recorded its attempt
    bench.store.deliveries_[(endpoint.id, delivery.id)] = stale
    first = bench.store.update_delivery
    bench.store.update_delivery = lambda before, after: False  # type: ignore[method-assign]
    assert bench.service().deliver(task) == "another run recorded this attempt"
    bench.store.update_delivery = first  # type: ignore[method-assign]


def test_a_disabled_endpoint_is_announced_once_even_after_a_lost_race(bench: Bench) -> None:
    endpoint = register(bench)
    bench.sender.answers = [410]
    (delivery,) = bench.service().fan_out(event())
    bench.store.refuse_next_endpoint_write = 1  # another writer changed the endpoint first
    assert bench.service().deliver(DeliveryTask(endpoint.id, delivery.id)) == "attempt 1: failed"
    stored = bench.store.endpoints_[endpoint.id]
    assert stored.status is EndpointStatus.DISABLED and stored.disabled_reason is not None
    assert bench.notices.disabled_ == [(endpoint.id, stored.disabled_reason)]


def test_a_removed_endpoints_deliveries_fail_without_a_post(bench: Bench) -> None:
    endpoint = register(bench)
    (delivery,) = bench.service().fan_out(event())
    bench.service().remove(ACME, endpoint.id)
    assert bench.service().deliver(DeliveryTask(endpoint.id, delivery.id)) == "endpoint removed"
    assert bench.sender.posts == []


def test_rotation_signs_with_both_secrets_until_the_overlap_ends(bench: Bench) -> None:
    endpoint = register(bench)
    rotated = bench.service().rotate(ACME, endpoint.id, timedelta(hours=1))
    assert rotated.secret != endpoint.secrets[0].value
    (delivery,) = bench.service().fan_out(event())
    bench.service().deliver(DeliveryTask(endpoint.id, delivery.id))
    (_, headers), *_ = bench.sender.posts
    assert headers[rules.SIGNATURE_HEADER].count("v1=") == 2
    later = bench.at(START + timedelta(hours=2))
    (again,) = later.fan_out(event(event_id="e2"))
    later.deliver(DeliveryTask(endpoint.id, again.id))
    assert bench.sender.posts[-1][1][rules.SIGNATURE_HEADER].count("v1=") == 1
    with pytest.raises(InvalidRequestError):
        bench.service().rotate(ACME, endpoint.id, timedelta(days=8))


def test_the_queue_delays_each_hop_at_most_15_minutes() -> None:
    from typing import Any, cast  # noqa: PLC0415

    from filejobs.adapters.webhook_http import SqsWebhookQueue, delivery_task_of  # noqa: PLC0415

    sent: list[dict[str, Any]] = []

    class Client:
        def send_message(self, **request: Any) -> None:
            sent.append(request)

    queue = SqsWebhookQueue(cast("Any", Client()), "https://queue")
    task = DeliveryTask(
        "wh-0123456789abcdef01234567-acme", "dl-20261204T120000Z-0123456789abcdef0123"
    )
    for delay in (timedelta(hours=6), timedelta(seconds=42), timedelta(seconds=-5)):
        queue.send(task, delay)
    assert [r["DelaySeconds"] for r in sent] == [900, 42, 0]
    assert delivery_task_of(sent[0]["MessageBody"]) == task
    assert delivery_task_of('{"webhook_delivery": {"endpoint_id": 1}}') is None


class CountingStore(Store):
    def __init__(self) -> None:
        super().__init__()
        self.endpoint_reads = 0

    def endpoints(self, tenant: str) -> list[Endpoint]:
        self.endpoint_reads += 1
        return super().endpoints(tenant)


@dataclass
class Instance:
    """One webhooks function instance: its remembered endpoints, on a clock of its own."""

    bench: Bench
    store: CountingStore
    seconds: list[float] = field(default_factory=lambda: [0.0])

    def __post_init__(self) -> None:
        self.remembered = RememberedEndpoints(self.store.endpoints, clock=lambda: self.seconds[0])

    def service(self) -> Webhooks:
        bench = self.bench
        return Webhooks(
            self.store,
            endpoints_of=self.remembered,
            queue=lambda: bench.queue,
            sender=lambda: bench.sender,
            clock=lambda: bench.now[0],
        )

    def later(self, seconds: float) -> Instance:
        self.seconds[0] += seconds
        return self


@pytest.fixture
def instance() -> Instance:
    store = CountingStore()
    return Instance(Bench(store, Queue(), Sender(), Notices(), [START]), store)


def test_a_tenant_without_endpoints_costs_one_read_a_minute_however_many_events(
    instance: Instance,
) -> None:
    for n in range(50):
        assert instance.service().fan_out(event(event_id=f"e{n}")) == []
    assert instance.store.endpoint_reads == 1
    instance.later(ENDPOINTS_KEPT.total_seconds()).service().fan_out(event(event_id="late"))
    assert instance.store.endpoint_reads == 2


def test_an_endpoint_registered_gets_the_events_of_at_most_a_minute_later(
    instance: Instance,
) -> None:
    # given an instance that has just seen the tenant with no endpoint
    assert instance.service().fan_out(event(event_id="before")) == []
    endpoint = register(instance.bench)
    # then an event within the minute still finds none; one after it reaches the endpoint
    assert instance.later(59).service().fan_out(event(event_id="within")) == []
    made = instance.later(1).service().fan_out(event(event_id="after"))
    assert [d.endpoint_id for d in made] == [endpoint.id]


def test_an_endpoint_removed_or_disabled_within_the_minute_gets_no_post(
    instance: Instance,
) -> None:
    removed, disabled = register(instance.bench), register(instance.bench)
    assert len(instance.service().fan_out(event(event_id="first"))) == 2
    instance.service().remove(ACME, removed.id)
    instance.store.endpoints_[disabled.id] = Endpoint(
        **{**disabled.__dict__, "status": EndpointStatus.DISABLED}
    )
    # when an event comes while the instance still remembers both
    made = instance.later(1).service().fan_out(event(event_id="second"))
    assert len(made) == 2
    outcomes = {
        d.endpoint_id: instance.service().deliver(DeliveryTask(d.endpoint_id, d.id)) for d in made
    }
    # then the delivery reads each endpoint first: nothing is posted to either
    assert outcomes == {removed.id: "endpoint removed", disabled.id: "endpoint disabled"}
    assert instance.bench.sender.posts == []
