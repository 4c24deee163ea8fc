"""Every route of the status API refuses a caller it cannot identify (401) and hides each tenant's
files and jobs from every other tenant (404, worded as for ids that never existed), writing
nothing when it refuses.

The routes are template.yaml's own (every `Api` event of every function, as the local stack
routes them): a route added to the template without a row in ROUTES fails
`test_every_route_of_the_template_has_a_row_here`, so none goes untested.

Who authenticates what, as designed (template.yaml, access.py, docs/API_AUTH.md):
- No route holding data is public. API Gateway (FileJobsApi's DefaultAuthorizer AWS_IAM, which
  only the CORS preflight of POST /uploads opts out of; locally, the router's bearer tokens)
  refuses an unsigned request on every other route, /health, /openapi.json, /docs and the
  console's shell included, before the function runs. With ApiAuth=COGNITO, a second API
  (ConsoleApi) fronts the same function with a user pool's authorizer on every route but the
  console's shell, /console and /console/{asset} (test_template_console_sign_in.py checks it
  method by method).
- The function identifies the caller (access.py) on every route but /health, which answers
  liveness and nothing else, reading neither the caller nor a table (as test_api.py's
  test_health_answers_without_reading_the_caller_or_the_table shows).
- /openapi.json and /docs hold no tenant's data: every identified caller gets the same answer.
- Every other route reads or changes one tenant's files and jobs, scoped to the caller's.

Through the API's Lambda handler, against test_api.py's stack (moto tables and queues built from
template.yaml).
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest
from aws_lambda_powertools.utilities.typing import LambdaContext
from moto.core.models import DEFAULT_ACCOUNT_ID as ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from filejobs.data.job_repository import JobRepository
from filejobs.data.operation_repository import OperationRepository
from filejobs.data.preset_repository import PresetRepository
from filejobs.data.schedule_repository import ScheduleRepository
from filejobs.domain import webhooks
from filejobs.domain.ingest import IngestPlan
from filejobs.domain.job import JobType, ProcessingJob
from filejobs.domain.operations import Action, JobFilter, Operation
from filejobs.domain.presets import Preset, PresetJob
from filejobs.domain.schedules import Schedule, ScheduleAction
from filejobs.domain.time import utcnow
from filejobs_dev.infra.template import function_definitions, resources_of_type
from filejobs_dev.local.stack import routes_of
from functions.api import app as api_function
from tests.factories import ingest_plan
from tests.integration.test_api import (
    TEMPLATE,
    Api,
    cancelled,
    ingested,
    stack,  # noqa: F401 (the fixture `api` builds on)
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

ACCOUNT = "123456789012"  # the account of test_api.py's events
# What API_TENANT_ROLE and API_OPERATOR_ROLE resolve to once deployed (!Ref of the roles).
TENANT_ROLE = "filejobs-ApiTenantRole-1A2B3C4D5E6F"
OPERATOR_ROLE = "filejobs-ApiOperatorRole-6F5E4D3C2B1A"
# ... and their unique ids (!GetAtt of RoleId), which API Gateway puts in identity.user.
ROLE_IDS = {TENANT_ROLE: "AROATENANTROLE00001", OPERATOR_ROLE: "AROAOPERATORROLE002"}


def assumed(role: str, session: str) -> str:
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}"


# --- callers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the authorizer context API Gateway (or the local router) puts on
    it, and the IAM principal that signed it (requestContext.identity.userArn)."""

    label: str
    authorizer: dict[str, str] | None = None
    signer: str | None = None


ACME = Caller("acme, signed with the tenant role", signer=assumed(TENANT_ROLE, "acme"))
GLOBEX = Caller("globex, signed with the tenant role", signer=assumed(TENANT_ROLE, "globex"))
OPERATOR = Caller(
    "an operator, signed with the operator role", signer=assumed(OPERATOR_ROLE, "ops")
)


def _claims(claims: dict[str, str]) -> dict[str, str]:
    # A Cognito authorizer nests the token's claims: not the flat dict[str, str] Api sends.
    return cast("dict[str, str]", {"claims": claims})


