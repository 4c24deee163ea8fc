"""The CLI's commands on files and jobs: upload (and follow), status, jobs, cancel, retry, get."""

from __future__ import annotations

import argparse
import json
import mimetypes
import re
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from filejobs_cli.client import (
    ApiClient,
    CliError,
    HttpError,
    Target,
    UsageError,
    add_target_options,
    requested_acting,
    resolve_target,
)
from filejobs_cli.contract import JOB_STATUSES, JOB_TYPES
from filejobs_cli.credentials import Acting, aws_message
from filejobs_cli.progress import (
    Display,
    JobRow,
    LineDisplay,
    TableDisplay,
    progress_phrase,
    render_table,
    row_of,
    summary,
)
from filejobs_cli.transfer import ByteProgress, download, upload_file
from filejobs_cli.upload_keys import chosen_name, safe_name, upload_key

# A file is processed once all its jobs are terminal and the API has recorded it so.
PROCESSED = "processed"
STORED = "stored"  # a file given no job: nothing to wait for
DEFAULT_TENANT = "demo"  # the local stack's demo tenant, where no other is named
POLL_SECONDS = 0.5
CLOCK_SKEW = timedelta(seconds=5)  # between this machine and the API's clock
PAGE_MAX = 100  # the API's largest page
_TENANT = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_OUTPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_JOB_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_PRESET = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
# A file id as the API writes it: a hyphenated UUID, safe as a folder name.
_FILE_ID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")

type Command = Callable[[argparse.Namespace, Target], int]


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
) -> None:
    """Adds upload, status, jobs, cancel, retry and get to the `filejobs` command."""

    def on_target(
        command: Command, check: Callable[[argparse.Namespace], None] | None = None
    ) -> Callable[[argparse.Namespace], int]:
        return targeted(command, project_root, check)

    upload_ = commands.add_parser(
        "upload",
        help="upload files (any name; multipart with byte progress), then follow their jobs",
    )
    upload_.add_argument(
        "paths", nargs="+", metavar="PATH", help="the files; each object key is made from its name"
    )
    upload_.add_argument(
        "--tenant",
        type=tenant_argument,
        help=f"whose uploads (default: the tenant you act as, else {DEFAULT_TENANT})",
    )
    upload_.add_argument(
        "--key",
        metavar="NAME",
        help="the object's name under the tenant's uploads (and --folder), exactly as written, "
        "for one PATH (default: made safe from the file's name)",
    )
    upload_.add_argument("--no-follow", action="store_true", help="stop once the ids are known")
    upload_.add_argument(
        "--wait",
        action="store_true",
        help="no live table: return once every file is processed (all its jobs ended), "
        "with one line per file",
    )
    upload_.add_argument(
        "--timeout", type=positive_float, default=300.0, help="seconds (default 300)"
    )
    upload_.add_argument(
        "--folder",
        type=folder_argument,
        default="",
        help="under this folder of the tenant's uploads (a preset may be bound to it)",
    )
    upload_.add_argument(
        "--preset",
        type=preset_argument,
        help="the upload preset that says which jobs run (x-amz-meta-filejobs-preset)",
    )
    upload_.add_argument(
        "--json",
        action="store_true",
        help="one JSON document on stdout: each file's key, version, id and (followed) its "
        "final state; progress on stderr",
    )
    upload_.set_defaults(run=on_target(upload, check_upload))

    status_ = commands.add_parser("status", help="a job or a file, by its id")
    status_.add_argument(
        "id", type=uuid_argument, metavar="FILE_ID|JOB_ID", help="a job's or a file's id"
    )
    status_.add_argument("--json", action="store_true", help="the API's JSON as it is")
    status_.set_defaults(run=on_target(status))

    jobs_ = commands.add_parser("jobs", help="list the jobs of one tenant or in one status")
    jobs_.add_argument("--status", choices=JOB_STATUSES, help="only jobs in this status")
    jobs_.add_argument("--type", choices=JOB_TYPES, help="only jobs of this type")
    jobs_.add_argument("--tenant", type=tenant_argument, help="only this tenant's jobs")
    jobs_.add_argument("--limit", type=positive_int, default=25, help="at most (default 25)")
    jobs_.add_argument("--json", action="store_true", help="the jobs as the API gives them")
    jobs_.set_defaults(run=on_target(jobs, check_jobs_filters))

    cancel_ = commands.add_parser("cancel", help="cancel a job")
    cancel_.add_argument("job_id", type=uuid_argument, help="the job's id")
    cancel_.add_argument("--reason", help="why (recorded on the job)")
    cancel_.add_argument("--json", action="store_true", help="the cancelled job as the API says")
    cancel_.set_defaults(run=on_target(cancel))

    retry_ = commands.add_parser("retry", help="retry a failed or cancelled job")
    retry_.add_argument("job_id", type=uuid_argument, help="the job's id")
    retry_.add_argument("--json", action="store_true", help="the job as the API says")
    retry_.set_defaults(run=on_target(retry))

    get_ = commands.add_parser(
        "get", help="download a file's derived outputs (through the API's presigned URLs)"
    )
    get_.add_argument("file_id", type=uuid_argument, help="the file's id")
    get_.add_argument(
        "--out", default="out", help="the folder: DIR/FILE_ID/JOB_TYPE/NAME (default ./out)"
    )
    get_.add_argument(
        "--json", action="store_true", help="what was written where, as one JSON document"
    )
    get_.set_defaults(run=on_target(get))

    for parser in (upload_, status_, jobs_, cancel_, retry_, get_):
        add_target_options(parser)


