"""What POST /files/{file_id}/jobs takes, as specifications: each job type's options (one
definition, domain/job_options.py, read by the API and by the processors alike), a delay or a
time (domain/delays.py) and a bounded max_retries. Each refusal is a 422 whose message opens
with the field it is about."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from filejobs.api import parsing
from filejobs.domain import delays
from filejobs.domain.backlog import visible_at
from filejobs.domain.ingest import new_job
from filejobs.domain.job import MAX_RETRIES_LIMIT, JobStatus, JobType
from filejobs.domain.job_options import OPTIONS, OptionError, options_of
from filejobs.domain.messages import MAX_MESSAGE_DELAY
from filejobs.domain.retry import DispatchPolicy, PermanentError
from filejobs.processors import compression, thumbnail
from filejobs.services.api import RequestJob
from filejobs.services.errors import InvalidRequestError
from filejobs.views import job_view
from tests.factories import ingest_plan

FILE_ID = "0b0f8a4e-6d1c-4a8e-9f3b-2c7d5e1a9b40"
NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)


def refused(body: dict[str, Any] | str) -> str:
    """The 422 message a request body is refused with."""
    text = body if isinstance(body, str) else json.dumps(body)
    with pytest.raises(InvalidRequestError) as error:
        parsing.request_job(FILE_ID, text, None)
    return error.value.message


def accepted(body: dict[str, Any]) -> RequestJob:
    return parsing.request_job(FILE_ID, json.dumps(body), None)


# --- options: each 422, with its field ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        # thumbnail_generation: sizes, format, keep_metadata, similar_images
        ({"sizes": [8]}, "input_data.sizes[0]", "must be an integer from 16 to 4096 pixels; got 8"),
        ({"sizes": [128, 5000]}, "input_data.sizes[1]", "from 16 to 4096 pixels; got 5000"),
        ({"sizes": [128, 128.5]}, "input_data.sizes[1]", "got 128.5"),
        ({"sizes": ["128"]}, "input_data.sizes[0]", "got '128'"),
        ({"sizes": [True]}, "input_data.sizes[0]", "got true"),
        ({"sizes": []}, "input_data.sizes", "must be a list of 1 to 8 integers"),
        ({"sizes": 128}, "input_data.sizes", "must be a list of 1 to 8 integers"),
        ({"sizes": list(range(100, 109))}, "input_data.sizes", "at most 8 values; got 9"),
        ({"format": "png"}, "input_data.format", "must be one of webp, jpeg, avif; got 'png'"),
        ({"format": "AVIF"}, "input_data.format", "must be one of webp, jpeg, avif; got 'AVIF'"),
        (
            {"keep_metadata": "true"},
            "input_data.keep_metadata",
            "must be true or false; got 'true'",
        ),
        ({"keep_metadata": 1}, "input_data.keep_metadata", "must be true or false; got 1"),
        ({"keep_metadata": None}, "input_data.keep_metadata", "must be true or false; got null"),
        (
            {"similar_images": "yes"},
            "input_data.similar_images",
            "must be true or false; got 'yes'",
        ),
        ({"similar_images": 0}, "input_data.similar_images", "must be true or false; got 0"),
        ({"quality": 90}, "input_data.quality", "unknown option: a thumbnail_generation job"),
        ({"bucket": "elsewhere"}, "input_data.bucket", "the file's location is the job's own"),
    ],
)
def test_a_bad_thumbnail_option_is_refused_naming_its_field(
    body: dict[str, Any], field: str, reason: str
) -> None:
    message = refused({"job_type": "thumbnail_generation", "input_data": body})
    assert message.startswith(f"{field}: "), message
    assert reason in message


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"algorithm": "brotli"}, "input_data.algorithm", "must be one of zstd, gzip"),
        ({"level": 0}, "input_data.level", "from 1 to 19 for algorithm zstd; got 0"),
        ({"level": 20}, "input_data.level", "from 1 to 19 for algorithm zstd; got 20"),
        ({"algorithm": "gzip", "level": 10}, "input_data.level", "1 to 9 for algorithm gzip"),
        ({"level": "3"}, "input_data.level", "got '3'"),
        ({"level": True}, "input_data.level", "got true"),
        ({"window": 27}, "input_data.window", "takes algorithm, level"),
    ],
)
def test_a_bad_compression_option_is_refused_naming_its_field(
    body: dict[str, Any], field: str, reason: str
) -> None:
    message = refused({"job_type": "compression", "input_data": body})
    assert message.startswith(f"{field}: "), message
    assert reason in message


@pytest.mark.parametrize(
    "job_type",
    [
        JobType.VIRUS_SCAN,
        JobType.DEDUPLICATION_CHECK,
    ],
)
def test_a_job_type_without_options_refuses_any(job_type: JobType) -> None:
    # (a rescan's request is the system's to write into a scan job: POST /files/{id}/rescan)
    for name in ("sizes", "rescan"):
        message = refused({"job_type": job_type.value, "input_data": {name: 1}})
        assert (
            message == f"input_data.{name}: unknown option: a {job_type.value} job takes no options"
        )
    # and none, an empty object or null is every default
    empties: tuple[dict[str, Any] | None, ...] = ({}, None)
    for empty in empties:
        assert accepted({"job_type": job_type.value, "input_data": empty}).input_data is None


def test_input_data_that_is_not_an_object_is_refused() -> None:
    message = refused({"job_type": "compression", "input_data": [1]})
    assert message.startswith("input_data: must be an object")


def test_good_options_are_kept_as_given() -> None:
    # (defaults are read when the job runs: a thumbnail's sizes are the deployment's)
    thumbnails: dict[str, Any] = {"sizes": [512, 128, 128.0], "format": "jpeg"}
    request = accepted({"job_type": "thumbnail_generation", "input_data": thumbnails})
    assert request.input_data == thumbnails
    for flag in (True, False):
        thumbnails = {"format": "avif", "keep_metadata": flag, "similar_images": not flag}
        request = accepted({"job_type": "thumbnail_generation", "input_data": thumbnails})
        assert request.input_data == thumbnails
    request = accepted({"job_type": "compression", "input_data": {"algorithm": "gzip"}})
    assert request.input_data == {"algorithm": "gzip"}


def test_an_unknown_field_of_the_body_is_refused_naming_it() -> None:
    assert refused({"job_type": "compression", "delay": 5}).startswith("delay: unknown field")


# --- the one definition, read by the processors ---------------------------------------------


def test_the_processors_read_their_options_through_the_definition() -> None:
    # defaults: the deployment's sizes, webp; zstd 3, and gzip's own default level
    assert thumbnail.Options.of(None, (256,)) == thumbnail.Options((256,), "webp")
    assert thumbnail.Options.of({"sizes": [64, 512, 64]}) == thumbnail.Options((512, 64), "webp")
    assert thumbnail.Options.of(None, (256,)).keep_metadata is False
    assert thumbnail.Options.of({"format": "avif", "keep_metadata": True}, (256,)) == (
        thumbnail.Options((256,), "avif", keep_metadata=True)
    )
    # similar_images is read where it is used (services/similar_images.py), default false
    chosen = options_of(JobType.THUMBNAIL_GENERATION).read({"similar_images": True})
    assert chosen["similar_images"] is True
    assert options_of(JobType.THUMBNAIL_GENERATION).read(None)["similar_images"] is False
    assert compression.Settings.of(None) == compression.Settings(compression.ZSTD, 3)
    assert compression.Settings.of({"algorithm": "gzip"}) == compression.Settings(
        compression.GZIP, 6
    )
    # what the processors can encode is what the definition offers, and no more
    assert set(thumbnail.FORMATS) == set(
        options_of(JobType.THUMBNAIL_GENERATION).schema()["properties"]["format"]["enum"]
    )
    assert set(compression.ALGORITHMS) == {"zstd", "gzip"}
    for algorithm in compression.ALGORITHMS.values():
        levels = OPTIONS[JobType.COMPRESSION].options[1]
        assert levels.read(algorithm.levels[-1], "level", {"algorithm": algorithm.name})
        with pytest.raises(OptionError):
            levels.read(algorithm.levels[-1] + 1, "level", {"algorithm": algorithm.name})


def test_a_stored_job_with_options_now_refused_fails_readably_at_run_time() -> None:
    # given jobs stored before their options were checked (the location rides along, ignored)
    location = {"bucket": "b", "key": "uploads/acme/a.png", "size": 5}
    with pytest.raises(PermanentError, match=r"^bad option input_data.sizes\[0\]: must be"):
        thumbnail.Options.of({**location, "sizes": [9000]})
    with pytest.raises(PermanentError, match=r"^bad option input_data.level: must be an integer"):
        compression.Settings.of({**location, "algorithm": "gzip", "level": 12})
    # and names that are not options (an old request's own fields) are not looked at
    assert compression.Settings.of({**location, "note": "x"}).level == 3


def test_numbers_read_back_from_the_table_are_integers() -> None:
    # DynamoDB gives numbers back as Decimal
    assert thumbnail.Options.of({"sizes": [Decimal(128)]}).sizes == (128,)
    with pytest.raises(PermanentError):
        thumbnail.Options.of({"sizes": [Decimal("128.5")]})


def test_every_job_type_has_a_definition_whose_schema_refuses_unknown_names() -> None:
    for job_type in JobType:
        schema = options_of(job_type).schema()
        assert schema["type"] == "object" and schema["additionalProperties"] is False


def test_a_job_view_shows_its_options_and_not_its_location() -> None:
    plan = ingest_plan(NOW, "image/png")
    stored = plan.file
    job = new_job(
        stored,
        JobType.THUMBNAIL_GENERATION,
        now=NOW,
        created_by="t",
        dispatch=DispatchPolicy(),
        idempotency_key="k",
        input_data={"sizes": [64]},
    )
    assert job_view(job)["options"] == {"sizes": [64]}


# --- delays and max_retries: each 422, with its field -----------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (
            {"run_at": "2026-12-04T12:00:00Z", "delay_seconds": 5},
            "run_at, delay_seconds",
            "not both",
        ),
        ({"run_at": "2026-12-04T12:00:00"}, "run_at", "with its UTC offset"),
        ({"run_at": "2026-12-04"}, "run_at", "RFC 3339"),
        ({"run_at": "tomorrow"}, "run_at", "RFC 3339"),
        ({"run_at": "2026-13-04T12:00:00Z"}, "run_at", "RFC 3339"),
        ({"run_at": 1764849600}, "run_at", "RFC 3339"),
        ({"delay_seconds": -1}, "delay_seconds", "from 0 to 2592000"),
        ({"delay_seconds": 2_592_001}, "delay_seconds", "from 0 to 2592000"),
        ({"delay_seconds": 1.5}, "delay_seconds", "got 1.5"),
        ({"delay_seconds": "60"}, "delay_seconds", 'got "60"'),
        ({"max_retries": 0}, "max_retries", f"from 1 to {MAX_RETRIES_LIMIT}"),
        ({"max_retries": MAX_RETRIES_LIMIT + 1}, "max_retries", f"got {MAX_RETRIES_LIMIT + 1}"),
        ({"max_retries": True}, "max_retries", "got true"),
        ({"max_retries": None}, "max_retries", "got null"),
    ],
)
def test_a_bad_time_or_attempt_budget_is_refused_naming_its_field(
    body: dict[str, Any], field: str, reason: str
) -> None:
    message = refused({"job_type": "virus_scan", **body})
    assert message.startswith(f"{field}: "), message
    assert reason in message


def test_a_time_is_read_as_rfc_3339_in_utc() -> None:
    request = accepted({"job_type": "virus_scan", "run_at": "2026-12-04T13:30:00.123456789+01:00"})
    assert request.run_at == datetime(2026, 12, 4, 12, 30, 0, 123456, tzinfo=UTC)
    request = accepted({"job_type": "virus_scan", "delay_seconds": 600.0, "max_retries": 1})
    assert (request.delay, request.max_retries) == (timedelta(minutes=10), 1)


@pytest.mark.parametrize(
    ("run_at", "delay", "field", "reason"),
    [
        (NOW - timedelta(minutes=5), None, "run_at", "is in the past"),
        (NOW + timedelta(days=30, seconds=1), None, "run_at", "more than 30 days ahead"),
    ],
)
def test_a_time_too_far_back_or_ahead_is_refused(
    run_at: datetime | None, delay: timedelta | None, field: str, reason: str
) -> None:
    with pytest.raises(delays.DelayError) as error:
        delays.run_time(NOW, run_at=run_at, delay=delay)
    assert (error.value.field, reason in error.value.reason) == (field, True)


def test_a_time_within_the_skew_or_no_delay_runs_now() -> None:
    assert delays.run_time(NOW, run_at=NOW - timedelta(seconds=30)) is None
    assert delays.run_time(NOW, delay=timedelta(0)) is None
    assert delays.run_time(NOW) is None
    assert delays.run_time(NOW, delay=timedelta(days=30)) == NOW + timedelta(days=30)


@pytest.mark.parametrize(
    ("delay", "message_delay", "sweep_after"),
    [
        # SQS holds the message: the sweep looks only a grace after, in case it was lost
        (timedelta(minutes=10), timedelta(minutes=10), timedelta(minutes=12)),
        (MAX_MESSAGE_DELAY, MAX_MESSAGE_DELAY, MAX_MESSAGE_DELAY + timedelta(minutes=2)),
        # beyond SQS's 15 minutes no message goes: the sweep starts it at its time
        (MAX_MESSAGE_DELAY + timedelta(seconds=1), None, MAX_MESSAGE_DELAY + timedelta(seconds=1)),
        (timedelta(days=3), None, timedelta(days=3)),
    ],
)
def test_a_delayed_job_waits_scheduled_for_its_message_or_the_sweep(
    delay: timedelta, message_delay: timedelta | None, sweep_after: timedelta
) -> None:
    plan = ingest_plan(NOW, "image/png")
    run_at = NOW + delay
    job = new_job(
        plan.file,
        JobType.VIRUS_SCAN,
        now=NOW,
        created_by="t",
        dispatch=DispatchPolicy(grace=timedelta(minutes=2)),
        idempotency_key="k",
        max_retries=1,
        run_at=run_at,
    )
    assert (job.status, job.scheduled_at, job.max_retries) == (JobStatus.SCHEDULED, run_at, 1)
    assert job.invariant_violations() == []
    assert delays.message_delay(NOW, run_at) == message_delay
    assert job.sweep_at == NOW + sweep_after
    # and the sweep takes a job with no message out for lost at once, never for queued
    assert visible_at(job) == (None if message_delay is None else run_at)