UNIDENTIFIED = [
    Caller("no authorizer context and no signer"),
    Caller("an empty authorizer context", {}),
    Caller("a principal with neither role nor tenant", {"principalId": "someone"}),
    Caller("an unknown role", {"role": "admin", "tenant": "acme"}),
    Caller("the tenant role without a tenant", {"role": "tenant"}),
    Caller("the tenant role with a malformed tenant", {"role": "tenant", "tenant": "a#b"}),
    Caller("a tenant with a trailing newline", {"role": "tenant", "tenant": "acme\n"}),
    Caller("the operator role with a malformed tenant", {"role": "operator", "tenant": "../x"}),
    Caller("a Cognito user with neither tenant nor group", _claims({"cognito:groups": "users"})),
    Caller("a Cognito user with a malformed tenant", _claims({"custom:tenant": "a b"})),
    Caller("an IAM user of the account", signer=f"arn:aws:iam::{ACCOUNT}:user/acme"),
    Caller("another role of the account", signer=assumed("AdminRole", "acme")),
    Caller("the tenant role, as a session no tenant has", signer=assumed(TENANT_ROLE, "a@b")),
    Caller(
        "another account's role of the tenant role's name",
        signer=f"arn:aws:sts::210987654321:assumed-role/{TENANT_ROLE}/acme",
    ),
    Caller("a federated user", signer=f"arn:aws:sts::{ACCOUNT}:federated-user/acme"),
]


@contextmanager
def signed_by(signer: str | None) -> Iterator[None]:
    """Within, requests carry `signer` as requestContext.identity.userArn, where API Gateway's
    AWS_IAM auth puts the principal that signed the request."""
    if signer is None:
        yield
        return
    handler = api_function.handler

    role, _, session = signer.rpartition(":assumed-role/")[2].partition("/")
    unique_id = ROLE_IDS.get(role, "AROAANOTHERROLE0003")

    def signed(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        event["requestContext"]["identity"]["userArn"] = signer
        event["requestContext"]["identity"]["user"] = f"{unique_id}:{session}"
        answer: dict[str, Any] = handler(event, context)
        return answer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api_function, "handler", signed)
        yield


# --- what each route addresses --------------------------------------------------------------------


@dataclass(frozen=True)
class Owned:
    """One tenant's file and its jobs, as the routes address them: `pending` may be cancelled,
    `stopped` (cancelled) may be retried or deleted."""

    tenant: str
    plan: IngestPlan
    stopped: ProcessingJob
    operation: str  # the id of a bulk operation the tenant started
    schedule: str  # the id of a recurring schedule of the tenant's
    webhook: str  # the id of a webhook endpoint of the tenant's
    delivery: str  # the id of one of its deliveries
    preset: str = "scan-first"  # the name of an upload preset of the tenant's

    @property
    def pending(self) -> ProcessingJob:
        return self.plan.jobs[0]

    @property
    def names(self) -> list[tuple[str, str]]:
        """(placeholder, value) of everything that names this tenant's data, longest first."""
        return [
            ("<key>", self.plan.file.key),
            ("<file>", self.plan.file.id),
            *((f"<job{n}>", job.id) for n, job in enumerate(self.plan.jobs)),
            ("<operation>", self.operation),
            ("<schedule>", self.schedule),
            ("<webhook>", self.webhook),
            ("<delivery>", self.delivery),
            ("<tenant>", self.tenant),
        ]

    def masked(self, text: str) -> str:
        for placeholder, value in self.names:
            text = text.replace(value, placeholder)
        return text


def owned(tenant: str, name: str = "a.png") -> Owned:
    """A file of `tenant`, recorded with its jobs, the second of them cancelled."""
    plan = ingested(tenant, name)
    stopped = cancelled(plan.jobs[1])
    webhook, delivery = webhook_of(tenant)
    schedule = recorded_schedule(tenant)
    operation = started_operation(tenant)
    preset = recorded_preset(tenant)
    return Owned(tenant, plan, stopped, operation, schedule, webhook, delivery, preset)


def recorded_preset(tenant: str, name: str = "scan-first") -> str:
    """An upload preset of `tenant`'s (its current version, else a first one), as PUT
    /presets/{name} records it."""
    store = PresetRepository(boto3.client("dynamodb"), os.environ["OPS_TABLE_NAME"])
    current = store.current(tenant, consistent=True)
    if current.tenant_presets().named(name) is None:
        version = store.latest_version(tenant, name) + 1  # it may have been removed before
        preset = Preset(
            tenant, name, version, (PresetJob(JobType.VIRUS_SCAN),), updated_at=utcnow()
        )
        changed = (*current.presets, preset)
        assert store.save(tenant, changed, preset, after=current.revision)
    return name


