"""Bytes to and from S3: uploads through boto3's managed transfer (multipart above a threshold,
parts in parallel, a failed upload aborted), with their bytes counted; downloads through the
presigned URLs the API hands out, which need no AWS credentials at all."""

from __future__ import annotations

import http.client
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from filejobs_cli.errors import CliError
from filejobs_cli.retries import LOST_IN_TRANSIT, MAYBE_LOST, RetryPolicy

# Up to 16 MiB in one PutObject; above, parts of 16 MiB, four at a time (1 GiB: 64 parts).
MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024
PARALLEL_PARTS = 4
REDRAW_SECONDS = 0.2
DOWNLOAD_CHUNK = 1024 * 1024
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(count: float) -> str:
    for unit in _UNITS:
        if count < 1024 or unit == _UNITS[-1]:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


class ByteProgress:
    """The transfer's Callback (called from its threads with each chunk's size): one line
    redrawn in place on a terminal, at most every REDRAW_SECONDS; nothing on anything else."""

    def __init__(
        self,
        label: str,
        total: int,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.stream, self.clock = label, total, stream, clock
        self.sent = 0
        self.drawn_at: float | None = None
        self.lock = threading.Lock()
        self.live = stream.isatty()

    def __call__(self, amount: int) -> None:
        with self.lock:
            self.sent += amount
            now = self.clock()
            if self.live and (self.drawn_at is None or now - self.drawn_at >= REDRAW_SECONDS):
                self._draw()
                self.drawn_at = now

    def line(self) -> str:
        percent = 100 if self.total == 0 else min(100, self.sent * 100 // self.total)
        return f"{self.label}: {human_bytes(self.sent)} of {human_bytes(self.total)} ({percent}%)"

    def finish(self) -> None:
        if self.live:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        self.stream.write(f"\r\x1b[2K{self.line()}")
        self.stream.flush()


def upload_file(
    s3: Any,
    path: Path,
    bucket: str,
    key: str,
    *,
    extra_args: dict[str, Any],
    progress: Callable[[int], None] | None,
) -> str | None:
    """Uploads `path`; the new object's version id (None where the bucket keeps none).

    boto3's managed upload returns nothing, so the version is read off the PutObject or
    CompleteMultipartUpload answer as it passes (one upload at a time per client).
    """
    from boto3.s3.transfer import TransferConfig  # noqa: PLC0415

    seen: dict[str, str | None] = {}

    def remember(parsed: dict[str, Any], **_: Any) -> None:
        seen["version_id"] = parsed.get("VersionId")

    config = TransferConfig(
        multipart_threshold=MULTIPART_THRESHOLD,
        multipart_chunksize=PART_SIZE,
        max_concurrency=PARALLEL_PARTS,
    )
    events = s3.meta.events
    names = [f"after-call.s3.{op}" for op in ("PutObject", "CompleteMultipartUpload")]
    for name in names:
        events.register(name, remember, unique_id=f"filejobs-version:{name}")
    try:
        s3.upload_file(
            str(path), bucket, key, ExtraArgs=extra_args, Config=config, Callback=progress
        )
    finally:
        for name in names:
            events.unregister(name, unique_id=f"filejobs-version:{name}")
    return seen.get("version_id")


def download(url: str, path: Path, retry: RetryPolicy | None = None, timeout: float = 60) -> int:
    """Writes what `url` serves to `path` (whole or not at all); the bytes written."""
    if urlsplit(url).scheme not in {"http", "https"}:
        raise CliError(f"refusing to download from {url[:60]!r}: not an http(s) URL")
    policy = retry or RetryPolicy()
    attempt = 1
    while True:
        try:
            return _download_once(url, path, timeout)
        except urllib.error.HTTPError as error:
            if error.code not in MAYBE_LOST:
                raise CliError(f"{path.name}: the download answered HTTP {error.code}") from None
            failure: BaseException = error
        except LOST_IN_TRANSIT as error:
            failure = error
        except urllib.error.URLError as error:
            raise CliError(f"{path.name}: the download failed ({error.reason})") from None
        wait = policy.wait_before_next(attempt, None)
        if wait is None:
            raise CliError(f"{path.name}: the download failed ({failure})")
        policy.sleep(wait)
        attempt += 1


def _download_once(url: str, path: Path, timeout: float) -> int:
    written = 0
    descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        # http(s) only, checked above: the API's presigned URL.
        with (
            os.fdopen(descriptor, "wb") as sink,
            urllib.request.urlopen(url, timeout=timeout) as answer,  # noqa: S310
        ):
            while chunk := answer.read(DOWNLOAD_CHUNK):
                sink.write(chunk)
                written += len(chunk)
            announced = answer.headers.get("Content-Length")
            if announced is not None and written != int(announced):
                # The connection ended early: what was written is not the object.
                raise http.client.IncompleteRead(b"", int(announced) - written)
        Path(partial).replace(path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return written
