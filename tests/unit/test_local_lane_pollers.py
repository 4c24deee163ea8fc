"""Specification: the local stack's hosts poll each SQS event source of their function as
Lambda does, at most MaximumConcurrency environments at once: a job type's low lane (rescans,
backfills; LowLaneMaximumConcurrency, 2) is polled by its worker's first two hosts only, so a
third host is the normal and high lanes' alone, whatever the low lane holds."""

from __future__ import annotations

from typing import Any

import pytest

from filejobs_dev.infra.template import function_definitions, load_template
from filejobs_dev.local.host import polled_by
from filejobs_dev.local.resources import Resources

TEMPLATE = load_template()
WORKER = function_definitions(TEMPLATE)["VirusScanWorker"]


def resolve_with(low_lane: int) -> Any:
    """The local stack's resolution of the template's values, LowLaneMaximumConcurrency set."""
    parameters = {"LowLaneMaximumConcurrency": str(low_lane)}
    return Resources("stack", "us-east-1", parameters=parameters).resolve


def queues(slot: int, low_lane: int = 2) -> set[str]:
    polled = polled_by(slot, WORKER.events, resolve_with(low_lane))
    return {properties["Queue"]["Fn::GetAtt"].removesuffix(".Arn") for properties in polled}


@pytest.mark.parametrize("slot", [0, 1])
def test_the_first_two_hosts_of_a_worker_poll_its_three_lanes(slot: int) -> None:
    assert queues(slot) == {"VirusScanQueue", "VirusScanHighQueue", "VirusScanLowQueue"}


def test_a_third_host_leaves_the_low_lane_to_the_first_two() -> None:
    assert queues(2) == {"VirusScanQueue", "VirusScanHighQueue"}


def test_the_low_lanes_concurrency_is_the_stacks_parameter() -> None:
    assert "VirusScanLowQueue" in queues(2, low_lane=3)


def test_hosts_past_every_lanes_concurrency_poll_nothing() -> None:
    assert queues(20) == set()