def webhook_of(tenant: str) -> tuple[str, str]:
    """An endpoint of `tenant`'s (the one it has, else a new one) and a new delivery of it."""
    # as the API stores one: its secret sealed with the stack's key
    from filejobs import runtime  # noqa: PLC0415

    store = runtime.webhook_repository()
    now = utcnow()
    existing = store.endpoints(tenant)
    if existing:
        endpoint = existing[0]
    else:
        endpoint = webhooks.Endpoint(
            id=webhooks.new_endpoint_id(tenant),
            tenant=tenant,
            url="https://hooks.example.com/in",
            event_types=frozenset({"Job Completed"}),
            secrets=(webhooks.Secret(webhooks.new_secret(), now),),
            created_at=now,
            updated_at=now,
            created_by=f"api:tenant:{tenant}",
        )
        store.create_endpoint(endpoint)
    delivery = webhooks.Delivery(
        id=webhooks.resend_id(now),
        endpoint_id=endpoint.id,
        tenant=tenant,
        event_id=f"job:{uuid.uuid4()}:1:completed:x",
        event_type="Job Completed",
        body="{}",
        created_at=now,
        updated_at=now,
    )
    assert store.create_delivery(delivery)
    return endpoint.id, delivery.id


def started_operation(tenant: str) -> str:
    """An operation of `tenant`'s, as POST /operations records it (not run)."""
    now = utcnow()
    operation = Operation(
        id=f"op-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}",
        action=Action.RETRY,
        filter=JobFilter(tenant=tenant),
        reason="a bad deploy",
        created_by=f"api:tenant:{tenant}",
        created_at=now,
        updated_at=now,
        matched=1,
    )
    store = OperationRepository(boto3.client("dynamodb"), os.environ["OPS_TABLE_NAME"])
    return store.create(operation, caller=operation.created_by, key=operation.id).id


def recorded_schedule(tenant: str) -> str:
    """A nightly rescan schedule of `tenant`'s (the one it has, else a new one, as POST
    /schedules records it, not armed): one a tenant, so the rows never reach the most it may."""
    store = ScheduleRepository(boto3.client("dynamodb"), os.environ["OPS_TABLE_NAME"])
    if existing := store.of_tenant(tenant):
        return existing[0].id
    now = utcnow()
    schedule = Schedule(
        id=f"sch-{uuid.uuid4().hex[:16]}",
        tenant=tenant,
        name="nightly",
        expression="cron(0 3 * * ? *)",
        timezone="UTC",
        action=ScheduleAction.RESCAN,
        prefix=f"uploads/{tenant}/",
        created_by=f"api:tenant:{tenant}",
        created_at=now,
        updated_at=now,
    )
    assert store.create(schedule)
    return schedule.id


def never_recorded(tenant: str) -> Owned:
    """Ids and a key of the same shapes as `owned`'s, that no table holds."""
    plan = ingest_plan(utcnow(), "image/png", tenant=tenant, name="a.png")
    now = utcnow()
    operation = f"op-{now:%Y%m%dT%H%M%SZ}-0123abcd"
    webhook = f"wh-{'0' * 24}-{tenant}"
    return Owned(
        tenant,
        plan,
        plan.jobs[1],
        operation,
        "sch-0123456789abcdef",
        webhook,
        webhooks.resend_id(now),
    )


@dataclass(frozen=True)
class Request:
    path: str
    query: dict[str, str] | None = None
    body: str | None = None


@dataclass(frozen=True)
class Sent:
    status: int
    text: str  # the body, as sent

    @property
    def json(self) -> Any:
        return json.loads(self.text)


class Access(Enum):
    # The operator console's shell (HTML, CSS, JavaScript: no data); test_api_console.py.
    PUBLIC = "no authorizer at the gateway; the function serves the same files to anyone"
    GATEWAY = "API Gateway authenticates it; the function tells whoever it reaches it is alive"
    CALLER = "the function refuses an unidentified caller; the answer holds no tenant's data"
    TENANT = "the function refuses an unidentified caller and scopes the answer to its tenant"
    OPERATOR = "the function refuses an unidentified caller (401) and every tenant (403)"


@dataclass(frozen=True)
class RouteCase:
    access: Access
    request: Callable[[Owned], Request]  # the request for that tenant's resource
    lists: tuple[dict[str, str], ...] = ()  # a listing: the query filters to list it with


THUMBNAIL = json.dumps({"job_type": JobType.THUMBNAIL_GENERATION.value})

