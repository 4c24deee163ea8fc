"""The preamble every handler shares: its Logger, Tracer and (where it publishes any) Metrics,
named as observability.py says, the SQS batch processor, and the decorators of its entry point,
applied in one order everywhere.

A handler keeps them as its module's `logger`, `tracer`, `metrics` (and `processor`): its own
code logs, traces and counts through them, and tests read them there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer

from filejobs.observability import METRICS_NAMESPACE, SERVICE, TRACED_MODULES

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch import BatchProcessor

# A Lambda entry point (event, context) -> answer.
type Handler = Callable[..., Any]


@dataclass(frozen=True)
class Instruments:
    logger: Logger
    tracer: Tracer
    metrics: Metrics | None  # None: the function publishes no metrics of its own

    @property
    def measured(self) -> Metrics:
        """The function's Metrics (one built with `measured=True`)."""
        if self.metrics is None:
            raise TypeError("this function was instrumented without metrics")
        return self.metrics

    def entry_point(
        self, *, clear_state: bool = False, capture_response: bool | None = None
    ) -> Callable[[Handler], Handler]:
        """The handler's decorators: the Lambda context on every log line (`clear_state`: no
        key appended by one invocation is left for the next), the invocation traced
        (`capture_response=False`: its answer kept out of the trace; None: Powertools' setting),
        and the metrics flushed at its end. What it returns is typed as Powertools' decorators
        type theirs: any callable."""

        def decorate(handler: Handler) -> Handler:
            decorated = handler if self.metrics is None else self.metrics.log_metrics(handler)
            traced = self.tracer.capture_lambda_handler(
                decorated, capture_response=capture_response
            )
            logged: Handler = self.logger.inject_lambda_context(traced, clear_state=clear_state)
            return logged

        return decorate


def instruments(*, measured: bool = True) -> Instruments:
    """This function's Logger, Tracer and, when `measured`, Metrics."""
    return Instruments(
        logger=Logger(service=SERVICE),
        tracer=Tracer(service=SERVICE, patch_modules=TRACED_MODULES),
        metrics=Metrics(namespace=METRICS_NAMESPACE, service=SERVICE) if measured else None,
    )


def sqs_batch() -> BatchProcessor:
    """A batch of SQS messages, each failing alone: a batch whose every record failed is
    reported item by item, like any other, not as a function error. Imported here: a handler
    that takes no batch does not load Powertools' batch utilities at its cold start."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType  # noqa: PLC0415

    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