def print_listing(
    page: Any,
    key: str,
    line: Callable[[dict[str, Any]], str],
    out: TextIO,
    *,
    as_json: bool,
    empty: str,
) -> None:
    """A listing's answer: as the API's JSON, or one line per item of `page[key]`."""
    if as_json:
        print(json.dumps(page, indent=2), file=out)
        return
    items = (page.get(key) if isinstance(page, dict) else None) or []
    if not items:
        print(empty, file=out)
    for item in items:
        print(line(item), file=out)


def output_streams(
    arguments: argparse.Namespace, out: TextIO | None, err: TextIO | None
) -> tuple[TextIO, TextIO, bool, TextIO]:
    """(stdout, stderr, --json, where progress lines go) of a command that prints both a
    result and its progress: the streams of now, not of import time (in-process runs capture
    them); with --json, progress goes to stderr, as stdout holds the one document."""
    out, err = out or sys.stdout, err or sys.stderr
    as_json = bool(getattr(arguments, "json", False))
    return out, err, as_json, err if as_json else out


def targeted(
    command: Command,
    project_root: Callable[[], Path],
    check: Callable[[argparse.Namespace], None] | None = None,
) -> Callable[[argparse.Namespace], int]:
    """A command run on the target its options name: its usage checked first, every failure
    one line on stderr with its exit status, never a traceback."""

    def run(arguments: argparse.Namespace) -> int:
        try:
            if check is not None:
                check(arguments)  # usage errors first, before looking for a target
            return command(arguments, resolve_target(arguments, project_root))
        except CliError as error:
            print(f"filejobs: {error.message}", file=sys.stderr)
            return error.exit_code
        except KeyboardInterrupt:
            print("filejobs: interrupted", file=sys.stderr)
            return 130

    return run


# --- argument validation (argparse `type=` functions: a bad value exits 2) --------------------


def tenant_argument(value: str) -> str:
    if not _TENANT.match(value):
        raise argparse.ArgumentTypeError(
            f"tenant must be 1-63 lowercase letters, digits or hyphens, "
            f"not starting or ending with a hyphen; got {value!r}"
        )
    return value


def uuid_argument(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a file or job id (a UUID), got {value!r}"
        ) from None


def positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return number


def folder_argument(value: str) -> str:
    """'avatars' or 'avatars/staff/' -> 'avatars/staff/': plain names, no '..' ('' is the
    tenant's own folder)."""
    parts = [part for part in value.strip("/").split("/") if part]
    if not parts:
        return ""
    if any(not _OUTPUT_NAME.match(part) or part == ".." for part in parts):
        raise argparse.ArgumentTypeError(
            f"a folder is names of letters, digits, '.', '_' or '-' joined by '/'; got {value!r}"
        )
    return "/".join(parts) + "/"