# One row per route of template.yaml, keyed as API Gateway routes: (method, resource).
ROUTES: dict[tuple[str, str], RouteCase] = {
    ("GET", "/health"): RouteCase(Access.GATEWAY, lambda _: Request("/health")),
    ("GET", "/console"): RouteCase(Access.PUBLIC, lambda _: Request("/console")),
    ("GET", "/console/{asset}"): RouteCase(Access.PUBLIC, lambda _: Request("/console/console.js")),
    ("GET", "/openapi.json"): RouteCase(Access.CALLER, lambda _: Request("/openapi.json")),
    ("GET", "/docs"): RouteCase(Access.CALLER, lambda _: Request("/docs")),
    ("GET", "/files"): RouteCase(
        Access.TENANT,
        lambda o: Request("/files", {"key": o.plan.file.key, "bucket": o.plan.file.bucket}),
        lists=({},),
    ),
    ("GET", "/files/{file_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/files/{o.plan.file.id}"), lists=({},)
    ),
    ("DELETE", "/files/{file_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/files/{o.plan.file.id}")
    ),
    ("GET", "/files/{file_id}/jobs"): RouteCase(
        Access.TENANT,
        lambda o: Request(f"/files/{o.plan.file.id}/jobs"),
        lists=({}, {"status": "pending"}, {"status": "cancelled"}),
    ),
    ("POST", "/files/{file_id}/jobs"): RouteCase(
        Access.TENANT, lambda o: Request(f"/files/{o.plan.file.id}/jobs", body=THUMBNAIL)
    ),
    ("GET", "/jobs"): RouteCase(
        Access.TENANT,
        lambda o: Request("/jobs", {"tenant": o.tenant}),
        lists=(
            {},
            {"status": "pending"},
            {"status": "cancelled"},
            {"job_type": JobType.VIRUS_SCAN.value},
            {"limit": "1"},
        ),
    ),
    ("GET", "/jobs/{job_id}"): RouteCase(Access.TENANT, lambda o: Request(f"/jobs/{o.pending.id}")),
    ("DELETE", "/jobs/{job_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/jobs/{o.stopped.id}")
    ),
    ("POST", "/jobs/{job_id}/cancel"): RouteCase(
        Access.TENANT,
        lambda o: Request(f"/jobs/{o.pending.id}/cancel", body='{"reason": "not wanted"}'),
    ),
    ("POST", "/jobs/{job_id}/retry"): RouteCase(
        Access.TENANT, lambda o: Request(f"/jobs/{o.stopped.id}/retry")
    ),
    ("POST", "/files/{file_id}/rescan"): RouteCase(
        Access.TENANT,
        lambda o: Request(f"/files/{o.plan.file.id}/rescan", body='{"reason": "new signatures"}'),
    ),
    ("POST", "/rescans"): RouteCase(
        Access.TENANT,
        lambda o: Request("/rescans", body=json.dumps({"tenant": o.tenant, "prefix": "uploads/"})),
    ),
    # Aggregates, not listings of items: scoped by the tenant they name (test_bulk_operations).
    ("GET", "/overview"): RouteCase(
        Access.TENANT, lambda o: Request("/overview", {"tenant": o.tenant})
    ),
    ("GET", "/failures"): RouteCase(
        Access.TENANT, lambda o: Request("/failures", {"tenant": o.tenant})
    ),
    ("POST", "/operations"): RouteCase(
        Access.TENANT,
        lambda o: Request(
            "/operations",
            body=json.dumps(
                {
                    "action": "retry",
                    "filter": {"tenant": o.tenant},
                    "reason": "a bad deploy",
                    "dry_run": True,
                }
            ),
        ),
    ),
    ("GET", "/operations"): RouteCase(
        Access.TENANT, lambda o: Request("/operations", {"tenant": o.tenant}), lists=({},)
    ),
    ("GET", "/operations/{operation_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/operations/{o.operation}")
    ),
    ("POST", "/schedules"): RouteCase(
        Access.TENANT,
        lambda o: Request(
            "/schedules",
            body=json.dumps(
                {
                    "name": "weekly rescan",
                    "expression": "cron(0 4 ? * SUN *)",
                    "action": "rescan",
                    "prefix": f"uploads/{o.tenant}/",
                    "tenant": o.tenant,
                }
            ),
        ),
    ),
    ("GET", "/schedules"): RouteCase(
        Access.TENANT, lambda o: Request("/schedules", {"tenant": o.tenant}), lists=({},)
    ),
    ("GET", "/schedules/{schedule_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/schedules/{o.schedule}")
    ),
    ("PATCH", "/schedules/{schedule_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/schedules/{o.schedule}", body='{"enabled": false}')
    ),
    ("DELETE", "/schedules/{schedule_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/schedules/{o.schedule}")
    ),
    ("GET", "/presets"): RouteCase(
        Access.TENANT, lambda o: Request("/presets", {"tenant": o.tenant}), lists=({},)
    ),
    ("PUT", "/presets/{preset_name}"): RouteCase(
        Access.TENANT,
        lambda o: Request(
            f"/presets/{o.preset}",
            {"tenant": o.tenant},
            body=json.dumps({"jobs": [{"job_type": "virus_scan"}], "tenant_default": True}),
        ),
    ),
    ("GET", "/presets/{preset_name}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/presets/{o.preset}", {"tenant": o.tenant})
    ),
    ("DELETE", "/presets/{preset_name}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/presets/{o.preset}", {"tenant": o.tenant})
    ),
    ("GET", "/tenants/{tenant}/quotas"): RouteCase(
        Access.TENANT, lambda o: Request(f"/tenants/{o.tenant}/quotas")
    ),
    ("POST", "/uploads"): RouteCase(
        Access.TENANT,
        lambda o: Request("/uploads", body=json.dumps({"tenant": o.tenant, "filename": "a.png"})),
    ),
    # A CORS preflight: no caller, no data; the same answer to anyone (test_browser_upload.py).
    ("OPTIONS", "/uploads"): RouteCase(Access.PUBLIC, lambda _: Request("/uploads")),
    ("POST", "/webhooks"): RouteCase(
        Access.TENANT,
        lambda o: Request(
            "/webhooks",
            body=json.dumps(
                {
                    "url": "https://hooks.example.com/new",
                    "event_types": ["File Processed"],
                    "tenant": o.tenant,
                }
            ),
        ),
    ),
    ("GET", "/webhooks"): RouteCase(
        Access.TENANT, lambda o: Request("/webhooks", {"tenant": o.tenant}), lists=({},)
    ),
    ("GET", "/webhooks/{webhook_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/webhooks/{o.webhook}")
    ),
    ("DELETE", "/webhooks/{webhook_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/webhooks/{o.webhook}")
    ),
    ("POST", "/webhooks/{webhook_id}/rotate"): RouteCase(
        Access.TENANT, lambda o: Request(f"/webhooks/{o.webhook}/rotate")
    ),
    ("POST", "/webhooks/{webhook_id}/enable"): RouteCase(
        Access.TENANT, lambda o: Request(f"/webhooks/{o.webhook}/enable")
    ),
    ("GET", "/webhooks/{webhook_id}/deliveries"): RouteCase(
        Access.TENANT,
        lambda o: Request(f"/webhooks/{o.webhook}/deliveries"),
        lists=({}, {"limit": "1"}),
    ),
    ("GET", "/webhooks/{webhook_id}/deliveries/{delivery_id}"): RouteCase(
        Access.TENANT, lambda o: Request(f"/webhooks/{o.webhook}/deliveries/{o.delivery}")
    ),
    ("POST", "/webhooks/{webhook_id}/deliveries/{delivery_id}/resend"): RouteCase(
        Access.TENANT,
        lambda o: Request(f"/webhooks/{o.webhook}/deliveries/{o.delivery}/resend"),
    ),
    ("PUT", "/tenants/{tenant}/quotas"): RouteCase(
        Access.OPERATOR,
        lambda o: Request(f"/tenants/{o.tenant}/quotas", body='{"files_per_day": 500}'),
    ),
    # A dry run: the row's requests never erase the tenant the other rows read.
    ("POST", "/tenants/{tenant}/erasure"): RouteCase(
        Access.OPERATOR,
        lambda o: Request(
            f"/tenants/{o.tenant}/erasure", body='{"reason": "leaving", "dry_run": true}'
        ),
    ),
}


