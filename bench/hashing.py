"""Streaming SHA-256 (the deduplication check's core loop) against `sha256sum`, same run.

The loop is processors.dedup.sha256_of, fed 1 MiB chunks (ObjectSource's chunk size) from a
local 1 GiB file, so the figure is the hashing, not the network. Each sample is a fresh process
timed by wall clock (ours pays the interpreter's start-up, sha256sum its own), interleaved with
the baseline's so machine noise hits both alike; medians are compared. Target: ours >= 0.8x.
Peak RSS of each process comes from getrusage(RUSAGE_CHILDREN) in a wrapper process that runs
only it.

    .venv/bin/python bench/hashing.py [--size-mb 1024] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1024 * 1024
MiB = 1024 * 1024

# Runs argv[1:] and prints its peak RSS in KiB (Linux ru_maxrss): only that child is counted.
_PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def file_chunks(path: Path, chunk: int = CHUNK) -> Iterator[bytes]:
    with path.open("rb", buffering=0) as source:
        yield from iter(lambda: source.read(chunk), b"")


def make_file(path: Path, size: int) -> None:
    block = os.urandom(8 * MiB)
    with path.open("wb") as out:
        for _ in range(size // len(block)):
            out.write(block)
        out.write(block[: size % len(block)])


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)  # noqa: S603
    return time.perf_counter() - start, done.stdout


def peak_rss_mb(cmd: list[str]) -> float:
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-c", _PEAK_RSS, *cmd], check=True, capture_output=True, text=True
    )
    return int(out.stdout.split()[-1]) / 1024


def ours(path: Path) -> list[str]:
    return [sys.executable, __file__, "--child", str(path)]


def child(path: Path) -> None:
    from filejobs.processors.dedup import sha256_of  # noqa: PLC0415 (the child's work only)

    digest, _ = sha256_of(file_chunks(path))
    print(digest)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    size = args.size_mb * MiB
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "object.bin"
        make_file(path, size)
        baseline = ["sha256sum", str(path)]
        timed(baseline)  # warm the page cache
        ours_s, base_s = [], []
        for _ in range(args.runs):
            t, out = timed(ours(path))
            ours_s.append(t)
            t, base_out = timed(baseline)
            base_s.append(t)
            assert out.split()[0] == base_out.split()[0], "digests differ"
        ours_rss, base_rss = peak_rss_mb(ours(path)), peak_rss_mb(baseline)
        openssl = ["openssl", "dgst", "-sha256", str(path)]
        openssl_s = [timed(openssl)[0] for _ in range(args.runs)]
    ours_rate = size / MiB / statistics.median(ours_s)
    base_rate = size / MiB / statistics.median(base_s)
    print(f"SHA-256 of {args.size_mb} MiB, median of {args.runs} interleaved runs")
    print(f"  ours (sha256_of, 1 MiB chunks): {ours_rate:8.1f} MiB/s  peak RSS {ours_rss:6.1f} MB")
    print(f"  sha256sum:                      {base_rate:8.1f} MiB/s  peak RSS {base_rss:6.1f} MB")
    print(f"  ratio ours/sha256sum: {ours_rate / base_rate:.2f}x (target >= 0.8x)")
    openssl_rate = size / MiB / statistics.median(openssl_s)
    print(
        f"  (openssl dgst -sha256: {openssl_rate:.1f} MiB/s,"
        f" ours/openssl {ours_rate / openssl_rate:.2f}x)"
    )


if __name__ == "__main__":
    main()