def preset_argument(value: str) -> str:
    if not _PRESET.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"a preset name is 1-63 lower-case letters, digits, '-' or '_'; got {value!r}"
        )
    return value


def output_path(out_dir: Path, file_id: str, job_type: str, name: str) -> Path:
    """DIR/{file_id}/{job_type}/{name}, refusing anything that would land outside DIR."""
    if not _FILE_ID.fullmatch(file_id) or not _JOB_TYPE.match(job_type):
        raise CliError(f"refusing to write outputs for file {file_id!r} / job {job_type!r}")
    if not _OUTPUT_NAME.match(name) or ".." in name:
        raise CliError(f"refusing output name {name!r}: it is not a plain file name")
    root = out_dir.resolve()
    path = (root / file_id / job_type / name).resolve()
    if not path.is_relative_to(root):
        raise CliError(f"refusing output name {name!r}: it would be written outside {out_dir}")
    return path


# --- upload ---------------------------------------------------------------------------------


@dataclass
class Upload:
    path: Path
    key: str
    version_id: str | None
    file_id: str | None = None
    uploaded_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def check_upload(arguments: argparse.Namespace) -> None:
    planned(arguments, upload_tenant(arguments, requested_acting(arguments) or Acting()))


def upload_tenant(arguments: argparse.Namespace, acting: Acting) -> str:
    """--tenant, which must be the tenant one acts as, if one does; else DEFAULT_TENANT."""
    if acting.tenant is not None:
        if arguments.tenant not in (None, acting.tenant):
            raise UsageError(
                f"you act as tenant {acting.tenant}: --tenant {arguments.tenant} is another "
                "tenant's uploads"
            )
        return acting.tenant
    return str(arguments.tenant or DEFAULT_TENANT)


def planned(arguments: argparse.Namespace, tenant: str) -> list[Upload]:
    """One upload per path given, each an existing file, no two to the same key."""
    chosen: str | None = getattr(arguments, "key", None)
    if chosen is not None and len(arguments.paths) != 1:
        raise UsageError("--key names one file's object: give one PATH with it")
    uploads = []
    for path in map(Path, arguments.paths):
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
        name = chosen_name(chosen) if chosen is not None else safe_name(path.name)
        uploads.append(Upload(path, upload_key(tenant, arguments.folder, name), None))
    by_key: dict[str, list[Path]] = {}
    for item in uploads:
        by_key.setdefault(item.key, []).append(item.path)
    for key, paths in by_key.items():
        if len(paths) > 1:
            raise UsageError(
                f"{paths[0]} and {paths[1]} would both be uploaded as {key}: rename one, "
                "or upload it on its own with --key"
            )
    return uploads


