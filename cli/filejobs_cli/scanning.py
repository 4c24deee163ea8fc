"""The CLI's commands of the virus scan: rescan, backfill, definitions.

filejobs rescan FILE_ID...                           one file each (POST /files/{id}/rescan)
filejobs rescan --tenant T [--prefix P] [--dry-run]  a tenant's files, a page at a time
                                                     (POST /rescans), then follows their scans
filejobs backfill --bucket B [--prefix P] [--inventory s3://.../manifest.json] [--tenant T]
                                                     objects that existed before the stack
filejobs definitions status | update | rollback      the virus scan's definitions
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import itertools
import json
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TextIO
from urllib.parse import quote_plus, unquote_plus, urlsplit

from filejobs_cli.client import (
    UPDATER_OUTPUT,
    ApiClient,
    CliError,
    HttpError,
    Target,
    UsageError,
    add_target_options,
)
from filejobs_cli.commands import output_streams, targeted, tenant_argument, uuid_argument
from filejobs_cli.credentials import aws_message
from filejobs_cli.progress import Display, LineDisplay, TableDisplay

POLL_SECONDS = 1.0
type Invoke = Callable[[str, dict[str, Any]], dict[str, Any]]
# SendMessageBatch takes ten messages at most.
_BATCH = 10
_UPLOADS = "uploads/"


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    project_root: Callable[[], Path],
    invoke_local: Invoke,
) -> None:
    """Adds rescan, backfill and definitions to the `filejobs` command."""

    def on_target(
        command: Callable[[argparse.Namespace, Target], int],
        check: Callable[[argparse.Namespace], None] | None = None,
    ) -> Callable[[argparse.Namespace], int]:
        return targeted(command, project_root, check)

    rescan_ = commands.add_parser("rescan", help="scan files again with today's definitions")
    rescan_.add_argument(
        "file_ids", nargs="*", metavar="FILE_ID", type=uuid_argument, help="the files to rescan"
    )
    rescan_.add_argument(
        "--tenant", type=tenant_argument, help="every file of this tenant (under --prefix)"
    )
    rescan_.add_argument("--prefix", help="a key prefix, e.g. uploads/acme/contracts/")
    rescan_.add_argument("--reason", help="recorded on each rescan job")
    rescan_.add_argument("--dry-run", action="store_true", help="count, rescan nothing")
    rescan_.add_argument("--key", help="resume an interrupted --tenant rescan (its printed key)")
    rescan_.add_argument("--no-follow", action="store_true", help="do not wait for the verdicts")
    rescan_.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    rescan_.add_argument(
        "--json",
        action="store_true",
        help="the rescan jobs and verdicts as one JSON document (progress on stderr)",
    )
    rescan_.set_defaults(run=on_target(rescan, check_rescan))

    backfill_ = commands.add_parser(
        "backfill", help="record and process objects that existed before the stack (operators)"
    )
    backfill_.add_argument("--bucket", required=True, help="the bucket the objects are in")
    backfill_.add_argument("--prefix", default="", help="only keys under this prefix")
    backfill_.add_argument(
        "--inventory", help="the s3:// URL of an S3 Inventory manifest.json to take them from"
    )
    backfill_.add_argument(
        "--tenant",
        type=tenant_argument,
        help="for a bucket other than the uploads bucket: whose uploads they become",
    )
    backfill_.add_argument("--dry-run", action="store_true", help="count, change nothing")
    backfill_.add_argument("--no-follow", action="store_true", help="do not wait for the jobs")
    backfill_.add_argument("--timeout", type=float, default=900.0, help="seconds (default 900)")
    backfill_.add_argument(
        "--json", action="store_true", help="the counts as one JSON document (progress on stderr)"
    )
    backfill_.set_defaults(run=on_target(backfill, check_backfill))

    definitions_ = commands.add_parser(
        "definitions", help="the virus scan's definitions (update and rollback: operators)"
    )
    definitions_.add_argument(
        "action",
        choices=["status", "update", "rollback"],
        help="status: the set the scan uses; update: fetch and publish now; rollback: make "
        "the previous set current",
    )
    definitions_.add_argument("--json", action="store_true", help="the updater's answer as it is")

    def run_definitions(arguments: argparse.Namespace, target: Target) -> int:
        return definitions(arguments, target, _updater_invoker(target, invoke_local))

    definitions_.set_defaults(run=on_target(run_definitions))
    for parser in (rescan_, backfill_, definitions_):
        add_target_options(parser)


def _updater_invoker(target: Target, invoke_local: Invoke) -> Invoke:
    """The local stack's updater (run as its host runs it), or a deployed stack's (Lambda, as
    the operator role)."""
    if target.local:
        return invoke_local
    if not target.updater_name:
        raise UsageError(
            "definitions runs the stack's updater function: give --stack-name (its output "
            f"{UPDATER_OUTPUT} names it)"
        )
    updater = target.updater_name

    def invoke_deployed(function: str, event: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            answer = target.lambda_factory().invoke(FunctionName=updater, Payload=json.dumps(event))
        except (ClientError, BotoCoreError) as error:
            raise CliError(f"{function}: {aws_message(error)}") from None
        payload: dict[str, Any] = json.loads(answer["Payload"].read() or b"{}")
        if answer.get("FunctionError"):
            raise CliError(f"{function}: {payload.get('errorMessage', 'failed')}")
        return payload

    return invoke_deployed


# --- rescan -----------------------------------------------------------------------------------


def rescan(
    arguments: argparse.Namespace,
    target: Target,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, err, as_json, say = output_streams(arguments, out, err)
    api = ApiClient(target)
    reason = {"reason": arguments.reason} if arguments.reason else None
    if arguments.file_ids:
        pages = Rescanned(None)
        pages.jobs = [_rescan_one(api, file_id, reason, say) for file_id in arguments.file_ids]
    else:
        pages = _rescan_pages(api, arguments, say)
    finished: dict[str, dict[str, Any]] = {}
    outcome = 0
    if not (arguments.dry_run or arguments.no_follow or not pages.jobs):
        deadline = time.monotonic() + arguments.timeout
        outcome = follow_jobs(api, pages.jobs, _display(say), deadline, finished)
    if as_json:
        document = {
            "dry_run": bool(arguments.dry_run),
            "operation_key": pages.key,
            "requested": pages.requested if pages.key else len(pages.jobs),
            "skipped": pages.skipped,
            "job_ids": pages.jobs,
            "finished": [finished[job_id] for job_id in pages.jobs if job_id in finished],
        }
        print(json.dumps(document, indent=2), file=out)
    return outcome


@dataclass
class Rescanned:
    """What a rescan asked for: its jobs, and for a tenant's prefix its key and counts."""

    key: str | None
    jobs: list[str] = field(default_factory=list)
    requested: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)


