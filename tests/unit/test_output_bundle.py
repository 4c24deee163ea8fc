"""A file's bundle of derived files, typed: what each job's result names becomes one list of
kinds, formats, sizes, pages and times, on the completion the file item keeps and File
Processed sends (pure domain and the item mapping)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from filejobs.data.mapping import completion_to_map, file_from_model, file_to_model
from filejobs.domain import transitions
from filejobs.domain.file import FileStatus, ScanStatus, StoredFile
from filejobs.domain.file_completion import completion_of
from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.outputs import OUTPUTS_SUMMARISED, OutputKind, derived_files, job_folder
from filejobs.services.outcomes import MAX_DETAIL_BYTES, FileChange, outcome_event
from filejobs.views import file_view
from tests.conftest import FakeClock
from tests.factories import ingest_plan

LEASE = timedelta(minutes=5)
KEEP = timedelta(days=30)


def finished(job: ProcessingJob, clock: FakeClock, result: dict[str, Any]) -> ProcessingJob:
    done = job.copy()
    done.apply(transitions.claim(now=clock.now, lease=LEASE, worker="w1"))
    clock.advance(timedelta(seconds=1))
    done.apply(transitions.complete(done, result=result, now=clock.now, retention=KEEP))
    return done


def a_job(clock: FakeClock, job_type: JobType, content_type: str = "image/png") -> ProcessingJob:
    plan = ingest_plan(clock.now, content_type)
    return next(job for job in plan.jobs if job.job_type is job_type)


def test_each_file_is_typed_by_what_its_result_states(clock: FakeClock) -> None:
    # given a document preview whose result states its pages' kinds, numbers and sizes
    job = a_job(clock, JobType.DOCUMENT_PREVIEW, "application/pdf")
    folder = job_folder(job)
    pages = [
        {"kind": "page", "page": n, "key": f"{folder}page-{n}.webp", "bytes": 900 + n,
         "width": 600, "height": 800, "format": "webp"}
        for n in (1, 2)
    ]  # fmt: skip
    done = finished(job, clock, {"page_count": 7, "pages": pages})
    # then each page is a typed file, in the result's order
    files = derived_files(done)
    assert [(f.kind, f.page, f.bytes, f.width, f.height, f.format) for f in files] == [
        (OutputKind.PAGE, 1, 901, 600, 800, "webp"),
        (OutputKind.PAGE, 2, 902, 600, 800, "webp"),
    ]
    assert files[0].facts() == {
        "kind": "page", "format": "webp", "bytes": 901, "width": 600, "height": 800,
        "page": 1, "start_seconds": None, "end_seconds": None,
    }  # fmt: skip


def test_results_written_before_the_bundle_are_typed_by_their_field(clock: FakeClock) -> None:
    thumbs = a_job(clock, JobType.THUMBNAIL_GENERATION)
    video = a_job(clock, JobType.VIDEO_THUMBNAIL, "video/mp4")
    squeezed = a_job(clock, JobType.COMPRESSION, "text/plain")
    results: list[tuple[ProcessingJob, dict[str, Any]]] = [
        (thumbs, {"thumbnails": [{"size": 128, "key": job_folder(thumbs) + "thumb-128.webp"}]}),
        (video, {"poster": {"key": job_folder(video) + "poster.webp", "width": 320}}),
        (squeezed, {"algorithm": "zstd", "key": job_folder(squeezed) + "original.zst"}),
    ]
    kinds = {
        job.job_type: [(f.kind, f.format) for f in derived_files(finished(job, clock, result))]
        for job, result in results
    }
    assert kinds == {
        JobType.THUMBNAIL_GENERATION: [(OutputKind.THUMBNAIL, "webp")],
        JobType.VIDEO_THUMBNAIL: [(OutputKind.POSTER, "webp")],
        JobType.COMPRESSION: [(OutputKind.COMPRESSED, "zst")],
    }


@pytest.mark.parametrize(
    ("stated", "field"),
    [
        ({"kind": "hologram"}, "kind"),  # not a kind: told by its field instead
        ({"bytes": -1}, "bytes"),
        ({"width": True}, "width"),
        ({"width": 12.5}, "width"),
        ({"page": "2"}, "page"),
        ({"start_seconds": "nan"}, "start_seconds"),
        ({"start_seconds": float("nan")}, "start_seconds"),
        ({"format": "../../x"}, "format"),
    ],
)
def test_a_fact_of_the_wrong_type_is_left_out_not_passed_on(
    clock: FakeClock, stated: dict[str, Any], field: str
) -> None:
    job = a_job(clock, JobType.THUMBNAIL_GENERATION)
    key = job_folder(job) + "thumb-64.webp"
    done = finished(job, clock, {"thumbnails": [{"key": key, **stated}]})
    (file,) = derived_files(done)
    facts = file.facts()
    assert facts["kind"] == "thumbnail"
    if field == "format":
        assert facts["format"] == "webp"  # the key's extension instead
    elif field != "kind":
        assert facts[field] is None


def processed_file(clock: FakeClock, result: dict[str, Any]) -> tuple[StoredFile, ProcessingJob]:
    """A PNG whose jobs all ended, its thumbnail job with `result`, the completion recorded."""
    plan = ingest_plan(clock.now, "image/png")
    jobs = [
        finished(job, clock, result if job.job_type is JobType.THUMBNAIL_GENERATION else {})
        for job in plan.jobs
    ]
    completion = completion_of(jobs, at=clock.now)
    assert completion is not None
    stored = replace(plan.file, processed=completion, scan_status=ScanStatus.CLEAN)
    return stored, next(j for j in jobs if j.job_type is JobType.THUMBNAIL_GENERATION)


def thumbnails(job: ProcessingJob, count: int) -> dict[str, Any]:
    folder = job_folder(job)
    return {
        "thumbnails": [
            {"kind": "thumbnail", "key": f"{folder}thumb-{n}.webp", "bytes": n, "width": n}
            for n in range(1, count + 1)
        ]
    }


def test_the_file_item_keeps_the_bundle_and_gives_it_back(clock: FakeClock) -> None:
    # given a processed file whose thumbnail job wrote three typed files
    plan = ingest_plan(clock.now, "image/png")
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    stored, done = processed_file(clock, thumbnails(job, 3))
    # when it is written to its item and read back
    model = file_to_model(stored)
    again = file_from_model(model)
    # then its completion lists the same files, keys and facts
    assert again.processed is not None and stored.processed is not None
    assert again.processed.jobs == stored.processed.jobs
    # and the item keeps each by its name, not its whole key (the folder is the file's own)
    kept = next(j for j in completion_to_map(stored.processed)["jobs"] if j["id"] == done.id)
    assert [o["name"] for o in kept["outputs"]] == ["thumb-1.webp", "thumb-2.webp", "thumb-3.webp"]
    assert all("key" not in o and None not in o.values() for o in kept["outputs"])


def test_file_processed_lists_the_bundle_in_one_typed_list(clock: FakeClock) -> None:
    plan = ingest_plan(clock.now, "image/png")
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    stored, done = processed_file(clock, thumbnails(job, 2))
    bundle = file_view(stored)["outputs"]
    assert [(o["job_id"], o["job_type"], o["kind"], o["width"]) for o in bundle] == [
        (done.id, "thumbnail_generation", "thumbnail", 1),
        (done.id, "thumbnail_generation", "thumbnail", 2),
    ]
    assert all(o["key"].startswith(job_folder(done)) for o in bundle)


def test_a_withdrawn_bundle_is_never_listed(clock: FakeClock) -> None:
    plan = ingest_plan(clock.now, "image/png")
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    stored, _ = processed_file(clock, thumbnails(job, 2))
    assert file_view(replace(stored, status=FileStatus.QUARANTINED))["outputs"] == []
    assert file_view(replace(stored, scan_status=ScanStatus.INFECTED))["outputs"] == []
    assert file_view(replace(stored, processed=None))["outputs"] == []


def test_a_job_with_many_files_is_summarised_with_a_count_of_the_rest(clock: FakeClock) -> None:
    plan = ingest_plan(clock.now, "image/png")
    job = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    stored, done = processed_file(clock, thumbnails(job, OUTPUTS_SUMMARISED + 5))
    assert stored.processed is not None
    summary = next(j for j in stored.processed.jobs if j.id == done.id)
    assert len(summary.outputs) == OUTPUTS_SUMMARISED
    assert summary.more_outputs == 5
    assert summary.to_dict()["more_outputs"] == 5
    # and a job that failed lists none, though its result named files
    assert all(j.outputs == () for j in stored.processed.jobs if j.status != JobStatus.COMPLETED)


def test_a_file_named_twice_is_typed_by_the_mention_that_places_it(clock: FakeClock) -> None:
    # given a document preview whose first page is both its preview and page 1 of its pages
    job = a_job(clock, JobType.DOCUMENT_PREVIEW, "application/pdf")
    first = job_folder(job) + "preview-page1.webp"
    second = job_folder(job) + "page-2.webp"
    result = {
        "preview": {"kind": "preview", "key": first, "bytes": 10},
        "pages": [
            {"kind": "page", "page": 1, "key": first, "bytes": 10},
            {"kind": "page", "page": 2, "key": second, "bytes": 11},
        ],
    }
    files = derived_files(finished(job, clock, result))
    # then it is listed once, where first named, as page 1: a page strip has every page
    assert [(f.key, f.kind, f.page) for f in files] == [
        (first, OutputKind.PAGE, 1),
        (second, OutputKind.PAGE, 2),
    ]


def test_two_jobs_of_one_type_list_each_file_once_as_the_later_wrote_it(clock: FakeClock) -> None:
    # given a PNG's thumbnail job, and a second thumbnail job asked later, writing the same keys
    plan = ingest_plan(clock.now, "image/png")
    first = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    clock.advance(timedelta(minutes=1))
    again = first.copy()
    again.id = "0b0f8a4e-6d1c-4a8e-9f3b-2c7d5e1a9b41"
    again.metadata = replace(again.metadata, created_at=clock.now)
    jobs = [finished(job, clock, {}) for job in plan.jobs if job is not first]
    jobs += [
        finished(first, clock, thumbnails(first, 2)),
        finished(again, clock, thumbnails(first, 2)),
    ]
    completion = completion_of(jobs, at=clock.now)
    assert completion is not None
    stored = replace(plan.file, processed=completion, scan_status=ScanStatus.CLEAN)
    # then the bundle lists each thumbnail once, as the later job's
    bundle = file_view(stored)["outputs"]
    assert [(o["job_id"], o["width"]) for o in bundle] == [(again.id, 1), (again.id, 2)]


def test_file_processed_stays_within_eventbridge_s_limit_whatever_the_bundle(
    clock: FakeClock,
) -> None:
    # given a file whose 45 thumbnail jobs (API jobs, say) each wrote 24 long-named files
    plan = ingest_plan(clock.now, "image/png")
    template = next(j for j in plan.jobs if j.job_type is JobType.THUMBNAIL_GENERATION)
    jobs = []
    for number in range(45):
        job = template.copy()
        job.id = f"0b0f8a4e-6d1c-4a8e-9f3b-{number:012d}"
        names = [f"j{number}-{n}-{'x' * 90}.webp" for n in range(OUTPUTS_SUMMARISED)]
        result = {"thumbnails": [{"key": job_folder(job) + name, "bytes": 1} for name in names]}
        jobs.append(finished(job, clock, result))
    completion = completion_of(jobs, at=clock.now)
    assert completion is not None
    stored = replace(plan.file, processed=completion, scan_status=ScanStatus.CLEAN)
    assert len(json.dumps(file_view(stored))) > MAX_DETAIL_BYTES
    # when its completion is announced
    event = outcome_event(FileChange(before=None, after=stored))
    # then the detail fits: the jobs' own lists counted instead, the bundle cut and saying so
    assert event is not None
    assert len(json.dumps(event.detail)) <= MAX_DETAIL_BYTES
    summaries = event.detail["processed"]["jobs"]
    assert all(j["outputs"] == [] and j["more_outputs"] == OUTPUTS_SUMMARISED for j in summaries)
    assert event.detail["outputs_truncated"] is True
    assert 0 < len(event.detail["outputs"]) < 45 * OUTPUTS_SUMMARISED