def rows(*access: Access, listing: bool = False) -> list[tuple[str, str, RouteCase]]:
    """(method, resource, case) of the routes of these kinds (and listings only, if asked)."""
    return [
        (method, resource, case)
        for (method, resource), case in ROUTES.items()
        if case.access in access and (case.lists or not listing)
    ]


# --- helpers --------------------------------------------------------------------------------------


@pytest.fixture
def api(stack: Api, monkeypatch: pytest.MonkeyPatch) -> Api:  # noqa: F811 (test_api's fixture)
    # the stack's API roles, as the deployed function knows them
    monkeypatch.setenv("API_TENANT_ROLE", TENANT_ROLE)
    monkeypatch.setenv("API_OPERATOR_ROLE", OPERATOR_ROLE)
    monkeypatch.setenv("API_TENANT_ROLE_ID", ROLE_IDS[TENANT_ROLE])
    monkeypatch.setenv("API_OPERATOR_ROLE_ID", ROLE_IDS[OPERATOR_ROLE])
    monkeypatch.setenv("API_ACCOUNT_ID", ACCOUNT)
    return stack


def send(api: Api, method: str, request: Request, caller: Caller) -> Sent:
    with signed_by(caller.signer):
        response = api.raw(
            method, request.path, who=caller.authorizer, query=request.query, body=request.body
        )
    return Sent(response["statusCode"], response["body"])