def check_rescan(arguments: argparse.Namespace) -> None:
    if bool(arguments.file_ids) == bool(arguments.tenant):
        raise UsageError("give FILE_IDs, or --tenant (with --prefix), not both or neither")
    if arguments.prefix and not arguments.tenant:
        raise UsageError("--prefix needs --tenant")
    if arguments.dry_run and arguments.file_ids:
        raise UsageError("--dry-run counts the files of a --tenant and --prefix")


def _rescan_one(api: ApiClient, file_id: str, body: Any, out: TextIO) -> str:
    # A key of its own: a request lost on the way is sent again without a second rescan.
    key = {"Idempotency-Key": str(uuid.uuid4())}
    try:
        job = api.post(f"/files/{file_id}/rescan", body, headers=key)
    except HttpError as error:
        raise CliError(f"file {file_id}: {error.message}") from None
    print(f"file {file_id}: rescan job {job['id']} ({job['status']})", file=out, flush=True)
    return str(job["id"])


def _rescan_pages(api: ApiClient, arguments: argparse.Namespace, out: TextIO) -> Rescanned:
    """Every page of the tenant's files under the prefix, under one key: a command run again
    after an interruption makes no second job for the files it already did."""
    done = Rescanned(arguments.key or str(uuid.uuid4()))
    body: dict[str, Any] = {"tenant": arguments.tenant, "prefix": arguments.prefix or ""}
    if arguments.reason:
        body["reason"] = arguments.reason
    if arguments.dry_run:
        body["dry_run"] = True
    while True:
        page = api.post("/rescans", body, headers={"Idempotency-Key": str(done.key)})
        done.requested += len(page["requested"])
        done.skipped.extend(page["skipped"])
        done.jobs.extend(str(r["job_id"]) for r in page["requested"])
        verb = "would rescan" if arguments.dry_run else "rescanning"
        print(f"{verb} {done.requested} files, {len(done.skipped)} skipped", file=out, flush=True)
        for skip in page["skipped"]:
            print(f"  skipped {skip['file_id']}: {skip['reason']}", file=out)
        if not page.get("next_token"):
            break
        body["next_token"] = page["next_token"]
    if not arguments.dry_run:
        print(
            f"operation key {done.key} (give --key {done.key} to resume it)", file=out, flush=True
        )
    return done


