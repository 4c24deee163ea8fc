"""A compromised decoder reaches nothing (issue 45): no network, no process after its job, no file
but its own, and a sandbox recycled after any crash, limit breach or timeout.

Each hostile decoder (tests/hostile_decoders.py) runs in the real sandbox, as an exploited
parser would, and tries one attack; what it aimed at is then checked from outside: the listener
got no connection, no daemon runs, the other job's file, the definitions directory and the
LibreOffice tree are as they were.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from filejobs.adapters.workspace import Scratch, private_root
from filejobs.domain.retry import PermanentError
from filejobs.processors.sandbox import landlock, recycling
from filejobs.processors.sandbox.client import Sandbox
from filejobs.processors.sandbox.limits import DecoderLimits, MiB
from filejobs.processors.sandbox.task import Task
from tests import hostile_decoders as hostile

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the sandbox forks (Linux)")

DENIED = r"PermissionError: \[Errno 13\] Permission denied"
LANDLOCK = landlock.abi()
needs_landlock = pytest.mark.skipif(LANDLOCK < 1, reason="this kernel has no Landlock")
RUNTIME_API = ("127.0.0.1", 9001)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    sandbox = Sandbox([hostile.__name__])
    try:
        yield sandbox
    finally:
        sandbox.close()


@pytest.fixture
def upload(tmp_path: Path) -> Path:
    path = tmp_path / "upload"
    path.write_bytes(b"\x89PNG\r\n\x1a\n a hostile file")
    return path


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP server on 127.0.0.1 standing for anywhere data could be sent."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.5)
        yield server


def decode(sandbox: Sandbox, task: Task, upload: Path, **options: Any) -> dict[str, Any]:
    return sandbox.decode(task, upload, options=options).result


# --- no socket but Unix ones -------------------------------------------------------------------


def test_a_decoder_cannot_connect_to_a_listener_on_the_loopback(
    sandbox: Sandbox, upload: Path, listener: socket.socket
) -> None:
    host, port = listener.getsockname()

    with pytest.raises(PermanentError, match=DENIED):
        decode(sandbox, hostile.connect_out, upload, host=host, port=port)

    with pytest.raises(TimeoutError):
        listener.accept()  # nothing ever came


def test_a_decoder_cannot_reach_the_lambda_runtime_api(sandbox: Sandbox, upload: Path) -> None:
    # Refused before any packet leaves (EACCES), not turned away by whoever listens on 9001.
    with _listening_if_free(RUNTIME_API) as runtime_api:
        with pytest.raises(PermanentError, match=DENIED):
            decode(sandbox, hostile.connect_out, upload, host=RUNTIME_API[0], port=RUNTIME_API[1])

        if runtime_api is not None:
            with pytest.raises(TimeoutError):
                runtime_api.accept()


@contextlib.contextmanager
def _listening_if_free(address: tuple[str, int]) -> Iterator[socket.socket | None]:
    try:
        server = socket.create_server(address)
    except OSError:  # another process of this machine has it: the refusal is checked anyway
        yield None
        return
    with server:
        server.settimeout(0.5)
        yield server


@pytest.mark.parametrize("task", [hostile.send_datagram, hostile.listen], ids=lambda t: t.__name__)
def test_a_decoder_can_neither_send_a_datagram_nor_listen(
    sandbox: Sandbox, upload: Path, task: Task
) -> None:
    with pytest.raises(PermanentError, match=DENIED):
        decode(sandbox, task, upload, host="127.0.0.1", port=9)


def test_a_decoder_cannot_set_up_io_uring_which_would_open_sockets_unseen(
    sandbox: Sandbox, upload: Path
) -> None:
    with pytest.raises(PermanentError, match=r"Error: \[Errno 1\] Operation not permitted"):
        decode(sandbox, hostile.set_up_io_uring, upload)


def test_a_decoder_still_talks_to_its_own_helper_over_a_unix_socketpair(
    sandbox: Sandbox, upload: Path
) -> None:
    assert decode(sandbox, hostile.use_a_unix_socketpair, upload) == {"heard": "ping"}


# --- no process outlives its job ---------------------------------------------------------------


def test_a_double_forked_setsid_daemon_is_gone_when_the_job_ends(
    sandbox: Sandbox, upload: Path
) -> None:
    daemon = int(decode(sandbox, hostile.daemonize, upload)["daemon"])

    # At once: the zygote ends it before it answers, so it never meets the next job.
    assert not _running(daemon)


def test_a_daemon_that_keeps_forking_while_it_is_killed_is_gone_too(
    sandbox: Sandbox, upload: Path
) -> None:
    decode(sandbox, hostile.daemonize, upload, walk=True, name="hostile-walker")

    # It forks every 5 ms and its parent exits: looked for over 100 ms, it would be seen.
    seen = []
    for _ in range(20):
        seen += _named("hostile-walker")
        time.sleep(0.005)
    assert seen == []


def _running(pid: int) -> bool:
    """Running (or stopped), not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
    return [pid for pid in found if _running(pid)]