# The queues the API function is given (its environment's !Ref of a queue): all it can send to.
API_QUEUES = sorted(
    value["Ref"]
    for value in function_definitions(TEMPLATE)["ApiFunction"].environment.values()
    if isinstance(value, dict)
    and value.get("Ref") in resources_of_type(TEMPLATE, "AWS::SQS::Queue")
)


@dataclass(frozen=True)
class Store:
    """The stack's tables and the queues the API sends to, read directly."""

    dynamodb: DynamoDBClient
    sqs: SQSClient
    queue_urls: list[str]

    def snapshot(self) -> dict[str, Any]:
        """Every item of every table and the queues' message counts: what a refused request must
        leave exactly as it found it.

        The items are read from moto's own tables, in this process (the fixture's moto, pinned):
        a Scan of every table through botocore before and after each of about 80 requests was
        38 of these tests' 48 seconds, and reads the same items."""
        backend = dynamodb_backends[ACCOUNT_ID][self.dynamodb.meta.region_name]
        tables = {
            name: sorted(json.dumps(item.to_json(), sort_keys=True) for item in table.all_items())
            for name, table in backend.tables.items()
        }
        queues = [
            self.sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
            for url in self.queue_urls
        ]
        return {"tables": tables, "queues": queues}


@pytest.fixture
def store(api: Api) -> Store:
    urls = [api.queue_urls[queue] for queue in API_QUEUES]
    return Store(boto3.client("dynamodb"), boto3.client("sqs"), urls)


def assert_error(sent: Sent, status: int, code: str, context: str) -> None:
    """The standard error shape: {"error": {"code", "message"}} and nothing else."""
    body = sent.json
    assert sent.status == status, (context, sent)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, (context, body)
    assert body["error"]["code"] == code, (context, body)


# --- the routes are the template's ----------------------------------------------------------------


def test_every_route_of_the_template_has_a_row_here() -> None:
    # given the routes API Gateway serves: every Api event of every function of template.yaml
    routes = routes_of(function_definitions(TEMPLATE))
    # then each has exactly one row in ROUTES, and there is no row for a route it lacks
    assert sorted(ROUTES) == sorted((r.method, r.resource) for r in routes)
    # and each row's request is one of its route's paths
    acme = never_recorded("acme")
    for route in routes:
        path = ROUTES[route.method, route.resource].request(acme).path
        assert route.pattern.match(path), (route.method, route.resource, path)


# --- 1. an unidentified caller: 401, nothing written ----------------------------------------------


# One stack per behaviour, each route a subtest: a stack takes longer to build than its checks.


@pytest.mark.slow
def test_a_caller_the_function_cannot_identify_is_refused_401_and_nothing_is_written(
    api: Api, store: Store, subtests: pytest.Subtests
) -> None:
    for n, (method, resource, case) in enumerate(
        rows(Access.CALLER, Access.TENANT, Access.OPERATOR)
    ):
        with subtests.test(f"{method} {resource}"):
            # given a file and jobs of acme, and the request for them on this route
            request = case.request(owned("acme", f"{n}.png"))
            before = store.snapshot()
            # when a caller without a valid identity sends it
            for caller in UNIDENTIFIED:
                sent = send(api, method, request, caller)
                # then it is refused, 401 in the standard shape
                assert_error(sent, 401, "unauthorized", caller.label)
            # and nothing was written
            assert store.snapshot() == before
            # while acme itself, signed with the tenant role (an operator, on an operator's
            # route), is answered
            entitled = OPERATOR if case.access is Access.OPERATOR else ACME
            assert 200 <= send(api, method, request, entitled).status < 300