def follow_jobs(
    api: ApiClient,
    job_ids: list[str],
    display: Display,
    deadline: float,
    finished: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Polls the scan jobs until all are finished (into `finished`, by id): one line of counts,
    then the verdicts."""
    open_ids = list(job_ids)
    finished = {} if finished is None else finished
    while open_ids:
        for job_id in list(open_ids):
            job = api.get(f"/jobs/{job_id}")
            if job.get("status") in {"completed", "failed", "cancelled"}:
                finished[job_id] = job
                open_ids.remove(job_id)
        display.note(f"scans finished: {len(finished)}/{len(job_ids)}")
        if open_ids and time.monotonic() >= deadline:
            display.note(f"timed out with {len(open_ids)} scans still to finish")
            return 1
        if open_ids:
            time.sleep(POLL_SECONDS)
    verdicts: dict[str, int] = {}
    for job in finished.values():
        verdict = (job.get("result") or {}).get("verdict") or job.get("status", "?")
        verdicts[str(verdict)] = verdicts.get(str(verdict), 0) + 1
        if verdict == "INFECTED":
            signatures = ", ".join((job.get("result") or {}).get("signatures") or [])
            display.note(f"file {job['file_id']}: INFECTED ({signatures}): quarantined")
    display.note("verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())))
    return 0


def _display(out: TextIO) -> Display:
    if out.isatty():
        return TableDisplay(out, shutil.get_terminal_size().columns)
    return LineDisplay(out)


# --- backfill ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CopyIn:
    """Where a backfill from another bucket copies its objects."""

    source_bucket: str
    prefix: str
    uploads: str
    tenant: str

    def destination(self, key: str) -> str:
        relative = key[len(self.prefix) :].lstrip("/") or PurePosixPath(key).name
        return f"{_UPLOADS}{self.tenant}/{relative}"


@dataclass(frozen=True)
class ExistingObject:
    key: str
    version_id: str | None
    size: int
    etag: str


def backfill(
    arguments: argparse.Namespace,
    target: Target,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Records and processes objects that existed before the stack (or were uploaded while its
    notifications were not delivered). In the stack's uploads bucket, each object version is
    announced to the ingest as S3 would have (idempotent: a version is recorded once however
    often it is announced). From another bucket, each object is copied into the uploads bucket
    under uploads/{tenant}/, which S3 announces itself (a copy already made is not made again).
    Then, unless --no-follow, every file is followed until its jobs are done.
    """
    out, err, as_json, say = output_streams(arguments, out, err)
    if not target.acting().operator:
        raise UsageError(f"backfill is an operator's command; you act as {target.acting()}")
    s3 = target.s3()
    uploads = target.require_uploads_bucket()
    in_place = arguments.bucket == uploads
    if not in_place and not arguments.tenant:
        raise UsageError(
            f"{arguments.bucket} is not the stack's uploads bucket ({uploads}): give --tenant, "
            "whose uploads/{tenant}/ its objects are copied into"
        )
    prefix = arguments.prefix or ""
    found = (
        _listing(s3, arguments.bucket, prefix)
        if arguments.inventory is None
        else _inventory(s3, arguments.inventory, arguments.bucket, prefix)
    )
    counts = {"listed": 0, "announced": 0, "copied": 0, "already": 0, "skipped": 0}
    if in_place:
        keys = _backfill_in_place(target, found, counts, dry_run=arguments.dry_run, out=say)
    else:
        plan = CopyIn(arguments.bucket, prefix, uploads, arguments.tenant)
        keys = _backfill_by_copy(s3, plan, found, counts, dry_run=arguments.dry_run, out=say)
    verb = "would have " if arguments.dry_run else ""
    print(f"{verb}{_progress(counts)}", file=say, flush=True)
    outcome = 0
    if not (arguments.dry_run or arguments.no_follow or not keys):
        deadline = time.monotonic() + arguments.timeout
        outcome = follow_files(ApiClient(target), uploads, keys, _display(say), deadline)
    if as_json:
        document = {"dry_run": bool(arguments.dry_run), "counts": counts, "keys": keys}
        print(json.dumps(document, indent=2), file=out)
    return outcome


def _backfill_in_place(
    target: Target,
    found: Iterator[ExistingObject],
    counts: dict[str, int],
    *,
    dry_run: bool,
    out: TextIO,
) -> list[str]:
    announce: list[ExistingObject] = []
    for item in found:
        counts["listed"] += 1
        if _tenant_of(item.key) is None:
            counts["skipped"] += 1
            print(f"  skipped {item.key!r}: not under uploads/{{tenant}}/", file=out)
        else:
            announce.append(item)
    if not dry_run:
        queue, sqs = target.require_ingest_queue(), target.sqs()
        uploads = target.require_uploads_bucket()
        for batch in itertools.batched(announce, _BATCH, strict=False):
            _announce(sqs, queue, uploads, batch)
            counts["announced"] += len(batch)
            if counts["announced"] % 100 == 0:
                print(_progress(counts), file=out, flush=True)
    return [item.key for item in announce]


def _backfill_by_copy(
    s3: Any,
    plan: CopyIn,
    found: Iterator[ExistingObject],
    counts: dict[str, int],
    *,
    dry_run: bool,
    out: TextIO,
) -> list[str]:
    keys = []
    for item in found:
        counts["listed"] += 1
        if item.key.endswith("/"):  # a folder marker: no file to process
            counts["skipped"] += 1
            continue
        keys.append(plan.destination(item.key))
        if not dry_run:
            counts["copied" if _copy_in(s3, item, plan) else "already"] += 1
        if counts["listed"] % 100 == 0:
            print(_progress(counts), file=out, flush=True)
    return keys


def follow_files(
    api: ApiClient, bucket: str, keys: list[str], display: Display, deadline: float
) -> int:
    """Polls until every key's newest file is recorded and its jobs are done (0), or the
    deadline passes (1): one line of counts at a time."""
    waiting, recorded, done = list(keys), dict[str, str](), set[str]()
    while True:
        for key in list(waiting):
            file_id = recorded.get(key) or _newest_file(api, bucket, key)
            if file_id is None:
                continue
            recorded[key] = file_id
            jobs = api.get(f"/files/{file_id}").get("jobs") or []
            if jobs and all(j.get("status") in {"completed", "failed", "cancelled"} for j in jobs):
                done.add(key)
                waiting.remove(key)
        display.note(f"recorded {len(recorded)}/{len(keys)}, processed {len(done)}/{len(keys)}")
        if not waiting:
            return 0
        if time.monotonic() >= deadline:
            display.note(f"timed out with {len(waiting)} files still being processed")
            return 1
        time.sleep(POLL_SECONDS)


def _newest_file(api: ApiClient, bucket: str, key: str) -> str | None:
    try:
        found = api.get("/files", {"key": key, "bucket": bucket})
    except HttpError as error:
        if error.status == 404:
            return None
        raise
    files = found.get("files") or []
    return str(files[0]["id"]) if files else None


def check_backfill(arguments: argparse.Namespace) -> None:
    if arguments.inventory is not None and not arguments.inventory.startswith("s3://"):
        raise UsageError("--inventory is the s3:// URL of an S3 Inventory manifest.json")
    if arguments.prefix and arguments.prefix.startswith("/"):
        raise UsageError("--prefix is a key prefix (S3 keys do not start with '/')")


def _progress(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items())


def _listing(s3: Any, bucket: str, prefix: str) -> Iterator[ExistingObject]:
    """The current version of every object under the prefix (noncurrent ones are history)."""
    pages = s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        for version in page.get("Versions", []):
            if version.get("IsLatest"):
                yield _existing(
                    version["Key"], version.get("VersionId"), version["Size"], version["ETag"]
                )


def _inventory(s3: Any, url: str | None, bucket: str, prefix: str) -> Iterator[ExistingObject]:
    """The objects an S3 Inventory report lists (manifest.json and its CSV files): for a bucket
    too large to list, or to backfill exactly what a report saw."""
    if url is None:
        return iter(())
    return _inventory_rows(s3, url, bucket, prefix)


def _inventory_rows(s3: Any, url: str, bucket: str, prefix: str) -> Iterator[ExistingObject]:
    parts = urlsplit(url)
    manifest = json.loads(
        s3.get_object(Bucket=parts.netloc, Key=parts.path.lstrip("/"))["Body"].read()
    )
    if manifest.get("fileFormat") != "CSV":
        raise CliError(
            f"{url}: only CSV inventories are read (this one is {manifest.get('fileFormat')})"
        )
    if manifest.get("sourceBucket") != bucket:
        raise CliError(f"{url} lists bucket {manifest.get('sourceBucket')}, not {bucket}")
    columns = [c.strip() for c in str(manifest["fileSchema"]).split(",")]
    for listed in manifest.get("files", []):
        body = s3.get_object(Bucket=parts.netloc, Key=listed["key"])["Body"].read()
        rows = csv.reader(io.TextIOWrapper(io.BytesIO(gzip.decompress(body)), encoding="utf-8"))
        for row in rows:
            item = dict(zip(columns, row, strict=False))
            key = unquote_plus(item["Key"])  # inventory keys are URL-encoded
            if not key.startswith(prefix) or item.get("IsDeleteMarker") == "true":
                continue
            if item.get("IsLatest", "true") != "true":
                continue
            yield _existing(
                key, item.get("VersionId"), int(item.get("Size") or 0), item.get("ETag", "")
            )


def _existing(key: str, version_id: str | None, size: int, etag: str) -> ExistingObject:
    version = None if version_id in (None, "", "null") else version_id
    return ExistingObject(key, version, int(size), etag.strip('"'))


def _tenant_of(key: str) -> str | None:
    if not key.startswith(_UPLOADS):
        return None
    tenant, _, name = key[len(_UPLOADS) :].partition("/")
    return tenant if tenant and name and not name.endswith("/") else None


def _announce(sqs: Any, queue: str, bucket: str, batch: Sequence[ExistingObject]) -> None:
    """One S3 ObjectCreated notification per object, as S3 itself sends them."""
    entries = [
        {"Id": str(n), "MessageBody": json.dumps(_notification(bucket, item))}
        for n, item in enumerate(batch)
    ]
    answer = sqs.send_message_batch(QueueUrl=queue, Entries=entries)
    failed = answer.get("Failed") or []
    if failed:
        raise CliError(
            f"the ingest queue refused {len(failed)} records: {failed[0].get('Message')}"
        )


def _notification(bucket: str, item: ExistingObject) -> dict[str, Any]:
    described: dict[str, Any] = {"key": quote_plus(item.key), "size": item.size, "eTag": item.etag}
    if item.version_id:
        described["versionId"] = item.version_id
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "filejobs:backfill",
                "eventName": "ObjectCreated:Backfill",
                "s3": {"bucket": {"name": bucket}, "object": described},
            }
        ]
    }


