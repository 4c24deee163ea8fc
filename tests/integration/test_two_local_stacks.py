"""Specification: two stacks in one account share nothing, as samconfig's `default` and `prod`.

Two `filejobs dev` run side by side on one emulator (the second with `--shared-emulator`, as a
second stack is deployed into the same account), each under its own `--stack-name`. Each one's
upload is processed by its own functions into its own tables; every table, queue, bucket, bus,
secret, alarm and dashboard is its own; its functions measure under its own metric namespace,
and its alarms watch only its own resources and metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from filejobs_cli.local_stack_file import CONFIG_PATH
from filejobs_dev.local.launch import LaunchedStack, LaunchError, launched, project_copy
from tests.localstack import ROOT

FIRST, SECOND = "filejobs-first", "filejobs-second"
# What a deployed stack's functions see (template.yaml Globals), per stack.
NAMESPACE = "filejobs/{stack}"


@dataclass(frozen=True)
class TwoStacks:
    first: LaunchedStack
    second: LaunchedStack
    logs: dict[str, Path]  # each stack's output (its functions' stdout), by stack name

    def __getitem__(self, name: str) -> LaunchedStack:
        return self.first if name == FIRST else self.second

    def metric_namespaces(self, name: str) -> set[str]:
        """Every namespace the stack's functions wrote EMF metrics under (their stdout)."""
        return {namespace for namespace, _, _ in self.series(name)}

    def series(self, name: str) -> set[tuple[str, str, frozenset[tuple[str, str]]]]:
        """Every metric series the stack's functions wrote as EMF: (namespace, metric name,
        its dimensions with their values), one per dimension set of each record."""
        found: set[tuple[str, str, frozenset[tuple[str, str]]]] = set()
        for line in self.logs[name].read_text(errors="replace").splitlines():
            if '"CloudWatchMetrics"' not in line:
                continue
            try:
                blob = json.loads(line[line.index("{") :])
            except ValueError:
                continue
            for directive in blob.get("_aws", {}).get("CloudWatchMetrics", []):
                for keys in directive["Dimensions"]:
                    dimensions = frozenset((key, str(blob[key])) for key in keys)
                    for metric in directive["Metrics"]:
                        found.add((directive["Namespace"], metric["Name"], dimensions))
        return found


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoStacks]:
    first_root = project_copy(ROOT, tmp_path_factory.mktemp("first"))
    second_root = project_copy(ROOT, tmp_path_factory.mktemp("second"))
    logs = {FIRST: first_root / "stack.log", SECOND: second_root / "stack.log"}
    # The reconciler at a short rate too (its template rate is 15 minutes, which
    # --schedule-seconds leaves alone): its metric is one an alarm watches.
    common = (
        "--grace-seconds", "20", "--schedule-seconds", "5",
        "--parameter", "ReconcileEveryMinutes=2",
    )  # fmt: skip
    with (
        logs[FIRST].open("wb") as first_log,
        logs[SECOND].open("wb") as second_log,
        launched(first_root, "--stack-name", FIRST, *common, output=first_log) as first,
        launched(
            second_root,
            "--stack-name",
            SECOND,
            "--shared-emulator",
            str(first_root / CONFIG_PATH),
            *common,
            output=second_log,
        ) as second,
    ):
        yield TwoStacks(first, second, logs)


def test_both_stacks_run_on_one_emulator_under_their_own_names(
    stacks: TwoStacks,
) -> None:
    first, second = stacks[FIRST], stacks[SECOND]
    assert first.config["endpoint_url"] == second.config["endpoint_url"]
    assert (first.config["stack_name"], second.config["stack_name"]) == (FIRST, SECOND)
    assert first.config["api_url"] != second.config["api_url"]


def test_no_physical_resource_is_shared(stacks: TwoStacks) -> None:
    first = _physical_names(stacks[FIRST])
    second = _physical_names(stacks[SECOND])
    assert first and second
    # every logical resource of the template has a name or ARN of its own in each stack
    shared = {
        logical_id: name
        for logical_id, name in first.items()
        if name and second.get(logical_id) == name
    }
    assert shared == {}
    for name in first.values():
        assert SECOND not in name
    for name in second.values():
        assert FIRST not in name or SECOND in name


def test_an_upload_is_processed_by_its_own_stack_alone(stacks: TwoStacks) -> None:
    first, second = stacks[FIRST], stacks[SECOND]
    # given one file in each stack's uploads bucket, under the same key
    key = "uploads/acme/notes.txt"
    for stack, text in ((first, b"first stack's notes\n"), (second, b"second stack's notes\n")):
        stack.client("s3").put_object(Bucket=stack.config["uploads_bucket"], Key=key, Body=text)
    # when both are processed
    stored = {name: stacks[name].settled(key, seconds=180) for name in (FIRST, SECOND)}
    # then each stack recorded its own upload, from its own bucket, in its own table
    for name, stack in ((FIRST, first), (SECOND, second)):
        assert stored[name]["bucket"] == stack.config["uploads_bucket"]
        assert {j["status"] for j in stored[name]["jobs"]} == {"completed"}
        files = stack.scan(stack.config["files_table"], **_FILE_ITEMS)
        assert [f["id"]["S"] for f in files] == [stored[name]["id"]]
    assert stored[FIRST]["id"] != stored[SECOND]["id"]
    # and each stack's functions measured under its own namespace, never the other's
    assert stacks.metric_namespaces(FIRST) == {NAMESPACE.format(stack=FIRST)}
    assert stacks.metric_namespaces(SECOND) == {NAMESPACE.format(stack=SECOND)}


