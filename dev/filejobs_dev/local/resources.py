"""The template's resources created on the AWS emulator, and its intrinsics resolved to them.

Everything comes from template.yaml (tables with their indexes, streams and TTL, queues with
their redrive policies, buckets with their notifications, event buses and their rules, schedule
groups, secrets, the alarms' topic, the alarms and the dashboard): a resource added there exists
locally with no new wiring. `Resources.resolve` answers the
intrinsics the template's function settings use (`!Ref`, `!GetAtt
X.Arn|StreamArn|QueueUrl|QueueName`, `!Sub` with the pseudo parameters and logical ids), the way
CloudFormation would for the real stack.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from filejobs_dev.infra.template import (
    create_buckets,
    create_event_buses,
    create_queues,
    create_secrets,
    create_tables,
    queue_arns,
    resources_of_type,
)

if TYPE_CHECKING:
    from boto3 import Session

ACCOUNT = "123456789012"  # moto's default account


@dataclass
class Resources:
    """Physical names, URLs and ARNs of the template's resources, by logical id."""

    stack_name: str
    region: str
    refs: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    # The template's Conditions as this stack's parameters decide them (`!If` in a function's
    # environment: a role that exists only when its principals are named).
    conditions: dict[str, bool] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        """A template value with its intrinsics replaced by what they name here."""
        while isinstance(value, dict) and set(value) == {"Fn::If"}:
            condition, then, otherwise = value["Fn::If"]
            value = then if self.conditions[condition] else otherwise
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            if function == "Ref":
                return self._ref(str(argument))
            if function == "Fn::GetAtt":
                logical_id, attribute = (
                    argument.split(".", 1) if isinstance(argument, str) else argument
                )
                return self.attributes[logical_id][attribute]
            if function in {"Fn::Sub", "Fn::Join"}:  # Join: a list parameter, as text
                return self._sub(argument) if function == "Fn::Sub" else self._value(value)
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        return value

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::StackName": self.stack_name,
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }
        for table in (pseudo, self.refs, self.parameters):
            if name in table:
                return table[name]
        raise KeyError(f"the local stack cannot resolve !Ref {name}")

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        resolved = {key: str(self.resolve(item)) for key, item in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in resolved:
                return resolved[name]
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self.attributes[logical_id][attribute]
            return self._ref(name)

        return re.sub(r"\$\{([^}!]+)\}", replace, text)

    def holds(self, template: dict[str, Any], condition: str) -> bool:
        """Whether one of the template's Conditions holds with this stack's parameters."""
        return self._evaluate(template, template.get("Conditions", {})[condition])

    def _evaluate(self, template: dict[str, Any], value: Any) -> bool:
        ((function, argument),) = value.items()
        if function == "Fn::Equals":
            left, right = (self._value(item) for item in argument)
            return left == right
        if function == "Fn::Not":
            return not self._evaluate(template, argument[0])
        if function == "Fn::And":
            return all(self._evaluate(template, item) for item in argument)
        if function == "Fn::Or":
            return any(self._evaluate(template, item) for item in argument)
        if function in {"Condition", "Fn::Condition"}:  # `!Condition X` parses as the latter
            return self.holds(template, str(argument))
        raise ValueError(f"the local stack cannot evaluate the condition function {function}")

    def chosen(self, template: dict[str, Any], value: Any) -> Any:
        """A property that may be `!If [Condition, then, else]`: the branch this stack's
        parameters choose, with `!Ref AWS::NoValue` as None."""
        if isinstance(value, dict) and set(value) == {"Fn::If"}:
            condition, then, otherwise = value["Fn::If"]
            return self.chosen(template, then if self.holds(template, condition) else otherwise)
        if value == {"Ref": "AWS::NoValue"}:
            return None
        return value

    def _value(self, value: Any) -> str:
        if isinstance(value, dict) and set(value) == {"Fn::Join"}:
            separator, items = value["Fn::Join"]
            resolved = self.resolve(items)
            # a CommaDelimitedList parameter's value is its text here, already joined by ","
            return resolved if isinstance(resolved, str) else separator.join(map(str, resolved))
        return str(self.resolve(value))

    def to_json(self) -> dict[str, Any]:
        return {
            "stack_name": self.stack_name,
            "region": self.region,
            "refs": self.refs,
            "attributes": self.attributes,
            "parameters": self.parameters,
            "conditions": self.conditions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Resources:
        return cls(
            data["stack_name"],
            data["region"],
            data["refs"],
            data["attributes"],
            data["parameters"],
            data.get("conditions", {}),
        )


def provision(
    session: Session,
    endpoint_url: str,
    template: dict[str, Any],
    stack_name: str,
    *,
    parameters: dict[str, str] | None = None,
    endpoints: dict[str, str] | None = None,
    visibility_seconds: int | None = None,
) -> Resources:
    """Creates every table, queue, bucket and event bus of the template on the emulator (a
    service named in `endpoints` on its own); a parameter takes its value from `parameters`,
    else its default. `visibility_seconds` becomes every queue's own VisibilityTimeout, as if
    the template said so: what a queue reports of itself (the sweep reads it) is then what its
    receives do."""
    region = session.region_name or "us-east-1"
    resources = Resources(
        stack_name, region, parameters={**_parameter_defaults(template), **(parameters or {})}
    )
    resources.conditions = {
        name: resources.holds(template, name) for name in template.get("Conditions", {})
    }

    def client(service: str) -> Any:
        url = (endpoints or {}).get(service, endpoint_url)
        return session.client(service, endpoint_url=url)  # type: ignore[call-overload]

    dynamodb, sqs, s3, events = client("dynamodb"), client("sqs"), client("s3"), client("events")
    tables = {
        lid: f"{stack_name}-{lid}" for lid in resources_of_type(template, "AWS::DynamoDB::Table")
    }
    create_tables(dynamodb, tables, template)
    for logical_id, name in tables.items():
        description = dynamodb.describe_table(TableName=name)["Table"]
        resources.refs[logical_id] = name
        resources.attributes[logical_id] = {
            "Arn": description["TableArn"],
            "StreamArn": description.get("LatestStreamArn", ""),
        }
    queue_names = {
        lid: f"{stack_name}-{lid}" for lid in resources_of_type(template, "AWS::SQS::Queue")
    }
    urls = create_queues(sqs, queue_names, template)
    if visibility_seconds is not None:
        for url in urls.values():
            sqs.set_queue_attributes(
                QueueUrl=url, Attributes={"VisibilityTimeout": str(visibility_seconds)}
            )
    arns = queue_arns(sqs, urls)
    for logical_id, url in urls.items():
        resources.refs[logical_id] = url  # a queue's Ref is its URL
        resources.attributes[logical_id] = {
            "Arn": arns[logical_id],
            "QueueUrl": url,
            "QueueName": queue_names[logical_id],
        }
    buckets = {
        lid: f"{stack_name}-{lid}".lower() for lid in resources_of_type(template, "AWS::S3::Bucket")
    }
    create_buckets(s3, buckets, arns, template)
    apply_bucket_cors(s3, resources, template, buckets)
    for logical_id, name in buckets.items():
        resources.refs[logical_id] = name
        resources.attributes[logical_id] = {"Arn": f"arn:aws:s3:::{name}"}
    # IAM is not emulated (the local stack has one caller: its token holder), but a function may
    # read a role's name (a role's Ref) or ARN from its environment.
    for logical_id in resources_of_type(template, "AWS::IAM::Role"):
        role = f"{stack_name}-{logical_id}"
        resources.refs[logical_id] = role
        resources.attributes[logical_id] = {
            "Arn": f"arn:aws:iam::{ACCOUNT}:role/{role}",
            # IAM's form (AROA and 17 more): stable for the name, as a deployed role's is.
            "RoleId": "AROA" + hashlib.sha256(role.encode()).hexdigest()[:17].upper(),
        }
    # KMS keys on the emulator (moto's KMS: encryption contexts are checked, key policies are
    # not): the webhook secrets' key seals and opens there as in AWS.
    kms = client("kms")
    for logical_id in resources_of_type(template, "AWS::KMS::Key"):
        key = kms.create_key(Description=f"{stack_name}-{logical_id}")["KeyMetadata"]
        resources.refs[logical_id] = key["KeyId"]  # a key's Ref is its id
        resources.attributes[logical_id] = {"Arn": key["Arn"], "KeyId": key["KeyId"]}
    bus_names = {
        lid: f"{stack_name}-{lid}" for lid in resources_of_type(template, "AWS::Events::EventBus")
    }
    for logical_id, arn in create_event_buses(events, bus_names, template).items():
        resources.refs[logical_id] = bus_names[logical_id]
        resources.attributes[logical_id] = {"Arn": arn, "Name": bus_names[logical_id]}
    scheduler = client("scheduler")
    for logical_id in resources_of_type(template, "AWS::Scheduler::ScheduleGroup"):
        group = f"{stack_name}-{logical_id}"
        arn = scheduler.create_schedule_group(Name=group)["ScheduleGroupArn"]
        resources.refs[logical_id] = group  # a schedule group's Ref is its name
        resources.attributes[logical_id] = {"Arn": arn}
    for logical_id in resources_of_type(template, "AWS::Serverless::Function"):
        # As the local stack names each function's process (AWS_LAMBDA_FUNCTION_NAME): the
        # alarms and the dashboard name functions by their Ref.
        name = f"{stack_name}-{logical_id}"
        resources.refs[logical_id] = name
        resources.attributes[logical_id] = {
            "Arn": f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}"
        }
    register_secrets(client("secretsmanager"), resources, template)
    create_topics(client("sns"), resources, template)
    create_rules(events, resources, template)
    create_alarms(client("cloudwatch"), resources, template)
    return resources


# CloudFormation's names of a CORS rule's properties, and S3's API's.
_CORS_RULE_NAMES = {
    "Id": "ID",
    "AllowedMethods": "AllowedMethods",
    "AllowedOrigins": "AllowedOrigins",
    "AllowedHeaders": "AllowedHeaders",
    "ExposedHeaders": "ExposeHeaders",
    "MaxAge": "MaxAgeSeconds",
}


def apply_bucket_cors(
    s3: Any, resources: Resources, template: dict[str, Any], buckets: dict[str, str]
) -> None:
    """Each bucket's CorsConfiguration, where this stack's parameters give it one (the uploads
    bucket's UploadsAllowedOrigins): the browser test's page posts across origins through it."""
    for logical_id, name in buckets.items():
        properties = template["Resources"][logical_id].get("Properties", {})
        configuration = resources.chosen(template, properties.get("CorsConfiguration"))
        if configuration is None:
            continue
        rules = [_cors_rule(resources, rule) for rule in configuration["CorsRules"]]
        s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": rules})


def _cors_rule(resources: Resources, rule: dict[str, Any]) -> dict[str, Any]:
    made: dict[str, Any] = {}
    for name, value in rule.items():
        resolved = resources.resolve(value)
        if name.startswith(("Allowed", "Exposed")) and isinstance(resolved, str):
            resolved = resolved.split(",")  # a CommaDelimitedList parameter's text
        made[_CORS_RULE_NAMES[name]] = resolved
    return made


def register_secrets(secretsmanager: Any, resources: Resources, template: dict[str, Any]) -> None:
    """Each AWS::SecretsManager::Secret of the template, made under the stack's name for it: a
    secret's Ref is its ARN."""
    names = {
        logical_id: f"{resources.stack_name}-{logical_id}"
        for logical_id in resources_of_type(template, "AWS::SecretsManager::Secret")
    }
    for logical_id, arn in create_secrets(secretsmanager, names, template).items():
        resources.refs[logical_id] = arn
        resources.attributes[logical_id] = {"Id": arn}


def create_topics(sns: Any, resources: Resources, template: dict[str, Any]) -> None:
    """Each AWS::SNS::Topic (the alarms': their actions name it); a topic's Ref is its ARN."""
    for logical_id in resources_of_type(template, "AWS::SNS::Topic"):
        arn = sns.create_topic(Name=f"{resources.stack_name}-{logical_id}")["TopicArn"]
        resources.refs[logical_id] = arn
        resources.attributes[logical_id] = {"TopicName": arn.rsplit(":", 1)[1]}


def create_alarms(cloudwatch: Any, resources: Resources, template: dict[str, Any]) -> None:
    """Each AWS::CloudWatch::Alarm and Dashboard as CloudFormation would make it, on this stack's
    resources and metric namespace: what an operator of the local stack (and a test of two
    stacks side by side) reads back from CloudWatch is what the deployed stack would have."""
    for logical_id, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items():
        if "Condition" in alarm and not resources.holds(template, alarm["Condition"]):
            continue  # as CloudFormation makes no resource whose condition is false
        properties = resources.resolve(alarm["Properties"])
        settings = {key: value for key, value in properties.items() if key in _ALARM_KEYS}
        settings["Threshold"] = float(settings["Threshold"])
        for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
            if key in settings:
                settings[key] = int(settings[key])
        for query in settings.get("Metrics", []):
            if "MetricStat" in query:
                query["MetricStat"]["Period"] = int(query["MetricStat"]["Period"])
        name = f"{resources.stack_name}-{logical_id}"
        cloudwatch.put_metric_alarm(AlarmName=name, **settings)
        resources.refs[logical_id] = name
    for logical_id, board in resources_of_type(template, "AWS::CloudWatch::Dashboard").items():
        properties = resources.resolve(board["Properties"])
        name = str(properties.get("DashboardName") or f"{resources.stack_name}-{logical_id}")
        cloudwatch.put_dashboard(DashboardName=name, DashboardBody=properties["DashboardBody"])
        resources.refs[logical_id] = name


# The properties of AWS::CloudWatch::Alarm that PutMetricAlarm takes as they are.
_ALARM_KEYS = frozenset(
    {
        "AlarmDescription",
        "ActionsEnabled",
        "AlarmActions",
        "OKActions",
        "InsufficientDataActions",
        "MetricName",
        "Namespace",
        "Statistic",
        "ExtendedStatistic",
        "Dimensions",
        "Period",
        "Unit",
        "EvaluationPeriods",
        "DatapointsToAlarm",
        "Threshold",
        "ComparisonOperator",
        "TreatMissingData",
        "EvaluateLowSampleCountPercentile",
        "Metrics",
        "ThresholdMetricId",
    }
)


def create_rules(events: Any, resources: Resources, template: dict[str, Any]) -> None:
    """Each AWS::Events::Rule on its bus with its pattern and targets, as CloudFormation would
    (the webhooks' rule sends the tenants' events to the webhooks queue): moto's EventBridge
    delivers a matching event to an SQS target of the same emulator."""
    for logical_id, rule in resources_of_type(template, "AWS::Events::Rule").items():
        properties = resources.resolve(rule["Properties"])
        name = f"{resources.stack_name}-{logical_id}"
        bus = properties.get("EventBusName", "default")
        answer = events.put_rule(
            Name=name,
            EventBusName=bus,
            EventPattern=json.dumps(properties["EventPattern"]),
            State=properties.get("State", "ENABLED"),
        )
        resources.refs[logical_id] = name
        resources.attributes[logical_id] = {"Arn": answer["RuleArn"]}
        targets = [{"Id": t["Id"], "Arn": t["Arn"]} for t in properties.get("Targets", [])]
        if targets:
            events.put_targets(Rule=name, EventBusName=bus, Targets=targets)


def _parameter_defaults(template: dict[str, Any]) -> dict[str, str]:
    return {
        name: str(spec["Default"])
        for name, spec in template.get("Parameters", {}).items()
        if "Default" in spec
    }