# --- a private directory per job, and nothing written (or read) elsewhere ----------------------


def test_each_job_works_in_a_fresh_private_directory_removed_after_it(
    sandbox: Sandbox, upload: Path
) -> None:
    first = decode(sandbox, hostile.describe_its_directory, upload)
    second = decode(sandbox, hostile.describe_its_directory, upload)

    here = Path(first["cwd"])
    assert first["tmpdir"] == first["home"] == first["gettempdir"] == str(here)
    assert first["mode"] == "0o700"
    assert Path(first["scratch"]).parent == here  # tempfile writes there
    assert second["cwd"] != first["cwd"]
    assert not here.exists()  # removed, with what the decoder wrote in it


@needs_landlock
def test_a_decoder_can_neither_read_nor_overwrite_another_jobs_download(
    sandbox: Sandbox, upload: Path, tmp_path: Path
) -> None:
    # given another job's download in the worker's workspace, as the worker lays it out
    scratch = Scratch()
    with scratch.for_job("another-tenants-job") as workspace:
        theirs = workspace / "upload"
        theirs.write_text("another tenant's file")

        with pytest.raises(PermanentError, match=DENIED):
            decode(sandbox, hostile.read_from, upload, path=str(theirs))
        with pytest.raises(PermanentError, match=DENIED):
            decode(sandbox, hostile.write_to, upload, path=str(theirs))

        assert theirs.read_text() == "another tenant's file"


@needs_landlock
def test_a_decoder_cannot_read_a_file_another_decoding_job_left_in_its_directory(
    sandbox: Sandbox, upload: Path
) -> None:
    # The sandbox's own root is hidden like the worker's: a job's directory is its alone.
    root = private_root("sandbox")
    try:
        left = root / "job-other" / "page.png"
        left.parent.mkdir()
        left.write_text("another job's page")

        with pytest.raises(PermanentError, match=DENIED):
            decode(sandbox, hostile.read_from, upload, path=str(left))
    finally:
        for path in sorted(root.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        root.rmdir()


@needs_landlock
@pytest.mark.parametrize(
    "target",
    [
        "definitions/allow-everything.ign2",  # a new file clamd would load
        "definitions/main.cvd",  # rewriting one it already loads
        "filejobs-libreoffice-0123/program/libmergedlo.so",  # the unpacked tree, run by soffice
        "filejobs-libreoffice-0123/program/planted.so",
    ],
)
def test_a_decoder_cannot_write_outside_its_directory(
    sandbox: Sandbox, upload: Path, tmp_path: Path, target: str
) -> None:
    for existing in ("definitions/main.cvd", "filejobs-libreoffice-0123/program/libmergedlo.so"):
        (tmp_path / existing).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / existing).write_text("as shipped")

    with pytest.raises(PermanentError, match=DENIED):
        decode(sandbox, hostile.write_to, upload, path=str(tmp_path / target))

    assert not (tmp_path / "definitions/allow-everything.ign2").exists()
    assert not (tmp_path / "filejobs-libreoffice-0123/program/planted.so").exists()
    assert (tmp_path / "definitions/main.cvd").read_text() == "as shipped"
    assert (tmp_path / "filejobs-libreoffice-0123/program/libmergedlo.so").read_text() == (
        "as shipped"
    )


@needs_landlock
def test_a_decoder_still_reads_what_decoders_need(sandbox: Sandbox, upload: Path) -> None:
    # Libraries, fonts and the LibreOffice tree are read by path: reading stays open there.
    python = Path(os.__file__)
    assert decode(sandbox, hostile.read_from, upload, path=str(python))["stolen"]


@needs_landlock
def test_a_tree_unpacked_in_tmp_after_the_zygote_started_is_readable_by_the_next_job(
    sandbox: Sandbox, upload: Path
) -> None:
    # As the LibreOffice tree is, by the worker, on the first office job of an environment;
    # and again, under the same name, when its check finds it altered.
    decode(sandbox, hostile.use_a_unix_socketpair, upload)  # rules made before the tree
    tree = Path(tempfile.gettempdir()) / f"filejobs-libreoffice-{uuid.uuid4().hex[:12]}"
    try:
        for version in ("first", "unpacked again"):
            shutil.rmtree(tree, ignore_errors=True)
            (tree / "program").mkdir(parents=True)
            (tree / "program" / "soffice").write_text(version)

            assert (
                decode(sandbox, hostile.read_from, upload, path=str(tree / "program/soffice"))[
                    "stolen"
                ]
                == version
            )
            with pytest.raises(PermanentError, match=DENIED):
                decode(sandbox, hostile.write_to, upload, path=str(tree / "program/soffice"))
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def test_a_unix_socket_a_job_leaves_in_the_shared_temporary_directory_is_removed_after_it(
    sandbox: Sandbox, upload: Path
) -> None:
    # LibreOffice binds its pipe in /tmp whatever TMPDIR says, and cannot remove it there.
    node = Path(tempfile.gettempdir()) / f"OSL_PIPE_test_{uuid.uuid4().hex}"

    decode(sandbox, hostile.leave_a_socket_in_tmp, upload, path=str(node))

    assert not node.exists()


