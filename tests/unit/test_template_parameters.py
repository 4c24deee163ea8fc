"""Specification: how a deploy presents the template's parameters and what it hands back.

`sam deploy --guided` and the CloudFormation console show the parameters in the groups of
`Metadata: AWS::CloudFormation::Interface`; a parameter in no group is shown apart, after them,
and one in two groups is refused by CloudFormation. The outputs are what an app and an operator
read after a deploy (docs/DEPLOY.md lists them)."""

from __future__ import annotations

from collections import Counter

from filejobs_dev.infra.template import load_template

TEMPLATE = load_template()
GROUPS = TEMPLATE["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]


def test_every_parameter_is_in_exactly_one_group() -> None:
    grouped = Counter(name for group in GROUPS for name in group["Parameters"])
    declared = set(TEMPLATE["Parameters"])
    assert set(grouped) == declared, {
        "in no group": sorted(declared - set(grouped)),
        "grouped but not declared": sorted(set(grouped) - declared),
    }
    assert [name for name, count in grouped.items() if count > 1] == []


def test_each_group_has_a_label_and_the_operations_group_comes_first() -> None:
    labels = [group["Label"]["default"] for group in GROUPS]
    assert all(labels) and len(set(labels)) == len(labels)
    assert labels[0].startswith("Operations")


def test_the_outputs_name_what_an_app_and_an_operator_need() -> None:
    needed = {
        "ApiUrl", "ConsoleUrl", "DocsUrl", "DashboardUrl", "AlarmTopicArn",
        "ApiOperatorRoleArn", "ApiTenantRoleArn", "UploadsBucketName", "OutputsBucketName",
        "JobEventsBusName", "JobEventsBusArn", "MetricsNamespace",
    }  # fmt: skip
    outputs = TEMPLATE["Outputs"]
    assert needed <= set(outputs), sorted(needed - set(outputs))
    assert all(output.get("Description") for output in outputs.values())


def test_the_metric_namespace_and_service_are_the_stack_s_own() -> None:
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == {"Fn::Sub": "filejobs/${AWS::StackName}"}
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
    assert (
        TEMPLATE["Outputs"]["MetricsNamespace"]["Value"]
        == variables["POWERTOOLS_METRICS_NAMESPACE"]
    )


def test_no_alarm_reads_a_namespace_or_dimension_shared_between_stacks() -> None:
    alarms = {
        lid: r["Properties"]
        for lid, r in TEMPLATE["Resources"].items()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert len(alarms) >= 20
    for lid, properties in alarms.items():
        metrics = [properties] + [
            q["MetricStat"]["Metric"] for q in properties.get("Metrics", []) if "MetricStat" in q
        ]
        for metric in metrics:
            if "Namespace" not in metric:
                continue
            namespace, dimensions = metric["Namespace"], metric.get("Dimensions", [])
            if isinstance(namespace, str):
                # AWS's own namespace: its series are told apart by the resource they name,
                # which must be one of this stack's (by a Ref, a GetAtt or a Sub of its name)
                assert namespace.startswith("AWS/"), lid
                assert any(isinstance(d["Value"], dict) for d in dimensions), lid
            else:
                # the stack's own namespace, and its service dimension the stack's name
                assert namespace == {"Fn::Sub": "filejobs/${AWS::StackName}"}, lid
                service = [d["Value"] for d in dimensions if d["Name"] == "service"]
                assert service == [{"Ref": "AWS::StackName"}], lid
        assert properties["AlarmActions"] == [{"Ref": "AlarmTopic"}], lid
