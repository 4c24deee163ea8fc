"""`make chaos`: the whole system under injected faults, then an audit of everything it left.

Starts the local stack (`filejobs dev`) in a scratch copy of the project with these faults
(filejobs_dev/local/faults.py), decided per job attempt or message from the run's seed:
- transient processor failures on 20% of attempts;
- worker crashes on 5% of attempts: the process dies before its processor runs or after it
  wrote its outputs, writing nothing; the job's lease (JobLeaseSeconds=20 here) expires and the
  sweep takes it back;
- duplicate deliveries of 10% of the messages of every SQS-triggered function: S3's
  notifications to the ingest, job messages to the workers (a poisoned message is not copied:
  its copy would only reach the dead-letter queue a whole redrive later);
- bursts of DynamoDB throttling (2 s in every 20 s, half the requests of every function but
  the API's refused);
- two sweeps running at once, every 2 s, beside the workers;
- the compression messages of files named "poison" mangled on every delivery, so SQS moves them
  to the dead-letter queue and the sweep's dead-letter review must account for them;
- dropped notifications: 5% of the S3 notifications the ingest router receives are lost unread,
  so only the reconciler (run every 2 s here, with a 60 s grace) can find those uploads: the
  audit counts every upload never recorded, and it must be none.
It uploads a mix of real files (photos, PNGs, videos, PDFs, text, corrupt JPEGs, the EICAR test
virus) for two tenants while cancelling random running jobs through the API and deleting the
uploads of a few files whose jobs run (a delete marker, or every third their version by id, as
any S3 client deletes), waits until the system is quiet (every job terminal, every queue empty)
and the deleted files' delayed output purges have had their turn, then audits
(filejobs_dev/local/chaos_audit.py) the tables, the job table's stream (the append-only witness of
completions), the `File Processed` events a rule on the bus forwarded to a queue, the fault log,
the dead-letter queues and the outputs bucket's derived files. It prints a table of figures and
exits 1 on any violation.

    .venv/bin/python tools/chaos.py [--mode quick|full] [--files N] [--seed N]

quick (CI, `make test`): 60 files, one poller per function; full (`make chaos-full`): 2,000
files, two pollers per function.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

from botocore.exceptions import BotoCoreError, ClientError
from PIL import Image

from filejobs.data.mapping import file_from_model, job_from_model
from filejobs.data.models import FileModel, JobModel
from filejobs.domain.job import JobType
from filejobs_dev.infra.template import function_definitions, load_template
from filejobs_dev.local.chaos_audit import (
    DeleteHow,
    Deletion,
    Evidence,
    ProcessedEvent,
    Report,
    StreamRecord,
    Upload,
    audit,
)
from filejobs_dev.local.launch import LaunchedStack, launched, project_copy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # run as a script or through runpy alike

from samples import EICAR, PARSING_JOBS, pdf, photo, video  # noqa: E402

MODES = {"quick": 60, "full": 2000}
# Pollers per SQS-triggered function: one in CI's quick run (its processes' start-up weighs most
# on 60 files), two in the full run, where every function's work races another's copy of it.
WORKERS = {"quick": 1, "full": 2}
TENANTS = ("acme", "globex")
LEASE_SECONDS = 20
SWEEP_EVERY_SECONDS = 2
VISIBILITY_SECONDS = 20
# A deleted file's outputs are purged again this long after the deletion, for an attempt that
# was running and wrote after it. The template's 360 s is past the longest worker timeout
# (300 s, the default lease too); scaled as the run scales the lease (20 s): 24 s, rounded up.
# Set through the local stack's --environment on the functions that send the purge.
PURGE_DELAY_SECONDS = 30
# Deletes of uploads: about one file in twenty, one every few seconds while jobs run; every
# third deletes the file's version for good, the others leave a delete marker.
DELETE_SHARE = 20
DELETE_EVERY_SECONDS = 3.0
VERSION_DELETE_EVERY = 3
# Kinds whose uploads may be deleted: not the EICAR files (the scan moves their version out of
# the bucket itself) nor the poisoned ones (their dead letters are another promise's to show).
DELETABLE = frozenset({"photo", "png", "text", "pdf", "video", "corrupt"})
# Share of the files of each kind, in the order they are dealt out.
MIX = (
    ("photo", 30),
    ("png", 10),
    ("text", 25),
    ("pdf", 12),
    ("video", 8),
    ("corrupt", 8),
    ("eicar", 5),
    ("poison", 2),
)
QUARANTINED = {job: ("cancelled",) for job in PARSING_JOBS}
# S3 notifications lost before the ingest queue; the reconciler runs at the sweep's pace
# (--schedule-seconds speeds up its 2-minute rate), ignores uploads younger than its grace, and
# looks back 2 x RECONCILE_LOOK_BACK_MINUTES + the grace (not 2 x 2 minutes: every run would
# look up twice as many files in the DynamoDB emulator for nothing). A 10 s grace announced 113
# uploads for 6 dropped notifications in a quick run: the ingest ran a minute behind, and each
# run announced again every upload still queued (harmless, idempotent, but load).
DROPPED_SHARE = 0.05
RECONCILE_GRACE_SECONDS = 60
# A run lists every upload (about 50 s for a full run's 2,000 on the emulator, under load), so
# the look-back must outlast a run and the grace with room: with 0.5 (a 2-minute window) a full
# run's reconciler runs took longer than the band they could check, and 23 dropped uploads fell
# between two runs, never checked.
RECONCILE_LOOK_BACK_MINUTES = 5
RECONCILER_OPTIONS = (
    "--parameter", "ReconcileEveryMinutes=2",
    "--parameter", f"ReconcileGraceSeconds={RECONCILE_GRACE_SECONDS}",
    "--environment", f"RECONCILE_EVERY_MINUTES={RECONCILE_LOOK_BACK_MINUTES}",
)  # fmt: skip


def fault_rules(seed: int, worker_functions: list[str]) -> list[dict[str, Any]]:
    duplicated = ["IngestRouterFunction", "IngestFunction", *worker_functions]
    return [
        {"kind": "transient", "probability": 0.2, "attempts": 1000, "seed": seed},
        {"kind": "crash", "probability": 0.05, "seed": seed},
        *(
            {"kind": "duplicate", "function": name, "probability": 0.1, "seed": seed}
            for name in duplicated
        ),
        {"kind": "throttle", "every": 20, "seconds": 2, "probability": 0.5},
        {"kind": "poison", "job_type": "compression", "key_contains": "poison"},
    ]


def dropped_notifications(seed: int) -> dict[str, Any]:
    """The drop rule, apart: a run that adds it must also run the reconciler at its pace
    (RECONCILER_OPTIONS), or its dropped uploads wait for the template's 15-minute schedule."""
    return {
        "kind": "drop",
        "function": "IngestRouterFunction",
        "probability": DROPPED_SHARE,
        "seed": seed,
    }


