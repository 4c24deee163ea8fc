"""Specification: the stats function may touch only its own items of OpsTable (issue 45, item 5:
"dedup, stats and operations scoped by leading keys"). Its role's grant names the partition keys
of data/stats_repository.py's layout (dynamodb:LeadingKeys), so every key that module makes is
allowed, and the other items OpsTable holds (webhook endpoints with their secrets, operations,
quotas) are not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

from filejobs.data.stats_repository import (
    cursor_key,
    gauge_key,
    group_key,
    hour_key,
    minute_key,
)
from filejobs_dev.infra.template import load_template

ROLE: dict[str, Any] = load_template()["Resources"]["StatsFunctionRole"]
MOMENT = datetime(2026, 12, 5, 13, 45, tzinfo=UTC)


def leading_keys() -> list[str]:
    for policy in ROLE["Properties"]["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement.get("Sid") == "KeepAggregates":
                condition = statement["Condition"]["ForAllValues:StringLike"]
                return list(condition["dynamodb:LeadingKeys"])
    raise AssertionError("StatsFunctionRole has no KeepAggregates statement")


def allowed(partition_key: str) -> bool:
    return any(fnmatchcase(partition_key, pattern) for pattern in leading_keys())


def test_every_key_the_stats_function_writes_is_allowed() -> None:
    for scope in ("acme", "*"):
        for pk, _sk in (
            gauge_key(scope),
            minute_key(scope, MOMENT),
            hour_key(scope, MOMENT),
            group_key(scope, "thumbnail_generation.abc"),
        ):
            assert allowed(pk), pk
    assert allowed(cursor_key("shardId-00000001")[0])


def test_the_tables_other_items_are_out_of_its_reach() -> None:
    for pk in ("webhooks#acme", "webhook-deliveries#wh-1-acme", "operation#op-1", "quota#acme"):
        assert not allowed(pk), pk
