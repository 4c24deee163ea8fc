"""Decoders that try to escape the sandbox, as an exploited parser would.

Each returns what it stole as its result if its attempt works: a job that completes with one of
these is a hole. tests/integration/test_decoder_sandbox.py runs them in the real sandbox.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

import boto3

from filejobs.processors.sandbox.task import Decoded


def _worker_pid() -> int:
    """The worker's pid: the zygote's parent (the decoder's parent is the zygote)."""
    status = Path(f"/proc/{os.getppid()}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid")))


def read_environment_credentials(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({"stolen": os.environ["AWS_SECRET_ACCESS_KEY"]})


def read_worker_environ(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({"stolen": Path(f"/proc/{_worker_pid()}/environ").read_bytes().hex()})


def read_worker_memory(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    with Path(f"/proc/{_worker_pid()}/mem").open("rb") as memory:
        return Decoded({"stolen": memory.read(16).hex()})


def call_aws(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    identity = boto3.client("sts", region_name="us-east-1").get_caller_identity()
    return Decoded({"stolen": identity["Arn"]})


def exhaust_memory(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    hoard = bytearray(8 * 1024**3)
    return Decoded({"bytes": len(hoard)})


def spin(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    while True:
        pass


def open_many_files(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(100_000)]
    return Decoded({"opened": len(opened)})


def write_big_file(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    with tempfile.TemporaryFile() as spill:
        for _ in range(64):
            spill.write(b"\0" * 1024 * 1024)
        return Decoded({"written": spill.tell()})


def answer_too_much(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({}, {"thumb.webp": b"\0" * (8 * 1024 * 1024)})


def write_another_name(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    return Decoded({}, {"../../uploads/other-tenant/file": b"overwritten"})


def sleep(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    time.sleep(600)
    return Decoded({})


def crash(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    os.kill(os.getpid(), signal.SIGSEGV)
    return Decoded({})


def leave_a_process_behind(_source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    return Decoded({"left": child})


def echo(source: BinaryIO, _options: dict[str, Any]) -> Decoded:
    """A well-behaved decoder: the file's bytes, reversed, and what it could see."""
    status = Path("/proc/self/status").read_text().splitlines()
    capabilities = next(line.split()[1] for line in status if line.startswith("CapEff"))
    return Decoded(
        {"environment": sorted(os.environ), "capabilities": capabilities},
        {"thumb.webp": source.read()[::-1]},
    )


def rewrite_attached_rules(_source: BinaryIO, options: dict[str, Any]) -> Decoded:
    """Tries to replace the scan's rules, for every later scan, through its descriptor and by
    reopening it writable."""
    (rules,) = options["attachments"]
    failures = []
    for attempt in (
        lambda: os.write(rules, b"rule pass_everything { condition: false }"),
        lambda: Path(f"/proc/self/fd/{rules}").write_bytes(b""),
        lambda: os.ftruncate(rules, 0),
    ):
        try:
            attempt()
        except OSError as error:
            failures.append(type(error).__name__)
    return Decoded({"refused": failures})
