"""Names every handler logs, measures and traces under, and the log scope of one batch record.

The template names both per stack (POWERTOOLS_SERVICE_NAME is the stack's name, the metrics'
namespace `filejobs/<stack>`), so two stacks in one account keep their metrics and alarms apart.
They are read here, once, with a fallback, because Powertools reads its environment when a Logger
or Metrics is built, at import: a handler imported before its environment is set (a test) would
otherwise log as "service_undefined" and refuse to flush metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from filejobs.config import powertools_names

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

SERVICE, METRICS_NAMESPACE = powertools_names()
# What the Tracer instruments: botocore carries every AWS call (S3, SQS, and DynamoDB through
# PynamoDB's botocore client). X-Ray's default, patch_all, would also load a patcher for every
# library it can import (sqlite3, requests, psycopg...) at each cold start, some 40 ms more, and
# its PynamoDB patcher would trace each DynamoDB call a second time, at the HTTP layer.
TRACED_MODULES = ("botocore",)


class RecordFailedError(Exception):
    """A batch record's failure, already logged (with the record's keys) by `record_scope`."""


@contextmanager
def record_scope(logger: Logger, **keys: Any) -> Iterator[None]:
    """Log keys of one record of a batch, or of one object or job within it: on every line
    written while it is handled, gone before the next one (`append_context_keys`).

    A failure escaping the scope is logged here, while its keys still apply, then re-raised as a
    RecordFailedError: enclosing scopes and the batch loop know it has been told already.
    """
    with logger.append_context_keys(**keys):
        try:
            yield
        except RecordFailedError:
            raise
        except Exception as error:
            logger.exception("record failed")
            raise RecordFailedError(f"{type(error).__name__}: {error}") from error
