"""Specification: `filejobs quotas show|set`, before and after it talks to a stack: what it
accepts, the body it sends, how it shows an answer and a tenant's refusal.

(tests/integration/test_cli.py runs it against the local stack.)
"""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from filejobs_cli import quotas
from filejobs_cli.client import HttpError, Target, UsageError
from filejobs_cli.main import parser

REPORT: dict[str, Any] = {
    "tenant": "acme",
    "limits": {
        "files_per_day": 5,
        "bytes_per_day": 100,
        "max_file_bytes": 0,
        "max_in_flight_jobs": 100,
    },
    "defaults": {
        "files_per_day": 10000,
        "bytes_per_day": 100,
        "max_file_bytes": 50,
        "max_in_flight_jobs": 100,
    },
    "overrides": {"files_per_day": 5, "max_file_bytes": 0},
    "usage": {"day": "2026-12-04", "files": 2, "bytes": 40},
}
# What a stack that counts rescans and operations adds.
STARTED_REPORT = {
    **REPORT,
    "limits": {**REPORT["limits"], "rescans_per_file_per_day": 1, "max_running_operations": 3},
    "defaults": {**REPORT["defaults"], "rescans_per_file_per_day": 3, "max_running_operations": 3},
    "overrides": {"rescans_per_file_per_day": 1},
    "usage": {**REPORT["usage"], "rescans": 7, "operations": 1},
}


def parsed(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["quotas", *argv])


def test_set_sends_each_quota_given_and_null_for_each_put_back() -> None:
    arguments = parsed(
        "set", "Acme_2", "--files-per-day", "5", "--max-file-bytes", "0", "--default",
        "bytes-per-day",
    )  # fmt: skip

    quotas.check_change(arguments)
    assert quotas.change_of(arguments) == {
        "files_per_day": 5,
        "max_file_bytes": 0,
        "bytes_per_day": None,
    }


@pytest.mark.parametrize("value", ["-1", "1.5", "ten", "²", str(2**53)])
def test_a_quota_is_a_whole_number_the_api_takes(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        quotas.quota_value(value)


@pytest.mark.parametrize("tenant", ["-acme", "_acme", "a/b", "", "x" * 64])
def test_a_tenant_is_one_the_api_knows(tenant: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        quotas.tenant_argument(tenant)


def test_set_with_nothing_or_a_quota_both_set_and_reset_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="at least one"):
        quotas.check_change(parsed("set", "acme"))
    with pytest.raises(UsageError, match="both given and put back"):
        quotas.check_change(
            parsed("set", "acme", "--files-per-day", "1", "--default", "files-per-day")
        )


def test_show_prints_in_force_default_and_own_with_zero_as_unlimited() -> None:
    lines = quotas.render(REPORT).splitlines()

    assert lines[0] == "tenant acme: today (2026-12-04 UTC) 2 files, 40 bytes accepted"
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {
        "files_per_day": ["5", "10000", "5"],
        "bytes_per_day": ["100", "100", "-"],
        "max_file_bytes": ["unlimited", "50", "unlimited"],
        "max_in_flight_jobs": ["100", "100", "-"],
    }


def test_show_prints_the_rescan_and_operation_quotas_and_todays_count_of_each() -> None:
    lines = quotas.render(STARTED_REPORT).splitlines()

    assert lines[0].endswith("2 files, 40 bytes accepted, 7 rescans, 1 operations")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows["rescans_per_file_per_day"] == ["1", "3", "1"]
    assert rows["max_running_operations"] == ["3", "3", "-"]


def test_the_rescan_and_operation_quotas_are_set_like_the_others() -> None:
    arguments = parsed("set", "acme", "--rescans-per-day", "500", "--default", "operations-per-day")

    quotas.check_change(arguments)
    assert quotas.change_of(arguments) == {"rescans_per_day": 500, "operations_per_day": None}


class Refusing:
    """An API client whose PUT is refused as the API refuses a tenant."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def request(self, method: str, path: str, **_: Any) -> Any:
        raise HttpError(403, "forbidden", "only an operator may change a tenant's quotas")


def test_a_tenants_attempt_to_set_says_whose_power_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quotas, "ApiClient", Refusing)
    arguments = parsed("set", "acme", "--files-per-day", "9")

    with pytest.raises(UsageError) as refused:
        quotas.set_quotas(arguments, target=None, out=io.StringIO())  # type: ignore[arg-type]

    assert "only an operator may change a tenant's quotas" in refused.value.message
    assert "operator's credentials" in refused.value.message
