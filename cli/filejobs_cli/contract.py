"""What the CLI knows of the API's contract, the OpenAPI document
(layers/filejobs/filejobs/api_docs/openapi.json): its JobType and JobStatus schemas.

Written by tools/openapi.py with the document; do not edit. The CLI installs without the runtime
(`pip install ./cli`), so it carries these values rather than importing them; `tools/openapi.py
--check` and tests/unit/test_cli_contract.py fail when this file and the document disagree.
"""

JOB_TYPES: tuple[str, ...] = (
    "thumbnail_generation",
    "video_thumbnail",
    "document_preview",
    "compression",
    "virus_scan",
    "deduplication_check",
)
JOB_STATUSES: tuple[str, ...] = (
    "pending",
    "scheduled",
    "running",
    "completed",
    "failed",
    "cancelled",
)
