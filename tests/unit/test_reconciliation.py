"""Reconciliation's pure part (filejobs/domain/reconciliation.py): which listed versions a run
checks, which of them no notification announced, and the notification it sends for each."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from filejobs.adapters.s3_notifications import object_created_records, tenant_of_body
from filejobs.domain import keys
from filejobs.domain.reconciliation import (
    ListedVersion,
    Window,
    notification_body,
    sort_versions,
    unannounced,
)

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
WINDOW = Window.for_schedule(timedelta(minutes=15), timedelta(minutes=2))


def version(
    key: str = "uploads/acme/a.txt",
    *,
    age: timedelta = timedelta(minutes=5),
    version_id: str | None = "v1",
    latest: bool = True,
) -> ListedVersion:
    return ListedVersion(key, version_id, NOW - age, 12, '"etag1"', latest)


def test_the_window_looks_back_two_periods_and_the_grace() -> None:
    assert WINDOW.look_back == timedelta(minutes=32)
    assert WINDOW.grace == timedelta(minutes=2)


def test_a_run_checks_current_uploads_past_their_grace_within_the_window() -> None:
    listed = [
        version("uploads/acme/old enough.txt"),
        version("uploads/acme/edge.txt", age=timedelta(minutes=32)),  # the window's first instant
        version("uploads/acme/young.txt", age=timedelta(seconds=90)),
        version("uploads/acme/ancient.txt", age=timedelta(minutes=33)),
        version("uploads/acme/overwritten.txt", latest=False),
        version("uploads/acme/before versioning.txt", version_id="null"),
        version("derived/acme/x/thumbnail.png"),
        version("uploads/bad tenant!/a.txt"),
    ]
    result = sort_versions("bucket", listed, now=NOW, window=WINDOW)
    assert [c.version.key for c in result.candidates] == [
        "uploads/acme/old enough.txt",
        "uploads/acme/edge.txt",
    ]
    assert (result.too_young, result.ignored, result.listed) == (1, 5, 8)


def test_each_candidate_has_the_file_id_the_ingest_gives_its_version() -> None:
    (candidate,) = sort_versions("bucket", [version()], now=NOW, window=WINDOW).candidates
    assert candidate.tenant == "acme"
    assert candidate.file_id == keys.file_id_for("bucket", "uploads/acme/a.txt", "v1")


def test_only_the_candidates_the_files_table_lacks_are_unannounced() -> None:
    listed = [version("uploads/acme/a.txt", version_id="v1"), version("uploads/acme/b.txt")]
    candidates = sort_versions("bucket", listed, now=NOW, window=WINDOW).candidates
    recorded = {candidates[0].file_id}
    assert unannounced(candidates, recorded) == [candidates[1]]


def test_the_notification_reads_as_s3s_own_to_the_router_and_the_ingest() -> None:
    listed = [version("uploads/acme/café menu+1.txt", version_id="3HL4kqtJ")]
    (candidate,) = sort_versions("bucket", listed, now=NOW, window=WINDOW).candidates
    body = notification_body(candidate)
    assert tenant_of_body(body) == "acme"
    (record,) = object_created_records(body)
    assert (record.bucket, record.key, record.version_id) == (
        "bucket",
        "uploads/acme/café menu+1.txt",
        "3HL4kqtJ",
    )
    assert (record.size, record.etag, record.backfill) == (12, "etag1", False)
    assert keys.file_id_for(record.bucket, record.key, record.version_marker) == candidate.file_id
    assert json.loads(body)["Records"][0]["eventSource"] == "filejobs:reconciler"