def test_a_live_unix_socket_of_another_process_in_tmp_is_left_alone(
    sandbox: Sandbox, upload: Path
) -> None:
    # The local stack's workers share /tmp: one's job ending must not unlink another's pipe.
    node = Path(tempfile.gettempdir()) / f"OSL_PIPE_test_{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as theirs:
        theirs.bind(str(node))
        theirs.listen()
        try:
            decode(sandbox, hostile.use_a_unix_socketpair, upload)

            assert node.exists()
        finally:
            node.unlink()


@pytest.mark.parametrize("target", ["worker", "zygote", "worker's group", "every process"])
def test_a_decoder_cannot_signal_the_worker_or_its_zygote(
    sandbox: Sandbox, upload: Path, target: str
) -> None:
    # Refused by the socket filter's signal rules (any kernel), and by Landlock on Linux 6.12+.
    with pytest.raises(PermanentError, match=r"PermissionError: \[Errno 1\]"):
        decode(sandbox, hostile.send_a_signal, upload, target=target)


# --- recycled after a crash, a limit breach or a timeout ----------------------------------------


@pytest.mark.parametrize(
    ("task", "limits", "reason"),
    [
        (hostile.write_then_crash, DecoderLimits(), "crash"),
        (hostile.exhaust_memory, DecoderLimits(memory_bytes=1024 * MiB), "limit breach"),
        (hostile.write_big_file, DecoderLimits(file_bytes=4 * MiB), "limit breach"),
        (hostile.sleep, DecoderLimits(wall_seconds=1), "timeout"),
    ],
    ids=["crash", "memory", "file size", "timeout"],
)
def test_a_crash_a_limit_breach_or_a_timeout_recycles_the_sandbox(
    upload: Path, task: Task, limits: DecoderLimits, reason: str
) -> None:
    heard: list[str] = []
    recycling.on_recycle(heard.append)
    sandbox = Sandbox([hostile.__name__])
    try:
        before = sandbox.zygote_state()
        generation = recycling.generation()

        with pytest.raises(PermanentError):
            sandbox.decode(task, upload, limits=limits)

        # the zygote is replaced, its scratch root gone with whatever the job left in it, and
        # the worker told (to check again what a taken-over process might have altered)
        assert not Path(before["root"]).exists()
        assert heard[-1] == reason
        assert recycling.generation() == generation + 1
        after = sandbox.zygote_state()
        assert after["ready"] != before["ready"]
        assert sandbox.decode(hostile.echo, upload, output_allowed=lambda _n: True).outputs
    finally:
        sandbox.close()


def test_a_decoder_that_refuses_a_file_politely_keeps_its_zygote(upload: Path) -> None:
    sandbox = Sandbox([hostile.__name__])
    try:
        before = sandbox.zygote_state()
        generation = recycling.generation()

        with pytest.raises(PermanentError, match="not a file this decoder reads"):
            sandbox.decode(hostile.fail_politely, upload)

        assert sandbox.zygote_state()["ready"] == before["ready"]
        assert recycling.generation() == generation
    finally:
        sandbox.close()


def test_a_closed_sandbox_leaves_no_scratch_root(upload: Path) -> None:
    sandbox = Sandbox([hostile.__name__])
    root = Path(sandbox.zygote_state()["root"])
    assert root.is_dir()
    assert oct(root.stat().st_mode & 0o777) == "0o700"

    sandbox.close()

    assert not root.exists()


def test_the_zygote_says_how_it_confines_its_jobs() -> None:
    sandbox = Sandbox([hostile.__name__])
    try:
        state = sandbox.zygote_state()
    finally:
        sandbox.close()

    assert state["subreaper"] is True
    assert state["landlock"] == LANDLOCK


def test_a_scratch_root_left_by_a_process_that_is_gone_is_removed_by_the_next() -> None:
    # A Lambda runtime killed at a timeout leaves /tmp behind, and its roots in it.
    gone = _a_pid_no_process_has()
    left = Path(tempfile.gettempdir()) / f"filejobs-jobs-sandbox-{gone}-leftover"
    (left / "job-x").mkdir(parents=True)
    (left / "job-x" / "another-tenants-page.png").write_text("left over")

    fresh = private_root("sandbox")
    try:
        assert not left.exists()
        assert oct(fresh.stat().st_mode & 0o777) == "0o700"
    finally:
        shutil.rmtree(fresh)
        shutil.rmtree(left, ignore_errors=True)


def _a_pid_no_process_has() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid  # reaped: no process has it until the kernel reuses it


def test_a_workers_job_root_left_by_a_process_that_is_gone_is_removed_by_the_next() -> None:
    left = Path(tempfile.gettempdir()) / f"filejobs-jobs-{_a_pid_no_process_has()}"
    (left / "job-cut-short").mkdir(parents=True)
    (left / "job-cut-short" / "upload").write_text("half of another tenant's file")

    with Scratch().for_job("next") as workspace:
        assert workspace.is_dir()

    assert not left.exists()