# --- the files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    extension: str
    make: Callable[[random.Random, int], bytes]
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    poisoned: frozenset[str] = frozenset()


def _png(rand: random.Random, number: int) -> bytes:
    image = Image.new("RGB", (320, 240), (rand.randrange(256), rand.randrange(256), number % 256))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _text(rand: random.Random, number: int) -> bytes:
    words = [rand.choice(("alpha", "beta", "gamma", "delta", "files", "jobs")) for _ in range(600)]
    return f"chaos file {number}\n{' '.join(words)}\n".encode()


class Corpus:
    """Real media, made once per variant (a video takes a while), dealt out as files."""

    def __init__(self, seed: int) -> None:
        self._photos = [photo(640, 480), photo(800, 600, orientation=6)]
        self._videos = [video(seconds=1, fps=5)]
        self._pdfs = [pdf(pages=1), pdf(pages=2)]
        self.kinds = {
            "photo": Kind("jpg", lambda r, n: r.choice(self._photos)),
            "png": Kind("png", _png),
            "text": Kind("txt", _text),
            "pdf": Kind("pdf", lambda r, n: r.choice(self._pdfs)),
            "video": Kind("mp4", lambda r, n: self._videos[0]),
            "corrupt": Kind(
                "jpg",
                lambda r, n: self._photos[0][: r.randrange(300, 2000)],
                expected={"thumbnail_generation": ("failed",)},
            ),
            "eicar": Kind(
                "com",
                lambda r, n: EICAR,
                # Hashing never waits for the scan: it completes, or finds the object moved.
                expected={**QUARANTINED, "deduplication_check": ("completed", "cancelled")},
            ),
            "poison": Kind(
                "txt", _text, expected={}, poisoned=frozenset({JobType.COMPRESSION.value})
            ),
        }
        self._rand = random.Random(seed)  # noqa: S311 (reproducible, not secret)

    def deal(self, count: int) -> list[tuple[str, str, bytes, Kind]]:
        """(key, kind name, body, kind) for `count` files, kinds in MIX's proportions."""
        weighted = [name for name, share in MIX for _ in range(share)]
        files = []
        for number in range(count):
            name = weighted[(number * 37) % len(weighted)]  # spread each kind through the run
            kind = self.kinds[name]
            tenant = TENANTS[number % len(TENANTS)]
            key = f"uploads/{tenant}/chaos/{number:05d}-{name}.{kind.extension}"
            files.append((key, name, kind.make(self._rand, number), kind))
        return files


