"""Specification: the queues that start work and the event bus take messages only from this
stack's writers (issue 45: "anyone in the account may publish to the event bus and the webhooks
queue", forged webhooks genuinely signed).

Each locked queue's policy, and the bus's, denies sqs:SendMessage (events:PutEvents) to every
principal but the stack roles whose own policies grant it, while AWS service principals (S3's
notifications, EventBridge's rule targets) are spared: they carry no aws:PrincipalArn, and a
deny on its absence would refuse them. The writer lists are checked against the roles' grants,
so a role that starts sending to a queue fails here until the queue's policy names it.

Conditions are evaluated as IAM evaluates them: a negated operator (ArnNotEquals) holds when its
key is absent; an ...IfExists operator holds when its key is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from filejobs_dev.infra.template import load_template
from filejobs_dev.local.resources import Resources

TEMPLATE = load_template()
RESOURCES: dict[str, dict[str, Any]] = TEMPLATE["Resources"]
DEFAULTS = {
    name: str(spec["Default"]) for name, spec in TEMPLATE["Parameters"].items() if "Default" in spec
}
OPERATORS = "arn:aws:iam::123456789012:role/ops"
LOCK = "OnlyThisStacksWritersSend"
# Not locked, and why (template.yaml IngestQueuePolicy): its writers' roles name the uploads
# bucket, which waits for the queue's policy; its function reads every removal again in S3.
UNLOCKED = {"FileRemovalsQueue"}


def work_queues() -> list[str]:
    return [
        lid
        for lid, resource in RESOURCES.items()
        if resource["Type"] == "AWS::SQS::Queue" and "DeadLetter" not in lid
    ]


def queue_policies() -> Iterator[tuple[str, dict[str, Any]]]:
    for lid, resource in RESOURCES.items():
        if resource["Type"] == "AWS::SQS::QueuePolicy":
            yield lid, resource["Properties"]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _arn_of(value: Any) -> str | None:
    """ "Role" of `!GetAtt Role.Arn`."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        name = target if isinstance(target, str) else ".".join(target)
        return name.removesuffix(".Arn")
    return None


def lock_of(queue: str) -> dict[str, Any] | None:
    """The statement that locks `queue`, if a queue policy has one for it."""
    for _lid, properties in queue_policies():
        statements: list[dict[str, Any]] = properties["PolicyDocument"]["Statement"]
        for statement in statements:
            if statement.get("Sid") == LOCK and queue in {
                _arn_of(r) for r in _listed(statement["Resource"])
            }:
                return statement
    return None


def chosen(value: Any, **parameters: str) -> Any:
    resources = Resources("filejobs", "us-east-1", parameters={**DEFAULTS, **parameters})
    return resources.chosen(TEMPLATE, value)


def writers_allowed(statement: dict[str, Any], **parameters: str) -> set[str]:
    condition = chosen(statement["Condition"], **parameters)
    arns = condition.get("ArnNotEquals", {}).get("aws:PrincipalArn", [])
    return {role for role in (_arn_of(chosen(a, **parameters)) for a in _listed(arns)) if role}


def denies(statement: dict[str, Any], principal: str | None, service: bool, **params: str) -> bool:
    """Whether the lock denies a request by a role (its logical id) or by a service principal."""
    condition = chosen(statement["Condition"], **params)
    allowed = writers_allowed(statement, **params)
    not_a_writer = principal is None or principal not in allowed  # absent key: negation holds
    if "ArnNotEquals" not in condition:
        not_a_writer = True
    # aws:PrincipalIsAWSService is in every request's context: "true" for a service principal
    bool_holds = condition["BoolIfExists"]["aws:PrincipalIsAWSService"] == str(service).lower()
    return not_a_writer and bool_holds


