"""Specification: the `filejobs` CLI drives files and jobs on a running stack (and a tenant's
quotas: `filejobs quotas show|set`, and the stack holding a tenant's uploads to them).

One local stack (`filejobs dev`) serves the whole module; the CLI runs as a user runs it, as a
process in the stack's project, and is judged only by its output, exit status and the files it
writes.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.localstack import ROOT, TERMINAL, RunningStack, running_stack

TENANT = "cli-test"
QUOTA_TENANT = "cli-quota"
FILE_LINE = re.compile(r"^(?P<path>.+): file (?P<id>[0-9a-f-]{36})$", re.MULTILINE)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # Nothing here waits on the sweep or another schedule: they keep the template's rates.
    with running_stack(tmp_path_factory.mktemp("project"), schedule_seconds=None) as running:
        yield running


def cli(*arguments: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "filejobs_cli.main", *arguments],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@dataclass(frozen=True)
class Uploaded:
    result: subprocess.CompletedProcess[str]
    file_ids: dict[str, str]  # file name -> file id
    files: dict[str, dict[str, Any]]  # file name -> the API's file with its jobs


@pytest.fixture(scope="module")
def uploaded(stack: RunningStack, tmp_path_factory: pytest.TempPathFactory) -> Uploaded:
    folder = tmp_path_factory.mktemp("uploads")
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), (200, 80, 40)).save(buffer, "PNG")
    (folder / "cli-photo.png").write_bytes(buffer.getvalue())
    (folder / "cli-notes.txt").write_text("filejobs CLI notes\n" * 200)
    result = cli(
        "upload", str(folder / "cli-photo.png"), str(folder / "cli-notes.txt"),
        "--tenant", TENANT, "--timeout", "150",
        cwd=stack.root, timeout=180,
    )  # fmt: skip
    file_ids = {Path(m["path"]).name: m["id"] for m in FILE_LINE.finditer(result.stdout)}
    files = {name: stack.api(f"/files/{file_id}")[1] for name, file_id in file_ids.items()}
    return Uploaded(result, file_ids, files)


def job_of(uploaded: Uploaded, name: str, job_type: str) -> dict[str, Any]:
    return next(j for j in uploaded.files[name]["jobs"] if j["job_type"] == job_type)


def test_upload_prints_file_ids_and_follows_every_job_to_the_end(uploaded: Uploaded) -> None:
    # given a PNG and a text file uploaded with `filejobs upload` (not a TTY: one line a change)
    result = uploaded.result
    # then it exits 0 once every job is terminal, having printed each file's id
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(uploaded.file_ids) == {"cli-photo.png", "cli-notes.txt"}
    for stored in uploaded.files.values():
        assert stored["tenant"] == TENANT
        assert stored["jobs"] and all(j["status"] in TERMINAL for j in stored["jobs"])
        # it waited for the file's own signal: its completion recorded
        assert stored["processing_state"] == "processed"
        assert {j["id"] for j in stored["processed"]["jobs"]} == {j["id"] for j in stored["jobs"]}
    # and it printed status changes, then a summary of the outcomes
    assert "cli-photo.png: thumbnail_generation completed" in result.stdout
    assert re.search(r"all jobs finished: \d+ completed, \d+ failed, \d+ cancelled", result.stdout)
    assert "\x1b[" not in result.stdout
    assert "Traceback" not in result.stderr


def test_upload_wait_returns_once_the_file_is_processed_with_each_job_s_outcome(
    stack: RunningStack, tmp_path: Path
) -> None:
    # given a PNG uploaded with --wait
    buffer = io.BytesIO()
    Image.new("RGB", (320, 200), (20, 160, 90)).save(buffer, "PNG")
    (tmp_path / "cli-wait.png").write_bytes(buffer.getvalue())
    # (a tenant of its own: the other tests count the module's tenant's files and jobs)
    result = cli(
        "upload", str(tmp_path / "cli-wait.png"), "--tenant", "cli-wait", "--wait",
        "--timeout", "150", cwd=stack.root, timeout=180,
    )  # fmt: skip
    # then it exits 0 with one line saying the file is processed and how each job ended
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [
        x
        for x in result.stdout.splitlines()
        if x.startswith(f"{tmp_path}/cli-wait.png: processed at")
    ]
    assert "thumbnail_generation completed" in line and "virus_scan completed" in line
    # and no live table was drawn
    assert "all jobs finished" not in result.stdout


def test_status_shows_a_job_by_its_id_and_a_file_by_its_id(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    # given a completed thumbnail job of the uploaded PNG
    job = job_of(uploaded, "cli-photo.png", "thumbnail_generation")
    # when its status is asked by job id
    by_job = cli("status", job["id"], cwd=stack.root)
    # then a readable summary of the job is printed
    assert by_job.returncode == 0, by_job.stderr
    assert f"job {job['id']}" in by_job.stdout
    assert "thumbnail_generation" in by_job.stdout and "completed" in by_job.stdout
    # when the file's id is given instead, the file and its jobs are printed
    file_id = uploaded.file_ids["cli-photo.png"]
    by_file = cli("status", file_id, cwd=stack.root)
    assert by_file.returncode == 0, by_file.stderr
    assert f"file {file_id}" in by_file.stdout
    assert f"uploads/{TENANT}/cli-photo.png" in by_file.stdout
    assert "virus_scan" in by_file.stdout
    # and --json gives the API's own view
    raw = json.loads(cli("status", file_id, "--json", cwd=stack.root).stdout)
    assert raw["id"] == file_id and raw["jobs"]


def test_jobs_lists_a_tenants_jobs_as_a_table_or_json(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    # given the uploaded files' jobs
    expected = {j["id"] for f in uploaded.files.values() for j in f["jobs"]}
    # when the tenant's jobs are listed as JSON
    listed = cli("jobs", "--tenant", TENANT, "--json", "--limit", "50", cwd=stack.root)
    # then every job of the tenant is there, and only the tenant's
    assert listed.returncode == 0, listed.stderr
    jobs = json.loads(listed.stdout)["jobs"]
    assert {j["id"] for j in jobs} == expected
    assert {j["tenant"] for j in jobs} == {TENANT}
    # when a limit smaller than a page is given, no more than that is listed
    two = json.loads(
        cli("jobs", "--tenant", TENANT, "--limit", "2", "--json", cwd=stack.root).stdout
    )
    assert len(two["jobs"]) == 2
    # and without --json it is a table with a header
    table = cli("jobs", "--tenant", TENANT, "--type", "virus_scan", cwd=stack.root)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:4] == ["FILE", "JOB", "STATUS", "ATTEMPT"]
    assert len(table.stdout.splitlines()) == 1 + len(uploaded.files)
    # and an operator's listing with neither --tenant nor --status is a usage error
    neither = cli("jobs", cwd=stack.root)
    assert neither.returncode == 2
    assert "give --tenant or --status" in neither.stderr


def test_cancel_of_a_finished_job_is_refused_readably(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    # given a completed job
    job = job_of(uploaded, "cli-photo.png", "virus_scan")
    # when it is cancelled
    result = cli("cancel", job["id"], "--reason", "too late", cwd=stack.root)
    # then the API's conflict is said in one line, with a non-zero exit and no traceback
    assert result.returncode == 1
    assert "cannot cancel" in result.stderr and "completed" in result.stderr
    assert "Traceback" not in result.stderr
    # and a job that does not exist is a readable "not found"
    missing = cli("cancel", "00000000-0000-4000-8000-000000000000", cwd=stack.root)
    assert missing.returncode == 1
    assert "no job 00000000-0000-4000-8000-000000000000" in missing.stderr


def test_retry_of_a_completed_job_is_refused_readably(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    # given a completed job
    job = job_of(uploaded, "cli-photo.png", "thumbnail_generation")
    # when it is retried
    result = cli("retry", job["id"], cwd=stack.root)
    # then the refusal is the API's message, not a traceback
    assert result.returncode == 1
    assert "cannot retry" in result.stderr
    assert "Traceback" not in result.stderr
    # and the job is still completed
    assert stack.api(f"/jobs/{job['id']}")[1]["status"] == "completed"


def test_get_downloads_the_thumbnails_of_a_file(
    stack: RunningStack, uploaded: Uploaded, tmp_path: Path
) -> None:
    # given the uploaded PNG, whose thumbnails were made
    file_id = uploaded.file_ids["cli-photo.png"]
    # when its outputs are fetched into a folder
    result = cli("get", file_id, "--out", str(tmp_path / "out"), cwd=stack.root)
    # then the thumbnails are there, one folder per file and job type, decodable WebP
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "out" / file_id / "thumbnail_generation"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["thumb-128.webp", "thumb-256.webp", "thumb-512.webp"]
    for path in folder.iterdir():
        with Image.open(path) as image:
            assert image.format == "WEBP"
            image.load()
            assert max(image.size) <= 512


def test_upload_takes_any_file_name_and_says_what_it_did_as_json(
    stack: RunningStack, tmp_path: Path
) -> None:
    # given a file whose name has spaces and accents
    (tmp_path / "Mon fichier d'été.txt").write_text("filejobs names\n" * 50)
    # when it is uploaded with --json
    done = cli(
        "upload", str(tmp_path / "Mon fichier d'été.txt"), "--tenant", "cli-names",
        "--no-follow", "--json", cwd=stack.root,
    )  # fmt: skip
    # then stdout is one JSON document naming the safe key and the file's id
    assert done.returncode == 0, done.stderr
    (uploaded,) = json.loads(done.stdout)["files"]
    assert uploaded["key"] == "uploads/cli-names/Mon-fichier-d_été.txt"
    assert uploaded["file"] is None  # not followed
    # and the file is the tenant's: it sees it as itself (a tenant token), another does not
    own = cli("status", uploaded["file_id"], "--as", "tenant:cli-names", "--json", cwd=stack.root)
    assert own.returncode == 0, own.stderr
    assert json.loads(own.stdout)["key"] == uploaded["key"]
    other = cli("status", uploaded["file_id"], "--as", "tenant:cli-other", cwd=stack.root)
    assert other.returncode == 1
    assert f"no job or file {uploaded['file_id']}" in other.stderr


def test_a_missing_local_stack_is_a_clear_error(tmp_path: Path) -> None:
    # given a project with no running local stack
    (tmp_path / "template.yaml").write_text((ROOT / "template.yaml").read_text())
    # when a command needs the stack
    result = cli("status", "00000000-0000-4000-8000-000000000000", cwd=tmp_path)
    # then it says so and how to start it
    assert result.returncode == 1
    assert "start it with `filejobs dev`" in result.stderr
    assert "Traceback" not in result.stderr


# --- the virus scan's commands --------------------------------------------------------------------


def test_rescan_of_a_file_follows_its_scan_to_a_verdict(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    file_id = uploaded.file_ids["cli-notes.txt"]
    result = cli("rescan", file_id, "--reason", "checking", cwd=stack.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"file {file_id}: rescan job " in result.stdout
    assert "verdicts: CLEAN 1" in result.stdout
    scans = [j for j in stack.api(f"/files/{file_id}")[1]["jobs"] if j["job_type"] == "virus_scan"]
    assert len(scans) == 2 and scans[1]["result"]["rescan"] is True


def test_rescan_of_a_prefix_counts_first_and_refuses_bad_usage(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    dry = cli(
        "rescan", "--tenant", TENANT, "--prefix", f"uploads/{TENANT}/cli-", "--dry-run",
        cwd=stack.root,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "would rescan 2 files, 0 skipped" in dry.stdout
    both = cli("rescan", uploaded.file_ids["cli-notes.txt"], "--tenant", TENANT, cwd=stack.root)
    assert both.returncode == 2 and "not both" in both.stderr


def test_backfill_copies_another_buckets_objects_in_once_and_processes_them(
    stack: RunningStack,
) -> None:
    # given a bucket that existed before the stack, holding a tenant's files
    s3 = stack.client("s3")
    s3.create_bucket(Bucket="legacy-files")
    for name in ("2019/report.txt", "2019/notes \u2013 draft.txt"):
        s3.put_object(Bucket="legacy-files", Key=f"archive/{name}", Body=f"{name}\n".encode() * 30)
    # when it is backfilled into the tenant's uploads
    args = ("backfill", "--bucket", "legacy-files", "--prefix", "archive/", "--tenant", "old")
    first = cli(*args, "--timeout", "150", cwd=stack.root, timeout=180)
    # then both are copied, recorded and processed, with live counts
    assert first.returncode == 0, first.stdout + first.stderr
    assert "listed 2, announced 0, copied 2, already 0, skipped 0" in first.stdout
    assert "recorded 2/2, processed 2/2" in first.stdout
    # and a second run copies nothing again
    again = cli(*args, "--no-follow", cwd=stack.root)
    assert "listed 2, announced 0, copied 0, already 2, skipped 0" in again.stdout


def test_backfill_in_place_records_objects_whose_notifications_never_came(
    stack: RunningStack,
) -> None:
    # given objects in the uploads bucket while its notifications were off
    s3 = stack.client("s3")
    uploads = stack.config["uploads_bucket"]
    saved = s3.get_bucket_notification_configuration(Bucket=uploads)
    saved.pop("ResponseMetadata", None)
    s3.put_bucket_notification_configuration(Bucket=uploads, NotificationConfiguration={})
    try:
        for n in range(2):
            s3.put_object(Bucket=uploads, Key=f"uploads/{TENANT}/missed/{n}.txt", Body=b"x\n" * 50)
    finally:
        s3.put_bucket_notification_configuration(Bucket=uploads, NotificationConfiguration=saved)
    assert stack.api(f"/files?key=uploads/{TENANT}/missed/0.txt")[0] == 404
    # when they are backfilled where they are
    args = ("backfill", "--bucket", uploads, "--prefix", f"uploads/{TENANT}/missed/")
    result = cli(*args, "--timeout", "150", cwd=stack.root, timeout=180)
    # then each is announced, recorded once and processed
    assert result.returncode == 0, result.stdout + result.stderr
    assert "listed 2, announced 2" in result.stdout
    assert "recorded 2/2, processed 2/2" in result.stdout
    status, found = stack.api(f"/files?key=uploads/{TENANT}/missed/0.txt")
    assert status == 200 and len(found["files"]) == 1
    # and announcing them again records nothing twice
    assert cli(*args, "--no-follow", cwd=stack.root).returncode == 0
    assert len(stack.api(f"/files?key=uploads/{TENANT}/missed/0.txt")[1]["files"]) == 1


def test_definitions_status_names_the_set_the_scan_uses(stack: RunningStack) -> None:
    result = cli("definitions", "status", "--json", cwd=stack.root)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["set_id"] and status["status"]
    # and without --json, a field a line, status first
    shown = cli("definitions", "status", cwd=stack.root)
    first, second = shown.stdout.splitlines()[:2]
    assert (first.split(), second.split()) == (
        ["status:", status["status"]],
        ["set_id:", status["set_id"]],
    )


# --- quotas ------------------------------------------------------------------------------------


def test_an_operator_sets_a_tenants_quota_and_shows_it(stack: RunningStack) -> None:
    # when the operator (the local stack's own token) sets two of a tenant's quotas
    done = cli(
        "quotas",
        "set",
        QUOTA_TENANT,
        "--files-per-day",
        "1",
        "--max-file-bytes",
        "0",
        cwd=stack.root,
    )
    # then the CLI prints them in force, beside the defaults
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:]}
    assert lines["files_per_day"] == ["1", "10000", "1"]
    assert lines["max_file_bytes"] == ["unlimited", "1073741824", "unlimited"]
    assert lines["bytes_per_day"] == ["10737418240", "10737418240", "-"]
    # and show --json gives the API's answer
    shown = cli("quotas", "show", QUOTA_TENANT, "--json", cwd=stack.root)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["overrides"] == {"files_per_day": 1, "max_file_bytes": 0}


def test_set_without_a_quota_or_with_a_negative_one_is_a_usage_error(stack: RunningStack) -> None:
    nothing = cli("quotas", "set", QUOTA_TENANT, cwd=stack.root)
    negative = cli("quotas", "set", QUOTA_TENANT, "--files-per-day", "-1", cwd=stack.root)

    assert nothing.returncode == 2 and "give at least one of --files-per-day" in nothing.stderr
    assert negative.returncode == 2 and "expected a whole number" in negative.stderr


def test_the_upload_past_the_tenants_quota_is_rejected_with_the_reason(
    stack: RunningStack, tmp_path: Path
) -> None:
    # given the tenant may have one upload a day (the first test set it), and two text files
    assert (
        cli("quotas", "set", QUOTA_TENANT, "--files-per-day", "1", cwd=stack.root).returncode == 0
    )
    paths = []
    for name in ("q1.txt", "q2.txt"):
        (tmp_path / name).write_text(f"{name}\n")
        paths.append(str(tmp_path / name))
    # when both are uploaded
    done = cli("upload", *paths, "--tenant", QUOTA_TENANT, "--no-follow", cwd=stack.root)
    assert done.returncode == 0, done.stderr
    # then one is processed and the other is recorded rejected, with the reason and no jobs
    stored = [recorded(stack, f"uploads/{QUOTA_TENANT}/{name}") for name in ("q1.txt", "q2.txt")]
    assert sorted(s["status"] for s in stored) == ["active", "rejected"]
    refused = next(s for s in stored if s["status"] == "rejected")
    assert refused["jobs"] == []
    assert refused["status_reason"].startswith(
        f"tenant {QUOTA_TENANT} is over its 1 files per day quota (1 used on "
    )
    # and the tenant reads its day's usage
    shown = cli("quotas", "show", QUOTA_TENANT, "--json", cwd=stack.root)
    assert json.loads(shown.stdout)["usage"]["files"] == 1


def recorded(stack: RunningStack, key: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stored = stack.file_at(key)
        if stored is not None:
            return stored
        time.sleep(0.5)
    raise AssertionError(f"{key} was never recorded")


# --- request: options, a delay, max retries ----------------------------------------------------

REQUEST_TENANT = "cli-request"


def test_request_makes_a_delayed_job_with_its_options_shows_it_and_cancels_it(
    stack: RunningStack, tmp_path: Path
) -> None:
    # given a text file of a tenant of its own
    (tmp_path / "r.txt").write_text("filejobs request\n" * 100)
    done = cli(
        "upload", str(tmp_path / "r.txt"), "--tenant", REQUEST_TENANT, "--no-follow",
        cwd=stack.root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    file_id = recorded(stack, f"uploads/{REQUEST_TENANT}/r.txt")["id"]
    # when a gzip compression is requested for ten minutes from now, with one retry
    made = cli(
        "request", file_id, "compression", "--option", "algorithm=gzip", "--option", "level=9",
        "--delay", "10m", "--max-retries", "1", cwd=stack.root,
    )  # fmt: skip
    # then the job waits, scheduled, and the CLI says when it starts and with what options
    assert made.returncode == 0, made.stderr
    assert "status:   scheduled (attempt 0, retries 0/1)" in made.stdout
    assert re.search(r"^  starts: +\d{4}-\d\d-\d\dT", made.stdout, re.MULTILINE), made.stdout
    assert 'options:  {"algorithm": "gzip", "level": 9}' in made.stdout
    job_id = re.findall(r"^job ([0-9a-f-]{36})$", made.stdout, re.MULTILINE)[0]
    view = stack.api(f"/jobs/{job_id}")[1]
    assert (view["status"], view["max_retries"]) == ("scheduled", 1)
    # and status shows it the same way, and it can be cancelled before it runs
    assert "starts:" in cli("status", job_id, cwd=stack.root).stdout
    cancelled = cli("cancel", job_id, cwd=stack.root)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled.stderr
    # when an option is out of bounds, then the API's reason is said, field first, and no job
    before = len(stack.api(f"/files/{file_id}/jobs")[1]["jobs"])
    refused = cli("request", file_id, "compression", "--option", "level=25", cwd=stack.root)
    assert refused.returncode == 2
    assert "input_data.level: must be an integer from 1 to 19 for algorithm zstd" in (
        refused.stderr
    )
    assert len(stack.api(f"/files/{file_id}/jobs")[1]["jobs"]) == before


def test_schedules_are_added_listed_fired_by_the_local_scheduler_paused_and_removed(
    stack: RunningStack, uploaded: Uploaded
) -> None:
    # given the uploaded PNG, and a nightly thumbnail schedule for its prefix made with the CLI
    prefix = f"uploads/{TENANT}/cli-photo"
    added = cli(
        "schedules", "add", "cli nightly", "--cron", "cron(0 3 * * ? *)",
        "--timezone", "Europe/Paris", "--prefix", prefix, "--run", "thumbnail_generation",
        "--option", "sizes=64,128", "--tenant", TENANT, "--json", cwd=stack.root,
    )  # fmt: skip
    assert added.returncode == 0, added.stdout + added.stderr
    made = json.loads(added.stdout)
    assert made["input_data"] == {"sizes": [64, 128]} and len(made["next_runs"]) == 3
    listed = cli("schedules", "list", "--tenant", TENANT, cwd=stack.root)
    assert f"{made['id']}  {TENANT}  'cli nightly': thumbnail_generation on {prefix}" in (
        listed.stdout
    )
    # when its EventBridge schedule comes due (moved to a few seconds from now, as if the night
    # came: a one-time `at(...)` expression, which the local scheduler runs as AWS does)
    scheduler = stack.client("scheduler")
    group = stack.config["resources"]["refs"]["ScheduleGroup"]
    armed = scheduler.get_schedule(Name=made["id"], GroupName=group)
    soon = datetime.now(UTC) + timedelta(seconds=8)  # after the scheduler's next look (5 s)
    scheduler.update_schedule(
        Name=made["id"],
        GroupName=group,
        ScheduleExpression=f"at({soon:%Y-%m-%dT%H:%M:%S})",
        FlexibleTimeWindow={"Mode": "OFF"},
        State="ENABLED",
        Target=armed["Target"],
    )
    # then the local scheduler fires a run within its minute, and the run's operation gives the
    # PNG a second thumbnail job
    deadline = time.monotonic() + 100
    shown = {}
    while time.monotonic() < deadline:
        shown = stack.api(f"/schedules/{made['id']}")[1]
        if shown.get("runs"):
            break
        time.sleep(2)
    assert shown.get("runs") == 1, shown
    operation_id = shown["last_operation_id"]
    while time.monotonic() < deadline:
        operation = stack.api(f"/operations/{operation_id}")[1]
        if operation["status"] != "running":
            break
        time.sleep(1)
    assert (operation["status"], operation["changed"]) == ("succeeded", 1)
    file_id = uploaded.file_ids["cli-photo.png"]
    thumbnails = [
        j for j in stack.api(f"/files/{file_id}")[1]["jobs"]
        if j["job_type"] == "thumbnail_generation"
    ]  # fmt: skip
    assert len(thumbnails) == 2
    # and it is paused, shown so, then removed
    paused = cli("schedules", "pause", made["id"], cwd=stack.root)
    assert paused.returncode == 0 and "(paused)" in paused.stdout
    removed = cli("schedules", "remove", made["id"], cwd=stack.root)
    assert removed.returncode == 0 and f"removed {made['id']}" in removed.stdout
    gone = cli("schedules", "show", made["id"], cwd=stack.root)
    assert gone.returncode != 0 and "Traceback" not in gone.stderr