def _copy_in(s3: Any, item: ExistingObject, plan: CopyIn) -> bool:
    """Copies one object into the tenant's uploads; False when this very copy is there."""
    destination = plan.destination(item.key)
    origin = hashlib.sha256(
        f"{plan.source_bucket}\0{item.key}\0{item.version_id}".encode()
    ).hexdigest()
    try:
        head = s3.head_object(Bucket=plan.uploads, Key=destination)
    except Exception:  # absent, or unreadable: copy it
        head = {}
    if head.get("Metadata", {}).get("backfill-source") == origin:
        return False
    source: dict[str, str] = {"Bucket": plan.source_bucket, "Key": item.key}
    if item.version_id:
        source["VersionId"] = item.version_id
    # boto3's managed copy: one CopyObject, or a multipart copy above its threshold (5 GB+).
    s3.copy(
        source,
        plan.uploads,
        destination,
        ExtraArgs={"Metadata": {"backfill-source": origin}, "MetadataDirective": "REPLACE"},
    )
    return True


# --- definitions ------------------------------------------------------------------------------


def definitions(
    arguments: argparse.Namespace,
    target: Target,
    invoke: Callable[[str, dict[str, Any]], dict[str, Any]],
    out: TextIO | None = None,
) -> int:
    """What the scan scans with now; an update run now; the previous set made current."""
    out = out or sys.stdout
    answer = invoke("DefinitionsUpdater", {"action": arguments.action})
    if getattr(arguments, "json", False):
        print(json.dumps(answer, indent=2, sort_keys=True), file=out)
    else:
        print("\n".join(definitions_lines(answer)), file=out)
    status = str(answer.get("status", ""))
    return 1 if status == "failed" else 0


def definitions_lines(answer: dict[str, Any]) -> list[str]:
    """The updater's answer, a field a line: status and set first, the rest as they come."""
    first = [name for name in ("status", "set_id") if name in answer]
    rest = sorted(name for name in answer if name not in first)
    width = max((len(name) for name in answer), default=0) + 1
    return [f"{name + ':':<{width}} {_shown(answer[name])}" for name in first + rest]


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str | int | float | bool):
        return str(value)
    return json.dumps(value, sort_keys=True)
