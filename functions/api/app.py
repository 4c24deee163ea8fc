"""The status API (GET /jobs/{job_id}, GET /health); the full API is the status API issue's."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.exceptions import BadRequestError, NotFoundError

from filejobs import runtime
from filejobs.observability import SERVICE, TRACED_MODULES
from filejobs.views import job_view

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)
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
    tracer.put_annotation(key="job_id", value=job_id)
    # Only a well-formed id reaches the logs: the path is the caller's to choose.
    with logger.append_context_keys(job_id=job_id):
        job = runtime.jobs().get(job_id, consistent=False)
        if job is None or job.metadata.deleted_at is not None:
            logger.info("job not found")
            raise NotFoundError(f"no job {job_id}")
        return job_view(job)


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)  # job views stay out of the traces
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
