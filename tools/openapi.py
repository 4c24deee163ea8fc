"""Writes the status API's OpenAPI document from the real resolver (functions/api/app.py).

    .venv/bin/python tools/openapi.py           # writes it
    .venv/bin/python tools/openapi.py --check   # exits 1 when the committed one differs

How: Powertools builds an OpenAPI document from any resolver (`get_openapi_json_schema`), with
or without `enable_validation`; it needs pydantic to do so, which the dev venv has and the
Lambda layer does not ship. So the handler module is imported as it is deployed (no second
resolver, no env flag) and its routes carry their descriptions as plain data (`_doc` in
app.py: summary, description, responses, request body). Powertools derives each path
parameter from the handler's signature; the query and header parameters, which the handlers
read by hand, travel as the `x-filejobs-parameters` extension and are merged here, and the
shared schemas (the one error shape, the views) are added under `components`.

The document goes to `layers/filejobs/filejobs/api_docs/openapi.json`: package data of the
layer (pyproject.toml), served as is by `GET /openapi.json`. It is the one copy; the test
tests/integration/test_api_requests.py fails when it drifts from what this tool writes. It
names the job types and statuses once (`components.schemas.JobType`, `JobStatus`), and from
those this tool also writes `cli/filejobs_cli/contract.py`, the CLI's lists of them (the CLI
installs without the runtime); tests/unit/test_cli_contract.py fails when that drifts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from filejobs.api.parsing import REASON_PATTERN
from filejobs.api.rendering import ErrorCode
from filejobs.api.webhooks import DELIVERY_ID_PATTERN, ENDPOINT_ID_PATTERN
from filejobs.domain import uploads as upload_rules
from filejobs.domain import webhooks as webhook_rules
from filejobs.domain.delays import MAX_DELAY_SECONDS, PAST_SKEW
from filejobs.domain.failures import FAILURE_GROUP_PATTERN
from filejobs.domain.job import (
    DEFAULT_MAX_RETRIES,
    MAX_RETRIES_LIMIT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    JobStatus,
    JobType,
)
from filejobs.domain.job_options import options_of
from filejobs.domain.keys import TENANT_PATTERN
from filejobs.domain.messages import UUID_PATTERN, Lane
from filejobs.domain.operations import (
    BULK_ACTIONS,
    MAX_ERROR_TEXT_CHARS,
    OPERATION_ID_PATTERN,
    Action,
    OperationStatus,
)
from filejobs.domain.outputs import OutputKind
from filejobs.domain.presets import (
    MAX_DESCRIPTION_CHARS,
    MAX_PREFIXES_PER_PRESET,
)
from filejobs.domain.presets import NAME_PATTERN as PRESET_NAME_PATTERN
from filejobs.domain.quotas import MAX_QUOTA_VALUE, QUOTA_FIELDS, UNLIMITED
from filejobs.domain.schedules import MAX_NAME_CHARS, SCHEDULE_ID_PATTERN, ScheduleAction
from filejobs.domain.tenant_prefixes import MAX_PREFIX_BYTES
from filejobs_dev.generated_files import write_or_check

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "layers" / "filejobs" / "filejobs" / "api_docs" / "openapi.json"
CLI_CONTRACT = ROOT / "cli" / "filejobs_cli" / "contract.py"
TITLE = "filejobs status API"
SERVERS_PLACEHOLDER = "https://{api_id}.execute-api.{region}.amazonaws.com/v1"

_STR = {"type": "string"}
# The job types and statuses are listed once, as components.schemas.JobType and JobStatus; every
# schema and parameter that takes one refers to them (and the CLI reads them: cli_contract).
_JOB_TYPE = {"$ref": "#/components/schemas/JobType"}
_JOB_STATUS = {"$ref": "#/components/schemas/JobStatus"}
_OPT_STR = {"type": ["string", "null"]}
# A person's words: at least one character that is not white space (the API refuses a reason of
# spaces or line breaks alone), at most 500; the pattern spelled to mean that in any regex engine.
_REASON = {"type": "string", "minLength": 1, "maxLength": 500, "pattern": REASON_PATTERN}
_OPT_TIME = {"type": ["string", "null"], "format": "date-time"}
_OPT_COUNT = {"type": ["integer", "null"], "minimum": 0}
_OPT_SECONDS = {"type": ["number", "null"], "minimum": 0}
_OF_JOB = {
    "type": "object",
    "required": ["job_id", "job_type"],
    "properties": {
        "job_id": {"type": "string", "format": "uuid"},
        "job_type": {"$ref": "#/components/schemas/JobType"},
    },
}
# An attempt's progress and log (domain/attempt_notes.py): the log in GET /jobs/{job_id} only.
_NOTES: dict[str, Any] = {
    "fraction": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    "percent": {"type": ["integer", "null"], "minimum": 0, "maximum": 100},
    "message": {"type": ["string", "null"], "maxLength": 120},
    "log": {
        "description": (
            "The attempt's key lines: at most 20 of 200 bytes, its first 8 and latest kept, "
            "with a line in between that says how many were left out"
        ),
        "type": "array",
        "items": _STR,
        "maxItems": 20,
    },
    "log_lines_dropped": {"type": "integer", "minimum": 0},
}

_PERCENTILES = {
    "type": ["object", "null"],
    "properties": {"p50": {"type": "number"}, "p95": {"type": "number"}, "p99": {"type": "number"}},
}
_COUNT = {"type": "integer", "minimum": 0}
CONSOLE_SCHEMAS: dict[str, Any] = {
    "Overview": {
        "type": "object",
        "required": ["scope", "generated_at", "queues", "dead_letters", "series", "virus_scan"],
        "properties": {
            "scope": _STR,
            "generated_at": {"type": "string", "format": "date-time"},
            "queues": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "job_type": _STR,
                        "lane": {"type": "string", "enum": [lane.value for lane in Lane]},
                        "pending": _COUNT,
                        "scheduled": _COUNT,
                        "running": _COUNT,
                        "completed_last_hour": _COUNT,
                        "failed_last_hour": _COUNT,
                        "failed_last_day": _COUNT,
                    },
                },
            },
            "dead_letters": {
                "type": "array",
                "items": {"type": "object", "properties": {"queue": _STR, "depth": _COUNT}},
            },
            "series": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "minute": {"type": "string", "format": "date-time"},
                        "completed": _COUNT,
                        "failed": _COUNT,
                        "cancelled": _COUNT,
                        "latency_seconds": _PERCENTILES,
                    },
                },
            },
            "latency_seconds": _PERCENTILES,
            "latency_by_type": {"type": "object", "additionalProperties": _PERCENTILES},
            "virus_scan": {
                "type": "object",
                "properties": {
                    "definitions": {
                        "type": ["object", "null"],
                        "properties": {
                            "version": _STR,
                            "published_at": {"type": "string", "format": "date-time"},
                            "age_seconds": _COUNT,
                        },
                    },
                    "verdicts_last_hour": {"type": "object", "additionalProperties": _COUNT},
                    "verdicts_last_day": {"type": "object", "additionalProperties": _COUNT},
                },
            },
        },
    },
    "FailureGroups": {
        "type": "object",
        "required": ["groups"],
        "properties": {
            "groups": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "pattern": FAILURE_GROUP_PATTERN},
                        "job_type": _STR,
                        "fingerprint": _STR,
                        "count": _COUNT,
                        "total": _COUNT,
                        "first_seen": _OPT_TIME,
                        "last_seen": _OPT_TIME,
                        "sample": {
                            "type": ["object", "null"],
                            "properties": {
                                "job_id": {"type": "string", "format": "uuid"},
                                "tenant": _STR,
                                "error_message": _STR,
                            },
                        },
                    },
                },
            }
        },
    },
}


SCHEMAS: dict[str, Any] = {
    "JobType": {
        "type": "string",
        "description": "What a job does: the processor that runs it",
        "enum": [t.value for t in JobType],
    },
    "JobStatus": {
        "type": "string",
        "description": "Where a job is in its life; "
        + ", ".join(s.value for s in JobStatus if s.is_terminal)
        + " are final",
        "enum": [s.value for s in JobStatus],
    },
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {
                        "type": "string",
                        "enum": [code.value for code in ErrorCode],
                    },
                    "message": _STR,
                },
            }
        },
    },
    "GatewayError": {
        "type": "object",
        "description": "API Gateway's own answer, before any function runs",
        "properties": {"message": _STR},
    },
    "DocsPage": {"type": "string", "description": "An HTML page"},
    "Health": {"type": "object", "properties": {"status": {"const": "ok"}}},
    "OutputKind": {
        "type": "string",
        "description": "What a derived file is for",
        "enum": [kind.value for kind in OutputKind],
    },
    "DerivedFile": {
        "type": "object",
        "description": (
            "A file a job wrote, typed: every field is there, null where the file has none "
            "(a page number on a page, a time range on a storyboard tile or an animation)"
        ),
        "required": [
            "key",
            "kind",
            "format",
            "bytes",
            "width",
            "height",
            "page",
            "start_seconds",
            "end_seconds",
        ],
        "properties": {
            "key": {"description": "Its object key in the outputs bucket", **_STR},
            "kind": {"$ref": "#/components/schemas/OutputKind"},
            "format": {
                "description": "Its file extension: webp, jpeg, png, vtt, mp4, ...",
                **_OPT_STR,
            },
            "bytes": _OPT_COUNT,
            "width": _OPT_COUNT,
            "height": _OPT_COUNT,
            "page": {"description": "A document page's number, from 1", **_OPT_COUNT},
            "start_seconds": _OPT_SECONDS,
            "end_seconds": _OPT_SECONDS,
        },
    },
    "Output": {
        "description": "A derived file with a short-lived download URL",
        "allOf": [
            {"$ref": "#/components/schemas/DerivedFile"},
            {
                "type": "object",
                "required": ["name", "key", "url", "expires_at"],
                "properties": {
                    "name": _STR,
                    "url": {"type": "string", "format": "uri"},
                    "expires_at": {"type": "string", "format": "date-time"},
                },
            },
        ],
    },
    "BundleFile": {
        "description": "One file of a file's bundle: a derived file and the job that wrote it",
        "allOf": [{"$ref": "#/components/schemas/DerivedFile"}, _OF_JOB],
    },
    "BundleOutput": {
        "description": "One file of a file's bundle, with its download URL",
        "allOf": [{"$ref": "#/components/schemas/Output"}, _OF_JOB],
    },
    "Job": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "file_id": {"type": "string", "format": "uuid"},
            "job_type": _JOB_TYPE,
            "tenant": _STR,
            "status": _JOB_STATUS,
            "priority": {"type": "integer"},
            "attempt": {"type": "integer"},
            "retry_count": {"type": "integer"},
            "max_retries": {"type": "integer"},
            "scheduled_at": {
                **_OPT_TIME,
                "description": "When a scheduled job is due: its requested time, or its retry",
            },
            "next_retry_at": {**_OPT_TIME, "description": "The same as scheduled_at"},
            "options": {
                "type": "object",
                "description": "The options the job was requested with (input_data)",
            },
            "started_at": _OPT_TIME,
            "completed_at": _OPT_TIME,
            "duration_seconds": {"type": ["number", "null"]},
            "error_message": _OPT_STR,
            "result": {"type": ["object", "null"]},
            "cancelled_by": _OPT_STR,
            "cancel_reason": _OPT_STR,
            "progress": {
                "description": (
                    "The running attempt's progress as its last heartbeat carried it (within a "
                    "third of the lease); null when it reported none. A cancelled job keeps "
                    "where its attempt stopped. `log` in GET /jobs/{job_id} only"
                ),
                "type": ["object", "null"],
                "properties": {
                    "attempt": {"type": "integer"},
                    "updated_at": {"type": "string", "format": "date-time"},
                    **_NOTES,
                },
            },
            "attempts": {
                "description": "The last 10 attempts, oldest first",
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "number": {"type": "integer"},
                        "started_at": {"type": "string", "format": "date-time"},
                        "ended_at": {"type": "string", "format": "date-time"},
                        "outcome": {"enum": ["completed", "failed", "retrying", "lease_expired"]},
                        "error": _OPT_STR,
                        **_NOTES,
                    },
                },
            },
            "created_at": _OPT_TIME,
            "updated_at": _OPT_TIME,
            "outputs": {
                "description": "Single-job and single-file answers only",
                "type": "array",
                "items": {"$ref": "#/components/schemas/Output"},
            },
        },
    },
    "File": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "tenant": _STR,
            "bucket": _STR,
            "key": _STR,
            "version_id": _OPT_STR,
            "size": {"type": "integer"},
            "content_type": _STR,
            "sha256": _OPT_STR,
            "status": _STR,
            "status_reason": _OPT_STR,
            "scan_status": _OPT_STR,
            "scan": {
                "description": "The evidence behind scan_status; null before a verdict",
                "type": ["object", "null"],
                "properties": {
                    "verdict": _STR,
                    "scanned_at": {"type": "string", "format": "date-time"},
                    "job_id": {"type": "string", "format": "uuid"},
                    "engines": {"type": "object", "additionalProperties": _STR},
                    "definitions_version": _OPT_STR,
                    "signatures": {"type": "array", "items": _STR},
                    "reason": _OPT_STR,
                },
            },
            "duplicate_of": _OPT_STR,
            "preset": {
                "description": (
                    "The upload preset that chose the file's jobs, and how the upload came to it "
                    "(metadata, prefix, tenant); null: its content type's default jobs"
                ),
                "type": ["object", "null"],
                "required": ["name", "version", "by"],
                "properties": {
                    "name": _STR,
                    "version": {"type": "integer", "minimum": 1},
                    "by": {"type": "string", "enum": ["metadata", "prefix", "tenant"]},
                },
            },
            "preset_note": {
                "description": "Why a preset the upload named was not applied",
                "type": ["string", "null"],
            },
            "processed": {
                "description": (
                    "The last time every job of the file was terminal (the `File Processed` "
                    "event's moment); null until then. A job opened again later (a retry, a "
                    "rescan, a new job) leaves it as it was until the file is processed again."
                ),
                "type": ["object", "null"],
                "properties": {
                    "completed_at": {"type": "string", "format": "date-time"},
                    "fingerprint": {
                        "description": "Names this completion (its jobs' attempts and statuses)",
                        "type": "string",
                    },
                    "counts": {
                        "description": "Jobs by status",
                        "type": "object",
                        "additionalProperties": {"type": "integer"},
                    },
                    "jobs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "format": "uuid"},
                                "job_type": _STR,
                                "status": _STR,
                                "attempt": {"type": "integer"},
                                "error": _OPT_STR,
                                "result": {
                                    "description": (
                                        "The job's result when under 1 KB; else its scalar "
                                        "fields and `truncated: true`"
                                    ),
                                    "type": ["object", "null"],
                                },
                                "outputs": {
                                    "description": "The files the job wrote (the first 24)",
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/DerivedFile"},
                                },
                                "more_outputs": {
                                    "description": "Files past the first 24, counted",
                                    "type": "integer",
                                },
                            },
                        },
                    },
                    "more_jobs": {
                        "description": "Jobs past the first 50, counted but not listed",
                        "type": "integer",
                    },
                },
            },
            "outputs": {
                "description": (
                    "The bundle: every file the jobs of the last completion wrote, typed, in one "
                    "list (empty before it, and once the outputs are withdrawn: quarantined, "
                    "deleted); `File Processed` carries it"
                ),
                "type": "array",
                "items": {"$ref": "#/components/schemas/BundleFile"},
            },
            "created_at": _OPT_TIME,
            "updated_at": _OPT_TIME,
        },
    },
    "FileWithJobs": {
        "allOf": [
            {"$ref": "#/components/schemas/File"},
            {
                "type": "object",
                "properties": {
                    "processing_state": {
                        "description": (
                            "`processed` once every job is terminal and the completion is "
                            "recorded; `processing` before, and while a job opened again runs; "
                            "`stored` when the file was given no job (a preset that stores "
                            "only, or a rejected upload)"
                        ),
                        "type": "string",
                        "enum": ["processing", "processed", "stored"],
                    },
                    "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
                    "outputs": {
                        "description": (
                            "The bundle as the jobs hold it now, each file with its download URL"
                        ),
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/BundleOutput"},
                    },
                    "duplicates": {
                        "description": "The tenant's other files with the same content",
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "format": "uuid"},
                                "key": _STR,
                                "created_at": _OPT_TIME,
                            },
                        },
                    },
                },
            },
        ]
    },
    "FileJobs": {
        "type": "object",
        "properties": {
            "file_id": {"type": "string", "format": "uuid"},
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
        },
    },
    "FileVersions": {
        "type": "object",
        "properties": {
            "bucket": _STR,
            "key": _STR,
            "files": {"type": "array", "items": {"$ref": "#/components/schemas/File"}},
        },
    },
    "JobPage": {
        "type": "object",
        "properties": {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "order": {"type": "string", "enum": ["newest_first", "queue"]},
            "next_token": _OPT_STR,
        },
    },
    "RescanRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"reason": _REASON},
    },
    "RescanFilesRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "tenant": {
                "type": "string",
                "pattern": TENANT_PATTERN,
                "description": "Required of an operator; a tenant may name only its own",
            },
            "prefix": {"type": "string", "maxLength": 1024, "description": "A key prefix"},
            "reason": _REASON,
            "dry_run": {"type": "boolean"},
            "next_token": {"type": "string", "maxLength": 2048},
        },
    },
    "RescanPage": {
        "type": "object",
        "properties": {
            "tenant": _STR,
            "prefix": _STR,
            "dry_run": {"type": "boolean"},
            "requested": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "file_id": {"type": "string", "format": "uuid"},
                        "job_id": {"type": "string", "format": "uuid"},
                        "created": {"type": "boolean"},
                    },
                },
            },
            "skipped": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"file_id": {"type": "string", "format": "uuid"}, "reason": _STR},
                },
            },
            "next_token": _OPT_STR,
        },
    },
    "CancelRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"reason": _REASON},
    },
    "OpenApiDocument": {"type": "object"},
    "FileListing": {
        "type": "object",
        "required": ["tenant", "files", "next_token"],
        "properties": {
            "tenant": _STR,
            "files": {"type": "array", "items": {"$ref": "#/components/schemas/File"}},
            "next_token": _OPT_STR,
        },
    },
    "FilesAnswer": {
        "anyOf": [
            {"$ref": "#/components/schemas/FileVersions"},
            {"$ref": "#/components/schemas/FileListing"},
        ]
    },
    "JobFilter": {
        "type": "object",
        "additionalProperties": False,
        "description": "Every field given must match; a tenant's filter is its own tenant's",
        "properties": {
            "tenant": {"type": "string", "pattern": TENANT_PATTERN},
            "job_type": _JOB_TYPE,
            "status": _JOB_STATUS,
            "group": {"type": "string", "pattern": FAILURE_GROUP_PATTERN},
            "error": {"type": "string", "minLength": 1, "maxLength": MAX_ERROR_TEXT_CHARS},
            "since": {"type": "string", "format": "date-time"},
            "until": {"type": "string", "format": "date-time"},
        },
    },
    "OperationRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["action", "filter", "reason"],
        "properties": {
            "action": {"type": "string", "enum": [a.value for a in BULK_ACTIONS]},
            "filter": {"$ref": "#/components/schemas/JobFilter"},
            "reason": _REASON,
            "dry_run": {"type": "boolean"},
        },
    },
    "Operation": {
        "type": "object",
        "required": ["id", "action", "filter", "reason", "status", "matched", "processed"],
        "properties": {
            "id": {"type": "string", "pattern": OPERATION_ID_PATTERN},
            "action": {"type": "string", "enum": [a.value for a in Action]},
            "filter": {"type": "object"},
            "reason": _STR,
            "tenant": _OPT_STR,
            "created_by": _STR,
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "status": {"type": "string", "enum": [s.value for s in OperationStatus]},
            "matched": {"type": "integer", "minimum": 0},
            "processed": {"type": "integer", "minimum": 0},
            "changed": {"type": "integer", "minimum": 0},
            "skipped": {"type": "integer", "minimum": 0},
            "errors": {"type": "integer", "minimum": 0},
            "finished_at": _OPT_TIME,
            "error": _OPT_STR,
            "files": {
                "description": "A schedule's run: the files it acts on instead of jobs",
                "type": ["object", "null"],
            },
            "schedule_id": _OPT_STR,
            "removed": {
                "description": "A tenant erasure's: what it removed so far, by kind (schedules, "
                "webhook_endpoints, webhook_deliveries, presets, preset_versions, "
                "quota_overrides, usage_days, upload_versions, outputs, jobs, "
                "quarantined_versions); null for any other operation",
                "type": ["object", "null"],
                "additionalProperties": {"type": "integer", "minimum": 0},
            },
            "dry_run": {"const": False},
        },
    },
    "Erasure": {
        "type": "object",
        "description": "The audit record of an erasure: ids, counts, who and when; nothing that "
        "was in the files (no key, name, hash or metadata).",
        "required": [
            "tenant",
            "file_ids",
            "erased_at",
            "erased_by",
            "versions_deleted",
            "outputs_deleted",
            "jobs_erased",
        ],
        "properties": {
            "tenant": _STR,
            "file_ids": {"type": "array", "items": _STR},
            "erased_at": {"type": "string", "format": "date-time"},
            "erased_by": _STR,
            "versions_deleted": {"type": "integer", "minimum": 0},
            "outputs_deleted": {"type": "integer", "minimum": 0},
            "jobs_erased": {"type": "integer", "minimum": 0},
            "quarantined_copies_deleted": {"type": "integer", "minimum": 0},
            "operation_id": _OPT_STR,
        },
    },
    "OperationPreview": {
        "type": "object",
        "required": ["dry_run", "action", "filter", "matched", "exact", "sample"],
        "properties": {
            "dry_run": {"const": True},
            "action": {"type": "string", "enum": [a.value for a in BULK_ACTIONS]},
            "filter": {"type": "object"},
            "matched": {"type": "integer", "minimum": 0},
            "exact": {"type": "boolean", "description": "false: at least `matched`"},
            "sample": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
        },
    },
    "OperationAnswer": {
        "anyOf": [
            {"$ref": "#/components/schemas/Operation"},
            {"$ref": "#/components/schemas/OperationPreview"},
        ]
    },
    "TenantErasureRequest": {
        "type": "object",
        "required": ["reason"],
        "additionalProperties": False,
        "properties": {
            "reason": _REASON,
            "dry_run": {"type": "boolean", "description": "Count the files; change nothing"},
        },
    },
    "TenantErasurePreview": {
        "type": "object",
        "required": ["dry_run", "tenant", "files", "exact"],
        "properties": {
            "dry_run": {"const": True},
            "tenant": _STR,
            "files": {"type": "integer", "minimum": 0},
            "exact": {"type": "boolean", "description": "false: at least `files`"},
        },
    },
    "TenantErasureAnswer": {
        "anyOf": [
            {"$ref": "#/components/schemas/Operation"},
            {"$ref": "#/components/schemas/TenantErasurePreview"},
        ]
    },
    "OperationPage": {
        "type": "object",
        "required": ["operations", "next_token"],
        "properties": {
            "operations": {"type": "array", "items": {"$ref": "#/components/schemas/Operation"}},
            "next_token": _OPT_STR,
        },
    },
    "ScheduleRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "expression", "action", "prefix"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
            "expression": {
                "type": "string",
                "description": "cron(minutes hours day-of-month month day-of-week year)",
                "examples": ["cron(0 3 * * ? *)", "cron(0 2 1 * ? *)"],
            },
            "timezone": {"type": "string", "description": "IANA time zone (default UTC)"},
            "action": {"type": "string", "enum": [a.value for a in ScheduleAction]},
            "prefix": {
                "type": "string",
                "description": "An object key prefix inside uploads/{tenant}/",
                "maxLength": MAX_PREFIX_BYTES,
            },
            "tenant": {"type": "string", "pattern": TENANT_PATTERN},
            "job_type": _JOB_TYPE,
            "input_data": {"type": "object", "description": "The run's jobs' options (run)"},
        },
    },
    "ScheduleChange": {
        "type": "object",
        "additionalProperties": False,
        "required": ["enabled"],
        "properties": {"enabled": {"type": "boolean"}},
    },
    "Schedule": {
        "type": "object",
        "required": ["id", "tenant", "name", "expression", "action", "prefix", "enabled"],
        "properties": {
            "id": {"type": "string", "pattern": SCHEDULE_ID_PATTERN},
            "tenant": _STR,
            "name": _STR,
            "expression": _STR,
            "timezone": _STR,
            "action": {"type": "string", "enum": [a.value for a in ScheduleAction]},
            "prefix": _STR,
            "job_type": _OPT_STR,
            "input_data": {"type": ["object", "null"]},
            "enabled": {"type": "boolean"},
            "next_runs": {
                "description": "The next three runs (none while paused)",
                "type": "array",
                "items": {"type": "string", "format": "date-time"},
            },
            "runs": {"type": "integer", "minimum": 0},
            "last_run_at": _OPT_TIME,
            "last_operation_id": _OPT_STR,
            "created_by": _STR,
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
        },
    },
    "PresetJob": {
        "type": "object",
        "additionalProperties": False,
        "required": ["job_type"],
        "properties": {
            "job_type": _JOB_TYPE,
            "options": {
                "type": "object",
                "description": "The job type's options (the JobRequest input_data of its type)",
            },
            "priority": {"type": "integer", "minimum": PRIORITY_MIN, "maximum": PRIORITY_MAX},
        },
    },
    "PresetRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["jobs"],
        "properties": {
            "jobs": {
                "type": "array",
                "description": "Each job type at most once; [] stores uploads and runs nothing",
                "items": {"$ref": "#/components/schemas/PresetJob"},
            },
            "prefixes": {
                "type": "array",
                "maxItems": MAX_PREFIXES_PER_PRESET,
                "items": {
                    "type": "string",
                    "description": "An object key prefix inside uploads/{tenant}/",
                    "maxLength": MAX_PREFIX_BYTES,
                },
            },
            "tenant_default": {"type": "boolean"},
            "description": {"type": "string", "maxLength": MAX_DESCRIPTION_CHARS},
        },
    },
    "Preset": {
        "type": "object",
        "required": ["tenant", "name", "version", "jobs", "prefixes", "tenant_default"],
        "properties": {
            "tenant": _STR,
            "name": {"type": "string", "pattern": PRESET_NAME_PATTERN},
            "version": {"type": "integer", "minimum": 1},
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/PresetJob"}},
            "prefixes": {"type": "array", "items": _STR},
            "tenant_default": {"type": "boolean"},
            "description": _STR,
            "updated_at": _OPT_TIME,
            "updated_by": _STR,
        },
    },
    "PresetList": {
        "type": "object",
        "required": ["presets"],
        "properties": {
            "presets": {"type": "array", "items": {"$ref": "#/components/schemas/Preset"}}
        },
    },
    "ScheduleList": {
        "type": "object",
        "required": ["schedules"],
        "properties": {
            "schedules": {"type": "array", "items": {"$ref": "#/components/schemas/Schedule"}}
        },
    },
}


def _quota_schemas() -> dict[str, Any]:
    """A tenant's quotas as the API shows them, and an operator's change to them."""
    limit = {"type": "integer", "minimum": 0, "maximum": MAX_QUOTA_VALUE}
    limits = {
        "type": "object",
        "required": list(QUOTA_FIELDS),
        "properties": {name: dict(limit) for name in QUOTA_FIELDS},
    }
    return {
        "TenantQuotas": {
            "type": "object",
            "properties": {
                "tenant": _STR,
                "limits": {**limits, "description": "In force: overrides, else defaults"},
                "defaults": {**limits, "description": "The stack's (template parameters)"},
                "overrides": {
                    "type": "object",
                    "description": "The tenant's own, as an operator set them",
                    "properties": {name: dict(limit) for name in QUOTA_FIELDS},
                },
                "overrides_updated_at": _OPT_TIME,
                "overrides_updated_by": _OPT_STR,
                "usage": {
                    "type": "object",
                    "description": "Today's (UTC) accepted uploads, rescans and operations",
                    "properties": {
                        "day": {"type": "string", "format": "date"},
                        "files": {"type": "integer"},
                        "bytes": {"type": "integer"},
                        "rescans": {"type": "integer"},
                        "operations": {"type": "integer"},
                    },
                },
                "unlimited": {"const": UNLIMITED, "description": "The value that means no limit"},
            },
        },
        "QuotaChange": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "description": "A limit given is set (0: unlimited); null puts the default back",
            "properties": {name: {**limit, "type": ["integer", "null"]} for name in QUOTA_FIELDS},
        },
    }


# Where a response's ids lead (OpenAPI links): for readers, and for schemathesis' stateful phase,
# which follows them from a real file to its jobs. (answering path, method, status) -> link name
# -> (target path, method, the id's place in the response body).
_FILE_ROUTES = [("/files/{file_id}", "get"), ("/files/{file_id}/jobs", "get"),
                ("/files/{file_id}/jobs", "post"), ("/files/{file_id}/rescan", "post")]  # fmt: skip
_JOB_ROUTES = [("/jobs/{job_id}", "get"), ("/jobs/{job_id}/cancel", "post"),
               ("/jobs/{job_id}/retry", "post"), ("/jobs/{job_id}", "delete")]  # fmt: skip
LINKS: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {
    ("/files", "get", "200"): [(path, method, "/files/0/id") for path, method in _FILE_ROUTES],
    ("/files/{file_id}", "get", "200"): [(p, m, "/jobs/0/id") for p, m in _JOB_ROUTES],
    ("/files/{file_id}/jobs", "post", "201"): [(p, m, "/id") for p, m in _JOB_ROUTES],
    ("/files/{file_id}/jobs", "post", "200"): [(p, m, "/id") for p, m in _JOB_ROUTES],
    ("/files/{file_id}/rescan", "post", "201"): [(p, m, "/id") for p, m in _JOB_ROUTES],
    ("/files/{file_id}/rescan", "post", "200"): [(p, m, "/id") for p, m in _JOB_ROUTES],
}


def _upload_schemas() -> dict[str, Any]:
    """POST /uploads: what a signed upload may be asked for, and the form it answers."""
    seconds = {
        "type": "integer",
        "minimum": int(upload_rules.MIN_EXPIRY.total_seconds()),
        "maximum": int(upload_rules.MAX_EXPIRY.total_seconds()),
        "default": int(upload_rules.DEFAULT_EXPIRY.total_seconds()),
    }
    metadata = {
        "type": "object",
        "maxProperties": upload_rules.MAX_METADATA_ENTRIES,
        # Names starting with the service's own prefix are refused: the schema says so too.
        "propertyNames": {
            "pattern": f"^(?!{upload_rules.RESERVED_METADATA_PREFIX})"
            + upload_rules.METADATA_NAME_PATTERN.removeprefix("^")
        },
        "additionalProperties": {
            "type": "string",
            "maxLength": upload_rules.MAX_METADATA_VALUE_CHARS,
            "pattern": upload_rules.METADATA_VALUE_PATTERN,
        },
        "description": (
            "Sent as x-amz-meta-<name>; names starting 'filejobs-' are the service's; printable "
            "ASCII values"
        ),
    }
    return {
        "UploadRequest": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tenant": {**_STR, "pattern": TENANT_PATTERN, "description": "Operators only"},
                "filename": {**_STR, "minLength": 1, "maxLength": 1024},
                "folder": {**_STR, "pattern": upload_rules.FOLDER_PATTERN},
                "content_type": {**_STR, "pattern": upload_rules.CONTENT_TYPE_PATTERN},
                "preset": {**_STR, "pattern": PRESET_NAME_PATTERN},
                "metadata": metadata,
                "expires_in": seconds,
            },
        },
        "SignedUpload": {
            "type": "object",
            "required": ["method", "url", "fields", "key", "tenant", "max_bytes", "expires_at"],
            "properties": {
                "method": {"const": "POST"},
                "url": {**_STR, "format": "uri"},
                "fields": {
                    "type": "object",
                    "additionalProperties": _STR,
                    "description": "Posted in order before the file (the last field, file)",
                },
                "key": _STR,
                "tenant": _STR,
                "max_bytes": {"type": "integer", "minimum": 1},
                "expires_at": {**_STR, "format": "date-time"},
                "content_type": _OPT_STR,
                "preset": _OPT_STR,
                "metadata": {"type": "object", "additionalProperties": _STR},
            },
        },
    }


def _webhook_schemas() -> dict[str, Any]:
    """Webhook endpoints and deliveries as the API shows them (services/webhooks.py views)."""
    event_types = {
        "type": "array",
        "minItems": 1,
        "uniqueItems": True,
        "items": {"type": "string", "enum": list(webhook_rules.EVENT_TYPES)},
    }
    time = {"type": "string", "format": "date-time"}
    endpoint_required = ["id", "tenant", "url", "event_types", "status", "secrets"]
    endpoint_properties: dict[str, Any] = {
        "id": {"type": "string", "pattern": ENDPOINT_ID_PATTERN},
        "tenant": {"type": "string", "pattern": TENANT_PATTERN},
        "url": _STR,
        "event_types": event_types,
        "description": _STR,
        "status": {"type": "string", "enum": [s.value for s in webhook_rules.EndpointStatus]},
        "created_at": time,
        "updated_at": time,
        "created_by": _STR,
        "failing_since": _OPT_TIME,
        "disabled_at": _OPT_TIME,
        "disabled_reason": _OPT_STR,
        "secrets": {
            "type": "array",
            "description": "When each active secret was made and ends (never the secret)",
            "items": {
                "type": "object",
                "properties": {"created_at": time, "expires_at": _OPT_TIME},
            },
        },
    }
    endpoint = {"type": "object", "required": endpoint_required, "properties": endpoint_properties}
    attempt = {
        "type": "object",
        "properties": {
            "number": {"type": "integer", "minimum": 1},
            "at": time,
            "status_code": {"type": ["integer", "null"]},
            "latency_ms": {"type": "integer", "minimum": 0},
            "error": _OPT_STR,
        },
    }
    delivery = {
        "type": "object",
        "required": ["id", "endpoint_id", "event_id", "event_type", "status", "attempts"],
        "properties": {
            "id": {"type": "string", "pattern": DELIVERY_ID_PATTERN},
            "endpoint_id": {"type": "string", "pattern": ENDPOINT_ID_PATTERN},
            "tenant": {"type": "string", "pattern": TENANT_PATTERN},
            "event_id": _STR,
            "event_type": _STR,
            "status": {"type": "string", "enum": [s.value for s in webhook_rules.DeliveryStatus]},
            "attempt": {"type": "integer", "minimum": 0},
            "created_at": time,
            "updated_at": time,
            "next_attempt_at": _OPT_TIME,
            "resend_of": _OPT_STR,
            "response_code": {"type": ["integer", "null"]},
            "latency_ms": {"type": ["integer", "null"]},
            "error": _OPT_STR,
            "attempts": {"type": "array", "items": attempt},
            "body": {"type": "string", "description": "The JSON sent (one delivery's view)"},
        },
    }
    return {
        "WebhookRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["url", "event_types"],
            "properties": {
                "url": {"type": "string", "maxLength": webhook_rules.MAX_URL_LENGTH},
                "event_types": event_types,
                "tenant": {"type": "string", "pattern": TENANT_PATTERN},
                "description": {
                    "type": "string",
                    "maxLength": webhook_rules.MAX_DESCRIPTION_LENGTH,
                },
            },
        },
        "Rotation": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"overlap_hours": {"type": "number", "minimum": 0, "maximum": 168}},
        },
        "Webhook": endpoint,
        "WebhookWithSecret": {
            "type": "object",
            "required": [*endpoint_required, "secret"],
            "properties": {
                **endpoint_properties,
                "secret": {"type": "string", "description": "Shown in this answer only"},
            },
        },
        "WebhookList": {
            "type": "object",
            "required": ["webhooks"],
            "properties": {
                "webhooks": {"type": "array", "items": {"$ref": "#/components/schemas/Webhook"}}
            },
        },
        "WebhookDelivery": delivery,
        "WebhookDeliveryPage": {
            "type": "object",
            "required": ["deliveries", "next_token"],
            "properties": {
                "deliveries": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/WebhookDelivery"},
                },
                "next_token": _OPT_STR,
            },
        },
    }


def _add_links(paths: dict[str, Any]) -> None:
    for (path, method, status), targets in LINKS.items():
        links = paths[path][method]["responses"][status].setdefault("links", {})
        for target_path, target_method, pointer in targets:
            target = paths[target_path][target_method]
            parameter = next(p["name"] for p in target["parameters"] if p["in"] == "path")
            links[target["operationId"]] = {
                "operationId": target["operationId"],
                "parameters": {parameter: f"$response.body#{pointer}"},
            }


def _request_schema(job_type: JobType) -> dict[str, Any]:
    """The body of POST /files/{file_id}/jobs for one job type: its options are its own."""
    options_ref = f"#/components/schemas/{_schema_name(job_type)}Options"
    return {
        "type": "object",
        "required": ["job_type"],
        "additionalProperties": False,
        "properties": {
            "job_type": {"type": "string", "const": job_type.value},
            "priority": {
                "type": "integer",
                "minimum": PRIORITY_MIN,
                "maximum": PRIORITY_MAX,
                "description": (
                    "Higher is more important. Above 0 sends the job to its type's high lane: an "
                    "operator's to give (422 for a tenant); below 0 to its low lane, whose few "
                    "workers (rescans and backfills run there) never hold up new uploads' jobs. "
                    "0 by default"
                ),
            },
            "input_data": {
                "description": (
                    f"The {job_type.value} job's options (docs/JOBS.md, Job options); an unknown "
                    "name or a value out of bounds answers 422 naming the field. null or "
                    "absent: every default"
                ),
                "anyOf": [{"$ref": options_ref}, {"type": "null"}],
            },
            "run_at": {
                "type": "string",
                "format": "date-time",
                "description": (
                    "Start the job at this time (RFC 3339 with its UTC offset), at most 30 days "
                    f"ahead; up to {int(PAST_SKEW.total_seconds())} s in the past runs now, "
                    "earlier answers 422. The job waits in `scheduled` until then. Not with "
                    "delay_seconds"
                ),
            },
            "delay_seconds": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_DELAY_SECONDS,
                "description": (
                    "Start the job this many seconds after the request (0: now). Not with run_at"
                ),
            },
            "max_retries": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RETRIES_LIMIT,
                "default": DEFAULT_MAX_RETRIES,
                "description": (
                    "Retries after a transient failure (the job runs at most max_retries + 1 "
                    "attempts before it fails for good; a permanent error fails it at once)"
                ),
            },
        },
        "not": {"required": ["run_at", "delay_seconds"]},
    }


def _schema_name(job_type: JobType) -> str:
    """thumbnail_generation -> ThumbnailGeneration."""
    return "".join(part.capitalize() for part in job_type.value.split("_"))


def _job_request_schemas() -> dict[str, Any]:
    """JobRequest: one body per job type (oneOf, told apart by job_type), each with the options
    of its type (domain/job_options.py, the definition the API and the processors read)."""
    schemas: dict[str, Any] = {}
    mapping = {}
    for job_type in JobType:
        name = _schema_name(job_type)
        schemas[f"{name}Options"] = options_of(job_type).schema()
        schemas[f"{name}JobRequest"] = _request_schema(job_type)
        mapping[job_type.value] = f"#/components/schemas/{name}JobRequest"
    schemas["JobRequest"] = {
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "job_type", "mapping": mapping},
    }
    return schemas


def _complete(operation: dict[str, Any]) -> None:
    """What Powertools cannot say from a handler's signature: ids are UUIDs (the API answers 400
    to anything else before a database call), the query and header parameters app.py declares
    as an extension, and that a body-less answer has no content (Powertools' default is JSON)."""
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path" and parameter["name"] == "operation_id":
            parameter["schema"] = {"type": "string", "pattern": OPERATION_ID_PATTERN}
        elif parameter["in"] == "path" and parameter["name"] == "webhook_id":
            parameter["schema"] = {"type": "string", "pattern": ENDPOINT_ID_PATTERN}
        elif parameter["in"] == "path" and parameter["name"] == "delivery_id":
            parameter["schema"] = {"type": "string", "pattern": DELIVERY_ID_PATTERN}
        elif parameter["in"] == "path" and parameter["name"] == "schedule_id":
            parameter["schema"] = {"type": "string", "pattern": SCHEDULE_ID_PATTERN}
        elif parameter["in"] == "path" and parameter["name"] == "preset_name":
            parameter["schema"] = {"type": "string", "pattern": PRESET_NAME_PATTERN}
        elif parameter["in"] == "path" and parameter["name"].endswith("_id"):
            parameter["schema"] = {"type": "string", "format": "uuid", "pattern": UUID_PATTERN}
        if parameter["in"] == "path" and parameter["name"] == "tenant":
            parameter["schema"] = {"type": "string", "pattern": TENANT_PATTERN}
    extra = operation.pop("x-filejobs-parameters", [])
    if extra:
        operation["parameters"] = [*operation.get("parameters", []), *extra]
    for response in operation["responses"].values():
        if not response.get("content", True):
            del response["content"]


def build_document() -> dict[str, Any]:
    """The OpenAPI document of the resolver in functions/api/app.py, as a JSON-ready dict."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # After the path is set: run as a script, only tools/ is on it.
    from functions.api.app import app  # noqa: PLC0415

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    document: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=version,
            description=(
                "Files and their processing jobs, seen through the caller's tenant. Every error "
                'answers {"error": {"code", "message"}}.'
            ),
        )
    )
    document["servers"] = [
        {
            "url": SERVERS_PLACEHOLDER,
            "description": "The stack's ApiUrl output (placeholder)",
            "variables": {"api_id": {"default": "API_ID"}, "region": {"default": "us-east-1"}},
        }
    ]
    for operations in document["paths"].values():
        for operation in operations.values():
            _complete(operation)
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    # Powertools adds its validation errors' schemas; this API answers its own error shape.
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    schemas.update(SCHEMAS)
    schemas.update(CONSOLE_SCHEMAS)
    schemas.update(_job_request_schemas())
    schemas.update(_quota_schemas())
    schemas.update(_webhook_schemas())
    schemas.update(_upload_schemas())
    _add_links(document["paths"])
    components["securitySchemes"] = {
        "sigv4": {
            "type": "apiKey",
            "name": "Authorization",
            "in": "header",
            "description": "AWS Signature Version 4 (the API's IAM auth)",
        }
    }
    document["security"] = [{"sigv4": []}]
    return document


def render() -> str:
    return _json(build_document())


def _json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


_CLI_CONTRACT_TEXT = '''"""What the CLI knows of the API's contract, the OpenAPI document
(layers/filejobs/filejobs/api_docs/openapi.json): its JobType and JobStatus schemas.

Written by tools/openapi.py with the document; do not edit. The CLI installs without the runtime
(`pip install ./cli`), so it carries these values rather than importing them; `tools/openapi.py
--check` and tests/unit/test_cli_contract.py fail when this file and the document disagree.
"""

JOB_TYPES: tuple[str, ...] = ({job_types}
)
JOB_STATUSES: tuple[str, ...] = ({job_statuses}
)
'''


def cli_contract(document: dict[str, Any]) -> str:
    """cli/filejobs_cli/contract.py from the document (not from the runtime: the CLI reads the
    contract as any client would)."""
    schemas = document["components"]["schemas"]

    def items(name: str) -> str:
        return "".join(f"\n    {json.dumps(value)}," for value in schemas[name]["enum"])

    return _CLI_CONTRACT_TEXT.format(job_types=items("JobType"), job_statuses=items("JobStatus"))


def written() -> dict[Path, str]:
    """Each file this tool writes, and its text."""
    document = build_document()
    return {DOCUMENT: _json(document), CLI_CONTRACT: cli_contract(document)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed file drifts")
    return write_or_check(
        written(), check=parser.parse_args().check, remedy="run .venv/bin/python tools/openapi.py"
    )


if __name__ == "__main__":
    sys.exit(main())
