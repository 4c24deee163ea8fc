"""The cost gate: the happy path's DynamoDB figures against the ones committed in bench/costs.json.

Pure: figures in, a verdict and its table out. `bench/request_costs.py --write-figures` writes
the file from a run of the local stack; `bench/request_costs.py --check` (`make cost-gate`, in
`make test`) measures again and fails when a gated figure rose by more than its tolerance, so a
change that makes each job dearer shows its price in its own diff (the file updated with it).

A figure is a group's DynamoDB requests or write units per unit of its work (a worker's job of
its type; the ingest's file; the stream functions' job of any type; the API's status query), or
one of the totals of the path: DynamoDB requests per job and write units per job (every group's
but the API's and the sweep's, over the path's jobs: `costs.dynamodb_per_job`'s rule; write
units are every write's, the index writes among them), with and without the batched groups'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from filejobs_dev.local.costs import SCHEDULED_GROUPS, Usage

# A rise above this share of the committed figure fails the gate; a fall below it asks for the
# file to be updated (a saving the next change could otherwise spend unnoticed).
TOLERANCE = 0.05
# A change this small per unit is no job's cost but a function instance's one-off read (a
# cached endpoint, a tenant's presets) landing on one more or one fewer instance: not judged.
# Any request a job or a file makes moves its group's figure by 1 (an ingest file's, a job
# type's) or by 0.25 at least (the stream functions', per job of four types a file).
NEGLIGIBLE = 0.05
# Groups whose figures are not a property of the path alone: how many stream records a stats or
# webhooks invocation gets depends on timing, and each invocation reads and writes once per batch
# (measured: docs/BENCHMARKS.md). They have a tolerance of their own, wide enough for their
# spread (a doubling still fails: a write per record where there was one per batch), and the
# totals the gate holds to 5% leave them out ("..._without_batching"); the totals with them are
# the bench's headline figures, held to a tolerance as wide as their spread.
BATCHED_GROUPS = ("stats", "webhooks")
DEFAULT_TOLERANCES: dict[str, float] = {
    "stats": 1.0,
    "webhooks": 1.0,
    "dynamodb_requests_per_job": 0.15,
    "write_units_per_job": 0.15,
}
GROUPS_NOT_PER_JOB = ("api", *SCHEDULED_GROUPS)
TOTALS = (
    "dynamodb_requests_per_job",
    "write_units_per_job",
    "dynamodb_requests_per_job_without_batching",
    "write_units_per_job_without_batching",
)
UPDATE_HINT = (
    "update bench/costs.json with `bench/request_costs.py --write-figures` in the same change "
    "if the rise is intended"
)


@dataclass(frozen=True)
class GroupFigures:
    per: str  # the unit: "job", "file", "status query"
    dynamodb_requests: float
    write_units: float


def group_figures(usage: Usage, units: int, per: str) -> GroupFigures:
    n = max(units, 1)
    return GroupFigures(per, usage.dynamodb_requests / n, usage.write_units / n)


def totals(usage: Mapping[str, Usage], jobs: int) -> dict[str, float]:
    """DynamoDB requests and write units per job of the path: every group's but the API's and
    the sweep's, over all the path's jobs; then the same without the batched groups'."""
    every = _per_job(usage, jobs, GROUPS_NOT_PER_JOB)
    steady = _per_job(usage, jobs, (*GROUPS_NOT_PER_JOB, *BATCHED_GROUPS))
    return {**every, **{f"{name}_without_batching": value for name, value in steady.items()}}


def _per_job(usage: Mapping[str, Usage], jobs: int, leave_out: tuple[str, ...]) -> dict[str, float]:
    counted = [u for group, u in usage.items() if group not in leave_out]
    n = max(jobs, 1)
    return {
        "dynamodb_requests_per_job": sum(u.dynamodb_requests for u in counted) / n,
        "write_units_per_job": sum(u.write_units for u in counted) / n,
    }