def test_each_stack_s_alarms_and_dashboard_watch_only_its_own(
    stacks: TwoStacks,
) -> None:
    cloudwatch = stacks[FIRST].client("cloudwatch")
    alarms = [a for page in cloudwatch.get_paginator("describe_alarms").paginate()
              for a in page["MetricAlarms"]]  # fmt: skip
    by_stack = {name: [a for a in alarms if a["AlarmName"].startswith(f"{name}-")]
                for name in (FIRST, SECOND)}  # fmt: skip
    assert len(by_stack[FIRST]) == len(by_stack[SECOND]) == len(alarms) // 2 > 10
    for name, other in ((FIRST, SECOND), (SECOND, FIRST)):
        own = _physical_names(stacks[name])
        for alarm in by_stack[name]:
            for namespace, dimensions in _watched(alarm):
                if namespace.startswith("filejobs"):
                    assert namespace == NAMESPACE.format(stack=name), alarm["AlarmName"]
                for dimension in dimensions:
                    value = dimension["Value"]
                    assert other not in value, (alarm["AlarmName"], value)
                    if dimension["Name"] in {"QueueName", "FunctionName", "TableName"}:
                        assert value in own.values(), (alarm["AlarmName"], value)
            # and it notifies its own stack's topic
            assert alarm["AlarmActions"] == [own["AlarmTopic"]]
        body = cloudwatch.get_dashboard(DashboardName=name)["DashboardBody"]
        assert other not in body
        assert f'"{NAMESPACE.format(stack=name)}"' in body


# Written only when something goes wrong, so a happy run never shows them: the updater's failure
# and a scan refused for want of definitions (their own tests make them fail).
_FAILURE_ONLY_METRICS = {"DefinitionsUpdateFailed", "DefinitionsUnavailable"}


def test_every_alarm_on_the_stack_s_own_metrics_watches_a_series_its_functions_write(
    stacks: TwoStacks,
) -> None:
    # given a job that fails beside the ones that complete (an image cut short)
    first = stacks[FIRST]
    key = "uploads/acme/broken.png"
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x02"
    first.client("s3").put_object(Bucket=first.config["uploads_bucket"], Key=key, Body=png)
    settled = first.settled(key, seconds=180)
    assert "failed" in {j["status"] for j in settled["jobs"]}
    # when every alarm of the stack on its own namespace is read back from CloudWatch
    written = stacks.series(FIRST)
    alarms = first.client("cloudwatch").describe_alarms(AlarmNamePrefix=f"{FIRST}-")
    watched = [
        (namespace, query["MetricStat"]["Metric"]["MetricName"], query["MetricStat"]["Metric"])
        for alarm in alarms["MetricAlarms"]
        for query in alarm.get("Metrics", [])
        if "MetricStat" in query
        for namespace in [query["MetricStat"]["Metric"]["Namespace"]]
    ] + [(a["Namespace"], a["MetricName"], a) for a in alarms["MetricAlarms"] if "Namespace" in a]
    own = [(n, m, spec) for n, m, spec in watched if n == NAMESPACE.format(stack=FIRST)]
    assert {m for _, m, _ in own} >= {"JobsFailed", "JobsCompleted", "DefinitionsAgeHours"}
    # then each one is a series the functions wrote: a CloudWatch metric is its exact
    # dimensions, and an alarm on any other set would never see a data point
    for namespace, metric, spec in own:
        dimensions = frozenset((d["Name"], d["Value"]) for d in spec.get("Dimensions", []))
        if metric in _FAILURE_ONLY_METRICS:
            continue
        assert (namespace, metric, dimensions) in written, (metric, sorted(dimensions))


_FILE_ITEMS = {
    "FilterExpression": "attribute_exists(#status) AND attribute_exists(#key)",
    "ExpressionAttributeNames": {"#status": "status", "#key": "key"},
}


def _physical_names(stack: LaunchedStack) -> dict[str, str]:
    """Every resource's Ref (a name, URL or ARN) and attributes (a queue's name, an ARN), as the
    stack made them: "LogicalId" for its Ref, "LogicalId.Attribute" for the others."""
    made: dict[str, Any] = stack.config["resources"]
    names = {logical_id: str(ref) for logical_id, ref in made["refs"].items()}
    for logical_id, attributes in made["attributes"].items():
        names.update({f"{logical_id}.{key}": str(value) for key, value in attributes.items()})
    return names


def _watched(alarm: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(namespace, dimensions) of every metric an alarm reads, plain or in its math."""
    if alarm.get("Namespace"):
        yield alarm["Namespace"], alarm.get("Dimensions", [])
    for query in alarm.get("Metrics", []):
        metric = query.get("MetricStat", {}).get("Metric")
        if metric:
            yield metric["Namespace"], metric.get("Dimensions", [])


def test_stack_names_that_would_break_the_uploads_bucket_are_refused(tmp_path: Path) -> None:
    # when the local stack is started under a name S3 would refuse for the uploads bucket
    root = project_copy(ROOT, tmp_path)
    log = tmp_path / "refused.log"
    with (
        log.open("wb") as output,
        pytest.raises(LaunchError, match="exited with 1"),
        launched(root, "--stack-name", "FileJobs_Prod", output=output, start_seconds=60),
    ):
        pass
    # then it refuses to start, saying why, as make deploy does before sam deploy
    refusal = "stack name 'FileJobs_Prod' must start with a lower-case letter"
    assert refusal in log.read_text()