# --- the run ----------------------------------------------------------------------------------


class EveryRound:
    """A harness thread that acts once every `every` seconds while the run goes on, until
    stopped or done; a round the stack was too busy to answer (`busy`) is noted in `errors`,
    as "<round> round: ...", and tried again the next round."""

    round: str
    busy: tuple[type[Exception], ...] = (OSError,)

    def __init__(self, every: float) -> None:
        self._every = every
        self.errors: list[str] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.round, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self.stop.wait(self._every) and not self.done():
            try:
                self.act()
            except self.busy as error:
                self.errors.append(f"{self.round} round: {error}")

    def done(self) -> bool:
        raise NotImplementedError

    def act(self) -> None:
        raise NotImplementedError


class Canceller(EveryRound):
    """Cancels a random running job every `every` seconds through the API, as a user would,
    until stopped or `budget` cancels have been made; keeps the ids the API cancelled."""

    round = "cancel"  # the router too busy to answer: an OSError

    def __init__(self, stack: LaunchedStack, budget: int, every: float, seed: int) -> None:
        super().__init__(every)
        self._stack, self._budget = stack, budget
        self._rand = random.Random(seed)  # noqa: S311 (reproducible, not secret)
        self.cancelled: set[str] = set()
        self.refused = 0  # the job finished first (409): a race the API must lose cleanly

    def done(self) -> bool:
        return len(self.cancelled) >= self._budget

    def act(self) -> None:
        status, page = self._stack.api("/jobs?status=running&limit=50")
        if status != 200 or not page.get("jobs"):
            return
        job = self._rand.choice(page["jobs"])
        status, body = self._stack.api(
            f"/jobs/{job['id']}/cancel", method="POST", body={"reason": "chaos: cancelled"}
        )
        if status == 200:
            self.cancelled.add(job["id"])
        elif status == 409:
            self.refused += 1
        else:
            self.errors.append(f"cancel {job['id']}: {status} {body}")