def flatten(figures: Mapping[str, Any]) -> dict[str, float]:
    """{"totals": {...}, "groups": {group: {...}}} as "name" -> value, one per gated figure:
    "dynamodb_requests_per_job", "ingest: write_units", ..."""
    flat = {name: float(value) for name, value in figures.get("totals", {}).items()}
    for group, values in figures.get("groups", {}).items():
        for name in ("dynamodb_requests", "write_units"):
            flat[f"{group}: {name}"] = float(values[name])
    return flat


def tolerance_of(name: str, tolerances: Mapping[str, float]) -> float:
    """A figure's own tolerance, else its group's, else TOLERANCE."""
    group = name.split(":", 1)[0]
    return float(tolerances.get(name, tolerances.get(group, TOLERANCE)))


@dataclass(frozen=True)
class Row:
    name: str
    committed: float | None  # None: a figure the file does not have (a new group)
    measured: float | None  # None: a figure this run did not produce (a removed group)
    tolerance: float
    verdict: str  # "ok", "rose", "fell", "new", "gone"

    @property
    def change(self) -> str:
        if self.committed is None or self.measured is None:
            return ""
        if self.committed == 0:
            return "+inf" if self.measured > NEGLIGIBLE else "0%"
        return f"{(self.measured - self.committed) / self.committed:+.1%}"


@dataclass
class Verdict:
    rows: list[Row] = field(default_factory=list)

    @property
    def failed(self) -> list[Row]:
        return [row for row in self.rows if row.verdict in ("rose", "new")]

    @property
    def to_update(self) -> list[Row]:
        return [row for row in self.rows if row.verdict in ("fell", "gone")]


def _judge(committed: float, measured: float, tolerance: float) -> str:
    if abs(measured - committed) <= NEGLIGIBLE:
        return "ok"
    if committed <= 0:
        return "rose"
    change = (measured - committed) / committed
    if change > tolerance:
        return "rose"
    if change < -tolerance:
        return "fell"
    return "ok"


def compare(
    committed: Mapping[str, Any], measured: Mapping[str, Any], tolerances: Mapping[str, float]
) -> Verdict:
    """Every figure of either side, judged: a rise over its tolerance fails, as does a group
    the file does not have that makes DynamoDB requests or writes (a new feature's cost); a fall
    over it, or a group gone, asks for the file to be updated."""
    before, after = flatten(committed), flatten(measured)
    verdict = Verdict()
    for name in sorted(before.keys() | after.keys(), key=_order):
        tolerance = tolerance_of(name, tolerances)
        old, new = before.get(name), after.get(name)
        if old is None:
            judged = "new" if new is not None and new > NEGLIGIBLE else "ok"
        elif new is None:
            judged = "gone" if old > NEGLIGIBLE else "ok"
        else:
            judged = _judge(old, new, tolerance)
        verdict.rows.append(Row(name, old, new, tolerance, judged))
    return verdict


def _order(name: str) -> tuple[int, str]:
    return (0 if name in TOTALS else 1), name


def render(verdict: Verdict, *, every_row: bool = False) -> list[str]:
    """The table of the figures that moved (or every figure), then what to do about them."""
    shown = [row for row in verdict.rows if every_row or row.verdict != "ok"]
    lines = []
    if shown:
        header = ("figure", "committed", "measured", "change", "tolerance", "verdict")
        cells = [
            (
                row.name,
                "-" if row.committed is None else f"{row.committed:.2f}",
                "-" if row.measured is None else f"{row.measured:.2f}",
                row.change,
                f"{row.tolerance:.0%}",
                row.verdict,
            )
            for row in shown
        ]
        widths = [max(len(str(c)) for c in column) for column in zip(header, *cells, strict=True)]
        for line in (header, *cells):
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)))
    if verdict.failed:
        lines.append(
            f"cost gate: FAILED: {len(verdict.failed)} figure(s) rose past their tolerance "
            f"or are new; {UPDATE_HINT}"
        )
    else:
        lines.append("cost gate: passed")
    if verdict.to_update:
        lines.append(
            f"cost gate: {len(verdict.to_update)} figure(s) fell past their tolerance: update "
            "bench/costs.json with `bench/request_costs.py --write-figures` so the saving is kept"
        )
    return lines