def test_health_tells_anyone_the_gateway_lets_through_only_that_it_is_alive(
    api: Api, store: Store
) -> None:
    # given a tenant's files and jobs
    request = ROUTES["GET", "/health"].request(owned("acme"))
    before = store.snapshot()
    # when an unidentified caller reaches /health (API Gateway's AWS_IAM auth refuses an unsigned
    # one first: test_every_route_is_behind_the_apis_authorizer), then it reads that the API is
    # alive, and nothing else
    for caller in UNIDENTIFIED:
        sent = send(api, "GET", request, caller)
        assert (sent.status, sent.json) == (200, {"status": "ok"}), caller.label
    assert store.snapshot() == before


def test_the_documentation_holds_no_tenants_data(api: Api) -> None:
    # given files of acme and globex
    acme, globex = owned("acme"), owned("globex")
    for method, resource, case in rows(Access.CALLER):
        request = case.request(acme)
        # when each asks for it, then each gets the same answer, naming neither
        mine, theirs = send(api, method, request, ACME), send(api, method, request, GLOBEX)
        assert mine == theirs and mine.status == 200, resource
        assert not any(value in mine.text for _, value in acme.names + globex.names), resource


# --- 2. another tenant's file or job: 404 as if it did not exist, nothing written -----------------


@pytest.mark.slow
def test_a_tenant_addressing_another_tenants_file_or_job_is_told_it_does_not_exist(
    api: Api, store: Store, subtests: pytest.Subtests
) -> None:
    owned("acme")
    for n, (method, resource, case) in enumerate(rows(Access.TENANT)):
        with subtests.test(f"{method} {resource}"):
            # given a file and jobs of acme and of globex, and ids of the same shapes no one has
            globex, nobody = owned("globex", f"{n}.png"), never_recorded("initech")
            before = store.snapshot()
            # when acme sends the request for globex's resource
            foreign = send(api, method, case.request(globex), ACME)
            # then it is 404 in the standard shape
            assert_error(foreign, 404, "not_found", "globex's resource, asked for by acme")
            # worded exactly as for a resource that does not exist (the names acme sent masked)
            missing = send(api, method, case.request(nobody), ACME)
            assert_error(missing, 404, "not_found", "a resource that does not exist")
            assert globex.masked(foreign.text) == nobody.masked(missing.text)
            # so nothing of globex's is read back but what acme itself sent
            sent = json.dumps(dataclasses.asdict(case.request(globex)))
            assert not any(value in foreign.text for _, value in globex.names if value not in sent)
            # and nothing was written: globex's jobs are as they were, no job or message added
            assert store.snapshot() == before
            # while globex itself, sending the same request, is answered
            assert 200 <= send(api, method, case.request(globex), GLOBEX).status < 300


def test_an_operators_route_refuses_every_tenant_403_whoever_it_names_and_writes_nothing(
    api: Api, store: Store, subtests: pytest.Subtests
) -> None:
    for n, (method, resource, case) in enumerate(rows(Access.OPERATOR)):
        with subtests.test(f"{method} {resource}"):
            # given files of acme and globex (each row's own: a file is recorded once)
            acme, globex = owned("acme", f"op-{n}.png"), owned("globex", f"op-{n}.png")
            before = store.snapshot()
            # when acme sends the request for itself, and for globex
            own = send(api, method, case.request(acme), ACME)
            other = send(api, method, case.request(globex), ACME)
            # then both are 403 in the standard shape, worded alike: nothing told of either
            assert_error(own, 403, "forbidden", "acme's own")
            assert_error(other, 403, "forbidden", "globex's, asked by acme")
            assert own.text == other.text
            # and nothing was written
            assert store.snapshot() == before
            # while an operator is answered
            assert send(api, method, case.request(globex), OPERATOR).status == 200


# --- 3. a listing never shows another tenant's items ----------------------------------------------


def tenants_in(body: Any) -> set[str]:
    """The `tenant` of every file and job view anywhere in an answer."""
    if isinstance(body, list):
        return {t for item in body for t in tenants_in(item)}
    if not isinstance(body, dict):
        return set()
    found = {body["tenant"]} if "tenant" in body else set()
    return found | {t for value in body.values() for t in tenants_in(value)}


def test_a_tenants_listing_never_shows_another_tenants_items(
    api: Api, subtests: pytest.Subtests
) -> None:
    # given files and jobs of acme and globex, of the same names, pending and cancelled alike
    acme, globex = owned("acme"), owned("globex")
    # and a globex job recorded against acme's file, which ingest never writes
    stray = dataclasses.replace(
        globex.pending, id=str(uuid.uuid4()), file_id=acme.plan.file.id, idempotency_key="x"
    )
    assert JobRepository().create(stray)
    globex_names = [value for _, value in globex.names] + [stray.id]
    for method, resource, case in rows(Access.TENANT, listing=True):
        base = case.request(acme)
        for filters in case.lists:
            with subtests.test(f"{method} {resource}", filters=filters):
                # when acme lists, with this filter, page after page
                pages = pages_of(api, method, base, filters)
                # then it shows acme's items, and not one of globex's
                assert set().union(*(tenants_in(p.json) for p in pages)) == {"acme"}
                assert not any(name in p.text for p in pages for name in globex_names)