class Deleter(EveryRound):
    """Deletes the upload of a random running job's file every `every` seconds, as any S3
    client deletes (`DeleteObject`; every VERSION_DELETE_EVERY-th of that version), until
    stopped or `budget` uploads are deleted; keeps each deletion, when it was made."""

    round = "delete"
    # the router or the emulator too busy to answer
    busy = (OSError, BotoCoreError, ClientError)

    def __init__(
        self, stack: LaunchedStack, kinds: dict[str, str], budget: int, every: float, seed: int
    ) -> None:
        super().__init__(every)
        self._stack, self._kinds, self._budget = stack, kinds, budget
        self._rand = random.Random(seed)  # noqa: S311 (reproducible, not secret)
        self._started = time.monotonic()
        self.deletions: list[Deletion] = []
        self.last_at: float | None = None  # time.monotonic() of the last delete

    def done(self) -> bool:
        return len(self.deletions) >= self._budget

    def act(self) -> None:
        stored = self._running_file()
        if stored is None:
            return
        how = DeleteHow.MARKER
        if len(self.deletions) % VERSION_DELETE_EVERY == VERSION_DELETE_EVERY - 1:
            how = DeleteHow.VERSION
        version = stored.get("version_id")
        by_version = {"VersionId": version} if how is DeleteHow.VERSION and version else {}
        bucket = self._stack.config["uploads_bucket"]
        self._stack.client("s3").delete_object(Bucket=bucket, Key=stored["key"], **by_version)
        self.last_at = time.monotonic()
        self.deletions.append(
            Deletion(stored["key"], version, stored["id"], how, self.last_at - self._started)
        )

    def _running_file(self) -> dict[str, Any] | None:
        """A file not deleted yet, of a deletable kind, one of whose jobs is running."""
        status, page = self._stack.api("/jobs?status=running&limit=50")
        if status != 200:
            return None
        done = {deletion.file_id for deletion in self.deletions}
        file_ids = sorted({job["file_id"] for job in page.get("jobs", [])} - done)
        self._rand.shuffle(file_ids)
        for file_id in file_ids:
            status, stored = self._stack.api(f"/files/{file_id}")
            if status == 200 and self._kinds.get(stored["key"]) in DELETABLE:
                return dict(stored)
        return None


def wait_for_purges(stack: LaunchedStack, deleter: Deleter, uploads: int, seconds: float) -> float:
    """Seconds until the delayed purge of the last deletion had its turn: its delay after the
    deletion (a purge asked for later still is in its queue, which must then be empty too)."""
    if deleter.last_at is None:
        return 0.0
    started = time.monotonic()
    due_in = deleter.last_at + PURGE_DELAY_SECONDS - started
    if due_in <= 0:
        # Its turn came before the quiet just seen, which counted its queue's delayed messages.
        return 0.0
    time.sleep(due_in)
    wait_until_quiet(stack, uploads, seconds)
    return time.monotonic() - started


def upload(stack: LaunchedStack, files: list[tuple[str, str, bytes, Kind]]) -> list[Upload]:
    s3, bucket = stack.client("s3"), stack.config["uploads_bucket"]

    def put(entry: tuple[str, str, bytes, Kind]) -> Upload:
        key, name, body, kind = entry
        answer = s3.put_object(Bucket=bucket, Key=key, Body=body)
        return Upload(key, answer.get("VersionId"), name, kind.expected, kind.poisoned)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(put, files))


