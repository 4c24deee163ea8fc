"""Specification: the cost gate (filejobs_dev/local/cost_gate.py, `make cost-gate`) fails a change
that makes the happy path's DynamoDB requests or write units rise by more than 5% over the
figures committed in bench/costs.json, and only asks for the file to be updated when they fell."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.cost_gate import (
    DEFAULT_TOLERANCES,
    compare,
    group_figures,
    render,
    totals,
)
from filejobs_dev.local.costs import Usage


def figures(
    requests_per_job: float = 5.0, write_units_per_job: float = 8.0, **groups: tuple[float, float]
) -> dict[str, Any]:
    """A figures document: the totals, then each group's (requests, write units) per unit."""
    return {
        "totals": {
            "dynamodb_requests_per_job": requests_per_job,
            "write_units_per_job": write_units_per_job,
        },
        "groups": {
            group: {"per": "job", "dynamodb_requests": requests, "write_units": units}
            for group, (requests, units) in groups.items()
        },
    }


ROOT = Path(__file__).resolve().parents[2]
COMMITTED = figures(5.0, 8.0, ingest=(2.0, 4.0), virus_scan=(3.0, 6.0))


def test_a_rise_of_6_percent_in_requests_per_job_fails_naming_the_figure() -> None:
    verdict = compare(COMMITTED, figures(5.3, 8.0, ingest=(2.0, 4.0), virus_scan=(3.0, 6.0)), {})
    assert [(row.name, row.verdict) for row in verdict.failed] == [
        ("dynamodb_requests_per_job", "rose")
    ]
    text = "\n".join(render(verdict))
    assert "dynamodb_requests_per_job  5.00       5.30      +6.0%   5%" in text
    assert "cost gate: FAILED" in text
    assert "--write-figures` in the same change if the rise is intended" in text


def test_a_rise_of_4_percent_passes() -> None:
    verdict = compare(COMMITTED, figures(5.2, 8.32, ingest=(2.08, 4.0), virus_scan=(3.0, 6.0)), {})
    assert verdict.failed == [] and verdict.to_update == []
    assert render(verdict) == ["cost gate: passed"]


def test_a_groups_write_units_rising_fails_even_when_the_totals_hold() -> None:
    verdict = compare(COMMITTED, figures(5.0, 8.0, ingest=(2.0, 4.4), virus_scan=(3.0, 6.0)), {})
    assert [row.name for row in verdict.failed] == ["ingest: write_units"]


def test_a_fall_of_more_than_5_percent_passes_and_asks_for_the_figures_to_be_updated() -> None:
    verdict = compare(COMMITTED, figures(4.0, 8.0, ingest=(1.0, 4.0), virus_scan=(3.0, 6.0)), {})
    assert verdict.failed == []
    assert [row.name for row in verdict.to_update] == [
        "dynamodb_requests_per_job",
        "ingest: dynamodb_requests",
    ]
    lines = render(verdict)
    assert lines[-2] == "cost gate: passed"
    assert lines[-1].startswith("cost gate: 2 figure(s) fell past their tolerance: update")


def test_a_new_group_that_uses_dynamodb_fails_as_a_new_cost() -> None:
    measured = figures(5.0, 8.0, ingest=(2.0, 4.0), virus_scan=(3.0, 6.0), audit_log=(0.5, 1.0))
    verdict = compare(COMMITTED, measured, {})
    assert [(row.name, row.verdict) for row in verdict.failed] == [
        ("audit_log: dynamodb_requests", "new"),
        ("audit_log: write_units", "new"),
    ]


def test_a_new_group_without_dynamodb_requests_passes() -> None:
    measured = figures(5.0, 8.0, ingest=(2.0, 4.0), virus_scan=(3.0, 6.0), ingest_router=(0, 0))
    assert compare(COMMITTED, measured, {}).failed == []


def test_a_removed_group_passes_and_asks_for_the_figures_to_be_updated() -> None:
    verdict = compare(COMMITTED, figures(5.0, 8.0, ingest=(2.0, 4.0)), {})
    assert verdict.failed == []
    assert [(row.name, row.verdict) for row in verdict.to_update] == [
        ("virus_scan: dynamodb_requests", "gone"),
        ("virus_scan: write_units", "gone"),
    ]


