"""The handlers' one preamble (filejobs/instrumentation.py): an entry point logs with the Lambda
context, flushes its metrics under the stack's namespace and service, and forgets the keys an
invocation appended when asked to; every handler is instrumented through it alone."""

from __future__ import annotations

import ast
import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

import pytest
from aws_lambda_powertools.metrics import MetricUnit

from filejobs.instrumentation import Instruments, instruments
from filejobs.observability import METRICS_NAMESPACE, SERVICE

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted((ROOT / "functions").glob("*/app.py"))
POWERTOOLS_PREAMBLE = {"Logger", "Metrics", "Tracer", "BatchProcessor"}


@dataclass(frozen=True)
class Context:
    function_name: str = "stack-Function"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:stack-Function"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "c6af9ac6-7b61-11e6-9a41-93e812345678"
    log_group_name: str = "/aws/lambda/stack-Function"
    log_stream_name: str = "2026/12/05/[$LATEST]abc"


@pytest.fixture
def output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[[], list[dict[str, Any]]]:
    """The JSON lines written since the last call: the log lines (the Logger's stream handler
    was made once for the service; it writes here for the test) and the metrics' EMF blobs
    (printed)."""
    stream = io.StringIO()
    handler = cast(logging.StreamHandler[TextIO], instruments().logger.registered_handler)
    monkeypatch.setattr(handler, "stream", stream)

    def read() -> list[dict[str, Any]]:
        text = stream.getvalue() + capsys.readouterr().out
        stream.seek(0)
        stream.truncate()
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    return read


def handled(observed: Instruments, **entry: Any) -> Callable[[dict[str, Any], Any], Any]:
    @observed.entry_point(**entry)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if "key" in event:
            observed.logger.append_keys(appended=event["key"])
        observed.logger.info("handled")
        if observed.metrics is not None:
            observed.metrics.add_metric(name="Handled", unit=MetricUnit.Count, value=1)
        return {"handled": True}

    return handler


def test_an_entry_point_logs_with_the_lambda_context_and_flushes_its_metrics(
    output: Callable[[], list[dict[str, Any]]],
) -> None:
    handler = handled(instruments())
    assert handler({}, Context()) == {"handled": True}
    lines = output()
    [log] = [line for line in lines if line.get("message") == "handled"]
    assert log["service"] == SERVICE
    assert log["function_request_id"] == Context.aws_request_id
    assert log["function_name"] == Context.function_name
    [emf] = [line for line in lines if "_aws" in line]
    [directive] = emf["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == METRICS_NAMESPACE
    assert directive["Dimensions"] == [["service"]]
    assert (emf["service"], emf["Handled"]) == (SERVICE, [1.0])


def test_a_function_without_metrics_flushes_none(
    output: Callable[[], list[dict[str, Any]]],
) -> None:
    observed = instruments(measured=False)
    handled(observed)({}, Context())
    assert [line for line in output() if "_aws" in line] == []
    with pytest.raises(TypeError, match="without metrics"):
        _ = observed.measured


@pytest.mark.parametrize("clear_state", [True, False])
def test_clear_state_forgets_the_keys_an_invocation_appended(
    clear_state: bool, output: Callable[[], list[dict[str, Any]]]
) -> None:
    observed = instruments(measured=False)
    handler = handled(observed, clear_state=clear_state)
    handler({"key": "first"}, Context())
    handler({}, Context())
    [_, second] = [line for line in output() if line.get("message") == "handled"]
    assert ("appended" in second) is not clear_state
    observed.logger.remove_keys(["appended"])


def test_every_handler_is_instrumented_through_the_one_preamble() -> None:
    for path in HANDLERS:
        tree = ast.parse(path.read_text())
        built = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        # events.app reads a DynamoDB stream: its batch processor is its own
        allowed = {"BatchProcessor"} if path.parent.name == "events" else set()
        assert built & POWERTOOLS_PREAMBLE <= allowed, path
        [entry] = [
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "handler"
        ]
        decorators = [ast.unparse(d) for d in entry.decorator_list]
        assert len(decorators) == 1, path
        assert decorators[0].startswith("observed.entry_point("), path
