"""What every route of the status API reads of its request, and how it answers.

Read: the caller (401 before anything else is read), the query, the Idempotency-Key header, and
the job or file the request is about, named on every log line and trace once it is well formed.
Answered: JSON with a status, a job requested (201, or 200 with the job an earlier request of
the same key made) and an operation started (202, or 200 likewise). The routes (api/routes/)
use these; functions/api/app.py holds the resolver and the one error shape.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from filejobs import runtime
from filejobs.access import Caller, caller_from
from filejobs.api import rendering
from filejobs.observability import SERVICE
from filejobs.services.errors import UnidentifiedCallerError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

    from filejobs.services.api import Requested
    from filejobs.services.operations import Started

# The handler's own Logger and Tracer (instrumentation.instruments), seen from here: a child
# logger shares its keys and output, and Powertools' Tracer is one per process.
logger = Logger(service=SERVICE, child=True)
tracer = Tracer(service=SERVICE)


def resource_router() -> APIGatewayRouter:
    """A Router for one resource's routes, its `current_event` typed as API Gateway's REST
    event (Powertools' `Router.__init__` carries no annotations, hence the one ignore)."""
    return APIGatewayRouter()  # type: ignore[no-untyped-call]


def caller(event: APIGatewayProxyEvent) -> Caller:
    # From the authorizer context (the local stack's tokens) or, with IAM auth, from the
    # assumed role of the signer (access.py); anyone else is refused.
    found = caller_from(event.raw_event, runtime.callers())
    if found is None:
        raise UnidentifiedCallerError("the request carries no valid caller identity")
    return found


def params(event: APIGatewayProxyEvent) -> dict[str, str]:
    return dict(event.query_string_parameters or {})


def idempotency_key(event: APIGatewayProxyEvent) -> str | None:
    return event.headers.get("Idempotency-Key")  # headers are case-insensitive


def about(key: str, value: str) -> None:
    """Name the job or file on every log line and trace of this request, once it is well formed
    (the path is the caller's to choose); keys are cleared at the next invocation."""
    try:
        uuid.UUID(value)
    except ValueError:
        return
    tracer.put_annotation(key=key, value=value)
    logger.append_keys(**{key: value})


def json_answer(status: int, body: str, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=body, headers=headers)


def no_content() -> Response[str]:
    return Response(status_code=204, body="")


def requested(made: Requested) -> Response[str]:
    """201 with the new job, or 200 with the job an earlier request of the same key made."""
    return json_answer(
        200 if made.replayed else 201,
        json.dumps(rendering.job_with_outputs(made.job)),
        headers={
            "Idempotency-Key": made.idempotency_key,
            "Idempotent-Replayed": "true" if made.replayed else "false",
        },
    )


def started(operation: Started) -> Response[str]:
    """202 with the operation started, or 200 with the one an earlier request of the same key
    started."""
    headers = {"Idempotent-Replayed": "true" if operation.replayed else "false"}
    body = json.dumps(rendering.started(operation))
    return json_answer(200 if operation.replayed else 202, body, headers)