def pages_of(api: Api, method: str, base: Request, filters: dict[str, str]) -> list[Sent]:
    """Every page of a listing as acme, following next_token."""
    query: dict[str, str] | None = {**(base.query or {}), **filters} or None
    pages = []
    while True:
        sent = send(api, method, dataclasses.replace(base, query=query), ACME)
        assert sent.status == 200, sent
        pages.append(sent)
        token = sent.json.get("next_token")
        if not token:
            return pages
        query = {**(query or {}), "next_token": token}


# --- the deployed API: API Gateway authenticates every route --------------------------------------

# Routes API Gateway serves without an authorizer: a browser's CORS preflight of POST /uploads,
# which a browser sends unsigned and which reads nothing. (The console's shell takes a signed
# caller here, `filejobs console` signing it; only ConsoleApi serves it unsigned: docs/CONSOLE.md.)
PUBLIC_AT_THE_GATEWAY: frozenset[tuple[str, str]] = frozenset({("OPTIONS", "/uploads")})


def test_every_route_is_behind_the_apis_authorizer() -> None:
    # given every Api event of every function of the template
    resources = TEMPLATE["Resources"]
    events = [
        (name, properties)
        for name, spec in function_definitions(TEMPLATE).items()
        for kind, properties in spec.events
        if kind == "Api"
    ]
    assert events
    for name, event in events:
        route = (str(event["Method"]).upper(), str(event["Path"]))
        # then it is on an API of the template, not SAM's implicit one (which has no auth)
        api_id = event.get("RestApiId", {}).get("Ref")
        assert resources.get(api_id, {}).get("Type") == "AWS::Serverless::Api", (name, route)
        auth = resources[api_id]["Properties"].get("Auth", {})
        # whose default authorizer is IAM or one the API declares
        default = auth.get("DefaultAuthorizer")
        assert default in {"AWS_IAM", *auth.get("Authorizers", {})}, (name, route)
        # and which it does not opt out of, unless documented public
        authorizer = event.get("Auth", {}).get("Authorizer", default)
        assert (authorizer == "NONE") == (route in PUBLIC_AT_THE_GATEWAY), (name, route)


def test_nothing_reaches_the_functions_around_the_authorizer() -> None:
    # given the template's APIs
    apis = resources_of_type(TEMPLATE, "AWS::Serverless::Api")
    for name, api in apis.items():
        properties = api["Properties"]
        # then none has CORS preflight methods (SAM leaves OPTIONS unauthenticated unless told
        # otherwise), nor an OpenAPI definition of its own that could declare other methods
        assert "Cors" not in properties and "DefinitionBody" not in properties, name
        assert "DefinitionUri" not in properties, name
        # and no resource policy: API Gateway's IAM auth then refuses every other account's
        # signer, so the function's match of the API roles by name (access.py) cannot be met by
        # a role of the same name in another account
        assert "ResourcePolicy" not in properties.get("Auth", {}), name
    assert not TEMPLATE.get("Globals", {}).get("Api"), "Globals.Api applies to every API"
    # and no other way in: no other API, method or function URL but the user pool's API
    # (ApiAuth=COGNITO), whose methods test_template_console_sign_in.py checks one by one, and
    # which has no resource policy either
    user_pool_api = {
        "AWS::ApiGateway::RestApi": {"ConsoleApi"},
        "AWS::ApiGateway::Method": {
            "ConsoleApiProxyAny",
            "ConsoleApiShellGet",
            "ConsoleApiShellAssetGet",
        },
    }
    for kind in (
        "AWS::Serverless::HttpApi",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGateway::Method",
        "AWS::ApiGatewayV2::Api",
        "AWS::Lambda::Url",
    ):
        assert set(resources_of_type(TEMPLATE, kind)) == user_pool_api.get(kind, set()), kind
    assert "Policy" not in TEMPLATE["Resources"]["ConsoleApi"]["Properties"]
    functions = resources_of_type(TEMPLATE, "AWS::Serverless::Function")
    assert not any("FunctionUrlConfig" in f.get("Properties", {}) for f in functions.values())
