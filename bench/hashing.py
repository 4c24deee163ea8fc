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
import sys
import tempfile
from pathlib import Path

from common import MiB, file_chunks, interleaved, peak_rss_mb, timed


def make_file(path: Path, size: int) -> None:
    block = os.urandom(8 * MiB)
    with path.open("wb") as out:
        for _ in range(size // len(block)):
            out.write(block)
        out.write(block[: size % len(block)])


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
        samples = interleaved({"ours": ours(path), "baseline": baseline}, args.runs)
        for mine, theirs in zip(samples["ours"], samples["baseline"], strict=True):
            assert mine.stdout.split()[0] == theirs.stdout.split()[0], "digests differ"
        ours_s = [sample.seconds for sample in samples["ours"]]
        base_s = [sample.seconds for sample in samples["baseline"]]
        ours_rss, base_rss = peak_rss_mb(ours(path))[1], peak_rss_mb(baseline)[1]
        openssl = ["openssl", "dgst", "-sha256", str(path)]
        openssl_s = [timed(openssl).seconds for _ in range(args.runs)]
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
