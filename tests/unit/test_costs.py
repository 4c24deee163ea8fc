"""Adding up the local meter's lines, and pricing them (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filejobs_dev.local.costs import (
    MONTH_SECONDS,
    Prices,
    Usage,
    dollars,
    dynamodb_per_job,
    floor_dollars,
    group_of,
    state_machine_writes_per_job,
    tally,
)

PRICES = Path(__file__).resolve().parents[2] / "bench" / "prices" / "aws-us-east-1.toml"


def request(
    fn: str, op: str, t: float = 1.0, jt: str | None = None, **extra: Any
) -> dict[str, Any]:
    svc = {"UpdateItem": "dynamodb", "GetItem": "dynamodb", "Query": "dynamodb"}.get(op, "sqs")
    return {"kind": "request", "t": t, "fn": fn, "jt": jt, "svc": svc, "op": op, "ok": True,
            **extra}  # fmt: skip


@pytest.fixture
def prices() -> Prices:
    return Prices.load(PRICES)


def test_the_price_table_is_dated_and_complete(prices: Prices) -> None:
    assert prices.as_of == "2026-11-30" and prices.region == "us-east-1"
    assert prices.write_unit == pytest.approx(0.625e-6)
    assert prices.read_unit == pytest.approx(0.125e-6)
    assert prices.lambda_request == pytest.approx(0.2e-6)


def test_lines_count_to_their_worker_type_or_their_functions_role() -> None:
    assert group_of({"fn": "VirusScanWorker", "jt": "virus_scan"}) == "virus_scan"
    assert group_of({"fn": "IngestFunction", "jt": None}) == "ingest"
    assert group_of({"fn": "SweepFunction"}) == "sweep"
    assert group_of({"fn": "Unknown"}) is None


def test_a_tally_adds_requests_units_and_compute_within_its_window() -> None:
    lines = [
        request("W", "UpdateItem", jt="compression", wru=7.0, index_wru=6.0),
        request("W", "GetItem", jt="compression", rru=0.5),
        request("W", "SendMessageBatch", jt="compression", messages=3, bytes=70_000),
        {
            "kind": "invoke",
            "t": 1.0,
            "fn": "W",
            "jt": "compression",
            "ms": 999.2,
            "memory_mb": 1024,
            "log_bytes": 500,
        },
        {
            "kind": "process",
            "t": 1.0,
            "fn": "W",
            "jt": "compression",
            "ms": 500.0,
            "memory_mb": 1024,
            "ok": True,
        },
        request("W", "UpdateItem", t=9.0, jt="compression", wru=100.0),  # outside the window
    ]

    [(group, usage)] = tally(lines, since=0.0, until=5.0).items()

    assert group == "compression"
    assert (usage.dynamodb_writes, usage.dynamodb_reads) == (1, 1)
    assert (usage.write_units, usage.index_write_units, usage.read_units) == (7.0, 6.0, 0.5)
    assert usage.sqs_requests == 2  # 70,000 bytes are two 64 KB chunks
    assert usage.gb_seconds == pytest.approx(1.0)  # 1000 ms billed (rounded up to the ms) x 1 GB
    assert usage.processor_gb_seconds == pytest.approx(0.5)
    assert usage.log_bytes == 500


def test_polls_that_found_nothing_are_idle_cost_not_the_files() -> None:
    lines = [
        request("W", "ReceiveMessage", jt="compression", messages=0, platform=True),
        request("W", "ReceiveMessage", jt="compression", messages=2, platform=True),
    ]
    usage = tally(lines)["compression"]
    assert usage.idle_receives == 1 and usage.sqs_requests == 1


def test_requests_per_job_leave_out_the_api_and_the_sweep() -> None:
    usage = {
        "ingest": Usage(dynamodb_writes=1),
        "compression": Usage(dynamodb_writes=2, dynamodb_reads=1),
        "api": Usage(dynamodb_writes=50),
        "sweep": Usage(dynamodb_reads=256),
    }
    assert dynamodb_per_job(usage, jobs=2) == (2.0, 0.5)


def test_dollars_follow_the_price_table(prices: Prices) -> None:
    usage = Usage(invocations=1, gb_seconds=2.0, write_units=10.0, read_units=4.0,
                  sqs_requests=3.0, s3_put_class=1, s3_get_class=2, events=1,
                  log_bytes=1_000)  # fmt: skip
    costs = dollars(usage, prices, scale=1e6)
    assert costs["dynamodb"] == pytest.approx(1e6 * (10 * 0.625e-6 + 4 * 0.125e-6))
    assert costs["lambda"] == pytest.approx(1e6 * (2 * 0.0000133334 + 0.2e-6))
    assert costs["sqs"] == pytest.approx(1.2)
    assert costs["s3"] == pytest.approx(5.0 + 0.8)
    assert costs["eventbridge"] == pytest.approx(1.0)
    assert costs["logs"] == pytest.approx(0.5)


def test_a_function_not_traced_pays_no_trace_and_nothing_else_changes(prices: Prices) -> None:
    # FunctionTracing=PassThrough with nothing upstream sampled: Lambda records no trace
    usage = Usage(invocations=1, gb_seconds=1.0, write_units=2.0, sqs_requests=3.0)
    traced, untraced = dollars(usage, prices, scale=1e6), dollars(usage, prices, 1e6, traced=False)
    assert traced["xray"] == pytest.approx(5.0) and untraced["xray"] == 0.0
    assert {k: v for k, v in traced.items() if k != "xray"} == {
        k: v for k, v in untraced.items() if k != "xray"
    }


def test_xray_records_every_invocation_below_one_a_second_and_5_percent_above(
    prices: Prices,
) -> None:
    assert prices.sampled_share(MONTH_SECONDS * 0.5) == 1.0
    assert prices.sampled_share(MONTH_SECONDS * 21) == pytest.approx((1 + 0.05 * 20) / 21)


def test_the_floor_is_below_what_a_wasteful_job_costs(prices: Prices) -> None:
    # Given a job type whose jobs each ran twice, read three items and logged
    measured = Usage(invocations=20, gb_seconds=30.0, processor_gb_seconds=10.0,
                     dynamodb_reads=30, dynamodb_writes=20, read_units=15.0, write_units=140.0,
                     update_writes=20, update_write_units=140.0, sqs_requests=40.0,
                     log_bytes=100_000)  # fmt: skip
    floor = floor_dollars(measured, per=10, prices=prices, scale=1e5)
    actual = dollars(measured, prices, scale=1e5)
    # Then the floor keeps one invocation of processor time and two writes per job, no reads
    assert floor["dynamodb"] == pytest.approx(1e5 * 2 * 7.0 * 10 * 0.625e-6)
    assert floor["logs"] == floor["xray"] == 0.0
    assert sum(floor.values()) < sum(actual.values())


def test_requests_are_also_counted_by_the_table_they_touch() -> None:
    lines = [
        request("W", "UpdateItem", jt="virus_scan", table="jobs", wru=7.0),
        request("W", "UpdateItem", jt="virus_scan", table="files", wru=2.0),
        request("I", "UpdateItem", jt="virus_scan", table="files,jobs", wru=20.0),
    ]
    usage = tally(lines)["virus_scan"]
    assert usage.table_requests == {
        "jobs:UpdateItem": 2,
        "files:UpdateItem": 2,
    }
    assert state_machine_writes_per_job({"virus_scan": usage, "ingest": usage}, 2, "jobs") == 1


def test_derived_files_are_stored_30_days_and_an_api_request_pays_api_gateway(
    prices: Prices,
) -> None:
    # given a worker that wrote a 1 MiB thumbnail (a PUT) and 3 MiB in the parts of an upload,
    # and copied an infected object to quarantine (a move: nothing new is stored)
    mib = 1024 * 1024
    lines = [
        {**request("W", "PutObject", jt="thumbnail_generation", bytes=mib), "svc": "s3"},
        {**request("W", "UploadPart", jt="thumbnail_generation", bytes=3 * mib), "svc": "s3"},
        {**request("W", "CopyObject", jt="thumbnail_generation", bytes=0), "svc": "s3"},
        {"kind": "invoke", "t": 1.0, "fn": "ApiFunction", "ms": 10.0, "memory_mb": 256},
    ]
    usage = tally(lines)
    assert usage["thumbnail_generation"].stored_bytes == 4 * mib
    # then a million such jobs keep 4 million MiB for 30 days, at S3 Standard's GB-month price
    costs = dollars(usage["thumbnail_generation"], prices, scale=1e6)
    assert costs["storage"] == pytest.approx(1e6 * 4 / 1024 * 0.023)
    # and a million API requests pay API Gateway's $3.50, beside the function's own cost
    assert usage["api"].api_requests == 1
    assert dollars(usage["api"], prices, scale=1e6)["api_gateway"] == pytest.approx(3.5)
    # and the floor stores what the job wrote: storage is no overhead of the machinery
    floor = floor_dollars(usage["thumbnail_generation"], per=1, prices=prices, scale=1e6)
    assert floor["storage"] == pytest.approx(costs["storage"])