def queue_depths(stack: LaunchedStack) -> dict[str, int]:
    """Messages in each queue of the stack: visible, in flight and delayed."""
    sqs, depths = stack.client("sqs"), {}
    for logical_id, attributes in stack.config["resources"]["attributes"].items():
        if "QueueUrl" not in attributes:
            continue
        counts = sqs.get_queue_attributes(
            QueueUrl=attributes["QueueUrl"],
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        depths[logical_id] = sum(int(n) for n in counts.values())
    return depths


# Seconds between looks at the queues (cheap: the stack process answers them, not the DynamoDB
# emulator; every second look would add to the run's end), and at most between counts of the
# tables (each a scan of every item: under load the emulator's time, so made when the queues are
# empty or this long since the last).
QUIET_LOOK_SECONDS = 2
# For the last completions' `File Processed` events to reach the run's queue before it is drained.
EVENTS_SETTLE_SECONDS = 5
COUNT_EVERY_SECONDS = 30


def wait_until_quiet(stack: LaunchedStack, uploads: int, seconds: float) -> float:
    """Seconds until every upload is recorded, every job terminal and every queue empty
    (dead-letter queues aside: what is left there is the audit's to judge)."""
    started, deadline = time.monotonic(), time.monotonic() + seconds
    counted = 0.0
    while time.monotonic() < deadline:
        time.sleep(QUIET_LOOK_SECONDS)
        busy = {
            queue: n for queue, n in queue_depths(stack).items() if n and "DeadLetter" not in queue
        }
        if busy and time.monotonic() - counted < COUNT_EVERY_SECONDS:
            continue
        counted = time.monotonic()
        progress = stack.progress()
        # Which queues hold the last few messages: what a long tail is waiting for.
        where = f" ({', '.join(sorted(busy))})" if 0 < len(busy) <= 3 else ""
        print(
            f"  {time.monotonic() - started:6.0f} s: {progress.files}/{uploads} files,"
            f" {progress.jobs} jobs, {progress.active} active,"
            f" {sum(busy.values())} messages queued{where}",
            flush=True,
        )
        if progress.files >= uploads and progress.jobs and not progress.active and not busy:
            return time.monotonic() - started
    raise TimeoutError(f"the system was not quiet after {seconds:.0f} s")


def watch_file_processed(stack: LaunchedStack) -> str:
    """A queue that receives every `File Processed` event published on the stack's bus (a rule
    made for the run, as a subscriber would make one); its URL."""
    sqs, events = stack.client("sqs"), stack.client("events")
    bus = stack.config["resources"]["refs"]["JobEventsBus"]
    queue = sqs.create_queue(QueueName="chaos-file-processed")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    pattern = {"source": ["filejobs"], "detail-type": ["File Processed"]}
    events.put_rule(Name="chaos-file-processed", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(
        Rule="chaos-file-processed",
        EventBusName=bus,
        Targets=[{"Id": "audit", "Arn": arn["Attributes"]["QueueArn"]}],
    )
    return str(queue)


def wait_until_processed(stack: LaunchedStack, seconds: float) -> float:
    """Seconds until every file given jobs has a recorded completion (the events function reads
    the jobs' last ends from the stream after the queues are quiet), then a few more for the
    completions' own stream records to be published."""
    started, deadline = time.monotonic(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        items = stack.scan(stack.config["files_table"])
        open_files = [
            item["id"]["S"]
            for item in items
            if "job_ids" in item and "processed_fingerprint" not in item
        ]
        if not open_files:
            time.sleep(EVENTS_SETTLE_SECONDS)
            return time.monotonic() - started
        time.sleep(1)
    raise TimeoutError(f"files still not processed after {seconds:.0f} s")


def drain(stack: LaunchedStack, queue: str) -> list[dict[str, Any]]:
    """Every message left in `queue`: (file id, event id, fingerprint) of each event."""
    sqs = stack.client("sqs")
    received: list[dict[str, Any]] = []
    empty_looks = 0
    while empty_looks < 2:
        messages = sqs.receive_message(
            QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", [])
        empty_looks = 0 if messages else empty_looks + 1
        for message in messages:
            detail = json.loads(message["Body"])["detail"]
            received.append(
                {
                    "file_id": detail["id"],
                    "event_id": detail["event_id"],
                    "fingerprint": detail["processed"]["fingerprint"],
                }
            )
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return received


def read_stream(stack: LaunchedStack) -> list[StreamRecord]:
    """The job table's stream from its first record: every write, in order."""
    streams = stack.client("dynamodbstreams")
    arn = stack.config["resources"]["attributes"]["JobsTable"]["StreamArn"]
    records: list[StreamRecord] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(_stream_record(r) for r in page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


def _stream_record(record: dict[str, Any]) -> StreamRecord:
    change = record["dynamodb"]

    def status(image: str) -> str | None:
        value = change.get(image, {}).get("status", {}).get("S")
        return str(value) if value is not None else None

    return StreamRecord(
        record["eventName"], change["Keys"]["id"]["S"], status("OldImage"), status("NewImage")
    )


def derived_outputs(stack: LaunchedStack) -> list[str]:
    """Every key under derived/ in the outputs bucket."""
    pages = (
        stack.client("s3")
        .get_paginator("list_objects_v2")
        .paginate(Bucket=stack.config["outputs_bucket"], Prefix="derived/")
    )
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def collect(
    stack: LaunchedStack,
    uploads: list[Upload],
    fault_log: Path,
    cancelled: set[str],
    processed_events: list[dict[str, Any]],
    *,
    deletions: list[Deletion] | None = None,
) -> dict[str, Any]:
    """Everything the audit reads, as plain JSON: kept beside the log, so a finished run can be
    audited again (`--audit FILE`) without running it again."""
    return {
        "uploads": [
            {**asdict(u), "expected": dict(u.expected), "poisoned": sorted(u.poisoned)}
            for u in uploads
        ],
        "files": stack.scan(stack.config["files_table"]),
        "jobs": stack.scan(stack.config["table_name"]),
        "stream": [asdict(record) for record in read_stream(stack)],
        "injections": [json.loads(line) for line in fault_log.read_text().splitlines() if line],
        "cancelled": sorted(cancelled),
        "processed_events": processed_events,
        "dead_letters_left": {
            queue: n for queue, n in queue_depths(stack).items() if "DeadLetter" in queue
        },
        "deletions": [asdict(deletion) for deletion in deletions or []],
        "outputs": derived_outputs(stack),
    }


def evidence_of(raw: dict[str, Any]) -> Evidence:
    return Evidence(
        uploads=[
            Upload(
                u["key"],
                u["version_id"],
                u["kind"],
                {job: tuple(statuses) for job, statuses in u["expected"].items()},
                frozenset(u["poisoned"]),
            )
            for u in raw["uploads"]
        ],
        files=[
            file_from_model(FileModel.from_raw_data(item))
            for item in raw["files"]
            # a file's id is a UUID; the content index, the tenants' quotas and their daily
            # usage share the table under ids with a "#" (sha256#, quota#, usage#)
            if "#" not in item["id"]["S"]
        ],
        jobs=[job_from_model(JobModel.from_raw_data(item)) for item in raw["jobs"]],
        stream=[StreamRecord(**record) for record in raw["stream"]],
        injections=raw["injections"],
        cancelled=set(raw["cancelled"]),
        dead_letters_left=raw["dead_letters_left"],
        processed_events=[ProcessedEvent(**event) for event in raw["processed_events"]],
        # absent from the evidence of runs before deletes were made
        deletions=[
            Deletion(**{**deletion, "how": DeleteHow(deletion["how"])})
            for deletion in raw.get("deletions", [])
        ],
        outputs=raw.get("outputs", []),
    )


def run(arguments: argparse.Namespace, scratch: Path) -> tuple[Report, dict[str, float]]:
    root = project_copy(ROOT, scratch)
    workers = [
        name
        for name, spec in function_definitions(load_template(root / "template.yaml")).items()
        if name.endswith("Worker") and any(kind == "SQS" for kind, _ in spec.events)
    ]
    faults, fault_log = scratch / "faults.json", scratch / "faults.log"
    rules = [*fault_rules(arguments.seed, workers), dropped_notifications(arguments.seed)]
    faults.write_text(json.dumps(rules))
    fault_log.touch()
    count = arguments.files or MODES[arguments.mode]
    print(f"chaos ({arguments.mode}): making {count} files", flush=True)
    files = Corpus(arguments.seed).deal(count)
    log_path = ROOT / ".filejobs" / f"chaos-{arguments.mode}.log"
    log_path.parent.mkdir(exist_ok=True)
    options = [
        "--workers", str(arguments.workers or WORKERS[arguments.mode]),
        "--faults", str(faults),
        "--fault-log", str(fault_log),
        "--parameter", f"JobLeaseSeconds={LEASE_SECONDS}",
        *RECONCILER_OPTIONS,
        "--environment", f"OUTPUTS_PURGE_DELAY_SECONDS={PURGE_DELAY_SECONDS}",
        "--schedule-seconds", str(SWEEP_EVERY_SECONDS),
        "--function-workers", "SweepFunction=2",
        "--visibility-seconds", str(VISIBILITY_SECONDS),
    ]  # fmt: skip
    with log_path.open("wb") as log, launched(root, *options, output=log) as stack:
        print(f"chaos: stack up (log: {log_path}); uploading", flush=True)
        file_processed = watch_file_processed(stack)
        budget = max(3, count // 25)
        kinds = {key: name for key, name, _, _ in files}
        deletes = max(2, count // DELETE_SHARE)
        with (
            Canceller(stack, budget, every=2.0, seed=arguments.seed) as canceller,
            Deleter(stack, kinds, deletes, DELETE_EVERY_SECONDS, arguments.seed + 1) as deleter,
        ):
            started = time.monotonic()
            uploads = upload(stack, files)
            uploaded = time.monotonic() - started
            quiet = wait_until_quiet(stack, len(uploads), arguments.timeout)
        purged = wait_for_purges(stack, deleter, len(uploads), arguments.timeout)
        processed = wait_until_processed(stack, arguments.timeout)
        events = drain(stack, file_processed)
        raw = collect(
            stack, uploads, fault_log, canceller.cancelled, events, deletions=deleter.deletions
        )
        timings = {
            "upload s": uploaded,
            "quiescence s": quiet,
            "last delete s": (deleter.last_at or started) - started,
            "waited for the last purge s": purged,
            "last completion recorded s": processed,
            "cancels refused (job already finished)": canceller.refused,
            "emulator peak MB": stack.peak_memory_mb(),
        }
    raw["timings"], raw["cancel_errors"] = timings, canceller.errors
    raw["delete_errors"] = deleter.errors
    evidence_path = log_path.with_name(f"chaos-{arguments.mode}-evidence.json")
    evidence_path.write_text(json.dumps(raw))
    print(f"chaos: evidence kept in {evidence_path}", flush=True)
    return audited(raw), timings


def audited(raw: dict[str, Any]) -> Report:
    report = audit(evidence_of(raw))
    report.check("cancel errors", raw["cancel_errors"])
    report.check("delete errors", raw.get("delete_errors", []))
    return report


def print_report(report: Report, timings: dict[str, float]) -> None:
    width = max(len(name) for name in [*report.figures, *timings])
    for name, value in [*report.figures.items(), *timings.items()]:
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        print(f"  {name:<{width}}  {shown:>10}")
    print(f"violations: {len(report.violations)}")
    for violation in report.violations:
        print(f"  - {violation}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--files", type=int, help="instead of the mode's count")
    parser.add_argument("--workers", type=int, help="pollers per SQS function (quick: 1, full: 2)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to quiescence")
    parser.add_argument("--audit", type=Path, help="audit a finished run's evidence file again")
    arguments = parser.parse_args()
    if arguments.audit:
        raw = json.loads(arguments.audit.read_text())
        report = audited(raw)
        print_report(report, raw["timings"])
        return 1 if report.violations else 0
    with tempfile.TemporaryDirectory(prefix="filejobs-chaos-") as scratch:
        report, timings = run(arguments, Path(scratch))
    print_report(report, timings)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