def upload(
    arguments: argparse.Namespace,
    target: Target,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err, as_json, say = output_streams(arguments, out, err)
    uploads = planned(arguments, upload_tenant(arguments, target.acting()))
    bucket = target.require_uploads_bucket()
    deadline = time.monotonic() + arguments.timeout
    s3 = target.s3()
    for item in uploads:
        _send(s3, bucket, item, upload_metadata(arguments), err)
        print(f"uploaded {item.path} to s3://{bucket}/{item.key}", file=say, flush=True)
    api = ApiClient(target)
    for item in uploads:
        item.file_id = _wait_for_file(api, bucket, item, deadline)
        print(f"{item.path}: file {item.file_id}", file=say, flush=True)
    labelled = [(str(u.path), str(u.file_id)) for u in uploads]
    if arguments.no_follow:
        outcome = 0
    elif arguments.wait or as_json:
        outcome = wait_until_processed(api, labelled, deadline, say)
    else:
        display: Display = (
            TableDisplay(out, shutil.get_terminal_size().columns)
            if out.isatty()
            else LineDisplay(out)
        )
        outcome = follow(api, labelled, display, deadline, out)
    if as_json:
        document = [
            _uploaded(api, bucket, item, followed=not arguments.no_follow) for item in uploads
        ]
        print(json.dumps({"files": document}, indent=2), file=out)
    return outcome


def _send(s3: Any, bucket: str, item: Upload, metadata: dict[str, str], err: TextIO) -> None:
    content_type = mimetypes.guess_type(item.path.name)[0] or "application/octet-stream"
    progress = ByteProgress(str(item.path), item.path.stat().st_size, err)
    item.uploaded_at = datetime.now(UTC)
    try:
        item.version_id = upload_file(
            s3,
            item.path,
            bucket,
            item.key,
            extra_args={"ContentType": content_type, "Metadata": metadata},
            progress=progress,
        )
    except CliError:
        raise
    except Exception as error:
        message = aws_message(error)
        if "AccessDenied" in message or "Access Denied" in message:
            message += "; docs/CLI.md, IAM policy, says whose credentials upload and what they need"
        raise CliError(f"{item.path}: upload failed ({message})") from None
    finally:
        progress.finish()


def _uploaded(api: ApiClient, bucket: str, item: Upload, *, followed: bool) -> dict[str, Any]:
    """One file of `upload --json`: where it went, its id and, followed, the API's view."""
    return {
        "path": str(item.path),
        "bucket": bucket,
        "key": item.key,
        "version_id": item.version_id,
        "file_id": item.file_id,
        "file": api.get(f"/files/{item.file_id}") if followed else None,
    }


def upload_metadata(arguments: argparse.Namespace) -> dict[str, str]:
    return {} if arguments.preset is None else {"filejobs-preset": arguments.preset}


def _wait_for_file(api: ApiClient, bucket: str, item: Upload, deadline: float) -> str:
    """The id the API gave this upload (ingest is asynchronous: poll until it is known)."""
    while True:
        try:
            found = api.get("/files", {"key": item.key, "bucket": bucket})
        except HttpError as error:
            if error.status != 404:
                raise
        else:
            file_id = _version_of(found.get("files") or [], item.version_id, item.uploaded_at)
            if file_id is not None:
                return file_id
        if time.monotonic() >= deadline:
            raise CliError(f"{item.path}: not ingested in time (no file for {item.key})")
        time.sleep(POLL_SECONDS)


def _version_of(
    files: list[dict[str, Any]], version_id: str | None, uploaded_at: datetime
) -> str | None:
    """The file this upload made: its S3 version's, else the newest made since the upload.

    A file records the version id only when the upload event carried one (the local stack's
    events do not), so without a match the newest file created since the put is taken.
    """
    for stored in files:
        if version_id is not None and stored.get("version_id") == version_id:
            return str(stored["id"])
    since = uploaded_at - CLOCK_SKEW
    fresh = [f for f in files if (_moment(f.get("created_at")) or since) >= since]
    if not fresh:
        return None
    return str(max(fresh, key=lambda f: str(f.get("created_at") or ""))["id"])


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def follow(
    api: ApiClient,
    files: list[tuple[str, str]],
    display: Display,
    deadline: float,
    out: TextIO,
) -> int:
    """Polls every file's jobs until all are terminal (0) or the deadline passes (1)."""
    rows: list[JobRow] = []
    while True:
        rows, settled = [], True
        for label, file_id in files:
            stored = api.get(f"/files/{file_id}")
            jobs = stored.get("jobs") or []
            settled = settled and stored.get("processing_state") in (PROCESSED, STORED)
            rows.extend(row_of(label, j) for j in sorted(jobs, key=lambda j: j["job_type"]))
        display.show(rows)
        if settled:
            display.note(f"all jobs finished: {summary(rows)}")
            return 0
        if time.monotonic() >= deadline:
            display.note(f"timed out with jobs still running: {summary(rows)}")
            return 1
        time.sleep(POLL_SECONDS)


def wait_until_processed(
    api: ApiClient, files: list[tuple[str, str]], deadline: float, out: TextIO
) -> int:
    """Polls until every file is processed (0), printing each file's outcome as it is; or until
    the deadline (1, naming the files still processing)."""
    waiting = dict(files)
    while waiting:
        for label, file_id in list(waiting.items()):
            stored = api.get(f"/files/{file_id}")
            state = stored.get("processing_state")
            if state in (PROCESSED, STORED):
                line = processed_line(stored) if state == PROCESSED else stored_line(stored)
                print(f"{label}: {line}", file=out, flush=True)
                del waiting[label]
        if not waiting:
            break
        if time.monotonic() >= deadline:
            print(f"timed out; still processing: {', '.join(waiting)}", file=out, flush=True)
            return 1
        time.sleep(POLL_SECONDS)
    return 0


def processed_line(stored: dict[str, Any]) -> str:
    """'processed at 2026-12-04T10:00:00+00:00: thumbnail_generation completed, ...'"""
    completion = stored.get("processed") or {}
    outcomes = ", ".join(
        f"{job.get('job_type')} {job.get('status')}" for job in completion.get("jobs") or []
    )
    return f"processed at {completion.get('completed_at')}: {outcomes}"


def stored_line(stored: dict[str, Any]) -> str:
    """'stored, no job (preset archive v2)' or 'stored, no job (rejected: ...)'"""
    if stored.get("status") == "rejected":
        return f"stored, no job (rejected: {stored.get('status_reason')})"
    return f"stored, no job ({preset_line(stored)})"


def preset_line(stored: dict[str, Any]) -> str:
    """'avatars v3 (by prefix)', or 'none (the default jobs of its type)'."""
    preset = stored.get("preset")
    shown = (
        "none (the default jobs of its type)"
        if not preset
        else f"{preset.get('name')} v{preset.get('version')} (by {preset.get('by')})"
    )
    note = stored.get("preset_note")
    return f"{shown}; {note}" if note else shown


# --- status, jobs, cancel, retry ------------------------------------------------------------


def status(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    api = ApiClient(target)
    kind, found = "job", _get_or_none(api, f"/jobs/{arguments.id}")
    if found is None:
        kind, found = "file", _get_or_none(api, f"/files/{arguments.id}")
    if found is None:
        raise CliError(f"no job or file {arguments.id}")
    if arguments.json:
        print(json.dumps(found, indent=2), file=out)
    else:
        lines = job_summary(found) if kind == "job" else file_summary(found)
        print("\n".join(lines), file=out)
    return 0


def _get_or_none(api: ApiClient, path: str) -> Any:
    try:
        return api.get(path)
    except HttpError as error:
        if error.status == 404:
            return None
        raise


def job_summary(job: dict[str, Any]) -> list[str]:
    lines = [
        f"job {job['id']}",
        f"  type:     {job.get('job_type')}",
        f"  file:     {job.get('file_id')}",
        f"  tenant:   {job.get('tenant')}",
        f"  status:   {job.get('status')} (attempt {job.get('attempt')}, "
        f"retries {job.get('retry_count')}/{job.get('max_retries')})",
    ]
    for label, key in (
        ("started", "started_at"),
        ("finished", "completed_at"),
    ):
        if job.get(key):
            lines.append(f"  {label + ':':<9} {job[key]}")
    due = job.get("scheduled_at") or job.get("next_retry_at")
    if due:
        # a delayed job that has not run yet starts then; one that ran tries again then
        lines.append(f"  {'next try:' if job.get('attempt') else 'starts:':<9} {due}")
    if job.get("duration_seconds") is not None:
        lines.append(f"  took:     {job['duration_seconds']:.2f} s")
    if job.get("error_message"):
        lines.append(f"  error:    {job['error_message']}")
    if job.get("cancel_reason"):
        lines.append(f"  cancelled by {job.get('cancelled_by')}: {job['cancel_reason']}")
    if job.get("options"):
        lines.append(f"  options:  {json.dumps(job['options'], sort_keys=True)}")
    if job.get("result"):
        lines.append(f"  result:   {json.dumps(job['result'], sort_keys=True)}")
    lines.extend(attempt_lines(job))
    return lines


def attempt_lines(job: dict[str, Any]) -> list[str]:
    """The running attempt's progress and log so far, then each attempt with its log."""
    lines: list[str] = []
    progress = job.get("progress")
    if isinstance(progress, dict):
        state = "so far" if job.get("status") == "running" else "where it stopped"
        at = f" at {progress['updated_at']}" if progress.get("updated_at") else ""
        phrase = progress_phrase(progress) or "-"
        lines.append(f"  progress: {phrase} (attempt {progress.get('attempt')}{at})")
        lines.extend(_log_lines(progress.get("log"), f"log {state}"))
    attempts = [a for a in job.get("attempts") or [] if isinstance(a, dict)]
    if attempts:
        lines.append("  attempts:")
    for attempt in attempts:
        head = f"    {attempt.get('number')}. {attempt.get('outcome')} {attempt.get('ended_at')}"
        phrase = progress_phrase(attempt)
        lines.append(head + (f" ({phrase})" if phrase else ""))
        if attempt.get("error"):
            lines.append(f"       error: {attempt['error']}")
        lines.extend("    " + line for line in _log_lines(attempt.get("log"), "log"))
    return lines


def _log_lines(log: Any, title: str) -> list[str]:
    if not isinstance(log, list) or not log:
        return []
    return [f"  {title}:", *(f"    | {line}" for line in log)]


def file_summary(stored: dict[str, Any]) -> list[str]:
    lines = [
        f"file {stored['id']}",
        f"  object:   s3://{stored.get('bucket')}/{stored.get('key')}",
        f"  tenant:   {stored.get('tenant')}",
        f"  size:     {stored.get('size')} bytes ({stored.get('content_type')})",
        f"  status:   {stored.get('status')}"
        + (f" ({stored['status_reason']})" if stored.get("status_reason") else ""),
        f"  scan:     {stored.get('scan_status') or '-'}{_scan_detail(stored.get('scan'))}",
    ]
    if stored.get("duplicate_of"):
        lines.append(f"  duplicate of {stored['duplicate_of']}")
    lines.append(f"  preset:   {preset_line(stored)}")
    state = stored.get("processing_state")
    if state == PROCESSED:
        lines.append(f"  state:    {processed_line(stored)}")
    elif state is not None:
        lines.append(f"  state:    {state}")
    jobs = stored.get("jobs") or []
    lines.append(f"  jobs ({len(jobs)}):")
    if jobs:
        table = render_table([row_of(j["id"], j) for j in jobs])
        lines.extend("    " + line for line in table)
    bundle = stored.get("outputs") or []
    if bundle:
        lines.append(f"  outputs ({len(bundle)}; `filejobs get` downloads them):")
        lines.extend("    " + output_line(output) for output in bundle)
    return lines


def output_line(output: dict[str, Any]) -> str:
    """One derived file of the bundle, a line: its kind (with its page or time range), format,
    size, bytes and name."""
    kind = str(output.get("kind") or "file")
    if output.get("page") is not None:
        kind += f" {output['page']}"
    elif output.get("start_seconds") is not None:
        kind += f" {output['start_seconds']:g}-{output.get('end_seconds') or 0:g} s"
    size = (
        f"{output['width']}x{output['height']}"
        if output.get("width") is not None and output.get("height") is not None
        else ""
    )
    weight = f"{output['bytes']:,} B" if isinstance(output.get("bytes"), int) else ""
    name = str(output.get("name") or str(output.get("key") or "").rsplit("/", 1)[-1])
    return f"{kind:<18} {output.get('format') or '':<5} {size:<10} {weight:>11}  {name}".rstrip()


def _scan_detail(scan: Any) -> str:
    """When, with what, the verdict was given: ' (2026-12-01T08:00:00+00:00, definitions
    20261201T070000Z, ClamAV 1.4.6, YARA 4.5.4: Eicar)'."""
    if not isinstance(scan, dict):
        return ""
    engines = ", ".join(f"{n} {v}" for n, v in sorted((scan.get("engines") or {}).items()))
    parts = [str(scan.get("scanned_at")), f"definitions {scan.get('definitions_version') or '-'}"]
    if engines:
        parts.append(engines)
    found = ", ".join(scan.get("signatures") or []) or scan.get("reason") or ""
    return f" ({', '.join(parts)}{': ' + found if found else ''})"


def check_jobs_filters(arguments: argparse.Namespace) -> None:
    if arguments.tenant is None and arguments.status is None:
        # The API's rule for an operator (the local stack's caller): one tenant or one status.
        raise UsageError("give --tenant or --status (an operator lists one tenant or one status)")


def jobs(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    check_jobs_filters(arguments)
    api = ApiClient(target)
    found = list(_job_pages(api, arguments))
    if arguments.json:
        print(json.dumps({"jobs": found}, indent=2), file=out)
        return 0
    if not found:
        print("no jobs", file=out)
        return 0
    print("\n".join(render_table([row_of(j["id"], j) for j in found])), file=out)
    return 0


def _job_pages(api: ApiClient, arguments: argparse.Namespace) -> Iterator[dict[str, Any]]:
    remaining, token = arguments.limit, None
    while remaining > 0:
        page = api.get(
            "/jobs",
            {
                "tenant": arguments.tenant,
                "status": arguments.status,
                "job_type": arguments.type,
                "limit": str(min(remaining, PAGE_MAX)),
                "next_token": token,
            },
        )
        batch = page.get("jobs") or []
        yield from batch[:remaining]
        remaining -= len(batch)
        token = page.get("next_token")
        if not token or not batch:
            return


def cancel(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    body = None if arguments.reason is None else {"reason": arguments.reason}
    job = _command(ApiClient(target), arguments.job_id, "cancel", body)
    if getattr(arguments, "json", False):
        print(json.dumps(job, indent=2), file=out)
    else:
        print(f"job {job['id']} ({job.get('job_type')}): {job.get('status')}", file=out)
    return 0


def retry(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    job = _command(ApiClient(target), arguments.job_id, "retry", None)
    if getattr(arguments, "json", False):
        print(json.dumps(job, indent=2), file=out)
        return 0
    print(
        f"job {job['id']} ({job.get('job_type')}): {job.get('status')} "
        f"(attempt {job.get('attempt')} next)",
        file=out,
    )
    return 0


def _command(api: ApiClient, job_id: str, action: str, body: Any) -> dict[str, Any]:
    try:
        job: dict[str, Any] = api.post(f"/jobs/{job_id}/{action}", body)
    except HttpError as error:
        if error.status == 404:
            raise CliError(f"cannot {action}: no job {job_id}") from None
        if error.status == 409:
            raise CliError(f"cannot {action}: {error.message}") from None
        raise
    return job


# --- get ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    job_type: str
    name: str
    url: str
    path: Path


def get(arguments: argparse.Namespace, target: Target, out: TextIO | None = None) -> int:
    """Each output of the file's completed jobs, downloaded through the presigned URL the API
    gives for it (no AWS credentials), to DIR/FILE_ID/JOB_TYPE/NAME and nowhere else."""
    out = out or sys.stdout
    try:
        stored = ApiClient(target).get(f"/files/{arguments.file_id}")
    except HttpError as error:
        if error.status == 404:
            raise CliError(f"no file {arguments.file_id}") from None
        raise
    out_dir = Path(arguments.out)
    outputs = outputs_of(stored, out_dir)
    as_json = bool(getattr(arguments, "json", False))
    written = []
    for output in outputs:
        output.path.parent.mkdir(parents=True, exist_ok=True)
        size = download(output.url, output.path)
        written.append(
            {"job_type": output.job_type, "name": output.name, "path": str(output.path),
             "bytes": size}
        )  # fmt: skip
        if not as_json:
            print(f"{output.path}", file=out)
    if as_json:
        print(json.dumps({"file_id": stored["id"], "written": written}, indent=2), file=out)
    elif not outputs:
        print(f"file {stored['id']}: no derived outputs (yet)", file=out)
    else:
        print(f"file {stored['id']}: {len(outputs)} outputs in {out_dir}", file=out)
    return 0


def outputs_of(stored: dict[str, Any], out_dir: Path) -> list[Output]:
    """Every output the API links for the file's completed jobs, each with where it goes
    (output_path refuses a name that would land outside `out_dir`)."""
    found = []
    for job in stored.get("jobs") or []:
        if job.get("status") != "completed":
            continue
        for output in job.get("outputs") or []:
            name, url = str(output.get("name")), str(output.get("url"))
            path = output_path(out_dir, stored["id"], str(job.get("job_type")), name)
            found.append(Output(str(job.get("job_type")), name, url, path))
    return found
