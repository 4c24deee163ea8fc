"""Decoders run without credentials: what an exploited parser can and cannot do.

Each hostile decoder (tests/hostile_decoders.py) runs through the worker, in the real sandbox,
on a job of the in-memory store. Every attempt to reach the credentials, call AWS or break a
limit ends the same way: the job fails at once, permanently, with a reason a person can read,
and nothing stolen reaches its result.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from filejobs.domain.job import JobStatus, JobType, ProcessingJob
from filejobs.domain.messages import JobMessage
from filejobs.processors import document, thumbnail, video
from filejobs.processors.base import StopRequested, Work
from filejobs.processors.sandbox import privileges
from filejobs.processors.sandbox.client import Sandbox
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Task
from filejobs.processors.scan.engines import Verdict, YaraScanner
from filejobs.processors.scan.isolated import SandboxedYara
from filejobs.services.worker import Disposition, WorkerService
from tests import hostile_decoders as hostile
from tests.conftest import FakeClock
from tests.factories import pending_job
from tests.fakes import InMemoryJobStore, RecordingDispatcher, TempWorkspaces, stored

ROOT = Path(__file__).resolve().parents[2]
CANARY = "canary-secret-that-must-never-leave-the-worker"
LIMITS = DecoderLimits(
    memory_bytes=1024 * MiB,
    cpu_seconds=2,
    open_files=64,
    file_bytes=4 * MiB,
    reply_bytes=2 * MiB,
    wall_seconds=20,
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """A sandbox started by a worker that holds credentials, as a Lambda function does."""
    saved = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ["AWS_ACCESS_KEY_ID"] = "AKIACANARY"
    os.environ["AWS_SECRET_ACCESS_KEY"] = CANARY
    sandbox = Sandbox([hostile.__name__])
    try:
        yield sandbox
    finally:
        sandbox.close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class SandboxedDecoder:
    """A processor as the real ones are: the worker writes the file, the sandbox decodes it."""

    def __init__(self, sandbox: Sandbox, task: Task, limits: DecoderLimits = LIMITS) -> None:
        self.sandbox, self.task, self.limits = sandbox, task, limits

    def __call__(self, work: Work) -> dict[str, Any]:
        upload = work.workspace / "upload"
        upload.write_bytes(b"\x89PNG\r\n\x1a\n a hostile file")
        decoded = self.sandbox.decode(
            self.task,
            upload,
            limits=self.limits,
            should_stop=work.should_stop,
            output_allowed="thumb.webp".__eq__,
        )
        return {**decoded.result, "outputs": {k: len(v) for k, v in decoded.outputs.items()}}


def run_job(sandbox: Sandbox, task: Task, tmp_path: Path, clock: FakeClock) -> ProcessingJob:
    jobs = InMemoryJobStore()
    job = pending_job(clock(), JobType.THUMBNAIL_GENERATION)
    assert jobs.create(job)
    service = WorkerService(
        jobs,
        RecordingDispatcher(),
        SandboxedDecoder(sandbox, task),
        JobType.THUMBNAIL_GENERATION,
        lease=timedelta(minutes=5),
        retention=timedelta(days=1),
        worker_id="test-worker",
        scratch=TempWorkspaces(tmp_path),
        clock=clock,
    )
    outcome = service.handle(JobMessage.for_job(job))
    assert outcome.disposition is Disposition.FAILED, outcome
    return stored(jobs, job)


@pytest.mark.parametrize(
    ("task", "reason"),
    [
        (hostile.read_environment_credentials, "KeyError: 'AWS_SECRET_ACCESS_KEY'"),
        (hostile.read_worker_environ, "PermissionError: [Errno 13] Permission denied"),
        (hostile.read_worker_memory, "PermissionError: [Errno 13] Permission denied"),
        (hostile.call_aws, "NoCredentialsError: Unable to locate credentials"),
        (hostile.exhaust_memory, "ran out of its 1024 MiB memory limit"),
        (hostile.spin, "used up its 2 s CPU time limit on this file"),
        (hostile.open_many_files, "tried to open more than its 64 files"),
        (hostile.write_big_file, "tried to write more than its 4 MiB limit"),
        (hostile.answer_too_much, "output is over its 2 MiB limit"),
        (hostile.write_another_name, "an output it may not write: '../../uploads/other-tenant"),
        (hostile.crash, "the decoder crashed on this file (SIGSEGV)"),
    ],
    ids=lambda value: getattr(value, "__name__", "reason"),
)
def test_an_escape_attempt_fails_the_job_permanently_with_a_readable_reason(
    sandbox: Sandbox, task: Task, reason: str, tmp_path: Path, clock: FakeClock
) -> None:
    failed = run_job(sandbox, task, tmp_path, clock)

    assert failed.status is JobStatus.FAILED
    assert failed.retry_count == 0  # permanent: no retry spent on it
    assert reason in (failed.error_message or "")
    assert CANARY not in repr(failed)
    assert failed.result_data is None


def test_a_decoder_that_blocks_is_killed_at_its_wall_time_limit(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    upload = tmp_path / "upload"
    upload.write_bytes(b"x")
    limits = DecoderLimits(wall_seconds=1)

    started = time.monotonic()
    with pytest.raises(Exception, match=r"took longer than its 1 s time limit on this file"):
        sandbox.decode(hostile.sleep, upload, limits=limits)

    assert time.monotonic() - started < 10


def test_a_job_stopped_while_decoding_kills_the_decoder_and_stops(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    upload = tmp_path / "upload"
    upload.write_bytes(b"x")
    asked = time.monotonic() + 0.5

    with pytest.raises(StopRequested):
        sandbox.decode(hostile.sleep, upload, should_stop=lambda: time.monotonic() > asked)

    # The sandbox is ready for the next job at once.
    assert sandbox.decode(hostile.echo, upload, output_allowed="thumb.webp".__eq__).outputs


def test_a_process_the_decoder_leaves_behind_is_killed_with_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    upload = tmp_path / "upload"
    upload.write_bytes(b"x")

    left = int(sandbox.decode(hostile.leave_a_process_behind, upload).result["left"])

    deadline = time.monotonic() + 5
    while _alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(left)


def test_a_well_behaved_decoder_sees_no_credentials_and_no_capabilities(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    upload = tmp_path / "upload"
    upload.write_bytes(b"abc")

    decoded = sandbox.decode(hostile.echo, upload, output_allowed="thumb.webp".__eq__)

    assert decoded.outputs == {"thumb.webp": b"cba"}
    assert decoded.result["capabilities"] == "0000000000000000"
    assert not [
        name
        for name in decoded.result["environment"]
        if name.startswith("AWS_") and ("KEY" in name or "TOKEN" in name)
    ]
    assert not privileges.is_dumpable()  # the worker: its /proc files are closed to others


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_the_zygote_is_warm_single_threaded_and_closed_before_its_first_job() -> None:
    sandbox = Sandbox([thumbnail.__name__, video.__name__, document.__name__])
    try:
        state = sandbox.zygote_state()
    finally:
        sandbox.close()

    # One thread: a fork copies only the calling thread, and a lock another thread held would
    # stay locked in every job's process. Each decoder module's warm_up ran a real decode.
    assert state["threads"] == 1
    assert state["dumpable"] is False


EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


def test_yara_runs_sandboxed_and_still_finds_eicar_inside_a_zip(tmp_path: Path) -> None:
    upload = tmp_path / "upload.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        archive.writestr("docs/readme.com", EICAR)
    engine = SandboxedYara(YaraScanner.with_rules_in())

    result = engine.scan(upload)

    assert (result.infected, result.signatures, result.scanned_files) == (
        True,
        ["EICAR_Test_File"],
        2,
    )


def test_a_yara_scan_over_its_sandbox_limits_is_an_error_never_clean(tmp_path: Path) -> None:
    # A file larger than the scan's address space limit: YARA cannot map it.
    upload = tmp_path / "upload.bin"
    with upload.open("wb") as sparse:
        sparse.truncate(1024 * MiB)
    limits = DecoderLimits(memory_bytes=512 * MiB)

    result = SandboxedYara(YaraScanner.with_rules_in(), limits=limits).scan(upload)

    assert result.verdict is Verdict.ERROR
    assert not result.infected
    assert "could not map file" in " ".join(result.errors)


def test_a_scan_cannot_alter_the_rules_later_scans_use(sandbox: Sandbox, tmp_path: Path) -> None:
    upload = tmp_path / "upload"
    upload.write_bytes(b"x")
    rules = YaraScanner.with_rules_in().sealed_rules()
    try:
        decoded = sandbox.decode(hostile.rewrite_attached_rules, upload, attachments=(rules,))
        with pytest.raises(PermissionError):  # sealed for the worker too
            os.write(rules, b"x")
    finally:
        os.close(rules)

    assert decoded.result["refused"] == ["PermissionError", "PermissionError", "PermissionError"]


def test_a_worker_is_non_dumpable_from_its_import_on() -> None:
    # In a process of its own: the flag, once cleared, stays cleared for the process's life.
    probe = (
        "from filejobs.processors.sandbox import privileges\n"
        "before = privileges.is_dumpable()\n"
        "import functions.worker.app\n"
        "print(before, privileges.is_dumpable())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )

    assert ran.stdout.split() == ["True", "False"]


@pytest.mark.parametrize(("initialisation", "running"), [("on-demand", "True"), (None, "False")])
def test_on_lambda_a_worker_starts_its_decoder_sandbox_while_it_initialises(
    initialisation: str | None, running: str
) -> None:
    # given a thumbnail worker's environment, in a process of its own, as Lambda makes it (which
    # sets AWS_LAMBDA_INITIALIZATION_TYPE) or as a test or the local stack does
    environment = {
        **os.environ,
        "JOB_TYPE": "thumbnail_generation",
        "JOBS_TABLE_NAME": "jobs",
        "FILES_TABLE_NAME": "files",
        "OUTPUTS_BUCKET": "outputs",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    environment.pop("AWS_LAMBDA_INITIALIZATION_TYPE", None)
    if initialisation is not None:
        environment["AWS_LAMBDA_INITIALIZATION_TYPE"] = initialisation
    probe = (
        "import functions.worker.app\n"
        "from filejobs.processors.sandbox.client import shared_sandbox\n"
        "print(shared_sandbox('filejobs.processors.thumbnail').running)\n"
    )
    # when its handler's module is imported (Lambda's init), then on Lambda its decoders' zygote
    # is already running, before any job; elsewhere the first job starts it
    ran = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=environment,
    )
    assert ran.stdout.splitlines()[-1] == running  # after the worker's own log lines


def test_a_yara_scan_stopped_by_a_sandbox_limit_is_a_refusal_never_clean(tmp_path: Path) -> None:
    upload = tmp_path / "upload.txt"
    upload.write_bytes(EICAR)
    limits = DecoderLimits(open_files=3)  # its own streams: no room for the file it must scan

    result = SandboxedYara(YaraScanner.with_rules_in(), limits=limits).scan(upload)

    assert result.verdict is Verdict.ERROR
    assert result.refusals == ["the decoder tried to open more than its 3 files"]


def test_a_link_planted_where_the_upload_should_be_is_refused_and_the_sandbox_carries_on(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "worker-secret"
    elsewhere.write_bytes(CANARY.encode())
    planted = tmp_path / "upload"
    planted.symlink_to(elsewhere)

    with pytest.raises(OSError, match="Too many levels of symbolic links") as refused:
        sandbox.decode(hostile.echo, planted, output_allowed="thumb.webp".__eq__)

    assert refused.value.errno == errno.ELOOP
    real = tmp_path / "real-upload"
    real.write_bytes(b"ok")
    assert sandbox.decode(hostile.echo, real, output_allowed="thumb.webp".__eq__).outputs