def test_a_group_given_its_own_tolerance_is_held_to_it() -> None:
    committed = figures(5.0, 8.0, stats=(0.6, 8.0))
    within = figures(5.0, 8.0, stats=(0.8, 8.0))  # +33%, in a batching group's 50%
    assert compare(committed, within, {"stats": 0.5}).failed == []
    beyond = figures(5.0, 8.0, stats=(1.0, 8.0))  # +67%
    assert [row.name for row in compare(committed, beyond, {"stats": 0.5}).failed] == [
        "stats: dynamodb_requests"
    ]


def test_a_one_off_read_per_function_instance_is_not_judged_but_a_read_per_job_is() -> None:
    # the webhooks' endpoint cache read once by one instance, then by two: 1 and 2 of 42 jobs
    committed = figures(5.0, 8.0, webhooks=(1 / 42, 0.0), api=(0.0, 0.0))
    assert (
        compare(committed, figures(5.0, 8.0, webhooks=(2 / 42, 0.0), api=(0.0, 0.0)), {}).failed
        == []
    )
    rose = compare(committed, figures(5.0, 8.0, webhooks=(1 / 42, 0.0), api=(1.0, 0.0)), {}).failed
    assert [(row.name, row.change) for row in rose] == [("api: dynamodb_requests", "+inf")]


def test_group_figures_and_totals_are_per_unit_of_work() -> None:
    scan = Usage(dynamodb_reads=10, dynamodb_writes=40, write_units=200.0)
    api = Usage(dynamodb_reads=50)
    assert group_figures(scan, 10, "job").dynamodb_requests == 5.0
    assert group_figures(scan, 10, "job").write_units == 20.0
    stats = Usage(dynamodb_writes=5, write_units=50.0)
    # the API's status queries are not a job's cost; the batched stats are counted apart too
    assert totals({"virus_scan": scan, "api": api, "stats": stats}, 25) == {
        "dynamodb_requests_per_job": 2.2,
        "write_units_per_job": 10.0,
        "dynamodb_requests_per_job_without_batching": 2.0,
        "write_units_per_job_without_batching": 8.0,
    }


def test_the_totals_with_the_batched_groups_have_the_tolerance_of_their_spread() -> None:
    committed = figures(5.0, 8.0)
    measured = figures(5.6, 8.0)  # +12%: within 15%, as stats' batches may make it
    assert compare(committed, measured, DEFAULT_TOLERANCES).failed == []
    committed["totals"]["dynamodb_requests_per_job_without_batching"] = 4.0
    measured["totals"]["dynamodb_requests_per_job_without_batching"] = 4.24  # +6%
    assert [row.name for row in compare(committed, measured, DEFAULT_TOLERANCES).failed] == [
        "dynamodb_requests_per_job_without_batching"
    ]


def test_the_gate_runs_at_the_size_its_figures_were_written_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # as when run as a script
    bench = runpy.run_path(str(ROOT / "bench" / "request_costs.py"), run_name="request_costs")
    written = tmp_path / "costs.json"
    written.write_text(json.dumps({"files_per_kind": 5}))
    assert bench["gate_files"](None, written) == 5  # --check: like with like
    assert bench["gate_files"](written, None) == bench["CHECK_FILES"] == 3  # --write-figures
    assert bench["gate_files"](None, None) == bench["FILES"] == 12  # the bench itself


def test_every_scheduled_function_of_the_template_has_a_rate_the_idle_month_can_price(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A schedule may be a parameter (`!Ref`) or a text with one in it (`!Sub`, the reconciler's):
    # a run that measured the function prices its month from it (a crash here failed the bench)
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    bench = runpy.run_path(str(ROOT / "bench" / "request_costs.py"), run_name="request_costs")
    template = bench["load_template"](ROOT / "template.yaml")
    functions = bench["function_definitions"](template)
    defaults = {k: str(v.get("Default", "")) for k, v in template["Parameters"].items()}
    rates = {
        function: bench["rate_seconds"](bench["_parameter"](p["ScheduleExpression"], defaults))
        for function in bench["SCHEDULED"]
        for kind, p in functions[function].events
        if kind in ("Schedule", "ScheduleV2")
    }
    assert rates["ReconcilerFunction"] == 15 * 60
    assert rates["SweepFunction"] > 0 and rates["DefinitionsUpdater"] > 0