def roles_granted(action: str, target: str) -> set[str]:
    """The roles whose identity policies allow `action` on `target` (a logical id's ARN)."""
    roles: set[str] = set()
    for lid, resource in RESOURCES.items():
        if resource["Type"] == "AWS::IAM::Role":
            owners = [lid]
            documents = [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
        elif resource["Type"] == "AWS::IAM::Policy":
            owners = [r["Ref"] for r in resource["Properties"]["Roles"]]
            documents = [resource["Properties"]["PolicyDocument"]]
        else:
            continue
        for document in documents:
            for statement in document["Statement"]:
                if _grants(statement, action, target):
                    roles.update(owners)
    return roles


def _grants(statement: dict[str, Any], action: str, target: str) -> bool:
    return (
        statement["Effect"] == "Allow"
        and action in _listed(statement["Action"])
        and target in {_arn_of(r) for r in _listed(statement["Resource"])}
    )


# --- the queues ----------------------------------------------------------------------------------


@pytest.mark.parametrize("queue", sorted(set(work_queues()) - UNLOCKED))
def test_every_work_queue_is_locked_to_exactly_the_roles_that_send_to_it(queue: str) -> None:
    statement = lock_of(queue)
    assert statement is not None, f"{queue} has no {LOCK} statement in a queue policy"
    assert statement["Effect"] == "Deny" and statement["Action"] == "sqs:SendMessage"
    assert statement["Principal"] == "*"
    named = writers_allowed(statement, ApiOperatorPrincipals=OPERATORS)
    # every role that sends to it is named (a deploy would refuse it otherwise) ...
    assert roles_granted("sqs:SendMessage", queue) <= named
    # ... and every role named sends to some queue the same statement locks
    locked = {_arn_of(r) for r in _listed(statement["Resource"])}
    senders = set().union(*(roles_granted("sqs:SendMessage", q) for q in locked if q))
    assert named <= senders


def test_a_principal_of_the_account_cannot_forge_a_webhook_a_job_or_an_operation() -> None:
    for queue in ("WebhooksQueue", "ThumbnailGenerationQueue", "OperationsQueue", "IngestQueue"):
        statement = lock_of(queue)
        assert statement is not None
        assert denies(statement, "SomeAdminRole", service=False)
        assert denies(statement, None, service=False)  # a user, or a caller with no ARN


def test_the_stacks_own_writers_still_send() -> None:
    assert not denies(lock_of("WebhooksQueue") or {}, "WebhooksFunctionRole", service=False)
    assert not denies(lock_of("OperationsQueue") or {}, "SchedulerRole", service=False)
    assert not denies(lock_of("VirusScanHighQueue") or {}, "IngestFunctionRole", service=False)


def test_the_services_that_deliver_to_the_queues_are_not_locked_out() -> None:
    # EventBridge's webhook rule, S3's notifications: service principals, no aws:PrincipalArn
    assert not denies(lock_of("WebhooksQueue") or {}, None, service=True)
    assert not denies(lock_of("IngestQueue") or {}, None, service=True)
    # and what they may send is still only what the Allow statements say
    webhooks = RESOURCES["WebhooksQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    (rule,) = [s for s in webhooks if s["Effect"] == "Allow"]
    assert rule["Condition"]["ArnEquals"]["aws:SourceArn"] == {
        "Fn::GetAtt": "WebhookEventsRule.Arn"
    }
    ingest = RESOURCES["IngestQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    (s3,) = [s for s in ingest if s["Effect"] == "Allow"]
    assert set(s3["Condition"]) == {"ArnLike", "StringEquals"}  # SourceArn and SourceAccount


def test_the_ingest_queue_takes_the_operators_backfill_only_when_there_is_an_operator() -> None:
    statement = lock_of("IngestQueue")
    assert statement is not None
    assert not denies(statement, "ApiOperatorRole", False, ApiOperatorPrincipals=OPERATORS)
    assert writers_allowed(statement) == set()  # no operator role: nobody but S3
    assert denies(statement, "ApiOperatorRole", service=False)


# --- the bus -------------------------------------------------------------------------------------


def test_only_the_stacks_publishers_put_events_on_the_bus() -> None:
    policy = RESOURCES["JobEventsBusPolicy"]["Properties"]
    assert policy["EventBusName"] == {"Ref": "JobEventsBus"}
    statement = policy["Statement"]
    assert (statement["Effect"], statement["Action"]) == ("Deny", "events:PutEvents")
    assert writers_allowed(statement) == roles_granted("events:PutEvents", "JobEventsBus")
    assert denies(statement, "SomeAdminRole", service=False)
    assert not denies(statement, "EventsFunctionRole", service=False)
