"""The status API (GET /jobs/{job_id}, GET /health); the full API is the status API issue's."""

from __future__ import annotations

import uuid
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.exceptions import BadRequestError, NotFoundError
from aws_lambda_powertools.utilities.typing import LambdaContext

from filejobs import runtime
from filejobs.observability import SERVICE
from filejobs.views import job_view

logger = Logger(service=SERVICE)
app = APIGatewayRestResolver()


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> dict[str, Any]:
    try:
        uuid.UUID(job_id)
    except ValueError:
        raise BadRequestError(f"job id must be a UUID, got {job_id!r}") from None
    job = runtime.jobs().get(job_id, consistent=False)
    if job is None or job.metadata.deleted_at is not None:
        raise NotFoundError(f"no job {job_id}")
    return job_view(job)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
